package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// capsHTTP is a legacy streamable-HTTP server that keeps any number of
// sessions: it records the capabilities each session's initialize
// declared and its credentials, the session each request came on, and the
// sessions deleted.
type capsHTTP struct {
	t *testing.T

	mu      sync.Mutex
	n       int
	caps    map[string]string // session → declared capabilities, compact
	auth    map[string]string // session → Authorization
	deleted map[string]bool
	last    map[string]string // method → the session of its last request
}

func newCapsHTTP(t *testing.T) (*capsHTTP, string) {
	f := &capsHTTP{t: t, caps: map[string]string{}, auth: map[string]string{}, deleted: map[string]bool{}, last: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *capsHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	defer f.mu.Unlock()
	_, known := f.caps[sid]
	switch r.Method {
	case http.MethodGet:
		http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		f.deleted[sid] = true
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.ParseOne(body)
	if err != nil {
		f.t.Errorf("POST body %s: %v", body, err)
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	if m.Method == "initialize" {
		f.n++
		sid = fmt.Sprintf("session-%d", f.n)
		caps, _, _ := rawjson.Get(m.Params, "capabilities")
		var buf bytes.Buffer
		if err := json.Compact(&buf, caps); err != nil {
			f.t.Errorf("initialize capabilities %s: %v", caps, err)
		}
		f.caps[sid], f.auth[sid] = buf.String(), r.Header.Get("Authorization")
		w.Header().Set("Mcp-Session-Id", sid)
		writeJSON(w, encode(f.t, jsonrpc.NewResult(m.ID, json.RawMessage(
			`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{},"resources":{"subscribe":true},"logging":{}},"serverInfo":{"name":"caps","version":"1"}}`))))
		return
	}
	if !known || f.deleted[sid] {
		http.Error(w, "Session not found", http.StatusNotFound)
		return
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.last[m.Method] = sid
	res := `{}`
	switch m.Method {
	case "tools/list":
		res = `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`
	case "prompts/list":
		res = `{"prompts":[]}`
	case "resources/list":
		res = `{"resources":[]}`
	case "resources/templates/list":
		res = `{"resourceTemplates":[]}`
	}
	writeJSON(w, encode(f.t, jsonrpc.NewResult(m.ID, json.RawMessage(res))))
}

// lastOf returns the capabilities and credentials of the session the
// last request of method came on.
func (f *capsHTTP) lastOf(method string) (caps, auth string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sid := f.last[method]
	return f.caps[sid], f.auth[sid]
}

// sessions returns every session's capabilities and credentials, and
// whether it was deleted, sorted.
func (f *capsHTTP) sessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for sid, caps := range f.caps {
		out = append(out, fmt.Sprintf("%s %s deleted=%v", f.auth[sid], caps, f.deleted[sid]))
	}
	slices.Sort(out)
	return out
}

// The capabilities the Manager declares by default: to a shared session
// roots without listChanged, to a caller's own session with it.
const (
	sharedCaps = `{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{}}`
	ownedCaps  = `{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{"listChanged":true}}`
	// fullCaps declares every capability the gateway relays.
	fullCaps = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`
)

// TestManager_MirrorCaps checks that a call that runs server code for a
// client that declared fewer capabilities than the gateway's session goes
// to an upstream session initialized with the client's own (within what
// the gateway relays), one per distinct set, and per caller for a pooled
// server; that everything else stays on the base session; and that Close
// ends them all.
func TestManager_MirrorCaps(t *testing.T) {
	shared, sharedURL := newCapsHTTP(t)
	pooled, pooledURL := newCapsHTTP(t)
	m := startManager(t, ManagerOptions{
		Servers: []config.Server{
			{Name: "sh", Transport: config.TransportHTTP, URL: sharedURL, Protocol: config.ProtocolLegacy},
			{Name: "pp", Transport: config.TransportHTTP, URL: pooledURL, Protocol: config.ProtocolAuto, SessionMode: config.SessionPerPrincipal},
		},
		Credentials: credentialsFunc(func(_ context.Context, _ config.Server, principal string) (Credentials, error) {
			return Credentials{APIKey: "key-" + principal}, nil
		}),
	})
	waitStatus(t, m, "sh", isRunning)
	waitStatus(t, m, "pp", isRunning)
	alice, bob := Caller{Principal: "alice"}, Caller{Principal: "bob"}
	tool := `{"name":"t","arguments":{}}`

	tests := []struct {
		name     string
		fake     *capsHTTP
		server   string
		who      Caller
		method   string
		params   string
		caps     string // the call's client capabilities; "-" for nil hooks
		wantCaps string // of the upstream session the call came on
		wantAuth string
	}{
		{"all declared: the base session", shared, "sh", alice, "tools/call", tool, fullCaps, sharedCaps, "Bearer key-"},
		{"none declared", shared, "sh", alice, "tools/call", tool, `{}`, `{}`, "Bearer key-"},
		{"form elicitation only", shared, "sh", bob, "tools/call", tool, `{"elicitation":{"form":{}}}`, `{"elicitation":{"form":{}}}`, "Bearer key-"},
		{"the same set again", shared, "sh", bob, "tools/call", tool, `{}`, `{}`, "Bearer key-"},
		{"prompts/get", shared, "sh", alice, "prompts/get", `{"name":"p"}`, `{}`, `{}`, "Bearer key-"},
		{"resources/read", shared, "sh", alice, "resources/read", `{"uri":"file:///a"}`, `{}`, `{}`, "Bearer key-"},
		{"completion/complete", shared, "sh", alice, "completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}`, `{}`, `{}`, "Bearer key-"},
		{"lists stay on the base session", shared, "sh", alice, "tools/list", `{}`, `{}`, sharedCaps, "Bearer key-"},
		{"subscriptions stay", shared, "sh", alice, "resources/subscribe", `{"uri":"file:///a"}`, `{}`, sharedCaps, "Bearer key-"},
		{"logging/setLevel stays", shared, "sh", alice, "logging/setLevel", `{"level":"info"}`, `{}`, sharedCaps, "Bearer key-"},
		{"a task stays with its tasks/get", shared, "sh", alice, "tools/call", `{"name":"t","task":{"ttl":1000}}`, `{}`, sharedCaps, "Bearer key-"},
		{"no hooks: unknown capabilities", shared, "sh", alice, "tools/call", tool, "-", sharedCaps, "Bearer key-"},
		{"no capabilities: unknown", shared, "sh", alice, "tools/call", tool, "", sharedCaps, "Bearer key-"},
		{"only what the gateway relays, in its order", shared, "sh", alice, "tools/call", tool,
			`{"experimental":{"x":{}},"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}}}`, `{"sampling":{"tools":{}},"roots":{}}`, "Bearer key-"},
		{"a member that is not an object is not declared", shared, "sh", alice, "tools/call", tool, `{"sampling":true,"roots":null}`, `{}`, "Bearer key-"},

		{"per_principal, all declared", pooled, "pp", alice, "tools/call", tool, fullCaps, ownedCaps, "Bearer key-alice"},
		{"per_principal, none declared", pooled, "pp", alice, "tools/call", tool, `{}`, `{}`, "Bearer key-alice"},
		{"per_principal, another caller", pooled, "pp", bob, "tools/call", tool, `{}`, `{}`, "Bearer key-bob"},
		{"per_principal, the same again", pooled, "pp", alice, "tools/call", tool, `{}`, `{}`, "Bearer key-alice"},
		{"per_principal, roots that change", pooled, "pp", alice, "tools/call", tool, `{"roots":{"listChanged":true}}`, `{"roots":{"listChanged":true}}`, "Bearer key-alice"},
		{"per_principal, lists", pooled, "pp", alice, "prompts/list", `{}`, `{}`, ownedCaps, "Bearer key-alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks *CallHooks
			if tt.caps != "-" {
				hooks = &CallHooks{}
				if tt.caps != "" {
					hooks.Capabilities = json.RawMessage(tt.caps)
				}
			}
			if _, err := m.Call(callCtx(t), tt.server, tt.who, tt.method, json.RawMessage(tt.params), hooks); err != nil {
				t.Fatal(err)
			}
			caps, auth := tt.fake.lastOf(tt.method)
			if caps != tt.wantCaps || auth != tt.wantAuth {
				t.Errorf("came on a session declaring %s with %q; want %s with %q", caps, auth, tt.wantCaps, tt.wantAuth)
			}
		})
	}

	if st := state(t, m, "sh"); st.Sessions != 0 || st.MirroredSessions != 3 {
		t.Errorf("sh: %d sessions, %d mirrored; want 0 and 3", st.Sessions, st.MirroredSessions)
	}
	if st := state(t, m, "pp"); st.Sessions != 1 || st.MirroredSessions != 3 {
		t.Errorf("pp: %d sessions, %d mirrored; want 1 (alice's) and 3", st.Sessions, st.MirroredSessions)
	}
	if err := m.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantShared := []string{
		"Bearer key- " + sharedCaps + " deleted=true",
		`Bearer key- {"elicitation":{"form":{}}} deleted=true`,
		`Bearer key- {"sampling":{"tools":{}},"roots":{}} deleted=true`,
		"Bearer key- {} deleted=true",
	}
	slices.Sort(wantShared)
	if diff := cmp.Diff(wantShared, shared.sessions()); diff != "" {
		t.Errorf("sh's upstream sessions after Close (-want +got):\n%s", diff)
	}
	wantPooled := []string{
		"Bearer key- " + sharedCaps + " deleted=true", // the base session, that reads the lists, owned by no caller
		"Bearer key-alice " + ownedCaps + " deleted=true",
		`Bearer key-alice {"roots":{"listChanged":true}} deleted=true`,
		"Bearer key-alice {} deleted=true",
		"Bearer key-bob {} deleted=true",
	}
	slices.Sort(wantPooled)
	if diff := cmp.Diff(wantPooled, pooled.sessions()); diff != "" {
		t.Errorf("pp's upstream sessions after Close (-want +got):\n%s", diff)
	}
}

// TestManager_MirrorLifecycle checks, on the bubble's clock, that a
// mirrored session is reaped when idle, that a call's server requests on
// it reach the call's hooks while those outside a call get the gateway's
// own answers, that EndSession and a server's stop close the mirrored
// sessions they own, and that stdio servers are never mirrored.
func TestManager_MirrorLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every tools/call asks for sampling on its own stream and is
		// answered once the request was handled.
		asking := func(f *fakeTransport, m *jsonrpc.Message) bool {
			if m.Method != "tools/call" {
				return false
			}
			go func() {
				f.recv(jsonrpc.NewRequest(jsonrpc.StringID("ask-"+m.ID.String()), "sampling/createMessage", json.RawMessage(`{}`)), m.ID)
				synctest.Wait()
				f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"content":[]}`)), m.ID)
			}()
			return true
		}
		peers := map[string]*fakePeer{"sh": {handle: asking}, "ps": {}, "io": {}}
		sh := fakeConfig("sh")
		sh.Transport, sh.URL = config.TransportHTTP, "http://upstream.invalid/mcp"
		sh.Pool.IdleTimeout = config.Duration(10 * time.Minute)
		ps := fakeConfig("ps")
		ps.Transport, ps.URL = config.TransportSSE, "http://upstream.invalid/sse"
		ps.SessionMode = config.SessionPerSession
		std := fakeConfig("io") // stdio
		m := newFakeManager(t, peers, []config.Server{sh, ps, std}, ManagerOptions{})
		synctest.Wait()
		var outside []string
		m.HandleRequests(func(_ context.Context, server string, who Caller, r *jsonrpc.Message) (json.RawMessage, error) {
			outside = append(outside, server+" "+who.Principal+"/"+who.Session+" "+r.Method)
			return json.RawMessage(`{"by":"fn"}`), nil
		})
		none := json.RawMessage(`{}`)
		call := func(server string, who Caller, hooks *CallHooks) {
			t.Helper()
			if _, err := m.Call(context.Background(), server, who, "tools/call", json.RawMessage(`{"name":"t"}`), hooks); err != nil {
				t.Fatal(err)
			}
		}

		var asked []string
		call("sh", Caller{}, &CallHooks{Capabilities: none, Request: func(_ context.Context, r *jsonrpc.Message) (json.RawMessage, error) {
			asked = append(asked, r.Method)
			return json.RawMessage(`{"by":"hooks"}`), nil
		}})
		synctest.Wait()
		if n := peers["sh"].count(); n != 2 {
			t.Fatalf("%d clients of sh, want the base and a mirrored one", n)
		}
		mirror := peers["sh"].conn(1).t
		if got := answerTo(mirror, jsonrpc.StringID("ask-2")); got != `result {"by":"hooks"}` || !slices.Equal(asked, []string{"sampling/createMessage"}) {
			t.Errorf("the call's sampling request got %s, hooks asked %q; want the hooks' answer", got, asked)
		}
		// Outside a call, a shared server's mirrored session belongs to
		// no client, as its base session: the RequestFunc gets it for
		// no caller.
		rid := jsonrpc.StringID("outside")
		mirror.recv(jsonrpc.NewRequest(rid, "sampling/createMessage", nil), jsonrpc.ID{})
		synctest.Wait()
		if got := answerTo(mirror, rid); got != `result {"by":"fn"}` || !slices.Equal(outside, []string{"sh / sampling/createMessage"}) {
			t.Errorf("a request outside a call got %s; the RequestFunc was asked %q", got, outside)
		}

		// Idle: reaped after the pool's idle timeout, then made again.
		time.Sleep(10*time.Minute + reapInterval(10*time.Minute))
		synctest.Wait()
		if st := state(t, m, "sh"); st.MirroredSessions != 0 || !closed(mirror) {
			t.Errorf("after the idle timeout: %d mirrored sessions, closed %v", st.MirroredSessions, closed(mirror))
		}
		call("sh", Caller{}, &CallHooks{Capabilities: none})
		if st := state(t, m, "sh"); st.MirroredSessions != 1 || peers["sh"].count() != 3 {
			t.Errorf("after a new call: %d mirrored sessions, %d clients", st.MirroredSessions, peers["sh"].count())
		}

		// per_session: the session's mirrored sessions end with it.
		s1, s2 := Caller{Principal: "alice", Session: "s1"}, Caller{Principal: "alice", Session: "s2"}
		call("ps", s1, &CallHooks{Capabilities: none})
		call("ps", s1, &CallHooks{Capabilities: json.RawMessage(`{"sampling":{}}`)})
		call("ps", s2, &CallHooks{Capabilities: none})
		if st := state(t, m, "ps"); st.MirroredSessions != 3 {
			t.Errorf("ps: %d mirrored sessions, want 3", st.MirroredSessions)
		}
		m.EndSession("s1")
		synctest.Wait()
		if st := state(t, m, "ps"); st.MirroredSessions != 1 || !closed(peers["ps"].conn(1).t) || !closed(peers["ps"].conn(2).t) || closed(peers["ps"].conn(3).t) {
			t.Errorf("after EndSession(s1): %d mirrored sessions; want s2's only", st.MirroredSessions)
		}

		// Outside a call, a pooled server's mirrored session belongs to
		// its caller, as the caller's own session does.
		rid = jsonrpc.StringID("outside-s2")
		peers["ps"].conn(3).t.recv(jsonrpc.NewRequest(rid, "roots/list", nil), jsonrpc.ID{})
		synctest.Wait()
		if got := answerTo(peers["ps"].conn(3).t, rid); got != `result {"by":"fn"}` || outside[len(outside)-1] != "ps alice/s2 roots/list" {
			t.Errorf("a request outside a call got %s; the RequestFunc was asked %q", got, outside)
		}

		// roots/list_changed reaches the caller's mirrored sessions that
		// declared roots, and only those.
		call("ps", s2, &CallHooks{Capabilities: json.RawMessage(`{"roots":{"listChanged":true}}`)})
		if err := m.SendNotification(context.Background(), "ps", s2, "notifications/roots/list_changed", nil); err != nil {
			t.Fatal(err)
		}
		if got := peers["ps"].conn(4).sent(); !slices.Contains(got, "notifications/roots/list_changed") {
			t.Errorf("the mirrored session with roots got %q, want notifications/roots/list_changed", got)
		}
		if got := peers["ps"].conn(3).sent(); slices.Contains(got, "notifications/roots/list_changed") {
			t.Errorf("the mirrored session without roots got %q", got)
		}

		// A server's stop closes its mirrored sessions.
		if err := m.SetEnabled("sh", false); err != nil {
			t.Fatal(err)
		}
		if st := state(t, m, "sh"); st.MirroredSessions != 0 || !closed(peers["sh"].conn(2).t) {
			t.Errorf("after the stop: %d mirrored sessions, closed %v", st.MirroredSessions, closed(peers["sh"].conn(2).t))
		}

		// stdio: one process, one session.
		call("io", Caller{}, &CallHooks{Capabilities: none})
		if st := state(t, m, "io"); st.MirroredSessions != 0 || peers["io"].count() != 1 {
			t.Errorf("stdio: %d mirrored sessions, %d clients; want none mirrored", st.MirroredSessions, peers["io"].count())
		}
	})
}

// FuzzMirrorCaps checks that whatever a client declares, the mirrored set
// is nil (the base session) or a JSON object no larger than the base's,
// of the base's members and sub-members only, never the base itself.
func FuzzMirrorCaps(f *testing.F) {
	for _, seed := range []string{`{}`, fullCaps, ownedCaps, `{"sampling":true,"roots":null}`, `{"elicitation":{"form":{},"url":null}}`,
		`[]`, `{"roots":`, `{"sampling":{"tools":false},"sampling":{}}`, `{"rooţs":{}}`, "\t{ \"elicitation\" : { } }"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, declared string) {
		for _, base := range []string{sharedCaps, ownedCaps} {
			got := mirrorCaps(json.RawMessage(base), json.RawMessage(declared))
			if got == nil {
				continue
			}
			var gotSet, baseSet map[string]map[string]json.RawMessage
			if err := json.Unmarshal(got, &gotSet); err != nil {
				t.Fatalf("mirrorCaps(%s, %q) = %s: %v", base, declared, got, err)
			}
			json.Unmarshal([]byte(base), &baseSet)
			if len(got) > len(base) || len(gotSet) >= len(baseSet) {
				t.Fatalf("mirrorCaps(%s, %q) = %s: not a strict subset of the base", base, declared, got)
			}
			for name, subs := range gotSet {
				for sub, v := range subs {
					if bv, ok := baseSet[name][sub]; !ok || string(bv) != string(v) {
						t.Fatalf("mirrorCaps(%s, %q) = %s: %s.%s is not the base's", base, declared, got, name, sub)
					}
				}
			}
			if again := mirrorCaps(json.RawMessage(base), json.RawMessage(declared)); string(again) != string(got) {
				t.Fatalf("mirrorCaps is not deterministic: %s, then %s", got, again)
			}
		}
	})
}
