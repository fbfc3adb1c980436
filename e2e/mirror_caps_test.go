package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk everything-server's test_missing_capability reads the
// sampling capability of the session it runs on (a legacy one here) and
// answers -32021 when it is missing, or this text when it is there.
const (
	missingCapTool     = "test_missing_capability"
	missingCapExecuted = "Client declared the sampling capability; tool executed."
	missingCapCode     = -32021
)

// TestMirrorCaps checks that a legacy HTTP upstream learns the calling
// client's own capabilities: mcpgw declares sampling to its shared
// upstream session, but a client that did not declare sampling, legacy or
// modern, must get the tool's refusal, and one that did gets it executed.
func TestMirrorCaps(t *testing.T) {
	modernBins(t)
	url := startEverythingHTTP(t, false)
	g := startGateway(t, baseEnv(), fmt.Sprintf(`naming:
  prefix_mode: never
servers:
  - name: ev
    transport: http
    url: %s
    protocol: legacy
`, url))
	g.waitState(t, "ev", "running")

	t.Run("legacy client", func(t *testing.T) {
		tests := []struct {
			name     string
			sampling bool
		}{
			{name: "without sampling"},
			{name: "with sampling", sampling: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				opts := &mcp.ClientOptions{}
				if tt.sampling {
					// go-sdk declares sampling exactly when a handler is set.
					opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						return nil, errors.New("not asked in this test")
					}
				}
				client := mcp.NewClient(&mcp.Implementation{Name: "e2e-mirror", Version: "1"}, opts)
				cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: missingCapTool})
				if tt.sampling {
					if err != nil || res.IsError || text(res) != missingCapExecuted {
						t.Fatalf("with sampling declared: %v, %v; want the tool executed\n%s", res, err, g.Stderr())
					}
					return
				}
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != missingCapCode {
					got := "no result"
					if res != nil {
						got = text(res)
					}
					t.Fatalf("without sampling: %s, error %v; want JSON-RPC error %d\n%s", got, err, missingCapCode, g.Stderr())
				}
				if !strings.Contains(string(werr.Data), `"sampling"`) {
					t.Errorf("the -32021 error's data = %s, want requiredCapabilities naming sampling", werr.Data)
				}
			})
		}
	})

	t.Run("modern client", func(t *testing.T) {
		tests := []struct {
			name string
			caps string
		}{
			{name: "without sampling", caps: `{}`},
			{name: "elicitation only", caps: `{"elicitation":{"form":{}}}`},
			{name: "with sampling", caps: `{"sampling":{}}`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{},"_meta":{`+
					`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s,`+
					`"io.modelcontextprotocol/clientInfo":{"name":"e2e-raw","version":"1"}}}}`, missingCapTool, tt.caps)
				resp, raw := rawPost(t, g.URL+"/mcp", body, map[string]string{
					"MCP-Protocol-Version": "2026-07-28",
					"Mcp-Method":           "tools/call",
					"Mcp-Name":             missingCapTool,
				})
				msg := jsonRPCResponse(t, resp.Header.Get("Content-Type"), raw)
				if strings.Contains(tt.caps, "sampling") {
					if resp.StatusCode != 200 || msg.Error != nil || !strings.Contains(string(msg.Result), missingCapExecuted) {
						t.Fatalf("with sampling declared: status %d, %s; want the tool executed\n%s", resp.StatusCode, raw, g.Stderr())
					}
					return
				}
				// 2026-07-28 answers -32021 as the whole answer in a 400.
				if resp.StatusCode != 400 || msg.Error == nil || msg.Error.Code != missingCapCode || !strings.Contains(string(msg.Error.Data), `"sampling"`) {
					t.Fatalf("without sampling: status %d, %s; want 400 with JSON-RPC error %d naming sampling\n%s", resp.StatusCode, raw, missingCapCode, g.Stderr())
				}
			})
		}
	})

	// One upstream session per distinct set the clients lacked something
	// of: the legacy clients' roots, and roots with sampling (go-sdk
	// declares no elicitation without a handler), the modern {},
	// form elicitation, and sampling.
	var st struct {
		MirroredSessions int `json:"mirrored_sessions"`
	}
	g.adminGet(t, "/admin/servers/ev", &st)
	if st.MirroredSessions != 5 {
		t.Errorf("mirrored_sessions = %d, want 5", st.MirroredSessions)
	}
}

// rpcResponse is the part of a JSON-RPC response the test reads.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// jsonRPCResponse returns the response in body: a JSON body, or the event
// of an event stream that carries a response.
func jsonRPCResponse(t *testing.T, contentType, body string) rpcResponse {
	t.Helper()
	var datas []string
	if strings.HasPrefix(contentType, "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				datas = append(datas, strings.TrimSpace(d))
			}
		}
	} else {
		datas = []string{body}
	}
	for _, d := range datas {
		var msg rpcResponse
		if json.Unmarshal([]byte(d), &msg) == nil && len(msg.ID) > 0 && (msg.Result != nil || msg.Error != nil) {
			return msg
		}
	}
	t.Fatalf("no JSON-RPC response in the %s body: %s", contentType, body)
	return rpcResponse{}
}
