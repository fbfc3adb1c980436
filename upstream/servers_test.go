package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The tests in this file change the servers of a running Manager (Add,
// Replace, Remove, SetEnabled, Restart) over in-memory peers, inside
// testing/synctest bubbles where time matters: a change that returns
// after no time at all did not wait out a bound.

// byCommand makes each client of a server with the peer named by the
// server's Command, so that a replaced configuration reaches another peer.
func byCommand(peers map[string]*fakePeer) func(config.Server, ClientOptions) (*Client, error) {
	return func(srv config.Server, o ClientOptions) (*Client, error) {
		return peers[srv.Command].newClient(srv, o)
	}
}

// peerConfig is a server named name served by peer (see byCommand).
func peerConfig(name, peer string) config.Server {
	return config.Server{Name: name, Transport: config.TransportStdio, Command: peer}
}

// toolsPeer is a peer offering tools. Its tools/call is never answered:
// it reports its params on arrived, if not nil, and waits for the client
// to give up.
func toolsPeer(arrived chan<- string, tools ...string) *fakePeer {
	return &fakePeer{handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
		switch m.Method {
		case "tools/list":
			objs := make([]string, len(tools))
			for i, name := range tools {
				objs[i] = `{"name":"` + name + `","inputSchema":{"type":"object"}}`
			}
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"tools":[`+strings.Join(objs, ",")+`]}`)), m.ID)
			return true
		case "tools/call":
			if arrived != nil {
				arrived <- string(m.Params)
			}
			return true
		}
		return false
	}}
}

// newTestManager returns a Manager of opts, started if start is set, and
// closes it when the test ends.
func newTestManager(t *testing.T, opts ManagerOptions, start bool) *Manager {
	t.Helper()
	m := NewManager(opts)
	if start {
		m.Start()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// eventLog records the Events of a Manager.
type eventLog struct {
	mu  sync.Mutex
	evs []string // "server" or "server notification-method"
}

func watchEvents(t *testing.T, m *Manager) *eventLog {
	l := &eventLog{}
	stop := m.Watch(func(ev Event) {
		s := ev.Server
		if ev.Notification != nil {
			s += " " + ev.Notification.Method
		}
		l.mu.Lock()
		l.evs = append(l.evs, s)
		l.mu.Unlock()
	})
	t.Cleanup(stop)
	return l
}

// take returns the events recorded since the last take, without repeats.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := slices.Compact(l.evs)
	l.evs = nil
	return evs
}

// callAsync calls tools/call on server for who in the background; the
// error comes on the channel.
func callAsync(m *Manager, server string, who Caller) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := m.Call(context.Background(), server, who, "tools/call", json.RawMessage(`{"name":"t"}`), nil)
		errc <- err
	}()
	return errc
}

// wantUnavailable checks that err is an *UnavailableError of server in
// state, whose message holds msg.
func wantUnavailable(t *testing.T, err error, server string, state State, msg string) {
	t.Helper()
	var uerr *UnavailableError
	if !errors.As(err, &uerr) || uerr.Server != server || uerr.State != state || !strings.Contains(uerr.Err, msg) {
		t.Errorf("call = %v, want an *UnavailableError of server %q, %s, with %q", err, server, state, msg)
	}
}

// allClosed reports whether every client made of p is closed.
func allClosed(p *fakePeer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if !closed(c.t) {
			return false
		}
	}
	return true
}

func names(sts []Status) []string {
	var out []string
	for _, st := range sts {
		out = append(out, st.Name)
	}
	return out
}

func TestManager_Add(t *testing.T) {
	tests := []struct {
		name    string
		started bool // Add after Start
		enabled bool
		// wantBefore is the state right after Add, when the Manager has
		// not started; wantAfter once Start ran and the server settled.
		wantBefore State
		wantAfter  State
	}{
		{name: "before start", enabled: true, wantBefore: StateStopped, wantAfter: StateRunning},
		{name: "before start, disabled", wantBefore: StateDisabled, wantAfter: StateDisabled},
		{name: "after start", started: true, enabled: true, wantAfter: StateRunning},
		{name: "after start, disabled", started: true, wantAfter: StateDisabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				peers := map[string]*fakePeer{"p": {}}
				m := newTestManager(t, ManagerOptions{Servers: []config.Server{peerConfig("a", "p")}, newClient: byCommand(peers)}, tt.started)
				synctest.Wait()
				events := watchEvents(t, m)
				srv := peerConfig("b", "p")
				srv.Enabled = &tt.enabled
				if err := m.Add(srv); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"b"}, events.take()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if !tt.started {
					if st := state(t, m, "b"); st.State != tt.wantBefore || st.Enabled != tt.enabled {
						t.Errorf("before Start: %s, enabled %v; want %s, %v", st.State, st.Enabled, tt.wantBefore, tt.enabled)
					}
					m.Start()
				}
				synctest.Wait()
				if diff := cmp.Diff([]string{"a", "b"}, names(m.Servers())); diff != "" {
					t.Errorf("servers (-want +got):\n%s", diff)
				}
				if st := state(t, m, "b"); st.State != tt.wantAfter || st.Enabled != tt.enabled {
					t.Errorf("state %s, enabled %v; want %s, %v", st.State, st.Enabled, tt.wantAfter, tt.enabled)
				}
				if sc, ok := m.ServerConfig("b"); !ok || sc.IsEnabled() != tt.enabled {
					t.Errorf("ServerConfig = %+v, %v", sc, ok)
				}
				_, err := m.Call(context.Background(), "b", Caller{}, "ping", nil, nil)
				if tt.wantAfter == StateRunning && err != nil {
					t.Errorf("call: %v", err)
				}
				if tt.wantAfter == StateDisabled {
					wantUnavailable(t, err, "b", StateDisabled, "")
				}
			})
		})
	}
}

// TestManager_ChangeErrors checks the errors of the methods that change
// servers, and that a failed change changes nothing.
func TestManager_ChangeErrors(t *testing.T) {
	tests := []struct {
		name    string
		closed  bool
		change  func(m *Manager) error
		want    error
		wantMsg string
	}{
		{name: "add existing", change: func(m *Manager) error { return m.Add(fakeConfig("on")) },
			want: ErrServerExists, wantMsg: `server "on": server already exists`},
		{name: "add without a name", change: func(m *Manager) error { return m.Add(fakeConfig("")) },
			wantMsg: "adding a server: the server has no name"},
		{name: "replace unknown", change: func(m *Manager) error { return m.Replace(fakeConfig("nope")) },
			want: ErrUnknownServer, wantMsg: `unknown server "nope"`},
		{name: "remove unknown", change: func(m *Manager) error { return m.Remove("nope") },
			want: ErrUnknownServer, wantMsg: `unknown server "nope"`},
		{name: "set enabled unknown", change: func(m *Manager) error { return m.SetEnabled("nope", true) },
			want: ErrUnknownServer, wantMsg: `unknown server "nope"`},
		{name: "restart unknown", change: func(m *Manager) error { return m.Restart("nope") },
			want: ErrUnknownServer, wantMsg: `unknown server "nope"`},
		{name: "restart disabled", change: func(m *Manager) error { return m.Restart("off") },
			want: ErrDisabled, wantMsg: `server "off": server disabled`},
		{name: "add after close", closed: true, change: func(m *Manager) error { return m.Add(fakeConfig("new")) }, want: ErrClosed},
		{name: "replace after close", closed: true, change: func(m *Manager) error { return m.Replace(fakeConfig("on")) }, want: ErrClosed},
		{name: "remove after close", closed: true, change: func(m *Manager) error { return m.Remove("on") }, want: ErrClosed},
		{name: "enable after close", closed: true, change: func(m *Manager) error { return m.SetEnabled("off", true) }, want: ErrClosed},
		{name: "disable after close", closed: true, change: func(m *Manager) error { return m.SetEnabled("on", false) }, want: ErrClosed},
		{name: "restart after close", closed: true, change: func(m *Manager) error { return m.Restart("on") }, want: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				off := fakeConfig("off")
				off.Enabled = new(bool)
				peers := map[string]*fakePeer{"on": {}, "off": {}, "new": {}, "nope": {}}
				m := newFakeManager(t, peers, []config.Server{fakeConfig("on"), off}, ManagerOptions{})
				synctest.Wait()
				if tt.closed {
					if err := m.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				before := m.Servers()
				events := watchEvents(t, m)
				err := tt.change(m)
				if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || (tt.wantMsg != "" && err.Error() != tt.wantMsg) {
					t.Errorf("err = %v, want %v (%q)", err, tt.want, tt.wantMsg)
				}
				synctest.Wait()
				if diff := cmp.Diff(before, m.Servers()); diff != "" {
					t.Errorf("servers after a failed change (-before +after):\n%s", diff)
				}
				if evs := events.take(); len(evs) != 0 {
					t.Errorf("events after a failed change: %q", evs)
				}
			})
		})
	}
}

// TestManager_Replace replaces a running server, shared or pooled, while a
// call is in flight: the call fails at once, every client of the old
// configuration is closed before Replace returns, and the new server's
// tools replace the old ones.
func TestManager_Replace(t *testing.T) {
	tests := []struct {
		name string
		mode string
		who  Caller
	}{
		{name: "shared", mode: config.SessionShared},
		{name: "per principal", mode: config.SessionPerPrincipal, who: Caller{Principal: "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				arrived := make(chan string, 1)
				peers := map[string]*fakePeer{"v1": toolsPeer(arrived, "a", "b"), "v2": toolsPeer(nil, "x", "y", "z")}
				srv := peerConfig("s", "v1")
				srv.SessionMode = tt.mode
				m := newTestManager(t, ManagerOptions{Servers: []config.Server{srv}, newClient: byCommand(peers)}, true)
				synctest.Wait()
				if got := toolNames(t, state(t, m, "s").Tools); !slices.Equal(got, []string{"a", "b"}) {
					t.Fatalf("tools before: %q", got)
				}
				errc := callAsync(m, "s", tt.who)
				<-arrived
				events := watchEvents(t, m)

				next := srv
				next.Command = "v2"
				start := time.Now()
				if err := m.Replace(next); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Replace took %s: it waited out the stop bound", d)
				}
				if !allClosed(peers["v1"]) {
					t.Error("a client of the old configuration is still open after Replace")
				}
				wantUnavailable(t, <-errc, "s", StateStopped, "its configuration was replaced")
				synctest.Wait()
				st := state(t, m, "s")
				if got := toolNames(t, st.Tools); st.State != StateRunning || !slices.Equal(got, []string{"x", "y", "z"}) || st.Restarts != 0 {
					t.Errorf("after Replace: %s, %d restarts, tools %q; want running, 0, [x y z]", st.State, st.Restarts, got)
				}
				if diff := cmp.Diff([]string{"s"}, events.take()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if sc, _ := m.ServerConfig("s"); sc.Command != "v2" {
					t.Errorf("ServerConfig().Command = %q", sc.Command)
				}
				n := peers["v2"].count()
				if _, err := m.Call(context.Background(), "s", tt.who, "ping", nil, nil); err != nil {
					t.Fatal(err)
				}
				if got := peers["v2"].count(); tt.mode != config.SessionShared && got != n+1 {
					t.Errorf("%d clients of the new configuration, want %d (the caller's own)", got, n+1)
				}
			})
		})
	}
}

// TestManager_RemoveAndStaleEvents removes a server during a call, and
// checks that what its old clients still send afterwards reaches neither
// the watchers nor a new server of the same name.
func TestManager_RemoveAndStaleEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arrived := make(chan string, 1)
		peers := map[string]*fakePeer{"v1": toolsPeer(arrived, "a"), "v2": toolsPeer(nil, "b"), "other": {}}
		pooled := peerConfig("s", "v1")
		pooled.SessionMode = config.SessionPerPrincipal
		m := newTestManager(t, ManagerOptions{
			Servers:   []config.Server{pooled, peerConfig("other", "other")},
			newClient: byCommand(peers),
			LogDir:    t.TempDir(),
		}, true)
		synctest.Wait()
		errc := callAsync(m, "s", Caller{Principal: "alice"})
		<-arrived
		events := watchEvents(t, m)

		start := time.Now()
		if err := m.Remove("s"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Remove took %s", d)
		}
		if n := peers["v1"].count(); n != 2 || !allClosed(peers["v1"]) {
			t.Errorf("%d clients of the removed server, all closed: %v; want 2 (base, alice), closed", n, allClosed(peers["v1"]))
		}
		wantUnavailable(t, <-errc, "s", StateStopped, "the server was removed")
		for _, who := range []Caller{{}, {Principal: "alice"}} {
			if _, err := m.Call(context.Background(), "s", who, "tools/call", nil, nil); !errors.Is(err, ErrUnknownServer) {
				t.Errorf("call after Remove = %v, want ErrUnknownServer", err)
			}
		}
		if _, ok := m.Server("s"); ok {
			t.Error("Server still reports the removed server")
		}
		if _, ok := m.ServerConfig("s"); ok {
			t.Error("ServerConfig still reports the removed server")
		}
		if p := m.LogPath("s"); p != "" {
			t.Errorf("LogPath = %q", p)
		}

		// Late messages of the old clients: a list change (which would
		// refresh the server and emit) and a resource update (which
		// would be handed to the watchers).
		stale := func() {
			for _, i := range []int{0, 1} {
				f := peers["v1"].conn(i).t
				f.recv(jsonrpc.NewNotification("notifications/tools/list_changed", nil), jsonrpc.ID{})
				f.recv(jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"file:///x"}`)), jsonrpc.ID{})
			}
			synctest.Wait()
		}
		stale()
		if diff := cmp.Diff([]string{"s"}, events.take()); diff != "" {
			t.Errorf("events after Remove and the old clients' late messages (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"other"}, names(m.Servers())); diff != "" {
			t.Errorf("servers (-want +got):\n%s", diff)
		}

		// A new server of the same name gets none of them either.
		if err := m.Add(peerConfig("s", "v2")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		events.take()
		lists := func() int {
			return strings.Count(strings.Join(peers["v2"].conn(0).t.sentMethods(), " "), "tools/list")
		}
		before := lists()
		stale()
		if evs := events.take(); len(evs) != 0 {
			t.Errorf("the new server got the old one's events: %q", evs)
		}
		if got := lists(); got != before {
			t.Errorf("the new server's tools were listed %d times after the old one's list change, want %d", got, before)
		}
		if got := toolNames(t, state(t, m, "s").Tools); !slices.Equal(got, []string{"b"}) {
			t.Errorf("tools of the new server: %q", got)
		}
	})
}

// TestManager_SetEnabled switches a running server off and on, twice each:
// off stops its client and drops its lists; on starts a new one; a switch
// to the state it has does nothing.
func TestManager_SetEnabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := &fakePeer{}
		m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{fakeConfig("s")}, ManagerOptions{})
		synctest.Wait()
		events := watchEvents(t, m)
		steps := []struct {
			enabled   bool
			wantState State
			wantTools int
			wantConns int  // clients made so far
			wantEvent bool // false: nothing changed
		}{
			{enabled: false, wantState: StateDisabled, wantTools: 0, wantConns: 1, wantEvent: true},
			{enabled: false, wantState: StateDisabled, wantTools: 0, wantConns: 1},
			{enabled: true, wantState: StateRunning, wantTools: 1, wantConns: 2, wantEvent: true},
			{enabled: true, wantState: StateRunning, wantTools: 1, wantConns: 2},
			{enabled: false, wantState: StateDisabled, wantTools: 0, wantConns: 2, wantEvent: true},
		}
		for i, step := range steps {
			if err := m.SetEnabled("s", step.enabled); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			synctest.Wait()
			st := state(t, m, "s")
			sc, _ := m.ServerConfig("s")
			if st.State != step.wantState || st.Enabled != step.enabled || sc.IsEnabled() != step.enabled || st.ToolCount != step.wantTools || st.Error != "" {
				t.Errorf("step %d: %s, enabled %v (config %v), %d tools, error %q; want %s, %v, %d tools, none",
					i, st.State, st.Enabled, sc.IsEnabled(), st.ToolCount, st.Error, step.wantState, step.enabled, step.wantTools)
			}
			if n := peer.count(); n != step.wantConns {
				t.Errorf("step %d: %d clients made, want %d", i, n, step.wantConns)
			}
			for j := range peer.count() {
				if live := j == peer.count()-1 && step.enabled; closed(peer.conn(j).t) == live {
					t.Errorf("step %d: client %d closed: %v", i, j, !live)
				}
			}
			if got := len(events.take()) > 0; got != step.wantEvent {
				t.Errorf("step %d: event %v, want %v", i, got, step.wantEvent)
			}
		}
		_, err := m.Call(context.Background(), "s", Caller{}, "ping", nil, nil)
		wantUnavailable(t, err, "s", StateDisabled, "")
	})
}

// TestManager_SetEnabledBeforeStart checks that before Start, SetEnabled
// only records the switch, and Start follows it.
func TestManager_SetEnabledBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := map[string]*fakePeer{"on": {}, "off": {}}
		off := peerConfig("off", "off")
		off.Enabled = new(bool)
		m := newTestManager(t, ManagerOptions{Servers: []config.Server{peerConfig("on", "on"), off}, newClient: byCommand(peers)}, false)
		for _, c := range []struct {
			name    string
			enabled bool
		}{{"on", false}, {"off", true}} {
			if err := m.SetEnabled(c.name, c.enabled); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Restart("off"); err != nil { // enabled now; Start starts it
			t.Fatal(err)
		}
		synctest.Wait()
		if n := peers["on"].count() + peers["off"].count(); n != 0 {
			t.Fatalf("%d clients made before Start", n)
		}
		m.Start()
		synctest.Wait()
		if st := state(t, m, "on"); st.State != StateDisabled || peers["on"].count() != 0 {
			t.Errorf("on: %s after %d starts; want disabled, none", st.State, peers["on"].count())
		}
		if st := state(t, m, "off"); st.State != StateRunning || st.Restarts != 0 {
			t.Errorf("off: %s, %d restarts; want running, 0", st.State, st.Restarts)
		}
	})
}

// TestManager_Restart restarts a server in each state it can be in: it
// starts again at once, with its backoff and failures in a row reset, and
// one more restart counted.
func TestManager_Restart(t *testing.T) {
	tests := []struct {
		name    string
		restart config.Restart
		// fails are the errors of the starts before Restart; failAfter
		// those after.
		fails, failAfter []string
		// setup brings the server into wantBefore.
		setup          func(t *testing.T, peer *fakePeer)
		wantBefore     State
		restartsBefore int
		// wantWait is the backoff after the first start that follows
		// Restart, 0 if that start runs.
		wantWait time.Duration
	}{
		{
			name:       "running",
			wantBefore: StateRunning,
		},
		{
			name:           "waiting on a long backoff",
			restart:        config.Restart{InitialBackoff: config.Duration(time.Hour)},
			fails:          []string{"refused"},
			wantBefore:     StateRestarting,
			restartsBefore: 0,
		},
		{
			name:           "failed",
			restart:        config.Restart{MaxAttempts: 2, InitialBackoff: config.Duration(time.Second)},
			fails:          []string{"refused", "refused", "refused"},
			failAfter:      []string{"refused"},
			setup:          func(t *testing.T, _ *fakePeer) { time.Sleep(time.Minute) },
			wantBefore:     StateFailed,
			restartsBefore: 2,
			// Reset: the first wait again, not none left.
			wantWait: time.Second,
		},
		{
			name:       "exited",
			restart:    config.Restart{MaxAttempts: -1},
			setup:      func(t *testing.T, peer *fakePeer) { peer.conn(0).t.die(errors.New("exit status 1")) },
			wantBefore: StateExited,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				arrived := make(chan string, 1)
				peer := toolsPeer(arrived, "a")
				peer.failStarts = tt.fails
				srv := fakeConfig("s")
				srv.Restart = tt.restart
				m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{srv}, ManagerOptions{})
				synctest.Wait()
				if tt.setup != nil {
					tt.setup(t, peer)
					synctest.Wait()
				}
				st := state(t, m, "s")
				if st.State != tt.wantBefore || st.Restarts != tt.restartsBefore {
					t.Fatalf("before Restart: %s, %d restarts; want %s, %d", st.State, st.Restarts, tt.wantBefore, tt.restartsBefore)
				}
				var errc <-chan error
				if st.State == StateRunning {
					errc = callAsync(m, "s", Caller{})
					<-arrived
				}
				peer.mu.Lock()
				peer.failStarts = tt.failAfter
				peer.mu.Unlock()
				events := watchEvents(t, m)
				conns := peer.count()

				start := time.Now()
				if err := m.Restart("s"); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Restart took %s", d)
				}
				if errc != nil {
					wantUnavailable(t, <-errc, "s", StateRestarting, "a restart was requested")
				}
				synctest.Wait()
				if !slices.Contains(events.take(), "s") {
					t.Error("no event for the restart")
				}
				if peer.count() != conns+1 {
					t.Errorf("%d starts after Restart, want 1", peer.count()-conns)
				}
				st = state(t, m, "s")
				if st.Restarts != tt.restartsBefore+1 {
					t.Errorf("%d restarts, want %d", st.Restarts, tt.restartsBefore+1)
				}
				if tt.wantWait == 0 {
					if st.State != StateRunning || st.ToolCount != 1 {
						t.Errorf("after Restart: %s with %d tools, want running with 1", st.State, st.ToolCount)
					}
					return
				}
				if st.State != StateRestarting || time.Until(st.NextRestart) != tt.wantWait {
					t.Fatalf("after Restart: %s, next restart in %s; want restarting in %s", st.State, time.Until(st.NextRestart), tt.wantWait)
				}
				time.Sleep(tt.wantWait)
				synctest.Wait()
				if st := state(t, m, "s"); st.State != StateRunning || st.Restarts != tt.restartsBefore+2 {
					t.Errorf("after the backoff: %s, %d restarts; want running, %d", st.State, st.Restarts, tt.restartsBefore+2)
				}
			})
		})
	}
}

// TestManager_ChangeWhileStarting replaces and removes a server whose
// start hangs in initialize: the start is abandoned and its client closed.
func TestManager_ChangeWhileStarting(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *Manager) error
		want   State // of "s" after the change; "" for gone
	}{
		{name: "replace", change: func(m *Manager) error { return m.Replace(peerConfig("s", "v2")) }, want: StateRunning},
		{name: "remove", change: func(m *Manager) error { return m.Remove("s") }},
		{name: "disable", change: func(m *Manager) error { return m.SetEnabled("s", false) }, want: StateDisabled},
		{name: "restart", change: func(m *Manager) error { return m.Restart("s") }, want: StateStarting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gate := make(chan struct{})
				defer close(gate)
				peers := map[string]*fakePeer{"v1": {gate: gate}, "v2": {}}
				m := newTestManager(t, ManagerOptions{Servers: []config.Server{peerConfig("s", "v1")}, newClient: byCommand(peers)}, true)
				synctest.Wait()
				if st := state(t, m, "s"); st.State != StateStarting {
					t.Fatalf("state %s, want starting", st.State)
				}
				start := time.Now()
				if err := tt.change(m); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("the change took %s", d)
				}
				if !closed(peers["v1"].conn(0).t) {
					t.Error("the client that was starting is still open")
				}
				synctest.Wait()
				st, ok := m.Server("s")
				if tt.want == "" {
					if ok {
						t.Errorf("the removed server is still there: %s", st.State)
					}
					return
				}
				if st.State != tt.want {
					t.Errorf("state %s, want %s", st.State, tt.want)
				}
			})
		})
	}
}

// TestManager_ReapAddedPools checks that pooled servers added after Start
// get their idle clients reaped, also with a shorter idle timeout than
// the reaper already had.
func TestManager_ReapAddedPools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := map[string]*fakePeer{"p": {}}
		m := newTestManager(t, ManagerOptions{Servers: []config.Server{peerConfig("shared", "p")}, newClient: byCommand(peers)}, true)
		synctest.Wait()
		for _, c := range []struct {
			name string
			idle time.Duration
		}{
			{"slow", 10 * time.Minute}, // starts the reaper
			{"fast", time.Minute},      // shortens its interval
		} {
			srv := peerConfig(c.name, "p")
			srv.SessionMode = config.SessionPerPrincipal
			srv.Pool.IdleTimeout = config.Duration(c.idle)
			if err := m.Add(srv); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if _, err := m.Call(context.Background(), c.name, Caller{Principal: "alice"}, "ping", nil, nil); err != nil {
				t.Fatal(err)
			}
			if st := state(t, m, c.name); st.Sessions != 1 {
				t.Fatalf("%s: %d sessions, want 1", c.name, st.Sessions)
			}
			time.Sleep(c.idle + reapInterval(c.idle))
			synctest.Wait()
			if st := state(t, m, c.name); st.Sessions != 0 {
				t.Errorf("%s: %d sessions after its idle timeout, want 0", c.name, st.Sessions)
			}
		}
	})
}

// TestManager_ChangesUnderLoad changes a few servers from many goroutines
// at once, with calls in flight, a fixed number of times each: the race
// detector watches, every error is one the methods document, and at Close
// nothing is left running.
func TestManager_ChangesUnderLoad(t *testing.T) {
	checkNoLeaks(t)
	logs := newLogRecorder()
	peers := map[string]*fakePeer{"v1": toolsPeer(nil, "a"), "v2": toolsPeer(nil, "b", "c")}
	srvNames := []string{"s0", "s1", "s2"}
	cfg := func(i int) config.Server {
		srv := peerConfig(srvNames[i%len(srvNames)], []string{"v1", "v2"}[i%2])
		if i%3 == 0 {
			srv.SessionMode = config.SessionPerPrincipal
		}
		return srv
	}
	m := NewManager(ManagerOptions{Servers: []config.Server{cfg(0)}, newClient: byCommand(peers), Logger: slog.New(logs)})
	m.Start()
	watchEvents(t, m)

	const workers, rounds = 8, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				i := w*rounds + r
				name := srvNames[i%len(srvNames)]
				var err error
				switch (w + r) % 7 {
				case 0:
					err = m.Add(cfg(i))
				case 1:
					err = m.Remove(name)
				case 2:
					err = m.Replace(cfg(i))
				case 3:
					err = m.SetEnabled(name, r%2 == 0)
				case 4:
					err = m.Restart(name)
				default:
					ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
					_, err = m.Call(ctx, name, Caller{Principal: fmt.Sprint("p", r%3)}, "ping", nil, nil)
					cancel()
				}
				var uerr *UnavailableError
				var full *PoolFullError
				switch {
				case err == nil, errors.Is(err, ErrUnknownServer), errors.Is(err, ErrServerExists), errors.Is(err, ErrDisabled),
					errors.As(err, &uerr), errors.As(err, &full):
				default:
					t.Errorf("worker %d round %d: %v", w, r, err)
				}
			}
		})
	}
	wg.Wait()
	// Whatever is left settles: each server is running or disabled.
	for _, st := range m.Servers() {
		waitStatus(t, m, st.Name, func(st Status) bool { return st.State == StateRunning || st.State == StateDisabled })
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if !allClosed(p) {
			t.Error("a client is open after Close")
		}
	}
	if r := logs.find("a stopped server's work did not end within the stop bound; it goes on ending in the background"); len(r) > 0 {
		t.Errorf("%d stops overran their bound", len(r))
	}
}
