package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The tests in this file run the Manager over in-memory peers inside
// testing/synctest bubbles, so that backoff, idle timeouts and reaping
// run on the bubble's clock: waits are exact and take no real time.

// fakePeer is an in-memory MCP server behind a Manager: every client the
// manager makes of it gets a fakeTransport of its own, as every start of a
// stdio server gets a process of its own.
type fakePeer struct {
	// caps are the capabilities it declares. If empty, {"tools":{}}.
	caps string
	// handle answers a request other than initialize, or returns false
	// for the default answers (tools/list: one tool "t"; else {}).
	handle func(f *fakeTransport, m *jsonrpc.Message) bool
	// gate, when not nil, holds every answer to initialize until closed.
	gate chan struct{}

	mu         sync.Mutex
	failStarts []string // errors of the next starts, in order
	conns      []*fakeConn
}

// fakeConn is one client the manager made of a fakePeer.
type fakeConn struct {
	t   *fakeTransport
	srv config.Server // as the manager passed it: the credentials
}

func (p *fakePeer) newClient(srv config.Server, opts ClientOptions) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var startErr error
	if len(p.failStarts) > 0 {
		startErr = errors.New(p.failStarts[0])
		p.failStarts = p.failStarts[1:]
	}
	f := newFake(p.serve(startErr))
	p.conns = append(p.conns, &fakeConn{t: f, srv: srv})
	return newClient(opts, f), nil
}

func (p *fakePeer) serve(startErr error) func(*fakeTransport, *jsonrpc.Message) error {
	caps := p.caps
	if caps == "" {
		caps = `{"tools":{}}`
	}
	return func(f *fakeTransport, m *jsonrpc.Message) error {
		switch {
		case m.Method == "initialize":
			if startErr != nil {
				return startErr
			}
			res := jsonrpc.NewResult(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"serverInfo":{"name":"fake","version":"1"}}`))
			if p.gate != nil {
				go func() {
					<-p.gate
					f.recv(res, m.ID)
				}()
				return nil
			}
			f.recv(res, m.ID)
			return nil
		case !m.IsRequest():
			return nil
		case p.handle != nil && p.handle(f, m):
			return nil
		case m.Method == "tools/list":
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)), m.ID)
		default:
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
		}
		return nil
	}
}

// conn returns the i-th client made of p (negative: from the end).
func (p *fakePeer) conn(i int) *fakeConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 {
		i += len(p.conns)
	}
	return p.conns[i]
}

func (p *fakePeer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// sent returns "method params" of what the client sent, after the
// handshake.
func (c *fakeConn) sent() []string {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	var out []string
	for _, m := range c.t.sent {
		switch m.Method {
		case "", "initialize", "notifications/initialized", "tools/list":
			continue
		}
		out = append(out, strings.TrimSpace(m.Method+" "+string(m.Params)))
	}
	return out
}

// newFakeManager starts a Manager of servers, each served by the peer of
// its name, and closes it when the test ends.
func newFakeManager(t *testing.T, peers map[string]*fakePeer, servers []config.Server, opts ManagerOptions) *Manager {
	t.Helper()
	opts.Servers = servers
	opts.newClient = func(srv config.Server, o ClientOptions) (*Client, error) {
		return peers[srv.Name].newClient(srv, o)
	}
	m := NewManager(opts)
	m.Start()
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func fakeConfig(name string) config.Server {
	return config.Server{Name: name, Transport: config.TransportStdio, Command: "fake"}
}

func state(t *testing.T, m *Manager, name string) Status {
	t.Helper()
	st, ok := m.Server(name)
	if !ok {
		t.Fatalf("no server %q", name)
	}
	return st
}

func TestManager_RestartBackoff(t *testing.T) {
	tests := []struct {
		name      string
		restart   config.Restart
		wantWaits []time.Duration
	}{
		{
			name:    "defaults",
			restart: config.Restart{},
			wantWaits: []time.Duration{
				500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
				30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second,
				30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second,
			},
		},
		{
			name:      "configured",
			restart:   config.Restart{MaxAttempts: 4, InitialBackoff: config.Duration(time.Second), MaxBackoff: config.Duration(3 * time.Second)},
			wantWaits: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second},
		},
		{
			name:      "never",
			restart:   config.Restart{MaxAttempts: -1},
			wantWaits: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				peer := &fakePeer{failStarts: slicesRepeat("connection refused", 100)}
				srv := fakeConfig("s")
				srv.Restart = tt.restart
				m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{})
				var waits []time.Duration
				var st Status
				for {
					synctest.Wait()
					st = state(t, m, "s")
					if st.State != StateRestarting {
						break
					}
					if st.Restarts != len(waits) {
						t.Fatalf("Restarts = %d before restart %d", st.Restarts, len(waits)+1)
					}
					wait := time.Until(st.NextRestart)
					waits = append(waits, wait)
					time.Sleep(wait)
				}
				if diff := cmp.Diff(tt.wantWaits, waits); diff != "" {
					t.Errorf("waits before each restart (-want +got):\n%s", diff)
				}
				if st.State != StateFailed || st.Restarts != len(tt.wantWaits) || !st.NextRestart.IsZero() {
					t.Errorf("at the end: state %s, %d restarts, next restart %v; want failed, %d, none", st.State, st.Restarts, st.NextRestart, len(tt.wantWaits))
				}
				if !strings.Contains(st.Error, "connection refused") {
					t.Errorf("Error = %q", st.Error)
				}
				if got := peer.count(); got != len(tt.wantWaits)+1 {
					t.Errorf("%d starts, want %d", got, len(tt.wantWaits)+1)
				}
			})
		})
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestManager_RestartAfterExit covers a server whose connection ends: its
// in-flight call fails at once, its lists stay while it is down, it is
// restarted, and a start that reaches running resets the count of
// attempts in a row.
func TestManager_RestartAfterExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		peer := &fakePeer{handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
			if m.Method == "tools/call" {
				arrived <- struct{}{} // never answered
				return true
			}
			return false
		}}
		srv := fakeConfig("s")
		srv.Restart = config.Restart{MaxAttempts: 1, InitialBackoff: config.Duration(time.Second)}
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{})
		synctest.Wait()
		if st := state(t, m, "s"); st.State != StateRunning {
			t.Fatalf("state %s, want running", st.State)
		}

		for i := range 2 {
			errc := make(chan error, 1)
			go func() {
				_, err := m.Call(context.Background(), "s", Caller{}, "tools/call", json.RawMessage(`{"name":"t"}`), nil)
				errc <- err
			}()
			<-arrived
			start := time.Now()
			peer.conn(-1).t.die(errors.New("process exited: signal: killed"))
			err := <-errc
			var uerr *UnavailableError
			if !errors.As(err, &uerr) || uerr.Server != "s" || !strings.Contains(uerr.Err, "killed") {
				t.Fatalf("in-flight call = %v, want an *UnavailableError naming the server and the cause", err)
			}
			if uerr.State != StateExited && uerr.State != StateRestarting {
				t.Errorf("in-flight call's error names state %s", uerr.State)
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("the in-flight call failed after %s, want at once", d)
			}
			synctest.Wait()
			st := state(t, m, "s")
			if st.State != StateRestarting || st.ToolCount != 1 || len(st.Tools) != 1 {
				t.Errorf("after the exit: state %s with %d tools; want restarting, keeping its tool", st.State, len(st.Tools))
			}
			_, err = m.Call(context.Background(), "s", Caller{}, "tools/call", nil, nil)
			if !errors.As(err, &uerr) || uerr.State != StateRestarting {
				t.Errorf("call while down = %v, want unavailable: restarting", err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			// With max_attempts 1, a second restart happens only because
			// the first one reached running.
			if st := state(t, m, "s"); st.State != StateRunning || st.Restarts != i+1 {
				t.Fatalf("after restart %d: state %s, %d restarts", i+1, st.State, st.Restarts)
			}
		}

		// A restart that fails uses up the one attempt.
		peer.mu.Lock()
		peer.failStarts = []string{"boom"}
		peer.mu.Unlock()
		peer.conn(-1).t.die(errors.New("gone"))
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if st := state(t, m, "s"); st.State != StateFailed || st.Restarts != 3 || !strings.Contains(st.Error, "boom") {
			t.Errorf("state %s, %d restarts, error %q; want failed after 3 restarts with boom", st.State, st.Restarts, st.Error)
		}
	})
}

// TestManager_CloseDuringBackoff checks that Close ends a backoff wait at
// once.
func TestManager_CloseDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := &fakePeer{failStarts: []string{"refused"}}
		srv := fakeConfig("s")
		srv.Restart = config.Restart{InitialBackoff: config.Duration(time.Hour)}
		m := NewManager(ManagerOptions{Servers: []config.Server{srv}, newClient: peer.newClient})
		m.Start()
		synctest.Wait()
		if st := state(t, m, "s"); st.State != StateRestarting {
			t.Fatalf("state %s", st.State)
		}
		start := time.Now()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %s", d)
		}
		if st := state(t, m, "s"); st.State != StateStopped || !st.NextRestart.IsZero() {
			t.Errorf("after Close: %s, next restart %v", st.State, st.NextRestart)
		}
	})
}

// TestManager_DistinctErrors checks that a crash loop logs each distinct
// error once at error level, and its repeats at debug.
func TestManager_DistinctErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newLogRecorder()
		peer := &fakePeer{failStarts: []string{"refused", "refused", "reset", "refused"}}
		srv := fakeConfig("s")
		srv.Restart = config.Restart{InitialBackoff: config.Duration(time.Second), MaxBackoff: config.Duration(time.Second)}
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{Logger: slog.New(logs)})
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := state(t, m, "s"); st.State != StateRunning || st.Restarts != 4 {
			t.Fatalf("state %s after %d restarts", st.State, st.Restarts)
		}
		var got []string
		for _, r := range logs.find("server failed to start") {
			if r.attrs["server"] != "s" {
				t.Errorf("record without server=s: %v", r.attrs)
			}
			got = append(got, r.level.String()+" "+r.attrs["err"])
		}
		want := []string{"ERROR initialize: refused", "DEBUG initialize: refused", "ERROR initialize: reset", "DEBUG initialize: refused"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("logged failures (-want +got):\n%s", diff)
		}
	})
}

// TestManager_RestoreAfterRestart checks that a restarted client gets the
// subscriptions and the log level its predecessor held.
func TestManager_RestoreAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := &fakePeer{caps: `{"tools":{},"resources":{"subscribe":true},"logging":{}}`}
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{fakeConfig("s")}, ManagerOptions{})
		synctest.Wait()
		ctx := context.Background()
		for _, call := range []struct{ method, params string }{
			{"resources/subscribe", `{"uri":"file:///a"}`},
			{"resources/subscribe", `{"uri":"file:///b"}`},
			{"resources/unsubscribe", `{"uri":"file:///b"}`},
			{"logging/setLevel", `{"level":"notice"}`},
		} {
			if _, err := m.Call(ctx, "s", Caller{Session: "x"}, call.method, json.RawMessage(call.params), nil); err != nil {
				t.Fatal(err)
			}
		}
		peer.conn(0).t.die(errors.New("exit status 1"))
		synctest.Wait()
		time.Sleep(config.DefaultRestartBackoff)
		synctest.Wait()
		if st := state(t, m, "s"); st.State != StateRunning || peer.count() != 2 {
			t.Fatalf("state %s after %d starts", st.State, peer.count())
		}
		// resources/list and templates/list come after the restore.
		want := []string{`resources/subscribe {"uri":"file:///a"}`, `logging/setLevel {"level":"notice"}`, "resources/list", "resources/templates/list"}
		if diff := cmp.Diff(want, peer.conn(1).sent()); diff != "" {
			t.Errorf("sent by the restarted client (-want +got):\n%s", diff)
		}
	})
}

// TestManager_SetLogLevel checks that SetLogLevel reaches every live
// client of every server that declared logging, and every client made
// after it.
func TestManager_SetLogLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logging := `{"tools":{},"logging":{}}`
		peers := map[string]*fakePeer{"a": {caps: logging}, "b": {}, "c": {caps: logging}, "d": {caps: logging, failStarts: []string{"down"}}}
		c := fakeConfig("c")
		c.SessionMode = config.SessionPerPrincipal
		d := fakeConfig("d")
		d.Restart.InitialBackoff = config.Duration(time.Minute)
		m := newFakeManager(t, peers, []config.Server{fakeConfig("a"), fakeConfig("b"), c, d}, ManagerOptions{})
		synctest.Wait()
		ctx := context.Background()
		for _, who := range []string{"alice", "bob"} {
			if _, err := m.Call(ctx, "c", Caller{Principal: who}, "ping", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		m.SetLogLevel("")
		m.SetLogLevel("debug")
		synctest.Wait()
		setLevel := []string{`logging/setLevel {"level":"debug"}`}
		for _, tc := range []struct {
			peer string
			conn int
			want []string
		}{
			{"a", 0, setLevel},
			{"b", 0, nil},
			{"c", 0, setLevel}, // the base client
			{"c", 1, append([]string{"ping"}, setLevel...)}, // alice
			{"c", 2, append([]string{"ping"}, setLevel...)}, // bob
		} {
			if diff := cmp.Diff(tc.want, peers[tc.peer].conn(tc.conn).sent()); diff != "" {
				t.Errorf("%s client %d sent (-want +got):\n%s", tc.peer, tc.conn, diff)
			}
		}
		// Clients made later get the level after connecting: a new
		// caller's, and a server's first start.
		if _, err := m.Call(ctx, "c", Caller{Principal: "carol"}, "ping", nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if diff := cmp.Diff(append(setLevel, "ping"), peers["c"].conn(3).sent()); diff != "" {
			t.Errorf("carol's client sent (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(setLevel, peers["d"].conn(1).sent()); diff != "" {
			t.Errorf("d, started after SetLogLevel, sent (-want +got):\n%s", diff)
		}
	})
}

// TestManager_Serialize checks that a server with serialize set gets one
// call at a time, from all its clients, and that a waiting call gives up
// with its context.
func TestManager_Serialize(t *testing.T) {
	tests := []struct {
		name      string
		serialize bool
		mode      string
		wantMax   int
	}{
		{name: "serialized shared", serialize: true, mode: config.SessionShared, wantMax: 1},
		{name: "serialized per principal", serialize: true, mode: config.SessionPerPrincipal, wantMax: 1},
		{name: "concurrent", serialize: false, mode: config.SessionShared, wantMax: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				active, most := 0, 0
				release := make(chan struct{})
				peer := &fakePeer{handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
					if m.Method != "tools/call" {
						return false
					}
					mu.Lock()
					active++
					most = max(most, active)
					mu.Unlock()
					go func() {
						<-release
						mu.Lock()
						active--
						mu.Unlock()
						f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
					}()
					return true
				}}
				srv := fakeConfig("s")
				srv.Serialize, srv.SessionMode = tt.serialize, tt.mode
				m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{})
				synctest.Wait()
				var wg sync.WaitGroup
				for _, who := range []string{"alice", "bob"} {
					wg.Go(func() {
						if _, err := m.Call(context.Background(), "s", Caller{Principal: who}, "tools/call", nil, nil); err != nil {
							t.Errorf("call of %s: %v", who, err)
						}
					})
				}
				synctest.Wait()
				if tt.serialize {
					// A third call waiting its turn gives up with its
					// context.
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err := m.Call(ctx, "s", Caller{Principal: "alice"}, "tools/call", nil, nil)
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("waiting call = %v, want its deadline", err)
					}
				}
				for range 2 {
					release <- struct{}{}
					synctest.Wait()
				}
				wg.Wait()
				if most != tt.wantMax {
					t.Errorf("at most %d calls at once at the server, want %d", most, tt.wantMax)
				}
			})
		})
	}
}

// TestManager_Pool covers the per-caller clients of per_principal and
// per_session servers: one per key, the cap with least-recently-used
// eviction, refusal when every client is busy, idle reaping, EndSession,
// and a client that dies.
func TestManager_Pool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		arrived := make(chan string, 10)
		busy := func(f *fakeTransport, m *jsonrpc.Message) bool {
			if m.Method != "tools/call" {
				return false
			}
			arrived <- string(m.Params)
			go func() {
				<-release
				f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
			}()
			return true
		}
		peers := map[string]*fakePeer{"pp": {handle: busy}, "ps": {handle: busy}}
		pp := fakeConfig("pp")
		pp.SessionMode = config.SessionPerPrincipal
		pp.Pool = config.Pool{Max: 2, IdleTimeout: config.Duration(10 * time.Minute)}
		ps := fakeConfig("ps")
		ps.SessionMode = config.SessionPerSession
		m := newFakeManager(t, peers, []config.Server{pp, ps}, ManagerOptions{})
		synctest.Wait()
		ctx := context.Background()
		call := func(server string, who Caller) error {
			_, err := m.Call(ctx, server, who, "ping", nil, nil)
			return err
		}
		// One client per principal, the base client apart.
		for _, who := range []string{"alice", "bob", "alice"} {
			if err := call("pp", Caller{Principal: who}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
		}
		if st := state(t, m, "pp"); st.Sessions != 2 || peers["pp"].count() != 3 {
			t.Fatalf("%d sessions, %d clients made; want 2 and 3", st.Sessions, peers["pp"].count())
		}
		// Full: carol takes the place of bob, used least recently.
		if err := call("pp", Caller{Principal: "carol"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !closed(peers["pp"].conn(2).t) || closed(peers["pp"].conn(1).t) {
			t.Error("the pool did not close bob's client, the least recently used")
		}
		// Both clients busy: dave is refused.
		var wg sync.WaitGroup
		for _, who := range []string{"alice", "carol"} {
			wg.Go(func() {
				if _, err := m.Call(ctx, "pp", Caller{Principal: who}, "tools/call", json.RawMessage(`"`+who+`"`), nil); err != nil {
					t.Errorf("busy call: %v", err)
				}
			})
			<-arrived
		}
		var full *PoolFullError
		if err := call("pp", Caller{Principal: "dave"}); !errors.As(err, &full) || full.Server != "pp" || full.Max != 2 {
			t.Errorf("call with a full, busy pool = %v, want *PoolFullError{pp, 2}", err)
		}
		// A client with a call in flight is never reaped, however long
		// the call takes.
		time.Sleep(time.Hour)
		if st := state(t, m, "pp"); st.Sessions != 2 {
			t.Errorf("%d sessions while busy, want 2", st.Sessions)
		}
		close(release)
		wg.Wait()
		// Idle clients are reaped after the idle timeout.
		time.Sleep(10*time.Minute + reapInterval(10*time.Minute))
		synctest.Wait()
		if st := state(t, m, "pp"); st.Sessions != 0 {
			t.Errorf("%d sessions after the idle timeout, want 0", st.Sessions)
		}

		// per_session: one per session; a caller without one is keyed by
		// its principal; EndSession closes the session's client.
		for _, who := range []Caller{{"alice", "s1"}, {"alice", "s2"}, {"alice", "s1"}, {"alice", ""}} {
			if err := call("ps", who); err != nil {
				t.Fatal(err)
			}
		}
		if st := state(t, m, "ps"); st.Sessions != 3 {
			t.Errorf("%d per_session sessions, want 3", st.Sessions)
		}
		m.EndSession("s1")
		m.EndSession("unknown")
		synctest.Wait()
		if st := state(t, m, "ps"); st.Sessions != 2 || !closed(peers["ps"].conn(1).t) {
			t.Errorf("after EndSession: %d sessions, s1's client closed: %v", st.Sessions, closed(peers["ps"].conn(1).t))
		}

		// A client that dies leaves the pool; the next call makes a new one.
		peers["ps"].conn(2).t.die(errors.New("exit status 1"))
		synctest.Wait()
		if st := state(t, m, "ps"); st.Sessions != 1 {
			t.Errorf("%d sessions after a client died, want 1", st.Sessions)
		}
		if err := call("ps", Caller{"alice", "s2"}); err != nil {
			t.Fatal(err)
		}
		if n := peers["ps"].count(); n != 5 {
			t.Errorf("%d clients made, want 5", n)
		}
	})
}

func closed(f *fakeTransport) bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

// TestManager_PoolSharedConnect checks that callers arriving while their
// client connects wait for that one connect, and that a caller whose
// context ends stops waiting without stopping the connect.
func TestManager_PoolSharedConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := &fakePeer{}
		srv := fakeConfig("s")
		srv.SessionMode = config.SessionPerPrincipal
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{})
		synctest.Wait()
		peer.gate = make(chan struct{}) // hold the callers' handshakes
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 4)
		for i := range 4 {
			go func() {
				callCtx := context.Background()
				if i == 0 {
					callCtx = ctx
				}
				_, err := m.Call(callCtx, "s", Caller{Principal: "alice"}, "ping", nil, nil)
				errc <- err
			}()
		}
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled caller = %v", err)
		}
		close(peer.gate)
		for range 3 {
			if err := <-errc; err != nil {
				t.Error(err)
			}
		}
		if n := peer.count(); n != 2 {
			t.Errorf("%d clients made, want 2 (the base and alice's)", n)
		}
	})
}

// TestManager_PoolStartTimeout checks that a caller's client that does
// not connect within the start timeout fails the call with an
// *UnavailableError, and leaves the pool.
func TestManager_PoolStartTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := &fakePeer{}
		srv := fakeConfig("s")
		srv.SessionMode = config.SessionPerSession
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{StartTimeout: time.Minute})
		synctest.Wait()
		peer.gate = make(chan struct{})
		defer close(peer.gate)
		start := time.Now()
		_, err := m.Call(context.Background(), "s", Caller{Session: "s1"}, "ping", nil, nil)
		var uerr *UnavailableError
		if !errors.As(err, &uerr) || !strings.Contains(uerr.Err, "did not start within 1m0s") {
			t.Errorf("call = %v, want an *UnavailableError saying it did not start", err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Errorf("gave up after %s, want the start timeout", d)
		}
		if st := state(t, m, "s"); st.Sessions != 0 {
			t.Errorf("%d sessions", st.Sessions)
		}
	})
}

// TestManager_Credentials checks that every client gets its credentials
// from the provider, for its principal, and that a provider's error fails
// the client's start with an error naming the server.
func TestManager_Credentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prov := &recordingProvider{}
		peers := map[string]*fakePeer{"s": {}, "bad": {}}
		srv := fakeConfig("s")
		srv.SessionMode = config.SessionPerPrincipal
		srv.Env = map[string]string{"TOKEN": "configured"}
		bad := fakeConfig("bad")
		bad.Restart.MaxAttempts = -1
		m := newFakeManager(t, peers, []config.Server{srv, bad}, ManagerOptions{Credentials: prov})
		synctest.Wait()
		if _, err := m.Call(context.Background(), "s", Caller{Principal: "alice"}, "ping", nil, nil); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range peers["s"].conns {
			got = append(got, fmt.Sprintf("%s|%s|%s|%s", c.srv.APIKey, c.srv.Headers["X-User"], c.srv.Env["TOKEN"], c.srv.Env["WHO"]))
		}
		want := []string{"key-||configured|base", "key-alice|alice|configured|alice"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("credentials of the clients (-want +got):\n%s", diff)
		}
		st := state(t, m, "bad")
		if st.State != StateFailed || st.Error != `getting credentials for server "bad": no token for this principal` {
			t.Errorf("bad: state %s, error %q", st.State, st.Error)
		}
		if peers["bad"].count() != 0 {
			t.Error("a client was made without credentials")
		}
	})
}

// recordingProvider gives each principal its own key, header and env; it
// fails for server "bad".
type recordingProvider struct{}

func (recordingProvider) Credentials(_ context.Context, srv config.Server, principal string) (Credentials, error) {
	if srv.Name == "bad" {
		return Credentials{}, errors.New("no token for this principal")
	}
	who := principal
	if who == "" {
		who = "base"
	}
	env := map[string]string{"WHO": who}
	for k, v := range srv.Env {
		env[k] = v
	}
	return Credentials{APIKey: "key-" + principal, Headers: map[string]string{"X-User": principal}, Env: env}, nil
}
