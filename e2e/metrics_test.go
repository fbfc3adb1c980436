package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMetricsBytes bounds /metrics in TestMetrics_Lean's scenario (20
// servers, 200 tools, every tool called three times, two sessions, and a
// client making up names): about 73 KB when it was written, 1.2 MB
// before the label sets and buckets were chosen. README, Observability,
// states the size.
const maxMetricsBytes = 80 << 10

// TestMetrics_Lean builds a gateway of 20 servers with 10 tools each,
// calls every tool three times, lets a client make up tool names, a method
// and arguments, and checks /metrics: its size stays under
// maxMetricsBytes, each family has the label keys chosen for it (the
// histograms no tool), and no label takes a value from outside bounded
// sets: no session id, argument, made-up name or method.
func TestMetrics_Lean(t *testing.T) {
	var tools []string
	for i := range 10 {
		tools = append(tools, fmt.Sprintf("tool%02d", i))
	}
	// One catalog server over HTTP, configured 20 times: 20 servers to
	// the gateway, one process here.
	url := startCatalogHTTP(t, "-name", "up", "-tools", strings.Join(tools, ","))
	var b strings.Builder
	b.WriteString("servers:\n")
	var servers []string
	for i := range 20 {
		servers = append(servers, fmt.Sprintf("s%02d", i))
		fmt.Fprintf(&b, "  - {name: %s, transport: http, url: %s}\n", servers[i], url)
	}
	g := startGateway(t, baseEnv(), b.String())
	for _, s := range servers {
		g.waitState(t, s, "running")
	}

	const canary = "metrics-argument-canary"
	cs := connect(t, g.URL+"/mcp", "")
	old := connect(t, g.URL+"/mcp", "2025-06-18")
	catalog := allTools(t, cs)
	if len(catalog) != 200 {
		t.Fatalf("%d tools, want 200", len(catalog))
	}
	for round := range 3 {
		for _, tool := range catalog {
			c := cs
			if round == 2 {
				c = old
			}
			if _, err := c.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool.Name, Arguments: map[string]any{"text": canary}}); err != nil {
				t.Fatalf("calling %s: %v", tool.Name, err)
			}
		}
	}
	var madeUp []string
	for i := range 50 {
		name := fmt.Sprintf("made_up_tool_%02d", i)
		madeUp = append(madeUp, name)
		if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": canary}}); err == nil {
			t.Fatalf("calling the made-up tool %s succeeded", name)
		}
	}
	session := rawSession(t, g.URL+"/mcp")
	for i := range 20 {
		method := fmt.Sprintf("made/up-%02d", i)
		madeUp = append(madeUp, method)
		if resp, body := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`, session); !strings.Contains(body, "-32601") {
			t.Fatalf("%s = %d %s, want -32601", method, resp.StatusCode, body)
		}
	}

	text, samples := g.scrape(t)
	t.Logf("/metrics: %d bytes, %d samples", len(text), len(samples))
	if len(text) > maxMetricsBytes {
		t.Errorf("/metrics is %d bytes, want at most %d", len(text), maxMetricsBytes)
	}

	// The label keys of each family of ours (le: a histogram's bucket).
	keys := map[string][]string{
		"mcp_server_operation_duration_seconds": {"le", "mcp_method_name", "mcpgw_outcome"},
		"mcp_client_operation_duration_seconds": {"le", "mcp_method_name", "mcpgw_outcome", "mcpgw_server"},
		"mcpgw_requests_total":                  {"error_type", "gen_ai_prompt_name", "gen_ai_tool_name", "mcp_method_name", "mcpgw_outcome", "mcpgw_server"},
	}
	// The values a label may take.
	var exposed []string
	for _, tool := range catalog {
		exposed = append(exposed, tool.Name)
	}
	methods := []string{"_OTHER", "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
		"completion/complete", "logging/setLevel", "tasks/get", "tasks/result", "tasks/cancel", "tasks/list",
		"server/discover", "subscriptions/listen", "tasks/update"}
	values := map[string][]string{
		"gen_ai_tool_name":     exposed,
		"mcpgw_server":         servers,
		"mcp_method_name":      methods,
		"mcpgw_outcome":        {"ok", "error", "tool_error", "cancelled"},
		"error_type":           {"tool_error", "cancelled", "timeout", "unavailable", "internal", "_OTHER", "-32700", "-32600", "-32601", "-32602", "-32603", "-32002", "-32042", "-32000", "-32001", "-32020", "-32021", "-32022", "-31001", "-31002", "-31003", "-31004", "-31005", "-31006"},
		"mcp_protocol_version": {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"},
	}
	series := map[string]map[string]bool{} // family → its label sets
	reported := map[string]bool{}          // one error per family and label
	for _, s := range samples {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s.name, "_bucket"), "_sum"), "_count")
		if want, ok := keys[family]; ok {
			got := slices.Sorted(maps.Keys(s.labels))
			if extra := slices.DeleteFunc(got, func(k string) bool { return slices.Contains(want, k) }); len(extra) > 0 && !reported[family] {
				reported[family] = true
				t.Errorf("%s has labels %v beside %v", family, extra, want)
			}
		}
		for k, v := range s.labels {
			if allowed, ok := values[k]; ok && !slices.Contains(allowed, v) && !reported[family+" "+k] {
				reported[family+" "+k] = true
				t.Errorf("%s: label %s=%q is not one of the bounded values", family, k, v)
			}
		}
		if family == s.name || strings.HasSuffix(s.name, "_count") {
			if series[family] == nil {
				series[family] = map[string]bool{}
			}
			series[family][fmt.Sprint(s.labels)] = true
		}
	}
	// The histograms: one series per method and outcome, and per server.
	if n := len(series["mcp_server_operation_duration_seconds"]); n > 8 {
		t.Errorf("mcp_server_operation_duration_seconds has %d series, want a few (method × outcome)", n)
	}
	if n := len(series["mcp_client_operation_duration_seconds"]); n != len(servers) {
		t.Errorf("mcp_client_operation_duration_seconds has %d series, want one per server (%d)", n, len(servers))
	}
	if n := len(series["mcpgw_requests_total"]); n > len(exposed)+10 {
		t.Errorf("mcpgw_requests_total has %d series, want about one per tool called (%d)", n, len(exposed))
	}
	for _, secret := range append([]string{canary, cs.ID(), old.ID(), session["Mcp-Session-Id"]}, madeUp...) {
		if secret != "" && strings.Contains(text, secret) {
			t.Errorf("/metrics holds %q (an argument, a session id, or a name a client made up)", secret)
		}
	}
	if t.Failed() && len(text) <= maxMetricsBytes {
		t.Logf("/metrics:\n%s", text)
	}
}
