package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestOTLPConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCert(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const base = "OTEL_EXPORTER_OTLP_ENDPOINT"
	tests := []struct {
		name        string
		env         map[string]string
		wantURL     string
		wantHeaders http.Header
		wantTimeout time.Duration // 0: the default
		wantGzip    bool
		wantRoots   bool
		wantClient  bool
		wantErr     string // a substring; "" means no error
		secret      string // must not be in the error
	}{
		{name: "base endpoint gets the traces path", env: map[string]string{base: "http://collector:4318"}, wantURL: "http://collector:4318/v1/traces"},
		{name: "base endpoint with a path", env: map[string]string{base: "https://collector/otel/"}, wantURL: "https://collector/otel/v1/traces"},
		{name: "traces endpoint is used as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector/custom/spans"}, wantURL: "https://collector/custom/spans"},
		{name: "traces endpoint without a path gets /", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318"}, wantURL: "http://collector:4318/"},
		{name: "traces endpoint wins", env: map[string]string{base: "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces"}, wantURL: "http://b:4318/v1/traces"},
		{name: "no endpoint", env: map[string]string{}, wantErr: "neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set"},
		{name: "endpoint without a scheme", env: map[string]string{base: "collector:4318"}, wantErr: base + `="collector:4318" is not an http:// or https:// URL with a host`},
		{name: "endpoint of another scheme, password hidden", env: map[string]string{base: "ftp://user:hunter2@collector"}, wantErr: `"ftp://user:xxxxx@collector" is not an http:// or https:// URL`, secret: "hunter2"},
		{name: "endpoint that is not a URL", env: map[string]string{base: "http://[::1"}, wantErr: base + " is not an http:// or https:// URL with a host"},

		{name: "headers, percent-decoded", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=se%20cret%2C1 , x-tenant = blue,,"},
			wantURL: "http://c/v1/traces", wantHeaders: http.Header{"Api-Key": {"se cret,1"}, "X-Tenant": {"blue"}}},
		{name: "traces headers win", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2"},
			wantURL: "http://c/v1/traces", wantHeaders: http.Header{"B": {"2"}}},
		{name: "a pair without =", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2,broken"},
			wantErr: "OTEL_EXPORTER_OTLP_HEADERS: pair 2 has no '='", secret: "hunter2"},
		{name: "a bad key", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "bad key=hunter2"},
			wantErr: "pair 1: the key is not a valid header name", secret: "hunter2"},
		{name: "a value with broken percent-encoding", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=hunter2%zz"},
			wantErr: "OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 1 (api-key): the value's percent-encoding is broken", secret: "hunter2"},
		{name: "a value with a newline", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2%0Ax-evil:1"},
			wantErr: "pair 1 (api-key): the value holds a control character", secret: "hunter2"},

		{name: "timeout in milliseconds", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, wantURL: "http://c/v1/traces", wantTimeout: 2500 * time.Millisecond},
		{name: "traces timeout wins", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "100"}, wantURL: "http://c/v1/traces", wantTimeout: 100 * time.Millisecond},
		{name: "timeout with a unit", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, wantErr: `OTEL_EXPORTER_OTLP_TIMEOUT="5s" is not a number of milliseconds`},
		{name: "timeout of 0", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"}, wantErr: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="0" is not a number of milliseconds`},

		{name: "gzip", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, wantURL: "http://c/v1/traces", wantGzip: true},
		{name: "traces compression none wins", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}, wantURL: "http://c/v1/traces"},
		{name: "unknown compression", env: map[string]string{base: "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, wantErr: `OTEL_EXPORTER_OTLP_COMPRESSION="zstd" is not supported: use gzip or none`},

		{name: "CA certificate", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": caFile}, wantURL: "https://c/v1/traces", wantRoots: true},
		{name: "missing CA certificate", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": filepath.Join(dir, "missing.pem")}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: reading the collector's CA certificate"},
		{name: "CA file without a certificate", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": notPEM}, wantErr: "holds no PEM certificate"},
		{name: "client certificate", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile}, wantURL: "https://c/v1/traces", wantClient: true},
		{name: "client certificate without a key", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile}, wantErr: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set without OTEL_EXPORTER_OTLP_(TRACES_)CLIENT_KEY"},
		{name: "client key without a certificate", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": keyFile}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY is set without"},
		{name: "client key that does not match", env: map[string]string{base: "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM}, wantErr: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := otlpConfigFromEnv(func(k string) string { return tt.env[k] }, os.ReadFile)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
					t.Fatalf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("otlpConfigFromEnv: %v", err)
			}
			if cfg.url != tt.wantURL {
				t.Errorf("url %q, want %q", cfg.url, tt.wantURL)
			}
			if diff := cmp.Diff(tt.wantHeaders, cfg.headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			wantTimeout := tt.wantTimeout
			if wantTimeout == 0 {
				wantTimeout = otlpDefaultTimeout
			}
			if cfg.timeout != wantTimeout {
				t.Errorf("timeout %v, want %v", cfg.timeout, wantTimeout)
			}
			if cfg.gzip != tt.wantGzip {
				t.Errorf("gzip %v, want %v", cfg.gzip, tt.wantGzip)
			}
			if got := cfg.tls != nil && cfg.tls.RootCAs != nil; got != tt.wantRoots {
				t.Errorf("own CA roots %v, want %v", got, tt.wantRoots)
			}
			if got := cfg.tls != nil && len(cfg.tls.Certificates) == 1; got != tt.wantClient {
				t.Errorf("client certificate %v, want %v", got, tt.wantClient)
			}
		})
	}
}

// writeTestCert writes a self-signed CA certificate, and a client
// certificate and key, as PEM files in dir.
func writeTestCert(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mcpgw test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert := write("cert.pem", "CERTIFICATE", der)
	return cert, cert, write("key.pem", "PRIVATE KEY", keyDER)
}

func FuzzParseOTLPHeaders(f *testing.F) {
	for _, s := range []string{"", "a=b", "api-key=se%20cret, x = y ,,", "a=%zz", "=v", "k=v=w", "a b=c", "k=%0A", "k=\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseOTLPHeaders(s)
		if err != nil {
			return
		}
		// What is accepted can be sent, and reads back the same when
		// written in the same format.
		var pairs []string
		for k, vs := range h {
			if !httpguts.ValidHeaderFieldName(k) {
				t.Fatalf("accepted the header name %q", k)
			}
			for _, v := range vs {
				if !httpguts.ValidHeaderFieldValue(v) || v != strings.TrimSpace(v) {
					t.Fatalf("accepted the header value %q", v)
				}
				pairs = append(pairs, url.PathEscape(k)+"="+url.PathEscape(v))
			}
		}
		again, err := parseOTLPHeaders(strings.Join(pairs, ","))
		if err != nil {
			t.Fatalf("its own output %q is refused: %v", strings.Join(pairs, ","), err)
		}
		if diff := cmp.Diff(h, again); diff != "" {
			t.Fatalf("read back differs (-first +again):\n%s", diff)
		}
	})
}

// testSpans is one of each kind of field, in two resources and three
// scopes, with the OTLP form tracesData must give them.
func testSpans(t *testing.T) ([]sdktrace.ReadOnlySpan, *tracepb.TracesData) {
	t.Helper()
	res1 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "mcpgw"))
	res2 := resource.NewSchemaless(attribute.String("service.name", "other"))
	scopeA := instrumentation.Scope{Name: "a", Version: "1.0", SchemaURL: "https://s/a", Attributes: attribute.NewSet(attribute.Bool("x", true))}
	scopeB := instrumentation.Scope{Name: "b"}
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, err := trace.ParseTraceState("vendor=v1")
	if err != nil {
		t.Fatal(err)
	}
	sc := func(sid byte, remote bool) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{sid}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote})
	}
	start := time.Unix(1_700_000_000, 5)
	end := start.Add(time.Millisecond)
	stubs := []tracetest.SpanStub{
		{
			Name: "tools/call", SpanContext: sc(1, false), Parent: sc(9, true), SpanKind: trace.SpanKindServer,
			StartTime: start, EndTime: end,
			Attributes: []attribute.KeyValue{
				attribute.String("s", "v"), attribute.Int64("i", -3), attribute.Float64("f", 1.5), attribute.Bool("b", true),
				attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1}),
				attribute.Float64Slice("fs", []float64{0.5}), attribute.BoolSlice("bs", []bool{false}),
				attribute.KeyValue{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 1})},
				attribute.KeyValue{Key: "mixed", Value: attribute.SliceValue(attribute.StringValue("x"), attribute.IntValue(2))},
				attribute.KeyValue{Key: "map", Value: attribute.MapValue(attribute.String("k", "v"))},
				attribute.KeyValue{Key: "empty"},
			},
			Events:            []sdktrace.Event{{Name: "retry", Time: end, Attributes: []attribute.KeyValue{attribute.Int("n", 2)}, DroppedAttributeCount: 1}},
			Links:             []sdktrace.Link{{SpanContext: sc(7, true), Attributes: []attribute.KeyValue{attribute.String("why", "batch")}, DroppedAttributeCount: 2}},
			Status:            sdktrace.Status{Code: codes.Error, Description: "upstream down"},
			DroppedAttributes: 4, DroppedEvents: 5, DroppedLinks: 6,
			Resource: res1, InstrumentationScope: scopeA,
		},
		{Name: "root", SpanContext: sc(2, false), SpanKind: trace.SpanKindClient, StartTime: start, EndTime: end, Status: sdktrace.Status{Code: codes.Ok}, Resource: res2, InstrumentationScope: scopeA},
		{Name: "internal", SpanContext: sc(3, false), Parent: sc(1, false), SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: end, Resource: res1, InstrumentationScope: scopeB},
		{Name: "second in a", SpanContext: sc(4, false), SpanKind: trace.SpanKindProducer, StartTime: start, EndTime: end, Resource: res1, InstrumentationScope: scopeA},
	}
	spans := make([]sdktrace.ReadOnlySpan, len(stubs))
	for i, s := range stubs {
		spans[i] = s.Snapshot()
	}

	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	integer := func(i int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
	}
	array := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	const hasRemote, isRemote = 0x100, 0x200
	id := func(sid byte) []byte { return append(make([]byte, 0, 8), sid, 0, 0, 0, 0, 0, 0, 0) }
	plain := func(name string, sid byte, kind tracepb.Span_SpanKind) *tracepb.Span {
		return &tracepb.Span{
			TraceId: tid[:], SpanId: id(sid), TraceState: "vendor=v1", Flags: 1 | hasRemote, Name: name, Kind: kind,
			StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(end.UnixNano()),
			Status: &tracepb.Status{},
		}
	}
	call := plain("tools/call", 1, tracepb.Span_SPAN_KIND_SERVER)
	call.ParentSpanId = id(9)
	call.Flags = 1 | hasRemote | isRemote
	call.Attributes = []*commonpb.KeyValue{
		kv("s", str("v")), kv("i", integer(-3)),
		kv("f", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}),
		kv("b", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
		kv("ss", array(str("a"), str("b"))), kv("is", array(integer(1))),
		kv("fs", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.5}})),
		kv("bs", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}})),
		kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1}}}),
		kv("mixed", array(str("x"), integer(2))),
		kv("map", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("k", str("v"))}}}}),
		kv("empty", &commonpb.AnyValue{}),
	}
	call.Events = []*tracepb.Span_Event{{TimeUnixNano: uint64(end.UnixNano()), Name: "retry", Attributes: []*commonpb.KeyValue{kv("n", integer(2))}, DroppedAttributesCount: 1}}
	call.Links = []*tracepb.Span_Link{{TraceId: tid[:], SpanId: id(7), TraceState: "vendor=v1", Attributes: []*commonpb.KeyValue{kv("why", str("batch"))}, DroppedAttributesCount: 2, Flags: 1 | hasRemote | isRemote}}
	call.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream down"}
	call.DroppedAttributesCount, call.DroppedEventsCount, call.DroppedLinksCount = 4, 5, 6

	root := plain("root", 2, tracepb.Span_SPAN_KIND_CLIENT)
	root.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	internal := plain("internal", 3, tracepb.Span_SPAN_KIND_INTERNAL)
	internal.ParentSpanId = id(1)
	second := plain("second in a", 4, tracepb.Span_SPAN_KIND_PRODUCER)

	protoScopeA := &commonpb.InstrumentationScope{Name: "a", Version: "1.0", Attributes: []*commonpb.KeyValue{kv("x", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}})}}
	want := &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("mcpgw"))}},
			SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: protoScopeA, SchemaUrl: "https://s/a", Spans: []*tracepb.Span{call, second}},
				{Scope: &commonpb.InstrumentationScope{Name: "b"}, Spans: []*tracepb.Span{internal}},
			},
		},
		{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("other"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: protoScopeA, SchemaUrl: "https://s/a", Spans: []*tracepb.Span{root}}},
		},
	}}
	return spans, want
}

func TestTracesData(t *testing.T) {
	spans, want := testSpans(t)
	got := tracesData(append(spans, nil))
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("tracesData (-want +got):\n%s", diff)
	}
}

// collector is an OTLP/HTTP collector for the tests: it answers each
// request with the next of its answers (the last one repeats) and keeps
// what it got.
type collector struct {
	t       *testing.T
	answers []func(http.ResponseWriter)

	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
}

func newCollector(t *testing.T, answers ...func(http.ResponseWriter)) (*collector, *httptest.Server) {
	c := &collector{t: t, answers: answers}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		c.t.Errorf("collector: reading the body: %v", err)
	}
	c.mu.Lock()
	n := len(c.requests)
	c.requests = append(c.requests, r)
	c.bodies = append(c.bodies, body)
	c.mu.Unlock()
	c.answers[min(n, len(c.answers)-1)](w)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

func answer(status int, contentType string, body []byte, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		w.Write(body)
	}
}

// testExporter is an exporter to url whose retries wait milliseconds.
func testExporter(url string, mutate ...func(*otlpConfig)) *otlpExporter {
	cfg := otlpConfig{url: url, timeout: 5 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	e := newOTLPExporter(cfg, "test")
	e.firstRetry, e.maxRetry = time.Millisecond, 4*time.Millisecond
	return e
}

func TestOTLPExporter_Sends(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[compressed], func(t *testing.T) {
			c, srv := newCollector(t, answer(http.StatusOK, "application/x-protobuf", nil))
			e := testExporter(srv.URL+"/v1/traces", func(cfg *otlpConfig) {
				cfg.gzip = compressed
				cfg.headers = http.Header{"Api-Key": {"k1"}}
			})
			defer e.Shutdown(context.Background())
			spans, want := testSpans(t)
			if err := e.ExportSpans(t.Context(), spans); err != nil {
				t.Fatalf("ExportSpans: %v", err)
			}
			if err := e.ExportSpans(t.Context(), nil); err != nil {
				t.Fatalf("ExportSpans of nothing: %v", err)
			}
			if n := c.count(); n != 1 {
				t.Fatalf("the collector got %d requests, want 1 (none for no spans)", n)
			}
			r, body := c.requests[0], c.bodies[0]
			for k, v := range map[string]string{"Content-Type": "application/x-protobuf", "User-Agent": "mcpgw/test (OTLP/HTTP trace exporter)", "Api-Key": "k1"} {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
				t.Errorf("request %s %s, want POST /v1/traces", r.Method, r.URL.Path)
			}
			if compressed {
				if ce := r.Header.Get("Content-Encoding"); ce != "gzip" {
					t.Fatalf("Content-Encoding %q, want gzip", ce)
				}
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			// The collector reads it as its own request message.
			var got coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &got); err != nil {
				t.Fatalf("the body is not an ExportTraceServiceRequest: %v", err)
			}
			if diff := cmp.Diff(want.ResourceSpans, got.ResourceSpans, protocmp.Transform()); diff != "" {
				t.Errorf("sent spans (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOTLPExporter_Answers(t *testing.T) {
	partial, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "too\nold"}})
	if err != nil {
		t.Fatal(err)
	}
	noRejects, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{}})
	if err != nil {
		t.Fatal(err)
	}
	// google.rpc.Status{code: 3, message: "bad span"}
	status := protowire.AppendString(protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3), 2, protowire.BytesType), "bad span")
	const pb = "application/x-protobuf"
	tests := []struct {
		name         string
		answers      []func(http.ResponseWriter)
		timeout      time.Duration
		wantErr      string // "" means success
		wantAttempts int    // 0: at least 2
	}{
		{name: "empty success", answers: []func(http.ResponseWriter){answer(http.StatusOK, "", nil)}, wantAttempts: 1},
		{name: "success without rejects", answers: []func(http.ResponseWriter){answer(http.StatusOK, pb, noRejects)}, wantAttempts: 1},
		{name: "partial success", answers: []func(http.ResponseWriter){answer(http.StatusOK, pb, partial)}, wantErr: "rejected 2 of 4 spans: too old", wantAttempts: 1},
		{name: "refused with a status", answers: []func(http.ResponseWriter){answer(http.StatusBadRequest, pb, status)}, wantErr: "refused 4 spans: 400 Bad Request: bad span", wantAttempts: 1},
		{name: "refused with text", answers: []func(http.ResponseWriter){answer(http.StatusNotFound, "text/plain", []byte("no such path\n"))}, wantErr: "404 Not Found: no such path", wantAttempts: 1},
		{name: "unavailable, then accepted", answers: []func(http.ResponseWriter){answer(http.StatusServiceUnavailable, "", nil), answer(http.StatusTooManyRequests, "", nil, "Retry-After", "0"), answer(http.StatusOK, "", nil)}, wantAttempts: 3},
		{name: "busy until the timeout", answers: []func(http.ResponseWriter){answer(http.StatusTooManyRequests, pb, status)}, timeout: 300 * time.Millisecond, wantErr: "answered 429 Too Many Requests: bad span (gave up after"},
		{name: "waits longer than the timeout are not waited", answers: []func(http.ResponseWriter){answer(http.StatusServiceUnavailable, "", nil, "Retry-After", "30")}, timeout: time.Second, wantErr: "(gave up after 1 attempt: the next would come after the export timeout)", wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, srv := newCollector(t, tt.answers...)
			e := testExporter(srv.URL, func(cfg *otlpConfig) {
				if tt.timeout > 0 {
					cfg.timeout = tt.timeout
				}
			})
			defer e.Shutdown(context.Background())
			spans, _ := testSpans(t)
			err := e.ExportSpans(t.Context(), spans)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("ExportSpans: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ExportSpans error %v, want one containing %q", err, tt.wantErr)
			}
			n := c.count()
			if tt.wantAttempts > 0 && n != tt.wantAttempts || tt.wantAttempts == 0 && n < 2 {
				t.Errorf("%d attempts, want %d (0: at least 2)", n, tt.wantAttempts)
			}
		})
	}
}

func TestOTLPExporter_CollectorDown(t *testing.T) {
	// A port that was just free: nothing listens there.
	srv := httptest.NewServer(http.NotFoundHandler())
	down := srv.URL
	srv.Close()
	u, err := url.Parse(down)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("user", "hunter2")
	e := testExporter(u.String(), func(cfg *otlpConfig) { cfg.timeout = 200 * time.Millisecond })
	defer e.Shutdown(context.Background())
	spans, _ := testSpans(t)
	err = e.ExportSpans(t.Context(), spans)
	if err == nil || !strings.Contains(err.Error(), "sending 4 spans to the OTLP collector at http://user:xxxxx@127.0.0.1") || !strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("ExportSpans error %v, want the collector named and the retries given up", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// TestOTLPExporter_UnreadableURL: a URL that does not parse (which
// otlpConfigFromEnv never lets through) fails the export without showing
// it, as it may hold a password.
func TestOTLPExporter_UnreadableURL(t *testing.T) {
	e := testExporter("http://user:hunter2@[::1")
	defer e.Shutdown(context.Background())
	spans, _ := testSpans(t)
	err := e.ExportSpans(t.Context(), spans)
	if err == nil || !strings.Contains(err.Error(), "building the OTLP request to (an unreadable URL) failed") {
		t.Fatalf("ExportSpans error %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestOTLPExporter_Shutdown(t *testing.T) {
	c, srv := newCollector(t, answer(http.StatusServiceUnavailable, "", nil))
	e := testExporter(srv.URL, func(cfg *otlpConfig) { cfg.timeout = time.Minute })
	e.firstRetry, e.maxRetry = 20*time.Second, 20*time.Second // only Shutdown ends the wait
	spans, _ := testSpans(t)
	done := make(chan error, 1)
	go func() { done <- e.ExportSpans(context.Background(), spans) }()
	for c.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := e.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, errOTLPStopped) {
		t.Fatalf("the export waiting to retry ended with %v, want %v", err, errOTLPStopped)
	}
	if err := e.ExportSpans(t.Context(), spans); !errors.Is(err, errOTLPStopped) {
		t.Fatalf("an export after Shutdown: %v, want %v", err, errOTLPStopped)
	}
	if n := c.count(); n != 1 {
		t.Fatalf("the collector got %d requests, want 1", n)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 7 ", 7 * time.Second},
		{"3600", time.Minute},
		{"-1", 0},
		{"soon", 0},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.v, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestOTLPAnswerParsing(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 300)
	tests := []struct {
		name         string
		body         []byte
		isProto      bool
		wantRejected int64
		wantPartial  string
		wantStatus   string
	}{
		{name: "empty", body: nil},
		{name: "not protobuf", body: []byte{0xff, 0xff, 0xff}, isProto: true},
		{name: "text", body: []byte("bad\x00 request\r\n"), wantStatus: "bad  request"},
		{name: "long text", body: long, wantStatus: string(long[:256]) + "…"},
		{name: "invalid UTF-8", body: []byte("a\xffb"), wantStatus: "a b"},
		{name: "partial success", isProto: true,
			body:         protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendString(protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5), 2, protowire.BytesType), "why")),
			wantRejected: 5, wantPartial: "why"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.isProto {
				n, msg := otlpPartialSuccess(tt.body)
				if n != tt.wantRejected || msg != tt.wantPartial {
					t.Errorf("otlpPartialSuccess = %d, %q; want %d, %q", n, msg, tt.wantRejected, tt.wantPartial)
				}
			}
			if got := otlpStatusMessage(tt.body, tt.isProto); got != tt.wantStatus {
				t.Errorf("otlpStatusMessage = %q, want %q", got, tt.wantStatus)
			}
		})
	}
}

func FuzzOTLPAnswer(f *testing.F) {
	partial, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "old"}})
	f.Add(partial)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x80})
	f.Add([]byte("plain text"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, msg := otlpPartialSuccess(b)
		for _, s := range []string{msg, otlpStatusMessage(b, true), otlpStatusMessage(b, false)} {
			if !httpguts.ValidHeaderFieldValue(s) || len(s) > 256+len("…") {
				t.Fatalf("%q is not fit for a log line", s)
			}
		}
	})
}

// TestSetup_ExportErrorsAreLogged: spans a collector refuses are reported
// through the Logger, with the collector's message, and without the
// headers' values.
func TestSetup_ExportErrorsAreLogged(t *testing.T) {
	_, srv := newCollector(t, answer(http.StatusUnauthorized, "text/plain", []byte("unknown tenant")))
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // the SDK's batcher reads the process environment
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2"}
	tel, err := Setup(t.Context(), Options{ServiceVersion: "test", Logger: logger, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, span := tel.TracerProvider.Tracer("t").Start(t.Context(), "s")
	span.End()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := buf.String()
		mu.Unlock()
		if strings.Contains(got, "refused 1 span: 401 Unauthorized: unknown tenant") {
			if strings.Contains(got, "hunter2") {
				t.Fatalf("the log shows a header's value: %s", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refusal was not logged; the log:\n%s", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
