package legacy

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/telemetry"
)

// memStore is a SessionStore in memory, shared by the Handlers of a test
// as a database is by the processes of one gateway; fail makes its
// methods fail.
type memStore struct {
	mu   sync.Mutex
	recs map[string]SessionRecord
	fail error
	// afterGet, if set, runs after GetSession read a record, outside mu:
	// a test holds a restore there.
	afterGet func(id string)
}

func newMemStore() *memStore { return &memStore{recs: map[string]SessionRecord{}} }

func (m *memStore) PutSession(_ context.Context, rec SessionRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.recs[rec.ID] = rec
	return nil
}

func (m *memStore) GetSession(_ context.Context, id string) (SessionRecord, bool, error) {
	m.mu.Lock()
	rec, ok := m.recs[id]
	fail, hook := m.fail, m.afterGet
	m.mu.Unlock()
	if fail != nil {
		return SessionRecord{}, false, fail
	}
	if hook != nil {
		hook(id)
	}
	return rec, ok, nil
}

func (m *memStore) TouchSessions(_ context.Context, touches map[string]time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for id, at := range touches {
		if rec, ok := m.recs[id]; ok && rec.LastActive.Before(at) {
			rec.LastActive = at
			m.recs[id] = rec
		}
	}
	return nil
}

func (m *memStore) DeleteSessions(_ context.Context, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, id := range ids {
		delete(m.recs, id)
	}
	return nil
}

func (m *memStore) DeleteIdleSessions(_ context.Context, before time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for id, rec := range m.recs {
		if rec.LastActive.Before(before) {
			delete(m.recs, id)
		}
	}
	return nil
}

func (m *memStore) ListSessions(_ context.Context, since time.Time, limit int) ([]SessionRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	var out []SessionRecord
	for _, rec := range m.recs {
		if !rec.LastActive.Before(since) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b SessionRecord) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(len(out), limit)], nil
}

func (m *memStore) get(id string) (SessionRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[id]
	return rec, ok
}

// edit changes the record of id with f.
func (m *memStore) edit(id string, f func(*SessionRecord)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recs[id]
	f(&rec)
	m.recs[id] = rec
}

func (m *memStore) setAfterGet(f func(id string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.afterGet = f
}

func (m *memStore) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

var testSecret = bytes.Repeat([]byte("s"), 32)

// restart closes e's Handler as a gateway shutting down does, and returns
// a new env over the same store and secret: the restarted gateway.
func restart(t *testing.T, e *env, opts Options) *env {
	t.Helper()
	e.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.Close(ctx); err != nil {
		t.Fatalf("closing the first Handler: %v", err)
	}
	return newEnv(t, opts)
}

// keyOf returns the short id of the session id sid.
func keyOf(t *testing.T, h *Handler, sid string) string {
	t.Helper()
	payload, err := h.sealer.Open(sid)
	if err != nil {
		t.Fatal(err)
	}
	var tok token
	if err := json.Unmarshal(payload, &tok); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(tok.Nonce)
}

const echoCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"again"}}}`

// TestRestore checks that a session sealed with the same secret is served
// by a Handler that did not create it, over the same store: with its
// version (a 2025-03-26 session still gets no structuredContent), its
// capabilities and client, and only to its principal.
func TestRestore(t *testing.T) {
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st}
	a := newEnv(t, opts)
	caps := `{"sampling":{},"roots":{"listChanged":true}}`
	sid := a.initializeCaps(V20250326, caps, principalHeader, "alice")
	if m := lastMessage(t, a.post(sid, callEcho, principalHeader, "alice")); m.Error != nil {
		t.Fatalf("call before the restart: %+v", m.Error)
	}
	key := keyOf(t, a.h, sid)
	created := a.session(sid).created

	b := restart(t, a, opts)
	if rec, ok := st.get(key); !ok || rec.Principal != "alice" {
		t.Fatalf("the record after a shutdown: %+v, %v; want alice's, kept", rec, ok)
	}

	// Another principal presenting the id gets 404, and does not restore it.
	if r := b.post(sid, echoCall, principalHeader, "mallory"); r.StatusCode != http.StatusNotFound {
		t.Errorf("another principal: status %d, want 404", r.StatusCode)
	}
	if n := len(b.h.Sessions()); n != 0 {
		t.Errorf("another principal's request restored the session: %d sessions", n)
	}

	m := lastMessage(t, b.post(sid, echoCall, principalHeader, "alice"))
	if m.Error != nil {
		t.Fatalf("call after the restart: %+v", m.Error)
	}
	if want := `{"content":[{"type":"text","text":"again"}]}`; string(m.Result) != want {
		t.Errorf("result %s, want %s (a 2025-03-26 session gets no structuredContent)", m.Result, want)
	}
	s := b.session(sid)
	if s == nil {
		t.Fatal("no session after the restart")
	}
	if s.version != V20250326 || string(s.caps) != caps || s.clientName != "test" || s.principal != "alice" || !s.created.Equal(created) {
		t.Errorf("restored session: version %s, caps %s, client %q, principal %q, created %v (want %v)",
			s.version, s.caps, s.clientName, s.principal, s.created, created)
	}
	infos, err := b.h.AdminSessions(t.Context())
	if err != nil || len(infos) != 1 || infos[0].ID != key || infos[0].ClientName != "test" || infos[0].State != gateway.SessionLive {
		t.Errorf("AdminSessions after the restore: %+v", infos)
	}
	// A batch: the session is still 2025-03-26.
	if resp := b.post(sid, batchOf(2), principalHeader, "alice"); resp.StatusCode != http.StatusOK {
		t.Errorf("a batch on the restored session: status %d", resp.StatusCode)
	} else {
		events(t, resp)
	}

	// Restored once: the next request finds it in memory.
	if r := b.post(sid, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, principalHeader, "alice"); r.StatusCode != http.StatusOK {
		t.Errorf("ping: status %d", r.StatusCode)
	}
	if n := len(b.h.Sessions()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// TestRestore_Refused pins what a restarted Handler does not serve.
func TestRestore_Refused(t *testing.T) {
	tests := []struct {
		name string
		// before runs on the first Handler; it may change the store.
		before func(t *testing.T, e *env, st *memStore, sid string)
		opts   Options // of the second Handler, over Secret and Store
		status int
	}{
		{name: "served", status: http.StatusOK},
		{name: "deleted", before: func(t *testing.T, e *env, _ *memStore, sid string) {
			if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: %d", r.StatusCode)
			}
		}, status: http.StatusNotFound},
		{name: "ended by the admin API", before: func(t *testing.T, e *env, _ *memStore, sid string) {
			if found, err := e.h.EndSession(t.Context(), keyOf(t, e.h, sid)); !found || err != nil {
				t.Fatalf("EndSession = %v, %v", found, err)
			}
		}, status: http.StatusNotFound},
		{name: "idle too long", before: func(t *testing.T, e *env, st *memStore, sid string) {
			st.edit(keyOf(t, e.h, sid), func(rec *SessionRecord) { rec.LastActive = time.Now().Add(-2 * time.Hour) })
		}, opts: Options{IdleTimeout: time.Hour}, status: http.StatusNotFound},
		{name: "no store", opts: Options{Store: nil}, status: http.StatusNotFound},
		{name: "another secret", opts: Options{Secret: bytes.Repeat([]byte("o"), 32)}, status: http.StatusNotFound},
		{name: "a record of another principal", before: func(t *testing.T, e *env, st *memStore, sid string) {
			st.edit(keyOf(t, e.h, sid), func(rec *SessionRecord) { rec.Principal = "mallory" })
		}, status: http.StatusNotFound},
		{name: "the session cap", opts: Options{MaxSessions: 1}, status: http.StatusServiceUnavailable},
		{name: "the per-principal cap", opts: Options{MaxSessionsPerPrincipal: 1}, status: http.StatusTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore()
			a := newEnv(t, Options{Secret: testSecret, Store: st})
			sid := a.initialize(V20251125)
			if tt.before != nil {
				tt.before(t, a, st, sid)
			}
			opts := tt.opts
			if opts.Secret == nil {
				opts.Secret = testSecret
			}
			if tt.name != "no store" {
				opts.Store = st
			}
			b := restart(t, a, opts)
			if opts.MaxSessions == 1 || opts.MaxSessionsPerPrincipal == 1 {
				b.initialize(V20251125) // fills the cap
			}
			r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			if r.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, tt.status, readAll(t, r))
			}
			if tt.status == http.StatusNotFound {
				if n := len(b.h.Sessions()); n != 0 {
					t.Errorf("%d sessions after a 404", n)
				}
			}
			if tt.status == http.StatusServiceUnavailable || tt.status == http.StatusTooManyRequests {
				if r.Header.Get("Retry-After") == "" {
					t.Error("no Retry-After")
				}
				if _, ok := st.get(keyOf(t, b.h, sid)); !ok {
					t.Error("a refusal by a cap deleted the record")
				}
			}
		})
	}
}

// TestRestore_Records checks what the store holds through a session's
// life: a record from initialize, activity carried forward by the
// janitor, the record gone once the session ends for good (DELETE, idle,
// the admin API), and kept when the gateway shuts down.
func TestRestore_Records(t *testing.T) {
	st := newMemStore()
	e := newEnv(t, Options{Secret: testSecret, Store: st, IdleTimeout: time.Hour})
	sid := e.initializeCaps(V20250618, `{"elicitation":{}}`, principalHeader, "alice")
	key := keyOf(t, e.h, sid)
	rec, ok := st.get(key)
	if !ok {
		t.Fatal("no record after initialize")
	}
	s := e.session(sid)
	want := SessionRecord{ID: key, Principal: "alice", Version: V20250618, Capabilities: json.RawMessage(`{"elicitation":{}}`),
		ClientInfo: json.RawMessage(`{"name":"test","version":"1.0"}`), Created: s.created, LastActive: s.created}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record after initialize (-want +got):\n%s", diff)
	}

	// Activity reaches the store at the janitor's next round.
	e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, principalHeader, "alice")
	s.mu.Lock()
	active := s.lastActive
	s.mu.Unlock()
	e.h.sweep(time.Now())
	if rec, _ := st.get(key); !rec.LastActive.Equal(active) {
		t.Errorf("last active in the store %v, want %v", rec.LastActive, active)
	}

	// A session that expires loses its record.
	idle := e.initialize(V20251125)
	idleKey := keyOf(t, e.h, idle)
	e.h.sweep(time.Now().Add(2 * time.Hour))
	if _, ok := st.get(idleKey); ok {
		t.Error("an expired session kept its record")
	}

	// A record of a session no process holds goes once idle for long.
	st.edit("orphan", func(rec *SessionRecord) {
		*rec = SessionRecord{ID: "orphan", Version: V20251125, LastActive: time.Now().Add(-3 * time.Hour)}
	})
	e.h.sweep(time.Now())
	if _, ok := st.get("orphan"); ok {
		t.Error("an idle record outlived the sweep")
	}
}

// TestRestore_StoreFails checks that a store that fails leaves nothing
// half done: initialize is refused and starts no session; DELETE is
// refused and the session stays; a lookup says to retry, not 404.
func TestRestore_StoreFails(t *testing.T) {
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st}
	e := newEnv(t, opts)
	sid := e.initialize(V20251125)

	st.setFail(errors.New("disk on fire"))
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	r := e.post("", init)
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get(HeaderSessionID) != "" {
		t.Errorf("initialize with a failing store: status %d, session id %q; want 503 and none", r.StatusCode, r.Header.Get(HeaderSessionID))
	}
	if body := readAll(t, r); strings.Contains(body, "disk on fire") {
		t.Errorf("the store's error reached the client: %s", body)
	}
	if n := len(e.h.Sessions()); n != 1 {
		t.Errorf("%d sessions, want only the first", n)
	}
	if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("DELETE with a failing store: status %d, want 503", r.StatusCode)
	}
	if r := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
		t.Errorf("the session after a failed DELETE: status %d, want 200", r.StatusCode)
	}

	st.setFail(nil)
	b := restart(t, e, opts)
	st.setFail(errors.New("disk on fire"))
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a restore with a failing store: status %d, want 503", r.StatusCode)
	}
	st.setFail(nil)
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
		t.Errorf("a restore once the store answers: status %d, want 200", r.StatusCode)
	}
}

// TestRestore_Resume checks GET with a Last-Event-ID from before the
// restart: an id of the GET stream gets a fresh GET stream, one of a POST
// stream an empty stream that ends at once; an id that does not parse,
// and one the restored session did issue but no longer has, still get
// 400.
func TestRestore_Resume(t *testing.T) {
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st}
	a := newEnv(t, opts)
	sid := a.initialize(V20251125)
	b := restart(t, a, opts)

	get := func(lastID string) *http.Response {
		return b.do(b.request(http.MethodGet, sid, "", HeaderLastEventID, lastID))
	}
	if r := get("nonsense"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("an id that does not parse: status %d, want 400", r.StatusCode)
	}

	// A POST stream of the old process: it is gone with the call it
	// answered, so the answer is an empty stream.
	r := get("3_2")
	if r.StatusCode != http.StatusOK || len(events(t, r)) != 0 {
		t.Errorf("a POST stream from before the restart: status %d; want 200 and an empty stream", r.StatusCode)
	}

	// The GET stream of the old process: a fresh GET stream, with the
	// priming event of a 2025-11-25 session.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := b.request(http.MethodGet, sid, "", HeaderLastEventID, "0_1")
	r = b.do(req.WithContext(ctx))
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the GET stream from before the restart: status %d, type %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	primed, err := newReader(r).Next()
	if err != nil {
		t.Fatal(err)
	}
	if infos := b.h.Sessions(); len(infos) != 1 || !infos[0].Stream {
		t.Errorf("sessions: %+v, want one with its GET stream", infos)
	}
	tag, num, _, ok := parseLastEventID(primed.ID)
	if !ok || num != 0 || tag == "" {
		t.Errorf("priming event id %q: want one of stream 0 marked as this process's", primed.ID)
	}
	// Ids of this process's own streams keep the usual rules.
	if r := get(eventID(tag, 5, 1)); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a stream this process never opened: status %d, want 400", r.StatusCode)
	}
	cancel()

	// A session this process created issued no marked ids.
	own := b.initialize(V20251125)
	if r := b.do(b.request(http.MethodGet, own, "", HeaderLastEventID, eventID("abc", 0, 1))); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a marked id on a session created here: status %d, want 400", r.StatusCode)
	}
}

// TestInitialize_ClientJSONBound checks that a client's capabilities and
// clientInfo, which a session keeps for its life (and the store keeps
// with it), are bounded: more is refused with -32602 naming the bound,
// and no session starts.
func TestInitialize_ClientJSONBound(t *testing.T) {
	st := newMemStore()
	e := newEnv(t, Options{Secret: testSecret, Store: st})
	big := `{"x":"` + strings.Repeat("a", MaxClientJSON) + `"}`
	for _, tt := range []struct{ name, caps, info string }{
		{"capabilities", big, `{"name":"c","version":"1"}`},
		{"clientInfo", `{}`, big},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+tt.caps+`,"clientInfo":`+tt.info+`}}`)
			if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderSessionID) != "" {
				t.Fatalf("status %d, session id %q; want 200 and none", resp.StatusCode, resp.Header.Get(HeaderSessionID))
			}
			m := decode(t, []byte(readAll(t, resp)))
			if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, tt.name) || !strings.Contains(m.Error.Message, "65536") {
				t.Errorf("answer %+v, want -32602 naming %s and the bound", m, tt.name)
			}
		})
	}
	if n := len(e.h.Sessions()); n != 0 {
		t.Errorf("%d sessions, want none", n)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.recs) != 0 {
		t.Errorf("%d records, want none", len(st.recs))
	}
}

// TestRestore_DeleteOverCap: after a restart, a client at its session cap
// can still DELETE a stored session: ending it admits nothing. Another
// principal's DELETE of it ends nothing, and neither does one the store
// fails (503).
func TestRestore_DeleteOverCap(t *testing.T) {
	st := newMemStore()
	a := newEnv(t, Options{Secret: testSecret, Store: st})
	sid := a.initialize(V20251125, principalHeader, "alice")
	key := keyOf(t, a.h, sid)
	b := restart(t, a, Options{Secret: testSecret, Store: st, MaxSessionsPerPrincipal: 1})
	b.initialize(V20251125, principalHeader, "alice") // fills the cap

	if r := b.do(b.request(http.MethodDelete, sid, "", principalHeader, "mallory")); r.StatusCode != http.StatusNotFound {
		t.Errorf("another principal's DELETE: status %d, want 404", r.StatusCode)
	}
	if _, ok := st.get(key); !ok {
		t.Fatal("another principal's DELETE deleted the record")
	}
	st.setFail(errors.New("disk on fire"))
	if r := b.do(b.request(http.MethodDelete, sid, "", principalHeader, "alice")); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("DELETE with a failing store: status %d, want 503", r.StatusCode)
	}
	st.setFail(nil)
	if _, ok := st.get(key); !ok {
		t.Fatal("a DELETE the store failed deleted the record")
	}
	if r := b.do(b.request(http.MethodDelete, sid, "", principalHeader, "alice")); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE of the stored session at the cap: status %d, want 200: %s", r.StatusCode, readAll(t, r))
	}
	if _, ok := st.get(key); ok {
		t.Error("the deleted session kept its record")
	}
	if n := len(b.h.Sessions()); n != 1 {
		t.Errorf("%d sessions, want only the one filling the cap", n)
	}
	if r := b.do(b.request(http.MethodDelete, sid, "", principalHeader, "alice")); r.StatusCode != http.StatusNotFound {
		t.Errorf("a second DELETE: status %d, want 404", r.StatusCode)
	}
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, principalHeader, "alice"); r.StatusCode != http.StatusNotFound {
		t.Errorf("the deleted session: status %d, want 404", r.StatusCode)
	}
}

// TestRestore_SessionInputTagged: on a restored session, stream 0 made by
// an input request outside any call, before the GET, marks its event ids
// as this process's, as one a GET made does.
func TestRestore_SessionInputTagged(t *testing.T) {
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st}
	a := newEnv(t, opts)
	sid := a.initializeCaps(V20251125, allCaps)
	b := restart(t, a, opts)
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
		t.Fatalf("ping: status %d", r.StatusCode)
	}
	s := b.session(sid)
	asked := make(chan error, 1)
	go func() {
		_, err := s.ask(context.Background(), "roots/list", json.RawMessage(`{}`))
		asked <- err
	}()
	waitFor(t, "the input request", func() bool { return b.pendingInputs(sid) == 1 })
	get := newReader(b.do(b.request(http.MethodGet, sid, "")))
	ev := next(t, get)
	m := decode(t, ev.Data)
	if m.Method != "roots/list" {
		t.Fatalf("first GET event %q, want the request", ev.Data)
	}
	if tag, num, _, ok := parseLastEventID(ev.ID); !ok || num != 0 || tag != s.tag {
		t.Errorf("event id %q: want one of stream 0 marked %q", ev.ID, s.tag)
	}
	b.reply(sid, string(m.ID), `"result":{"roots":[]}`)
	if err := <-asked; err != nil {
		t.Errorf("the input request: %v", err)
	}
}

// TestRestore_StoreFailsCounted: each request refused because the session
// store failed (initialize, a restore, a DELETE) is counted in the
// rejections metric, under the reason "session_store".
func TestRestore_StoreFailsCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st}
	a := newEnv(t, opts)
	sid := a.initialize(V20251125)
	opts.MeterProvider = mp
	b := restart(t, a, opts)
	st.setFail(errors.New("disk on fire"))
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a restore: status %d, want 503", r.StatusCode)
	}
	if r := b.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("initialize: status %d, want 503", r.StatusCode)
	}
	if got := rejections(t, reader, "session_store"); got != 2 {
		t.Errorf("%d rejections for the session store, want 2", got)
	}
}

// rejections returns the count of the rejections metric for reason.
func rejections(t *testing.T, reader *sdkmetric.ManualReader, reason string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != "mcpgw.rate_limit.rejections" {
				continue
			}
			for _, p := range sum.DataPoints {
				if v, ok := p.Attributes.Value(telemetry.Reason); ok && v.AsString() == reason {
					return p.Value
				}
			}
		}
	}
	return 0
}
