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

// testSession is a downstream session as the core sees it, with a
// SessionInput that records what it was asked and answers answer.
type testSession struct {
	id, principal string
	caps          string
	answer        string // "" leaves SessionInput nil
	calls         bool   // the session calls server "s"'s tool t
	mu            sync.Mutex
	asked         []string // "<method> <params>"
}

func (ts *testSession) input(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.asked = append(ts.asked, method+" "+string(params))
	return json.RawMessage(ts.answer), nil
}

func (ts *testSession) got() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.asked...)
}

// open has the core meet ts (a session is known from its first request).
func (ts *testSession) open(t *testing.T, s *Server) {
	t.Helper()
	req := &Request{Method: "ping", Session: ts.id, Principal: ts.principal,
		Client:        Client{Capabilities: json.RawMessage(ts.caps)},
		SessionNotify: func(string, json.RawMessage) {}}
	if ts.answer != "" {
		req.SessionInput = ts.input
	}
	if _, err := s.Handle(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if ts.calls {
		call := *req
		call.Method, call.Params = "tools/call", json.RawMessage(`{"name":"mcp__s__t"}`)
		if _, err := s.Handle(context.Background(), &call); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerRequest_Owner sends requests as a server's upstream session
// would outside any call: the one client session that owns the upstream
// session is asked through its SessionInput, under the same rules as a
// call's client; with no owner, or one that cannot be asked, the gateway
// answers for it and says why.
func TestServerRequest_Owner(t *testing.T) {
	const (
		form     = `{"message":"Name?","requestedSchema":{"type":"object"}}`
		accepted = `{"action":"accept","content":{"n":"x"}}`
		myRoots  = `{"roots":[{"uri":"file:///mine"}]}`
	)
	perSession := config.Server{Name: "s", SessionMode: config.SessionPerSession}
	perPrincipal := config.Server{Name: "s", SessionMode: config.SessionPerPrincipal}
	shared := config.Server{Name: "s"}
	singleUser := config.Server{Name: "s", SingleUser: true}
	alice := func(id string) *testSession {
		return &testSession{id: id, principal: "alice", caps: `{"elicitation":{},"roots":{}}`, answer: accepted}
	}
	caller := func(ts *testSession) *testSession { ts.calls = true; return ts }
	tests := []struct {
		name     string
		server   config.Server
		roots    []config.Root
		sessions []*testSession
		ended    string // a session ended before the request
		late     bool   // and one of its requests came after it ended
		who      upstream.Caller
		method   string
		params   string
		want     string // what the server gets
		asked    string // the session asked, "" for none
		answered string // "<answer>: <reason>" when the gateway answered
	}{
		{name: "per_session: its session", server: perSession, sessions: []*testSession{alice("a1"), alice("a2")},
			who: upstream.Caller{Principal: "alice", Session: "a2"}, method: "elicitation/create", params: form, want: accepted, asked: "a2"},
		{name: "per_session: roots from the client", server: perSession, roots: []config.Root{{URI: "file:///srv"}},
			sessions: []*testSession{{id: "a1", principal: "alice", caps: `{"roots":{"listChanged":true}}`, answer: myRoots}},
			who:      upstream.Caller{Principal: "alice", Session: "a1"}, method: "roots/list", params: `{}`, want: myRoots, asked: "a1"},
		{name: "per_session: no elicitation declared", server: perSession,
			sessions: []*testSession{{id: "a1", principal: "alice", caps: `{"roots":{}}`, answer: accepted}},
			who:      upstream.Caller{Principal: "alice", Session: "a1"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the client did not declare elicitation"},
		{name: "per_session: no roots declared, from config", server: perSession, roots: []config.Root{{URI: "file:///srv", Name: "srv"}, {URI: "file:///tmp"}},
			sessions: []*testSession{{id: "a1", principal: "alice", caps: `{"elicitation":{}}`, answer: accepted}},
			who:      upstream.Caller{Principal: "alice", Session: "a1"}, method: "roots/list", params: `{}`,
			want: `{"roots":[{"uri":"file:///srv","name":"srv"},{"uri":"file:///tmp"}]}`, answered: "2 roots from config: the client did not declare roots"},
		{name: "per_session: the session ended", server: perSession, sessions: []*testSession{alice("a1")}, ended: "a1",
			who: upstream.Caller{Principal: "alice", Session: "a1"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the client's session has ended"},
		{name: "per_session: the session ended, one of its requests came later", server: perSession, sessions: []*testSession{alice("a1")}, ended: "a1", late: true,
			who: upstream.Caller{Principal: "alice", Session: "a1"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the client's session has ended"},
		{name: "per_session: the upstream session of another principal", server: perSession, sessions: []*testSession{alice("a1")},
			who: upstream.Caller{Principal: "mallory", Session: "a1"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the client's session has ended"},
		{name: "per_session: the session cannot be asked outside its calls", server: perSession,
			sessions: []*testSession{{id: "a1", principal: "alice", caps: `{"elicitation":{}}`}},
			who:      upstream.Caller{Principal: "alice", Session: "a1"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the client cannot be asked outside its calls"},
		{name: "per_session: the list reader", server: perSession, sessions: []*testSession{alice("a1")},
			method: "roots/list", params: `{}`,
			want: `{"roots":[]}`, answered: "an empty list (no roots configured): no client owns the upstream session that reads the server's lists"},
		{name: "per_principal: the principal's one session", server: perPrincipal,
			sessions: []*testSession{alice("a1"), {id: "b1", principal: "bob", caps: `{"elicitation":{}}`, answer: accepted}},
			who:      upstream.Caller{Principal: "alice"}, method: "elicitation/create", params: form, want: accepted, asked: "a1"},
		{name: "per_principal: two sessions of the principal", server: perPrincipal, sessions: []*testSession{alice("a1"), alice("a2")},
			who: upstream.Caller{Principal: "alice"}, method: "sampling/createMessage", params: `{"messages":[],"maxTokens":5}`,
			want: "error -32603: mcpgw has no client to ask for sampling/createMessage: several client sessions share the upstream session", answered: "an error: several client sessions share the upstream session"},
		{name: "per_principal: no session of the principal", server: perPrincipal, sessions: []*testSession{alice("a1")},
			who: upstream.Caller{Principal: "carol"}, method: "elicitation/create", params: form,
			want: `{"action":"cancel"}`, answered: "cancel: the principal has no open session"},
		{name: "shared: nobody, even with one session", server: shared, sessions: []*testSession{alice("a1")},
			method: "elicitation/create", params: form, want: `{"action":"cancel"}`, answered: "cancel: no one client owns the shared upstream session"},
		{name: "shared: roots from config", server: shared, roots: []config.Root{{URI: "file:///srv"}}, sessions: []*testSession{alice("a1")},
			method: "roots/list", params: `{}`, want: `{"roots":[{"uri":"file:///srv"}]}`, answered: "1 root from config: no one client owns the shared upstream session"},
		{name: "single_user: the one session that called it", server: singleUser,
			sessions: []*testSession{caller(alice("a1")), {id: "b1", principal: "bob", caps: `{"elicitation":{}}`, answer: accepted}},
			method:   "elicitation/create", params: form, want: accepted, asked: "a1"},
		{name: "single_user: URL mode relayed, id re-minted", server: singleUser,
			sessions: []*testSession{{id: "a1", principal: "alice", caps: `{"elicitation":{"url":{}}}`, answer: `{"action":"accept"}`, calls: true}},
			method:   "elicitation/create", params: `{"mode":"url","message":"Sign in","url":"https://x.example/","elicitationId":"up-1"}`,
			want: `{"action":"accept"}`, asked: "a1"},
		{name: "single_user: two sessions called it", server: singleUser, sessions: []*testSession{caller(alice("a1")), caller(alice("a2"))},
			method: "elicitation/create", params: form, want: `{"action":"cancel"}`, answered: "cancel: several client sessions share the upstream session"},
		{name: "single_user: the only session never called it", server: singleUser, sessions: []*testSession{alice("a1")},
			method: "elicitation/create", params: form, want: `{"action":"cancel"}`, answered: "cancel: no open client session has called the single-user server"},
		{name: "a method it does not relay", server: perSession, sessions: []*testSession{alice("a1")},
			who: upstream.Caller{Principal: "alice", Session: "a1"}, method: "tools/list", params: `{}`,
			want: `error -32601: mcpgw does not relay tools/list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Roots: tt.roots, Tools: raws(tool)})
			s := newCore(t, m, Options{Servers: []config.Server{tt.server}})
			for _, ts := range tt.sessions {
				ts.open(t, s)
			}
			if tt.ended != "" {
				s.EndSession(tt.ended)
				if tt.late {
					for _, ts := range tt.sessions {
						if ts.id == tt.ended {
							ts.open(t, s) // a request that was under way
						}
					}
				}
			}
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			res, err := m.Request(context.Background(), "s", tt.who, jsonrpc.NewRequest(jsonrpc.IntID(1), tt.method, params))
			got := string(res)
			var jerr *jsonrpc.Error
			if errors.As(err, &jerr) {
				got = "error " + jsonrpcCode(jerr) + ": " + jerr.Message
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("the server got %s, want %s", got, tt.want)
			}
			for _, ts := range tt.sessions {
				asked := ts.got()
				if ts.id != tt.asked {
					if len(asked) > 0 {
						t.Errorf("session %s was asked %q", ts.id, asked)
					}
					continue
				}
				if len(asked) != 1 || !strings.HasPrefix(asked[0], tt.method+" ") {
					t.Fatalf("session %s was asked %q, want one %s", ts.id, asked, tt.method)
				}
				sent := json.RawMessage(strings.TrimPrefix(asked[0], tt.method+" "))
				if id, ok := rawjson.String(sent, "elicitationId"); ok {
					if !strings.HasPrefix(id, "mcpgw-e-") {
						t.Errorf("the client got the server's elicitation id %q", id)
					}
				} else if string(sent) != tt.params {
					t.Errorf("the client got %s, want %s", sent, tt.params)
				}
			}
			if got := answeredFor(m); got != tt.answered {
				t.Errorf("answered for the client: %q, want %q", got, tt.answered)
			}
		})
	}
}

func jsonrpcCode(e *jsonrpc.Error) string {
	b, _ := json.Marshal(e.Code)
	return string(b)
}

// TestServerRequest_InputTimeout: a session that does not answer within
// the input timeout has its SessionInput's context end, and the server
// gets the gateway's answer.
func TestServerRequest_InputTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s"})
		s := newCore(t, m, Options{InputTimeout: 5 * time.Second, Servers: []config.Server{{Name: "s", SessionMode: config.SessionPerSession}}})
		var ended error
		req := &Request{Method: "ping", Session: "a1", Principal: "alice", Client: Client{Capabilities: json.RawMessage(`{"elicitation":{}}`)},
			SessionInput: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
				<-ctx.Done()
				ended = context.Cause(ctx)
				return nil, ctx.Err()
			}}
		if _, err := s.Handle(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		res, err := m.Request(context.Background(), "s", upstream.Caller{Principal: "alice", Session: "a1"},
			jsonrpc.NewRequest(jsonrpc.IntID(1), "elicitation/create", json.RawMessage(`{"message":"?","requestedSchema":{"type":"object"}}`)))
		if err != nil || string(res) != `{"action":"cancel"}` {
			t.Fatalf("the server got %s, %v; want cancel", res, err)
		}
		if ended != errInputTimeout {
			t.Errorf("SessionInput's context ended with %v, want the input timeout", ended)
		}
		if got, want := answeredFor(m), "cancel: the client did not answer within input_timeout"; got != want {
			t.Errorf("answered for the client: %q, want %q", got, want)
		}
	})
}

// TestServerRequest_RootsChanged: a client's notifications/roots/list_changed
// goes to the upstream sessions its session owns, and to no other.
func TestServerRequest_RootsChanged(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "ps"}, &upstreamtest.Server{Name: "pp"},
		&upstreamtest.Server{Name: "su", Tools: raws(tool)}, &upstreamtest.Server{Name: "sh"})
	s := newCore(t, m, Options{Servers: []config.Server{
		{Name: "ps", SessionMode: config.SessionPerSession},
		{Name: "pp", SessionMode: config.SessionPerPrincipal},
		{Name: "su", SingleUser: true},
		{Name: "sh"},
	}})
	notified := func() []string {
		var out []string
		for _, n := range m.Notifications() {
			out = append(out, n.Server+" "+n.Who.Principal+"/"+n.Who.Session+" "+n.Method)
		}
		return out
	}

	s.RootsChanged("a1") // unknown: it owns nothing
	s.bg.Wait()
	if got := notified(); len(got) > 0 {
		t.Fatalf("an unknown session's list_changed went to %q", got)
	}
	(&testSession{id: "a1", principal: "alice", caps: `{"roots":{"listChanged":true}}`}).open(t, s)
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Session: "a1", Principal: "alice",
		Params: json.RawMessage(`{"name":"mcp__su__t"}`)}); err != nil {
		t.Fatal(err)
	}
	s.RootsChanged("a1")
	s.bg.Wait() // it works in the background
	want := []string{
		"pp alice/ notifications/roots/list_changed",
		"ps alice/a1 notifications/roots/list_changed",
		"su / notifications/roots/list_changed",
	}
	if diff := cmp.Diff(want, notified()); diff != "" {
		t.Errorf("with one session (-want +got):\n%s", diff)
	}

	// A second session of the same principal, which called su too: only
	// a1's own per_session upstream session is still a1's alone.
	(&testSession{id: "a2", principal: "alice", caps: `{"roots":{}}`}).open(t, s)
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Session: "a2", Principal: "alice",
		Params: json.RawMessage(`{"name":"mcp__su__t"}`)}); err != nil {
		t.Fatal(err)
	}
	s.RootsChanged("a1")
	s.bg.Wait()
	want = append(want, "ps alice/a1 notifications/roots/list_changed")
	if diff := cmp.Diff(want, notified()); diff != "" {
		t.Errorf("with two sessions (-want +got):\n%s", diff)
	}
}

// TestServerRequest_Bounded: a session is asked at most maxAsking requests
// outside its calls at once; the server gets the gateway's answer for the
// rest until one is answered.
func TestServerRequest_Bounded(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s"})
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "s", SessionMode: config.SessionPerSession}}})
	asked, release := make(chan struct{}, maxAsking), make(chan struct{})
	req := &Request{Method: "ping", Session: "a1", Principal: "alice", Client: Client{Capabilities: json.RawMessage(`{"roots":{}}`)},
		SessionInput: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
			asked <- struct{}{}
			<-release
			return json.RawMessage(`{"roots":[{"uri":"file:///mine"}]}`), nil
		}}
	if _, err := s.Handle(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	who := upstream.Caller{Principal: "alice", Session: "a1"}
	roots := func() (string, error) {
		res, err := m.Request(context.Background(), "s", who, jsonrpc.NewRequest(jsonrpc.IntID(1), "roots/list", nil))
		return string(res), err
	}
	var wg sync.WaitGroup
	for range maxAsking {
		wg.Go(func() {
			if got, err := roots(); err != nil || got != `{"roots":[{"uri":"file:///mine"}]}` {
				t.Errorf("a request within the bound got %s, %v", got, err)
			}
		})
		<-asked
	}
	if got, err := roots(); err != nil || got != `{"roots":[]}` {
		t.Errorf("the request over the bound got %s, %v; want the gateway's answer", got, err)
	}
	if got, want := answeredFor(m), "an empty list (no roots configured): "+reasonBusy; got != want {
		t.Errorf("answered for the client: %q, want %q", got, want)
	}
	close(release)
	wg.Wait()
	if got, err := roots(); err != nil || got != `{"roots":[{"uri":"file:///mine"}]}` {
		t.Errorf("once answered, a request got %s, %v", got, err)
	}
}

// TestServerRequest_CallOver: a request taken for a call's whose Input
// says the call was over (over stdio, the call answered as the request
// came) is asked of the session that owns the upstream session, outside
// any call.
func TestServerRequest_CallOver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server config.Server
		other  bool   // alice has a second session, b1
		want   string // what the server gets: the session's answer, or the gateway's
		asked  bool   // the calling session was asked
	}{
		{name: "per_session: the session", server: config.Server{Name: "s", SessionMode: config.SessionPerSession}, other: true,
			want: `{"roots":[{"uri":"file:///mine"}]}`, asked: true},
		{name: "per_principal, one session: it", server: config.Server{Name: "s", SessionMode: config.SessionPerPrincipal},
			want: `{"roots":[{"uri":"file:///mine"}]}`, asked: true},
		{name: "per_principal, two sessions: nobody", server: config.Server{Name: "s", SessionMode: config.SessionPerPrincipal}, other: true,
			want: `{"roots":[]}`},
		{name: "shared: nobody", server: config.Server{Name: "s"},
			want: `{"roots":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := upstreamtest.NewManager(inputServer("s", "roots/list", `{}`, ""))
			s := newCore(t, m, Options{Servers: []config.Server{tc.server}})
			ts := &testSession{id: "a1", principal: "alice", caps: `{"roots":{}}`, answer: `{"roots":[{"uri":"file:///mine"}]}`}
			ts.open(t, s)
			if tc.other {
				(&testSession{id: "b1", principal: "alice", caps: `{"roots":{}}`, answer: `{"roots":[{"uri":"file:///other"}]}`}).open(t, s)
			}
			text, err := callText(t, s, &Request{Session: "a1", Principal: "alice", Client: Client{Capabilities: json.RawMessage(ts.caps)},
				SessionNotify: func(string, json.RawMessage) {}, SessionInput: ts.input,
				Input: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
					return nil, fmt.Errorf("too late: %w", ErrCallOver)
				}})
			if err != nil || text != tc.want {
				t.Errorf("the server got %q, %v; want %s", text, err, tc.want)
			}
			var want []string
			if tc.asked {
				want = []string{"roots/list {}"}
			}
			if diff := cmp.Diff(want, ts.got()); diff != "" {
				t.Errorf("the session was asked (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCallTimer_ResumeAfterStop: an input request that outlives its call
// resumes the call's clock after the call stopped it; the clock stays
// stopped, and never ends the request's context afterwards.
func TestCallTimer_ResumeAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		timer := newCallTimer(ctx, cancel, time.Second)
		timer.pause()
		timer.stop()
		timer.resume()
		time.Sleep(time.Hour)
		if cause := context.Cause(ctx); cause != nil {
			t.Errorf("the request's context ended with %v after its call was over", cause)
		}
	})
}
