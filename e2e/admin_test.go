package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The admin tests manage the gateway's servers through /admin
// while a real client uses /mcp.

// adminDo sends an admin request with token (none when "") and returns the
// status and the body.
func (g *gateway) adminDo(t testing.TB, method, path, token, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// adminGet GETs an admin path with the admin token and decodes its JSON
// answer into v; anything but a 200 with JSON fails the test.
func (g *gateway) adminGet(t testing.TB, path string, v any) {
	t.Helper()
	status, body := g.adminDo(t, "GET", path, g.Admin, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// toolNames lists the exposed tool names a client sees.
func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for name := range toolsByName(t, cs) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// waitTools waits until the client's tools/list does (has) or does not
// (!has) contain name.
func waitTools(t testing.TB, cs *mcp.ClientSession, name string, has bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for slices.Contains(toolNames(t, cs), name) != has {
		if time.Now().After(deadline) {
			t.Fatalf("tools/list still has %s = %v after 30s: %v", name, !has, toolNames(t, cs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAdmin_ManageServersLive(t *testing.T) {
	const clientKey = "e2e-admin-client-key"
	demoURL, _ := startDemoHTTP(t, "demo-web")
	dir := t.TempDir()
	config := fmt.Sprintf(`list_changed_debounce: 50ms
auth:
  api_keys:
    - principal: alice
      key_sha256: %q
servers:
  - name: local
    transport: stdio
    command: %s
`, hashToken(clientKey), bin("demo-server"))
	g := startGatewayIn(t, dir, config)
	g.waitState(t, "local", "running")

	changed := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-admin", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	connectAlice := func(g *gateway) *mcp.ClientSession {
		t.Helper()
		hc := &http.Client{Transport: bearer{clientKey}}
		cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs := connectAlice(g)
	waitChange := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatalf("no notifications/tools/list_changed after %s", what)
		}
	}

	// Tokens: none, a wrong one, and a client's API key are refused.
	for _, tok := range []string{"", "wrong-token", clientKey} {
		if status, body := g.adminDo(t, "GET", "/admin/servers", tok, ""); status != http.StatusUnauthorized || !strings.Contains(string(body), `"message"`) {
			t.Errorf("GET /admin/servers with token %q = %d %s, want 401", strings.Repeat("*", len(tok)), status, body)
		}
	}

	// Register: the tool is there at once.
	status, body := g.adminDo(t, "POST", "/admin/servers", g.Admin, fmt.Sprintf(`{"name":"web","transport":"http","url":%q}`, demoURL))
	if status != http.StatusCreated || !strings.Contains(string(body), `"source":"api"`) {
		t.Fatalf("POST /admin/servers = %d %s", status, body)
	}
	waitTools(t, cs, "mcp__web__echo", true)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__web__echo", Arguments: map[string]any{"text": "via the API"}})
	if err != nil || text(res) != "via the API" {
		t.Fatalf("calling the registered server's tool: %v %v", res, err)
	}

	// A bad entry, a stdio server and a config server's name are refused.
	for _, tc := range []struct {
		body   string
		status int
		says   string
	}{
		{`{"name":"bad","transport":"http","url":"ftp://x"}`, 400, "url"},
		{`{"name":"leak","transport":"http","url":"https://e.example/mcp","headers":{"X":"${HOME}"}}`, 400, "MCPGW_UPSTREAM_"},
		{fmt.Sprintf(`{"name":"prog","transport":"stdio","command":%q}`, bin("demo-server")), 403, "stdio"},
		{fmt.Sprintf(`{"name":"local","transport":"http","url":%q}`, demoURL), 409, "config file"},
	} {
		if status, body := g.adminDo(t, "POST", "/admin/servers", g.Admin, tc.body); status != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("POST %s = %d %s, want %d saying %q", tc.body, status, body, tc.status, tc.says)
		}
	}

	// Disable: the client is told and loses the tools; enable: back.
	for len(changed) > 0 {
		<-changed
	}
	if status, body := g.adminDo(t, "PATCH", "/admin/servers/web", g.Admin, `{"enabled":false}`); status != 200 || !strings.Contains(string(body), `"state":"disabled"`) {
		t.Fatalf("PATCH enabled false = %d %s", status, body)
	}
	waitChange("disabling web")
	waitTools(t, cs, "mcp__web__echo", false)
	if status, body := g.adminDo(t, "PATCH", "/admin/servers/web", g.Admin, `{"enabled":true}`); status != 200 {
		t.Fatalf("PATCH enabled true = %d %s", status, body)
	}
	waitTools(t, cs, "mcp__web__echo", true)

	// A config server can be switched off too, and that is kept.
	if status, body := g.adminDo(t, "PATCH", "/admin/servers/local", g.Admin, `{"enabled":false}`); status != 200 {
		t.Fatalf("PATCH local = %d %s", status, body)
	}
	waitTools(t, cs, "mcp__local__echo", false)
	if status, body := g.adminDo(t, "DELETE", "/admin/servers/local", g.Admin, ""); status != http.StatusConflict {
		t.Errorf("DELETE a config server = %d %s, want 409", status, body)
	}

	// Restart the gateway on the same data: the registered server and the
	// switch are still there.
	g.stopWith(t, syscall.SIGTERM)
	g = startGatewayIn(t, dir, config)
	g.waitState(t, "web", "running")
	if st := g.status(t, "local"); st.State != "disabled" {
		t.Errorf("local after the restart = %s, want disabled (switched off through the API)", st.State)
	}
	cs = connectAlice(g)
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__web__echo", Arguments: map[string]any{"text": "after the restart"}})
	if err != nil || text(res) != "after the restart" {
		t.Fatalf("calling the registered server after the restart: %v %v", res, err)
	}

	// Delete: gone, and gone after another restart.
	if status, body := g.adminDo(t, "DELETE", "/admin/servers/web", g.Admin, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE /admin/servers/web = %d %s", status, body)
	}
	waitTools(t, cs, "mcp__web__echo", false)
	if status, _ := g.adminDo(t, "GET", "/admin/servers/web", g.Admin, ""); status != http.StatusNotFound {
		t.Errorf("GET a deleted server = %d, want 404", status)
	}

	// The document is served, and names every route used here.
	status, body = g.adminDo(t, "GET", "/admin/openapi.json", g.Admin, "")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if status != 200 || json.Unmarshal(body, &doc) != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("GET /admin/openapi.json = %d %.200s", status, body)
	}
	for _, p := range []string{"/admin/servers", "/admin/servers/{name}", "/admin/servers/{name}/restart", "/admin/servers/{name}/logs", "/admin/tools"} {
		if doc.Paths[p] == nil {
			t.Errorf("the OpenAPI document lacks %s", p)
		}
	}
}

// bearer adds a client's API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAdmin_Reload edits the config file under a running gateway and has
// it reloaded, through the API and by SIGHUP.
func TestAdmin_Reload(t *testing.T) {
	dir := t.TempDir()
	server := func(name string) string {
		return fmt.Sprintf("  - name: %s\n    transport: stdio\n    command: %s\n    args: [\"-name\", %q]\n", name, bin("demo-server"), name)
	}
	g := startGatewayIn(t, dir, "servers:\n"+server("one"))
	g.waitState(t, "one", "running")
	// rewrite replaces the config file as startGatewayIn wrote it.
	path := dir + "/mcpgw.yaml"
	head, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prefix, _, _ := strings.Cut(string(head), "servers:\n")
	rewrite := func(rest string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(prefix+rest), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reload := func() (int, map[string]any) {
		t.Helper()
		status, body := g.adminDo(t, "POST", "/admin/reload", g.Admin, "")
		var res map[string]any
		json.Unmarshal(body, &res)
		return status, res
	}

	rewrite("call_timeout: 45s\nservers:\n" + server("one") + server("two"))
	status, res := reload()
	if status != 200 || fmt.Sprint(res["added"]) != "[two]" || fmt.Sprint(res["unchanged"]) != "[one]" || fmt.Sprint(res["restart_needed"]) != "[call_timeout]" {
		t.Fatalf("POST /admin/reload = %d %v", status, res)
	}
	g.waitState(t, "two", "running")
	cs := connect(t, g.URL+"/mcp", "")
	waitTools(t, cs, "mcp__two__echo", true)

	// A file with a problem changes nothing.
	rewrite("servers:\n" + server("one") + "  - name: three\n    transport: http\n")
	if status, res := reload(); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(res["problems"]), "url") {
		t.Errorf("reloading a bad file = %d %v, want 400 naming url", status, res)
	}
	if st := g.status(t, "two"); st.State != "running" {
		t.Errorf("two after a refused reload = %s", st.State)
	}

	// SIGHUP: two leaves, three comes.
	rewrite("servers:\n" + server("one") + server("three"))
	g.cmd.Process.Signal(syscall.SIGHUP)
	// The reload runs in the background: wait for three to exist.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if status, _ := g.adminDo(t, "GET", "/admin/servers/three", g.Admin, ""); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server three 30s after SIGHUP; gateway log:\n%s", g.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.waitState(t, "three", "running")
	waitTools(t, cs, "mcp__two__echo", false)
	if status, _ := g.adminDo(t, "GET", "/admin/servers/two", g.Admin, ""); status != http.StatusNotFound {
		t.Errorf("two after the SIGHUP reload = %d, want 404", status)
	}
}

// TestAdmin_OwnListener serves /admin on admin.listen only.
func TestAdmin_OwnListener(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/mcpgw.yaml"
	config := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s/data\nadmin:\n  listen: 127.0.0.1:0\n  tokens: [%q]\nservers: []\n", dir, hashToken(adminToken))
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, baseEnv(), "mcpgw", "serve", "--config", path)
	addrOf := func(msg string) string {
		return p.waitLine(t, "the "+msg+" line", func(l string) string {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == msg {
				return rec.Addr
			}
			return ""
		})
	}
	main, admin := addrOf("listening"), addrOf("admin API listening")
	for _, tc := range []struct {
		addr string
		want int
	}{{admin, 200}, {main, 404}} {
		g := &gateway{URL: "http://" + tc.addr}
		if status, body := g.adminDo(t, "GET", "/admin/servers", adminToken, ""); status != tc.want {
			t.Errorf("GET http://%s/admin/servers = %d %s, want %d", tc.addr, status, body, tc.want)
		}
	}
}

// TestAdmin_CPUProfile takes the running gateway's CPU profile while a
// client calls a tool through it: a gzipped pprof profile whose samples
// name mcpgw's own functions.
func TestAdmin_CPUProfile(t *testing.T) {
	g := startGateway(t, baseEnv(), fmt.Sprintf("servers:\n  - {name: demo, transport: stdio, command: %s}\n", bin("demo-server")))
	g.waitState(t, "demo", "running")
	cs := connect(t, g.URL+"/mcp", "")

	type answer struct {
		status int
		body   []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		// Not adminDo, which may fail the test: this goroutine may outlive
		// it when a call below fails.
		req, _ := http.NewRequest("GET", g.URL+"/admin/debug/pprof/profile?seconds=2", nil)
		req.Header.Set("Authorization", "Bearer "+g.Admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, b, err}
	}()
	var a answer
	calls := 0
	for done := false; !done; {
		select {
		case a = <-got:
			done = true
		default:
			if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"text": "profiled"}}); err != nil {
				t.Fatalf("call %d during the profile: %v", calls, err)
			}
			calls++
		}
	}
	if a.err != nil {
		t.Fatalf("GET the profile: %v", a.err)
	}
	if a.status != http.StatusOK {
		t.Fatalf("the profile = %d %.200q, want 200", a.status, a.body)
	}
	zr, err := gzip.NewReader(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the profile's gzip stream is broken: %v", err)
	}
	// The profile's string table holds the names of the sampled functions.
	if !bytes.Contains(raw, []byte("github.com/mcpgw/mcpgw/")) {
		t.Errorf("the profile (%d bytes, after %d calls) names none of mcpgw's functions", len(raw), calls)
	}
	// One out of range is refused.
	if status, body := g.adminDo(t, "GET", "/admin/debug/pprof/profile?seconds=0", g.Admin, ""); status != http.StatusBadRequest {
		t.Errorf("seconds=0 = %d %s, want 400", status, body)
	}
}
