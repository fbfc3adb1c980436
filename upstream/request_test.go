package upstream

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestNewRequest: a request's body is one net/http knows is in memory (it
// can send it again, and writes it with the headers), and a URL that does
// not parse is refused without being quoted.
func TestNewRequest(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "call")
	for _, body := range [][]byte{nil, {}, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)} {
		p := newPeer(config.Server{URL: "http://example.com/mcp?token=q"}, &ClientOptions{}, config.TransportHTTP)
		req, err := p.newRequest(ctx, http.MethodPost, p.rawURL, body, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if req.Context() != ctx || req.URL.String() != p.rawURL || req.ContentLength != int64(len(body)) {
			t.Errorf("body %q: context kept %v, URL %s, length %d", body, req.Context() == ctx, req.URL, req.ContentLength)
		}
		if body == nil {
			if req.Body != nil {
				t.Errorf("no body: Body %T", req.Body)
			}
			continue
		}
		if req.GetBody == nil {
			t.Fatalf("body %q: no GetBody", body)
		}
		for i := range 2 { // the body, then GetBody's copy
			b, err := io.ReadAll(req.Body)
			if err != nil || !bytes.Equal(b, body) {
				t.Errorf("body %d read %q, %v; want %q", i, b, err, body)
			}
			if req.Body, err = req.GetBody(); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := newPeer(config.Server{URL: "http://exa mple.com/mcp?token=5ecret"}, &ClientOptions{}, config.TransportHTTP)
	if _, err := p.newRequest(ctx, http.MethodPost, p.rawURL, nil, "", ""); err == nil || strings.Contains(err.Error(), "5ecret") {
		t.Errorf("a URL that does not parse: %v", err)
	}
}

// TestNewPost: a POST carries our headers and the configured ones, the
// session's, the client's that forward_headers names (never over ours or
// the configured ones) and the call's trace context (never a configured
// or forwarded one), in a header of its own.
func TestNewPost(t *testing.T) {
	srv := config.Server{
		Name: "fake", Transport: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp", APIKey: testAPIKey,
		Headers:        map[string]string{"X-Test": testHeaderValue, "traceparent": "configured", "Accept": "text/plain"},
		ForwardHeaders: []string{"X-Tenant", "X-Test", "Tracestate"},
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	header := func(extra ...string) http.Header {
		h := http.Header{
			"Authorization": {"Bearer " + testAPIKey},
			"X-Test":        {testHeaderValue},
			"Content-Type":  {"application/json"},
			"Accept":        {"application/json, text/event-stream"},
		}
		for i := 0; i < len(extra); i += 2 {
			h[extra[i]] = []string{extra[i+1]}
		}
		return h
	}
	tests := []struct {
		name         string
		ctx          context.Context
		sid, version string
		client       http.Header
		want         http.Header
	}{
		{"initialize", context.Background(), "", "", nil, header()},
		{"in a session", context.Background(), "s1", "2025-11-25", nil,
			header("Mcp-Session-Id", "s1", "Mcp-Protocol-Version", "2025-11-25")},
		{"traced", traced, "s1", "2025-11-25", nil,
			header("Mcp-Session-Id", "s1", "Mcp-Protocol-Version", "2025-11-25", "Traceparent", "00-01000000000000000000000000000000-0200000000000000-01")},
		{"forwarding", context.Background(), "s1", "2025-11-25",
			http.Header{"X-Tenant": {"acme"}, "X-Other": {"o"}, "X-Test": {"client's"}, "Tracestate": {"client=1"}, "Mcp-Session-Id": {"client's"}},
			header("Mcp-Session-Id", "s1", "Mcp-Protocol-Version", "2025-11-25", "X-Tenant", "acme")},
	}
	tr := newHTTPTransport(srv, &ClientOptions{}).(*httpTransport)
	defer tr.endLife()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rctx := context.Background()
			req, err := tr.newPost(tt.ctx, rctx, tr.rawURL, []byte(`{}`), tt.sid, tt.version, tt.client)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, req.Header); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			if req.Method != http.MethodPost || req.Context() != rctx {
				t.Errorf("%s, context kept %v", req.Method, req.Context() == rctx)
			}
			// Each request has a header of its own.
			req.Header["Authorization"][0] = "changed"
			again, err := tr.newPost(tt.ctx, rctx, tr.rawURL, []byte(`{}`), tt.sid, tt.version, tt.client)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, again.Header); diff != "" {
				t.Errorf("the next request's header (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewPost_OneWrite: net/http writes a POST's headers and its body to
// the connection in one write (two would cost two TCP segments a call).
func TestNewPost_OneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	var writes atomic.Int32
	tp := defaultHTTPClient.Transport.(*http.Transport).Clone()
	dial := tp.DialContext
	tp.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}
	t.Cleanup(tp.CloseIdleConnections)
	tr := newHTTPTransport(testServer(config.TransportHTTP, srv.URL), &ClientOptions{HTTPClient: &http.Client{Transport: tp}}).(*httpTransport)
	defer tr.endLife()
	body := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, err := tr.newPost(context.Background(), context.Background(), tr.rawURL, body, "s1", "2025-11-25", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := writes.Load(); n != 1 {
		t.Errorf("the POST took %d writes; want 1", n)
	}
}

// countingConn counts its writes.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
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
			defer tr.endLife()
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
