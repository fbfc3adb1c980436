package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// attrMap renders an attribute set as a map of strings.
func attrMap(kvs []attribute.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// TestObserve: each request gets a server span named and attributed by
// the MCP conventions, continuing a traceparent of params._meta, one count
// in the duration histogram by method (an unknown one as _OTHER) and
// outcome, and one in the request counter with the server and tool once
// routed and the error type (an unknown code as _OTHER; the span keeps
// it).
func TestObserve(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s",
		Tools: raws(`{"name":"ok","inputSchema":{"type":"object"}}`, `{"name":"bad","inputSchema":{"type":"object"}}`, `{"name":"secret","inputSchema":{"type":"object"}}`, `{"name":"odd","inputSchema":{"type":"object"}}`),
		Handle: func(_ context.Context, _ string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			var p struct{ Name string }
			json.Unmarshal(params, &p)
			switch p.Name {
			case "bad":
				return json.RawMessage(`{"content":[],"isError":true}`), nil
			case "odd":
				return nil, jsonrpc.NewError(-12345, "a code of the server's own", nil)
			}
			return json.RawMessage(`{"content":[]}`), nil
		}})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := newCore(t, m, Options{TracerProvider: tp, MeterProvider: mp, ACL: config.ACL{Default: config.ACLAllow, Rules: []config.ACLRule{
		{Effect: config.ACLDeny, Tools: []string{"mcp__s__secret"}},
	}}})

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name      string
		req       Request
		wantSpan  string
		wantAttrs map[string]string // of the span, beyond the count's labels
		wantCount map[string]string // the labels of the request count
	}{
		{
			name:      "tool call",
			req:       Request{Method: "tools/call", ID: "7", Session: "sess", Client: Client{ProtocolVersion: "2025-11-25"}, Params: json.RawMessage(`{"name":"mcp__s__ok","_meta":{"traceparent":"` + parent + `"}}`)},
			wantSpan:  "tools/call mcp__s__ok",
			wantAttrs: map[string]string{"jsonrpc.request.id": "7", "mcp.session.id": "sess", "gen_ai.operation.name": "execute_tool", "mcp.protocol.version": "2025-11-25"},
			wantCount: map[string]string{"mcp.method.name": "tools/call", "mcpgw.server": "s", "gen_ai.tool.name": "mcp__s__ok", "mcpgw.outcome": "ok"},
		},
		{
			name:      "tool error",
			req:       Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__bad"}`)},
			wantSpan:  "tools/call mcp__s__bad",
			wantAttrs: map[string]string{"gen_ai.operation.name": "execute_tool"},
			wantCount: map[string]string{"mcp.method.name": "tools/call", "mcpgw.server": "s", "gen_ai.tool.name": "mcp__s__bad", "mcpgw.outcome": "tool_error", "error.type": "tool_error"},
		},
		{
			name:      "denied by the access rules",
			req:       Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__secret"}`)},
			wantSpan:  "tools/call mcp__s__secret",
			wantAttrs: map[string]string{"gen_ai.operation.name": "execute_tool", "rpc.response.status_code": "-31004"},
			wantCount: map[string]string{"mcp.method.name": "tools/call", "mcpgw.server": "s", "gen_ai.tool.name": "mcp__s__secret", "mcpgw.outcome": "error", "error.type": "-31004"},
		},
		{
			// A code the gateway does not know is no label of its own: a
			// server could make up any number of them.
			name:      "an error code of the server's own",
			req:       Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__odd"}`)},
			wantSpan:  "tools/call mcp__s__odd",
			wantAttrs: map[string]string{"gen_ai.operation.name": "execute_tool", "rpc.response.status_code": "-12345", "error.type": "-12345"},
			wantCount: map[string]string{"mcp.method.name": "tools/call", "mcpgw.server": "s", "gen_ai.tool.name": "mcp__s__odd", "mcpgw.outcome": "error", "error.type": "_OTHER"},
		},
		{
			// A made-up tool name is no label: it is not in the catalog.
			name:      "unknown tool",
			req:       Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__nope"}`)},
			wantSpan:  "tools/call",
			wantAttrs: map[string]string{"rpc.response.status_code": "-32602"},
			wantCount: map[string]string{"mcp.method.name": "tools/call", "mcpgw.outcome": "error", "error.type": "-32602"},
		},
		{
			// So is a made-up method.
			name:      "unknown method",
			req:       Request{Method: "made/up"},
			wantSpan:  "made/up",
			wantAttrs: map[string]string{"rpc.response.status_code": "-32601"},
			wantCount: map[string]string{"mcp.method.name": "_OTHER", "mcpgw.outcome": "error", "error.type": "-32601"},
		},
		{
			name:      "list",
			req:       Request{Method: "tools/list"},
			wantSpan:  "tools/list",
			wantAttrs: map[string]string{},
			wantCount: map[string]string{"mcp.method.name": "tools/list", "mcpgw.outcome": "ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			req := tt.req
			s.Handle(context.Background(), &req)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			sp := spans[0]
			if sp.Name() != tt.wantSpan || sp.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q (%v), want %q (server)", sp.Name(), sp.SpanKind(), tt.wantSpan)
			}
			want := map[string]string{"mcp.method.name": req.Method}
			for k, v := range tt.wantCount {
				if k != "mcp.method.name" {
					want[k] = v
				}
			}
			for k, v := range tt.wantAttrs {
				want[k] = v
			}
			if diff := cmp.Diff(want, attrMap(sp.Attributes())); diff != "" {
				t.Errorf("span attributes (-want +got):\n%s", diff)
			}
			if tt.name == "tool call" && (sp.Parent().SpanID().String() != "00f067aa0ba902b7" || !sp.Parent().IsRemote()) {
				t.Errorf("span parent %v, want the _meta traceparent's", sp.Parent())
			}
			hist := map[string]string{"mcp.method.name": tt.wantCount["mcp.method.name"], "mcpgw.outcome": tt.wantCount["mcpgw.outcome"]}
			if _, ok := histogramCount(t, reader, "mcp.server.operation.duration", hist); !ok {
				t.Errorf("no histogram point with exactly %v", hist)
			}
			if n, ok := sumPoint(t, reader, "mcpgw.requests", tt.wantCount); !ok || n != 1 {
				t.Errorf("request count with exactly %v = %d (%v), want 1", tt.wantCount, n, ok)
			}
		})
	}
	if n, _ := counterValue(t, reader, "mcpgw.access.denials", map[string]string{"mcpgw.reason": "acl"}); n != 1 {
		t.Errorf("access denials = %d, want 1", n)
	}
	if n, ok := counterValue(t, reader, "mcpgw.requests.in_flight", map[string]string{"mcp.method.name": "tools/call"}); !ok || n != 0 {
		t.Errorf("tools/call in flight = %d (%v), want 0", n, ok)
	}
}

// TestObserve_DebugLog: each request the core answers leaves one debug
// line with its method (bounded as the metric label is), the server, tool
// or prompt it was routed to, the session and principal, its duration and
// outcome, and the error type of a failure; never its arguments, its
// result, an error's message, or a name that is not in the catalog.
func TestObserve_DebugLog(t *testing.T) {
	const (
		argSecret    = "hunter2-argument"
		resultSecret = "result-secret"
		errorSecret  = "error-secret"
	)
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s",
		Tools:   raws(`{"name":"ok","inputSchema":{"type":"object"}}`, `{"name":"bad","inputSchema":{"type":"object"}}`, `{"name":"fails","inputSchema":{"type":"object"}}`, `{"name":"slow","inputSchema":{"type":"object"}}`),
		Prompts: raws(`{"name":"greet"}`),
		Handle: func(ctx context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			var p struct{ Name string }
			json.Unmarshal(params, &p)
			switch p.Name {
			case "bad":
				return json.RawMessage(`{"content":[{"type":"text","text":"` + resultSecret + `"}],"isError":true}`), nil
			case "fails":
				return nil, jsonrpc.NewError(-32000, "the server says "+errorSecret, nil)
			case "slow":
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return json.RawMessage(`{"content":[{"type":"text","text":"` + resultSecret + `"}]}`), nil
		}})
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newCore(t, m, Options{Logger: logger})

	args := `,"arguments":{"password":"` + argSecret + `"}`
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		req  Request
		want map[string]any // the line's attributes but time, level and duration_ms
	}{
		{
			name: "tool call",
			req:  Request{Method: "tools/call", Session: "sess", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__s__ok"` + args + `}`)},
			want: map[string]any{"method": "tools/call", "server": "s", "tool": "mcp__s__ok", "session_id": "sess", "principal": "alice", "outcome": "ok"},
		},
		{
			name: "tool error",
			req:  Request{Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__s__bad"` + args + `}`)},
			want: map[string]any{"method": "tools/call", "server": "s", "tool": "mcp__s__bad", "principal": "alice", "outcome": "tool_error", "error_type": "tool_error"},
		},
		{
			name: "JSON-RPC error of the server",
			req:  Request{Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__s__fails"` + args + `}`)},
			want: map[string]any{"method": "tools/call", "server": "s", "tool": "mcp__s__fails", "principal": "alice", "outcome": "error", "error_type": "-32000"},
		},
		{
			name: "cancelled",
			ctx:  cancelled,
			req:  Request{Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__s__slow"` + args + `}`)},
			want: map[string]any{"method": "tools/call", "server": "s", "tool": "mcp__s__slow", "principal": "alice", "outcome": "cancelled", "error_type": "cancelled"},
		},
		{
			name: "prompt",
			req:  Request{Method: "prompts/get", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__s__greet"` + args + `}`)},
			want: map[string]any{"method": "prompts/get", "server": "s", "prompt": "mcp__s__greet", "principal": "alice", "outcome": "ok"},
		},
		{
			// A name the catalog does not have is the client's input.
			name: "unknown tool",
			req:  Request{Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"` + argSecret + `"}`)},
			want: map[string]any{"method": "tools/call", "principal": "alice", "outcome": "error", "error_type": "-32602"},
		},
		{
			name: "unknown method",
			req:  Request{Method: argSecret, Principal: "alice"},
			want: map[string]any{"method": "_OTHER", "principal": "alice", "outcome": "error", "error_type": "-32601"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			req := tt.req
			s.Handle(ctx, &req)
			var lines []map[string]any
			for _, l := range bytes.Split(logs.Bytes(), []byte("\n")) {
				if len(l) == 0 {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal(l, &rec); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if rec["msg"] == "request answered" {
					lines = append(lines, rec)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines \"request answered\", want 1:\n%s", len(lines), logs.String())
			}
			got := lines[0]
			if d, ok := got["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("duration_ms = %v, want a duration", got["duration_ms"])
			}
			if got["level"] != "DEBUG" {
				t.Errorf("level %v, want DEBUG", got["level"])
			}
			for _, k := range []string{"time", "level", "duration_ms"} {
				delete(got, k)
			}
			want := map[string]any{"msg": "request answered"}
			for k, v := range tt.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("log line (-want +got):\n%s", diff)
			}
			for _, secret := range []string{argSecret, resultSecret, errorSecret} {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("the log holds %q:\n%s", secret, logs.String())
				}
			}
		})
	}
}

// TestOutcomeOf covers the classification of how a request ended.
func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		res         *Result
		err         error
		wantOutcome string
		wantType    string
	}{
		{"ok", "tools/call", complete(json.RawMessage(`{"content":[]}`)), nil, "ok", ""},
		{"isError false", "tools/call", complete(json.RawMessage(`{"isError":false}`)), nil, "ok", ""},
		{"isError", "tools/call", complete(json.RawMessage(`{"isError":true}`)), nil, "tool_error", "tool_error"},
		{"isError outside tools/call", "prompts/get", complete(json.RawMessage(`{"isError":true}`)), nil, "ok", ""},
		{"isError given twice", "tools/call", complete(json.RawMessage(`{"isError":false,"isError":true}`)), nil, "tool_error", "tool_error"},
		{"a task", "tools/call", &Result{Type: ResultTask, Body: json.RawMessage(`{"task":{}}`)}, nil, "ok", ""},
		{"JSON-RPC error", "tools/call", nil, jsonrpc.NewError(CodeUpstreamTimeout, "slow", nil), "error", "-31002"},
		{"cancelled", "tools/call", nil, context.Canceled, "cancelled", "cancelled"},
		{"deadline", "tools/call", nil, context.DeadlineExceeded, "error", "timeout"},
		{"other", "tools/call", nil, errTest, "error", "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcome, typ := outcomeOf(&Request{Method: tt.method}, tt.res, tt.err)
			if outcome != tt.wantOutcome || typ != tt.wantType {
				t.Errorf("outcomeOf = %q, %q; want %q, %q", outcome, typ, tt.wantOutcome, tt.wantType)
			}
		})
	}
}

type testError struct{}

func (testError) Error() string { return "test" }

var errTest error = testError{}

// collect reads every metric of reader.
func collect(t *testing.T, reader *sdkmetric.ManualReader) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		out = append(out, sm.Metrics...)
	}
	return out
}

// matches reports whether set has every attribute of want (and, for the
// duration histogram, no other).
func matches(set attribute.Set, want map[string]string, exact bool) bool {
	got := attrMap(set.ToSlice())
	if exact {
		return cmp.Equal(want, got)
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// histogramCount returns the count of the histogram point whose labels
// are exactly want.
func histogramCount(t *testing.T, reader *sdkmetric.ManualReader, name string, want map[string]string) (uint64, bool) {
	t.Helper()
	for _, m := range collect(t, reader) {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
			for _, p := range h.DataPoints {
				if matches(p.Attributes, want, true) {
					return p.Count, true
				}
			}
		}
	}
	return 0, false
}

// sumPoint returns the value of the monotonic sum point (a counter) whose
// labels are exactly want.
func sumPoint(t *testing.T, reader *sdkmetric.ManualReader, name string, want map[string]string) (int64, bool) {
	t.Helper()
	for _, m := range collect(t, reader) {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name && s.IsMonotonic {
			for _, p := range s.DataPoints {
				if matches(p.Attributes, want, true) {
					return p.Value, true
				}
			}
		}
	}
	return 0, false
}

// counterValue returns the value of the sum point whose labels include
// want.
func counterValue(t *testing.T, reader *sdkmetric.ManualReader, name string, want map[string]string) (int64, bool) {
	t.Helper()
	for _, m := range collect(t, reader) {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
			for _, p := range s.DataPoints {
				if matches(p.Attributes, want, false) {
					return p.Value, true
				}
			}
		}
	}
	return 0, false
}
