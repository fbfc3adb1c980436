package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawio"
)

// newTransport returns a Transport over a plain fallback, closed with t.
func newTransport(t *testing.T) *Transport {
	t.Helper()
	tr := &Transport{Fallback: &http.Transport{}}
	if netCalls {
		tr.DialContext = dialWithoutDescriptor
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// netCalls makes newTransport's connections ones without a descriptor,
// read and written through package net's calls (see ioModes).
var netCalls bool

// dialWithoutDescriptor dials as a Transport does by default and hides
// the connection's descriptor, as a DialContext's own connection type may.
func dialWithoutDescriptor(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := defaultDialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{nc}, nil
}

// countedServer is an httptest server that counts the connections it
// accepted and reports the ones it saw close.
type countedServer struct {
	*httptest.Server
	accepted atomic.Int32
	closed   chan struct{} // one send per closed connection
}

func newCountedServer(t *testing.T, h http.HandlerFunc) *countedServer {
	t.Helper()
	s := &countedServer{closed: make(chan struct{}, 64)}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.accepted.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed <- struct{}{}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// okAt answers "ok" to a request for path, and h every other.
func okAt(path string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			io.WriteString(w, "ok")
			return
		}
		h(w, r)
	}
}

func post(t *testing.T, tr http.RoundTripper, ctx context.Context, u, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test", "yes")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	resp.Body.Close()
	return string(b)
}

// ioModes runs f with each of the ways a connection is read and written:
// raw (one that has a descriptor, as dialed by default) and through
// package net's calls (one a DialContext made without one).
func ioModes(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, m := range []struct {
		name string
		net  bool
	}{{"raw", false}, {"net", true}} {
		t.Run(m.name, func(t *testing.T) {
			netCalls = m.net
			defer func() { netCalls = false }()
			f(t)
		})
	}
}

func TestRoundTrip_ReusesConnection(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("X-Test") != "yes" || r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) || r.Host == "" {
				http.Error(w, fmt.Sprintf("bad request: %v %q", r.Header, b), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"echo":%s}`, b)
		})
		tr := newTransport(t)
		for i := range 3 {
			resp := post(t, tr, context.Background(), srv.URL+"/mcp?x=1", fmt.Sprintf(`{"n":%d}`, i))
			if got, want := readAll(t, resp), fmt.Sprintf(`{"echo":{"n":%d}}`, i); resp.StatusCode != 200 || got != want {
				t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
			}
		}
		if n := srv.accepted.Load(); n != 1 {
			t.Errorf("server accepted %d connections for 3 requests in a row, want 1", n)
		}
	})
}

func TestRoundTrip_ChunkedStreamIsReadAsItComes(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		next := make(chan struct{})
		srv := newCountedServer(t, okAt("/again", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				if i < 2 {
					<-next
				}
			}
		}))
		tr := newTransport(t)
		resp := post(t, tr, context.Background(), srv.URL, `{}`)
		if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("TransferEncoding = %v, want chunked", resp.TransferEncoding)
		}
		br := bufio.NewReader(resp.Body)
		for i := range 3 {
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("data: %d\n", i) {
				t.Fatalf("event %d: %q, %v", i, line, err)
			}
			br.ReadString('\n') // the blank line
			if i < 2 {
				next <- struct{}{} // the server writes the next only now
			}
		}
		if rest := readAll(t, &http.Response{Body: io.NopCloser(br)}); rest != "" {
			t.Fatalf("after the events: %q", rest)
		}
		resp.Body.Close()
		if got := readAll(t, post(t, tr, context.Background(), srv.URL+"/again", `{}`)); got != "ok" {
			t.Fatalf("next request: %q", got)
		}
		if n := srv.accepted.Load(); n != 1 {
			t.Errorf("connections after a stream read to its end: %d, want 1 (reused)", n)
		}
	})
}

// startStream answers with an event stream and sends its first event,
// data, at once; the handler decides when the stream ends.
func startStream(w http.ResponseWriter, data string) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "data: "+data+"\n\n")
	w.(http.Flusher).Flush()
}

func TestRoundTrip_ClosingAnUnreadStreamClosesTheConnection(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		ended := make(chan struct{})
		srv := newCountedServer(t, okAt("/plain", func(w http.ResponseWriter, r *http.Request) {
			startStream(w, "first")
			<-r.Context().Done() // endless, until the client leaves
			close(ended)
		}))
		tr := newTransport(t)
		resp := post(t, tr, context.Background(), srv.URL, `{}`)
		buf := make([]byte, 64)
		if n, err := resp.Body.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "data: first") {
			t.Fatalf("first read: %q, %v", buf[:n], err)
		}
		resp.Body.Close() // must not wait for the endless rest
		<-ended
		if _, err := resp.Body.Read(buf); err == nil {
			t.Error("Read after Close succeeded")
		}
		if got := readAll(t, post(t, tr, context.Background(), srv.URL+"/plain", `{}`)); got != "ok" {
			t.Fatalf("next request: %q", got)
		}
		if n := srv.accepted.Load(); n != 2 {
			t.Errorf("connections: %d, want 2 (the closed stream's is not reused)", n)
		}
	})
}

func TestRoundTrip_CloseWhileAnotherGoroutineReads(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	tr := newTransport(t)
	resp := post(t, tr, context.Background(), srv.URL, `{}`)
	readErr := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 16))
		readErr <- err
	}()
	resp.Body.Close()
	if err := <-readErr; err == nil {
		t.Error("a Read blocked when the body was closed returned no error")
	}
}

func TestRoundTrip_Cancel(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		srv, _ := slowServer(t)
		tr := newTransport(t)

		t.Run("waiting for the answer", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/slow", strings.NewReader("{}"))
			errc := roundTripAsync(tr, req)
			cancel()
			if err := waitErr(t, errc); !errors.Is(err, context.Canceled) {
				t.Fatalf("RoundTrip after cancel: %v, want context.Canceled", err)
			}
		})
		t.Run("reading the body", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			resp := post(t, tr, ctx, srv.URL+"/stream", `{}`)
			defer resp.Body.Close()
			errc := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(resp.Body)
				errc <- err
			}()
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("Read after cancel: %v, want context.Canceled", err)
			}
		})
		t.Run("the next request works", func(t *testing.T) {
			if got := readAll(t, post(t, tr, context.Background(), srv.URL+"/plain", `{}`)); got != "ok" {
				t.Fatalf("next request: %q", got)
			}
		})
	})
}

// rawServer serves each connection with serve, on 127.0.0.1.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/mcp" }

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(req.Body)
	return req, b, err
}

// TestRoundTrip_ServerClosedTheIdleConnection: the pool's look at an idle
// connection finds it closed, and the request goes on a new one. The look
// needs the connection's descriptor: without one (a DialContext's own
// connection type) a connection is taken to be alive.
func TestRoundTrip_ServerClosedTheIdleConnection(t *testing.T) {
	closed := make(chan struct{}, 3)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and closes the connection, without saying so, as a server's
		// idle timeout does
		c.Close()
		closed <- struct{}{}
	})
	tr := newTransport(t)
	for i := range 3 {
		if got := readAll(t, post(t, tr, context.Background(), srv.url(), `{}`)); got != "ok" {
			t.Fatalf("request %d: %q", i, got)
		}
		// The close must come while the connection is idle, as an idle
		// timeout's does. Were the next POST written first, the server
		// would close under a request in flight, which a POST cannot
		// survive (it is not retried: it may have been acted on).
		<-closed
	}
	if n := srv.accepted.Load(); n != 3 {
		t.Errorf("connections: %d, want 3", n)
	}
}

// TestRoundTrip_ServerClosedAReusedIdleConnection: a connection that was
// taken from the pool before (its first look found it alive) and is
// closed while idle is found closed by the next look too.
func TestRoundTrip_ServerClosedAReusedIdleConnection(t *testing.T) {
	closed := make(chan struct{}, 2)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for range 2 {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		c.Close() // two answers, then an idle timeout
		closed <- struct{}{}
	})
	tr := newTransport(t)
	for i := range 4 {
		if got := readAll(t, post(t, tr, context.Background(), srv.url(), `{}`)); got != "ok" {
			t.Fatalf("request %d: %q", i, got)
		}
		if i%2 == 1 {
			<-closed
		}
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("connections: %d, want 2", n)
	}
}

func TestRoundTrip_ConnectionClose(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	tr := newTransport(t)
	for range 2 {
		readAll(t, post(t, tr, context.Background(), srv.URL, `{}`))
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("connections: %d, want 2 (Connection: close is not reused)", n)
	}
}

func TestRoundTrip_RawAnswers(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		tests := []struct {
			name    string
			answer  string
			max     int
			want    string // body, when no error
			wantErr string
		}{
			{name: "informational first", answer: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", want: "ok"},
			{name: "close-delimited body", answer: "HTTP/1.1 200 OK\r\n\r\nuntil the end", want: "until the end"},
			{name: "HTTP/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", want: "ok"},
			{name: "header too large", answer: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n", max: 1000, wantErr: "larger than 1000 bytes"},
			{name: "no answer", answer: "", wantErr: "closed the connection before answering"},
			{name: "not HTTP", answer: "SSH-2.0-OpenSSH\r\n", wantErr: "malformed HTTP"},
			{name: "switching protocols", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", wantErr: "switched protocols"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
					if _, _, err := readRequest(br); err == nil {
						io.WriteString(c, tt.answer)
					}
				})
				tr := newTransport(t)
				tr.MaxHeaderBytes = tt.max
				req, _ := http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
				resp, err := tr.RoundTrip(req)
				if tt.wantErr != "" {
					if err == nil {
						resp.Body.Close()
						t.Fatalf("no error, want %q", tt.wantErr)
					}
					if !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("error %q, want it to say %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, resp); got != tt.want {
					t.Fatalf("body %q, want %q", got, tt.want)
				}
			})
		}
	})
}

func TestRoundTrip_WritesTheRequest(t *testing.T) {
	got := make(chan string, 1)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		var head bytes.Buffer
		for {
			line, err := br.ReadString('\n')
			head.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		body := make([]byte, 7)
		io.ReadFull(br, body)
		got <- head.String() + string(body)
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	})
	tr := newTransport(t)
	req, _ := http.NewRequest(http.MethodPost, srv.url()+"?k=v", strings.NewReader(`{"a":1}`))
	req.Header["Mcp-Session-Id"] = []string{" abc "}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != http.NoBody {
		t.Errorf("204's body is %T, want http.NoBody", resp.Body)
	}
	resp.Body.Close()
	wire := <-got
	for _, want := range []string{
		"POST /mcp?k=v HTTP/1.1\r\nHost: " + srv.ln.Addr().String() + "\r\n",
		"Content-Length: 7\r\n",
		"Mcp-Session-Id: abc\r\n",
		"User-Agent: Go-http-client/1.1\r\n",
		"\r\n\r\n{\"a\":1}",
	} {
		if !strings.Contains(wire, want) {
			t.Errorf("request on the wire lacks %q:\n%s", want, wire)
		}
	}
}

func TestRoundTrip_BadRequests(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tests := []struct {
		name    string
		mod     func(*http.Request)
		wantErr string
		notIn   string
	}{
		{name: "value with a newline", mod: func(r *http.Request) { r.Header["Authorization"] = []string{"Bearer s3cr3t\r\nX-Evil: 1"} }, wantErr: `invalid header field value for "Authorization"`, notIn: "s3cr3t"},
		{name: "name with a space", mod: func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} }, wantErr: `invalid header field name "Bad Name"`},
		{name: "body shorter than its length", mod: func(r *http.Request) { r.ContentLength = 10 }, wantErr: "request body has 2 bytes, its ContentLength says 10"},
		{name: "host with a space", mod: func(r *http.Request) { r.Host = "a b" }, wantErr: `invalid host "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTransport(t)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			tt.mod(req)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want it to say %q", err, tt.wantErr)
			}
			if tt.notIn != "" && strings.Contains(err.Error(), tt.notIn) {
				t.Fatalf("error %q quotes the header's value", err)
			}
		})
	}
}

func TestRoundTrip_Fallback(t *testing.T) {
	plain := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "plain")
	})
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	t.Cleanup(tlsSrv.Close)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "proxy for "+r.URL.Host) // absolute-form: a proxy's request
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	proxiedHost := "proxied.invalid:8080"

	tests := []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{name: "https", want: "tls", req: func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, tlsSrv.URL, nil)
			return r
		}},
		{name: "proxied", want: "proxy for " + proxiedHost, req: func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://"+proxiedHost+"/mcp", strings.NewReader("{}"))
			return r
		}},
		{name: "unknown length", want: "plain", req: func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, plain.URL, io.MultiReader(strings.NewReader("{}")))
			return r
		}},
		{name: "expect continue", want: "plain", req: func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, plain.URL, strings.NewReader("{}"))
			r.Header.Set("Expect", "100-continue")
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dials atomic.Int32
			fb := tlsSrv.Client().Transport.(*http.Transport).Clone()
			fb.Proxy = func(r *http.Request) (*url.URL, error) {
				if r.URL.Host == proxiedHost {
					return proxyURL, nil
				}
				return nil, nil
			}
			var d net.Dialer
			fb.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			}
			tr := &Transport{Fallback: fb, DialContext: func(context.Context, string, string) (net.Conn, error) {
				return nil, errors.New("the lean path dialed")
			}}
			t.Cleanup(tr.CloseIdleConnections)
			resp, err := tr.RoundTrip(tt.req())
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, resp); got != tt.want {
				t.Fatalf("body %q, want %q", got, tt.want)
			}
			if dials.Load() != 1 {
				t.Errorf("fallback dialed %d times, want 1", dials.Load())
			}
		})
	}
}

func TestRoundTrip_RedirectThroughClient(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
			return
		}
		fmt.Fprintf(w, "%s got %s", r.URL.Path, b)
	})
	c := &http.Client{Transport: newTransport(t)}
	resp, err := c.Post(srv.URL+"/old", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, resp), `/new got {"x":1}`; got != want {
		t.Fatalf("after a 307: %q, want %q", got, want)
	}
}

// TestRoundTrip_UserInformationThroughClient: the user information of a
// server URL becomes Basic authentication in http.Client, before the
// transport, and reaches the server through the lean path.
func TestRoundTrip_UserInformationThroughClient(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		io.WriteString(w, user+":"+pass)
	})
	tr := newTransport(t)
	tr.Fallback.DialContext = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("the fallback dialed")
	}
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", "s3cret")
	resp, err := (&http.Client{Transport: tr}).Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "alice:s3cret" {
		t.Fatalf("server saw Basic %q, want alice:s3cret", got)
	}
}

func TestIdleConnections_Expire(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newTransport(t)
	tr.IdleTimeout = 20 * time.Millisecond
	readAll(t, post(t, tr, context.Background(), srv.URL, `{}`))
	<-srv.closed // the sweep closed the idle connection
	tr.mu.Lock()
	n := len(tr.idle)
	tr.mu.Unlock()
	if n != 0 {
		t.Errorf("%d hosts still have idle connections after they expired", n)
	}
}

func TestCloseIdleConnections(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newTransport(t)
	readAll(t, post(t, tr, context.Background(), srv.URL, `{}`))
	tr.CloseIdleConnections()
	<-srv.closed
	readAll(t, post(t, tr, context.Background(), srv.URL, `{}`))
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("connections: %d, want 2", n)
	}
}

func TestIdleConnections_Bounded(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(3)
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		started.Done()
		<-release
		io.WriteString(w, "ok")
	})
	tr := newTransport(t)
	tr.MaxIdlePerHost = 1
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}()
	}
	started.Wait() // three requests at once: three connections
	close(release)
	wg.Wait()
	<-srv.closed
	<-srv.closed // two of three closed, one kept
	addr := srv.Listener.Addr().String()
	if n := tr.IdleConns(addr); n != 1 {
		t.Fatalf("idle connections: %d, want 1 (MaxIdlePerHost)", n)
	}
	tr.mu.Lock()
	idle := tr.idle[addr]
	tr.mu.Unlock()
	if idle[0].br != nil {
		t.Error("an idle connection holds its read buffer")
	}
}

// FuzzRoundTrip_Response feeds a server's answer to RoundTrip over an
// in-memory connection: whatever it is, RoundTrip and reading the body
// end, without a panic.
func FuzzRoundTrip_Response(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\nrest",
		"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		tr := &Transport{Fallback: &http.Transport{}, MaxHeaderBytes: 4096}
		tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				br := bufio.NewReader(server)
				if _, _, err := readRequest(br); err != nil {
					return
				}
				server.Write(answer)
			}()
			return client, nil
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, "http://fuzz.invalid/mcp", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
}

// TestRoundTrip_StaleIdleConnection: the server closed the idle connection
// after the pool's check. A request that may be repeated (GET, no body)
// goes again on a new connection; a POST gets the error, as from
// net/http, since the server may have had it.
func TestRoundTrip_StaleIdleConnection(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		for _, tt := range []struct {
			method    string
			wantErr   bool
			wantDials int32
		}{
			{method: http.MethodGet, wantDials: 2},
			{method: http.MethodPost, wantErr: true, wantDials: 1},
		} {
			t.Run(tt.method, func(t *testing.T) {
				var dials atomic.Int32
				var wg sync.WaitGroup
				t.Cleanup(wg.Wait)
				tr := newTransport(t)
				// In-memory connections: the pool cannot peek at them, so
				// the closed one is taken as alive.
				tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
					dials.Add(1)
					client, server := net.Pipe()
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer server.Close()
						if _, _, err := readRequest(bufio.NewReader(server)); err == nil {
							io.WriteString(server, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
						}
						// one answer, then the connection is closed
					}()
					return client, nil
				}
				first, _ := http.NewRequest(http.MethodGet, "http://stale.invalid/mcp", nil)
				resp, err := tr.RoundTrip(first)
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, resp) // back to the pool, where the server closes it
				var body io.Reader
				if tt.method == http.MethodPost {
					body = strings.NewReader("{}")
				}
				req, _ := http.NewRequest(tt.method, "http://stale.invalid/mcp", body)
				resp, err = tr.RoundTrip(req)
				switch {
				case tt.wantErr && err == nil:
					resp.Body.Close()
					t.Fatal("no error for a POST on a closed connection")
				case !tt.wantErr && err != nil:
					t.Fatalf("GET on a closed idle connection: %v, want it sent again", err)
				case !tt.wantErr:
					if got := readAll(t, resp); got != "ok" {
						t.Fatalf("body %q", got)
					}
				}
				if n := dials.Load(); n != tt.wantDials {
					t.Errorf("connections dialed: %d, want %d", n, tt.wantDials)
				}
			})
		}
	})
}

func TestBody_ReadAfterEnd(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newTransport(t)
	resp := post(t, tr, context.Background(), srv.URL, `{}`)
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("body %q", got)
	}
	for range 2 {
		if n, err := resp.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Fatalf("Read after the end = %d, %v; want 0, io.EOF", n, err)
		}
	}
}

func TestBody_Ended(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newTransport(t)
	for _, end := range []string{"read", "close"} {
		t.Run(end, func(t *testing.T) {
			resp := post(t, tr, context.Background(), srv.URL, `{}`)
			e, ok := resp.Body.(interface{ Ended() bool })
			if !ok {
				t.Fatalf("the body (%T) has no Ended", resp.Body)
			}
			if e.Ended() {
				t.Fatal("Ended before a read")
			}
			if end == "read" {
				io.ReadAll(resp.Body)
			} else {
				resp.Body.Close()
			}
			if !e.Ended() {
				t.Errorf("not Ended after %s", end)
			}
			resp.Body.Close()
		})
	}
}

// TestRoundTrip_RawCalls checks which way exchanges read and write their
// connections: raw whenever the connection has a descriptor, alone or
// beside another exchange in progress (see newConn), and through package
// net's calls on a connection that has none.
func TestRoundTrip_RawCalls(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	})
	addr := srv.Listener.Addr().String()
	// exchange posts to path and reports whether the exchange was raw,
	// from the connection it left in the pool (the last one put back).
	exchange := func(tr *Transport, path string) (raw bool, err error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return false, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			return false, fmt.Errorf("answer %q, %v", b, err)
		}
		return lastRaw(tr, addr)
	}

	t.Run("alone", func(t *testing.T) {
		if raw, err := exchange(newTransport(t), "/a"); err != nil || !raw {
			t.Fatalf("raw = %v, %v; want raw", raw, err)
		}
	})
	t.Run("beside another exchange", func(t *testing.T) {
		tr := newTransport(t)
		before := srv.accepted.Load()
		var heldRaw bool
		var heldErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			heldRaw, heldErr = exchange(tr, "/hold")
		}()
		<-entered // the held exchange waits for its answer's header
		raw, err := exchange(tr, "/b")
		close(release)
		<-done
		if err != nil || !raw {
			t.Errorf("raw = %v, %v; want raw", raw, err)
		}
		if heldErr != nil || !heldRaw {
			t.Errorf("the held exchange: raw = %v, %v; want raw", heldRaw, heldErr)
		}
		if n := srv.accepted.Load() - before; n != 2 {
			t.Errorf("%d connections, want 2 (one per exchange in progress)", n)
		}
	})
	t.Run("a connection without a descriptor", func(t *testing.T) {
		tr := newTransport(t)
		tr.DialContext = dialWithoutDescriptor
		if raw, err := exchange(tr, "/c"); err != nil || raw {
			t.Fatalf("raw = %v, %v; want package net's calls", raw, err)
		}
	})
}

// lastRaw reports whether the connection to addr last put back in tr's
// pool is read and written raw (or, having no descriptor, through its own
// methods).
func lastRaw(tr *Transport, addr string) (bool, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	cs := tr.idle[addr]
	if len(cs) == 0 {
		return false, errors.New("no connection went back to the pool")
	}
	c := cs[len(cs)-1]
	_, rawW := c.w.(*rawio.FD)
	_, rawR := c.lr.r.(*rawio.FD)
	if rawW != rawR || rawW != (c.fd != nil) {
		return false, fmt.Errorf("reads raw %v, writes raw %v, descriptor %v: want all or none", rawR, rawW, c.fd != nil)
	}
	return rawW, nil
}

// TestBody_Detach: a body detached from its request's context is read to
// its end after that context ended, and its connection carries the next
// request; one detached too late (the context ended first) is cut, and
// its connection is not reused.
func TestBody_Detach(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cancelFirst bool // the context ends before Detach
		wantOK      bool // what Detach reports
		wantConns   int32
	}{
		{name: "before the context ends", wantOK: true, wantConns: 1},
		{name: "after the context ended", cancelFirst: true, wantConns: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ioModes(t, func(t *testing.T) {
				end := make(chan struct{})
				srv := newCountedServer(t, okAt("/again", func(w http.ResponseWriter, r *http.Request) {
					startStream(w, "answer")
					select {
					case <-end:
					case <-r.Context().Done():
					}
				}))
				tr := newTransport(t)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp := post(t, tr, ctx, srv.URL+"/mcp", `{}`)
				buf := make([]byte, len("data: answer\n\n"))
				if _, err := io.ReadFull(resp.Body, buf); err != nil {
					t.Fatalf("reading the event: %v", err)
				}
				if tc.cancelFirst {
					cancel()
				}
				if ok := resp.Body.(interface{ Detach() bool }).Detach(); ok != tc.wantOK {
					t.Errorf("Detach() = %v, want %v", ok, tc.wantOK)
				}
				cancel()
				close(end)
				// The rest (the stream's last chunk) is read after the
				// context ended; cut, the read fails instead.
				_, err := io.Copy(io.Discard, resp.Body)
				if tc.wantOK && err != nil {
					t.Errorf("reading the rest of a detached body: %v", err)
				}
				resp.Body.Close()
				if got := readAll(t, post(t, tr, context.Background(), srv.URL+"/again", `{}`)); got != "ok" {
					t.Fatalf("next request: %q", got)
				}
				if n := srv.accepted.Load(); n != tc.wantConns {
					t.Errorf("server accepted %d connections, want %d", n, tc.wantConns)
				}
			})
		})
	}
}
