package rawclient

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
)

const (
	fakeSession = "sess-1"
	fakeVersion = "2025-06-18" // not the one the client asks for
	fakeAuth    = "Bearer test-token"
)

// fakeServer speaks the subset of streamable HTTP the client uses. Its
// behaviour is chosen by the request's method:
//
//	initialize              JSON, sets Mcp-Session-Id and answers fakeVersion
//	echo                    JSON, the params back as {"params": ...}
//	fail                    JSON-RPC error -32001 with data
//	stream                  SSE: priming event, a notification, the response
//	elicit                  SSE: elicitation/create, waits for the client's
//	                        answer (POSTed), then {"answer": <that result>}
//	drop                    SSE: event d1 (a notification) with retry 1, then
//	                        the connection ends; GET with Last-Event-ID d1
//	                        gets the response as event d2
//	dropnoid                SSE: a notification without id, then the end
//	hang                    SSE: holds the stream until the client goes
//	http401                 401 with a text body
//	a notification or a response: 202
//	GET (no Last-Event-ID)  the GET stream: writes the blocks push carries; an
//	                        empty one ends the response (a drop)
//	GET Last-Event-ID g*    the GET stream again
//	DELETE                  200
//
// Every request but initialize must carry the session, the negotiated
// version and the Authorization header; POSTs must accept both types.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	push      chan string          // blocks for the GET stream; "" ends it
	getOpened chan struct{}        // a GET stream started
	getClosed chan struct{}        // a GET stream handler returned
	hanging   chan struct{}        // a hang request arrived
	cancelled chan json.RawMessage // params of notifications/cancelled
	deleted   chan struct{}        // DELETE arrived

	mu        sync.Mutex
	log       []string                        // "METHOD what" per HTTP request
	answers   map[string]chan json.RawMessage // server request id → client's answer
	dropped   json.RawMessage                 // id of the dropped request
	initParam json.RawMessage
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{
		t:         t,
		push:      make(chan string, 8),
		getOpened: make(chan struct{}, 8),
		getClosed: make(chan struct{}, 8),
		hanging:   make(chan struct{}, 1),
		cancelled: make(chan json.RawMessage, 1),
		deleted:   make(chan struct{}, 1),
		answers:   map[string]chan json.RawMessage{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL + "/mcp" }

func (f *fakeServer) note(s string) {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
}

func (f *fakeServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// answerChan is where the client's answer to server request id goes.
func (f *fakeServer) answerChan(id string) chan json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.answers[id]
	if !ok {
		ch = make(chan json.RawMessage, 1)
		f.answers[id] = ch
	}
	return ch
}

func (f *fakeServer) checkSession(r *http.Request) {
	if got := r.Header.Get("Mcp-Session-Id"); got != fakeSession {
		f.t.Errorf("%s: Mcp-Session-Id = %q, want %q", r.Method, got, fakeSession)
	}
	if got := r.Header.Get("Mcp-Protocol-Version"); got != fakeVersion {
		f.t.Errorf("%s: MCP-Protocol-Version = %q, want %q", r.Method, got, fakeVersion)
	}
}

func (f *fakeServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("Authorization"); got != fakeAuth {
		f.t.Errorf("%s: Authorization header missing or wrong", r.Method)
	}
	switch r.Method {
	case http.MethodGet:
		f.checkSession(r)
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			f.t.Errorf("GET: Accept = %q", r.Header.Get("Accept"))
		}
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			f.note("GET Last-Event-ID=" + last)
			if strings.HasPrefix(last, "g") {
				f.getStream(w, r)
				return
			}
			f.resume(w, last)
			return
		}
		f.note("GET")
		f.getStream(w, r)
	case http.MethodDelete:
		f.checkSession(r)
		f.note("DELETE")
		f.deleted <- struct{}{}
	case http.MethodPost:
		if accept := r.Header.Get("Accept"); !strings.Contains(accept, "application/json") || !strings.Contains(accept, "text/event-stream") {
			f.t.Errorf("POST: Accept = %q", accept)
		}
		var m wireMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			f.t.Errorf("POST: decoding the body: %v", err)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if m.Method == "initialize" {
			f.note("POST initialize")
			f.mu.Lock()
			f.initParam = m.Params
			f.mu.Unlock()
			w.Header().Set("Mcp-Session-Id", fakeSession)
			writeJSON(w, m.ID, `{"protocolVersion":"`+fakeVersion+`","capabilities":{},"serverInfo":{"name":"fake","version":"v0"}}`)
			return
		}
		f.checkSession(r)
		switch {
		case m.Method == "":
			f.note("POST response " + string(m.ID))
			answer := m.Result
			if m.Error != nil {
				answer, _ = json.Marshal(m.Error)
			}
			f.answerChan(string(m.ID)) <- answer
			w.WriteHeader(http.StatusAccepted)
		case m.ID == nil:
			f.note("POST " + m.Method)
			if m.Method == "notifications/cancelled" {
				f.cancelled <- m.Params
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			f.note("POST " + m.Method)
			f.call(w, r, m)
		}
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func writeJSON(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// sse starts an event stream; the returned func writes one raw block.
func sse(w http.ResponseWriter) func(block string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	return func(block string) {
		io.WriteString(w, block+"\n\n")
		fl.Flush()
	}
}

func (f *fakeServer) call(w http.ResponseWriter, r *http.Request, m wireMessage) {
	switch m.Method {
	case "echo":
		writeJSON(w, m.ID, `{"params":`+string(m.Params)+`}`)
	case "fail":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"boom","data":{"why":"test"}}}`, m.ID)
	case "stream":
		write := sse(w)
		write("id: p1\ndata:")
		write(`: a comment` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}`)
		write(fmt.Sprintf(`event: message`+"\n"+`data: {"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, m.ID))
	case "elicit":
		write := sse(w)
		write(`data: {"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create","params":{"message":"name?"}}`)
		select {
		case answer := <-f.answerChan(`"srv-1"`):
			write(fmt.Sprintf(`data: {"jsonrpc":"2.0","id":%s,"result":{"answer":%s}}`, m.ID, answer))
		case <-r.Context().Done():
		}
	case "drop":
		f.mu.Lock()
		f.dropped = m.ID
		f.mu.Unlock()
		write := sse(w)
		write("id: d1\nretry: 1\n" + `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}`)
		// Returning ends the response: the stream is cut before the answer.
	case "dropnoid":
		write := sse(w)
		write(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}`)
	case "hang":
		sse(w)
		f.hanging <- struct{}{}
		<-r.Context().Done()
	case "http401":
		http.Error(w, "no entry", http.StatusUnauthorized)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

// resume answers the GET that resumes the dropped stream.
func (f *fakeServer) resume(w http.ResponseWriter, last string) {
	f.mu.Lock()
	id := f.dropped
	f.mu.Unlock()
	if last != "d1" || id == nil {
		http.Error(w, "unknown event id", http.StatusNotFound)
		return
	}
	write := sse(w)
	write(fmt.Sprintf("id: d2\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resumed\":true}}", id))
}

func (f *fakeServer) getStream(w http.ResponseWriter, r *http.Request) {
	defer func() { f.getClosed <- struct{}{} }()
	write := sse(w)
	f.getOpened <- struct{}{}
	for {
		select {
		case block := <-f.push:
			if block == "" {
				return
			}
			write(block)
		case <-r.Context().Done():
			return
		}
	}
}

// dial connects a client to f with the test's headers; t.Cleanup closes it.
func dial(t *testing.T, f *fakeServer, opts Options) *Client {
	t.Helper()
	opts.Header = http.Header{"Authorization": {fakeAuth}}
	opts.HTTPClient = f.srv.Client()
	c, err := Dial(t.Context(), f.url(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

type notification struct {
	Method string
	Params string
}

// collector gathers notifications for OnNotification.
type collector struct {
	ch chan notification
}

func newCollector() *collector { return &collector{ch: make(chan notification, 16)} }

func (c *collector) on(method string, params json.RawMessage) {
	c.ch <- notification{method, string(params)}
}

// next waits for the next notification, for a bounded time.
func (c *collector) next(t *testing.T) notification {
	t.Helper()
	select {
	case n := <-c.ch:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notification came")
		return notification{}
	}
}

func TestDial_Handshake(t *testing.T) {
	f := newFakeServer(t)
	c := dial(t, f, Options{
		Capabilities: json.RawMessage(`{"elicitation":{}}`),
		ClientInfo:   json.RawMessage(`{"name":"test","version":"v1"}`),
	})
	if got := c.SessionID(); got != fakeSession {
		t.Errorf("SessionID() = %q, want %q", got, fakeSession)
	}
	if got := c.ProtocolVersion(); got != fakeVersion {
		t.Errorf("ProtocolVersion() = %q, want %q", got, fakeVersion)
	}
	var init map[string]any
	f.mu.Lock()
	json.Unmarshal(f.initParam, &init)
	f.mu.Unlock()
	want := map[string]any{
		"protocolVersion": DefaultProtocolVersion,
		"capabilities":    map[string]any{"elicitation": map[string]any{}},
		"clientInfo":      map[string]any{"name": "test", "version": "v1"},
	}
	if diff := cmp.Diff(want, init); diff != "" {
		t.Errorf("initialize params (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"POST initialize", "POST notifications/initialized"}, f.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(c.InitializeResult()), `"serverInfo"`) {
		t.Errorf("InitializeResult() = %s", c.InitializeResult())
	}
}

func TestCall(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		params  any
		want    string // the result, compacted
		wantErr error  // compared with cmp
		notes   []notification
	}{
		{name: "json", method: "echo", params: map[string]int{"a": 1}, want: `{"params":{"a":1}}`},
		{name: "raw params", method: "echo", params: json.RawMessage(`{"b":[true]}`), want: `{"params":{"b":[true]}}`},
		{name: "json-rpc error", method: "fail",
			wantErr: &Error{Code: -32001, Message: "boom", Data: json.RawMessage(`{"why":"test"}`)}},
		{name: "sse with a notification", method: "stream", want: `{"ok":true}`,
			notes: []notification{{"notifications/message", `{"n":1}`}}},
		{name: "resumed after a drop", method: "drop", want: `{"resumed":true}`,
			notes: []notification{{"notifications/message", `{"n":1}`}}},
		{name: "http error", method: "http401",
			wantErr: &HTTPError{StatusCode: 401, ContentType: "text/plain; charset=utf-8", Body: "no entry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			notes := newCollector()
			c := dial(t, f, Options{OnNotification: notes.on})
			got, err := c.Call(t.Context(), tt.method, tt.params)
			if tt.wantErr != nil {
				var got error
				switch tt.wantErr.(type) {
				case *Error:
					var e *Error
					errors.As(err, &e)
					got = e
				case *HTTPError:
					var e *HTTPError
					errors.As(err, &e)
					got = e
				}
				if diff := cmp.Diff(tt.wantErr, got); diff != "" {
					t.Errorf("Call error %v (-want +got):\n%s", err, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Call = %s, want %s", got, tt.want)
			}
			for _, want := range tt.notes {
				if diff := cmp.Diff(want, notes.next(t)); diff != "" {
					t.Errorf("notification (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestCall_ResumesWithLastEventID(t *testing.T) {
	f := newFakeServer(t)
	c := dial(t, f, Options{})
	if _, err := c.Call(t.Context(), "drop", nil); err != nil {
		t.Fatalf("Call: %v", err)
	}
	want := []string{"POST initialize", "POST notifications/initialized", "POST drop", "GET Last-Event-ID=d1"}
	if diff := cmp.Diff(want, f.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestCall_DropWithoutEventID(t *testing.T) {
	f := newFakeServer(t)
	c := dial(t, f, Options{})
	_, err := c.Call(t.Context(), "dropnoid", nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Call error = %v, want one wrapping io.ErrUnexpectedEOF", err)
	}
}

func TestCall_ServerRequestOnTheResponseStream(t *testing.T) {
	f := newFakeServer(t)
	type asked struct{ Method, Params string }
	got := make(chan asked, 1)
	c := dial(t, f, Options{
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, *Error) {
			got <- asked{method, string(params)}
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
		},
	})
	res, err := c.Call(t.Context(), "elicit", nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if want := `{"answer":{"action":"accept","content":{"name":"Ada"}}}`; string(res) != want {
		t.Errorf("Call = %s, want %s", res, want)
	}
	if diff := cmp.Diff(asked{"elicitation/create", `{"message":"name?"}`}, <-got); diff != "" {
		t.Errorf("OnRequest (-want +got):\n%s", diff)
	}
}

func TestCall_UnansweredServerRequest(t *testing.T) {
	f := newFakeServer(t)
	c := dial(t, f, Options{}) // no OnRequest: the client answers an error
	res, err := c.Call(t.Context(), "elicit", nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	// The fake echoes the answer, here the error.
	if want := `{"answer":{"code":-32601,"message":"method not found: elicitation/create"}}`; string(res) != want {
		t.Errorf("Call = %s, want %s", res, want)
	}
}

func TestCall_CancelSendsNotification(t *testing.T) {
	f := newFakeServer(t)
	c := dial(t, f, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-f.hanging
		cancel()
	}()
	_, err := c.Call(ctx, "hang", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Call error = %v, want context.Canceled", err)
	}
	var p struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}
	if err := json.Unmarshal(<-f.cancelled, &p); err != nil {
		t.Fatal(err)
	}
	// Id 1 was initialize; hang is the first call.
	if p.RequestID != 2 || p.Reason == "" {
		t.Errorf("notifications/cancelled params = %+v, want requestId 2 and a reason", p)
	}
}

func TestOpenStream(t *testing.T) {
	f := newFakeServer(t)
	notes := newCollector()
	type asked struct{ Method, Params string }
	got := make(chan asked, 1)
	c := dial(t, f, Options{
		OnNotification: notes.on,
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, *Error) {
			got <- asked{method, string(params)}
			return nil, nil
		},
	})
	if err := c.OpenStream(t.Context()); err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	<-f.getOpened
	if err := c.OpenStream(t.Context()); err == nil {
		t.Errorf("a second OpenStream succeeded")
	}
	f.push <- `data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	if diff := cmp.Diff(notification{"notifications/tools/list_changed", ""}, notes.next(t)); diff != "" {
		t.Errorf("notification (-want +got):\n%s", diff)
	}
	f.push <- "id: g1\nretry: 1\n" + `data: {"jsonrpc":"2.0","id":7,"method":"roots/list"}`
	if diff := cmp.Diff(asked{"roots/list", ""}, <-got); diff != "" {
		t.Errorf("OnRequest (-want +got):\n%s", diff)
	}
	if answer := <-f.answerChan("7"); string(answer) != "{}" {
		t.Errorf("answer to roots/list = %s, want {}", answer)
	}

	// A dropped GET stream comes back with the last event id.
	f.push <- ""
	<-f.getClosed
	<-f.getOpened
	f.push <- `data: {"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`
	if diff := cmp.Diff(notification{"notifications/resources/list_changed", ""}, notes.next(t)); diff != "" {
		t.Errorf("notification after the reconnection (-want +got):\n%s", diff)
	}

	if err := c.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-f.deleted
	<-f.getClosed // Close stopped the GET stream
	if err := c.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := c.Call(t.Context(), "echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after Close = %v, want ErrClosed", err)
	}
	want := []string{"POST initialize", "POST notifications/initialized", "GET", "POST response 7", "GET Last-Event-ID=g1", "DELETE"}
	if diff := cmp.Diff(want, f.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestDial_BadEndpoint(t *testing.T) {
	for _, endpoint := range []string{"", "ftp://x/mcp", "http:///mcp", "://"} {
		if _, err := Dial(t.Context(), endpoint, Options{}); err == nil {
			t.Errorf("Dial(%q) succeeded", endpoint)
		}
	}
}
