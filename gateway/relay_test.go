package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// recorder collects what a client's sinks received.
type recorder struct {
	mu    sync.Mutex
	notes []string
}

func (r *recorder) sink(method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, method+" "+string(params))
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notes...)
}

const tool = `{"name":"t","inputSchema":{"type":"object"}}`

func TestRelay_ProgressTokensPerCall(t *testing.T) {
	// The server sends progress for each call under the token it was
	// given: once on the call's stream, once unattributed (as over stdio).
	var m *upstreamtest.Manager
	m = upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(tool),
		Handle: func(_ context.Context, _ string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			meta, _, _ := rawjson.Get(params, "_meta")
			token, _, _ := rawjson.Get(meta, "progressToken")
			hooks.Notify(jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":`+string(token)+`,"progress":1}`)))
			m.Notify("s", jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":`+string(token)+`,"progress":2}`)))
			return json.RawMessage(`{"content":[]}`), nil
		}})
	s := newCore(t, m, Options{})
	var wg sync.WaitGroup
	recs := make([]*recorder, 4)
	for i := range recs {
		recs[i] = &recorder{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every session uses the same token "same".
			_, err := s.Handle(context.Background(), &Request{Method: "tools/call", Session: fmt.Sprint("s", i), Notify: recs[i].sink,
				Params: json.RawMessage(`{"name":"mcp__s__t","_meta":{"progressToken":"same"}}`)})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := []string{
		`notifications/progress {"progressToken":"same","progress":1}`,
		`notifications/progress {"progressToken":"same","progress":2}`,
	}
	for i, r := range recs {
		if diff := cmp.Diff(want, r.got()); diff != "" {
			t.Errorf("session %d (-want +got):\n%s", i, diff)
		}
	}
	// After the call, its token is forgotten.
	m.Notify("s", jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"mcpgw-p-1","progress":3}`)))
	if n := len(recs[0].got()) + len(recs[1].got()); n != 4 {
		t.Errorf("a late progress was delivered")
	}
}

// inputServer is a fake server whose call sends one request to the client
// through hooks.Request and answers with what it got.
func inputServer(name, method, params string, mode string) *upstreamtest.Server {
	return &upstreamtest.Server{Name: name, Tools: raws(tool),
		Handle: func(ctx context.Context, _ string, _ json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			res, err := hooks.Request(ctx, jsonrpc.NewRequest(jsonrpc.IntID(1), method, json.RawMessage(params)))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, "error: "+err.Error())), nil
			}
			return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, string(res))), nil
		}}
}

func callText(t *testing.T, s *Server, req *Request) (string, error) {
	t.Helper()
	req.Method = "tools/call"
	if req.Params == nil {
		req.Params = json.RawMessage(`{"name":"mcp__s__t"}`)
	}
	res, err := s.Handle(context.Background(), req)
	if err != nil {
		return "", err
	}
	var r struct{ Content []struct{ Text string } }
	json.Unmarshal(res.Body, &r)
	return r.Content[0].Text, nil
}

func TestRelay_InputRequests(t *testing.T) {
	form := `{"message":"Name?","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}`
	tests := []struct {
		name     string
		method   string
		params   string
		caps     string
		answer   string // what the client's Input answers ("" = never called)
		inputErr error
		roots    []config.Root
		want     string
		asked    bool
		// answered is what the gateway answered for the client, as the
		// server's status shows it: answer and reason; "" when it did not.
		answered string
	}{
		{"elicitation relayed", "elicitation/create", form, `{"elicitation":{}}`, `{"action":"accept","content":{"n":"x"}}`, nil, nil, `{"action":"accept","content":{"n":"x"}}`, true, ""},
		{"no elicitation capability: cancel", "elicitation/create", form, `{}`, "", nil, nil, `{"action":"cancel"}`, false, "cancel: the client did not declare elicitation"},
		{"url-only client is not asked a form", "elicitation/create", form, `{"elicitation":{"url":{}}}`, "", nil, nil, `{"action":"cancel"}`, false, "cancel: the client declared URL-mode elicitation only"},
		{"client's own error relayed", "elicitation/create", form, `{"elicitation":{"form":{}}}`, "", &jsonrpc.Error{Code: -1, Message: "user said no"}, nil, "error: jsonrpc error -1: user said no", true, ""},
		{"client could not be asked: cancel", "elicitation/create", form, `{"elicitation":{"form":{}}}`, "", errors.New("the session ended"), nil, `{"action":"cancel"}`, true, "cancel: the client could not be asked"},
		{"sampling relayed", "sampling/createMessage", `{"messages":[],"maxTokens":5}`, `{"sampling":{}}`, `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`, nil, nil, `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`, true, ""},
		{"sampling with tools needs sampling.tools", "sampling/createMessage", `{"messages":[],"maxTokens":5,"tools":[]}`, `{"sampling":{}}`, "", nil, nil, `error: jsonrpc error -32603: mcpgw has no client to ask for sampling/createMessage: the client did not declare sampling.tools`, false, "an error: the client did not declare sampling.tools"},
		{"roots relayed", "roots/list", `{}`, `{"roots":{}}`, `{"roots":[{"uri":"file:///c"}]}`, nil, nil, `{"roots":[{"uri":"file:///c"}]}`, true, ""},
		{"roots from config", "roots/list", `{}`, `{}`, "", nil, []config.Root{{URI: "file:///srv", Name: "srv"}}, `{"roots":[{"uri":"file:///srv","name":"srv"}]}`, false, "1 root from config: the client did not declare roots"},
		{"roots: none configured, an empty list", "roots/list", `{}`, `{}`, "", nil, nil, `{"roots":[]}`, false, "an empty list (no roots configured): the client did not declare roots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := inputServer("s", tt.method, tt.params, "")
			srv.Roots = tt.roots
			m := upstreamtest.NewManager(srv)
			s := newCore(t, m, Options{})
			asked := false
			text, err := callText(t, s, &Request{Session: "x", Client: Client{Capabilities: json.RawMessage(tt.caps)},
				Input: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
					asked = true
					if method != tt.method || string(params) != tt.params {
						t.Errorf("Input got %s %s", method, params)
					}
					if tt.inputErr != nil {
						return nil, tt.inputErr
					}
					return json.RawMessage(tt.answer), nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			if text != tt.want || asked != tt.asked {
				t.Errorf("server got %q (client asked: %v), want %q (asked: %v)", text, asked, tt.want, tt.asked)
			}
			if got := answeredFor(m); got != tt.answered {
				t.Errorf("answered for the client: %q, want %q", got, tt.answered)
			}
		})
	}
}

// answeredFor describes the answers the gateway gave servers for clients,
// "<answer>: <reason>" each, joined by "; ".
func answeredFor(m *upstreamtest.Manager) string {
	var out []string
	for _, a := range m.Answers() {
		out = append(out, a.Answer+": "+a.Reason)
	}
	return strings.Join(out, "; ")
}

func TestRelay_InputTimeoutAndPausedCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := upstreamtest.NewManager(inputServer("s", "elicitation/create", `{"message":"?","requestedSchema":{"type":"object"}}`, ""))
		// The call may take 1s; the client takes 3s to answer: the call's
		// clock is paused meanwhile, so the answer gets through.
		s := newCore(t, m, Options{CallTimeout: time.Second, InputTimeout: 10 * time.Second})
		text, err := callText(t, s, &Request{Client: Client{Capabilities: json.RawMessage(`{"elicitation":{}}`)},
			Input: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
				time.Sleep(3 * time.Second)
				return json.RawMessage(`{"action":"decline"}`), nil
			}})
		if err != nil || text != `{"action":"decline"}` {
			t.Fatalf("call = %q, %v", text, err)
		}
		// A client that never answers: after the input timeout the server
		// gets cancel, and the client's Input saw its context end.
		s2 := newCore(t, m, Options{CallTimeout: time.Hour, InputTimeout: 5 * time.Second})
		var inputErr error
		text, err = callText(t, s2, &Request{Client: Client{Capabilities: json.RawMessage(`{"elicitation":{}}`)},
			Input: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
				<-ctx.Done()
				inputErr = ctx.Err()
				return nil, ctx.Err()
			}})
		if err != nil || text != `{"action":"cancel"}` || !errors.Is(inputErr, context.DeadlineExceeded) {
			t.Fatalf("call = %q, %v; input err %v", text, err, inputErr)
		}
	})
}

func TestRelay_URLElicitation(t *testing.T) {
	url := `{"mode":"url","message":"Sign in","url":"https://x.example/auth","elicitationId":"up-1"}`
	tests := []struct {
		name   string
		server config.Server
		relay  bool
	}{
		{"shared: refused", config.Server{Name: "s"}, false},
		{"shared single user: relayed", config.Server{Name: "s", SingleUser: true}, true},
		{"per principal: relayed", config.Server{Name: "s", SessionMode: config.SessionPerPrincipal}, true},
		{"per session: relayed", config.Server{Name: "s", SessionMode: config.SessionPerSession}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := upstreamtest.NewManager(inputServer("s", "elicitation/create", url, ""))
			s := newCore(t, m, Options{Servers: []config.Server{tt.server}})
			rec := &recorder{}
			var gotParams string
			text, err := callText(t, s, &Request{Session: "x", SessionNotify: rec.sink, Client: Client{Capabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)},
				Input: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
					gotParams = string(params)
					return json.RawMessage(`{"action":"accept"}`), nil
				}})
			if !tt.relay {
				assertCode(t, err, CodeInputRefused, "URL-mode elicitation")
				return
			}
			if err != nil || text != `{"action":"accept"}` {
				t.Fatalf("call = %q, %v", text, err)
			}
			ours, _ := rawjson.String(json.RawMessage(gotParams), "elicitationId")
			if ours == "up-1" || !strings.HasPrefix(ours, "mcpgw-e-") {
				t.Fatalf("the client saw elicitationId %q, want one of the gateway's", ours)
			}
			// The server's completion reaches that session under our id.
			m.Notify("s", jsonrpc.NewNotification("notifications/elicitation/complete", json.RawMessage(`{"elicitationId":"up-1"}`)))
			m.Notify("s", jsonrpc.NewNotification("notifications/elicitation/complete", json.RawMessage(`{"elicitationId":"unknown"}`)))
			if diff := cmp.Diff([]string{`notifications/elicitation/complete {"elicitationId":"` + ours + `"}`}, rec.got()); diff != "" {
				t.Errorf("completion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRelay_URLElicitationRequiredError(t *testing.T) {
	errSrv := func(name string) *upstreamtest.Server {
		return &upstreamtest.Server{Name: name, Tools: raws(tool), Handle: func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
			return nil, &jsonrpc.Error{Code: -32042, Message: "auth needed", Data: json.RawMessage(`{"elicitations":[{"mode":"url","message":"m","url":"https://a.example","elicitationId":"up-9"}]}`)}
		}}
	}
	m := upstreamtest.NewManager(errSrv("s"), errSrv("u"))
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "s"}, {Name: "u", SingleUser: true}}})
	_, err := s.Handle(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__t"}`)})
	assertCode(t, err, CodeInputRefused, `server "s" asked for URL-mode elicitation`)
	_, err = s.Handle(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__u__t"}`)})
	jerr := assertCode(t, err, -32042, "auth needed")
	if strings.Contains(string(jerr.Data), "up-9") || !strings.Contains(string(jerr.Data), `"elicitationId":"mcpgw-e-`) {
		t.Errorf("-32042 data not re-minted: %s", jerr.Data)
	}
}

func TestRelay_Logging(t *testing.T) {
	var m *upstreamtest.Manager
	m = upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(tool),
		Handle: func(_ context.Context, _ string, _ json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			hooks.Notify(jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"debug","data":"d"}`)))
			hooks.Notify(jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"error","logger":"db","data":"e"}`)))
			return json.RawMessage(`{"content":[]}`), nil
		}})
	s := newCore(t, m, Options{})
	a, b := &recorder{}, &recorder{}
	setLevel := func(session, level string, sink func(string, json.RawMessage)) {
		t.Helper()
		if _, err := s.Handle(context.Background(), &Request{Method: "logging/setLevel", Session: session, SessionNotify: sink, Params: json.RawMessage(`{"level":"` + level + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	setLevel("a", "warning", a.sink)
	setLevel("b", "info", b.sink)
	_, err := s.Handle(context.Background(), &Request{Method: "logging/setLevel", Session: "a", Params: json.RawMessage(`{"level":"loud"}`)})
	assertCode(t, err, jsonrpc.CodeInvalidParams, "logging/setLevel needs params.level")

	// Unrelated messages go to the sessions whose level admits them.
	m.Notify("s", jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"i"}`)))
	m.Notify("s", jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"critical","data":"c"}`)))
	// A call's messages go only on that call, filtered by its session's level.
	call := &recorder{}
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Session: "a", Notify: call.sink, Params: json.RawMessage(`{"name":"mcp__s__t"}`)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`notifications/message {"level":"critical","data":"c","logger":"s"}`}, a.got()); diff != "" {
		t.Errorf("session a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`notifications/message {"level":"info","data":"i","logger":"s"}`, `notifications/message {"level":"critical","data":"c","logger":"s"}`}, b.got()); diff != "" {
		t.Errorf("session b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`notifications/message {"level":"error","logger":"s/db","data":"e"}`}, call.got()); diff != "" {
		t.Errorf("the call's own stream (-want +got):\n%s", diff)
	}
	// The servers get the lowest level any session asked for, again when
	// that session ends.
	s.EndSession("b")
	_, levels := m.Recorded()
	if diff := cmp.Diff([]string{"warning", "info", "warning"}, levels); diff != "" {
		t.Errorf("levels set upstream (-want +got):\n%s", diff)
	}
}

func TestRelay_OtherNotifications(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "quiet"}, &upstreamtest.Server{Name: "loud"})
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "quiet"}, {Name: "loud", ForwardNotifications: true}}})
	rec := &recorder{}
	if _, err := s.Handle(context.Background(), &Request{Method: "ping", Session: "x", SessionNotify: rec.sink}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // repeats within the window are folded
		m.Notify("quiet", jsonrpc.NewNotification("event/build", json.RawMessage(`{"status":"ok"}`)))
	}
	m.Notify("quiet", jsonrpc.NewNotification("event/build", json.RawMessage(`{"status":"failed","_meta":{"dedup_key":"b1"}}`)))
	m.Notify("quiet", jsonrpc.NewNotification("event/build", json.RawMessage(`{"status":"failed again","_meta":{"dedup_key":"b1"}}`)))
	m.Notify("loud", jsonrpc.NewNotification("event/deploy", json.RawMessage(`{"v":2}`)))
	events := s.Events()
	if len(events) != 3 || events[0].Repeats != 2 || events[1].Repeats != 1 || events[2].Server != "loud" {
		t.Errorf("events = %+v", events)
	}
	if diff := cmp.Diff([]string{`event/deploy {"v":2}`}, rec.got()); diff != "" {
		t.Errorf("forwarded (-want +got):\n%s", diff)
	}
	s.EndSession("x")
	m.Notify("loud", jsonrpc.NewNotification("event/deploy", json.RawMessage(`{"v":3}`)))
	if len(rec.got()) != 1 {
		t.Error("an ended session still gets forwarded notifications")
	}
}

func TestEventStore_Bounded(t *testing.T) {
	e := newEventStore(3, time.Minute)
	if len(e.ring) != 0 {
		t.Errorf("a new ring holds %d slots, want none until events come", len(e.ring))
	}
	for i := range 5 {
		e.add("s", "event/x", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
		// The ring grows with the events up to its size, oldest first.
		got := e.list()
		if n := min(i+1, 3); len(got) != n || len(e.ring) != n || string(got[n-1].Params) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("after %d events: ring of %d, list = %+v", i+1, len(e.ring), got)
		}
	}
	got := e.list()
	if len(got) != 3 || string(got[0].Params) != `{"i":2}` || string(got[2].Params) != `{"i":4}` {
		t.Errorf("list = %+v", got)
	}
	// An evicted event's key no longer folds a new copy into another slot.
	if !e.add("s", "event/x", json.RawMessage(`{"i":0}`)) {
		t.Error("a copy of an evicted event was folded")
	}
}

// TestWithProgress checks the one copy of a call's params the core makes:
// the rename and our progress token set together, the client's token
// kept for the route (and forgotten), and the cases left alone.
func TestWithProgress(t *testing.T) {
	notify := func(string, json.RawMessage) {}
	rename := rawjson.Edit{Key: "name", Val: json.RawMessage(`"read"`)}
	tests := []struct {
		name, params string
		notify       func(string, json.RawMessage)
		rename       *rawjson.Edit
		want         string // with mcpgw-p-N written as TOKEN
		route        string // the client's token kept, "" for none
		err          bool
	}{
		{"rename and token", `{"name":"mcp__s__read","_meta":{"progressToken":"c-1"}}`, notify, &rename,
			`{"name":"read","_meta":{"progressToken":"TOKEN"}}`, `"c-1"`, false},
		{"token alone", `{"_meta":{"progressToken":7,"x":1}}`, notify, nil, `{"_meta":{"progressToken":"TOKEN","x":1}}`, `7`, false},
		{"rename alone", `{"name":"mcp__s__read","arguments":{}}`, notify, &rename, `{"name":"read","arguments":{}}`, "", false},
		{"nobody to notify: token kept", `{"_meta":{"progressToken":"c"}}`, nil, nil, `{"_meta":{"progressToken":"c"}}`, "", false},
		{"nothing to change", `{"name":"read"}`, nil, nil, `{"name":"read"}`, "", false},
		{"not an object", `[1]`, notify, &rename, ``, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r relay
			r.init()
			params := json.RawMessage(tt.params)
			out, forget, err := r.withProgress(params, metaOf(params), tt.notify, tt.rename)
			if tt.err {
				if err == nil {
					t.Fatalf("withProgress = %s, want an error", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ours string
			for k := range r.progress {
				ours = k
			}
			if got := string(out); got != strings.ReplaceAll(tt.want, "TOKEN", ours) {
				t.Errorf("params %s, want %s (token %q)", got, tt.want, ours)
			}
			// With nothing to change there is no copy at all.
			if tt.rename == nil && tt.route == "" && &out[0] != &params[0] {
				t.Error("withProgress copied params it did not change")
			}
			if tt.route == "" {
				if len(r.progress) != 0 {
					t.Errorf("routes %v, want none", r.progress)
				}
			} else if len(r.progress) != 1 || string(r.progress[ours].token) != tt.route {
				t.Errorf("route for %q: %+v, want the client's %s", ours, r.progress[ours], tt.route)
			}
			forget()
			if len(r.progress) != 0 {
				t.Errorf("forget left %d routes", len(r.progress))
			}
		})
	}
}

// metaOf is params' _meta member, as withProgress's callers read it.
func metaOf(params json.RawMessage) json.RawMessage {
	meta, _, _ := rawjson.Get(params, "_meta")
	return meta
}

// TestRelay_RequestCancel checks a call whose edge gives the request's
// cancel (Request.Cancel): its timeout ends the request's own context,
// with the timer's cause, and still answers with the timeout's error; an
// answered call leaves that context alone; a refused URL-mode elicitation
// is refused, not dropped. Without Cancel the request's context is never
// ended by the core.
func TestRelay_RequestCancel(t *testing.T) {
	url := `{"mode":"url","message":"Sign in","url":"https://x.example/auth","elicitationId":"up-1"}`
	tests := []struct {
		name      string
		server    *upstreamtest.Server
		shared    bool
		wantCode  int   // 0: answered
		wantCause error // of the request's context once Handle returns
	}{
		{"timeout, shared", blockingServer(), true, CodeUpstreamTimeout, errCallTimeout},
		{"timeout, own context", blockingServer(), false, CodeUpstreamTimeout, nil},
		{"answered, shared", &upstreamtest.Server{Name: "s", Tools: raws(tool), Handle: echoServer("s")}, true, 0, nil},
		{"answered, own context", &upstreamtest.Server{Name: "s", Tools: raws(tool), Handle: echoServer("s")}, false, 0, nil},
		{"URL elicitation refused, shared", inputServer("s", "elicitation/create", url, ""), true, CodeInputRefused, errURLElicitation},
		{"URL elicitation refused, own context", inputServer("s", "elicitation/create", url, ""), false, CodeInputRefused, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newCore(t, upstreamtest.NewManager(tt.server), Options{CallTimeout: time.Second})
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				req := &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__t"}`), Session: "x",
					Client: Client{Capabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)},
					Input: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
						return json.RawMessage(`{"action":"accept"}`), nil
					}}
				if tt.shared {
					req.Cancel = cancel
				}
				res, err := s.Handle(ctx, req)
				if tt.wantCode == 0 {
					if err != nil || res == nil {
						t.Fatalf("Handle = %v, %v; want an answer", res, err)
					}
				} else {
					assertCode(t, err, tt.wantCode, "")
				}
				if got := context.Cause(ctx); got != tt.wantCause {
					t.Errorf("the request's context ended with %v, want %v", got, tt.wantCause)
				}
			})
		})
	}
}

// blockingServer's tool answers when its call's context ends.
func blockingServer() *upstreamtest.Server {
	return &upstreamtest.Server{Name: "s", Tools: raws(tool),
		Handle: func(ctx context.Context, _ string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}}
}
