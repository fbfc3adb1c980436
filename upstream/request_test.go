package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestBareRequest: a request to the server's URL, made from the URL
// parsed once, is the request http.NewRequestWithContext makes.
func TestBareRequest(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "call")
	for _, url := range []string{
		"http://127.0.0.1:8080/mcp",
		"http://example.com/mcp?token=q&x=1",
		"http://example.com:/mcp",
		"http://user:pw@example.com/a%2Fb/mcp",
		"https://example.com/mcp",
	} {
		for _, body := range [][]byte{nil, {}, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)} {
			p := newPeer(config.Server{URL: url}, &ClientOptions{}, config.TransportHTTP)
			for _, method := range []string{http.MethodPost, http.MethodGet} {
				got, err := p.bareRequest(ctx, method, url, body)
				if err != nil {
					t.Fatalf("%s %s: %v", method, url, err)
				}
				var rd io.Reader
				if body != nil {
					rd = bytes.NewReader(body)
				}
				want, err := http.NewRequestWithContext(ctx, method, url, rd)
				if err != nil {
					t.Fatal(err)
				}
				if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host ||
					got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
					got.ContentLength != want.ContentLength || got.Context() != ctx ||
					!reflect.DeepEqual(got.URL.User, want.URL.User) {
					t.Errorf("%s %s body %q:\n got  %s %s host %q %s len %d\n want %s %s host %q %s len %d", method, url, body,
						got.Method, got.URL, got.Host, got.Proto, got.ContentLength, want.Method, want.URL, want.Host, want.Proto, want.ContentLength)
				}
				if (got.Body == nil) != (want.Body == nil) || (got.Body == http.NoBody) != (want.Body == http.NoBody) ||
					(got.GetBody == nil) != (want.GetBody == nil) {
					t.Errorf("%s %s body %q: body %T, GetBody set %v; want %T, %v", method, url, body, got.Body, got.GetBody != nil, want.Body, want.GetBody != nil)
					continue
				}
				if got.Body == nil {
					continue
				}
				for i := range 2 { // the body, then GetBody's copy
					b, err := io.ReadAll(got.Body)
					if err != nil || !bytes.Equal(b, body) {
						t.Errorf("%s %s: body %d read %q, %v; want %q", method, url, i, b, err, body)
					}
					if got.Body, err = got.GetBody(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	// Another target (an SSE server's endpoint) is net/http's own, and a
	// URL that does not parse is refused without being quoted.
	p := newPeer(config.Server{URL: "http://example.com/sse"}, &ClientOptions{}, config.TransportSSE)
	if req, err := p.bareRequest(ctx, http.MethodPost, "http://example.com/message?session=1", []byte("{}")); err != nil || req.URL.String() != "http://example.com/message?session=1" {
		t.Errorf("another target: %v, %v", req, err)
	}
	p = newPeer(config.Server{URL: "http://exa mple.com/mcp?token=5ecret"}, &ClientOptions{}, config.TransportHTTP)
	if _, err := p.bareRequest(ctx, http.MethodPost, p.rawURL, nil); err == nil || bytes.Contains([]byte(err.Error()), []byte("5ecret")) {
		t.Errorf("a URL that does not parse: %v", err)
	}
}

// TestPostHeader: the POSTs of a session share one header when they carry
// neither a trace context nor forwarded headers, and those that carry
// either get one of their own, which leaves the shared one as it was.
func TestPostHeader(t *testing.T) {
	srv := config.Server{
		Name: "fake", Transport: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp", APIKey: testAPIKey,
		Headers:        map[string]string{"X-Test": testHeaderValue, "traceparent": "configured"},
		ForwardHeaders: []string{"X-Tenant"},
	}
	tr := newHTTPTransport(srv, &ClientOptions{HTTPClient: defaultHTTPClient}).(*httpTransport)
	defer tr.life.end()
	bg := context.Background()
	base := http.Header{
		"Authorization":        {"Bearer " + testAPIKey},
		"X-Test":               {testHeaderValue},
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Session-Id":       {"s1"},
		"Mcp-Protocol-Version": {"2025-11-25"},
	}
	same := func(a, b http.Header) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}

	h1 := tr.postHeader(bg, "s1", "2025-11-25", nil)
	if !reflect.DeepEqual(h1, base) {
		t.Fatalf("header %v; want %v", h1, base)
	}
	if h2 := tr.postHeader(bg, "s1", "2025-11-25", http.Header{"X-Other": {"o"}}); !same(h1, h2) {
		t.Error("a second POST of the session has a header of its own")
	}

	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	traced := tr.postHeader(trace.ContextWithSpanContext(bg, sc), "s1", "2025-11-25", nil)
	if same(traced, h1) || traced.Get("Traceparent") != "00-01000000000000000000000000000000-0200000000000000-01" {
		t.Errorf("traced POST: shared %v, traceparent %q", same(traced, h1), traced.Get("Traceparent"))
	}
	forwarded := tr.postHeader(bg, "s1", "2025-11-25", http.Header{"X-Tenant": {"acme"}})
	if same(forwarded, h1) || forwarded.Get("X-Tenant") != "acme" {
		t.Errorf("forwarding POST: shared %v, X-Tenant %q", same(forwarded, h1), forwarded.Get("X-Tenant"))
	}
	if !reflect.DeepEqual(h1, base) {
		t.Errorf("the shared header became %v", h1)
	}

	// Another session, or version, has its own.
	h3 := tr.postHeader(bg, "s2", "2025-11-25", nil)
	if same(h3, h1) || h3.Get("Mcp-Session-Id") != "s2" {
		t.Errorf("another session: shared %v, session %q", same(h3, h1), h3.Get("Mcp-Session-Id"))
	}
	if h4 := tr.postHeader(bg, "", "", nil); h4.Get("Mcp-Session-Id") != "" || h4.Get("Mcp-Protocol-Version") != "" {
		t.Errorf("initialize's header %v", h4)
	}

	// Through a client of its own (which may add to a request's header)
	// nothing is shared.
	other := newHTTPTransport(srv, &ClientOptions{HTTPClient: &http.Client{}}).(*httpTransport)
	defer other.life.end()
	if a, b := other.postHeader(bg, "s1", "2025-11-25", nil), other.postHeader(bg, "s1", "2025-11-25", nil); same(a, b) || !reflect.DeepEqual(a, base) {
		t.Errorf("own client: shared %v, header %v", same(a, b), a)
	}
}

// TestReadJSON: an answer is read into a buffer of its declared length,
// up to maxPresized; a body shorter than declared is an error; a larger
// declared length does not have its buffer made before the bytes come.
func TestReadJSON(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	tests := []struct {
		name    string
		max     int64 // max_response_body; 0: the default, 64 MiB
		length  int64
		body    string
		wantErr string
	}{
		{"declared", 0, int64(len(answer)), answer, ""},
		{"unknown", 0, -1, answer, ""},
		{"shorter than declared", 0, int64(len(answer)) + 10, answer, "unexpected EOF"},
		{"declared larger than the presized bound", 0, 32 << 20, answer, ""},
		{"declared over the limit", 1024, 2048, answer + strings.Repeat(" ", 2048-len(answer)), "larger than the limit of 1024 bytes"},
		{"over the limit, undeclared", 1024, -1, answer + strings.Repeat(" ", 2048), "larger than the limit of 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newHTTPTransport(config.Server{Name: "fake", Transport: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp"},
				&ClientOptions{HTTPClient: defaultHTTPClient, MaxMessageBytes: tt.max}).(*httpTransport)
			defer tr.life.end()
			var got []string
			tr.recv = func(m *jsonrpc.Message, _ related) { got = append(got, string(m.ID.String())) }
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tr.readJSON(context.Background(), strings.NewReader(tt.body), tt.length, jsonrpc.IntID(7))
			runtime.ReadMemStats(&after)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readJSON = %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("readJSON = %v, answers %q", err, got)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("reading a %d-byte answer allocated %d bytes", len(tt.body), n)
			}
		})
	}
}
