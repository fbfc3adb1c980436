package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// sample is one line of the Prometheus text format: a metric name, its
// labels and its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads GET /metrics of the gateway.
func (g *gateway) scrape(t *testing.T) (string, []sample) {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, pair := range splitLabels(s.name[i+1 : len(s.name)-1]) {
				k, v, _ := strings.Cut(pair, "=")
				s.labels[k], _ = strconv.Unquote(v)
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return string(body), out
}

// splitLabels splits `a="x",b="y,z"` at the commas between labels.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// find returns the value of the one sample named name whose labels
// include want, and whether there is one.
func find(samples []sample, name string, want map[string]string) (float64, bool) {
	var sum float64
	found := false
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
		found = true
	}
	return sum, found
}

// otlpSink is an OTLP/HTTP trace receiver: it keeps the names of the
// spans it was sent.
type otlpSink struct {
	mu    sync.Mutex
	names map[string]int
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				o.names[sp.GetName()]++
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(b)
}

func (o *otlpSink) count(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.names[name]
}

// TestTelemetry makes calls through the real binary, then finds them on
// /metrics (counters and histograms by method, server, tool and outcome,
// sessions, upstream state, media, access and rate-limit refusals, never
// a session id or an argument), and finds their spans at the OTLP
// endpoint given by OTEL_EXPORTER_OTLP_ENDPOINT.
func TestTelemetry(t *testing.T) {
	sink := &otlpSink{names: map[string]int{}}
	collector := httptest.NewServer(sink)
	t.Cleanup(collector.Close)
	httpURL, _ := startDemoHTTP(t, "two")

	const aliceKey, bobKey = "e2e-telemetry-alice-key", "e2e-telemetry-bob-key"
	env := baseEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=mcpgw-e2e")
	g := startGateway(t, env, fmt.Sprintf(`auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
    - {principal: bob, key_sha256: %q}
rate_limits:
  per_principal: {rate: 1, burst: 40}
acl:
  default: allow
  rules:
    - {effect: deny, principals: [alice], tools: ["mcp__two__fail"]}
servers:
  - {name: one, transport: stdio, command: %s}
  - {name: two, transport: http, url: %s}
`, hashToken(aliceKey), hashToken(bobKey), bin("demo-server"), httpURL))
	g.waitState(t, "one", "running")
	g.waitState(t, "two", "running")

	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-telemetry", Version: "1"}, nil)
	// A session: the metrics of sessions and initialize are checked too.
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: httpClientWith(aliceKey)}, legacySession)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	const canary = "e2e-argument-canary"
	call := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	}
	for range 2 {
		if _, err := call("mcp__one__echo", map[string]any{"text": canary}); err != nil {
			t.Fatalf("echo on one: %v", err)
		}
	}
	if _, err := call("mcp__two__echo", map[string]any{"text": canary}); err != nil {
		t.Fatalf("echo on two: %v", err)
	}
	if res, err := call("mcp__one__fail", map[string]any{}); err != nil || !res.IsError {
		t.Fatalf("fail on one = %+v, %v; want an isError result", res, err)
	}
	if _, err := call("mcp__two__fail", map[string]any{}); err == nil {
		t.Fatal("fail on two: the access rules let alice call it")
	}
	if _, err := call("mcp__one__picture", map[string]any{}); err != nil {
		t.Fatalf("picture on one: %v", err)
	}
	if _, err := cs.ListTools(ctxT(t), nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	// Beyond alice's burst: some requests get 429.
	limited := 0
	for range 60 {
		resp, _ := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Authorization": "Bearer " + aliceKey})
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no request was rate limited")
	}
	// A bad key is refused.
	if resp, _ := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Authorization": "Bearer wrong"}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad key got %d, want 401", resp.StatusCode)
	}

	text, samples := g.scrape(t)
	ops := "mcp_server_operation_duration_seconds_count"
	reqs := "mcpgw_requests_total"
	checks := []struct {
		name   string
		metric string
		labels map[string]string
		min    float64
		max    float64 // 0: no upper bound
	}{
		{"ok calls on one", reqs, map[string]string{"mcp_method_name": "tools/call", "mcpgw_server": "one", "gen_ai_tool_name": "mcp__one__echo", "mcpgw_outcome": "ok"}, 2, 2},
		{"ok call on two", reqs, map[string]string{"mcp_method_name": "tools/call", "mcpgw_server": "two", "gen_ai_tool_name": "mcp__two__echo", "mcpgw_outcome": "ok"}, 1, 1},
		{"tool error", reqs, map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "mcp__one__fail", "mcpgw_outcome": "tool_error", "error_type": "tool_error"}, 1, 1},
		{"ACL denial as a request", reqs, map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "mcp__two__fail", "mcpgw_outcome": "error", "error_type": "-31004"}, 1, 1},
		{"initialize", ops, map[string]string{"mcp_method_name": "initialize", "mcpgw_outcome": "ok"}, 1, 0},
		{"tools/list", ops, map[string]string{"mcp_method_name": "tools/list"}, 1, 0},
		{"ok calls", ops, map[string]string{"mcp_method_name": "tools/call", "mcpgw_outcome": "ok"}, 4, 4},
		{"duration buckets", "mcp_server_operation_duration_seconds_bucket", map[string]string{"mcp_method_name": "tools/call", "mcpgw_outcome": "ok", "le": "+Inf"}, 4, 4},
		{"upstream calls", "mcp_client_operation_duration_seconds_count", map[string]string{"mcp_method_name": "tools/call", "mcpgw_server": "two", "mcpgw_outcome": "ok"}, 1, 1},
		{"upstream tool error", "mcp_client_operation_duration_seconds_count", map[string]string{"mcpgw_server": "one", "mcpgw_outcome": "tool_error"}, 1, 1},
		{"requests in flight", "mcpgw_requests_in_flight", map[string]string{"mcp_method_name": "tools/call"}, 0, 0},
		{"upstream calls in flight", "mcpgw_upstream_calls_in_flight", map[string]string{"mcpgw_server": "one"}, 0, 0},
		{"sessions", "mcpgw_sessions", map[string]string{"mcp_protocol_version": "2025-11-25"}, 1, 1},
		{"server one running", "mcpgw_upstream_state", map[string]string{"mcpgw_server": "one", "mcpgw_state": "running"}, 1, 1},
		{"server two running", "mcpgw_upstream_state", map[string]string{"mcpgw_server": "two", "mcpgw_state": "running"}, 1, 1},
		{"restarts", "mcpgw_upstream_restarts_total", map[string]string{"mcpgw_server": "one"}, 0, 0},
		{"ACL denials", "mcpgw_access_denials_total", map[string]string{"mcpgw_reason": "acl"}, 1, 1},
		{"bad credentials", "mcpgw_access_denials_total", map[string]string{"mcpgw_reason": "unauthenticated"}, 1, 1},
		// At least ours: the client's own requests may be limited too.
		{"rate limited", "mcpgw_rate_limit_rejections_total", map[string]string{"mcpgw_reason": "principal"}, float64(limited), 0},
		{"media stored", "mcpgw_media_stored_bytes", nil, 1, 0},
		{"media written", "mcpgw_media_writes_total", nil, 1, 0},
		{"media evictions", "mcpgw_media_removals_total", map[string]string{"mcpgw_reason": "eviction"}, 0, 0},
		{"process memory", "process_resident_memory_bytes", nil, 1, 0},
	}
	for _, c := range checks {
		v, ok := find(samples, c.metric, c.labels)
		switch {
		case !ok:
			t.Errorf("%s: no %s%v on /metrics", c.name, c.metric, c.labels)
		case v < c.min || (c.max > 0 && v > c.max) || (c.max == 0 && c.min == 0 && v != 0):
			t.Errorf("%s: %s%v = %v, want %v..%v", c.name, c.metric, c.labels, v, c.min, c.max)
		}
	}
	for _, secret := range []string{canary, aliceKey, cs.ID()} {
		if secret != "" && strings.Contains(text, secret) {
			t.Errorf("/metrics contains %q (an argument, a key or a session id)", secret)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}

	// The spans reach the collector (batched every 100 ms here).
	deadline := time.Now().Add(30 * time.Second)
	for sink.count("tools/call mcp__two__echo") == 0 || sink.count("tools/call echo") == 0 {
		if time.Now().After(deadline) {
			sink.mu.Lock()
			got := fmt.Sprint(sink.names)
			sink.mu.Unlock()
			t.Fatalf("the collector got no server or upstream span of the call on two: %s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
