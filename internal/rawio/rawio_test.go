package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair is two ends of a descriptor pair: what is written to w comes out
// of r, and rfd and wfd are the FDs over them.
type pair struct {
	r, w     io.ReadWriteCloser
	rfd, wfd *FD
	closed   error // what the FD's calls give after the end is closed
	wrapped  func(error) bool
}

func pipePair(t *testing.T) pair {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return pair{r: r, w: w, rfd: File(r), wfd: File(w), closed: os.ErrClosed,
		wrapped: func(err error) bool { var pe *os.PathError; return errors.As(err, &pe) }}
}

func tcpPair(t *testing.T) pair {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return pair{r: s, w: c, rfd: Conn(s), wfd: Conn(c), closed: net.ErrClosed,
		wrapped: func(err error) bool { var oe *net.OpError; return errors.As(err, &oe) }}
}

var pairs = []struct {
	name string
	open func(*testing.T) pair
}{
	{"pipe", pipePair},
	{"tcp", tcpPair},
}

func skipOff(t *testing.T) {
	if !supported {
		t.Skip("raw system calls are made on Linux only")
	}
}

func TestFD_CopiesAll(t *testing.T) {
	skipOff(t)
	for _, tc := range pairs {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.open(t)
			if p.rfd == nil || p.wfd == nil {
				t.Fatal("no FD over a nonblocking descriptor")
			}
			// More than a pipe's or a socket's buffer holds, so that
			// Write waits for room and Read for bytes.
			want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
			done := make(chan error, 1)
			go func() {
				n, err := p.wfd.Write(want)
				if err == nil && n != len(want) {
					err = io.ErrShortWrite
				}
				p.w.Close()
				done <- err
			}()
			got, err := io.ReadAll(p.rfd)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
			}
			if n, err := p.rfd.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Fatalf("Read after the end = %d, %v; want 0, EOF", n, err)
			}
			if n, err := p.rfd.Read(nil); n != 0 || err != nil {
				t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
			}
		})
	}
}

func TestFD_ErrorsAsTheStandardLibrary(t *testing.T) {
	skipOff(t)
	for _, tc := range pairs {
		t.Run(tc.name+"/deadline", func(t *testing.T) {
			p := tc.open(t)
			p.r.(interface{ SetReadDeadline(time.Time) error }).SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := p.rfd.Read(make([]byte, 8))
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("Read past the deadline: %v is not a timeout", err)
			}
		})
		t.Run(tc.name+"/closed while reading", func(t *testing.T) {
			p := tc.open(t)
			errc := make(chan error, 1)
			go func() {
				_, err := p.rfd.Read(make([]byte, 8))
				errc <- err
			}()
			time.Sleep(10 * time.Millisecond) // mostly in the poller's wait by then
			p.r.Close()
			if err := <-errc; !errors.Is(err, p.closed) {
				t.Fatalf("Read of a closed end: %v, want %v", err, p.closed)
			}
			if _, err := p.rfd.Read(make([]byte, 8)); !errors.Is(err, p.closed) {
				t.Fatalf("Read after Close: %v, want %v", err, p.closed)
			}
		})
		t.Run(tc.name+"/peer gone", func(t *testing.T) {
			p := tc.open(t)
			p.r.Close()
			if tc.name == "tcp" {
				time.Sleep(10 * time.Millisecond) // the FIN, then the RST to our write
				p.wfd.Write([]byte("x"))
				time.Sleep(10 * time.Millisecond)
			}
			_, err := p.wfd.Write([]byte("after the peer left"))
			if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("Write to a gone peer: %v, want EPIPE or ECONNRESET", err)
			}
			if !p.wrapped(err) {
				t.Fatalf("Write to a gone peer: %T is not wrapped as the standard library wraps it", err)
			}
		})
	}
}

func TestFD_TryWrite(t *testing.T) {
	skipOff(t)
	p := pipePair(t)
	chunk := make([]byte, 4096)
	total := 0
	for {
		n, err := p.wfd.TryWrite(chunk)
		if err != nil {
			t.Fatalf("TryWrite: %v", err)
		}
		if n == 0 {
			break
		}
		if total += n; total > 64<<20 {
			t.Fatal("TryWrite never found the pipe full")
		}
	}
	got, err := io.ReadFull(p.rfd, make([]byte, total))
	if err != nil || got != total {
		t.Fatalf("read back %d of %d bytes: %v", got, total, err)
	}
}

func TestOpen_TakesOnlyNonblocking(t *testing.T) {
	skipOff(t)
	f, err := os.Open(os.DevNull) // not pollable: left blocking
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if File(f) != nil {
		t.Fatal("File took a blocking descriptor")
	}
	c1, c2 := net.Pipe() // no descriptor at all
	defer c1.Close()
	defer c2.Close()
	if Conn(c1) != nil {
		t.Fatal("Conn took a net.Pipe")
	}
}

func TestFD_AllocatesNothing(t *testing.T) {
	skipOff(t)
	if raceEnabled {
		t.Skip("the race detector's bookkeeping allocates")
	}
	p, c := pipePair(t), tcpPair(t)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
	buf := make([]byte, 256)
	allocs := testing.AllocsPerRun(100, func() {
		p.wfd.Write(msg)
		p.wfd.TryWrite(msg)
		p.rfd.Read(buf)
		c.rfd.Idle()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per write, read and look, want 0", allocs)
	}
}

func BenchmarkFD_PipeRoundTrip(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}` + "\n")
	buf := make([]byte, 4096)
	b.Run("os.File", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Write(msg)
			r.Read(buf)
		}
	})
	rf, wf := File(r), File(w)
	if rf == nil {
		b.Skip("no raw system calls here")
	}
	b.Run("rawio", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			wf.Write(msg)
			rf.Read(buf)
		}
	})
}

func TestFD_Writev(t *testing.T) {
	skipOff(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: many writes, cut anywhere
	cases := []struct {
		name string
		a, b []byte
	}{
		{"both small", []byte("HTTP/1.1 200 OK\r\n\r\n"), []byte("body")},
		{"large body", []byte("HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\n\r\n"), big},
		{"large head", big, []byte("tail")},
		{"empty head", nil, []byte("only the body")},
		{"empty body", []byte("only the head"), nil},
		{"both empty", nil, nil},
	}
	for _, tc := range pairs {
		for _, c := range cases {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				p := tc.open(t)
				// Capacity beyond the length: a write must never spill into it.
				a := append(make([]byte, 0, len(c.a)+64), c.a...)
				done := make(chan error, 1)
				go func() {
					n, err := p.wfd.Writev(a, c.b)
					if err == nil && n != len(c.a)+len(c.b) {
						err = io.ErrShortWrite
					}
					p.w.Close()
					done <- err
				}()
				got, err := io.ReadAll(p.rfd)
				if err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("Writev: %v", err)
				}
				if want := append(bytes.Clone(c.a), c.b...); !bytes.Equal(got, want) {
					t.Fatalf("read %d bytes, want the %d written, in order", len(got), len(want))
				}
			})
		}
	}
}

func TestFD_Idle(t *testing.T) {
	skipOff(t)
	tests := []struct {
		name string
		// do acts on the peer's end w (and the FD's own end r) before
		// the look.
		do   func(t *testing.T, w, r net.Conn)
		want bool
		kept string // what the FD reads after the look, which took nothing
	}{
		{"nothing sent", func(*testing.T, net.Conn, net.Conn) {}, true, ""},
		{"a byte waits", func(t *testing.T, w, _ net.Conn) { send(t, w, "x") }, false, "x"},
		{"the peer closed", func(t *testing.T, w, _ net.Conn) { w.Close() }, false, ""},
		{"sent and read", func(t *testing.T, w, r net.Conn) {
			send(t, w, "abc")
			if _, err := io.ReadFull(r, make([]byte, 3)); err != nil {
				t.Fatal(err)
			}
		}, true, ""},
		{"closed here", func(t *testing.T, _, r net.Conn) { r.Close() }, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tcpPair(t)
			r, w := p.r.(net.Conn), p.w.(net.Conn)
			tt.do(t, w, r)
			// What the peer did takes a moment to arrive; the look
			// that matters is the one after it has.
			time.Sleep(20 * time.Millisecond)
			if got := p.rfd.Idle(); got != tt.want {
				t.Fatalf("Idle() = %v, want %v", got, tt.want)
			}
			if tt.kept != "" {
				buf := make([]byte, 16)
				if n, err := p.rfd.Read(buf); string(buf[:n]) != tt.kept {
					t.Fatalf("after Idle, Read = %q, %v; want %q", buf[:n], err, tt.kept)
				}
			}
		})
	}
	t.Run("pipe", func(t *testing.T) {
		if pipePair(t).rfd.Idle() {
			t.Fatal("Idle() = true for a pipe, which cannot be peeked")
		}
	})
}

func send(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
}
