package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListen_LegacyUpstream: a 2026-07-28 client's subscriptions/listen
// with a resource subscription, through mcpgw to a 2025 server (the Go SDK
// everything-server, stateful HTTP): the gateway subscribes on its
// session with the server, and the server's notifications/resources/updated
// reach the listen stream, tagged with the listen's subscription id.
func TestListen_LegacyUpstream(t *testing.T) {
	modernBins(t)
	url := startEverythingHTTP(t, false)
	g := startGateway(t, baseEnv(), "naming:\n  prefix_mode: never\nresources:\n  namespace: never\nservers:\n  - name: everything\n    transport: http\n    url: "+url+"\n    protocol: auto\n")
	if st := g.waitState(t, "everything", "running"); st.Protocol == "2026-07-28" {
		t.Fatalf("the stateful server is spoken to in %s, want a 2025 session", st.Protocol)
	}
	const watched = "test://watched-resource"
	body := `{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + watched + `"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		t.Helper()
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
		t.Fatalf("the listen stream ended: %v", sc.Err())
		return nil
	}
	ack := next()
	params, _ := ack["params"].(map[string]any)
	if ack["method"] != "notifications/subscriptions/acknowledged" || !strings.Contains(jsonText(params["notifications"]), watched) {
		t.Fatalf("first message %v, want an acknowledgement honouring %s", ack, watched)
	}
	// The server updates the resource every few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m := next()
		if m["method"] != "notifications/resources/updated" {
			continue
		}
		p, _ := m["params"].(map[string]any)
		meta, _ := p["_meta"].(map[string]any)
		if p["uri"] != watched || meta["io.modelcontextprotocol/subscriptionId"] != "sub-1" {
			t.Errorf("resources/updated %v, want %s tagged with sub-1", m, watched)
		}
		return
	}
	t.Fatal("no notifications/resources/updated within 30s")
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
