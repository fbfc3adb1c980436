package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// fakeLegacy is a 2024-11-05 HTTP+SSE server that asserts what it
// receives: GET /sse opens a session and names its POST endpoint; each POST
// is answered 202 and its response travels on the stream.
type fakeLegacy struct {
	t *testing.T
	// endpoint is the data of the endpoint event for session sid, given
	// the server's own URL; nil sends "/messages?sessionId=<sid>".
	endpoint func(base, sid string) string
	// noEndpoint holds the stream open without an endpoint event.
	noEndpoint bool
	// end, when closed, ends every stream.
	end chan struct{}
	// opened receives a value when a stream opens (dropped when full).
	opened chan struct{}
	// hold is a method whose POST the server never answers; held
	// receives a value when one arrives.
	hold string
	held chan struct{}

	mu       sync.Mutex
	url      string
	sessions map[string]chan []byte
	hits     []hit
}

func newFakeLegacy(t *testing.T) *fakeLegacy {
	return &fakeLegacy{t: t, end: make(chan struct{}), opened: make(chan struct{}, 10), sessions: map[string]chan []byte{}}
}

func (f *fakeLegacy) start() *httptest.Server {
	srv := httptest.NewServer(f)
	f.mu.Lock()
	f.url = srv.URL
	f.mu.Unlock()
	f.t.Cleanup(srv.Close)
	return srv
}

func (f *fakeLegacy) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, h := range f.hits {
		out = append(out, strings.TrimSpace(h.HTTP+" "+h.RPC))
	}
	return out
}

func (f *fakeLegacy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := f.t
	if got := r.Header.Get("Authorization"); got != "Bearer "+testAPIKey {
		t.Errorf("%s: Authorization = %q", r.Method, got)
	}
	if got := r.Header.Get("X-Test"); got != testHeaderValue {
		t.Errorf("%s: X-Test = %q", r.Method, got)
	}
	if sid, pv := r.Header.Get("Mcp-Session-Id"), r.Header.Get("MCP-Protocol-Version"); sid != "" || pv != "" {
		t.Errorf("%s: streamable HTTP headers on the legacy transport: session %q version %q", r.Method, sid, pv)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		if a := r.Header.Get("Accept"); a != "text/event-stream" {
			t.Errorf("GET Accept = %q", a)
		}
		f.mu.Lock()
		sid := fmt.Sprintf("s%d", len(f.sessions)+1)
		out := make(chan []byte, 100)
		f.sessions[sid] = out
		f.hits = append(f.hits, hit{HTTP: "GET"})
		base := f.url
		f.mu.Unlock()
		startSSE(w)
		select {
		case f.opened <- struct{}{}:
		default:
		}
		if !f.noEndpoint {
			ep := "/messages?sessionId=" + sid
			if f.endpoint != nil {
				ep = f.endpoint(base, sid)
			}
			writeEvent(t, w, sse.Event{Type: "endpoint", Data: []byte(ep)})
		}
		for {
			select {
			case b := <-out:
				writeEvent(t, w, sse.Event{Type: "message", Data: b})
			case <-f.end:
				return
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		f.mu.Lock()
		out := f.sessions[r.URL.Query().Get("sessionId")]
		f.mu.Unlock()
		if out == nil {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.ParseOne(body)
		if err != nil {
			t.Errorf("POST body %s: %v", body, err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.hits = append(f.hits, hit{HTTP: "POST", RPC: m.Method})
		f.mu.Unlock()
		if m.Method != "" && m.Method == f.hold {
			f.held <- struct{}{}
			<-r.Context().Done() // the client gave the POST up
			return
		}
		w.WriteHeader(http.StatusAccepted)
		var res string
		switch m.Method {
		case "initialize":
			res = `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}`
		case "tools/list":
			res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
			out <- encode(t, jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"listed"}`)))
		case "tools/call":
			res = string(m.Params)
		default:
			return
		}
		out <- encode(t, jsonrpc.NewResult(m.ID, json.RawMessage(res)))
	default:
		t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	}
}

func TestSSE_Legacy(t *testing.T) {
	f := newFakeLegacy(t)
	srv := f.start()
	notes := make(chan string, 10)
	c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{
		OnNotification: func(m *jsonrpc.Message) { notes <- m.Method },
	})
	mustConnect(t, c)
	if got := c.Initialized().ProtocolVersion; got != protocol20241105 {
		t.Errorf("negotiated %q", got)
	}
	tools, err := c.ListTools(callCtx(t))
	if err != nil || len(tools) != 1 {
		t.Fatalf("ListTools = %s, %v", tools, err)
	}
	if got := <-notes; got != "notifications/message" {
		t.Errorf("OnNotification got %q", got)
	}
	res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo"}`), nil)
	if err != nil || string(res) != `{"name":"echo"}` {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if err := c.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
	want := []string{"GET", "POST initialize", "POST notifications/initialized", "POST tools/list", "POST tools/call"}
	if diff := cmp.Diff(want, f.methods()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestSSE_Endpoint(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(base, sid string) string
		wantErr  string
	}{
		{name: "absolute, same origin", endpoint: func(base, sid string) string { return base + "/messages?sessionId=" + sid }},
		{name: "relative to the stream", endpoint: func(base, sid string) string { return "messages?sessionId=" + sid }},
		{name: "another host", endpoint: func(base, sid string) string { return "http://evil.example/messages?sessionId=" + sid }, wantErr: "another origin (http://evil.example)"},
		{name: "another port", endpoint: func(base, sid string) string { return "http://127.0.0.1:1/messages" }, wantErr: "another origin"},
		{name: "another scheme", endpoint: func(base, sid string) string { return strings.Replace(base, "http:", "https:", 1) + "/messages" }, wantErr: "another origin"},
		{name: "empty", endpoint: func(base, sid string) string { return "" }, wantErr: "empty endpoint event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeLegacy(t)
			f.endpoint = tt.endpoint
			srv := f.start()
			c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{})
			err := c.Connect(callCtx(t))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Connect error = %v, want one containing %q", err, tt.wantErr)
			}
			if got := f.methods(); len(got) != 1 {
				t.Errorf("requests = %v, want the GET only", got)
			}
		})
	}
}

// TestSSE_StreamEnds checks that the end of the event stream ends the
// transport with an error.
func TestSSE_StreamEnds(t *testing.T) {
	f := newFakeLegacy(t)
	srv := f.start()
	c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{})
	mustConnect(t, c)
	close(f.end)
	<-c.Done()
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "server closed the event stream") {
		t.Errorf("Err = %v", err)
	}
	if _, err := c.Call(callCtx(t), "tools/list", nil, nil); err == nil {
		t.Error("Call succeeded after the stream ended")
	}
}

// TestSSE_EndDuringPost checks that a POST the server never answers ends
// when the transport does: closed, or its event stream ended by the
// server.
func TestSSE_EndDuringPost(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*fakeLegacy, *Client) error
	}{
		{"Close", func(_ *fakeLegacy, c *Client) error { return c.Close(callCtx(t)) }},
		{"the stream ends", func(f *fakeLegacy, _ *Client) error { close(f.end); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeLegacy(t)
			f.hold, f.held = "tools/call", make(chan struct{}, 1)
			srv := f.start()
			c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{})
			mustConnect(t, c)
			errc := make(chan error, 1)
			go func() {
				_, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{}`), nil)
				errc <- err
			}()
			<-f.held
			if err := tc.end(f, c); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errc:
				if err == nil {
					t.Error("the call succeeded")
				}
			case <-time.After(waitLimit):
				t.Fatal("the POST was still under way after the transport ended")
			}
		})
	}
}

// TestSSE_EventTooLarge checks that a message over the cap ends the
// transport with an error that says so.
func TestSSE_EventTooLarge(t *testing.T) {
	f := newFakeLegacy(t)
	srv := f.start()
	c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{MaxMessageBytes: 1024})
	mustConnect(t, c)
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 8192) + `"}`)
	if _, err := c.Call(callCtx(t), "tools/call", big, nil); err == nil {
		t.Fatal("the call succeeded")
	}
	<-c.Done()
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "larger than the limit of 1024 bytes") {
		t.Errorf("Err = %v", err)
	}
}

func TestSSE_ConnectErrors(t *testing.T) {
	t.Run("401", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "nope "+testAPIKey, http.StatusUnauthorized)
		}))
		t.Cleanup(srv.Close)
		c := newTestClient(t, testServer("sse", srv.URL+"/sse?key=query-5ecret"), ClientOptions{})
		err := c.Connect(callCtx(t))
		if err == nil || !strings.Contains(err.Error(), "unauthorized (check api_key)") {
			t.Fatalf("Connect error = %v", err)
		}
		assertNoSecrets(t, "error", err.Error())
	})
	t.Run("no endpoint event", func(t *testing.T) {
		f := newFakeLegacy(t)
		f.noEndpoint = true
		srv := f.start()
		c := newTestClient(t, testServer("sse", srv.URL+"/sse"), ClientOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-f.opened // give up once the stream is open
			cancel()
		}()
		err := c.Connect(ctx)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "endpoint event") {
			t.Fatalf("Connect error = %v", err)
		}
	})
}

// TestSSE_GoSDK runs the client against the official Go SDK's 2024-11-05
// SSE server.
func TestSSE_GoSDK(t *testing.T) {
	server := newSDKServer()
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := newTestClient(t, testServer("sse", srv.URL), ClientOptions{})
	mustConnect(t, c)
	tools, err := c.ListTools(callCtx(t))
	if err != nil || len(tools) != 1 {
		t.Fatalf("ListTools = %s, %v", tools, err)
	}
	res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), nil)
	if err != nil || !strings.Contains(string(res), `"text":"echo: hi"`) {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if err := c.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
}
