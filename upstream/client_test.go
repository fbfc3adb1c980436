package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// fakeTransport is an in-memory transport: serve answers each message the
// client sends; its return values are delivered as if the server wrote them
// on that request's stream (related) or on its own channel.
type fakeTransport struct {
	mu       sync.Mutex
	recv     func(*jsonrpc.Message, related)
	sent     []*jsonrpc.Message
	version  string
	serve    func(t *fakeTransport, m *jsonrpc.Message) error
	ch       chan struct{}
	closeOne sync.Once
	errv     error // why it ended, set before ch is closed
}

func newFake(serve func(t *fakeTransport, m *jsonrpc.Message) error) *fakeTransport {
	return &fakeTransport{serve: serve, ch: make(chan struct{})}
}

func (f *fakeTransport) start(_ context.Context, recv func(*jsonrpc.Message, related)) error {
	f.recv = recv
	return nil
}

func (f *fakeTransport) send(_ context.Context, m *jsonrpc.Message) error {
	select {
	case <-f.ch:
		return &ConnectionError{Err: f.err()}
	default:
	}
	f.mu.Lock()
	f.sent = append(f.sent, m)
	f.mu.Unlock()
	return f.serve(f, m)
}

// die ends the transport by itself, as a process that exits.
func (f *fakeTransport) die(err error) {
	f.closeOne.Do(func() {
		f.mu.Lock()
		f.errv = err
		f.mu.Unlock()
		close(f.ch)
	})
}

func (f *fakeTransport) negotiated(v string)   { f.version = v }
func (f *fakeTransport) ready(context.Context) {}
func (f *fakeTransport) close(context.Context) error {
	f.closeOne.Do(func() { close(f.ch) })
	return nil
}
func (f *fakeTransport) done() <-chan struct{} { return f.ch }
func (f *fakeTransport) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errv
}

func (f *fakeTransport) sentMethods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.sent {
		if m.Method != "" {
			out = append(out, m.Method)
		}
	}
	return out
}

func initResult(version string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`, version))
}

// basicServe answers initialize with version and hands other requests to h.
func basicServe(version string, h func(f *fakeTransport, m *jsonrpc.Message) error) func(*fakeTransport, *jsonrpc.Message) error {
	return func(f *fakeTransport, m *jsonrpc.Message) error {
		switch {
		case m.Method == "initialize":
			f.recv(jsonrpc.NewResult(m.ID, initResult(version)), m.ID)
			return nil
		case !m.IsRequest():
			return nil
		}
		return h(f, m)
	}
}

func connect(t *testing.T, f *fakeTransport, opts ClientOptions) *Client {
	t.Helper()
	c := newClient(opts, f)
	if err := c.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestClient_Handshake(t *testing.T) {
	tests := []struct {
		name    string
		version string
		wantErr string
	}{
		{"latest", "2025-11-25", ""},
		{"older accepted", "2025-03-26", ""},
		{"unknown refused", "2099-01-01", `server chose protocol version "2099-01-01"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(basicServe(tt.version, nil))
			c := newClient(ClientOptions{Name: "x"}, f)
			err := c.Connect(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Connect = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Initialized().ProtocolVersion; got != tt.version || f.version != tt.version {
				t.Errorf("version = %q (transport %q), want %q", got, f.version, tt.version)
			}
			if got := strings.Join(f.sentMethods(), ","); got != "initialize,notifications/initialized" {
				t.Errorf("sent %s", got)
			}
			var p struct {
				ProtocolVersion string          `json:"protocolVersion"`
				Capabilities    json.RawMessage `json:"capabilities"`
			}
			json.Unmarshal(f.sent[0].Params, &p)
			if p.ProtocolVersion != LatestProtocolVersion || string(p.Capabilities) != `{}` {
				t.Errorf("initialize params = %s", f.sent[0].Params)
			}
		})
	}
}

func TestClient_ConcurrentCallsAndRelated(t *testing.T) {
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		// Answer asynchronously and out of order, with a related
		// notification first.
		go func() {
			var p struct {
				Arguments struct{ N int } `json:"arguments"`
			}
			json.Unmarshal(m.Params, &p)
			f.recv(jsonrpc.NewNotification("notifications/progress", json.RawMessage(fmt.Sprintf(`{"n":%d}`, p.Arguments.N))), m.ID)
			time.Sleep(time.Duration(p.Arguments.N%3) * time.Millisecond)
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(fmt.Sprintf(`{"n":%d}`, p.Arguments.N))), m.ID)
		}()
		return nil
	}))
	c := connect(t, f, ClientOptions{})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var notes []string
			var mu sync.Mutex
			hooks := &CallHooks{Notify: func(m *jsonrpc.Message) { mu.Lock(); notes = append(notes, string(m.Params)); mu.Unlock() }}
			res, err := c.Call(context.Background(), "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"t","arguments":{"N":%d}}`, i)), hooks)
			if err != nil {
				t.Error(err)
				return
			}
			want := fmt.Sprintf(`{"n":%d}`, i)
			if string(res) != want {
				t.Errorf("call %d got %s", i, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(notes) != 1 || notes[0] != want {
				t.Errorf("call %d notes %v", i, notes)
			}
		}()
	}
	wg.Wait()
}

func TestClient_ErrorAndCancel(t *testing.T) {
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		var p struct{ Name string }
		json.Unmarshal(m.Params, &p)
		if p.Name == "bad" {
			f.recv(jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32602, Message: "nope"}), m.ID)
		}
		return nil // "slow": never answers
	}))
	c := connect(t, f, ClientOptions{})
	_, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"bad"}`), nil)
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != -32602 {
		t.Fatalf("err = %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	f.mu.Lock()
	last := f.sent[len(f.sent)-1]
	callID := f.sent[len(f.sent)-2].ID
	f.mu.Unlock()
	if last.Method != "notifications/cancelled" {
		t.Fatalf("last sent = %s", last.Method)
	}
	want := fmt.Sprintf(`{"reason":"timeout","requestId":%s}`, callID)
	if string(last.Params) != want {
		t.Errorf("cancel params = %s, want %s", last.Params, want)
	}
	// A late response to the cancelled id is dropped without harm.
	f.recv(jsonrpc.NewResult(callID, json.RawMessage(`{}`)), callID)
}

func TestClient_SessionExpiry(t *testing.T) {
	var mu sync.Mutex
	expire := 1
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if expire > 0 {
			expire--
			return errSessionExpired
		}
		f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"ok":true}`)), m.ID)
		return nil
	}))
	c := connect(t, f, ClientOptions{})
	res, err := c.Call(context.Background(), "tools/call", nil, nil)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if got := strings.Join(f.sentMethods(), ","); got != "initialize,notifications/initialized,tools/call,initialize,notifications/initialized,tools/call" {
		t.Errorf("sent %s", got)
	}
	// A server that expires every time: one re-initialize, then the error.
	mu.Lock()
	expire = 100
	mu.Unlock()
	if _, err := c.Call(context.Background(), "tools/call", nil, nil); !errors.Is(err, errSessionExpired) {
		t.Fatalf("err = %v, want errSessionExpired", err)
	}
}

func TestClient_ListTools(t *testing.T) {
	tests := []struct {
		name    string
		pages   map[string]string // cursor -> result
		want    int
		wantErr string
	}{
		{"one page", map[string]string{"": `{"tools":[{"name":"a"},{"name":"b"}]}`}, 2, ""},
		{"three pages", map[string]string{
			"":   `{"tools":[{"name":"a"}],"nextCursor":"c1"}`,
			"c1": `{"tools":[{"name":"b"}],"nextCursor":"c2"}`,
			"c2": `{"tools":[{"name":"c"}]}`,
		}, 3, ""},
		{"repeated cursor", map[string]string{
			"":   `{"tools":[],"nextCursor":"c1"}`,
			"c1": `{"tools":[],"nextCursor":"c1"}`,
		}, 0, `repeated cursor "c1"`},
		{"no tools member", map[string]string{"": `{}`}, 0, ""},
		{"tools not an array", map[string]string{"": `{"tools":{}}`}, 0, "not an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
				var p struct{ Cursor string }
				json.Unmarshal(m.Params, &p)
				f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(tt.pages[p.Cursor])), m.ID)
				return nil
			}))
			c := connect(t, f, ClientOptions{})
			tools, err := c.ListTools(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(tools) != tt.want {
				t.Fatalf("ListTools = %d tools, %v; want %d", len(tools), err, tt.want)
			}
		})
	}

	// The page cap: a server with endless distinct cursors.
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(fmt.Sprintf(`{"tools":[],"nextCursor":"c%s"}`, m.ID))), m.ID)
		return nil
	}))
	c := connect(t, f, ClientOptions{})
	if _, err := c.ListTools(context.Background()); err == nil || !strings.Contains(err.Error(), "more than 50 pages") {
		t.Fatalf("err = %v", err)
	}
}

func TestClient_ServerRequests(t *testing.T) {
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error { return nil }))
	c := connect(t, f, ClientOptions{})
	_ = c
	tests := []struct {
		method string
		want   string
	}{
		{"ping", `{}`},
		{"roots/list", "-32601"},
		{"sampling/createMessage", "-32601"},
	}
	for i, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			id := jsonrpc.StringID(fmt.Sprintf("srv-%d", i))
			f.recv(jsonrpc.NewRequest(id, tt.method, nil), related{})
			// The answer is sent from a goroutine; wait for it.
			for range 1000 {
				f.mu.Lock()
				var got *jsonrpc.Message
				for _, m := range f.sent {
					if m.IsResponse() && m.ID == id {
						got = m
					}
				}
				f.mu.Unlock()
				if got != nil {
					if got.Error != nil {
						if fmt.Sprint(got.Error.Code) != tt.want {
							t.Errorf("error %d, want %s", got.Error.Code, tt.want)
						}
					} else if string(got.Result) != tt.want {
						t.Errorf("result %s, want %s", got.Result, tt.want)
					}
					return
				}
				time.Sleep(time.Millisecond)
			}
			t.Fatal("no answer to the server's request")
		})
	}
}

// A list change sent on a call's stream is about the server, not the call:
// it goes to OnNotification, not to the call's hooks.
func TestClient_ListChangedOnCallStream(t *testing.T) {
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		f.recv(jsonrpc.NewNotification("notifications/tools/list_changed", nil), m.ID)
		f.recv(jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`)), m.ID)
		f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
		return nil
	}))
	var mu sync.Mutex
	var unsolicited, hooked []string
	c := connect(t, f, ClientOptions{OnNotification: func(m *jsonrpc.Message) {
		mu.Lock()
		unsolicited = append(unsolicited, m.Method)
		mu.Unlock()
	}})
	hooks := &CallHooks{Notify: func(m *jsonrpc.Message) { mu.Lock(); hooked = append(hooked, m.Method); mu.Unlock() }}
	if _, err := c.Call(context.Background(), "tools/call", nil, hooks); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(unsolicited, ",") != "notifications/tools/list_changed" || strings.Join(hooked, ",") != "notifications/message" {
		t.Errorf("OnNotification got %v, the call's hooks got %v", unsolicited, hooked)
	}
}

// streamsTransport is a fakeTransport that, like streamable HTTP, ties
// what the server sends about a request to that request's stream.
type streamsTransport struct{ *fakeTransport }

func (streamsTransport) requestStreams() bool { return true }

// TestClient_Attribution covers where a message with no related request
// goes (DESIGN decision 5): over a transport without request streams
// (stdio, legacy SSE), to the only call in flight with hooks, or by its
// progress token; otherwise to OnNotification and OnRequest.
func TestClient_Attribution(t *testing.T) {
	tests := []struct {
		name    string
		streams bool     // the transport has request streams (HTTP)
		calls   []string // progress tokens of the calls in flight ("-": no hooks, "h": hooks with only a Header, "": hooks, no token)
		msg     *jsonrpc.Message
		want    string // who got msg: "call 0", "call 1", "unattributed"
	}{
		{name: "request, one call", calls: []string{""}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "elicitation/create", nil), want: "call 0"},
		{name: "request, two calls", calls: []string{"", ""}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "elicitation/create", nil), want: "unattributed"},
		{name: "request, one call without hooks besides", calls: []string{"-", ""}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "roots/list", nil), want: "call 1"},
		{name: "request, no call", calls: nil, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "roots/list", nil), want: "unattributed"},
		{name: "request, only a call without hooks", calls: []string{"-"}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "roots/list", nil), want: "unattributed"},
		{name: "request, one call with only a Header besides", calls: []string{"h", ""}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "roots/list", nil), want: "call 1"},
		{name: "request, only a call with only a Header", calls: []string{"h"}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "roots/list", nil), want: "unattributed"},
		{name: "log message, one call with only a Header besides", calls: []string{"", "h"}, msg: jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`)), want: "call 0"},
		{name: "log message, one call", calls: []string{""}, msg: jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`)), want: "call 0"},
		{name: "log message, two calls", calls: []string{"", ""}, msg: jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`)), want: "unattributed"},
		{name: "progress by token", calls: []string{`"a"`, `7`}, msg: jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":7,"progress":1}`)), want: "call 1"},
		{name: "progress with an unknown token, one call", calls: []string{`"a"`}, msg: jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"b","progress":1}`)), want: "call 0"},
		{name: "progress token shared by two calls", calls: []string{`"a"`, `"a"`}, msg: jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"a","progress":1}`)), want: "unattributed"},
		{name: "list change never goes to a call", calls: []string{""}, msg: jsonrpc.NewNotification("notifications/tools/list_changed", nil), want: "unattributed"},
		{name: "request streams: the GET stream belongs to no call", streams: true, calls: []string{""}, msg: jsonrpc.NewRequest(jsonrpc.StringID("q"), "elicitation/create", nil), want: "unattributed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrived := make(chan jsonrpc.ID, len(tt.calls))
			answered := make(chan *jsonrpc.Message, 1)
			f := newFake(func(f *fakeTransport, m *jsonrpc.Message) error {
				switch {
				case m.Method == "initialize":
					f.recv(jsonrpc.NewResult(m.ID, initResult(LatestProtocolVersion)), m.ID)
				case m.Method == "tools/call":
					arrived <- m.ID // answered at the end of the test
				case m.IsResponse():
					answered <- m
				}
				return nil
			})
			var tr transport = f
			if tt.streams {
				tr = streamsTransport{f}
			}
			var mu sync.Mutex
			var got []string
			record := func(who string) {
				mu.Lock()
				got = append(got, who)
				mu.Unlock()
			}
			c := newClient(ClientOptions{
				OnNotification: func(*jsonrpc.Message) { record("unattributed") },
				OnRequest: func(context.Context, *jsonrpc.Message) (json.RawMessage, error) {
					record("unattributed")
					return json.RawMessage(`{"by":"default"}`), nil
				},
			}, tr)
			if err := c.Connect(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })

			var wg sync.WaitGroup
			for i, tok := range tt.calls {
				var hooks *CallHooks
				switch tok {
				case "-":
				case "h":
					hooks = &CallHooks{Header: http.Header{"X-Request-Id": {"r1"}}}
				default:
					who := fmt.Sprintf("call %d", i)
					hooks = &CallHooks{
						Notify: func(*jsonrpc.Message) { record(who) },
						Request: func(context.Context, *jsonrpc.Message) (json.RawMessage, error) {
							record(who)
							return json.RawMessage(`{"by":"call"}`), nil
						},
					}
				}
				params := json.RawMessage(`{"name":"slow"}`)
				if tok != "" && tok != "-" && tok != "h" {
					params = json.RawMessage(`{"name":"slow","_meta":{"progressToken":` + tok + `}}`)
				}
				wg.Go(func() {
					if _, err := c.Call(context.Background(), "tools/call", params, hooks); err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				})
			}
			var ids []jsonrpc.ID
			for range tt.calls {
				ids = append(ids, <-arrived)
			}

			f.recv(tt.msg, related{})
			if tt.msg.IsRequest() {
				resp := <-answered
				want := `{"by":"default"}`
				if tt.want != "unattributed" {
					want = `{"by":"call"}`
				}
				if resp.ID != tt.msg.ID || string(resp.Result) != want {
					t.Errorf("answer %s %s, want %s", resp.ID, resp.Result, want)
				}
			}
			mu.Lock()
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("receivers (-want +got):\n%s", diff)
			}
			mu.Unlock()
			for _, id := range ids {
				f.recv(jsonrpc.NewResult(id, json.RawMessage(`{}`)), related{})
			}
			wg.Wait()
		})
	}
}

// TestClient_LogTap checks that every notifications/message reaches OnLog,
// whether it belongs to a call or not, without changing where it goes.
func TestClient_LogTap(t *testing.T) {
	f := newFake(basicServe(LatestProtocolVersion, func(f *fakeTransport, m *jsonrpc.Message) error {
		f.recv(jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"warning","logger":"db","data":{"slow": true}}`)), m.ID)
		f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
		return nil
	}))
	type line struct{ Tag, Text string }
	var mu sync.Mutex
	var lines []line
	var unattributed, hooked int
	c := connect(t, f, ClientOptions{
		OnLog: func(tag, text string) {
			mu.Lock()
			lines = append(lines, line{tag, text})
			mu.Unlock()
		},
		OnNotification: func(*jsonrpc.Message) { unattributed++ },
	})
	if _, err := c.Call(context.Background(), "tools/call", nil, &CallHooks{Notify: func(*jsonrpc.Message) { hooked++ }}); err != nil {
		t.Fatal(err)
	}
	for _, params := range []string{
		`{"level":"info","data":"plain"}`,
		`{"level":"bogus","data":"odd level"}`,
		`{"level":"error","data":["a",1]}`,
	} {
		f.recv(jsonrpc.NewNotification("notifications/message", json.RawMessage(params)), related{})
	}
	want := []line{
		{TagLifecycle, "initialized (protocol 2025-11-25)"},
		{"warning", `db: {"slow":true}`},
		{"info", "plain"},
		{"log", "odd level"},
		{"error", `["a",1]`},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("OnLog lines (-want +got):\n%s", diff)
	}
	if hooked != 1 || unattributed != 3 {
		t.Errorf("hooks got %d, OnNotification %d; want 1 and 3", hooked, unattributed)
	}
}

// TestClient_RestoreAfterExpiry checks that a session initialized again
// gets the subscriptions and the level its predecessor held, and that an
// unsubscribe is forgotten.
func TestClient_RestoreAfterExpiry(t *testing.T) {
	var mu sync.Mutex
	expire := false
	f := newFake(basicServe(LatestProtocolVersion, func(f *fakeTransport, m *jsonrpc.Message) error {
		mu.Lock()
		exp := expire && m.Method == "tools/call"
		expire = expire && !exp
		mu.Unlock()
		if exp {
			return errSessionExpired
		}
		f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
		return nil
	}))
	c := connect(t, f, ClientOptions{})
	ctx := context.Background()
	for _, call := range []struct{ method, params string }{
		{"resources/subscribe", `{"uri":"file:///a"}`},
		{"resources/subscribe", `{"uri":"file:///b"}`},
		{"resources/unsubscribe", `{"uri":"file:///a"}`},
		{"logging/setLevel", `{"level":"debug"}`},
	} {
		if _, err := c.Call(ctx, call.method, json.RawMessage(call.params), nil); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"file:///b"}, c.Subscriptions()); diff != "" {
		t.Errorf("Subscriptions (-want +got):\n%s", diff)
	}
	mu.Lock()
	expire = true
	mu.Unlock()
	if _, err := c.Call(ctx, "tools/call", nil, nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	var got []string
	for _, m := range f.sent[len(f.sent)-6:] {
		got = append(got, m.Method+" "+string(m.Params))
	}
	f.mu.Unlock()
	want := []string{
		"tools/call ",
		`initialize {"capabilities":{},"clientInfo":{"name":"mcpgw","version":"dev"},"protocolVersion":"2025-11-25"}`,
		"notifications/initialized ",
		`resources/subscribe {"uri":"file:///b"}`,
		`logging/setLevel {"level":"debug"}`,
		"tools/call ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sent after the expiry (-want +got):\n%s", diff)
	}
}

// A server that cancels a request it sent stops the answer and gets none.
func TestClient_ServerCancelsItsRequest(t *testing.T) {
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error { return nil }))
	stopped := make(chan error, 1)
	c := connect(t, f, ClientOptions{OnRequest: func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return json.RawMessage(`{"action":"cancel"}`), nil
	}})
	_ = c
	id := jsonrpc.StringID("el-1")
	f.recv(jsonrpc.NewRequest(id, "elicitation/create", json.RawMessage(`{}`)), related{})
	f.recv(jsonrpc.NewNotification("notifications/cancelled", json.RawMessage(`{"requestId":"el-1"}`)), related{})
	if err := <-stopped; !errors.Is(err, errServerCancelled) {
		t.Fatalf("the answer ended with %v", err)
	}
	c.Close(context.Background()) // waits for the answer goroutine
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.sent {
		if m.IsResponse() && m.ID == id {
			t.Fatalf("answered a request the server cancelled: %s", mustJSON(m))
		}
	}
}

// A server that sends requests without end gets at most maxAnswering
// answered at once; the rest are refused at once with an error, so it
// cannot make the gateway hold a goroutine for each.
func TestClient_ServerRequestsBounded(t *testing.T) {
	var answered atomic.Int64
	oneMore := make(chan struct{})
	base := basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error { return nil })
	f := newFake(func(f *fakeTransport, m *jsonrpc.Message) error {
		if m.IsResponse() && m.Error == nil {
			if answered.Add(1) == maxAnswering+1 {
				close(oneMore)
			}
		}
		return base(f, m)
	})
	release := make(chan struct{})
	started := make(chan struct{}, maxAnswering+1)
	c := connect(t, f, ClientOptions{OnRequest: func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		started <- struct{}{}
		<-release
		return json.RawMessage(`{"action":"decline"}`), nil
	}})
	const sent = maxAnswering + 36
	for i := range sent {
		f.recv(jsonrpc.NewRequest(jsonrpc.StringID(fmt.Sprintf("el-%d", i)), "elicitation/create", json.RawMessage(`{}`)), related{})
	}
	for range maxAnswering {
		<-started // every answer the bound allows waits for its person
	}
	refused := 0
	f.mu.Lock()
	for _, m := range f.sent {
		if m.IsResponse() && m.Error != nil && strings.Contains(m.Error.Message, "already answering") {
			refused++
		}
	}
	f.mu.Unlock()
	if refused != sent-maxAnswering {
		t.Errorf("refused %d requests while %d were being answered, want %d", refused, maxAnswering, sent-maxAnswering)
	}
	close(release)
	c.answers.Wait()
	// Once the answers are out, the bound is free again.
	f.recv(jsonrpc.NewRequest(jsonrpc.StringID("el-after"), "elicitation/create", json.RawMessage(`{}`)), related{})
	<-oneMore
}

func mustJSON(m *jsonrpc.Message) string { b, _ := jsonrpc.Encode(m); return string(b) }

// TestProgressToken reads the token of a request (params._meta) and of a
// progress notification (params), in one pass over params' members.
func TestProgressToken(t *testing.T) {
	for _, tt := range []struct {
		name, params, want string
	}{
		{"request", `{"name":"echo","arguments":{"progressToken":1},"_meta":{"progressToken":"p-1"}}`, `"p-1"`},
		{"notification", `{"progressToken":7,"progress":1}`, `7`},
		{"request without a token", `{"name":"echo","_meta":{"traceparent":"x"}}`, ``},
		{"no _meta", `{"name":"echo","arguments":{}}`, ``},
		{"a token of params wins over _meta's", `{"_meta":{"progressToken":1},"progressToken":2}`, `2`},
		{"last duplicate", `{"_meta":{"progressToken":1},"_meta":{"progressToken":3}}`, `3`},
		{"no params", ``, ``},
		{"not an object", `[1]`, ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressToken(json.RawMessage(tt.params)); got != tt.want {
				t.Errorf("progressToken(%s) = %q, want %q", tt.params, got, tt.want)
			}
			// callMembers reads the same token, in its one pass.
			if _, got := callMembers("tools/call", json.RawMessage(tt.params)); got != tt.want {
				t.Errorf("callMembers(%s) token = %q, want %q", tt.params, got, tt.want)
			}
		})
	}
}

func TestCallMembers_Target(t *testing.T) {
	for _, tt := range []struct {
		method, params, want string
	}{
		{"tools/call", `{"name":"echo","arguments":{"name":"inner"}}`, "echo"},
		{"prompts/get", `{"name":"greet"}`, "greet"},
		{"tools/call", `{"name":"a","name":"b\u0021"}`, "b!"}, // the last duplicate, unquoted
		{"tools/call", `{"name":7}`, ""},
		{"tools/call", `{"arguments":{}}`, ""},
		{"resources/read", `{"name":"x","uri":"file:///a"}`, ""},
		{"tools/call", ``, ""},
	} {
		if got, _ := callMembers(tt.method, json.RawMessage(tt.params)); got != tt.want {
			t.Errorf("callMembers(%s, %s) target = %q, want %q", tt.method, tt.params, got, tt.want)
		}
	}
}
