package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// readResult is one readLine outcome.
type readResult struct {
	Line    string
	TooLong bool
}

// readAll reads lines until an error other than errLineTooLong and returns
// them with that error.
func readAll(t testing.TB, lr *lineReader) ([]readResult, error) {
	t.Helper()
	var got []readResult
	for {
		line, err := lr.readLine()
		if err != nil && !errors.Is(err, errLineTooLong) {
			return got, err
		}
		if len(line) > lr.max {
			t.Fatalf("readLine returned %d bytes, cap is %d", len(line), lr.max)
		}
		got = append(got, readResult{Line: string(line), TooLong: err != nil})
	}
}

// chunkReader returns at most n bytes per Read, to cross buffer edges.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

func TestLineReader(t *testing.T) {
	many := strings.Repeat("{}\n", 10000)
	manyWant := make([]readResult, 10000)
	for i := range manyWant {
		manyWant[i] = readResult{Line: "{}"}
	}
	tests := []struct {
		name  string
		in    string
		max   int64
		chunk int // bytes per Read; 0 reads all at once
		want  []readResult
	}{
		{name: "empty", in: "", max: 8},
		{name: "one line", in: "abc\n", max: 8, want: []readResult{{Line: "abc"}}},
		{name: "last line without newline", in: "a\nbc", max: 8, want: []readResult{{Line: "a"}, {Line: "bc"}}},
		{name: "blank lines are lines", in: "\n\na\n", max: 8, want: []readResult{{}, {}, {Line: "a"}}},
		{name: "CRLF", in: "a\r\nbb\r\n", max: 8, want: []readResult{{Line: "a"}, {Line: "bb"}}},
		{name: "CR only at the end", in: "a\rb\r", max: 8, want: []readResult{{Line: "a\rb"}}},
		{name: "exact cap", in: "12345678\n", max: 8, want: []readResult{{Line: "12345678"}}},
		{name: "exact cap with CRLF", in: "12345678\r\nx\n", max: 8, want: []readResult{{Line: "12345678"}, {Line: "x"}}},
		{name: "exact cap one byte at a time", in: "12345678\r\nx\n", max: 8, chunk: 1, want: []readResult{{Line: "12345678"}, {Line: "x"}}},
		{name: "exact cap at EOF", in: "12345678", max: 8, want: []readResult{{Line: "12345678"}}},
		{name: "cap plus one", in: "123456789\nok\n", max: 8, want: []readResult{{Line: "12345678", TooLong: true}, {Line: "ok"}}},
		{name: "cap plus one at EOF", in: "123456789", max: 8, want: []readResult{{Line: "12345678", TooLong: true}}},
		{name: "cap plus CR plus byte", in: "12345678\rx\nok\n", max: 8, chunk: 3, want: []readResult{{Line: "12345678", TooLong: true}, {Line: "ok"}}},
		{name: "far over the cap", in: strings.Repeat("x", 100000) + "\nok\n", max: 10, chunk: 7, want: []readResult{{Line: strings.Repeat("x", 10), TooLong: true}, {Line: "ok"}}},
		{name: "over the cap then EOF while skipping", in: strings.Repeat("x", 100), max: 10, chunk: 3, want: []readResult{{Line: strings.Repeat("x", 10), TooLong: true}}},
		{name: "zero cap", in: "\na\n\n", max: 0, want: []readResult{{}, {TooLong: true}, {}}},
		{name: "many small lines", in: many, max: 64, chunk: 4093, want: manyWant},
		{name: "a line larger than the initial buffer", in: strings.Repeat("y", 3*lineReaderInitialSize) + "\nz\n", max: 1 << 20, want: []readResult{{Line: strings.Repeat("y", 3*lineReaderInitialSize)}, {Line: "z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.in)
			if tt.chunk > 0 {
				r = &chunkReader{r: r, n: tt.chunk}
			}
			lr := newLineReader(r, tt.max)
			got, err := readAll(t, lr)
			if !errors.Is(err, io.EOF) {
				t.Errorf("final error = %v, want io.EOF", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if c := cap(lr.buf); int64(c) > tt.max+2 {
				t.Errorf("buffer grew to %d bytes, cap is %d", c, tt.max)
			}
		})
	}
}

func TestLineReader_ReaderError(t *testing.T) {
	boom := errors.New("boom")
	lr := newLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), 8)
	got, err := readAll(t, lr)
	if !errors.Is(err, boom) {
		t.Errorf("final error = %v, want %v", err, boom)
	}
	want := []readResult{{Line: "a"}, {Line: "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// TestLineReader_BoundedBuffer checks that a line far over the cap never
// makes the reader hold more than the cap.
func TestLineReader_BoundedBuffer(t *testing.T) {
	const max = 1 << 16
	// 16 MiB of one line, generated rather than held.
	r := io.MultiReader(io.LimitReader(repeatReader('x'), 16<<20), strings.NewReader("\n{}\n"))
	lr := newLineReader(r, max)
	got, err := readAll(t, lr)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("final error = %v, want io.EOF", err)
	}
	if len(got) != 2 || !got[0].TooLong || got[1].Line != "{}" {
		t.Errorf("got %d lines, want a cut line then {}", len(got))
	}
	if c := cap(lr.buf); c > max+2 {
		t.Errorf("buffer grew to %d bytes, cap is %d", c, max)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// refLines is the obvious, unbounded implementation readLine must agree with.
func refLines(data []byte, max int) []readResult {
	var out []readResult
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > max {
			out = append(out, readResult{Line: string(line[:max]), TooLong: true})
		} else {
			out = append(out, readResult{Line: string(line)})
		}
	}
	return out
}

// FuzzLineReader checks readLine against refLines for any input, cap and
// read size: every line the input holds comes out, in order, whole when it
// fits and cut to its first max bytes (flagged) when it does not; nothing
// returned is over the cap and the buffer never exceeds max+2.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\r\nccc"), uint16(2), uint8(1))
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\n\n[1,2]\r\n"), uint16(16), uint8(5))
	f.Add([]byte("12345678\r\n123456789\n"), uint16(8), uint8(3))
	f.Add([]byte("\r\r\n\n\r"), uint16(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, max uint16, chunk uint8) {
		lr := fuzzLineReader(data, max, chunk)
		got, err := readAll(t, lr)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("final error = %v, want io.EOF", err)
		}
		if diff := cmp.Diff(refLines(data, int(max)), got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if c := cap(lr.buf); c > int(max)+2 {
			t.Errorf("buffer grew to %d bytes, cap is %d", c, max)
		}
	})
}

// fuzzLineReader is a lineReader of data with cap max, whose reads return
// at most chunk bytes (0: as many as asked).
func fuzzLineReader(data []byte, max uint16, chunk uint8) *lineReader {
	var r io.Reader = bytes.NewReader(data)
	if chunk > 0 {
		r = &chunkReader{r: r, n: int(chunk)}
	}
	return newLineReader(r, int64(max))
}

// TestLineReader_KeepsModestBuffers checks the buffer policy: a buffer
// grown for a 64 KiB line is kept for the next one, and one grown past
// lineReaderKeptSize goes back to the initial size once the line is read.
func TestLineReader_KeepsModestBuffers(t *testing.T) {
	mid := strings.Repeat("m", 64<<10)
	huge := strings.Repeat("h", lineReaderKeptSize+1)
	lr := newLineReader(strings.NewReader(mid+"\n"+mid+"\n"+huge+"\nsmall\nlast\n"), 1<<20)
	for i, want := range []struct {
		line     string
		bufMost  int // the buffer's size after the line, at most
		bufLeast int
	}{
		{mid, 2 * len(mid), len(mid)},
		{mid, 2 * len(mid), len(mid)},
		{huge, 1<<20 + 2, len(huge)},
		{"small", lineReaderInitialSize, 1}, // shrunk before reading it
		{"last", lineReaderInitialSize, 1},
	} {
		before := len(lr.buf)
		line, err := lr.readLine()
		if err != nil || string(line) != want.line {
			t.Fatalf("line %d: %d bytes, %v", i, len(line), err)
		}
		if n := len(lr.buf); n > want.bufMost || n < want.bufLeast {
			t.Errorf("line %d: buffer of %d bytes (was %d), want %d to %d", i, n, before, want.bufLeast, want.bufMost)
		}
		if i == 1 && len(lr.buf) != before {
			t.Errorf("the buffer of the first 64 KiB line was not kept: %d, then %d", before, len(lr.buf))
		}
	}
}
