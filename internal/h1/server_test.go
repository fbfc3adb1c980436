package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer serves h on a loopback port through a Server and returns its
// address. The server is closed when the test ends.
func startServer(t testing.TB, h http.Handler, configure ...func(*http.Server)) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	for _, f := range configure {
		f(hs)
	}
	s := &Server{HTTP: hs}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

// whichPath answers with the body it read and, in X-Path, which server
// answered: "fast" or "net".
func whichPath(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := "net"
	if _, ok := w.(*response); ok {
		path = "fast"
	}
	w.Header().Set("X-Path", path)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Host", r.Host)
	w.Write(b)
}

// rawConn is a client connection that writes raw bytes and reads answers.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads the next response, body and all.
func (c *rawConn) answer() (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading a response's body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the server closes the connection within 10 s
// (nothing more to read).
func (c *rawConn) closed() bool {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false // still open after 10 s
	}
	return err != nil
}

func TestServer_Routes(t *testing.T) {
	_, addr := startServer(t, http.HandlerFunc(whichPath))
	long := strings.Repeat("v", 5000)
	for _, tc := range []struct {
		name     string
		req      string
		path     string // "" when net/http refuses it
		status   int
		body     string
		response string // the request's method, when it differs
		host     string // the request's Host, when not gw ("-": none)
	}{
		{name: "plain POST", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello", path: "fast", status: 200, body: "hello"},
		{name: "POST without a body", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\n\r\n", path: "fast", status: 200},
		{name: "bare line feeds", req: "POST /mcp HTTP/1.1\nHost: gw\nContent-Length: 2\n\nhi", path: "fast", status: 200, body: "hi"},
		{name: "absolute form", req: "POST http://gw/mcp HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhi", path: "net", status: 200, body: "hi"},
		{name: "GET", req: "GET /mcp HTTP/1.1\r\nHost: gw\r\n\r\n", path: "net", status: 200, response: "GET"},
		{name: "HTTP/1.0", req: "POST /mcp HTTP/1.0\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhi", path: "net", status: 200, body: "hi"},
		{name: "chunked body", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", path: "net", status: 200, body: "hi"},
		{name: "Expect", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", path: "net", status: 200, body: "hi"},
		{name: "Upgrade", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 2\r\n\r\nhi", path: "net", status: 200, body: "hi"},
		{name: "a header longer than the buffer", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nX-Long: " + long + "\r\nContent-Length: 2\r\n\r\nhi", path: "net", status: 200, body: "hi"},
		{name: "an empty Host", req: "POST /mcp HTTP/1.1\r\nHost:\r\nContent-Length: 2\r\n\r\nhi", path: "fast", status: 200, body: "hi", host: "-"}, // as net/http takes it
		{name: "no Host", req: "POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", status: 400},
		{name: "two Hosts", req: "POST /mcp HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 2\r\n\r\nhi", status: 400},
		{name: "a bad Host", req: "POST /mcp HTTP/1.1\r\nHost: a b\r\nContent-Length: 2\r\n\r\nhi", status: 400},
		{name: "a control byte in a value", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nhi", status: 400},
		{name: "a space in a name", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nX Bad: 1\r\nContent-Length: 2\r\n\r\nhi", status: 400},
		{name: "a bad request line", req: "POST /mcp HTTP/1.1 extra\r\nHost: gw\r\n\r\n", status: 400},
		{name: "two lengths", req: "POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			c.send(tc.req)
			resp, body := c.answer()
			if resp.StatusCode == http.StatusContinue {
				resp, body = c.answer() // Expect's interim answer
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, tc.status)
			}
			if got := resp.Header.Get("X-Path"); got != tc.path {
				t.Errorf("served by %q, want %q", got, tc.path)
			}
			if tc.path == "" {
				return
			}
			if body != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			method := "POST"
			if tc.response != "" {
				method = tc.response
			}
			if got := resp.Header.Get("X-Method"); got != method {
				t.Errorf("method %q, want %q", got, method)
			}
			host := "gw"
			if tc.host == "-" {
				host = ""
			}
			if got := resp.Header.Get("X-Host"); got != host {
				t.Errorf("Host %q, want %q", got, host)
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date")
			}
		})
	}
}

// TestServer_KeepAliveThenHandOver sends two pipelined POSTs, which the
// fast path answers in order on one connection, then a GET on it, which
// net/http answers after the hand-over, then a POST, which net/http keeps.
func TestServer_KeepAliveThenHandOver(t *testing.T) {
	_, addr := startServer(t, http.HandlerFunc(whichPath))
	c := dialRaw(t, addr)
	c.send("POST /a HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\noneP" +
		"OST /b HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\ntwo")
	for _, want := range []string{"one", "two"} {
		resp, body := c.answer()
		if body != want || resp.Header.Get("X-Path") != "fast" || resp.Close {
			t.Fatalf("answer %q by %q (close %v), want %q by the fast path, kept alive", body, resp.Header.Get("X-Path"), resp.Close, want)
		}
	}
	// The line break after the second POST's body is one that old
	// clients send: net/http skips it, and so does the fast path.
	c.send("POST /b2 HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nsix\r\n")
	if resp, body := c.answer(); body != "six" || resp.Header.Get("X-Path") != "fast" {
		t.Fatalf("answer %q by %q, want six by the fast path", body, resp.Header.Get("X-Path"))
	}
	c.send("GET /c HTTP/1.1\r\nHost: gw\r\n\r\nPOST /d HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nfour")
	for _, want := range []string{"GET", "POST"} {
		resp, body := c.answer()
		if resp.Header.Get("X-Method") != want || resp.Header.Get("X-Path") != "net" {
			t.Fatalf("answer to %q by %q, want %s by net/http", resp.Header.Get("X-Method"), resp.Header.Get("X-Path"), want)
		}
		if want == "POST" && body != "four" {
			t.Fatalf("body %q after the hand-over, want four", body)
		}
	}
}

// TestServer_SplitRequests sends requests in pieces: a POST's header is
// awaited whole, and anything else is handed over at its first bytes.
func TestServer_SplitRequests(t *testing.T) {
	_, addr := startServer(t, http.HandlerFunc(whichPath))
	for _, tc := range []struct {
		name   string
		pieces []string
		path   string
	}{
		{name: "POST", pieces: []string{"PO", "ST /mcp HTTP/1.1\r\nHo", "st: gw\r\nContent-Length: 2\r\n", "\r\nhi"}, path: "fast"},
		{name: "GET", pieces: []string{"GE", "T /mcp HTTP/1.1\r\nHost: gw\r\n", "\r\n"}, path: "net"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			for _, p := range tc.pieces {
				c.send(p)
				time.Sleep(20 * time.Millisecond) // each piece its own read
			}
			resp, _ := c.answer()
			if got := resp.Header.Get("X-Path"); got != tc.path {
				t.Fatalf("served by %q, want %q", got, tc.path)
			}
		})
	}
}

// TestServer_SameAsNetHTTP runs handlers behind the fast path and behind
// net/http's server, and compares what a client sees.
func TestServer_SameAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{name: "JSON with its length", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "11")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"a":"bcd"}`))
		}},
		{name: "large, with its length, in two writes", h: func(w http.ResponseWriter, r *http.Request) {
			big := strings.Repeat("0123456789", 2000)
			w.Header().Set("Content-Length", strconv.Itoa(len(big)+5))
			w.Write([]byte(big))
			w.Write([]byte("/tail"))
		}},
		{name: "small, no length, no type", h: func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("plain words"))
		}},
		{name: "large, no length", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			for i := range 100 {
				fmt.Fprintf(w, "line %d %s\n", i, strings.Repeat("x", 200))
			}
		}},
		{name: "flushed", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: 1\n\n"))
			w.(http.Flusher).Flush()
			w.Write([]byte("data: 2\n\n"))
		}},
		{name: "flushed with a length", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "4")
			w.Write([]byte("ab"))
			w.(http.Flusher).Flush()
			w.Write([]byte("cd"))
		}},
		{name: "accepted, no body", h: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
		}},
		{name: "no content", h: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic(fmt.Sprintf("Write on a 204: %v", err))
			}
		}},
		{name: "an unknown status", h: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(599)
		}},
		{name: "a value with a line break", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Split", "a\r\nX-Injected: 1")
			w.Write([]byte("ok"))
		}},
		{name: "written past its length", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2")
			w.Write([]byte("ok"))
			if _, err := w.Write([]byte("more")); !errors.Is(err, http.ErrContentLength) {
				panic(fmt.Sprintf("Write past Content-Length: %v", err))
			}
		}},
		{name: "the handler closes", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		}},
		{name: "a bad length of the handler's", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "two")
			w.Write([]byte("ok"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := httptest.NewServer(tc.h)
			defer want.Close()
			_, addr := startServer(t, tc.h)
			a := see(t, want.URL)
			b := see(t, "http://"+addr)
			if a != b {
				t.Errorf("net/http:\n%s\nthe fast path:\n%s", a, b)
			}
		})
	}
}

// see POSTs to url and describes what came back: status, framing, the
// headers a handler sets or a server adds, and the body.
func see(t *testing.T, url string) string {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(url, "text/plain", strings.NewReader("request"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var h []string
	for _, k := range []string{"Content-Type", "X-Split", "X-Injected"} {
		if v, ok := resp.Header[k]; ok {
			h = append(h, fmt.Sprintf("%s=%q", k, v))
		}
	}
	return fmt.Sprintf("status %d, length %d, chunked %v, close %v, date %v, %s\nbody %q (err %v)",
		resp.StatusCode, resp.ContentLength, len(resp.TransferEncoding) > 0, resp.Close, resp.Header.Get("Date") != "",
		strings.Join(h, " "), b, err)
}

// TestServer_ShortAnswerCloses: an answer cut short of the length its
// handler gave ends the connection, so that the client does not read the
// next answer as its rest.
func TestServer_ShortAnswerCloses(t *testing.T) {
	_, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("short"))
	}))
	c := dialRaw(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if string(b) != "short" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %q, %v; want short, then the connection closed", b, err)
	}
}

// TestServer_UnreadBody: what a handler leaves of a body is read past when
// it is small, and the connection closed when it is large, as net/http
// does.
func TestServer_UnreadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Read") != "" {
			r.Body.Read(make([]byte, 10))
			r.Body.Close()
		}
		w.Write([]byte("ok"))
	})
	netHTTP := httptest.NewServer(h)
	defer netHTTP.Close()
	_, fast := startServer(t, h)
	for _, srv := range []struct{ name, addr string }{{"net/http", netHTTP.Listener.Addr().String()}, {"fast path", fast}} {
		t.Run(srv.name, func(t *testing.T) { testUnreadBody(t, srv.addr) })
	}
}

func testUnreadBody(t *testing.T, addr string) {
	for _, tc := range []struct {
		name string
		size int
		read bool
		kept bool
	}{
		{name: "small, unread", size: 1 << 10, kept: true},
		{name: "small, partly read and closed", size: 1 << 10, read: true, kept: true},
		{name: "at the limit, partly read and closed", size: maxDrain + 10, read: true},
		{name: "below the limit", size: maxDrain - 1, kept: true},
		{name: "at the limit", size: maxDrain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			hdr := ""
			if tc.read {
				hdr = "X-Read: 1\r\n"
			}
			// The body is sent while the answer is read: a large one
			// does not fit the socket's buffers.
			go func() {
				fmt.Fprintf(c.nc, "POST / HTTP/1.1\r\nHost: gw\r\n%sContent-Length: %d\r\n\r\n%s", hdr, tc.size, strings.Repeat("b", tc.size))
			}()
			resp, body := c.answer()
			// net/http does not always say Connection: close before it
			// closes (not for a body closed early), so only a kept one
			// is held to its header.
			if body != "ok" || (tc.kept && resp.Close) {
				t.Fatalf("answer %q, close %v; want ok, close %v", body, resp.Close, !tc.kept)
			}
			if !tc.kept {
				if !c.closed() {
					t.Fatal("the connection stayed open")
				}
				return
			}
			c.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
			if _, body := c.answer(); body != "ok" {
				t.Fatalf("the next request got %q", body)
			}
		})
	}
}

// TestServer_ClientGoneCancels: once an answer streams, the client closing
// its connection cancels the request's context.
func TestServer_ClientGoneCancels(t *testing.T) {
	cause := make(chan error, 1)
	_, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Write([]byte("data: 1\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			cause <- context.Cause(r.Context())
		case <-time.After(20 * time.Second):
			cause <- nil
		}
	}))
	c := dialRaw(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	c.nc.Close()
	if err := <-cause; !errors.Is(err, errClientGone) {
		t.Fatalf("the request's context ended with %v, want %v", err, errClientGone)
	}
}

// TestServer_StreamThenNextRequest: a request sent while the answer before
// it streams (the watch reads its first byte) is served whole afterwards.
func TestServer_StreamThenNextRequest(t *testing.T) {
	release := make(chan struct{})
	_, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "stream" {
			w.Write([]byte("first "))
			w.(http.Flusher).Flush()
			<-release
			if err := r.Context().Err(); err != nil {
				panic("the context ended while the client was there: " + err.Error())
			}
		}
		w.Write(b)
	}))
	c := dialRaw(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 6\r\n\r\nstream")
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nnext")
	time.Sleep(50 * time.Millisecond) // let the watch read a byte of it, as it may
	close(release)
	b, err := io.ReadAll(resp.Body)
	if string(b) != "first stream" || err != nil {
		t.Fatalf("the streamed answer: %q, %v", b, err)
	}
	if _, body := c.answer(); body != "next" {
		t.Fatalf("the next answer: %q", body)
	}
}

// TestServer_WriteAfterReturn: a writer kept past its handler's return
// gets an error, and the next answer on the connection is whole.
func TestServer_WriteAfterReturn(t *testing.T) {
	kept := make(chan http.ResponseWriter, 1)
	_, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keep" {
			kept <- w
		}
		w.Write([]byte("answer"))
	}))
	c := dialRaw(t, addr)
	c.send("POST /keep HTTP/1.1\r\nHost: gw\r\n\r\n")
	c.answer()
	// The connection answers one request at a time: once the next is
	// answered, the first one's handler has long returned.
	c.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	c.answer()
	w := <-kept
	if _, err := w.Write([]byte("late")); !errors.Is(err, errHandlerDone) {
		t.Errorf("a late Write returned %v, want %v", err, errHandlerDone)
	}
	if err := w.(interface{ FlushError() error }).FlushError(); !errors.Is(err, errHandlerDone) {
		t.Errorf("a late FlushError returned %v, want %v", err, errHandlerDone)
	}
	c.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	if _, body := c.answer(); body != "answer" {
		t.Fatalf("the next answer: %q", body)
	}
}

func TestServer_Panic(t *testing.T) {
	var logged syncBuffer
	_, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("handler broke")
	}), func(hs *http.Server) { hs.ErrorLog = log.New(&logged, "", 0) })
	for _, path := range []string{"/abort", "/panic"} {
		c := dialRaw(t, addr)
		c.send("POST " + path + " HTTP/1.1\r\nHost: gw\r\n\r\n")
		if !c.closed() {
			t.Fatalf("%s: the connection stayed open", path)
		}
	}
	if got := logged.String(); strings.Count(got, "http: panic serving") != 1 || !strings.Contains(got, "handler broke") {
		t.Fatalf("logged %q, want the one panic that is not ErrAbortHandler", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestServer_HeaderTimeout: a header that never ends, and a new
// connection that never sends, are closed after ReadHeaderTimeout, as
// net/http closes them; a kept-alive connection waits for its next
// request (no idle timeout is set).
func TestServer_HeaderTimeout(t *testing.T) {
	_, addr := startServer(t, http.HandlerFunc(whichPath), func(hs *http.Server) { hs.ReadHeaderTimeout = 100 * time.Millisecond })
	c := dialRaw(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: gw\r\n")
	if !c.closed() {
		t.Fatal("a header that never ends kept its connection")
	}
	if c := dialRaw(t, addr); !c.closed() {
		t.Fatal("a connection that never sent kept its connection")
	}
	kept := dialRaw(t, addr)
	kept.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	kept.answer()
	time.Sleep(300 * time.Millisecond) // three header timeouts
	kept.send("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nkept")
	if _, body := kept.answer(); body != "kept" {
		t.Fatalf("the kept-alive connection answered %q", body)
	}
}

// TestServer_Shutdown: Shutdown closes idle connections at once, lets the
// ones answering finish (with Connection: close), refuses new ones, and
// waits for net/http's.
func TestServer_Shutdown(t *testing.T) {
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	s, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		w.Write([]byte(r.Method))
	}))
	idle := dialRaw(t, addr)
	idle.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	idle.answer()
	busy := dialRaw(t, addr)
	busy.send("POST /slow HTTP/1.1\r\nHost: gw\r\n\r\n")
	busyNet := dialRaw(t, addr)
	busyNet.send("GET /slow HTTP/1.1\r\nHost: gw\r\n\r\n")
	<-started
	<-started

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Fatal("the idle connection was not closed")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while requests were in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("a new connection was accepted during Shutdown")
	}
	close(release)
	for _, c := range []*rawConn{busy, busyNet} {
		resp, _ := c.answer()
		if !resp.Close {
			t.Error("an answer during Shutdown did not close its connection")
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestServer_ShutdownTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	s, addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}))
	c := dialRaw(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: gw\r\n\r\n")
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the context's deadline", err)
	}
}

func TestHeaderEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", -1},
		{"POST / HTTP/1.1\r\n", -1},
		{"POST / HTTP/1.1\r\nHost: a\r\n\r\nbody", 28},
		{"POST / HTTP/1.1\nHost: a\n\nbody", 25},
		{"POST / HTTP/1.1\r\nHost: a\n\r\n", 27},
		{"POST / HTTP/1.1\r\nHost: a\r\n\r", -1},
		{"POST / HTTP/1.1\r\nX: a\r\r\n\r\n", 26},
	} {
		if got := headerEnd([]byte(tc.in)); got != tc.want {
			t.Errorf("headerEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzHeaderEnd holds headerEnd to where http.ReadRequest stops: a body
// the fast path reads from there on must be the one net/http would read.
func FuzzHeaderEnd(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi",
		"POST / HTTP/1.1\nHost: a\n\n",
		"POST / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
		"POST / HTTP/1.1\r\n\r\n",
		"POST / HTTP/1.1\r\nX: \r\r\n\r\n",
		"\r\nPOST / HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headerEnd(b)
		if n < 0 {
			return
		}
		if _, ok := parseRequest(b[:n]); !ok {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(b), len(b)+16)
		br.Peek(len(b))
		_, err := http.ReadRequest(br)
		if consumed := len(b) - br.Buffered(); err != nil || consumed != n {
			t.Fatalf("headerEnd = %d, ReadRequest read %d (err %v) of %q", n, consumed, err, b)
		}
	})
}

func BenchmarkServer_Post(b *testing.B) {
	for _, fast := range []bool{false, true} {
		name := "net/http"
		if fast {
			name = "fast path"
		}
		b.Run(name, func(b *testing.B) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				w.Header()["Content-Type"] = []string{"application/json"}
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.Write(body)
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			hs := &http.Server{Handler: h}
			if fast {
				s := &Server{HTTP: hs}
				go s.Serve(ln)
				defer s.Close()
			} else {
				go hs.Serve(ln)
				defer hs.Close()
			}
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
			req := []byte(fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := nc.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// FuzzServer sends arbitrary bytes on a connection and holds the server to
// ending every exchange: each connection is answered and closed, or
// closed, once its client stops sending, and the server still answers a
// plain POST afterwards. Handlers echo the body they read.
func FuzzServer(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhi",
		"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhiPOST / HTTP/1.1\r\nHost: gw\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 9\r\n\r\nshort",
		"POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: gw\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n\r\n\r\nPOST / HTTP/1.1\r\nHost: gw\r\n\r\n",
		"POST / HTTP/1.1\nHost: gw\n\n",
		"POST /\x00 HTTP/1.1\r\nHost: gw\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	_, addr := startServer(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}), func(hs *http.Server) {
		hs.ReadHeaderTimeout = time.Second
		hs.ErrorLog = log.New(io.Discard, "", 0)
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(b); err != nil {
			return // the server closed first: an exchange that ended
		}
		nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err != nil {
			t.Fatalf("the connection did not end: %v", err)
		}
		c := dialRaw(t, addr)
		c.send("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nok")
		if _, body := c.answer(); body != "ok" {
			t.Fatalf("the server then answered %q", body)
		}
	})
}
