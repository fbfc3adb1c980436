package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/telemetry"
)

// recorder holds SDK providers that keep what they record for a test.
type recorder struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

// newRecorder returns providers that record into memory, shut down when
// the test ends.
func newRecorder(t *testing.T) *recorder {
	r := &recorder{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		r.tp.Shutdown(context.Background())
		r.mp.Shutdown(context.Background())
	})
	return r
}

// options returns opts with r's providers.
func (r *recorder) options(opts ManagerOptions) ManagerOptions {
	opts.TracerProvider, opts.MeterProvider = r.tp, r.mp
	return opts
}

// clientSpans returns the ended client spans, oldest first.
func (r *recorder) clientSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

// point is one data point of a metric: its attributes and its value (a
// histogram's count).
type point struct {
	Attrs map[string]string
	Value float64
}

// metrics collects r's metrics of the upstream scope: the points of each,
// by name, sorted by attributes.
func (r *recorder) metrics(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collecting metrics: %v", err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			t.Errorf("metrics of scope %q, want %q", sm.Scope.Name, telemetry.ScopeName)
		}
		for _, m := range sm.Metrics {
			var ps []point
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{attrMap(dp.Attributes.ToSlice()), float64(dp.Count)})
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{attrMap(dp.Attributes.ToSlice()), float64(dp.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{attrMap(dp.Attributes.ToSlice()), float64(dp.Value)})
				}
			default:
				t.Errorf("metric %s has data of type %T", m.Name, m.Data)
			}
			slices.SortFunc(ps, func(a, b point) int { return strings.Compare(fmt.Sprint(a.Attrs), fmt.Sprint(b.Attrs)) })
			out[m.Name] = ps
		}
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// Trace contexts of the tests. clientTraceparent is what a downstream
// client sent, the parent of the gateway's span.
const (
	clientTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	otherTraceparent  = "00-11111111111111111111111111111111-2222222222222222-01"
)

func TestMetaTraceContext(t *testing.T) {
	tests := []struct {
		version string
		want    bool
	}{
		{"", false},
		{protocol20241105, false},
		{protocol20250326, false},
		{protocol20250618, false},
		{LatestProtocolVersion, false},
		{"2026-07-28", true},
		{"2027-01-01", true},
	}
	for _, tt := range tests {
		if got := metaTraceContext(tt.version); got != tt.want {
			t.Errorf("metaTraceContext(%q) = %v, want %v", tt.version, got, tt.want)
		}
	}
	for _, v := range supportedVersions {
		if metaTraceContext(v) {
			t.Errorf("supported version %s defines the trace context in _meta; the Client would add it to every request", v)
		}
	}
}

func TestWithTraceMeta(t *testing.T) {
	ours := map[string]string{telemetry.MetaTraceparent: clientTraceparent}
	oursState := map[string]string{telemetry.MetaTraceparent: clientTraceparent, telemetry.MetaTracestate: "gw=1"}
	tests := []struct {
		name    string
		params  string // "" for nil
		tc      map[string]string
		defined bool
		want    string // "" for nil
	}{
		{name: "nil params, legacy", tc: ours},
		{name: "empty object, legacy", params: `{}`, tc: ours, want: `{}`},
		{
			name:   "no _meta, legacy: the same bytes",
			params: `{ "name" : "echo",  "arguments" : {"n": 2.50, "s": "\u00e9"} }`, tc: ours,
			want: `{ "name" : "echo",  "arguments" : {"n": 2.50, "s": "\u00e9"} }`,
		},
		{
			name:   "_meta without traceparent, legacy: the same bytes",
			params: `{"name":"echo","_meta":{"progressToken":7}}`, tc: ours,
			want: `{"name":"echo","_meta":{"progressToken":7}}`,
		},
		{
			name:   "a client's traceparent, legacy: replaced",
			params: `{"name":"echo","_meta":{"progressToken":7,"traceparent":"` + otherTraceparent + `"},"arguments":{}}`, tc: ours,
			want: `{"name":"echo","_meta":{"progressToken":7,"traceparent":"` + clientTraceparent + `"},"arguments":{}}`,
		},
		{
			name:   "a client's traceparent and tracestate, ours without: the tracestate goes",
			params: `{"_meta":{"tracestate":"c=1","traceparent":"` + otherTraceparent + `","x":true}}`, tc: ours,
			want: `{"_meta":{"traceparent":"` + clientTraceparent + `","x":true}}`,
		},
		{
			name:   "a client's traceparent and tracestate, ours with: both replaced",
			params: `{"_meta":{"tracestate":"c=1","traceparent":"` + otherTraceparent + `"}}`, tc: oursState,
			want: `{"_meta":{"tracestate":"gw=1","traceparent":"` + clientTraceparent + `"}}`,
		},
		{
			name:   "a client's traceparent, no span context: unchanged",
			params: `{"_meta":{"traceparent":"` + otherTraceparent + `"}}`,
			want:   `{"_meta":{"traceparent":"` + otherTraceparent + `"}}`,
		},
		{name: "nil params, 2026-07-28: added", tc: ours, defined: true, want: `{"_meta":{"traceparent":"` + clientTraceparent + `"}}`},
		{name: "null params, 2026-07-28: added", params: `null`, tc: ours, defined: true, want: `{"_meta":{"traceparent":"` + clientTraceparent + `"}}`},
		{
			name:   "no _meta, 2026-07-28: added at the end",
			params: `{"name":"echo", "arguments":{"a":[1,2]}}`, tc: oursState, defined: true,
			want: `{"name":"echo", "arguments":{"a":[1,2]},"_meta":{"traceparent":"` + clientTraceparent + `","tracestate":"gw=1"}}`,
		},
		{
			name:   "_meta with other members, 2026-07-28: added to it",
			params: `{"_meta":{"progressToken":"p"},"name":"echo"}`, tc: ours, defined: true,
			want: `{"_meta":{"progressToken":"p","traceparent":"` + clientTraceparent + `"},"name":"echo"}`,
		},
		{name: "_meta not an object: unchanged", params: `{"_meta":null}`, tc: ours, defined: true, want: `{"_meta":null}`},
		{name: "params not an object: unchanged", params: `[1]`, tc: ours, defined: true, want: `[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			before := bytes.Clone(params)
			got := withTraceMeta(params, tt.tc, tt.defined)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if tt.want == "" && got != nil {
				t.Errorf("params = %q, want nil", got)
			}
			if !bytes.Equal(params, before) {
				t.Errorf("the caller's params changed to %s", params)
			}
			if got != nil && !json.Valid(got) {
				t.Errorf("params %s are not JSON", got)
			}
		})
	}
}

// TestClient_TraceMeta checks that the Client puts the trace context of
// ctx in a request's _meta only where the rule says so, and never in
// initialize or notifications/cancelled.
func TestClient_TraceMeta(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	tests := []struct {
		name    string
		version string // the negotiated one, as if
		params  string
		want    string
	}{
		{name: "legacy, no traceparent", version: LatestProtocolVersion, params: `{"name":"slow"}`, want: `{"name":"slow"}`},
		{
			name: "legacy, a client's traceparent", version: LatestProtocolVersion,
			params: `{"name":"slow","_meta":{"traceparent":"` + otherTraceparent + `"}}`,
			want:   `{"name":"slow","_meta":{"traceparent":"` + clientTraceparent + `"}}`,
		},
		{
			name: "2026-07-28", version: "2026-07-28",
			params: `{"name":"slow"}`,
			want:   `{"name":"slow","_meta":{"traceparent":"` + clientTraceparent + `"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(basicServe(LatestProtocolVersion, func(*fakeTransport, *jsonrpc.Message) error {
				return nil // never answers
			}))
			c := connect(t, f, ClientOptions{})
			c.mu.Lock()
			c.init = &InitializeResult{ProtocolVersion: tt.version}
			c.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			defer cancel()
			if _, err := c.Call(cctx, "tools/call", json.RawMessage(tt.params), nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call = %v, want its deadline", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			var got []string
			for _, m := range f.sent {
				got = append(got, m.Method+" "+string(m.Params))
			}
			if len(got) != 4 {
				t.Fatalf("sent %q, want initialize, initialized, the call and its cancellation", got)
			}
			if diff := cmp.Diff("tools/call "+tt.want, got[2]); diff != "" {
				t.Errorf("the call (-want +got):\n%s", diff)
			}
			for _, s := range []string{got[0], got[1], got[3]} {
				if strings.Contains(s, "traceparent") {
					t.Errorf("sent %s", s)
				}
			}
		})
	}
}

// TestManager_TracePropagation calls a tool through a Manager over the
// real http and sse transports, under a parent span, and checks the
// client span and what the server received: the traceparent header of
// the call's POST is the client span's, a forwarded client traceparent
// or tracestate is replaced, and params._meta is left alone unless it had
// a traceparent.
func TestManager_TracePropagation(t *testing.T) {
	tests := []struct {
		name      string
		transport string
		wantAttrs map[string]string // beside the common ones
	}{
		{
			name: "http", transport: config.TransportHTTP,
			wantAttrs: map[string]string{"mcp.protocol.version": LatestProtocolVersion, "mcp.session.id": "session-1"},
		},
		{
			name: "sse", transport: config.TransportSSE,
			wantAttrs: map[string]string{"mcp.protocol.version": protocol20241105},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type post struct {
				header http.Header
				params string
			}
			var mu sync.Mutex
			var posts []post // of tools/call
			record := func(r *http.Request, body []byte) {
				m, err := jsonrpc.ParseOne(body)
				if err != nil || m.Method != "tools/call" {
					return
				}
				mu.Lock()
				posts = append(posts, post{r.Header.Clone(), string(m.Params)})
				mu.Unlock()
			}
			cfg := testServer(tt.transport, recordingURL(t, tt.transport, record))
			cfg.ForwardHeaders = []string{"traceparent", "Tracestate", "X-Tenant"}
			rec := newRecorder(t)
			m := startManager(t, rec.options(ManagerOptions{Servers: []config.Server{cfg}}))
			waitStatus(t, m, "fake", isRunning)

			ctx, parent := rec.tp.Tracer("test").Start(callCtx(t), "parent", trace.WithSpanKind(trace.SpanKindServer))
			hooks := &CallHooks{Header: http.Header{
				"Traceparent": {otherTraceparent},
				"Tracestate":  {"client=1"},
				"X-Tenant":    {"acme"},
			}}
			calls := []string{
				`{"name":"echo"}`,
				`{"name":"echo","_meta":{"progressToken":1,"traceparent":"` + otherTraceparent + `"}}`,
			}
			for _, params := range calls {
				if _, err := m.Call(ctx, "fake", Caller{Principal: "alice"}, "tools/call", json.RawMessage(params), hooks); err != nil {
					t.Fatalf("call: %v", err)
				}
			}
			parent.End()

			spans := rec.clientSpans()
			mu.Lock()
			defer mu.Unlock()
			if len(spans) != 2 || len(posts) != 2 {
				t.Fatalf("%d client spans and %d tools/call POSTs, want 2 of each", len(spans), len(posts))
			}
			want := map[string]string{
				"mcp.method.name":       "tools/call",
				"mcpgw.server":          "fake",
				"gen_ai.tool.name":      "echo",
				"gen_ai.operation.name": "execute_tool",
				"network.transport":     "tcp",
			}
			maps.Copy(want, tt.wantAttrs)
			for i, s := range spans {
				sc := s.SpanContext()
				if s.Name() != "tools/call echo" {
					t.Errorf("span %d: name %q", i, s.Name())
				}
				if s.Parent().SpanID() != parent.SpanContext().SpanID() || sc.TraceID() != parent.SpanContext().TraceID() {
					t.Errorf("span %d: parent %s of trace %s, want %s of trace %s", i, s.Parent().SpanID(), sc.TraceID(), parent.SpanContext().SpanID(), parent.SpanContext().TraceID())
				}
				if s.InstrumentationScope().Name != telemetry.ScopeName {
					t.Errorf("span %d: scope %q", i, s.InstrumentationScope().Name)
				}
				if s.Status().Code != codes.Unset {
					t.Errorf("span %d: status %v %q", i, s.Status().Code, s.Status().Description)
				}
				if diff := cmp.Diff(want, attrMap(s.Attributes())); diff != "" {
					t.Errorf("span %d: attributes (-want +got):\n%s", i, diff)
				}

				ours := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
				h := posts[i].header
				if got := h.Values("Traceparent"); !slices.Equal(got, []string{ours}) {
					t.Errorf("POST %d: traceparent %q, want the client span's %q", i, got, ours)
				}
				if got := h.Values("Tracestate"); len(got) != 0 {
					t.Errorf("POST %d: tracestate %q forwarded", i, got)
				}
				if got := h.Get("X-Tenant"); got != "acme" {
					t.Errorf("POST %d: X-Tenant %q, want the forwarded one", i, got)
				}
				wantParams := calls[i]
				if i == 1 {
					wantParams = strings.Replace(wantParams, otherTraceparent, ours, 1)
				}
				if diff := cmp.Diff(wantParams, posts[i].params); diff != "" {
					t.Errorf("POST %d: params (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestManager_CallTelemetry runs one call per case through a Manager of
// an in-memory stdio peer and checks its client span and metrics: how a
// success, a tool error, a JSON-RPC error, a timeout, a cancellation and
// a lost connection are told apart.
func TestManager_CallTelemetry(t *testing.T) {
	hold := func(*fakeTransport, *jsonrpc.Message) bool { return true } // never answers
	answer := func(res string) func(*fakeTransport, *jsonrpc.Message) bool {
		return func(f *fakeTransport, m *jsonrpc.Message) bool {
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(res)), m.ID)
			return true
		}
	}
	tests := []struct {
		name    string
		method  string
		params  string
		handle  func(f *fakeTransport, m *jsonrpc.Message) bool
		timeout time.Duration // of the call's ctx
		cancel  bool          // cancel the call once it waits at the server
		wantErr bool

		wantName   string
		wantAttrs  map[string]string // of the span, beside the common ones
		wantStatus codes.Code
		wantLabels map[string]string // of the duration, beside method and server: no tool, no error type
	}{
		{
			name: "ok", method: "tools/call", params: `{"name":"t","arguments":{"q":"secret-arg"}}`,
			handle:   answer(`{"content":[]}`),
			wantName: "tools/call t", wantAttrs: map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool"},
			wantLabels: map[string]string{"mcpgw.outcome": "ok"},
		},
		{
			name: "tool error", method: "tools/call", params: `{"name":"t"}`,
			handle:   answer(`{"content":[],"isError":true}`),
			wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "tool_error"},
			wantLabels: map[string]string{"mcpgw.outcome": "tool_error"},
		},
		{
			name: "tool error, isError first", method: "tools/call", params: `{"name":"t"}`,
			handle:   answer(`{"isError":true,"content":[]}`),
			wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "tool_error"},
			wantLabels: map[string]string{"mcpgw.outcome": "tool_error"},
		},
		{
			name: "JSON-RPC error", method: "tools/call", params: `{"name":"t","arguments":{"q":"secret-arg"}}`,
			handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
				f.recv(jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32602, Message: "bad q: secret-arg"}), m.ID)
				return true
			},
			wantErr: true, wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "-32602", "rpc.response.status_code": "-32602"},
			wantLabels: map[string]string{"mcpgw.outcome": "error"},
		},
		{
			name: "timeout", method: "tools/call", params: `{"name":"t"}`,
			handle: hold, timeout: time.Minute,
			wantErr: true, wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "timeout"},
			wantLabels: map[string]string{"mcpgw.outcome": "error"},
		},
		{
			name: "cancelled", method: "tools/call", params: `{"name":"t"}`,
			handle: hold, cancel: true,
			wantErr: true, wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "cancelled"},
			wantLabels: map[string]string{"mcpgw.outcome": "cancelled"},
		},
		{
			name: "connection lost", method: "tools/call", params: `{"name":"t"}`,
			handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
				f.die(errors.New("the process exited"))
				return true
			},
			wantErr: true, wantName: "tools/call t", wantStatus: codes.Error,
			wantAttrs:  map[string]string{"gen_ai.tool.name": "t", "gen_ai.operation.name": "execute_tool", "error.type": "unavailable"},
			wantLabels: map[string]string{"mcpgw.outcome": "error"},
		},
		{
			name: "prompts/get", method: "prompts/get", params: `{"name":"greet","arguments":{"who":"secret-arg"}}`,
			wantName: "prompts/get greet", wantAttrs: map[string]string{"gen_ai.prompt.name": "greet"},
			wantLabels: map[string]string{"mcpgw.outcome": "ok"},
		},
		{
			name: "resources/read", method: "resources/read", params: `{"uri":"file:///secret-arg"}`,
			wantName:   "resources/read",
			wantLabels: map[string]string{"mcpgw.outcome": "ok"},
		},
		{
			name: "an unknown method", method: "x/custom",
			wantName:   "x/custom",
			wantLabels: map[string]string{"mcp.method.name": telemetry.OtherMethod, "mcpgw.outcome": "ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder(t)
				peer := &fakePeer{handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
					return m.Method == tt.method && tt.handle != nil && tt.handle(f, m)
				}}
				m := newFakeManager(t, map[string]*fakePeer{"s": peer}, []config.Server{fakeConfig("s")}, rec.options(ManagerOptions{}))
				synctest.Wait()

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				var params json.RawMessage
				if tt.params != "" {
					params = json.RawMessage(tt.params)
				}
				errc := make(chan error, 1)
				go func() {
					_, err := m.Call(ctx, "s", Caller{}, tt.method, params, nil)
					errc <- err
				}()
				if tt.cancel {
					synctest.Wait()
					if got := rec.metrics(t)["mcpgw.upstream.calls.in_flight"]; !cmp.Equal(got, []point{{map[string]string{"mcpgw.server": "s"}, 1}}) {
						t.Errorf("in flight during the call: %v", got)
					}
					cancel()
				}
				if err := <-errc; (err != nil) != tt.wantErr {
					t.Fatalf("call = %v, want an error: %v", err, tt.wantErr)
				}
				synctest.Wait()

				spans := rec.clientSpans()
				if len(spans) != 1 {
					t.Fatalf("%d client spans, want 1", len(spans))
				}
				s := spans[0]
				if s.Name() != tt.wantName {
					t.Errorf("span name %q, want %q", s.Name(), tt.wantName)
				}
				want := map[string]string{
					"mcp.method.name":      tt.method,
					"mcpgw.server":         "s",
					"mcp.protocol.version": LatestProtocolVersion,
					"network.transport":    "pipe",
				}
				maps.Copy(want, tt.wantAttrs)
				if diff := cmp.Diff(want, attrMap(s.Attributes())); diff != "" {
					t.Errorf("span attributes (-want +got):\n%s", diff)
				}
				if st := s.Status(); st.Code != tt.wantStatus || strings.Contains(st.Description, "secret") {
					t.Errorf("span status %v %q, want %v, without arguments", st.Code, st.Description, tt.wantStatus)
				}
				if len(s.Events()) != 0 {
					t.Errorf("span events %v, want none (no error text)", s.Events())
				}

				labels := map[string]string{"mcp.method.name": tt.method, "mcpgw.server": "s"}
				maps.Copy(labels, tt.wantLabels)
				got := rec.metrics(t)
				wantMetrics := map[string][]point{
					"mcp.client.operation.duration":  {{labels, 1}},
					"mcpgw.upstream.calls.in_flight": {{map[string]string{"mcpgw.server": "s"}, 0}},
				}
				for name, want := range wantMetrics {
					if diff := cmp.Diff(want, got[name]); diff != "" {
						t.Errorf("%s (-want +got):\n%s", name, diff)
					}
				}
			})
		})
	}
}

// TestManager_CallTelemetryRefused checks that a call refused before it
// reaches the server (a rate limit, a server that is not running) has no
// span and no duration.
func TestManager_CallTelemetryRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		srv := fakeConfig("s")
		srv.RateLimit = config.ServerLimit{Rate: 1, Burst: 1}
		off := fakeConfig("off")
		off.Enabled = new(false)
		m := newFakeManager(t, map[string]*fakePeer{"s": {}, "off": {}}, []config.Server{srv, off}, rec.options(ManagerOptions{}))
		synctest.Wait()
		call := func(server string) error {
			_, err := m.Call(context.Background(), server, Caller{}, "tools/call", json.RawMessage(`{"name":"t"}`), nil)
			return err
		}
		if err := call("s"); err != nil {
			t.Fatalf("first call: %v", err)
		}
		if err := call("s"); !errors.As(err, new(*RateLimitedError)) {
			t.Errorf("second call = %v, want refused by the rate limit", err)
		}
		if err := call("off"); !errors.As(err, new(*UnavailableError)) {
			t.Errorf("call of a disabled server = %v, want unavailable", err)
		}
		if n := len(rec.clientSpans()); n != 1 {
			t.Errorf("%d client spans, want 1 (the first call's)", n)
		}
		dur := rec.metrics(t)["mcp.client.operation.duration"]
		if len(dur) != 1 || dur[0].Value != 1 {
			t.Errorf("durations %v, want the first call's only", dur)
		}
	})
}

// TestManager_ServerMetrics checks the observed metrics of the servers:
// the state of each (1 for its current state only) and its restarts, and
// that Close stops observing them.
func TestManager_ServerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		off := fakeConfig("off")
		off.Enabled = new(false)
		crashy := fakeConfig("crashy")
		crashy.Restart = config.Restart{MaxAttempts: 1, InitialBackoff: config.Duration(time.Second)}
		peers := map[string]*fakePeer{"s": {}, "off": {}, "crashy": {failStarts: []string{"boom", "boom"}}}
		opts := rec.options(ManagerOptions{Servers: []config.Server{fakeConfig("s"), off, crashy}})
		opts.newClient = func(srv config.Server, o ClientOptions) (*Client, error) { return peers[srv.Name].newClient(srv, o) }
		m := NewManager(opts)
		m.Start()
		time.Sleep(time.Minute) // crashy fails, restarts once, fails for good
		synctest.Wait()

		got := rec.metrics(t)
		want := map[string][]point{
			"mcpgw.upstream.state": {
				{map[string]string{"mcpgw.server": "crashy", "mcpgw.state": "failed"}, 1},
				{map[string]string{"mcpgw.server": "off", "mcpgw.state": "disabled"}, 1},
				{map[string]string{"mcpgw.server": "s", "mcpgw.state": "running"}, 1},
			},
			"mcpgw.upstream.restarts": {
				{map[string]string{"mcpgw.server": "crashy"}, 1},
				{map[string]string{"mcpgw.server": "off"}, 0},
				{map[string]string{"mcpgw.server": "s"}, 0},
			},
		}
		for name, want := range want {
			if diff := cmp.Diff(want, got[name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}

		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got = rec.metrics(t)
		for _, name := range []string{"mcpgw.upstream.state", "mcpgw.upstream.restarts"} {
			if len(got[name]) != 0 {
				t.Errorf("%s after Close: %v", name, got[name])
			}
		}
	})
}
