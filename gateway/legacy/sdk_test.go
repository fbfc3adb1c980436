package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKClient runs the official go-sdk client (v1.8.0) against the
// handler: its default Connect (a 2026-07-28 server/discover probe, then
// initialize on our 400) and Connect pinned to each legacy version.
func TestSDKClient(t *testing.T) {
	tests := []struct {
		name, pin, want string
	}{
		{"default", "", V20251125},
		{V20251125, V20251125, V20251125},
		{V20250618, V20250618, V20250618},
		{V20250326, V20250326, V20250326},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1.0"}, nil)
			var opts *mcp.ClientSessionOptions
			if tt.pin != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: tt.pin}
			}
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url}, opts)
			if err != nil {
				t.Fatalf("Connect: %v (requests: %q)", err, e.requests())
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tt.want {
				t.Fatalf("negotiated %q, want %q", got, tt.want)
			}
			if tt.pin == "" {
				log := e.requests()
				if len(log) < 2 || log[0] != "POST server/discover 400" || log[1] != "POST initialize 200" {
					t.Errorf("requests %q, want the discover probe refused, then initialize", log)
				}
			}

			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			var names []string
			var echo *mcp.Tool
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				if tool.Name == "mcp__a__echo" {
					echo = tool
				}
			}
			if diff := cmp.Diff([]string{"mcp__a__ask", "mcp__a__block", "mcp__a__echo", "mcp__a__link", "mcp__a__notify"}, names); diff != "" {
				t.Fatalf("tools (-want +got):\n%s", diff)
			}
			var wantSchema any
			json.Unmarshal([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false,"$defs":{"x":{"type":"number"}}}`), &wantSchema)
			if diff := cmp.Diff(wantSchema, echo.InputSchema); diff != "" {
				t.Errorf("inputSchema (-want +got):\n%s", diff)
			}
			old := tt.want == V20250326
			if (echo.OutputSchema == nil) != old || (echo.Title == "") != old || (len(echo.Icons) == 0) != (tt.want != V20251125) {
				t.Errorf("echo tool for %s: outputSchema %v, title %q, icons %v", tt.want, echo.OutputSchema, echo.Title, echo.Icons)
			}

			call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__a__echo", Arguments: map[string]any{"text": "héllo <&>"}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if len(call.Content) != 1 || call.Content[0].(*mcp.TextContent).Text != "héllo <&>" || call.IsError {
				t.Errorf("CallTool result %+v", call)
			}
			if (call.StructuredContent == nil) != old {
				t.Errorf("structuredContent %v for %s", call.StructuredContent, tt.want)
			}

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__a__nope", Arguments: map[string]any{}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "mcp__a__nope") {
				t.Errorf("unknown tool: %v, want -32602 naming it", err)
			}

			if err := cs.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if !slices.Contains(e.requests(), "DELETE 200") {
				t.Errorf("no DELETE in %q", e.requests())
			}
			waitFor(t, "the session to end", func() bool { return len(e.h.Sessions()) == 0 })
		})
	}
}

// TestSDKClientInput runs the go-sdk client (v1.8.0) with an elicitation
// handler, a sampling handler and roots against a server that asks for
// each during a tool call: the requests reach the client on the call's
// stream, and its answers reach the server, on every legacy version.
func TestSDKClientInput(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var mu sync.Mutex
			var asked []string // what the client's handlers were asked
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1.0"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, "elicit: "+req.Params.Message)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
				},
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, "sample: "+req.Params.Messages[0].Content.(*mcp.TextContent).Text)
					return &mcp.CreateMessageResult{Role: "assistant", Content: &mcp.TextContent{Text: "hi"}, Model: "m", StopReason: "endTurn"}, nil
				},
			})
			client.AddRoots(&mcp.Root{URI: "file:///home/ada", Name: "home"})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer cs.Close()

			tests := []struct {
				method string
				params json.RawMessage
				want   string // what the server got, as JSON
			}{
				{"elicitation/create", json.RawMessage(elicitForm), `{"action":"accept","content":{"name":"Ada"}}`},
				{"sampling/createMessage", json.RawMessage(sampleParams), `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","stopReason":"endTurn"}`},
				{"roots/list", nil, `{"roots":[{"uri":"file:///home/ada","name":"home"}]}`},
			}
			for _, tt := range tests {
				args := map[string]any{"method": tt.method}
				if tt.params != nil {
					args["params"] = tt.params
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__a__ask", Arguments: args})
				if err != nil {
					t.Fatalf("%s: CallTool: %v", tt.method, err)
				}
				if len(res.Content) != 1 {
					t.Fatalf("%s: result %+v", tt.method, res)
				}
				var got, want any
				json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got)
				json.Unmarshal([]byte(tt.want), &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: the server got (-want +got):\n%s", tt.method, diff)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{"elicit: Your name?", "sample: Say hi"}, asked); diff != "" {
				t.Errorf("client handlers (-want +got):\n%s", diff)
			}
		})
	}
}
