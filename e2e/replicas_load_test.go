package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgw/mcpgw/internal/rawclient"
)

// loadSessions and loadFor size TestReplicas_ThousandSessions; the
// MCPGW_E2E_LOAD_SECONDS variable shortens it for a run by hand.
const loadSessions = 1000

func loadFor() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("MCPGW_E2E_LOAD_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return time.Minute
}

// metric returns the value of the unlabelled Prometheus metric name on
// g's /metrics.
func (g *gateway) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s is not on %s/metrics", name, g.URL)
	return 0
}

// TestReplicas_ThousandSessions: 1,000 sessions, each with its GET
// stream, spread over three replicas behind nginx, call for a minute:
// every call gets its own answer; the replicas' PostgreSQL connections
// stay within their pools (store.max_conns 4, plus one listening each);
// once the sessions end, each replica is back to its goroutines and open
// files of before.
func TestReplicas_ThousandSessions(t *testing.T) {
	rs := startReplicas(t, 3, "sessions: {max_per_principal: 2000}\n", "")
	front := startNginx(t, rs.addrs)
	type base struct{ goroutines, fds float64 }
	before := make([]base, len(rs.gs))
	for i, g := range rs.gs {
		before[i] = base{g.metric(t, "go_goroutines"), g.metric(t, "process_open_fds")}
	}
	dsn := rs.dsn
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(hc.CloseIdleConnections)

	clients := make([]*rawclient.Client, loadSessions)
	var dial sync.WaitGroup
	dialErrs := make(chan error, loadSessions)
	sem := make(chan struct{}, 32)
	for i := range clients {
		dial.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := rawclient.Dial(ctxT(t), front+"/mcp", rawclient.Options{HTTPClient: hc,
				ClientInfo: json.RawMessage(fmt.Sprintf(`{"name":"e2e-load-%d","version":"1"}`, i))})
			if err != nil {
				dialErrs <- fmt.Errorf("session %d: %w", i, err)
				return
			}
			if err := c.OpenStream(ctxT(t)); err != nil {
				dialErrs <- fmt.Errorf("session %d's GET stream: %w", i, err)
			}
			clients[i] = c
		})
	}
	dial.Wait()
	close(dialErrs)
	for err := range dialErrs {
		t.Fatal(err)
	}
	held := 0
	for _, g := range rs.gs {
		var list struct {
			Sessions []struct {
				State string `json:"state"`
			} `json:"sessions"`
		}
		g.adminGet(t, "/admin/sessions", &list)
		live := 0
		for _, s := range list.Sessions {
			if s.State == "live" {
				live++
			}
		}
		if live == 0 {
			t.Errorf("replica %s holds no session: nginx did not spread them", g.URL)
		}
		held += live
	}
	if held != loadSessions {
		t.Errorf("the replicas hold %d live sessions, want %d", held, loadSessions)
	}

	// Calls, 48 at a time, over every session in turn, for loadFor.
	var calls, wrong atomic.Int64
	var firstWrong atomic.Value
	deadline := time.Now().Add(loadFor())
	var next atomic.Int64
	var load sync.WaitGroup
	for range 48 {
		load.Go(func() {
			for time.Now().Before(deadline) {
				n := next.Add(1)
				c := clients[n%loadSessions]
				text := fmt.Sprintf("call %d", n)
				res, err := c.Call(ctxT(t), "tools/call", map[string]any{"name": "mcp__bridge__echo", "arguments": map[string]any{"text": text}})
				calls.Add(1)
				var r struct {
					Content []struct{ Text string } `json:"content"`
				}
				if err != nil || json.Unmarshal(res, &r) != nil || len(r.Content) != 1 || r.Content[0].Text != "echo: "+text {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, fmt.Sprintf("%s: %v %s", text, err, res))
				}
			}
		})
	}
	// PostgreSQL's connections while the load runs.
	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pgConns int
	if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&pgConns); err != nil {
		t.Fatal(err)
	}
	load.Wait()
	t.Logf("%d calls over %d sessions in %s, %d PostgreSQL connections", calls.Load(), loadSessions, loadFor(), pgConns)
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d of %d calls got no answer or another's; the first: %v", n, calls.Load(), firstWrong.Load())
	}
	if max := 3 * (4 + 1); pgConns > max {
		t.Errorf("%d PostgreSQL connections, want at most %d (3 replicas × (max_conns 4 + 1 listening))", pgConns, max)
	}

	// The sessions end; the replicas let go of what they held.
	var end sync.WaitGroup
	for _, c := range clients {
		end.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c.Close(ctxT(t))
		})
	}
	end.Wait()
	hc.CloseIdleConnections()
	// What may stay: idle keep-alive connections, nginx's (keepalive 32)
	// and the other replicas' forwarding pools (at most 64 each), each a
	// file and two goroutines. What a session left behind would be a
	// thousand of something.
	const idle = 32 + 2*64
	for i, g := range rs.gs {
		waitBelow(t, g, "go_goroutines", before[i].goroutines+2*idle+20)
		waitBelow(t, g, "process_open_fds", before[i].fds+idle+20)
	}
}

// waitBelow waits until g's metric name is at most limit: what a replica
// holds for sessions goes once they end, not at once.
func waitBelow(t *testing.T, g *gateway, name string, limit float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := g.metric(t, name)
		if v <= limit {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s of %s is %v 30 s after the sessions ended, want at most %v", name, g.URL, v, limit)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
