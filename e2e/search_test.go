package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSearch_BothEras: with /mcp?exposure=search, an official Go SDK
// client of either era lists only the gateway's search_tools and
// call_tool; a search finds a tool with its full definition, which joins
// the client's list (notifications/tools/list_changed); the found tool is
// called directly and another through call_tool; a tool the access rules
// hide is never found nor callable; and a server that goes away drops out
// of the results.
func TestSearch_BothEras(t *testing.T) {
	const key = "e2e-search-alice-key"
	demoURL, _ := startDemoHTTP(t, "demo-search")
	g := startGateway(t, baseEnv(), fmt.Sprintf(`list_changed_debounce: 50ms
auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
acl:
  default: allow
  rules:
    - {effect: deny, principals: [alice], tools: ["mcp__local__env"]}
servers:
  - {name: local, transport: stdio, command: %s}
`, hashToken(key), bin("demo-server")))
	g.waitState(t, "local", "running")

	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			web := "web" + strings.ReplaceAll(era[:4], "-", "")
			if status, body := g.adminDo(t, http.MethodPost, "/admin/servers", g.Admin,
				fmt.Sprintf(`{"name":%q,"transport":"http","url":%q}`, web, demoURL)); status != http.StatusCreated {
				t.Fatalf("registering %s: %d %s", web, status, body)
			}
			g.waitState(t, web, "running")

			ce := newClientEvents()
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-search", Version: "1"}, ce.options())
			cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp?exposure=search", HTTPClient: &http.Client{Transport: bearer{key}}},
				&mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })

			if got := toolNames(t, cs); !slices.Equal(got, []string{"mcp__mcpgw__call_tool", "mcp__mcpgw__search_tools"}) {
				t.Fatalf("tools/list in search mode = %v", got)
			}
			search := func(query string) []string {
				t.Helper()
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__mcpgw__search_tools", Arguments: map[string]any{"query": query}})
				if err != nil || res.IsError {
					t.Fatalf("search_tools %q: %v %+v", query, err, res)
				}
				var out struct {
					Tools []struct {
						Name        string `json:"name"`
						InputSchema any    `json:"inputSchema"`
					} `json:"tools"`
				}
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &out); err != nil {
					t.Fatalf("search_tools structured content: %v", err)
				}
				var names []string
				for _, tl := range out.Tools {
					if tl.InputSchema == nil {
						t.Errorf("%s found without its inputSchema", tl.Name)
					}
					names = append(names, tl.Name)
				}
				return names
			}

			ce.drainChanged()
			found := search("fake weather report for a city")
			if len(found) == 0 || found[0] != "mcp__local__weather" {
				t.Fatalf("search found %v, want mcp__local__weather first", found)
			}
			select {
			case <-ce.changed:
			case <-ctxT(t).Done():
				t.Fatal("no notifications/tools/list_changed after the search")
			}
			tools := toolsByName(t, cs)
			if tools["mcp__local__weather"] == nil || tools["mcp__local__weather"].InputSchema == nil {
				t.Fatalf("the found tool is not in the list with its schema: %v", toolNames(t, cs))
			}
			if res := callTool(t, cs, "mcp__local__weather", map[string]any{"city": "Oslo"}); res.IsError {
				t.Fatalf("the found tool called directly: %+v", res)
			}
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__mcpgw__call_tool",
				Arguments: map[string]any{"name": "mcp__local__add", "arguments": map[string]any{"a": 2, "b": 3}}})
			if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "5") {
				t.Fatalf("call_tool add: %v %+v", err, res)
			}

			// The rules hide env from alice: never found, never callable.
			if found := search("whether an environment variable is set"); slices.Contains(found, "mcp__local__env") {
				t.Fatalf("a hidden tool was found: %v", found)
			}
			_, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__mcpgw__call_tool",
				Arguments: map[string]any{"name": "mcp__local__env", "arguments": map[string]any{"name": "HOME"}}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != -31004 {
				t.Fatalf("call_tool of a hidden tool: %v, want -31004", err)
			}

			// A server that goes away drops out of the results.
			if found := search("returns the given text unchanged"); !slices.Contains(found, "mcp__"+web+"__echo") {
				t.Fatalf("search before %s left = %v", web, found)
			}
			if status, body := g.adminDo(t, http.MethodDelete, "/admin/servers/"+web, g.Admin, ""); status != http.StatusNoContent {
				t.Fatalf("deleting %s: %d %s", web, status, body)
			}
			if found := search("returns the given text unchanged"); slices.Contains(found, "mcp__"+web+"__echo") {
				t.Fatalf("search after %s left = %v", web, found)
			}
		})
	}
}
