package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestSetup(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		wantExporting bool
		wantErr       string // a substring; "" means no error
	}{
		{name: "empty environment: no export", env: nil},
		{name: "endpoint: export", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, wantExporting: true},
		{name: "traces endpoint: export", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, wantExporting: true},
		{name: "explicit http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, wantExporting: true},
		{name: "exporter none wins over the endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "grpc is refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: `OTLP protocol "grpc" is not supported`},
		{name: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, wantErr: `"http/json" is not supported`},
		{name: "a setting the exporter cannot use", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, wantErr: "telemetry: OTEL_EXPORTER_OTLP_HEADERS: pair 1 has no '='"},
		{name: "an endpoint without a scheme", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, wantErr: "is not an http:// or https:// URL"},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			tel, err := Setup(t.Context(), Options{ServiceVersion: "test", LookupEnv: lookup})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				tel.Shutdown(ctx) // an unreachable collector may fail the flush
			}()
			if tel.Exporting != tt.wantExporting {
				t.Errorf("Exporting = %v, want %v", tel.Exporting, tt.wantExporting)
			}
			_, span := tel.TracerProvider.Tracer("t").Start(t.Context(), "s")
			if span.SpanContext().IsValid() != tt.wantExporting {
				t.Errorf("a new root span is valid: %v, want %v (recorded only when exported)", span.SpanContext().IsValid(), tt.wantExporting)
			}
			span.End()
		})
	}
}

// TestSetup_Metrics: what the meter provider records, and the runtime's
// own metrics, are served in the Prometheus text format under
// Prometheus names (dots to underscores, unit and _total suffixes).
func TestSetup_Metrics(t *testing.T) {
	tel, err := Setup(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	meter := tel.MeterProvider.Meter(ScopeName)
	RateLimitRejections(meter).Add(t.Context(), 2)
	h, _ := meter.Float64Histogram("mcp.server.operation.duration", metricUnitSeconds())
	h.Record(t.Context(), 0.03)

	srv := httptest.NewServer(tel.MetricsHandler)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"mcpgw_rate_limit_rejections_total 2",
		"mcp_server_operation_duration_seconds_count 1",
		"go_goroutines ",
		"process_resident_memory_bytes ",
		`target_info{service_name="mcpgw"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestMeta(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name      string
		meta      string
		wantValid bool
		wantState string
	}{
		{name: "none", meta: ``},
		{name: "empty object", meta: `{}`},
		{name: "other members", meta: `{"progressToken":1}`},
		{name: "traceparent", meta: `{"traceparent":"` + tp + `"}`, wantValid: true},
		{name: "with tracestate", meta: `{"traceparent":"` + tp + `","tracestate":"k=v"}`, wantValid: true, wantState: "k=v"},
		{name: "invalid traceparent", meta: `{"traceparent":"00-zz-00-01"}`},
		{name: "all-zero trace id", meta: `{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`},
		{name: "not a string", meta: `{"traceparent":42}`},
		{name: "not an object", meta: `[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ExtractMeta(t.Context(), json.RawMessage(tt.meta))
			sc := trace.SpanContextFromContext(ctx)
			if sc.IsValid() != tt.wantValid {
				t.Fatalf("valid = %v, want %v", sc.IsValid(), tt.wantValid)
			}
			if !tt.wantValid {
				if InjectMeta(ctx) != nil {
					t.Errorf("InjectMeta of no span context = %v, want nil", InjectMeta(ctx))
				}
				return
			}
			if !sc.IsRemote() || sc.TraceState().String() != tt.wantState {
				t.Errorf("remote %v, tracestate %q; want remote, %q", sc.IsRemote(), sc.TraceState().String(), tt.wantState)
			}
			want := map[string]string{MetaTraceparent: tp}
			if tt.wantState != "" {
				want[MetaTracestate] = tt.wantState
			}
			if diff := cmp.Diff(want, InjectMeta(ctx)); diff != "" {
				t.Errorf("InjectMeta (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzExtractMeta: a client's _meta never panics the extraction, and
// what it yields is either nothing or a valid span context that
// round-trips through InjectMeta.
func FuzzExtractMeta(f *testing.F) {
	f.Add([]byte(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}`))
	f.Add([]byte(`{"traceparent":"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`))
	f.Add([]byte(`{"traceparent":""}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		ctx := ExtractMeta(context.Background(), meta)
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			return
		}
		out := InjectMeta(ctx)
		back := trace.SpanContextFromContext(ExtractMeta(context.Background(), mustJSON(t, out)))
		if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || back.TraceFlags() != sc.TraceFlags() {
			t.Errorf("%s: round trip gave %v, want %v", meta, back, sc)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func metricUnitSeconds() metric.Float64HistogramOption { return metric.WithUnit("s") }

// TestSets checks that a Sets cache gives the set of the labels it was
// asked for, makes each one once, and still answers past its bound.
func TestSets(t *testing.T) {
	type key struct{ method, server string }
	var c Sets[key]
	made := 0
	get := func(k key) attribute.Set {
		l := c.Get(k, func() []attribute.KeyValue {
			made++
			return []attribute.KeyValue{MethodName.String(k.method), Server.String(k.server)}
		})
		rec := metric.NewRecordConfig(l.Record).Attributes()
		if add := metric.NewAddConfig(l.Add).Attributes(); !add.Equals(&rec) {
			t.Errorf("Add and Record options differ: %v, %v", add, rec)
		}
		return rec
	}
	for range 3 {
		for _, k := range []key{{"tools/call", "a"}, {"tools/call", "b"}, {"ping", ""}} {
			set := get(k)
			if v, _ := set.Value(MethodName); v.AsString() != k.method {
				t.Errorf("set for %+v has method %q", k, v.AsString())
			}
			if v, _ := set.Value(Server); v.AsString() != k.server {
				t.Errorf("set for %+v has server %q", k, v.AsString())
			}
		}
	}
	if made != 3 {
		t.Errorf("%d sets made for 3 keys asked 3 times each, want 3", made)
	}
	for i := range maxCachedSets + 10 {
		get(key{"m", fmt.Sprint(i)})
	}
	if n := len(c.labels.m); n != maxCachedSets {
		t.Errorf("%d sets cached, want the bound %d", n, maxCachedSets)
	}
	set := get(key{"m", "past"})
	if v, _ := set.Value(Server); v.AsString() != "past" {
		t.Errorf("past the bound: server %q", v.AsString())
	}
}

func TestTracing(t *testing.T) {
	if Tracing(noop.NewTracerProvider()) {
		t.Error("Tracing(noop) = true")
	}
	if !Tracing(sdktrace.NewTracerProvider()) {
		t.Error("Tracing(sdk) = false")
	}
	if !Tracing(otel.GetTracerProvider()) {
		t.Error("Tracing(global) = false: the global provider may delegate to a real one later")
	}
}

func mustTraceState(t *testing.T, s string) trace.TraceState {
	t.Helper()
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestErrorTypeLabel: the error types the gateway names, and the JSON-RPC
// codes it knows, are labels as they are; any other code is _OTHER.
func TestErrorTypeLabel(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{ErrorToolError, ErrorToolError},
		{ErrorTimeout, ErrorTimeout},
		{ErrorCancelled, ErrorCancelled},
		{"-32602", "-32602"},
		{"-32042", "-32042"},
		{"-31004", "-31004"},
		{"-12345", OtherErrorType},
		{"7", OtherErrorType},
		{"-3260200", OtherErrorType},
	} {
		if got := ErrorTypeLabel(tt.in); got != tt.want {
			t.Errorf("ErrorTypeLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
