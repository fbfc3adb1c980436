package e2e

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSecrets_NeverShown runs a gateway with every kind of secret (a
// client API key, an admin token, an upstream's api_key and a header from
// the environment), uses them rightly and wrongly, and then looks for them
// in everything the gateway wrote or answered: its log, the servers' log
// files, the admin API's answers and the errors clients got.
func TestSecrets_NeverShown(t *testing.T) {
	const (
		clientKey    = "e2e-secret-client-key-7f3a"
		upstreamKey  = "e2e-secret-upstream-key-91bc"
		headerSecret = "e2e-secret-header-value-44d0"
		wrongKey     = "e2e-secret-wrong-key-0c1d"
	)
	secrets := []string{clientKey, upstreamKey, headerSecret, wrongKey, adminToken}
	demoURL, _ := startDemoHTTP(t, "demo-secret")
	env := baseEnv("MCPGW_UPSTREAM_HEADER=" + headerSecret)
	g := startGateway(t, env, fmt.Sprintf(`auth:
  api_keys:
    - principal: alice
      key_sha256: %q
servers:
  - name: web
    transport: http
    url: %s
    api_key: %s
  - name: down
    transport: http
    url: http://127.0.0.1:1/mcp
    api_key: %s
    restart: {max_attempts: 1}
`, hashToken(clientKey), demoURL, upstreamKey, upstreamKey))
	g.waitState(t, "web", "running")

	var seen strings.Builder // every answer the gateway gave
	record := func(what string, b []byte) { fmt.Fprintf(&seen, "%s: %s\n", what, b) }

	// A client with the right key calls a tool; one with a wrong key and
	// one with none are refused.
	hc := func(key string) *mcp.StreamableClientTransport {
		return &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: httpClientWith(key)}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-secrets", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), hc(clientKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__web__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || text(res) != "hi" {
		t.Fatalf("calling through the gateway: %v %v", res, err)
	}
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__down__echo"}); err != nil {
		record("call of a down server", []byte(err.Error()))
	}
	for _, key := range []string{wrongKey, ""} {
		_, err := client.Connect(ctxT(t), hc(key), nil)
		if err == nil {
			t.Fatalf("connecting with key %q worked", strings.Repeat("*", len(key)))
		}
		record("refused client", []byte(err.Error()))
	}
	status, body := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, map[string]string{"Authorization": "Bearer " + wrongKey})
	record(fmt.Sprintf("raw refused POST %d", status.StatusCode), []byte(body))

	// The admin API: a wrong token, the status of every server, their
	// logs, and a registration whose header comes from the environment.
	for _, tok := range []string{wrongKey, clientKey} {
		_, b := g.adminDo(t, "GET", "/admin/servers", tok, "")
		record("admin with a wrong token", b)
	}
	for _, path := range []string{"/admin/servers", "/admin/servers/web", "/admin/servers/down", "/admin/servers/web/logs?tail=1000", "/admin/servers/down/logs?tail=1000", "/admin/tools", "/admin/sessions", "/admin/events"} {
		_, b := g.adminDo(t, "GET", path, g.Admin, "")
		record(path, b)
	}
	_, b := g.adminDo(t, "POST", "/admin/servers", g.Admin, fmt.Sprintf(`{"name":"reg","transport":"http","url":%q,"headers":{"X-Secret":"${MCPGW_UPSTREAM_HEADER}"}}`, demoURL))
	record("registration", b)
	_, b = g.adminDo(t, "POST", "/admin/servers", g.Admin, fmt.Sprintf(`{"name":"bad","transport":"http","url":%q,"api_key":%q,"unknown":1}`, demoURL, upstreamKey))
	record("refused registration", b)
	g.waitState(t, "reg", "running")

	// Everything the gateway wrote: its stderr and every file under its
	// data directory but the database (which keeps the registration as
	// sent: ${MCPGW_UPSTREAM_HEADER}, not its value).
	texts := map[string]string{"gateway stderr": g.Stderr(), "answers": seen.String()}
	filepath.WalkDir(g.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "mcpgw.db") {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil {
			texts[path] = string(b)
		}
		return nil
	})
	if len(texts) < 3 {
		t.Errorf("expected server log files under %s, found %d texts", g.DataDir, len(texts))
	}
	for where, s := range texts {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("a secret (%d bytes) appears in %s", len(secret), where)
			}
		}
	}
}

// httpClientWith sends key as a bearer token on every request ("": none).
func httpClientWith(key string) *http.Client {
	if key == "" {
		return &http.Client{}
	}
	return &http.Client{Transport: bearer{key}}
}
