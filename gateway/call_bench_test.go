package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/mediastore"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// benchResult returns a tools/call result of one text block of about
// size bytes, with the newlines and quotes of a file's text.
func benchResult(size int) json.RawMessage {
	var text strings.Builder
	for text.Len() < size {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, _ := json.Marshal(text.String()[:size])
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(t) + `}],"isError":false}`)
}

// callServers are 100 servers × 100 tools, as manyServers, where server
// "files" answers every call with small and server "big" with big.
func callServers(small, big json.RawMessage) *upstreamtest.Manager {
	m := manyServers(98, 100)
	answer := func(res json.RawMessage) func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
		return func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
			return res, nil
		}
	}
	for _, s := range []*upstreamtest.Server{{Name: "files", Handle: answer(small)}, {Name: "big", Handle: answer(big)}} {
		for j := range 100 {
			s.Tools = append(s.Tools, json.RawMessage(fmt.Sprintf(
				`{"name":"tool_%03d","description":"Does thing %d.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}}`, j, j)))
		}
		m.Set(s)
	}
	return m
}

// BenchmarkHandle_ToolsCall is the core's per-call cost of a relayed
// tools/call (name lookup in 10,000 tools, ACL without rules, params
// rewrite, call timer and hooks, forward to an in-memory upstream,
// exposure of the result's URIs and media, the server span and metrics),
// with a small and a 64 KiB result:
//
//   - bare: no media store, the global (no-op) telemetry providers, no
//     progress token.
//   - production: as cmd/mcpgw sets the core up (a media store in link
//     mode with its default threshold, a metrics SDK provider), and a
//     client that sent a progress token and takes notifications.
func BenchmarkHandle_ToolsCall(b *testing.B) {
	ups := callServers(benchResult(100), benchResult(64<<10))
	for _, bc := range []struct {
		name, server       string
		production, modern bool
	}{
		{"small/bare", "files", false, false},
		{"small/production", "files", true, false},
		{"small/2026", "files", false, true},
		{"64KiB/bare", "big", false, false},
		{"64KiB/production", "big", true, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{Upstreams: ups}
			tmpl := Request{
				Method:    "tools/call",
				Params:    json.RawMessage(`{"name":"mcp__` + bc.server + `__tool_007","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200}}`),
				Principal: Anonymous,
				Session:   "0123456789abcdef0123456789abcdef",
				ID:        "17",
				Client:    Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{}`)},
			}
			if bc.modern {
				tmpl.Session = ""
				tmpl.Client = Client{ProtocolVersion: "2026-07-28", Capabilities: json.RawMessage(`{}`)}
			}
			if bc.production {
				ms, err := mediastore.New(mediastore.Options{Dir: b.TempDir(), Secret: []byte(strings.Repeat("m", 32))})
				if err != nil {
					b.Fatal(err)
				}
				defer ms.Close()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				opts.Media = ms
				opts.MediaConfig = config.Media{Mode: config.MediaLink, MinBytes: config.DefaultMediaMinBytes}
				opts.PublicURL = "https://gw.example"
				opts.MeterProvider = mp
				tmpl.Params = json.RawMessage(`{"name":"mcp__` + bc.server + `__tool_007","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200},"_meta":{"progressToken":"p-17"}}`)
				tmpl.Notify = func(string, json.RawMessage) {}
				tmpl.SessionNotify = func(string, json.RawMessage) {}
			}
			s, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			req := tmpl
			res, err := s.Handle(ctx, &req)
			if err != nil || res.Type != ResultComplete || !strings.Contains(string(res.Body), `" of the report`) {
				b.Fatalf("Handle = %+v, %v", res, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				req := tmpl // the edge makes a Request per call
				if _, err := s.Handle(ctx, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
