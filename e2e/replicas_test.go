package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/e2e/fixtures/oauthas"
	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// The replicas' tests run mcpgw as a cluster, as it runs in production:
// several processes over one PostgreSQL database and one secret, each at
// an address of its own (cluster.self_url), behind nginx round robin
// without affinity.

// clusterSecret is the replicas' shared secret: each opens the session
// ids and forwarding tokens of the others.
const clusterSecret = "e2e-cluster-secret-0123456789abcdef"

// replicaSet is the replicas of one cluster, with what it takes to start
// one again as it was.
type replicaSet struct {
	gs      []*gateway
	addrs   []string // host:port of each, kept across restarts
	dirs    []string
	configs []string
	dsn     string // their database
}

// startReplicas starts n replicas r1..rn over a new PostgreSQL database,
// each in front of its own serverrequests child (per_session) and a 2025
// bridgeserver child, with more top-level config (top) and more entries
// of the servers list (servers).
func startReplicas(t *testing.T, n int, top, servers string) *replicaSet {
	t.Helper()
	if out, err := buildBridge(); err != nil {
		t.Fatalf("building bridgeserver: %v\n%s", err, out)
	}
	dsn := pgtest.DSN(t)
	rs := &replicaSet{dsn: dsn}
	for i := 1; i <= n; i++ {
		cfg := top + fmt.Sprintf(`secret: %s
store: {driver: postgres, dsn: %q, max_conns: 4}
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
`, clusterSecret, dsn, i, bin("serverrequests"), bin("bridgeserver")) + servers
		rs.addrs = append(rs.addrs, freeAddr(t))
		rs.dirs = append(rs.dirs, t.TempDir())
		rs.configs = append(rs.configs, cfg)
		rs.gs = append(rs.gs, nil)
		rs.start(t, i-1)
	}
	return rs
}

// start starts replica i, again if it ran before, at its address.
func (rs *replicaSet) start(t *testing.T, i int) *gateway {
	t.Helper()
	g := startGatewayAt(t, rs.dirs[i], rs.addrs[i], rs.configs[i])
	g.waitState(t, "asker", "running")
	g.waitState(t, "bridge", "running")
	rs.gs[i] = g
	return g
}

// owner returns the index of the replica that holds the session whose
// client named itself client (its short id is in that replica's admin
// list), or -1.
func (rs *replicaSet) owner(t *testing.T, client string) int {
	t.Helper()
	for i, g := range rs.gs {
		var list struct {
			Sessions []struct {
				ClientName string `json:"client_name"`
				State      string `json:"state"`
			} `json:"sessions"`
		}
		g.adminGet(t, "/admin/sessions", &list)
		for _, s := range list.Sessions {
			if s.ClientName == client && s.State == "live" {
				return i
			}
		}
	}
	return -1
}

// TestReplicas_LegacySession: a 2025 session through nginx, whose
// requests land on the three replicas in turn, is served as one: lists
// and calls, an elicitation in the middle of a call answered through
// whichever replica, the GET stream and the request the server sends on
// it, and a list_changed there after a server is registered through
// another replica's admin API. A forwarding token from outside is
// refused.
func TestReplicas_LegacySession(t *testing.T) {
	rs := startReplicas(t, 3, "", "")
	front := &gateway{URL: startNginx(t, rs.addrs)}

	var seen recorder
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-replicas", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen.add(req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "teal"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, legacySession)
	if err != nil {
		t.Fatalf("connecting through nginx: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	for range 6 {
		res, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatalf("listing tools through the replicas: %v", err)
		}
		if len(res.Tools) < 4 {
			t.Errorf("tools/list = %d tools, want the asker's and the bridge's", len(res.Tools))
		}
	}
	// The server asks on the session's GET stream, outside any call.
	if got := elicitLater(t, cs, "Colour, across replicas?"); got != `action=accept content={"answer":"teal"}` {
		t.Errorf("the server got %q, want the client's answer", got)
	}
	// The server asks in the middle of a call: the answer is a POST of
	// its own, to whichever replica nginx picks.
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__bridge__ask", Arguments: map[string]any{"tag": "replicas", "message": "Mid-call?"}})
	if err != nil || res.IsError || text(res) != "action=accept answer=teal" {
		t.Errorf("ask through the replicas = %v, %v; want the client's answer", res, err)
	}
	if want := []string{"Colour, across replicas?", "Mid-call?"}; !slices.Equal(seen.all(), want) {
		t.Errorf("the client was asked %q, want %q", seen.all(), want)
	}
	owner := rs.owner(t, "e2e-replicas")
	if owner < 0 {
		t.Fatal("no replica holds the session")
	}
	forwarded := 0
	for i, g := range rs.gs {
		if i != owner {
			forwarded += strings.Count(g.Stderr(), "forwarding a session's request to its replica")
			if n := strings.Count(g.Stderr(), `"msg":"request answered"`); n != 0 {
				t.Errorf("replica r%d answered %d of the session's requests itself, want all forwarded", i+1, n)
			}
		}
	}
	if forwarded == 0 {
		t.Error("no request of the session was forwarded: nginx sent them all to its replica")
	}

	// A server registered on another replica runs on the session's, which
	// tells the session on its GET stream.
	web := start(t, baseEnv(), "serverrequests", "-http", "127.0.0.1:0", "-name", "web")
	webURL := web.waitLine(t, "the web server's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	other := rs.gs[(owner+1)%3]
	if status, body := other.adminDo(t, "POST", "/admin/servers", adminToken, fmt.Sprintf(`{"name":"web","transport":"http","url":%q}`, webURL)); status != http.StatusCreated {
		t.Fatalf("registering web on another replica: %d %s", status, body)
	}
	rs.gs[owner].waitKnown(t, "web")
	rs.gs[owner].waitState(t, "web", "running")
	select {
	case <-changed:
	case <-ctxT(t).Done():
		t.Fatal("no tools/list_changed on the session's GET stream after another replica's admin change")
	}
	// Any replica's admin API shows the server on every replica.
	rs.gs[owner].waitReplicaStates(t, "web", map[string]string{"r1": "running", "r2": "running", "r3": "running"})
	list, err := cs.ListTools(ctxT(t), nil)
	if err != nil || !slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "mcp__web__elicit_later" }) {
		t.Errorf("tools/list after web was registered: %v, %v; want web's tools", list, err)
	}

	// A forwarding token a client made up.
	h := http.Header{}
	h.Set("Mcpgw-Replica-Token", "made-up")
	h.Set("Mcp-Session-Id", cs.ID())
	h.Set("MCP-Protocol-Version", legacyVersion)
	for _, g := range rs.gs {
		if ans := postRaw(t, g.URL+"/mcp", h, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); ans.status != http.StatusForbidden {
			t.Errorf("a made-up forwarding token at %s: status %d, want 403", g.URL, ans.status)
		}
	}
}

// TestReplicas_KillOne: sessions spread over three replicas behind nginx,
// calling; one replica is killed (SIGKILL). The sessions of the others go
// on without an error; those it held get 404 at once and a new session
// works; restarted at its address under its name, it rejoins and serves
// new sessions.
func TestReplicas_KillOne(t *testing.T) {
	rs := startReplicas(t, 3, "", "")
	front := &gateway{URL: startNginx(t, rs.addrs)}
	const n = 9
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("e2e-kill-%d", i), Version: "1"}, nil)
		cs, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, legacySession)
		if err != nil {
			t.Fatalf("connecting session %d: %v", i, err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[i] = cs
		// A client's start is three requests (initialize, initialized,
		// its GET stream): one more, so that round robin starts the next
		// client on the next replica.
		if err := cs.Ping(ctxT(t), nil); err != nil {
			t.Fatalf("ping of session %d: %v", i, err)
		}
	}
	owners := make([]int, n)
	held := map[int]int{}
	for i := range sessions {
		owners[i] = rs.owner(t, fmt.Sprintf("e2e-kill-%d", i))
		held[owners[i]]++
	}
	if len(held) != 3 {
		t.Fatalf("sessions per replica %v: nginx must have spread them over all three", held)
	}
	call := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__bridge__echo", Arguments: map[string]any{"text": "load"}})
		return err
	}
	// Load while the replica dies.
	const victim = 1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([][]error, n)
	for i, cs := range sessions {
		if owners[i] == victim {
			continue
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := call(cs); err != nil {
					errs[i] = append(errs[i], err)
				}
			}
		})
	}
	g := rs.gs[victim]
	syscall.Kill(g.cmd.Process.Pid, syscall.SIGKILL)
	<-g.done
	close(stop)
	wg.Wait()
	// A request that was on its way through the killed replica (nginx
	// sent it there; it forwarded it to the session's replica) is cut:
	// nginx answers 502, and does not send a POST again elsewhere, which
	// could run a call twice. Nothing else fails.
	for i, e := range errs {
		if len(e) > 1 || (len(e) == 1 && !strings.Contains(e[0].Error(), "Bad Gateway")) {
			t.Errorf("session %d (replica r%d) had %d errors while r%d died: %v", i, owners[i]+1, len(e), victim+1, e)
		}
	}
	// Once it is dead, every call of the other sessions works.
	for round := range 3 {
		for i, cs := range sessions {
			if owners[i] != victim {
				if err := call(cs); err != nil {
					t.Errorf("round %d after the kill: session %d (replica r%d): %v", round, i, owners[i]+1, err)
				}
			}
		}
	}
	// The victim's sessions are lost, at once.
	for i, cs := range sessions {
		if owners[i] != victim {
			continue
		}
		start := time.Now()
		err := call(cs)
		if err == nil || !strings.Contains(err.Error(), "session not found") {
			t.Errorf("a call of session %d of the killed replica = %v, want session not found", i, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the lost session's call took %s", d)
		}
	}
	// Its client starts again, on a live replica.
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-kill-again", Version: "1"}, nil)
	again, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, legacySession)
	if err != nil {
		t.Fatalf("a new session after the kill: %v", err)
	}
	t.Cleanup(func() { again.Close() })
	if err := call(again); err != nil {
		t.Errorf("a call of the new session: %v", err)
	}

	// r2 comes back at its address under its name, and serves again.
	back := rs.start(t, victim)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-kill-back", Version: "1"}, nil).
		Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: back.URL + "/mcp"}, legacySession)
	if err != nil {
		t.Fatalf("a session on the restarted replica: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	if err := call(cs); err != nil {
		t.Errorf("a call on the restarted replica: %v", err)
	}
}

// TestReplicas_ParkedCallElsewhere: a 2026-07-28 client's call to a 2025
// server that asks for input mid-call is parked on the replica it
// reached; the follow-up, sent to another replica, is forwarded to that
// one and gets the call's result.
func TestReplicas_ParkedCallElsewhere(t *testing.T) {
	rs := startReplicas(t, 2, "", "")
	first := connectBridge(t, rs.gs[0], "2026", true)
	second := connectBridge(t, rs.gs[1], "2026", true)
	const message = "Which replica answers?"
	key, state := first.inputRequired(t, "cluster", message)
	res, err := second.retry(t, "cluster", message, key, "from the other one", state)
	if err != nil {
		t.Fatalf("the follow-up on the other replica: %v", err)
	}
	// Only the first replica holds the parked call: the answer came from
	// it (the second, serving it itself, answers -32602).
	if got := text(res); got != "action=accept answer=from the other one" || res.IsError {
		t.Errorf("the call's result = %q (isError %v), want the answer given on the other replica", got, res.IsError)
	}
}

// TestReplicas_TaskElsewhere: a 2026-07-28 client's hosted task runs on
// the replica that made it; polled, answered (tasks/update) and cancelled
// through another replica, each request reaches it.
func TestReplicas_TaskElsewhere(t *testing.T) {
	plainURL, _ := startTaskExt(t, "plain")
	rs := startReplicas(t, 2, "tasks: {promote_after: 100ms, poll_interval: 50ms}\n",
		fmt.Sprintf("  - {name: plain, transport: http, url: %q, protocol: modern}\n", plainURL))
	for _, g := range rs.gs {
		g.waitState(t, "plain", "running")
	}
	maker := &extClient{t: t, url: rs.gs[0].URL, caps: tasksExtCaps}
	other := &extClient{t: t, url: rs.gs[1].URL, caps: tasksExtCaps}

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

// waitReplicaStates waits until the admin API says the server name is in
// the state want gives for each replica (they record it every 2 s).
func (g *gateway) waitReplicaStates(t *testing.T, name string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Replicas map[string]string `json:"replicas"`
		}
		g.adminGet(t, "/admin/servers/"+name, &st)
		if maps.Equal(st.Replicas, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s on the replicas: %v, want %v", name, st.Replicas, want)
		}
		time.Sleep(100 * time.Millisecond)
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

// TestReplicas_Media: a media link minted by one replica is served by
// every replica: its bytes are in the shared database.
func TestReplicas_Media(t *testing.T) {
	demoURL, _ := startDemoHTTP(t, "demo-media")
	rs := startReplicas(t, 3, "", fmt.Sprintf("  - {name: demo, transport: http, url: %q}\n", demoURL))
	for _, g := range rs.gs {
		g.waitState(t, "demo", "running")
	}
	direct := connect(t, demoURL, "")
	want, _ := blob(t, callTool(t, direct, "picture", nil))
	cs := connect(t, rs.gs[0].URL+"/mcp", "2025-11-25")
	res := callTool(t, cs, "mcp__demo__picture", nil)
	var link *mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil || !strings.HasPrefix(link.URI, rs.gs[0].URL+"/media/") {
		t.Fatalf("the picture through r1 = %v, want a link to r1's /media", res.Content)
	}
	path := strings.TrimPrefix(link.URI, rs.gs[0].URL)
	for i, g := range rs.gs {
		resp, body := fetch(t, g.URL+path, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			t.Errorf("r%d: GET %s = %d, %d bytes (the server's: %v)", i+1, path, resp.StatusCode, len(body), bytes.Equal(body, want))
		}
	}
}

// TestReplicas_OAuth: an account connected through one replica is used by
// the others: the sign-in a link of r1 starts completes on r2 (the link
// and the state are sealed with the cluster's secret, the tokens are in
// the shared database), and alice's calls through r1 reach the server with
// her token.
func TestReplicas_OAuth(t *testing.T) {
	as, err := oauthas.Start(oauthas.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	const aliceKey = "e2e-replicas-oauth-alice"
	rs := startReplicas(t, 2, fmt.Sprintf("auth:\n  api_keys:\n    - {principal: alice, key_sha256: %q}\n", hashToken(aliceKey)),
		fmt.Sprintf("  - {name: notes, transport: http, url: %q, oauth: {}}\n", as.MCPURL()))
	r1, r2 := rs.gs[0], rs.gs[1]
	alice := dialOAuth(t, r1, aliceKey, "2025-11-25", false, nil)
	waitOAuthTools(t, alice.cs, "mcp__notes__connect")
	link := alice.wantConnect(t, "mcp__notes__connect")
	if !strings.HasPrefix(link, r1.URL+"/oauth/start/") {
		t.Fatalf("link %q is not r1's", link)
	}
	// The browser reaches r2 (behind an ingress, any replica).
	visit(t, as.UserAgent("alice"), r2.URL+strings.TrimPrefix(link, r1.URL), http.StatusOK)
	if n := connectedCount(t, r1); n != 1 {
		t.Fatalf("r1 sees %d connected accounts, want 1", n)
	}
	// r1 lists the server once alice, connected, calls its connect tool.
	if got := alice.call(t, "mcp__notes__connect"); !strings.Contains(got, "is connected") {
		t.Fatalf("connect through r1 = %q", got)
	}
	waitOAuthTools(t, alice.cs, "mcp__notes__whoami")
	if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
		t.Fatalf("alice's call through r1 reached the server as %q", got)
	}
	r2.waitState(t, "notes", "running")
}

// TestReplicas_SearchFinds: in search mode, the tools a 2026-07-28 client
// finds through one replica join its principal's tool list on every
// replica, and the principal's listen stream held by another replica
// hears notifications/tools/list_changed.
func TestReplicas_SearchFinds(t *testing.T) {
	const key = "e2e-replicas-finds-alice"
	rs := startReplicas(t, 2, fmt.Sprintf("list_changed_debounce: 50ms\nauth:\n  api_keys:\n    - {principal: alice, key_sha256: %q}\n", hashToken(key)), "")
	connect := func(g *gateway, ce *clientEvents) *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-finds", Version: "1"}, ce.options())
		cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp?exposure=search", HTTPClient: &http.Client{Transport: bearer{key}}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	search := func(cs *mcp.ClientSession, query string) string {
		t.Helper()
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__mcpgw__search_tools", Arguments: map[string]any{"query": query, "limit": 1}})
		if err != nil || res.IsError {
			t.Fatalf("search_tools %q: %v %+v", query, err, res)
		}
		var out struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || len(out.Tools) != 1 {
			t.Fatalf("search_tools %q found %s", query, b)
		}
		return out.Tools[0].Name
	}
	waitChanged := func(ce *clientEvents, what string) {
		t.Helper()
		select {
		case <-ce.changed:
		case <-ctxT(t).Done():
			t.Fatalf("no notifications/tools/list_changed %s", what)
		}
	}

	onR2 := newClientEvents()
	listener := connect(rs.gs[1], onR2)
	if got := toolNames(t, listener); !slices.Equal(got, []string{"mcp__mcpgw__call_tool", "mcp__mcpgw__search_tools"}) {
		t.Fatalf("r2's tools/list before any search = %v", got)
	}
	// A find through r2 itself: any list_changed shows that the listen
	// stream is open before the other replica's search. (One may come of
	// the catalog merged at start instead; a late one could only make
	// the next wait pass early, never fail it: the lists are checked
	// after.)
	roots := search(listener, "lists the client's roots")
	waitChanged(onR2, "on r2 after its own search")

	searcher := connect(rs.gs[0], newClientEvents())
	onR2.drainChanged()
	echo := search(searcher, "answers with its text")
	if echo != "mcp__bridge__echo" {
		t.Fatalf("the search through r1 found %s, want mcp__bridge__echo", echo)
	}
	waitChanged(onR2, "on r2 after a search through r1")
	got := toolNames(t, listener)
	for _, want := range []string{roots, echo} {
		if !slices.Contains(got, want) {
			t.Fatalf("r2's tools/list after the searches = %v, want %s in it", got, want)
		}
	}
	if res := callTool(t, listener, echo, map[string]any{"text": "found elsewhere"}); res.IsError || text(res) != "echo: found elsewhere" {
		t.Fatalf("the tool found through r1, called through r2: %+v", res)
	}
	// And r1 lists what was found through r2.
	if got := toolNames(t, searcher); !slices.Contains(got, roots) {
		t.Fatalf("r1's tools/list = %v, want %s in it", got, roots)
	}
}
