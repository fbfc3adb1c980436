package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The tests in this file run the Manager over real peers: the test binary
// re-executed as a stdio server (see fakeServer), and httptest servers.

// startManager starts a Manager and, when the test ends, closes it and
// checks that the processes it reported are gone.
func startManager(t *testing.T, opts ManagerOptions) *Manager {
	t.Helper()
	checkNoLeaks(t)
	if opts.StopGrace == 0 {
		opts.StopGrace = testGrace
	}
	opts.Logger = logOnFailure(t, opts.Logger)
	m := NewManager(opts)
	m.Start()
	t.Cleanup(func() {
		var pids []int
		for _, st := range m.Servers() {
			if st.PID != 0 {
				pids = append(pids, st.PID)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, pid := range pids {
			if !reaped(pid) {
				t.Errorf("process %d still exists after Close", pid)
			}
		}
	})
	return m
}

// waitStatus waits until server's status satisfies cond, and returns it.
func waitStatus(t *testing.T, m *Manager, server string, cond func(Status) bool) Status {
	t.Helper()
	var st Status
	if !eventually(func() bool { st = state(t, m, server); return cond(st) }) {
		t.Fatalf("server %q never reached the expected status; last: %s, %d restarts, error %q", server, st.State, st.Restarts, st.Error)
	}
	return st
}

func isRunning(st Status) bool { return st.State == StateRunning }

// managerText calls tool through m and returns its first text block.
func managerText(t *testing.T, m *Manager, server string, who Caller, tool string, hooks *CallHooks) string {
	t.Helper()
	raw, err := m.Call(callCtx(t), server, who, "tools/call", json.RawMessage(`{"name":"`+tool+`"}`), hooks)
	if err != nil {
		t.Fatalf("calling %s on %s for %+v: %v", tool, server, who, err)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", raw, err)
	}
	return res.Content[0].Text
}

// TestManager_StdioKill kills a stdio server during a call: the call fails
// at once with an *UnavailableError, the server is restarted, and because
// each restart reached running, max_attempts 1 allows the next one too.
func TestManager_StdioKill(t *testing.T) {
	srv := fakeServerConfig(t, "")
	srv.Restart = config.Restart{MaxAttempts: 1, InitialBackoff: config.Duration(10 * time.Millisecond)}
	m := startManager(t, ManagerOptions{Servers: []config.Server{srv}})
	st := waitStatus(t, m, "fake", isRunning)
	for i := range 2 {
		pid := st.PID
		started := make(chan struct{}, 1)
		hooks := &CallHooks{Notify: func(n *jsonrpc.Message) {
			if n.Method == "notifications/message" { // the only call: its log is its own
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}}
		errc := make(chan error, 1)
		go func() {
			_, err := m.Call(context.Background(), "fake", Caller{}, "tools/call", json.RawMessage(`{"name":"slow"}`), hooks)
			errc <- err
		}()
		<-started
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-errc:
		case <-time.After(waitLimit):
			t.Fatal("the call in flight hangs after its server was killed")
		}
		var uerr *UnavailableError
		if !errors.As(err, &uerr) || uerr.Server != "fake" || !strings.Contains(uerr.Err, "signal: killed") {
			t.Fatalf("call in flight = %v, want an *UnavailableError naming the server and the kill", err)
		}
		if uerr.State != StateExited && uerr.State != StateRestarting {
			t.Errorf("the error names state %s", uerr.State)
		}
		st = waitStatus(t, m, "fake", func(st Status) bool { return isRunning(st) && st.Restarts == i+1 })
		if st.PID == pid || st.PID == 0 {
			t.Errorf("PID after the restart = %d (was %d)", st.PID, pid)
		}
		if !eventually(func() bool { return reaped(pid) }) {
			t.Errorf("killed process %d not reaped", pid)
		}
	}
}

// TestManager_StdioStartFailures covers a server that fails to start a
// number of times: it is restarted until it runs or the attempts run out,
// and its error, the same each time, is logged once at error level.
func TestManager_StdioStartFailures(t *testing.T) {
	tests := []struct {
		name         string
		failFirst    int
		maxAttempts  int
		wantState    State
		wantRestarts int
	}{
		{name: "recovers", failFirst: 3, maxAttempts: 5, wantState: StateRunning, wantRestarts: 3},
		{name: "gives up", failFirst: 10, maxAttempts: 2, wantState: StateFailed, wantRestarts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeServerConfig(t, fmt.Sprintf("fail-first=%d", tt.failFirst))
			srv.Env[counterEnv] = filepath.Join(t.TempDir(), "starts")
			srv.Restart = config.Restart{MaxAttempts: tt.maxAttempts, InitialBackoff: config.Duration(time.Millisecond)}
			logs := newLogRecorder()
			m := startManager(t, ManagerOptions{Servers: []config.Server{srv}, Logger: slog.New(logs)})
			st := waitStatus(t, m, "fake", func(st Status) bool { return st.State == tt.wantState })
			if st.Restarts != tt.wantRestarts {
				t.Errorf("%d restarts, want %d", st.Restarts, tt.wantRestarts)
			}
			const wantErr = `initialize: connection to server "fake" lost: process exited: exit status 1 (last stderr: "not yet")`
			var levels []string
			for _, r := range logs.find("server failed to start") {
				if r.attrs["err"] != wantErr || r.attrs["server"] != "fake" {
					t.Errorf("logged %v, want err %s", r.attrs, wantErr)
				}
				levels = append(levels, r.level.String())
			}
			if diff := cmp.Diff([]string{"ERROR", "DEBUG", "DEBUG"}, levels); diff != "" {
				t.Errorf("levels of the failures logged (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManager_StdioLogFile checks the server's log file: its stderr, every
// log message it sends (also those of a call, which still reach the call),
// the lifecycle, no secret, and rotation.
func TestManager_StdioLogFile(t *testing.T) {
	tests := []struct {
		name   string
		rotate int64
	}{
		{name: "one file"},
		{name: "rotated", rotate: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs", "mcp")
			srv := fakeServerConfig(t, "logging")
			srv.Env["MCPGW_TEST_LEAK"] = "hunter2-5ecret"
			m := startManager(t, ManagerOptions{Servers: []config.Server{srv}, LogDir: dir, logRotateBytes: tt.rotate})
			st := waitStatus(t, m, "fake", isRunning)
			if got, want := m.LogPath("fake"), filepath.Join(dir, "fake.log"); got != want {
				t.Errorf("LogPath = %q, want %q", got, want)
			}
			if got := m.LogPath("nope"); got != "" {
				t.Errorf("LogPath of an unknown server = %q", got)
			}
			var mu sync.Mutex
			var notes []string
			hooks := &CallHooks{Notify: func(n *jsonrpc.Message) {
				mu.Lock()
				notes = append(notes, n.Method)
				mu.Unlock()
			}}
			if got := managerText(t, m, "fake", Caller{}, "log", hooks); got != "logged" {
				t.Errorf("log tool = %q", got)
			}
			mu.Lock()
			if diff := cmp.Diff([]string{"notifications/message", "notifications/message"}, notes); diff != "" {
				t.Errorf("the call's notifications (-want +got):\n%s", diff)
			}
			mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := m.Close(ctx); err != nil {
				t.Fatal(err)
			}

			path := m.LogPath("fake")
			b, _ := os.ReadFile(path)
			backup, _ := os.ReadFile(path + ".1")
			if strings.Contains(string(b)+string(backup), "hunter2") {
				t.Errorf("the log holds a secret:\n%s%s", backup, b)
			}
			if tt.rotate > 0 {
				lines := readLog(t, path+".1")
				if len(lines) == 0 || len(backup) > int(tt.rotate) {
					t.Errorf("backup of %d bytes with %d lines", len(backup), len(lines))
				}
				if last := readLog(t, path); !slices.Contains(last, "[lifecycle] stopped: the gateway is shutting down") {
					t.Errorf("the current file does not end with the stop: %q", last)
				}
				return
			}
			got := readLog(t, path)
			want := []string{
				"[lifecycle] starting (stdio: " + srv.Command + ")",
				"[stderr] fake server starting",
				"[stderr] leaking [redacted]",
				"[lifecycle] initialized (protocol 2025-11-25)",
				fmt.Sprintf("[lifecycle] running: 4 tools, 0 prompts, 0 resources, pid %d", st.PID),
				`[warning] db: {"slow":true}`,
				`[info] two\nlines`,
				"[lifecycle] stopped: the gateway is shutting down",
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Errorf("the log lacks %q; it has:\n%s", w, strings.Join(got, "\n"))
				}
			}
			// The gateway's own lines come in order.
			var lifecycle []string
			for _, l := range got {
				if strings.HasPrefix(l, "[lifecycle]") {
					lifecycle = append(lifecycle, l)
				}
			}
			if diff := cmp.Diff([]string{want[0], want[3], want[4], want[7]}, lifecycle); diff != "" {
				t.Errorf("lifecycle lines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManager_StdioAttribution covers server requests over stdio, where
// nothing ties them to a call: the only call in flight with hooks answers
// them; with two, or none, the gateway does (no RequestFunc is
// registered here), from the server's config, and logs it: roots/list,
// which servers ask at every start, at debug only.
func TestManager_StdioAttribution(t *testing.T) {
	logs := newLogRecorder()
	withRoots := fakeServerConfig(t, "")
	withRoots.Roots = []config.Root{{URI: "file:///work", Name: "work"}, {URI: "file:///tmp"}}
	noRoots := fakeServerConfig(t, "")
	noRoots.Name = "bare"
	m := startManager(t, ManagerOptions{Servers: []config.Server{withRoots, noRoots}, Logger: slog.New(logs)})
	waitStatus(t, m, "fake", isRunning)
	waitStatus(t, m, "bare", isRunning)

	answer := func(_ context.Context, r *jsonrpc.Message) (json.RawMessage, error) {
		return json.RawMessage(`{"answered":"by the call","method":"` + r.Method + `"}`), nil
	}
	tests := []struct {
		name   string
		server string
		tool   string
		hooks  bool // the call has a Request hook
		other  bool // another call with hooks is in flight
		want   string
	}{
		{name: "elicitation, one call", server: "fake", tool: "elicit", hooks: true, want: `{"answered":"by the call","method":"elicitation/create"}`},
		{name: "sampling, one call", server: "fake", tool: "sample", hooks: true, want: `{"answered":"by the call","method":"sampling/createMessage"}`},
		{name: "elicitation, two calls", server: "fake", tool: "elicit", hooks: true, other: true, want: `{"action":"cancel"}`},
		{name: "roots, two calls", server: "fake", tool: "roots", hooks: true, other: true, want: `{"roots":[{"uri":"file:///work","name":"work"},{"uri":"file:///tmp"}]}`},
		{name: "roots, a call without hooks", server: "fake", tool: "roots", want: `{"roots":[{"uri":"file:///work","name":"work"},{"uri":"file:///tmp"}]}`},
		{name: "roots, none configured", server: "bare", tool: "roots", want: `{"roots":[]}`},
		{name: "sampling, no hooks", server: "fake", tool: "sample", want: `error {"code":-32603,"message":"mcpgw has no client to ask for sampling/createMessage: no client can take requests outside a call"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.other {
				started := make(chan struct{}, 1)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					m.Call(ctx, tt.server, Caller{}, "tools/call", json.RawMessage(`{"name":"slow"}`), &CallHooks{
						Notify:  func(*jsonrpc.Message) { started <- struct{}{} },
						Request: answer,
					})
				}()
				<-started
				t.Cleanup(func() { cancel(); <-done })
			}
			var hooks *CallHooks
			if tt.hooks {
				hooks = &CallHooks{Request: answer}
			}
			if got := managerText(t, m, tt.server, Caller{}, tt.tool, hooks); got != tt.want {
				t.Errorf("the server got %s, want %s", got, tt.want)
			}
		})
	}
	var methods []string
	for _, r := range logs.find("answering a server request for a client") {
		methods = append(methods, r.level.String()+" "+r.attrs["server"]+" "+r.attrs["method"])
		if _, ok := r.attrs["params"]; ok {
			t.Errorf("logged the params: %v", r.attrs)
		}
	}
	// roots/list at debug; the rest at info, once a minute per server:
	// fake's sampling came within the minute of its elicitation.
	want := []string{"INFO fake elicitation/create", "DEBUG fake roots/list", "DEBUG fake roots/list", "DEBUG bare roots/list", "DEBUG fake sampling/createMessage"}
	if diff := cmp.Diff(want, methods); diff != "" {
		t.Errorf("gateway answers logged (-want +got):\n%s", diff)
	}
}

// TestManager_StdioPools runs one process per principal, and per session,
// each with its own credentials, and ends a session's process with
// EndSession.
func TestManager_StdioPools(t *testing.T) {
	perPrincipal := fakeServerConfig(t, "")
	perPrincipal.SessionMode = config.SessionPerPrincipal
	perSession := fakeServerConfig(t, "")
	perSession.Name = "sess"
	perSession.SessionMode = config.SessionPerSession
	m := startManager(t, ManagerOptions{Servers: []config.Server{perPrincipal, perSession}, Credentials: recordingProvider{}})
	base := waitStatus(t, m, "fake", isRunning)
	waitStatus(t, m, "sess", isRunning)

	pids := map[string]string{}
	for _, who := range []string{"alice", "bob", "alice"} {
		pid := managerText(t, m, "fake", Caller{Principal: who}, "pid", nil)
		if prev, ok := pids[who]; ok && prev != pid {
			t.Errorf("%s got process %s, then %s", who, prev, pid)
		}
		pids[who] = pid
		var env []string
		if err := json.Unmarshal([]byte(managerText(t, m, "fake", Caller{Principal: who}, "env", nil)), &env); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(env, "WHO="+who) {
			t.Errorf("%s's process has env %v, want WHO=%s", who, env, who)
		}
	}
	if pids["alice"] == pids["bob"] || pids["alice"] == strconv.Itoa(base.PID) {
		t.Errorf("processes: alice %s, bob %s, base %d; want three", pids["alice"], pids["bob"], base.PID)
	}
	if st := state(t, m, "fake"); st.Sessions != 2 {
		t.Errorf("%d sessions, want 2", st.Sessions)
	}

	s1 := managerText(t, m, "sess", Caller{Principal: "alice", Session: "s1"}, "pid", nil)
	s2 := managerText(t, m, "sess", Caller{Principal: "alice", Session: "s2"}, "pid", nil)
	if s1 == s2 {
		t.Errorf("two sessions share process %s", s1)
	}
	m.EndSession("s1")
	pid1, _ := strconv.Atoi(s1)
	if !eventually(func() bool { return reaped(pid1) && state(t, m, "sess").Sessions == 1 }) {
		t.Errorf("after EndSession: process %d reaped %v, %d sessions", pid1, reaped(pid1), state(t, m, "sess").Sessions)
	}
	if err := m.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []string{pids["alice"], pids["bob"], s2} {
		if p, _ := strconv.Atoi(pid); !reaped(p) {
			t.Errorf("pooled process %d survived Close", p)
		}
	}
}

// TestManager_HTTPCredentials runs an http server whose config carries no
// credentials: the provider's key and header reach it, the log file names
// it without its query and holds no secret.
func TestManager_HTTPCredentials(t *testing.T) {
	f := newFakeHTTP(t)
	hsrv := f.start()
	srv := testServer("http", hsrv.URL+"/mcp?token=query-5ecret")
	srv.APIKey, srv.Headers = "", nil
	dir := t.TempDir()
	prov := credentialsFunc(func(_ context.Context, _ config.Server, principal string) (Credentials, error) {
		return Credentials{APIKey: testAPIKey, Headers: map[string]string{"X-Test": testHeaderValue}}, nil
	})
	m := startManager(t, ManagerOptions{Servers: []config.Server{srv}, Credentials: prov, LogDir: dir})
	waitStatus(t, m, "fake", isRunning)
	if _, err := m.Call(callCtx(t), "fake", Caller{}, "tools/call", json.RawMessage(`{"name":"echo"}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(m.LogPath("fake"))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, "the server log", string(b))
	if !regexp.MustCompile(`\[lifecycle\]  starting \(http: http://127\.0\.0\.1:\d+/mcp\)\n`).Match(b) {
		t.Errorf("the log does not name the server by its safe URL:\n%s", b)
	}
}

// credentialsFunc adapts a func to CredentialProvider.
type credentialsFunc func(ctx context.Context, srv config.Server, principal string) (Credentials, error)

func (f credentialsFunc) Credentials(ctx context.Context, srv config.Server, principal string) (Credentials, error) {
	return f(ctx, srv, principal)
}

// TestManager_StdioRedactsFailures checks that a server echoing its
// credentials on stderr does not get them into its status, the gateway's
// log or its log file when it fails.
func TestManager_StdioRedactsFailures(t *testing.T) {
	const secret = "hunter2-5ecret"
	srv := fakeServerConfig(t, "fail-first=1")
	srv.Env[counterEnv] = filepath.Join(t.TempDir(), "starts")
	srv.Env["MCPGW_TEST_LEAK"] = secret
	srv.Restart.MaxAttempts = -1
	logs := &syncBuffer{}
	m := startManager(t, ManagerOptions{
		Servers: []config.Server{srv},
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LogDir:  t.TempDir(),
	})
	st := waitStatus(t, m, "fake", func(st Status) bool { return st.State == StateFailed })
	if want := `(last stderr: "not yet [redacted]")`; !strings.Contains(st.Error, want) || st.LastStderr != "not yet [redacted]" {
		t.Errorf("status error %q, last stderr %q; want them redacted", st.Error, st.LastStderr)
	}
	if err := m.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(m.LogPath("fake"))
	for what, s := range map[string]string{"gateway log": logs.String(), "server log": string(b)} {
		if strings.Contains(s, secret) {
			t.Errorf("the %s holds the secret:\n%s", what, s)
		}
	}
	if !strings.Contains(string(b), "[lifecycle]  start failed: ") {
		t.Errorf("the server log lacks the failure:\n%s", b)
	}
}

// TestManager_StdioReplaceAndRemove replaces a stdio server during a call,
// and removes a per_principal one: each old process, the pooled ones too,
// is reaped by the time Replace or Remove returns, the call fails, the new
// server runs as configured, and the log files keep the story.
func TestManager_StdioReplaceAndRemove(t *testing.T) {
	srv := fakeServerConfig(t, "")
	pooled := fakeServerConfig(t, "")
	pooled.Name = "pooled"
	pooled.SessionMode = config.SessionPerPrincipal
	m := startManager(t, ManagerOptions{Servers: []config.Server{srv, pooled}, LogDir: t.TempDir()})
	old := waitStatus(t, m, "fake", isRunning)
	if old.ProtocolVersion != LatestProtocolVersion {
		t.Fatalf("protocol %s before Replace", old.ProtocolVersion)
	}

	started := make(chan struct{}, 1)
	hooks := &CallHooks{Notify: func(n *jsonrpc.Message) {
		if n.Method == "notifications/message" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Call(context.Background(), "fake", Caller{}, "tools/call", json.RawMessage(`{"name":"slow"}`), hooks)
		errc <- err
	}()
	<-started
	if err := m.Replace(fakeServerConfig(t, "oldversion")); err != nil {
		t.Fatal(err)
	}
	if !reaped(old.PID) {
		t.Errorf("the replaced process %d is still there after Replace", old.PID)
	}
	select {
	case err := <-errc:
		wantUnavailable(t, err, "fake", StateStopped, "its configuration was replaced")
	case <-time.After(waitLimit):
		t.Fatal("the call in flight hangs after Replace")
	}
	st := waitStatus(t, m, "fake", isRunning)
	if st.PID == old.PID || st.ProtocolVersion != "2025-03-26" {
		t.Errorf("after Replace: pid %d (was %d), protocol %s; want a new process speaking 2025-03-26", st.PID, old.PID, st.ProtocolVersion)
	}
	if got := managerText(t, m, "fake", Caller{}, "pid", nil); got != strconv.Itoa(st.PID) {
		t.Errorf("a call after Replace reached process %s, want %d", got, st.PID)
	}

	base := waitStatus(t, m, "pooled", isRunning).PID
	alice, _ := strconv.Atoi(managerText(t, m, "pooled", Caller{Principal: "alice"}, "pid", nil))
	pooledLog := m.LogPath("pooled")
	if err := m.Remove("pooled"); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{base, alice} {
		if !reaped(pid) {
			t.Errorf("process %d of the removed server is still there after Remove", pid)
		}
	}
	if _, err := m.Call(callCtx(t), "pooled", Caller{Principal: "alice"}, "tools/call", json.RawMessage(`{"name":"pid"}`), nil); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("call after Remove = %v, want ErrUnknownServer", err)
	}
	if diff := cmp.Diff([]string{"fake"}, names(m.Servers())); diff != "" {
		t.Errorf("servers after Remove (-want +got):\n%s", diff)
	}

	if err := m.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string // in this order, among the lifecycle lines
	}{
		{m.LogPath("fake"), []string{
			"[lifecycle] starting (stdio: " + srv.Command + ")",
			"[lifecycle] initialized (protocol 2025-11-25)",
			"[lifecycle] stopped: its configuration was replaced",
			"[lifecycle] starting (stdio: " + srv.Command + ")",
			"[lifecycle] initialized (protocol 2025-03-26)",
		}},
		{pooledLog, []string{
			"[lifecycle] principal alice: stopped: the server was removed",
		}},
	} {
		lines := readLog(t, tc.path)
		i := 0
		for _, l := range lines {
			if i < len(tc.want) && l == tc.want[i] {
				i++
			}
		}
		if i < len(tc.want) {
			t.Errorf("%s lacks %q (in order); it has:\n%s", tc.path, tc.want[i], strings.Join(lines, "\n"))
		}
	}
	if lines := readLog(t, pooledLog); !slices.Contains(lines, "[lifecycle] stopped: the server was removed") {
		t.Errorf("the removed server's log lacks its stop:\n%s", strings.Join(lines, "\n"))
	}
}
