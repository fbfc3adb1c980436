package legacy

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// perSessionEnv is an env whose server "a" (the fake, or srv when not
// nil) has session_mode per_session, with a session whose client declares
// allCaps and that the core knows (it sent a request). It returns the
// session's id and the Caller of its upstream session.
func perSessionEnv(t *testing.T, coreOpts gateway.Options, srv ...*upstreamtest.Server) (*env, string, upstream.Caller) {
	t.Helper()
	coreOpts.Servers = []config.Server{{Name: "a", SessionMode: config.SessionPerSession}}
	e := newEnvCore(t, Options{}, coreOpts)
	for _, s := range srv {
		e.mgr.Set(s) // before the session: its list change is no news to it
	}
	sid := e.initializeCaps(V20251125, allCaps)
	if m := lastMessage(t, e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)); m.Error != nil {
		t.Fatalf("ping: %+v", m.Error)
	}
	return e, sid, upstream.Caller{Principal: gateway.Anonymous, Session: e.session(sid).key}
}

// serverAsks sends a request as the upstream session of who would outside
// any call, in the background; the channel gets what the server got.
func serverAsks(e *env, who upstream.Caller, ctx context.Context, method, params string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		res, err := e.mgr.Request(ctx, "a", who, jsonrpc.NewRequest(jsonrpc.IntID(7), method, json.RawMessage(params)))
		if err != nil {
			ch <- "error " + err.Error()
			return
		}
		ch <- string(res)
	}()
	return ch
}

// TestSessionInput checks a request that belongs to no call of the session
// that owns its upstream session: it goes on the session's GET stream
// under an id of the gateway's, and the client's POSTed answer (a result
// or its own error) reaches the server.
func TestSessionInput(t *testing.T) {
	tests := []struct {
		name, method, params, answer, want string
	}{
		{"roots", "roots/list", `{}`, `"result":{"roots":[{"uri":"file:///c"}]}`, `{"roots":[{"uri":"file:///c"}]}`},
		{"elicitation", "elicitation/create", elicitForm, `"result":{"action":"accept","content":{"name":"Ada"}}`, `{"action":"accept","content":{"name":"Ada"}}`},
		{"the client's error", "sampling/createMessage", sampleParams, `"error":{"code":-1,"message":"no model"}`, "error jsonrpc error -1: no model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, sid, who := perSessionEnv(t, gateway.Options{})
			get := newReader(e.do(e.request(http.MethodGet, sid, "")))
			if d := describe(t, next(t, get)); d != "priming" {
				t.Fatalf("first GET event %s, want priming", d)
			}
			got := serverAsks(e, who, context.Background(), tt.method, tt.params)
			ev := next(t, get)
			if want := `request "mcpgw-1" ` + tt.method + " " + tt.params; describe(t, ev) != want {
				t.Fatalf("GET stream event %s, want %s", describe(t, ev), want)
			}
			if num, _, _ := parseEventID(ev.ID); num != 0 {
				t.Errorf("event id %q is not on stream 0", ev.ID)
			}
			e.reply(sid, `"mcpgw-1"`, tt.answer)
			if g := <-got; g != tt.want {
				t.Errorf("the server got %s, want %s", g, tt.want)
			}
			if n := e.pendingInputs(sid); n != 0 {
				t.Errorf("%d input requests left", n)
			}
		})
	}
}

// TestSessionInput_BeforeGET: a request that comes before the session
// opened its GET stream waits in stream 0's buffer, and the GET delivers
// it first.
func TestSessionInput_BeforeGET(t *testing.T) {
	e, sid, who := perSessionEnv(t, gateway.Options{})
	got := serverAsks(e, who, context.Background(), "roots/list", `{}`)
	waitFor(t, "the input request", func() bool { return e.pendingInputs(sid) == 1 })
	get := newReader(e.do(e.request(http.MethodGet, sid, "")))
	if d := describe(t, next(t, get)); d != `request "mcpgw-1" roots/list {}` {
		t.Fatalf("first GET event %s, want the request", d)
	}
	if d := describe(t, next(t, get)); d != "priming" {
		t.Fatalf("second GET event %s, want priming", d)
	}
	e.reply(sid, `"mcpgw-1"`, `"result":{"roots":[]}`)
	if g := <-got; g != `{"roots":[]}` {
		t.Errorf("the server got %s", g)
	}
}

// TestSessionInput_Ended: what ends the wait first, the input timeout or
// the server's cancellation, tells the client with notifications/cancelled
// on stream 0 and gives the server the gateway's answer; so does the end
// of the session, whose GET stream ends.
func TestSessionInput_Ended(t *testing.T) {
	cancelled := func(reason string) string {
		return `notifications/cancelled {"requestId":"mcpgw-1","reason":"` + reason + `"}`
	}
	t.Run("input timeout", func(t *testing.T) {
		e, sid, who := perSessionEnv(t, gateway.Options{InputTimeout: 50 * time.Millisecond})
		get := newReader(e.do(e.request(http.MethodGet, sid, "")))
		next(t, get) // priming
		got := serverAsks(e, who, context.Background(), "elicitation/create", elicitForm)
		if diff := cmp.Diff([]string{`request "mcpgw-1" elicitation/create ` + elicitForm, cancelled("timeout")}, nextN(t, get, 2)); diff != "" {
			t.Errorf("GET events (-want +got):\n%s", diff)
		}
		if g := <-got; g != `{"action":"cancel"}` {
			t.Errorf("the server got %s, want the gateway's cancel", g)
		}
	})
	t.Run("the server cancels", func(t *testing.T) {
		e, sid, who := perSessionEnv(t, gateway.Options{})
		get := newReader(e.do(e.request(http.MethodGet, sid, "")))
		next(t, get) // priming
		ctx, cancel := context.WithCancel(context.Background())
		got := serverAsks(e, who, ctx, "elicitation/create", elicitForm)
		if d := describe(t, next(t, get)); d != `request "mcpgw-1" elicitation/create `+elicitForm {
			t.Fatalf("GET event %s", d)
		}
		cancel()
		if d := describe(t, next(t, get)); d != cancelled("cancelled") {
			t.Errorf("GET event %s, want the cancellation", d)
		}
		<-got
		// A late answer reaches nothing.
		e.reply(sid, `"mcpgw-1"`, `"result":{"action":"accept"}`)
	})
	t.Run("the session ends", func(t *testing.T) {
		e, sid, who := perSessionEnv(t, gateway.Options{})
		get := newReader(e.do(e.request(http.MethodGet, sid, "")))
		next(t, get) // priming
		got := serverAsks(e, who, context.Background(), "elicitation/create", elicitForm)
		next(t, get) // the request
		if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
			t.Fatalf("DELETE: %d", r.StatusCode)
		}
		if g := <-got; g != `{"action":"cancel"}` {
			t.Errorf("the server got %s, want the gateway's cancel", g)
		}
		if evs := rest(t, get); len(evs) != 0 {
			t.Errorf("GET events after DELETE: %q", evs)
		}
	})
}

// nextN reads n events, described.
func nextN(t *testing.T, rd *sse.Reader, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = describe(t, next(t, rd))
	}
	return out
}

// TestRootsListChanged: a client's notifications/roots/list_changed gets
// 202 and reaches the upstream session its session owns.
func TestRootsListChanged(t *testing.T) {
	e, sid, who := perSessionEnv(t, gateway.Options{})
	resp := e.post(sid, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusAccepted || body != "" {
		t.Fatalf("status %d, body %q; want 202", resp.StatusCode, body)
	}
	var got []string
	// The core passes it on in the background.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range e.mgr.WaitNotifications(ctx, 1) {
		got = append(got, n.Server+" "+n.Who.Principal+"/"+n.Who.Session+" "+n.Method)
	}
	want := []string{"a " + who.Principal + "/" + who.Session + " notifications/roots/list_changed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications sent upstream (-want +got):\n%s", diff)
	}
}

// TestInputOutlivesItsCall: a server's request that came during a call
// (over stdio, one that is only taken for the call's because that call is
// the only one in flight) still waits for the client's answer when the
// call answers first: the server is waiting for it, not the call.
func TestInputOutlivesItsCall(t *testing.T) {
	e := newEnv(t, Options{})
	answered, release := make(chan string, 1), make(chan struct{})
	e.mgr.Set(&upstreamtest.Server{Name: "a", Tools: []json.RawMessage{plainTool("later")},
		Handle: func(_ context.Context, _ string, _ json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			go func() {
				res, err := hooks.Request(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(3), "elicitation/create", json.RawMessage(elicitForm)))
				if err != nil {
					answered <- "error " + err.Error()
					return
				}
				answered <- string(res)
			}()
			<-release
			return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
		}})
	sid := e.initializeCaps(V20251125, allCaps)
	rd := newReader(e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__later"}}`))
	until(t, rd, `request "mcpgw-1" elicitation/create`)
	close(release)
	if diff := cmp.Diff([]string{"response 1 done"}, rest(t, rd)); diff != "" {
		t.Errorf("the call's stream (-want +got):\n%s", diff)
	}
	e.reply(sid, `"mcpgw-1"`, `"result":{"action":"accept","content":{"name":"Ada"}}`)
	if got := <-answered; got != `{"action":"accept","content":{"name":"Ada"}}` {
		t.Errorf("the server got %s, want the client's answer", got)
	}
}

// TestInputAfterItsCall: a request taken for a call's (over stdio, the
// call in flight when it came) that reaches the edge only once the call
// answered goes to the session that owns the upstream session, on its GET
// stream, as a request outside any call.
func TestInputAfterItsCall(t *testing.T) {
	answered, over := make(chan string, 1), make(chan struct{})
	e, sid, _ := perSessionEnv(t, gateway.Options{}, &upstreamtest.Server{Name: "a", Tools: []json.RawMessage{plainTool("later")},
		Handle: func(_ context.Context, _ string, _ json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			go func() {
				<-over
				res, err := hooks.Request(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(3), "roots/list", nil))
				if err != nil {
					answered <- "error " + err.Error()
					return
				}
				answered <- string(res)
			}()
			return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
		}})
	get := newReader(e.do(e.request(http.MethodGet, sid, "")))
	next(t, get) // priming
	if m := lastMessage(t, e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__later"}}`)); m.Error != nil {
		t.Fatalf("tools/call: %+v", m.Error)
	}
	events := make(chan sse.Event, 1)
	go func() {
		if ev, err := get.Next(); err == nil {
			events <- ev
		}
	}()
	close(over)
	select {
	case got := <-answered:
		t.Fatalf("the server got %s, and the client was not asked", got)
	case ev := <-events:
		if d := describe(t, ev); d != `request "mcpgw-1" roots/list` {
			t.Fatalf("GET event %s, want the request", d)
		}
	}
	e.reply(sid, `"mcpgw-1"`, `"result":{"roots":[{"uri":"file:///c"}]}`)
	if got := <-answered; got != `{"roots":[{"uri":"file:///c"}]}` {
		t.Errorf("the server got %s, want the client's roots", got)
	}
}
