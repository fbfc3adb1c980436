package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// twoServers starts the demo server over HTTP and a gateway in front of it
// and of a stdio demo server, and waits until both are running.
func twoServers(t testing.TB, env []string, extra string) (*gateway, string) {
	t.Helper()
	httpURL, _ := startDemoHTTP(t, "demo-http")
	g := startGateway(t, env, fmt.Sprintf(`servers:
  - name: local
    transport: stdio
    command: %s
    args: ["-name", "demo-stdio"]
    env: { DEMO_CONFIGURED: "yes" }
  - name: web
    transport: http
    url: %s
%s`, bin("demo-server"), httpURL, extra))
	g.waitState(t, "local", "running")
	g.waitState(t, "web", "running")
	return g, httpURL
}

// legacySession pins the Go SDK client to a 2025-11-25 session, for the
// tests of what only the session era has (input requests relayed to the
// client, log levels, subscriptions, sessions that survive a restart);
// left to its default, the client speaks 2026-07-28 with mcpgw.
var legacySession = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func connect(t testing.TB, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, opts)
	if err != nil {
		t.Fatalf("connecting to %s (version %q): %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolsByName(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestGateway_ToolsThroughRealClient drives the gateway with the official
// Go SDK client at its default version (2026-07-28, sessionless) and
// pinned to 2025-11-25, 2025-06-18 and 2025-03-26, in front of one stdio
// and one HTTP demo server.
func TestGateway_ToolsThroughRealClient(t *testing.T) {
	g, httpURL := twoServers(t, baseEnv(), "")
	direct := toolsByName(t, connect(t, httpURL, "2025-11-25"))
	if len(direct) < 7 {
		t.Fatalf("the demo server lists %d tools directly", len(direct))
	}

	for _, version := range []string{"", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run("version="+version, func(t *testing.T) {
			cs := connect(t, g.URL+"/mcp", version)
			want := "2026-07-28"
			if version != "" {
				want = version
			}
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("negotiated %q, want %q", got, want)
			}
			tools := toolsByName(t, cs)
			if len(tools) != 2*len(direct) {
				t.Errorf("gateway lists %d tools, want %d (both servers)", len(tools), 2*len(direct))
			}
			for name, d := range direct {
				for _, server := range []string{"local", "web"} {
					got := tools["mcp__"+server+"__"+name]
					if got == nil {
						t.Errorf("mcp__%s__%s missing", server, name)
						continue
					}
					if diff := cmp.Diff(d.InputSchema, got.InputSchema); diff != "" {
						t.Errorf("%s inputSchema changed (-direct +gateway):\n%s", got.Name, diff)
					}
					if got.Description != d.Description {
						t.Errorf("%s description changed", got.Name)
					}
					wantOut := d.OutputSchema
					if version == "2025-03-26" {
						wantOut = nil // that revision has no outputSchema
					}
					if diff := cmp.Diff(wantOut, got.OutputSchema); diff != "" {
						t.Errorf("%s outputSchema (-want +gateway):\n%s", got.Name, diff)
					}
				}
			}

			for _, server := range []string{"local", "web"} {
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + server + "__echo", Arguments: map[string]any{"text": "hello " + server}})
				if err != nil {
					t.Fatal(err)
				}
				if got := text(res); got != "hello "+server {
					t.Errorf("echo via %s = %q", server, got)
				}
				res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + server + "__add", Arguments: map[string]any{"a": 2, "b": 3}})
				if err != nil {
					t.Fatal(err)
				}
				if version == "2025-03-26" {
					if res.StructuredContent != nil {
						t.Errorf("a 2025-03-26 client got structuredContent %v", res.StructuredContent)
					}
					if !strings.Contains(text(res), "5") {
						t.Errorf("add text = %q, want the sum", text(res))
					}
				} else if diff := cmp.Diff(map[string]any{"sum": 5.0}, res.StructuredContent); diff != "" {
					t.Errorf("add structuredContent (-want +got):\n%s", diff)
				}
				res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + server + "__fail"})
				if err != nil || !res.IsError {
					t.Errorf("fail = %v, %v; want an isError result", res, err)
				}
				res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + server + "__image"})
				if err != nil {
					t.Fatal(err)
				}
				var img *mcp.ImageContent
				for _, c := range res.Content {
					if ic, ok := c.(*mcp.ImageContent); ok {
						img = ic
					}
				}
				if img == nil || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG")) {
					t.Errorf("image via %s: no PNG image block in %v", server, res.Content)
				}
			}

			_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__web__nope"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != -32602 || !strings.Contains(werr.Message, "mcp__web__nope") {
				t.Errorf("unknown tool: err = %v, want -32602 naming it", err)
			}
		})
	}
}

// TestGateway_ServerKilled kills the stdio server under the gateway in the
// middle of a call: that call fails at once with -31001 naming the server
// and its state, the other server keeps working, the server is restarted,
// and the next call works.
func TestGateway_ServerKilled(t *testing.T) {
	g, _ := twoServers(t, baseEnv(), "")
	cs := connect(t, g.URL+"/mcp", "")
	st := g.status(t, "local")
	if st.PID == 0 {
		t.Fatal("no pid for the stdio server")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__local__slow", Arguments: map[string]any{"seconds": 60}})
		errc <- err
	}()
	// Let the call reach the server. (If the kill came first, the call
	// would fail the same way: the server is down either way.)
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc // never hangs: the call fails when the process dies
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31001 || !strings.Contains(werr.Message, `"local"`) {
		t.Fatalf("the call in flight: err = %v, want -31001 naming the server", err)
	}
	var data struct{ Server, State string }
	if json.Unmarshal(werr.Data, &data); data.Server != "local" || data.State == "" || data.State == "running" {
		t.Errorf("error data = %s, want the server and a state that says it is down", werr.Data)
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__web__echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || text(res) != "still here" {
		t.Fatalf("the other server: %v, %v", res, err)
	}
	// Restarted with a new process; the next call works.
	deadline := time.Now().Add(time.Minute)
	for {
		st2 := g.status(t, "local")
		if st2.State == "running" && st2.PID != st.PID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local was not restarted: %+v", st2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__local__echo", Arguments: map[string]any{"text": "back"}})
	if err != nil || text(res) != "back" {
		t.Fatalf("after the restart: %v, %v", res, err)
	}
}

// rawPost sends one JSON-RPC message to /mcp with headers.
func rawPost(t *testing.T, url, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestGateway_HTTPRules checks Origin, Host, session expiry and DELETE on
// the real binary with raw HTTP.
func TestGateway_HTTPRules(t *testing.T) {
	httpURL, _ := startDemoHTTP(t, "demo-http")
	g := startGateway(t, baseEnv(), fmt.Sprintf("sessions:\n  idle_timeout: 1s\nservers:\n  - name: web\n    transport: http\n    url: %s\n", httpURL))
	mcpURL := g.URL + "/mcp"

	t.Run("foreign origin", func(t *testing.T) {
		resp, _ := rawPost(t, mcpURL, initBody, map[string]string{"Origin": "https://evil.example.com"})
		if resp.StatusCode != 403 {
			t.Errorf("status = %d, want 403", resp.StatusCode)
		}
	})
	t.Run("foreign host", func(t *testing.T) {
		resp, _ := rawPost(t, mcpURL, initBody, map[string]string{"Host": "evil.example.com"})
		if resp.StatusCode != 403 {
			t.Errorf("status = %d, want 403", resp.StatusCode)
		}
	})
	t.Run("own origin", func(t *testing.T) {
		resp, _ := rawPost(t, mcpURL, initBody, map[string]string{"Origin": g.URL})
		if resp.StatusCode != 200 {
			t.Errorf("status = %d, want 200", resp.StatusCode)
		}
	})

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	newSession := func(t *testing.T) string {
		resp, body := rawPost(t, mcpURL, initBody, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || sid == "" {
			t.Fatalf("initialize = %d %s (session %q)", resp.StatusCode, body, sid)
		}
		return sid
	}
	session := func(sid string) map[string]string {
		return map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	}

	t.Run("expired session", func(t *testing.T) {
		sid := newSession(t)
		if resp, body := rawPost(t, mcpURL, list, session(sid)); resp.StatusCode != 200 {
			t.Fatalf("tools/list on a fresh session = %d %s", resp.StatusCode, body)
		}
		// Idle for longer than idle_timeout (1s): the session ends. A
		// request would keep it alive, so wait without one.
		time.Sleep(2500 * time.Millisecond)
		if resp, body := rawPost(t, mcpURL, list, session(sid)); resp.StatusCode != 404 {
			t.Fatalf("tools/list on an expired session = %d %s, want 404", resp.StatusCode, body)
		}
	})

	t.Run("delete", func(t *testing.T) {
		sid := newSession(t)
		req, _ := http.NewRequest("DELETE", mcpURL, nil)
		for k, v := range session(sid) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE = %d", resp.StatusCode)
		}
		if resp, _ := rawPost(t, mcpURL, list, session(sid)); resp.StatusCode != 404 {
			t.Errorf("after DELETE: status = %d, want 404", resp.StatusCode)
		}
	})

	t.Run("no session", func(t *testing.T) {
		resp, body := rawPost(t, mcpURL, list, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "-32600") {
			t.Errorf("tools/list without a session = %d %s, want 400 with -32600", resp.StatusCode, body)
		}
	})
}

// TestGateway_StdioEnvironment checks that a stdio child sees none of the
// gateway's environment variables, only PATH, HOME, TMPDIR, LANG and its
// configured env.
func TestGateway_StdioEnvironment(t *testing.T) {
	const secret = "MCPGW_E2E_GATEWAY_SECRET"
	g, _ := twoServers(t, baseEnv(secret+"=do-not-leak", "LANG=C.UTF-8"), "")
	cs := connect(t, g.URL+"/mcp", "")
	tests := []struct {
		name string
		want string
	}{
		{secret, "unset"},
		{"PATH", "set"},
		{"HOME", "set"},
		{"LANG", "set"},
		{"DEMO_CONFIGURED", "set"},
	}
	for _, tt := range tests {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__local__env", Arguments: map[string]any{"name": tt.name}})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(res); !strings.Contains(got, tt.want) || (tt.want == "set" && strings.Contains(got, "unset")) {
			t.Errorf("env %s in the stdio child: %q, want %s", tt.name, got, tt.want)
		}
	}
	if strings.Contains(g.Stderr(), "do-not-leak") {
		t.Error("the secret value appears in the gateway's log")
	}
}

// TestToolsCall_LargeResultsConcurrently sends calls with large, distinct
// arguments over several sessions at once through a stdio server, which
// echoes them. mcpgw relays a large stdio answer in the buffer it read it
// into and reuses that buffer once the answer is written: a buffer shared
// between calls shows here as one call's answer holding another's bytes.
// (A buffer given back a moment too early rarely shows end to end; the
// legacy edge's tests catch that by scribbling over what is given back.)
func TestToolsCall_LargeResultsConcurrently(t *testing.T) {
	g := startGateway(t, baseEnv(), fmt.Sprintf(`servers:
  - name: local
    transport: stdio
    command: %s
`, bin("demo-server")))
	g.waitState(t, "local", "running")
	const sessions, calls = 6, 8
	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls)
	for s := range sessions {
		cs := connect(t, g.URL+"/mcp", "2025-11-25")
		wg.Go(func() {
			for i := range calls {
				// From under the pool's 4 KiB to over its 256 KiB.
				size := []int{3 << 10, 5 << 10, 64 << 10, 300 << 10}[(s+i)%4] + s*7 + i
				arg := strings.Repeat(string(rune('a'+s)), size/2) + strings.Repeat(string(rune('A'+i)), size-size/2)
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__local__echo", Arguments: map[string]any{"text": arg}})
				switch {
				case err != nil:
					errs <- fmt.Errorf("session %d call %d: %v", s, i, err)
				case res.IsError || text(res) != arg:
					errs <- fmt.Errorf("session %d call %d: the answer (%d bytes, starting %.20q) is not its argument (%d bytes)", s, i, len(text(res)), text(res), size)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
