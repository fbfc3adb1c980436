package legacy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// rawGet opens session sid's GET stream on a connection of its own and
// returns the connection and the response read from it.
func rawGet(t *testing.T, e *env, sid string) (net.Conn, *http.Response) {
	t.Helper()
	return rawGetProto(t, e, sid, "HTTP/1.1")
}

func rawGetProto(t *testing.T, e *env, sid, proto string) (net.Conn, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /mcp %s\r\nHost: %s\r\nAccept: text/event-stream\r\n%s: %s\r\n%s: %s\r\n\r\n",
		proto, e.srv.Listener.Addr(), HeaderSessionID, sid, HeaderProtocolVersion, V20251125)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, resp
}

// TestGetStreamTakeover checks a GET stream written on the connection
// taken over from net/http: the response net/http would have sent
// (chunked) plus Connection: close, the events as they come, a clean end
// when the session ends, and the stream let go when the client leaves.
func TestGetStreamTakeover(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	_, resp := rawGet(t, e, sid)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || !resp.Close ||
		len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Header.Get("Date") == "" {
		t.Fatalf("response %d, headers %v, transfer encoding %v, close %v", resp.StatusCode, resp.Header, resp.TransferEncoding, resp.Close)
	}
	rd := sse.NewReader(resp.Body, 1<<20)
	if ev, err := rd.Next(); err != nil || len(ev.Data) != 0 || !ev.HasID {
		t.Fatalf("priming event: %+v, %v", ev, err)
	}
	waitFor(t, "the stream to attach", func() bool { return e.h.Sessions()[0].Stream })
	e.mgr.Set(&upstreamtest.Server{Name: "b", Tools: []json.RawMessage{plainTool("new")}})
	ev, err := rd.Next()
	if err != nil || decode(t, ev.Data).Method != "notifications/tools/list_changed" {
		t.Fatalf("event %+v, %v", ev, err)
	}

	// DELETE ends the session: the stream ends with its last chunk, not a
	// cut connection.
	if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after DELETE: %v, want io.EOF (a clean end)", err)
	}

	// A client that leaves: the stream is let go at once.
	sid2 := e.initialize(V20251125)
	conn2, resp2 := rawGet(t, e, sid2)
	if ev, err := sse.NewReader(resp2.Body, 1<<20).Next(); err != nil || !ev.HasID {
		t.Fatalf("second priming event: %+v, %v", ev, err)
	}
	waitFor(t, "the second stream to attach", func() bool { return e.h.Sessions()[0].Stream })
	conn2.Close()
	waitFor(t, "the stream to be let go", func() bool { return !e.h.Sessions()[0].Stream })
	e.h.mu.Lock()
	n := len(e.h.taken)
	e.h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections still taken over", n)
	}
}

// TestGetStreamTakeover_Close checks that Close ends the taken-over
// streams with their sessions, and that a stream whose client stopped
// reading is cut when Close's time runs out.
func TestGetStreamTakeover_Close(t *testing.T) {
	e := newEnv(t, Options{WriteTimeout: time.Minute})
	sid := e.initialize(V20251125)
	_, resp := rawGet(t, e, sid)
	rd := sse.NewReader(resp.Body, 1<<20)
	if ev, err := rd.Next(); err != nil || !ev.HasID {
		t.Fatalf("priming event: %+v, %v", ev, err)
	}
	stuck := e.initialize(V20251125)
	stuckConn, _ := rawGet(t, e, stuck) // never read again
	waitFor(t, "both streams to attach", func() bool {
		n := 0
		for _, s := range e.h.Sessions() {
			if s.Stream {
				n++
			}
		}
		return n == 2
	})
	// Fill the stuck client's socket buffers: a write then blocks.
	big := strings.Repeat("x", 1<<20)
	s := e.session(stuck)
	for range 16 {
		s.mu.Lock()
		e.h.appendLocked(s.standalone, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+big+`"}}`))
		s.mu.Unlock()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	e.closed = true
	if err := e.h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline: a stream could not be written", err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("the reading client's stream: %v, want io.EOF", err)
	}
	waitFor(t, "the stuck stream's pump to end", func() bool {
		e.h.mu.Lock()
		defer e.h.mu.Unlock()
		return len(e.h.taken) == 0
	})
	stuckConn.Close()
}

// TestGetStreamNoTakeover checks the response path for writers that cannot
// be hijacked (HTTP/2, recorders): the stream is written on the response.
func TestGetStreamNoTakeover(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	rec := httptest.NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request(http.MethodGet, sid, "").WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.srv.Config.Handler.ServeHTTP(rec, req)
	}()
	waitFor(t, "the stream to attach", func() bool { return e.h.Sessions()[0].Stream })
	cancel()
	<-done
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get("Connection") != "" || !strings.HasPrefix(rec.Body.String(), "id: ") {
		t.Errorf("recorded %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

// TestGetStreamHTTP10 checks that an HTTP/1.0 GET keeps net/http's
// response, which is not chunked: HTTP/1.0 has no chunked encoding.
func TestGetStreamHTTP10(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	_, resp := rawGetProto(t, e, sid, "HTTP/1.0")
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) != 0 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("response %d %v, transfer encoding %v", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	if ev, err := sse.NewReader(resp.Body, 1<<20).Next(); err != nil || !ev.HasID {
		t.Fatalf("priming event: %+v, %v", ev, err)
	}
	e.h.mu.Lock()
	n := len(e.h.taken)
	e.h.mu.Unlock()
	if n != 0 {
		t.Errorf("an HTTP/1.0 stream took its connection over")
	}
}
