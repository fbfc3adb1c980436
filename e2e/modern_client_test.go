package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol versions of the two eras.
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// buildEra builds, once, fixtures/eraserver into binDir.
var buildEra = sync.OnceValues(func() (string, error) {
	args := []string{"build", "-o", binDir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./fixtures/eraserver")...).CombinedOutput()
	return string(out), err
})

func eraBins(t *testing.T) {
	t.Helper()
	if out, err := buildEra(); err != nil {
		t.Fatalf("building eraserver: %v\n%s", err, out)
	}
}

// eventLog receives the lines eraservers report with -events.
type eventLog struct {
	addr  string
	lines chan string
}

// listenEvents listens on 127.0.0.1:0 for eraserver reports until the
// test ends.
func listenEvents(t *testing.T) *eventLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &eventLog{addr: ln.Addr().String(), lines: make(chan string, 256)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					e.lines <- sc.Text()
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return e
}

// wait returns once line has been reported, or fails the test after a
// minute. Other lines are kept for later waits.
func (e *eventLog) wait(t *testing.T, line string) {
	t.Helper()
	var other []string
	defer func() {
		for _, l := range other {
			e.lines <- l
		}
	}()
	timeout := time.After(time.Minute)
	for {
		select {
		case l := <-e.lines:
			if l == line {
				return
			}
			other = append(other, l)
		case <-timeout:
			t.Fatalf("eraserver did not report %q within a minute (other reports: %q)", line, other)
		}
	}
}

// startEraHTTP runs eraserver over streamable HTTP, modern (stateless) or
// pinned to the session era, and returns its MCP endpoint URL.
func startEraHTTP(t *testing.T, name string, legacy bool, events string) string {
	t.Helper()
	args := []string{"-http", "127.0.0.1:0", "-name", name}
	if legacy {
		args = append(args, "-legacy")
	}
	if events != "" {
		args = append(args, "-events", events)
	}
	p := start(t, baseEnv(), "eraserver", args...)
	return p.waitLine(t, name+"'s address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
}

// eraUpstream is one upstream of the era tests: an eraserver of an era
// over a transport.
type eraUpstream struct {
	name   string // the server's name in the gateway
	legacy bool
	http   bool
}

var eraUpstreams = []eraUpstream{
	{name: "modern-stdio"},
	{name: "modern-http", http: true},
	{name: "legacy-stdio", legacy: true},
	{name: "legacy-http", legacy: true, http: true},
}

// startEraGateway runs the four eraUpstreams (all protocol auto) and an
// mcpgw in front of them, and waits until each runs in its era.
func startEraGateway(t *testing.T, events string) *gateway {
	t.Helper()
	eraBins(t)
	var cfg strings.Builder
	cfg.WriteString("list_changed_debounce: 100ms\nresources:\n  namespace: always\nservers:\n")
	for _, u := range eraUpstreams {
		if u.http {
			fmt.Fprintf(&cfg, "  - name: %s\n    transport: http\n    url: %s\n    protocol: auto\n", u.name, startEraHTTP(t, u.name, u.legacy, events))
			continue
		}
		args := []string{"-name", u.name, "-events", events}
		if u.legacy {
			args = append(args, "-legacy")
		}
		quoted, _ := json.Marshal(args)
		fmt.Fprintf(&cfg, "  - name: %s\n    transport: stdio\n    command: %s\n    args: %s\n    protocol: auto\n", u.name, bin("eraserver"), quoted)
	}
	g := startGateway(t, baseEnv(), cfg.String())
	for _, u := range eraUpstreams {
		g.waitState(t, u.name, "running")
		var st struct {
			Era             string `json:"era"`
			ProtocolVersion string `json:"protocol_version"`
		}
		g.adminGet(t, "/admin/servers/"+u.name, &st)
		era, version := "modern", modernVersion
		if u.legacy {
			era, version = "legacy", legacyVersion
		}
		if st.Era != era || st.ProtocolVersion != version {
			t.Fatalf("server %s: era %q, protocol_version %q; want %q, %q", u.name, st.Era, st.ProtocolVersion, era, version)
		}
	}
	return g
}

// pngMagic starts every PNG, the eraserver's image among them.
var pngMagic = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// clientEvents collects what a go-sdk client's handlers receive.
type clientEvents struct {
	changed    chan struct{}
	progressed chan struct{}
	mu         sync.Mutex
	progress   map[any][]float64 // progress values by token
}

func newClientEvents() *clientEvents {
	return &clientEvents{changed: make(chan struct{}, 64), progressed: make(chan struct{}, 1), progress: map[any][]float64{}}
}

func (ce *clientEvents) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case ce.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			ce.mu.Lock()
			ce.progress[req.Params.ProgressToken] = append(ce.progress[req.Params.ProgressToken], req.Params.Progress)
			ce.mu.Unlock()
			select {
			case ce.progressed <- struct{}{}:
			default:
			}
		},
	}
}

// drainChanged forgets the list changes received so far, so that a wait
// sees only later ones.
func (ce *clientEvents) drainChanged() {
	for {
		select {
		case <-ce.changed:
		default:
			return
		}
	}
}

func (ce *clientEvents) progressOf(tok string) []float64 {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return slices.Clone(ce.progress[tok])
}

// waitProgress waits until n progress notifications with tok arrived and
// returns their values. The go-sdk client hands notifications to its
// handlers apart from results, so they may come after the call returned;
// their order on the wire is checked on raw HTTP.
func (ce *clientEvents) waitProgress(t *testing.T, tok string, n int) []float64 {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		if got := ce.progressOf(tok); len(got) >= n {
			return got
		}
		select {
		case <-ce.progressed:
		case <-timeout:
			t.Fatalf("%d progress notifications for %q within 30s, want %d", len(ce.progressOf(tok)), tok, n)
		}
	}
}

// TestModernClient drives mcpgw with a 2026-07-28 go-sdk client (no
// initialize, no session) in front of eraservers of both eras over stdio
// and HTTP: every relayed method, progress, cancellation reaching the
// server, and a tool list change reaching the client on its
// subscriptions/listen stream.
func TestModernClient(t *testing.T) {
	events := listenEvents(t)
	g := startEraGateway(t, events.addr)

	ce := newClientEvents()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-modern", Version: "1"}, ce.options())
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	init := cs.InitializeResult()
	if init.ProtocolVersion != modernVersion {
		t.Fatalf("the client negotiated %q, want %q", init.ProtocolVersion, modernVersion)
	}
	if id := cs.ID(); id != "" {
		t.Errorf("a 2026-07-28 client has session id %q, want none", id)
	}
	if c := init.Capabilities; c == nil || c.Tools == nil || !c.Tools.ListChanged {
		t.Errorf("server/discover's capabilities %+v do not offer tools.listChanged", c)
	}

	for _, u := range eraUpstreams {
		t.Run(u.name, func(t *testing.T) {
			exposed := func(name string) string { return "mcp__" + u.name + "__" + name }

			tools := toolsByName(t, cs)
			for _, name := range []string{"echo", "image", "weather", "progress", "slow", "add_tool"} {
				if tools[exposed(name)] == nil {
					t.Errorf("tools/list has no %s", exposed(name))
				}
			}
			if w := tools[exposed("weather")]; w != nil {
				schema, _ := json.Marshal(w.OutputSchema)
				if w.OutputSchema == nil || !strings.Contains(string(schema), `"celsius"`) {
					t.Errorf("%s lost its outputSchema: %s", exposed("weather"), schema)
				}
			}

			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed("echo"), Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError || len(res.Content) != 1 {
				t.Fatalf("echo: %+v, %v", res, err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo: hi" {
				t.Errorf("echo content = %#v, want the text %q", res.Content[0], "echo: hi")
			}

			res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed("image")})
			if err != nil || res.IsError || len(res.Content) != 1 {
				t.Fatalf("image: %+v, %v", res, err)
			}
			if ic, ok := res.Content[0].(*mcp.ImageContent); !ok || ic.MIMEType != "image/png" || !bytes.HasPrefix(ic.Data, pngMagic) {
				t.Errorf("image content = %#v, want a PNG image block", res.Content[0])
			}

			res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed("weather"), Arguments: map[string]any{"city": "Oslo"}})
			if err != nil || res.IsError {
				t.Fatalf("weather: %+v, %v", res, err)
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"celsius":21,"city":"Oslo"}` {
				t.Errorf("weather structuredContent = %s", sc)
			}

			prompts, err := cs.ListPrompts(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(prompts.Prompts, func(p *mcp.Prompt) bool { return p.Name == exposed("greeting") }) {
				t.Errorf("prompts/list has no %s", exposed("greeting"))
			}
			pr, err := cs.GetPrompt(ctxT(t), &mcp.GetPromptParams{Name: exposed("greeting"), Arguments: map[string]string{"name": "Ada"}})
			if err != nil || len(pr.Messages) != 1 {
				t.Fatalf("prompts/get: %+v, %v", pr, err)
			}
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Say hello to Ada." {
				t.Errorf("prompts/get message = %#v", pr.Messages[0].Content)
			}

			note := "mcp+" + u.name + "+note://hello"
			resources, err := cs.ListResources(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(resources.Resources, func(r *mcp.Resource) bool { return r.URI == note }) {
				t.Errorf("resources/list has no %s", note)
			}
			rr, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: note})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello note" || rr.Contents[0].URI != note {
				t.Fatalf("resources/read %s: %+v, %v", note, rr, err)
			}

			templates, err := cs.ListResourceTemplates(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := "mcp+" + u.name + "+note://{name}"
			if !slices.ContainsFunc(templates.ResourceTemplates, func(r *mcp.ResourceTemplate) bool { return r.URITemplate == tmpl }) {
				t.Errorf("resources/templates/list has no %s", tmpl)
			}
			byName := "mcp+" + u.name + "+note://grace"
			rr, err = cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: byName})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "note grace" {
				t.Fatalf("resources/read %s: %+v, %v", byName, rr, err)
			}

			cr, err := cs.Complete(ctxT(t), &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: exposed("greeting")},
				Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"},
			})
			if err != nil {
				t.Fatalf("completion/complete: %v", err)
			}
			if got := cr.Completion.Values; !slices.Equal(got, []string{"ada", "alan"}) {
				t.Errorf("completion values = %q, want [ada alan]", got)
			}

			// Progress comes on the call's own response stream.
			tok := "progress-" + u.name
			params := &mcp.CallToolParams{Name: exposed("progress")}
			params.SetProgressToken(tok)
			res, err = cs.CallTool(ctxT(t), params)
			if err != nil || res.IsError {
				t.Fatalf("progress: %+v, %v", res, err)
			}
			if got := ce.waitProgress(t, tok, 3); !slices.Equal(got, []float64{1, 2, 3}) {
				t.Errorf("progress notifications for %q: %v, want [1 2 3]", tok, got)
			}

			// A call that asks for logs at info gets a modern server's on
			// its own stream, before the result. (A legacy server logs
			// only at the level of a logging/setLevel on its session,
			// which the gateway does not send for a modern client's
			// per-request level.)
			a := modernPost(t, g.URL+"/mcp", "log-"+u.name, "tools/call", map[string]any{
				"name": exposed("log"), "arguments": map[string]any{}, "_meta": map[string]any{"io.modelcontextprotocol/logLevel": "info"},
			})
			if m := a.final(t, `"log-`+u.name+`"`); m.Result == nil {
				t.Fatalf("the log call failed: %s", a.body)
			}
			if !u.legacy {
				var n rpcMessage
				if len(a.msgs) != 2 || json.Unmarshal(a.msgs[0], &n) != nil || n.Method != "notifications/message" || !strings.Contains(string(n.Params), `"a log line"`) {
					t.Errorf("the log call's answer = %s, want the server's notifications/message, then the result", a.body)
				}
			}

			// On the wire, the call's progress comes on its own event
			// stream before its result, which says it is complete.
			a = modernPost(t, g.URL+"/mcp", "raw-"+u.name, "tools/call", map[string]any{
				"name": exposed("progress"), "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "raw-" + u.name},
			})
			if a.status != http.StatusOK || len(a.msgs) != 4 {
				t.Fatalf("raw progress call: HTTP %d with %d messages, want 200 with 3 notifications and the result: %s", a.status, len(a.msgs), a.body)
			}
			for i, raw := range a.msgs[:3] {
				var n struct {
					Method string `json:"method"`
					Params struct {
						ProgressToken any     `json:"progressToken"`
						Progress      float64 `json:"progress"`
					} `json:"params"`
				}
				if err := json.Unmarshal(raw, &n); err != nil || n.Method != "notifications/progress" ||
					n.Params.ProgressToken != "raw-"+u.name || n.Params.Progress != float64(i+1) {
					t.Errorf("message %d of the raw progress call = %s, want progress %d of token %q", i, raw, i+1, "raw-"+u.name)
				}
			}
			if m := a.final(t, `"raw-`+u.name+`"`); m.Result["resultType"] != "complete" {
				t.Errorf("the raw progress call's result has resultType %v, want complete: %s", m.Result["resultType"], a.msgs[3])
			}

			// Cancelling the call's context closes its request; the
			// server's handler sees its own context end.
			ctx, cancel := context.WithCancel(ctxT(t))
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: exposed("slow"), Arguments: map[string]any{"tag": u.name}})
				done <- err
			}()
			events.wait(t, "started "+u.name)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled call returned %v, want context.Canceled", err)
			}
			events.wait(t, "cancelled "+u.name)

			// A tool the server adds reaches the client through its
			// subscriptions/listen stream.
			fresh := exposed("fresh_" + strings.ReplaceAll(u.name, "-", "_"))
			ce.drainChanged()
			res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed("add_tool"), Arguments: map[string]any{"name": strings.TrimPrefix(fresh, exposed(""))}})
			if err != nil || res.IsError {
				t.Fatalf("add_tool: %+v, %v", res, err)
			}
			deadline := time.After(30 * time.Second)
			for toolsByName(t, cs)[fresh] == nil {
				select {
				case <-ce.changed:
				case <-deadline:
					t.Fatalf("no notifications/tools/list_changed showing %s within 30s", fresh)
				}
			}
			res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: fresh})
			if err != nil || res.IsError || len(res.Content) != 1 {
				t.Fatalf("calling %s: %+v, %v", fresh, res, err)
			}
		})
	}

	t.Run("raw", func(t *testing.T) { modernRawChecks(t, g.URL+"/mcp") })
}

// modernRawChecks checks, on raw HTTP, what the go-sdk client does not
// show: GET without a session, discover's result, the cache hints and
// resultType of results, and errors echoing the request's id.
func modernRawChecks(t *testing.T, url string) {
	for _, version := range []string{modernVersion, ""} {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		if version != "" {
			req.Header.Set("MCP-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("GET /mcp with no session (MCP-Protocol-Version %q) = %d, Allow %q; want 405, Allow POST: %s",
				version, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}

	a := modernPost(t, url, 1, "server/discover", nil)
	d := a.final(t, "1").Result
	if a.status != http.StatusOK || d == nil {
		t.Fatalf("server/discover = HTTP %d: %s", a.status, a.body)
	}
	versions, _ := d["supportedVersions"].([]any)
	if len(versions) == 0 || versions[0] != modernVersion || !slices.Contains(versions, any(legacyVersion)) {
		t.Errorf("server/discover supportedVersions = %v, want %s first and %s among them", versions, modernVersion, legacyVersion)
	}
	caps, _ := d["capabilities"].(map[string]any)
	for _, c := range []string{"tools", "prompts", "resources", "completions"} {
		if caps[c] == nil {
			t.Errorf("server/discover capabilities have no %s: %v", c, caps)
		}
	}
	if info, _ := d["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any); info["name"] == nil {
		t.Errorf("server/discover _meta has no serverInfo: %v", d["_meta"])
	}

	// Cacheable results carry ttlMs and cacheScope; a call's does not.
	for _, c := range []struct {
		method string
		params map[string]any
		scope  string // "" for not cacheable
	}{
		{"server/discover", nil, "public"},
		{"tools/list", nil, "public"},
		{"prompts/list", nil, "public"},
		{"resources/list", nil, "public"},
		{"resources/templates/list", nil, "public"},
		{"resources/read", map[string]any{"uri": "mcp+modern-http+note://hello"}, "private"},
		{"resources/read", map[string]any{"uri": "mcp+legacy-stdio+note://hello"}, "private"},
		{"tools/call", map[string]any{"name": "mcp__legacy-http__echo", "arguments": map[string]any{"text": "x"}}, ""},
		{"prompts/get", map[string]any{"name": "mcp__modern-stdio__greeting", "arguments": map[string]any{"name": "x"}}, ""},
	} {
		a := modernPost(t, url, "c", c.method, c.params)
		r := a.final(t, `"c"`).Result
		if a.status != http.StatusOK || r == nil {
			t.Errorf("%s %v = HTTP %d: %s", c.method, c.params, a.status, a.body)
			continue
		}
		ttl, hasTTL := r["ttlMs"].(float64)
		scope, _ := r["cacheScope"].(string)
		switch {
		case r["resultType"] != "complete":
			t.Errorf("%s %v: resultType %v, want complete", c.method, c.params, r["resultType"])
		case c.scope == "" && (r["ttlMs"] != nil || r["cacheScope"] != nil):
			t.Errorf("%s %v: ttlMs %v, cacheScope %v on a result that is not cacheable", c.method, c.params, r["ttlMs"], r["cacheScope"])
		case c.scope != "" && (!hasTTL || ttl < 0 || scope != c.scope):
			t.Errorf("%s %v: ttlMs %v, cacheScope %v; want a ttlMs ≥ 0 and %q", c.method, c.params, r["ttlMs"], r["cacheScope"], c.scope)
		}
	}

	// Errors answer the request's own id.
	a = modernPost(t, url, "err-1", "tools/call", map[string]any{"name": "mcp__nobody__nothing", "arguments": map[string]any{}})
	if m := a.final(t, `"err-1"`); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("calling an unknown tool = HTTP %d %s, want error -32602", a.status, a.body)
	}
	body := `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"mcp__modern-http__echo","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	h := http.Header{"Mcp-Protocol-Version": {modernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"mcp__modern-http__other"}}
	if a = postRaw(t, url, h, body); a.status != http.StatusBadRequest {
		t.Errorf("an Mcp-Name that does not match the body = HTTP %d, want 400: %s", a.status, a.body)
	} else if m := a.final(t, "77"); m.Error == nil || m.Error.Code != -32020 {
		t.Errorf("an Mcp-Name that does not match the body = %s, want error -32020", a.body)
	}
	body = strings.ReplaceAll(body, `"2026-07-28"`, `"2099-01-01"`)
	h.Set("Mcp-Protocol-Version", "2099-01-01")
	h.Set("Mcp-Name", "mcp__modern-http__echo")
	if a = postRaw(t, url, h, body); a.status != http.StatusBadRequest {
		t.Errorf("an unsupported version = HTTP %d, want 400: %s", a.status, a.body)
	} else if m := a.final(t, "77"); m.Error == nil || m.Error.Code != -32022 || !strings.Contains(string(m.Error.Data), modernVersion) {
		t.Errorf("an unsupported version = %s, want error -32022 listing %s", a.body, modernVersion)
	}
}

// rawAnswer is an HTTP answer to one POST of a JSON-RPC message: its
// status, headers, and the messages in its body (one JSON object, or the
// data of each event of an event stream, in order).
type rawAnswer struct {
	status int
	header http.Header
	msgs   []json.RawMessage
	body   string // the body as read, for failure messages
}

// postRaw POSTs body to url with the MCP Accept and Content-Type headers
// and header, and reads the whole answer.
func postRaw(t *testing.T, url string, header http.Header, body string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer to POST %s: %v", url, err)
	}
	a := rawAnswer{status: resp.StatusCode, header: resp.Header, body: string(data)}
	switch ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); {
	case len(bytes.TrimSpace(data)) == 0:
	case ct == "text/event-stream":
		a.msgs = sseData(data)
	default:
		a.msgs = []json.RawMessage{json.RawMessage(data)}
	}
	return a
}

// sseData returns the data of each event of an event stream.
func sseData(stream []byte) []json.RawMessage {
	var out []json.RawMessage
	var data []string
	for line := range strings.Lines(string(stream)) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(data) > 0 {
				out = append(out, json.RawMessage(strings.Join(data, "\n")))
				data = nil
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	if len(data) > 0 {
		out = append(out, json.RawMessage(strings.Join(data, "\n")))
	}
	return out
}

// modernMeta is the _meta of the raw modern requests: the reserved keys
// a 2026-07-28 client must send, and one of the application's own.
func modernMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-raw", "version": "1"},
		"example.com/trace":                          "keep-me",
	}
}

// modernPost sends one raw 2026-07-28 request: params get modernMeta
// in their _meta, and the headers mirror the body.
func modernPost(t *testing.T, url string, id any, method string, params map[string]any) rawAnswer {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta := modernMeta()
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("MCP-Protocol-Version", modernVersion)
	h.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		h.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case "resources/read":
		h.Set("Mcp-Name", fmt.Sprint(params["uri"]))
	}
	return postRaw(t, url, h, string(body))
}

// rpcMessage is what the raw checks read of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// final returns a's last message, which must answer the request id.
func (a rawAnswer) final(t *testing.T, id string) rpcMessage {
	t.Helper()
	if len(a.msgs) == 0 {
		t.Fatalf("HTTP %d with no JSON-RPC message: %q", a.status, a.body)
	}
	var m rpcMessage
	if err := json.Unmarshal(a.msgs[len(a.msgs)-1], &m); err != nil {
		t.Fatalf("the last message is not JSON-RPC: %v: %s", err, a.msgs[len(a.msgs)-1])
	}
	if string(m.ID) != id {
		t.Fatalf("the answer's id is %s, want %s: %s", m.ID, id, a.body)
	}
	return m
}

// TestLegacyClientListChanged drives mcpgw with a 2025-11-25 go-sdk
// client: a tool that a legacy server adds, over stdio and over HTTP,
// reaches the client as notifications/tools/list_changed on its GET
// stream. (TestModernUpstream does the same for modern servers.)
func TestLegacyClientListChanged(t *testing.T) {
	g := startEraGateway(t, listenEvents(t).addr)
	ce := newClientEvents()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-legacy", Version: "1"}, ce.options())
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != legacyVersion {
		t.Fatalf("the client negotiated %q, want %q", got, legacyVersion)
	}
	if cs.ID() == "" {
		t.Fatal("a 2025-11-25 client has no session id")
	}
	for _, u := range eraUpstreams {
		if !u.legacy {
			continue
		}
		t.Run(u.name, func(t *testing.T) {
			exposed := func(name string) string { return "mcp__" + u.name + "__" + name }
			fresh := "late_" + strings.ReplaceAll(u.name, "-", "_")
			if toolsByName(t, cs)[exposed(fresh)] != nil {
				t.Fatalf("%s is listed before it is added", exposed(fresh))
			}
			ce.drainChanged()
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed("add_tool"), Arguments: map[string]any{"name": fresh}})
			if err != nil || res.IsError {
				t.Fatalf("add_tool: %+v, %v", res, err)
			}
			deadline := time.After(30 * time.Second)
			for toolsByName(t, cs)[exposed(fresh)] == nil {
				select {
				case <-ce.changed:
				case <-deadline:
					t.Fatalf("no notifications/tools/list_changed showing %s within 30s", exposed(fresh))
				}
			}
			res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed(fresh)})
			if err != nil || res.IsError || len(res.Content) != 1 {
				t.Fatalf("calling %s: %+v, %v", exposed(fresh), res, err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "fresh: "+fresh {
				t.Errorf("%s answered %#v", exposed(fresh), res.Content[0])
			}
		})
	}
}
