package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/telemetry"
)

// testTelemetry returns telemetry as serve builds it from an empty
// environment: no span export, metrics on their own registry.
func testTelemetry(t *testing.T) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(t.Context(), telemetry.Options{ServiceVersion: "test"})
	if err != nil {
		t.Fatalf("telemetry.Setup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tel.Shutdown(ctx)
	})
	return tel
}

// recordingTelemetry is testTelemetry with every span recorded in rec.
func recordingTelemetry(t *testing.T) (*telemetry.Telemetry, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tel := testTelemetry(t)
	tel.TracerProvider = tp
	return tel, rec
}

// spanAttrs returns the span's attributes named by keys, as strings.
func spanAttrs(s sdktrace.ReadOnlySpan, keys ...attribute.Key) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		for _, k := range keys {
			if kv.Key == k {
				out[string(k)] = kv.Value.Emit()
			}
		}
	}
	return out
}

// findSpan returns the ended span named name, failing the test if there
// is not exactly one.
func findSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q; spans: %q", len(found), name, names)
	}
	return found[0]
}

// TestSandwich_Tracing follows one trace from a client through the
// gateway to an HTTP upstream: the server span continues the client's
// traceparent (header, or params._meta which wins), the upstream call's
// client span is its child, and the upstream receives the client span's
// context in its traceparent header.
func TestSandwich_Tracing(t *testing.T) {
	const (
		clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerParent = "00f067aa0ba902b7"
		metaTrace    = "0af7651916cd43dd8448eb211c80319c"
		metaParent   = "b7ad6b7169203331"
	)
	f := newFake(t, fakeOptions{})
	tel, rec := recordingTelemetry(t)
	g := startGatewayWith(t, gatewayYAML(t, httpServer("up", f.url)), tel)
	g.waitRunning(t, "up")

	c := &client{t: t, url: g.url + "/mcp", header: http.Header{}}
	c.header.Set("traceparent", fmt.Sprintf("00-%s-%s-01", clientTrace, headerParent))
	resp := c.post(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tracing","version":"1.0"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.sid, c.version = resp.Header.Get("Mcp-Session-Id"), "2025-11-25"
	if c.sid == "" {
		t.Fatalf("initialize: %d, no session", resp.StatusCode)
	}

	tests := []struct {
		name             string
		params           string
		wantTrace        string
		wantParent       string
		wantUpstreamMeta bool // the forwarded params carry our traceparent
	}{
		{
			name:       "traceparent header",
			params:     `{"name":"mcp__up__echo","arguments":{"text":"hi"}}`,
			wantTrace:  clientTrace,
			wantParent: headerParent,
		},
		{
			name:             "params._meta.traceparent wins over the header",
			params:           fmt.Sprintf(`{"name":"mcp__up__echo","arguments":{"text":"hi"},"_meta":{"traceparent":"00-%s-%s-01"}}`, metaTrace, metaParent),
			wantTrace:        metaTrace,
			wantParent:       metaParent,
			wantUpstreamMeta: true,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			id := fmt.Sprintf("call-%d", i)
			evs := c.postCall(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":` + tt.params + `}`)
			if got := describe(t, evs); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "result") {
				t.Fatalf("tools/call answered %q", got)
			}
			call := f.lastPost(t, "tools/call")

			// The server span is ended once the answer is written; wait
			// for the recorder to see it.
			waitFor(t, "the server span", func() bool {
				for _, s := range rec.Ended() {
					if s.SpanKind() == trace.SpanKindServer {
						return true
					}
				}
				return false
			})
			server := findSpan(t, rec, "tools/call mcp__up__echo")
			upstreamSpan := findSpan(t, rec, "tools/call echo")

			if server.SpanKind() != trace.SpanKindServer || upstreamSpan.SpanKind() != trace.SpanKindClient {
				t.Errorf("kinds: server span %v, upstream span %v", server.SpanKind(), upstreamSpan.SpanKind())
			}
			if got := server.SpanContext().TraceID().String(); got != tt.wantTrace {
				t.Errorf("server span trace %s, want the client's %s", got, tt.wantTrace)
			}
			if got := server.Parent().SpanID().String(); got != tt.wantParent || !server.Parent().IsRemote() {
				t.Errorf("server span parent %s (remote %v), want the client's %s", got, server.Parent().IsRemote(), tt.wantParent)
			}
			if upstreamSpan.Parent().SpanID() != server.SpanContext().SpanID() || upstreamSpan.SpanContext().TraceID() != server.SpanContext().TraceID() {
				t.Errorf("upstream span parent %s in trace %s, want the server span %s in %s",
					upstreamSpan.Parent().SpanID(), upstreamSpan.SpanContext().TraceID(), server.SpanContext().SpanID(), server.SpanContext().TraceID())
			}

			wantServer := map[string]string{
				"mcp.method.name":       "tools/call",
				"gen_ai.tool.name":      "mcp__up__echo",
				"gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version":  "2025-11-25",
				"mcpgw.server":          "up",
				"jsonrpc.request.id":    id,
				"mcpgw.outcome":         "ok",
			}
			got := spanAttrs(server, telemetry.MethodName, telemetry.ToolName, telemetry.OperationName, telemetry.ProtocolVersion,
				telemetry.Server, telemetry.RequestID, telemetry.Outcome, telemetry.ErrorType)
			if diff := cmp.Diff(wantServer, got); diff != "" {
				t.Errorf("server span attributes (-want +got):\n%s", diff)
			}
			// The session's id as logs and /admin/sessions give it, never
			// the Mcp-Session-Id token itself.
			ids := map[string]bool{}
			for _, si := range g.p.edge.Sessions() {
				ids[si.ID] = true
			}
			if sid := spanAttrs(server, telemetry.SessionID)["mcp.session.id"]; !ids[sid] || sid == c.sid {
				t.Errorf("server span mcp.session.id %q is not a session's id (sessions %v)", sid, ids)
			}
			wantUp := map[string]string{
				"mcp.method.name":   "tools/call",
				"gen_ai.tool.name":  "echo",
				"mcpgw.server":      "up",
				"network.transport": "tcp",
				"mcp.session.id":    call.session(),
			}
			got = spanAttrs(upstreamSpan, telemetry.MethodName, telemetry.ToolName, telemetry.Server, telemetry.NetworkTransport, telemetry.SessionID)
			if diff := cmp.Diff(wantUp, got); diff != "" {
				t.Errorf("upstream span attributes (-want +got):\n%s", diff)
			}

			want := fmt.Sprintf("00-%s-%s-01", tt.wantTrace, upstreamSpan.SpanContext().SpanID())
			if got := call.Header.Get("traceparent"); got != want {
				t.Errorf("upstream traceparent header %q, want %q (the upstream span)", got, want)
			}
			meta := string(call.Params)
			if tt.wantUpstreamMeta != strings.Contains(meta, `"traceparent":"`+want+`"`) {
				t.Errorf("forwarded params %s: our traceparent in _meta %v, want %v", meta, !tt.wantUpstreamMeta, tt.wantUpstreamMeta)
			}
			if strings.Contains(meta, metaParent) {
				t.Errorf("forwarded params %s still carry the client's own traceparent", meta)
			}
		})
	}

	// initialize got its server span too, continuing the header's trace.
	t.Run("initialize", func(t *testing.T) {
		// rec was reset by the subtests; start a second session.
		rec.Reset()
		resp := (&client{t: t, url: g.url + "/mcp", header: c.header}).post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tracing","version":"1.0"}}}`)
		resp.Body.Close()
		init := findSpan(t, rec, "initialize")
		if got := init.Parent().SpanID().String(); got != headerParent {
			t.Errorf("initialize span parent %s, want %s", got, headerParent)
		}
		got := spanAttrs(init, telemetry.ProtocolVersion, telemetry.Outcome)
		if diff := cmp.Diff(map[string]string{"mcp.protocol.version": "2025-06-18", "mcpgw.outcome": "ok"}, got); diff != "" {
			t.Errorf("initialize span attributes (-want +got):\n%s", diff)
		}
	})
}
