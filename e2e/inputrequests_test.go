package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInputRequests_ModernUpstream: the Go SDK's everything-server, spoken
// to in 2026-07-28, asks for input with input_required results. A
// 2026-07-28 client gets them relayed (the gateway seals the server's
// requestState) and answers through its own SDK; for a 2025 client the
// gateway asks it with real elicitation/create and sampling/createMessage
// requests and calls the server again with the answers.
func TestInputRequests_ModernUpstream(t *testing.T) {
	modernBins(t)
	upstreams := []struct{ name, entry string }{
		{"stdio", fmt.Sprintf("    transport: stdio\n    command: %s\n    protocol: modern\n", bin("everything-server"))},
		{"http", fmt.Sprintf("    transport: http\n    url: %s\n    protocol: modern\n", startEverythingHTTP(t, true))},
	}
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			g := startGateway(t, baseEnv(), "naming:\n  prefix_mode: never\nservers:\n  - name: everything\n"+up.entry)
			g.waitState(t, "everything", "running")
			for _, era := range []struct {
				name string
				opts *mcp.ClientSessionOptions
			}{{"2026-07-28 client", nil}, {"2025-11-25 client", legacySession}} {
				t.Run(era.name, func(t *testing.T) {
					var asked recorder
					client := mcp.NewClient(&mcp.Implementation{Name: "e2e-input", Version: "1"}, &mcp.ClientOptions{
						ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
							asked.add("elicit|" + req.Params.Message)
							return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
						},
						CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
							asked.add("sample")
							return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "Paris"}}, nil
						},
					})
					cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", DisableStandaloneSSE: true}, era.opts)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cs.Close() })
					if got, isErr := callText(t, cs, "test_input_required_result_elicitation", nil); got != "Hello, Ada!" || isErr {
						t.Errorf("elicitation round trip: %q (isError %v), want Hello, Ada!", got, isErr)
					}
					if got, isErr := callText(t, cs, "test_input_required_result_sampling", nil); got != "Sampling response: Paris" || isErr {
						t.Errorf("sampling round trip: %q (isError %v), want the client's answer", got, isErr)
					}
					want := []string{"elicit|What is your name?", "sample"}
					if got := asked.all(); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("the client was asked %q, want %q", got, want)
					}
				})
			}
		})
	}
}
