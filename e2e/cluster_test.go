package e2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clusterSecret is the replicas' shared secret: each opens the session
// ids and forwarding tokens of the others.
const clusterSecret = "e2e-cluster-secret-0123456789abcdef"

// startReplicas starts n gateways that share one database and secret, as
// replicas r1..rn of a cluster (each reached by the others at its own
// listening address), each in front of its own serverrequests child with
// per_session upstream sessions.
func startReplicas(t *testing.T, n int) []*gateway {
	t.Helper()
	return startReplicasWith(t, n, "", "")
}

// startReplicasWith is startReplicas with more top-level config (top) and
// more servers (servers, entries of the servers list).
func startReplicasWith(t *testing.T, n int, top, servers string) []*gateway {
	t.Helper()
	if out, err := buildBridge(); err != nil {
		t.Fatalf("building bridgeserver: %v\n%s", err, out)
	}
	db := filepath.Join(t.TempDir(), "shared.db")
	var gs []*gateway
	for i := 1; i <= n; i++ {
		g := startGateway(t, baseEnv(), top+fmt.Sprintf(`secret: %s
database: {path: %s}
cluster: {enabled: true, replica_id: r%d}
servers:
  - name: asker
    transport: stdio
    command: %s
    session_mode: per_session
  - name: bridge
    transport: stdio
    command: %s
    args: [-legacy]
    protocol: legacy
`, clusterSecret, db, i, bin("serverrequests"), bin("bridgeserver"))+servers)
		g.waitState(t, "asker", "running")
		g.waitState(t, "bridge", "running")
		gs = append(gs, g)
	}
	return gs
}

// roundRobin is what a load balancer without affinity does in front of
// the replicas: each request to the next one. It counts what each got.
type roundRobin struct {
	*httptest.Server
	mu   sync.Mutex
	next int
	got  []int
}

func newRoundRobin(t *testing.T, gs []*gateway) *roundRobin {
	rr := &roundRobin{got: make([]int, len(gs))}
	var proxies []*httputil.ReverseProxy
	for _, g := range gs {
		u, _ := url.Parse(g.URL)
		proxies = append(proxies, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0), // a killed replica's cut streams
		})
	}
	rr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rr.mu.Lock()
		i := rr.next % len(proxies)
		rr.next++
		rr.got[i]++
		rr.mu.Unlock()
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(rr.Close)
	return rr
}

func (rr *roundRobin) counts() []int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]int(nil), rr.got...)
}

// TestCluster_SessionAcrossReplicas: a 2025 session whose requests land on
// either of two replicas, in turn, is served as one: its lists and calls,
// its GET stream and the elicitation the server sends on it, and the
// answer, each forwarded to the replica that holds the session. A
// forwarding token from outside is refused; when the owner is killed,
// the session's requests get 404 at once on the other replica.
func TestCluster_SessionAcrossReplicas(t *testing.T) {
	gs := startReplicas(t, 2)
	rr := newRoundRobin(t, gs)
	front := &gateway{URL: rr.URL}

	var seen recorder
	changed := make(chan struct{}, 16)
	cs := connectRelay(t, front, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen.add(req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "teal"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	for range 4 {
		res, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatalf("listing tools through the replicas: %v", err)
		}
		if len(res.Tools) < 4 {
			t.Errorf("tools/list = %d tools, want the asker's and the bridge's", len(res.Tools))
		}
	}
	if got := elicitLater(t, cs, "Colour, across replicas?"); got != `action=accept content={"answer":"teal"}` {
		t.Errorf("the server got %q, want the client's answer", got)
	}
	if diff := cmp.Diff([]string{"Colour, across replicas?"}, seen.all()); diff != "" {
		t.Errorf("the client was asked (-want +got):\n%s", diff)
	}
	if got := rr.counts(); got[0] == 0 || got[1] == 0 {
		t.Fatalf("requests per replica %v: both must have had some", got)
	}
	// The replica that started the session answered all of them; the
	// other forwarded what it got.
	if n := strings.Count(gs[1].Stderr(), `"msg":"request answered"`); n != 0 {
		t.Errorf("the second replica answered %d requests itself, want all forwarded", n)
	}
	if n := strings.Count(gs[0].Stderr(), `"msg":"request answered"`); n < 6 {
		t.Errorf("the owner answered %d requests, want every one of the session's", n)
	}

	// A server registered through the second replica's admin API runs on
	// the first too, which tells the session on its GET stream.
	web := start(t, baseEnv(), "serverrequests", "-http", "127.0.0.1:0", "-name", "web")
	webURL := web.waitLine(t, "the web server's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	if status, body := gs[1].adminDo(t, "POST", "/admin/servers", adminToken, fmt.Sprintf(`{"name":"web","transport":"http","url":%q}`, webURL)); status != http.StatusCreated {
		t.Fatalf("registering web on the second replica: %d %s", status, body)
	}
	gs[0].waitKnown(t, "web")
	gs[0].waitState(t, "web", "running")
	select {
	case <-changed:
	case <-ctxT(t).Done():
		t.Fatal("no tools/list_changed on the session's GET stream after another replica's admin change")
	}
	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil || !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "mcp__web__elicit_later" }) {
		t.Errorf("tools/list after web was registered: %v, %v; want web's tools", res, err)
	}

	// A forwarding token a client made up.
	h := http.Header{}
	h.Set("Mcpgw-Replica-Token", "made-up")
	h.Set("Mcp-Session-Id", cs.ID())
	h.Set("MCP-Protocol-Version", legacyVersion)
	for _, g := range gs {
		ans := postRaw(t, g.URL+"/mcp", h, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if ans.status != http.StatusForbidden {
			t.Errorf("a made-up forwarding token at %s: status %d, want 403", g.URL, ans.status)
		}
	}

	// The session was initialized on the first replica; it goes with it.
	owner, other := gs[0], gs[1]
	syscall.Kill(owner.cmd.Process.Pid, syscall.SIGKILL)
	<-owner.done
	h.Del("Mcpgw-Replica-Token")
	ans := postRaw(t, other.URL+"/mcp", h, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if ans.status != http.StatusNotFound || !strings.Contains(ans.body, "replica that held it is gone") {
		t.Errorf("a request of the killed replica's session: %d %s, want 404 saying its replica is gone", ans.status, ans.body)
	}
	// A new session on the replica left works.
	again := connectRelay(t, other, &mcp.ClientOptions{})
	if _, err := again.ListTools(ctxT(t), nil); err != nil {
		t.Errorf("a new session on the replica left: %v", err)
	}
}

// waitKnown waits until the admin API knows the server name: registered
// elsewhere, it comes here within a round of following the store.
func (g *gateway) waitKnown(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := g.adminDo(t, "GET", "/admin/servers/"+name, g.Admin, "")
		switch {
		case status == http.StatusOK:
			return
		case status != http.StatusNotFound || time.Now().After(deadline):
			t.Fatalf("GET /admin/servers/%s = %d %s", name, status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCluster_ParkedCallElsewhere: a 2026-07-28 client's call to a 2025
// server that asks for input mid-call is parked on the replica it reached;
// the follow-up, sent to another replica, is forwarded to that one and
// gets the call's result.
func TestCluster_ParkedCallElsewhere(t *testing.T) {
	gs := startReplicas(t, 2)
	first := connectBridge(t, gs[0], "2026", true)
	second := connectBridge(t, gs[1], "2026", true)
	const message = "Which replica answers?"
	key, state := first.inputRequired(t, "cluster", message)
	res, err := second.retry(t, "cluster", message, key, "from the other one", state)
	if err != nil {
		t.Fatalf("the follow-up on the other replica: %v", err)
	}
	if got := text(res); got != "action=accept answer=from the other one" || res.IsError {
		t.Errorf("the call's result = %q (isError %v), want the answer given on the other replica", got, res.IsError)
	}
	// Only the first replica holds the parked call: the answer above came
	// from it (the second, serving it itself, answers -32602).
}

// TestCluster_TaskElsewhere: a 2026-07-28 client's hosted task runs on
// the replica that made it; polled, answered (tasks/update) and cancelled
// through another replica, each request reaches it.
func TestCluster_TaskElsewhere(t *testing.T) {
	plainURL, _ := startTaskExt(t, "plain")
	gs := startReplicasWith(t, 2, "tasks: {promote_after: 100ms, poll_interval: 50ms}\n",
		fmt.Sprintf("  - {name: plain, transport: http, url: %q, protocol: modern}\n", plainURL))
	for _, g := range gs {
		g.waitState(t, "plain", "running")
	}
	maker := &extClient{t: t, url: gs[0].URL, caps: tasksExtCaps}
	other := &extClient{t: t, url: gs[1].URL, caps: tasksExtCaps}

	created := maker.result("tools/call", map[string]any{"name": "mcp__plain__confirm_delete", "arguments": map[string]any{"filename": "b.txt"}})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call = %v, want a hosted task", created)
	}
	asking := other.await(id, func(task map[string]any) bool { return task["status"] != "working" })
	reqs, _ := asking["inputRequests"].(map[string]any)
	if asking["status"] != "input_required" || len(reqs) != 1 {
		t.Fatalf("tasks/get on the other replica = %v, want the input request the maker holds", asking)
	}
	answers := map[string]any{}
	for k := range reqs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	other.result("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
	if done := other.await(id, terminalTask); done["status"] != "completed" || firstText(done["result"]) != "deleted b.txt" {
		t.Errorf("tasks/get on the other replica = %v, want the confirmed delete", done)
	}

	created = maker.result("tools/call", map[string]any{"name": "mcp__plain__slow_compute", "arguments": map[string]any{"seconds": 60, "label": "long"}})
	id, _ = created["taskId"].(string)
	other.result("tasks/cancel", map[string]any{"taskId": id})
	if done := maker.await(id, terminalTask); done["status"] != "cancelled" {
		t.Errorf("tasks/get on the maker after a cancel through the other = %v", done)
	}
}
