package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildModern builds, once, the binaries of the modern-upstream tests
// into binDir: the go-sdk's conformance everything-server (from the
// module cache: go-sdk is in go.mod) and fixtures/modernserver.
var buildModern = sync.OnceValues(func() (string, error) {
	args := []string{"build", "-o", binDir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server", "./fixtures/modernserver")
	out, err := exec.Command("go", args...).CombinedOutput()
	return string(out), err
})

func modernBins(t *testing.T) {
	t.Helper()
	if out, err := buildModern(); err != nil {
		t.Fatalf("building everything-server and modernserver: %v\n%s", err, out)
	}
}

// startEverythingHTTP runs the everything-server over streamable HTTP,
// stateless (2026-07-28 only) or stateful (legacy only), and returns its
// URL once it accepts connections.
func startEverythingHTTP(t *testing.T, stateless bool) string {
	t.Helper()
	// The server takes an address, not a listener: find a free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin("everything-server"), "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	cmd.Env = baseEnv()
	p := startCmd(t, "everything-server", cmd)
	p.waitLine(t, "the everything-server's listening line", func(l string) string {
		if strings.Contains(l, "listening at") {
			return l
		}
		return ""
	})
	// It logs before it listens.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server does not accept on %s: %v\n%s", addr, err, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestModernUpstream runs mcpgw in front of 2026-07-28 servers (the
// everything-server over stdio and stateless HTTP, and modernserver,
// whose tool list changes) found by protocol auto, beside legacy ones (a
// stateful everything-server, and the stdio one pinned to protocol
// legacy), and drives them all with a legacy (2025-11-25) go-sdk client.
func TestModernUpstream(t *testing.T) {
	modernBins(t)
	statelessURL := startEverythingHTTP(t, true)
	statefulURL := startEverythingHTTP(t, false)
	dyn := start(t, baseEnv(), "modernserver")
	dynURL := dyn.waitLine(t, "modernserver's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	g := startGateway(t, baseEnv(), fmt.Sprintf(`list_changed_debounce: 100ms
resources:
  namespace: always
servers:
  - name: ev-stdio
    transport: stdio
    command: %[1]s
    protocol: auto
  - name: ev-http
    transport: http
    url: %[2]s
    protocol: auto
  - name: ev-stateful
    transport: http
    url: %[3]s
  - name: dyn
    transport: http
    url: %[4]s
  - name: ev-legacy
    transport: stdio
    command: %[1]s
    protocol: legacy
`, bin("everything-server"), statelessURL, statefulURL, dynURL))

	wantEra := map[string]string{"ev-stdio": "modern", "ev-http": "modern", "dyn": "modern", "ev-stateful": "legacy", "ev-legacy": "legacy"}
	for name, era := range wantEra {
		g.waitState(t, name, "running")
		var st struct {
			Era             string `json:"era"`
			ProtocolVersion string `json:"protocol_version"`
		}
		g.adminGet(t, "/admin/servers/"+name, &st)
		want := "2025-11-25"
		if era == "modern" {
			want = "2026-07-28"
		}
		if st.Era != era || st.ProtocolVersion != want {
			t.Errorf("server %s: era %q, protocol_version %q; want %q, %q", name, st.Era, st.ProtocolVersion, era, want)
		}
	}
	var all struct {
		Servers []struct {
			Name string `json:"name"`
			Era  string `json:"era"`
		} `json:"servers"`
	}
	g.adminGet(t, "/admin/servers", &all)
	for _, s := range all.Servers {
		if s.Era != wantEra[s.Name] {
			t.Errorf("GET /admin/servers: %s has era %q, want %q", s.Name, s.Era, wantEra[s.Name])
		}
	}

	changed := make(chan struct{}, 16)
	updated := make(chan string, 16)
	var pmu sync.Mutex
	progress := map[any]int{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-legacy", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			pmu.Lock()
			progress[req.Params.ProgressToken]++
			pmu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	})
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Fatalf("the client negotiated %q", got)
	}

	resources, err := cs.ListResources(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	static := map[string]string{} // server → exposed URI of its static-text
	watched := ""
	for _, r := range resources.Resources {
		for server := range wantEra {
			if r.Name == "static-text" && strings.Contains(r.URI, server) && server != "dyn" {
				if prev, ok := static[server]; !ok || len(r.URI) < len(prev) {
					static[server] = r.URI
				}
			}
		}
		if r.Name == "watched-resource" && strings.Contains(r.URI, "ev-stdio") && !strings.Contains(r.URI, "ev-stateful") {
			watched = r.URI
		}
	}

	for _, server := range []string{"ev-stdio", "ev-http", "ev-stateful", "ev-legacy"} {
		t.Run(server, func(t *testing.T) {
			tool := func(name string) string { return "mcp__" + server + "__" + name }
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool("test_simple_text")})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("test_simple_text: %v, %v", res, err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "simple text") {
				t.Errorf("test_simple_text content = %#v", res.Content[0])
			}

			tok := "progress-" + server
			params := &mcp.CallToolParams{Name: tool("test_tool_with_progress")}
			params.SetProgressToken(tok)
			if res, err := cs.CallTool(ctxT(t), params); err != nil || res.IsError {
				t.Fatalf("test_tool_with_progress: %v, %v", res, err)
			}
			pmu.Lock()
			n := progress[tok]
			pmu.Unlock()
			if n == 0 {
				t.Errorf("no progress notification with token %q before the result", tok)
			}

			pr, err := cs.GetPrompt(ctxT(t), &mcp.GetPromptParams{Name: tool("test_prompt_with_arguments"), Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
			if err != nil || len(pr.Messages) == 0 {
				t.Fatalf("prompts/get: %v, %v", pr, err)
			}

			uri, ok := static[server]
			if !ok {
				t.Fatalf("no static-text resource of %s listed", server)
			}
			rr, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(rr.Contents) == 0 || !strings.Contains(rr.Contents[0].Text, "static text resource") {
				t.Fatalf("resources/read %s: %v, %v", uri, rr, err)
			}

			cr, err := cs.Complete(ctxT(t), &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: tool("test_prompt_with_arguments")},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "x"},
			})
			if err != nil || cr == nil {
				t.Fatalf("completion/complete: %v, %v", cr, err)
			}
		})
	}

	// A resource of a modern server: the subscription becomes part of
	// the gateway's listen filter, and the server's updates come back.
	if watched == "" {
		t.Fatal("no watched-resource of ev-stdio listed")
	}
	if err := cs.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: watched}); err != nil {
		t.Fatalf("subscribing to %s: %v", watched, err)
	}
	select {
	case got := <-updated:
		if got != watched {
			t.Errorf("resources/updated for %q, want %q", got, watched)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no notifications/resources/updated for %s within 30s", watched)
	}

	// Tool list changes of modern servers, over HTTP (modernserver) and
	// stdio (the everything-server), come on their listen streams and
	// reach the legacy client on its GET stream.
	quiet := func() {
		for {
			select {
			case <-changed:
			case <-time.After(time.Second):
				return
			}
		}
	}
	for _, c := range []struct{ server, trigger, args, fresh string }{
		{"dyn", "add_tool", "fresh_tool", "fresh_tool"},
		{"ev-stdio", "test_trigger_tool_change", "", "__transient_tool_for_list_changed"},
	} {
		exposed := "mcp__" + c.server + "__" + c.fresh
		if toolsByName(t, cs)[exposed] != nil {
			t.Fatalf("%s is listed before it is added", exposed)
		}
		quiet()
		var args any
		if c.args != "" {
			args = map[string]any{"name": c.args}
		}
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + c.server + "__" + c.trigger, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s on %s: %v, %v", c.trigger, c.server, res, err)
		}
		deadline := time.After(30 * time.Second)
		for found := false; !found; {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("no notifications/tools/list_changed showing %s within 30s", exposed)
			}
			found = toolsByName(t, cs)[exposed] != nil
		}
		if res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed}); err != nil || res.IsError {
			t.Errorf("calling %s: %v, %v", exposed, res, err)
		}
	}
}
