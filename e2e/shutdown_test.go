package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readyz is one answer of GET /readyz.
type readyz struct {
	Code    int
	Status  string   `json:"status"`
	Reasons []string `json:"reasons"`
}

// getReadyz asks the gateway's /readyz; err is the transport's.
func (g *gateway) getReadyz(t testing.TB) (readyz, error) {
	t.Helper()
	resp, err := http.Get(g.URL + "/readyz")
	if err != nil {
		return readyz{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return readyz{}, err
	}
	r := readyz{Code: resp.StatusCode}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET /readyz = %d %q: %v", resp.StatusCode, body, err)
	}
	return r, nil
}

// waitReadyz polls /readyz until it answers code, and returns that answer.
func (g *gateway) waitReadyz(t testing.TB, code int) readyz {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := g.getReadyz(t)
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		if r.Code == code {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz = %+v after a minute, want %d", r, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyz: /readyz is unready while a required server is down and ready
// once every enabled required server runs; a server that is not required
// does not count.
func TestReadyz(t *testing.T) {
	g := startGateway(t, baseEnv(), fmt.Sprintf(`servers:
  - name: up
    transport: stdio
    command: %[1]s
    required: true
  - name: down
    transport: stdio
    command: false
    required: true
    restart:
      max_attempts: -1
  - name: optional
    transport: stdio
    command: false
    restart:
      max_attempts: -1
`, bin("demo-server")))
	g.waitState(t, "up", "running")
	g.waitState(t, "down", "failed")
	g.waitState(t, "optional", "failed")

	got := g.waitReadyz(t, http.StatusServiceUnavailable)
	want := readyz{Code: http.StatusServiceUnavailable, Status: "unready", Reasons: []string{`server "down" is failed`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/readyz with a required server down (-want +got):\n%s", diff)
	}

	// Switched off, a required server no longer counts.
	if status, body := g.adminDo(t, "PATCH", "/admin/servers/down", g.Admin, `{"enabled":false}`); status != http.StatusOK {
		t.Fatalf("PATCH enabled false = %d %s", status, body)
	}
	got = g.waitReadyz(t, http.StatusOK)
	if diff := cmp.Diff(readyz{Code: http.StatusOK, Status: "ready"}, got); diff != "" {
		t.Errorf("/readyz with every required server running (-want +got):\n%s", diff)
	}
}

// shutdownGateway is a gateway in front of one stdio demo server, with a
// client that has a slow call in flight (one progress step done).
type shutdownGateway struct {
	*gateway
	childPID int
	call     <-chan callResult
}

// startSlowCall starts a gateway with the given shutdown_grace and a call
// of slow for seconds, and returns once the call is in flight.
func startSlowCall(t *testing.T, grace string, seconds int) *shutdownGateway {
	t.Helper()
	g := startGateway(t, baseEnv(), fmt.Sprintf(`shutdown_grace: %s
servers:
  - name: demo
    transport: stdio
    command: %s
    required: true
`, grace, bin("demo-server")))
	st := g.waitState(t, "demo", "running")
	if st.PID == 0 {
		t.Fatalf("the stdio server has no pid: %+v", st)
	}
	g.waitReadyz(t, http.StatusOK)

	progressed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-shutdown", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", DisableStandaloneSSE: true}, legacySession)
	if err != nil {
		t.Fatalf("connecting to the gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	params := &mcp.CallToolParams{Name: "mcp__demo__slow", Arguments: map[string]any{"seconds": seconds}}
	params.SetProgressToken("shutdown")
	call := goCall(ctxT(t), cs, params)
	select {
	case <-progressed:
	case r := <-call:
		t.Fatalf("slow returned before its first step: %+v, %v", r.res, r.err)
	case <-time.After(time.Minute):
		t.Fatal("no progress from slow within a minute")
	}
	return &shutdownGateway{gateway: g, childPID: st.PID, call: call}
}

// sigterm signals the gateway alone (not its process group: stopping the
// children is the gateway's job), and polls /readyz at once: it must
// answer 503 while the drain lasts.
func (g *shutdownGateway) sigterm(t *testing.T) time.Time {
	t.Helper()
	sent := time.Now()
	if err := syscall.Kill(g.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := g.getReadyz(t)
		if err != nil {
			t.Fatalf("GET /readyz right after SIGTERM: %v (want 503 during the drain)", err)
		}
		if r.Code == http.StatusServiceUnavailable {
			if diff := cmp.Diff([]string{"shutting down"}, r.Reasons); diff != "" {
				t.Errorf("/readyz reasons during the drain (-want +got):\n%s", diff)
			}
			return sent
		}
		// The signal may not have been handled yet.
		if time.Since(sent) > 500*time.Millisecond {
			t.Fatalf("GET /readyz = %+v half a second after SIGTERM, want 503", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExit waits up to within for the gateway to exit, and checks that it
// exited 0 and left no child.
func (g *shutdownGateway) waitExit(t *testing.T, sent time.Time, within time.Duration) {
	t.Helper()
	select {
	case <-g.done:
	case <-time.After(within - time.Since(sent)):
		t.Fatalf("the gateway did not exit within %v of SIGTERM", within)
	}
	t.Logf("the gateway exited %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the gateway exited %d, want 0", code)
	}
	if err := syscall.Kill(g.childPID, 0); err == nil {
		t.Errorf("the stdio server (pid %d) is still there after the gateway exited", g.childPID)
		syscall.Kill(-g.childPID, syscall.SIGKILL)
	}
}

// TestShutdown_DrainsSlowCall: a call that ends within shutdown_grace is
// answered, /readyz is 503 meanwhile, and the gateway exits 0 with its
// child stopped.
func TestShutdown_DrainsSlowCall(t *testing.T) {
	g := startSlowCall(t, "10s", 2)
	sent := g.sigterm(t)

	select {
	case r := <-g.call:
		if r.err != nil {
			t.Fatalf("slow during the drain: %v, want its result", r.err)
		}
		if r.res.IsError || text(r.res) != "slept 2 seconds" {
			t.Errorf("slow during the drain = %+v (%q), want its result", r.res, text(r.res))
		}
	case <-time.After(time.Minute):
		t.Fatal("slow did not return during the drain")
	}
	g.waitExit(t, sent, 10*time.Second)
}

// TestShutdown_CancelsAfterGrace: a call still running when shutdown_grace
// ends is cancelled upstream (the server sees notifications/cancelled) and
// the client gets an error; the gateway exits 0 soon after the grace with
// its child stopped.
func TestShutdown_CancelsAfterGrace(t *testing.T) {
	g := startSlowCall(t, "1s", 300)
	sent := g.sigterm(t)

	select {
	case r := <-g.call:
		// The gateway's own error, not a dropped connection.
		if r.err == nil || !strings.Contains(r.err.Error(), "shut down") {
			t.Errorf("slow cut by shutdown = %+v, %v; want the gateway's shutdown error", r.res, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("slow did not return after the grace")
	}
	// grace 1s, then at most 2s to flush the HTTP connections and a few for
	// the child to stop.
	g.waitExit(t, sent, 1*time.Second+6*time.Second)

	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.serverLog(t, "demo"), "slow: cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo server never logged slow: cancelled; its log:\n%s", g.serverLog(t, "demo"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
