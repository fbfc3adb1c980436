package e2e

import (
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolsCall measures a small tools/call (echo) with the official Go
// SDK client, direct to the demo server and through mcpgw to the same kind
// of server, over HTTP and over stdio. It reports the p50 and p99 latency of
// the calls it made. Run it with:
//
//	go test ./e2e -run '^$' -bench ToolsCall -benchtime 2000x
func BenchmarkToolsCall(b *testing.B) {
	httpURL, _ := startDemoHTTP(b, "bench-http")
	g := startGateway(b, baseEnv(), fmt.Sprintf(`servers:
  - name: local
    transport: stdio
    command: %s
  - name: web
    transport: http
    url: %s
`, bin("demo-server"), httpURL))
	g.waitState(b, "local", "running")
	g.waitState(b, "web", "running")

	stdioDirect := func(b *testing.B) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cmd := exec.Command(bin("demo-server"))
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		b.Cleanup(func() {
			if b.Failed() {
				b.Logf("demo-server stderr:\n%s", stderr)
			}
		})
		cs, err := client.Connect(ctxT(b), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	cases := []struct {
		name    string
		session func(b *testing.B) *mcp.ClientSession
		tool    string
	}{
		{"http/direct", func(b *testing.B) *mcp.ClientSession { return connect(b, httpURL, "2025-11-25") }, "echo"},
		{"http/mcpgw", func(b *testing.B) *mcp.ClientSession { return connect(b, g.URL+"/mcp", "2025-11-25") }, "mcp__web__echo"},
		{"stdio/direct", stdioDirect, "echo"},
		{"stdio/mcpgw", func(b *testing.B) *mcp.ClientSession { return connect(b, g.URL+"/mcp", "2025-11-25") }, "mcp__local__echo"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cs := c.session(b)
			params := &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": "hello"}}
			ctx := ctxT(b)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				res, err := cs.CallTool(ctx, params)
				lat = append(lat, time.Since(t0))
				if err != nil || res.IsError || text(res) != "hello" {
					b.Fatalf("call: %v %v", res, err)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
