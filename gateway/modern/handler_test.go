package modern

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// env is a Handler over a core with one fake server "a", served the way
// the legacy edge hands it modern POSTs: parsed, with the principal in the
// context.
type env struct {
	t    testing.TB
	h    *Handler
	core *gateway.Server
	mgr  *upstreamtest.Manager
	srv  *upstreamtest.Server
	url  string
	// calls gets the params of each call the fake server takes.
	calls chan json.RawMessage
	hooks chan *upstream.CallHooks
}

var (
	echoTool   = json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`)
	regionTool = json.RawMessage(`{"name":"region","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"number","x-mcp-header":"N"},"bad":{"type":"object","x-mcp-header":"Bad"},"plain":{"type":"string"}}}}`)
)

func newEnv(t testing.TB, coreOpts gateway.Options, opts Options) *env {
	t.Helper()
	return newEnvWith(t, coreOpts, opts)
}

// newEnvWith is newEnv with more servers beside "a".
func newEnvWith(t testing.TB, coreOpts gateway.Options, opts Options, more ...*upstreamtest.Server) *env {
	t.Helper()
	e := &env{t: t, calls: make(chan json.RawMessage, 16), hooks: make(chan *upstream.CallHooks, 16)}
	srv := &upstreamtest.Server{
		Name:      "a",
		Tools:     []json.RawMessage{echoTool, regionTool, json.RawMessage(`{"name":"slow","inputSchema":{"type":"object"}}`)},
		Prompts:   []json.RawMessage{json.RawMessage(`{"name":"greet"}`)},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"file:///r.txt","name":"r"}`)},
		Handle: func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			e.calls <- params
			e.hooks <- hooks
			switch method {
			case "resources/read":
				return nil, jsonrpc.NewError(-32002, "no such resource", nil)
			case "tools/call":
				var p struct{ Name string }
				json.Unmarshal(params, &p)
				if p.Name == "slow" {
					hooks.Notify(&jsonrpc.Message{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":"working"}`)})
					hooks.Notify(&jsonrpc.Message{Method: "notifications/message", Params: json.RawMessage(`{"level":"debug","data":"detail"}`)})
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"_meta":{"app/x":1}}`), nil
			}
			return json.RawMessage(`{}`), nil
		},
	}
	e.mgr, e.srv = upstreamtest.NewManager(append([]*upstreamtest.Server{srv}, more...)...), srv
	coreOpts.Upstreams = e.mgr
	core, err := gateway.New(coreOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	opts.Core = core
	opts.LegacyVersions = []string{"2025-11-25"}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.h, e.core = h, core
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msgs, _, err := jsonrpc.ParseOwnedStrict(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if p := r.Header.Get("X-Test-Principal"); p != "" {
			r = r.WithContext(auth.NewContext(r.Context(), auth.Principal{Name: p}))
		}
		h.Serve(w, r, msgs[0])
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Close(ctx)
	})
	e.url = hs.URL
	return e
}

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// metaTasks is meta with the tasks extension declared.
const metaTasks = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// post sends body with the headers a modern client sends for method (and
// name, when not ""), changed by edit.
func (e *env) post(body, method, name string, edit func(http.Header)) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// answer reads a response's one JSON-RPC message, from JSON or from the
// last event of a stream.
func answer(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range events(t, resp) {
			raw = ev
		}
	} else {
		raw, _ = io.ReadAll(resp.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	return m
}

// events reads an event stream to its end and returns each event's data.
func events(t *testing.T, resp *http.Response) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, []byte(d))
		}
	}
	return out
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestServe_Refusals(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	tests := []struct {
		name     string
		body     string
		method   string
		mcpName  string
		edit     func(http.Header)
		status   int
		code     float64
		inMsg    string
		wantData string
	}{
		{name: "no params", body: `{"jsonrpc":"2.0","id":101,"method":"server/discover"}`, method: "server/discover",
			status: 400, code: -32602, inMsg: "params._meta is required"},
		{name: "no _meta", body: `{"jsonrpc":"2.0","id":"a","method":"server/discover","params":{}}`, method: "server/discover",
			status: 400, code: -32602, inMsg: "params._meta is required"},
		{name: "no version", body: `{"jsonrpc":"2.0","id":102,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, method: "server/discover",
			status: 400, code: -32602, inMsg: "protocolVersion"},
		{name: "no capabilities", body: `{"jsonrpc":"2.0","id":104,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, method: "server/discover",
			status: 400, code: -32602, inMsg: "clientCapabilities"},
		{name: "bad log level", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}`, method: "tools/list",
			status: 400, code: -32602, inMsg: "logLevel"},
		{name: "version header differs", body: `{"jsonrpc":"2.0","id":302,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, method: "server/discover",
			status: 400, code: -32020, inMsg: "does not match"},
		{name: "version header missing", body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`, method: "tools/list",
			edit: func(h http.Header) { h.Del("MCP-Protocol-Version") }, status: 400, code: -32020, inMsg: "missing"},
		{name: "unsupported version", body: `{"jsonrpc":"2.0","id":301,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, method: "server/discover",
			edit: func(h http.Header) { h.Set("MCP-Protocol-Version", "v999.0.0") }, status: 400, code: -32022,
			wantData: `{"requested":"v999.0.0","supported":["2026-07-28","2025-11-25"]}`},
		{name: "method header differs", body: `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + meta + `}}`, method: "prompts/list",
			status: 400, code: -32020, inMsg: "Mcp-Method"},
		{name: "method header missing", body: `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + meta + `}}`, method: "tools/list",
			edit: func(h http.Header) { h.Del("Mcp-Method") }, status: 400, code: -32020, inMsg: "Mcp-Method"},
		{name: "name header missing", body: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, method: "tools/call",
			status: 400, code: -32020, inMsg: "Mcp-Name"},
		{name: "name header differs", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, method: "tools/call", mcpName: "other",
			status: 400, code: -32020, inMsg: "Mcp-Name"},
		{name: "name header bad base64", body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, method: "tools/call", mcpName: "=?base64?***?=",
			status: 400, code: -32020, inMsg: "base64"},
		{name: "removed initialize", body: `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{` + meta + `}}`, method: "initialize",
			status: 404, code: -32601, inMsg: "does not exist"},
		{name: "removed setLevel without _meta", body: `{"jsonrpc":"2.0","id":17,"method":"logging/setLevel","params":{"level":"info"}}`, method: "logging/setLevel",
			status: 404, code: -32601, inMsg: "io.modelcontextprotocol/logLevel"},
		{name: "removed ping", body: `{"jsonrpc":"2.0","id":10,"method":"ping","params":{` + meta + `}}`, method: "ping",
			status: 404, code: -32601},
		{name: "removed setLevel", body: `{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"info",` + meta + `}}`, method: "logging/setLevel",
			status: 404, code: -32601},
		{name: "removed subscribe", body: `{"jsonrpc":"2.0","id":12,"method":"resources/subscribe","params":{"uri":"file:///r.txt",` + meta + `}}`, method: "resources/subscribe",
			status: 404, code: -32601},
		{name: "removed tasks/list", body: `{"jsonrpc":"2.0","id":13,"method":"tasks/list","params":{` + meta + `}}`, method: "tasks/list",
			status: 404, code: -32601},
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":14,"method":"nope/nope","params":{` + meta + `}}`, method: "nope/nope",
			status: 404, code: -32601, inMsg: "not offered"},
		{name: "removed tasks/result", body: `{"jsonrpc":"2.0","id":20,"method":"tasks/result","params":{"taskId":"t",` + metaTasks + `}}`, method: "tasks/result",
			status: 404, code: -32601, inMsg: "tasks/get inlines"},
		{name: "tasks/get without the extension", body: `{"jsonrpc":"2.0","id":21,"method":"tasks/get","params":{"taskId":"gate-test",` + meta + `}}`, method: "tasks/get", mcpName: "gate-test",
			status: 400, code: -32021, inMsg: "io.modelcontextprotocol/tasks", wantData: `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`},
		{name: "tasks/update without the extension", body: `{"jsonrpc":"2.0","id":22,"method":"tasks/update","params":{"taskId":"gate-test","inputResponses":{},` + meta + `}}`, method: "tasks/update", mcpName: "gate-test",
			status: 400, code: -32021, inMsg: "io.modelcontextprotocol/tasks"},
		{name: "tasks/cancel without the extension", body: `{"jsonrpc":"2.0","id":23,"method":"tasks/cancel","params":{"taskId":"gate-test",` + meta + `}}`, method: "tasks/cancel", mcpName: "gate-test",
			status: 400, code: -32021, inMsg: "io.modelcontextprotocol/tasks"},
		{name: "task name header missing", body: `{"jsonrpc":"2.0","id":24,"method":"tasks/get","params":{"taskId":"t1",` + metaTasks + `}}`, method: "tasks/get",
			status: 400, code: -32020, inMsg: "params.taskId"},
		{name: "task name header differs", body: `{"jsonrpc":"2.0","id":25,"method":"tasks/get","params":{"taskId":"t1",` + metaTasks + `}}`, method: "tasks/get", mcpName: "t2",
			status: 400, code: -32020, inMsg: "params.taskId"},
		{name: "unknown task", body: `{"jsonrpc":"2.0","id":26,"method":"tasks/get","params":{"taskId":"tasks-conformance-nonexistent-12345",` + metaTasks + `}}`, method: "tasks/get", mcpName: "tasks-conformance-nonexistent-12345",
			status: 200, code: -32602, inMsg: "unknown task"},
		{name: "listen without notifications", body: `{"jsonrpc":"2.0","id":18,"method":"subscriptions/listen","params":{` + meta + `}}`, method: "subscriptions/listen",
			status: 200, code: -32602, inMsg: "params.notifications"},
		{name: "listen with a malformed filter", body: `{"jsonrpc":"2.0","id":19,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":"file:///r.txt"},` + meta + `}}`, method: "subscriptions/listen",
			status: 200, code: -32602, inMsg: "params.notifications"},
		{name: "a response", body: `{"jsonrpc":"2.0","id":15,"result":{}}`, method: "",
			status: 400, code: -32600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.post(tt.body, tt.method, tt.mcpName, tt.edit)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			m := answer(t, resp)
			if got := errCode(m); got != tt.code {
				t.Errorf("code %v, want %v: %v", got, tt.code, m)
			}
			var sent struct{ ID any }
			json.Unmarshal([]byte(tt.body), &sent)
			if !cmp.Equal(m["id"], sent.ID) {
				t.Errorf("id %v, want the request's %v echoed", m["id"], sent.ID)
			}
			e, _ := m["error"].(map[string]any)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tt.inMsg) {
				t.Errorf("message %q, want it to mention %q", msg, tt.inMsg)
			}
			if tt.wantData != "" {
				got, _ := json.Marshal(e["data"])
				if string(got) != tt.wantData {
					t.Errorf("data %s, want %s", got, tt.wantData)
				}
			}
		})
	}
	select {
	case p := <-e.calls:
		t.Errorf("a refused request reached the server: %s", p)
	default:
	}
}

func TestServe_Notification(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	resp := e.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "notifications/cancelled", "", nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("status %d, want 202", resp.StatusCode)
	}
}

func TestServe_Discover(t *testing.T) {
	tests := []struct {
		name      string
		acl       config.ACL
		wantScope string
	}{
		{"no rules", config.ACL{}, "public"},
		{"rules", config.ACL{Rules: []config.ACLRule{{Effect: config.ACLAllow, Principals: []string{"anonymous"}, Servers: []string{"*"}}}}, "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, gateway.Options{ACL: tt.acl}, Options{})
			resp := e.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, "server/discover", "", nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			m := answer(t, resp)
			res, _ := m["result"].(map[string]any)
			if res["resultType"] != "complete" || res["cacheScope"] != tt.wantScope || res["ttlMs"] != float64(0) {
				t.Errorf("result %v: want resultType complete, ttlMs 0, cacheScope %s", res, tt.wantScope)
			}
			if got := res["supportedVersions"]; !cmp.Equal(got, []any{"2026-07-28", "2025-11-25"}) {
				t.Errorf("supportedVersions %v", got)
			}
			caps, _ := res["capabilities"].(map[string]any)
			for _, k := range []string{"tools", "prompts", "resources", "completions"} {
				if caps[k] == nil {
					t.Errorf("capabilities lack %s: %v", k, caps)
				}
			}
			if caps["tasks"] != nil {
				t.Errorf("capabilities offer the session era's tasks: %v", caps)
			}
			if ext, _ := caps["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
				t.Errorf("capabilities do not offer the tasks extension: %v", caps)
			}
			mt, _ := res["_meta"].(map[string]any)
			if si, _ := mt["io.modelcontextprotocol/serverInfo"].(map[string]any); si["name"] == nil {
				t.Errorf("no serverInfo in _meta: %v", res)
			}
		})
	}
}

func TestServe_Call(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	body := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"mcp__a__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"t"},"progressToken":7,"app.example/k":"v"}}}`
	resp := e.post(body, "tools/call", "=?base64?bWNwX19hX19lY2hv?=", nil)
	m := answer(t, resp)
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("answer %v, want a result", m)
	}
	if res["resultType"] != "complete" || res["ttlMs"] != nil || res["cacheScope"] != nil {
		t.Errorf("result %v: want resultType complete and no cache hints on a call", res)
	}
	mt, _ := res["_meta"].(map[string]any)
	if mt["app/x"] != float64(1) || mt["io.modelcontextprotocol/serverInfo"] == nil {
		t.Errorf("_meta %v: want the server's own key kept and serverInfo added", mt)
	}
	params := <-e.calls
	hooks := <-e.hooks
	if strings.Contains(string(params), "io.modelcontextprotocol") {
		t.Errorf("the server got the client's reserved _meta keys: %s", params)
	}
	if !strings.Contains(string(params), `"app.example/k":"v"`) {
		t.Errorf("the server lost the client's own _meta key: %s", params)
	}
	if string(hooks.Capabilities) != `{"sampling":{}}` {
		t.Errorf("hooks carry capabilities %s, want the client's", hooks.Capabilities)
	}
}

func TestServe_ResourceNotFound(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	resp := e.post(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///r.txt",`+meta+`}}`, "resources/read", "file:///r.txt", nil)
	m := answer(t, resp)
	if errCode(m) != -32602 {
		t.Fatalf("answer %v, want -32602", m)
	}
	e2, _ := m["error"].(map[string]any)
	if d, _ := e2["data"].(map[string]any); d["uri"] != "file:///r.txt" {
		t.Errorf("data %v, want the uri", e2["data"])
	}
}

// TestServe_StreamAndCancel: a call's log messages at or above the level
// its _meta asked for come first on its stream; closing the stream cancels
// the call upstream.
func TestServe_StreamAndCancel(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}`
	resp := e.post(body, "tools/call", "mcp__a__slow", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Error("no X-Accel-Buffering: no on the stream")
	}
	<-e.calls
	hooks := <-e.hooks
	if hooks.LogLevel != "info" {
		t.Errorf("hooks.LogLevel %q, want info", hooks.LogLevel)
	}
	sc := bufio.NewScanner(resp.Body)
	var first string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			first = d
			break
		}
	}
	if !strings.Contains(first, `"notifications/message"`) || !strings.Contains(first, "working") {
		t.Fatalf("first event %q, want the info log message", first)
	}
	resp.Body.Close()
	// The call's context ends once the client is gone: the handler
	// returns and Close finds no work left.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.Close(ctx); err != nil {
		t.Errorf("Close: %v (the call outlived its client)", err)
	}
}

func TestServe_NoLogWithoutLevel(t *testing.T) {
	if wantsLog("", json.RawMessage(`{"level":"emergency"}`)) {
		t.Error("a request without logLevel gets log messages")
	}
	for _, tt := range []struct {
		level, got string
		want       bool
	}{
		{"info", "debug", false}, {"info", "info", true}, {"info", "error", true}, {"error", "warning", false},
	} {
		if w := wantsLog(tt.level, json.RawMessage(`{"level":"`+tt.got+`"}`)); w != tt.want {
			t.Errorf("wantsLog(%s, %s) = %v", tt.level, tt.got, w)
		}
	}
}

// TestListen: the acknowledgement comes first with what was honoured, a
// merged list change reaches a listener that asked for it tagged with its
// subscription id, and Close ends the stream with the listen's result.
func TestListen(t *testing.T) {
	e := newEnv(t, gateway.Options{ListChangedDebounce: time.Millisecond}, Options{})
	resp := e.post(`{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta+`}}`, "subscriptions/listen", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	next := streamReader(t, resp)
	ack := next()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", ack)
	}
	p, _ := ack["params"].(map[string]any)
	if !cmp.Equal(p["notifications"], map[string]any{"toolsListChanged": true}) {
		t.Errorf("honoured %v", p["notifications"])
	}
	changed := *e.srv
	changed.Tools = []json.RawMessage{echoTool}
	e.mgr.Set(&changed)
	n := next()
	if n["method"] != "notifications/tools/list_changed" {
		t.Fatalf("got %v, want tools/list_changed", n)
	}
	np, _ := n["params"].(map[string]any)
	if mt, _ := np["_meta"].(map[string]any); mt["io.modelcontextprotocol/subscriptionId"] != "sub-1" {
		t.Errorf("notification params %v, want the subscription id", np)
	}
	go e.h.Close(context.Background())
	last := next()
	if last["id"] != "sub-1" {
		t.Fatalf("last message %v, want the listen's result", last)
	}
	if r, _ := last["result"].(map[string]any); r["resultType"] != "complete" {
		t.Errorf("listen result %v", last)
	}
}

// TestServe_ParamHeaders: the arguments a tool's schema marks with
// x-mcp-header must come with their Mcp-Param-* header, equal once
// decoded; anything else is 400 -32020 and never reaches the server.
func TestServe_ParamHeaders(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp__a__region","arguments":` + args + `,` + meta + `}}`
	}
	tests := []struct {
		name    string
		args    string
		headers map[string]string
		ok      bool
	}{
		{"literal", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu"}, true},
		{"header name case", `{"region":"eu"}`, map[string]string{"mcp-param-region": " eu "}, true},
		{"base64", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8=?="}, true},
		{"sentinel-looking literal", `{"region":"=?base64?SGVsbG8="}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8="}, true},
		{"number compared as a number", `{"n":1.50}`, map[string]string{"Mcp-Param-N": "1.5"}, true},
		{"neither", `{"plain":"x"}`, nil, true},
		{"object property is not mirrored", `{"bad":{"a":1}}`, nil, true},
		{"missing header", `{"region":"eu"}`, nil, false},
		{"mismatch", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "us"}, false},
		{"bad padding", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}, false},
		{"bad characters", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}, false},
		{"header without argument", `{}`, map[string]string{"Mcp-Param-Region": "eu"}, false},
		{"number mismatch", `{"n":2}`, map[string]string{"Mcp-Param-N": "3"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.post(call(tt.args), "tools/call", "mcp__a__region", func(h http.Header) {
				for k, v := range tt.headers {
					h[k] = []string{v}
				}
			})
			m := answer(t, resp)
			if tt.ok {
				if resp.StatusCode != 200 || m["result"] == nil {
					t.Fatalf("status %d, %v; want a result", resp.StatusCode, m)
				}
				<-e.calls
				<-e.hooks
				return
			}
			if resp.StatusCode != 400 || errCode(m) != CodeHeaderMismatch {
				t.Fatalf("status %d, %v; want 400 with -32020", resp.StatusCode, m)
			}
			select {
			case p := <-e.calls:
				t.Errorf("a refused call reached the server: %s", p)
			default:
			}
		})
	}
}

// TestServe_Caps: without a session to bound them, one principal's
// requests in flight and open listen streams are capped; another
// principal is not held back by them.
func TestServe_Caps(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{MaxPerPrincipal: 3, MaxListensPerPrincipal: 1})
	as := func(p string) func(http.Header) { return func(h http.Header) { h.Set("X-Test-Principal", p) } }
	slow := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__slow",` + meta + `}}`
	listen := `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta + `}}`

	e.post(slow, "tools/call", "mcp__a__slow", as("alice"))
	<-e.calls
	<-e.hooks
	if ls := e.post(listen, "subscriptions/listen", "", as("alice")); ls.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("alice's first listen: %s", ls.Header.Get("Content-Type"))
	}
	// A second listen is over her listen cap (2 of 3 requests held).
	m := answer(t, e.post(strings.Replace(listen, `"l"`, `"l2"`, 1), "subscriptions/listen", "", as("alice")))
	if errCode(m) != gateway.CodeRateLimited || !strings.Contains(fmt.Sprint(m["error"]), "listen streams") || m["id"] != "l2" {
		t.Errorf("alice's second listen: %v, want -31003 for her listen cap", m)
	}
	e.post(slow, "tools/call", "mcp__a__slow", as("alice"))
	<-e.calls
	<-e.hooks
	// Three held: a fourth request is refused.
	m = answer(t, e.post(list, "tools/list", "", as("alice")))
	if errCode(m) != gateway.CodeRateLimited || !strings.Contains(fmt.Sprint(m["error"]), "requests in flight") || m["id"] != float64(7) {
		t.Errorf("alice's fourth request: %v, want -31003 with its id", m)
	}
	// bob is not held back.
	if m = answer(t, e.post(list, "tools/list", "", as("bob"))); m["result"] == nil {
		t.Errorf("bob's request: %v, want a result", m)
	}
	if bl := e.post(listen, "subscriptions/listen", "", as("bob")); bl.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("bob's listen: %s, want a stream", bl.Header.Get("Content-Type"))
	}

	// Too many resources for one listen.
	var uris []string
	for i := range maxListenResources + 1 {
		uris = append(uris, `"file:///r`+strconv.Itoa(i)+`"`)
	}
	big := `{"jsonrpc":"2.0","id":"big","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` + strings.Join(uris, ",") + `]},` + meta + `}}`
	m = answer(t, e.post(big, "subscriptions/listen", "", as("carol")))
	if errCode(m) != jsonrpc.CodeInvalidParams {
		t.Errorf("a listen of %d resources: %v, want -32602", len(uris), m)
	}
}

// streamReader returns a function that reads the next message of an event
// stream.
func streamReader(t *testing.T, resp *http.Response) func() map[string]any {
	sc := bufio.NewScanner(resp.Body)
	return func() map[string]any {
		t.Helper()
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return nil
	}
}

// TestListen_ViewAware: with access rules, a list change reaches only the
// listeners whose own view of the list changed.
func TestListen_ViewAware(t *testing.T) {
	acl := config.ACL{Rules: []config.ACLRule{
		{Effect: config.ACLAllow, Principals: []string{"alice"}, Servers: []string{"a"}},
		{Effect: config.ACLAllow, Principals: []string{"bob"}, Servers: []string{"b"}},
		{Effect: config.ACLAllow, Principals: []string{"carol"}, Servers: []string{"a", "b"}},
	}}
	b := &upstreamtest.Server{Name: "b", Tools: []json.RawMessage{json.RawMessage(`{"name":"x","inputSchema":{"type":"object"}}`)}}
	e := newEnvWith(t, gateway.Options{ACL: acl, ListChangedDebounce: time.Millisecond}, Options{}, b)
	listen := `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`
	open := func(p string) func() map[string]any {
		resp := e.post(listen, "subscriptions/listen", "", func(h http.Header) { h.Set("X-Test-Principal", p) })
		next := streamReader(t, resp)
		if m := next(); m["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("%s's first message: %v", p, m)
		}
		return next
	}
	// carol sees both servers: each change reaches her, and once it has,
	// every listener's share of it is queued.
	alice, bob, carol := open("alice"), open("bob"), open("carol")
	isChange := func(who string, m map[string]any) {
		t.Helper()
		if m["method"] != "notifications/tools/list_changed" {
			t.Fatalf("%s got %v, want tools/list_changed", who, m)
		}
	}
	isResult := func(who string, m map[string]any) {
		t.Helper()
		if m["id"] != "l" {
			t.Errorf("%s's next message %v, want the listen's result: no other change was %s's business", who, m, who)
		}
	}

	// a's list changes: alice and carol see it.
	changed := *e.srv
	changed.Tools = []json.RawMessage{echoTool}
	e.mgr.Set(&changed)
	isChange("alice", alice())
	isChange("carol", carol())
	// b's list changes: bob and carol see it.
	b2 := *b
	b2.Tools = nil
	e.mgr.Set(&b2)
	isChange("carol", carol())
	go e.h.Close(context.Background())
	isResult("alice", alice())
	isChange("bob", bob())
	isResult("bob", bob())
	isResult("carol", carol())
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServe_Observed: what the edge answers alone (discover, a removed
// method) is observed like what the core answers.
func TestServe_Observed(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, gateway.Options{Logger: logger}, Options{})
	answer(t, e.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, "server/discover", "", nil))
	answer(t, e.post(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{`+meta+`}}`, "ping", "", nil))
	got := logs.String()
	for _, want := range []string{"method=server/discover", "method=ping"} {
		if !strings.Contains(got, `msg="request answered" `+want) {
			t.Errorf("no request answered line with %s in:\n%s", want, got)
		}
	}
}

// TestServe_ShutdownCancels: a call still running when Close's grace ends
// is cancelled upstream and answered with the gateway's shutdown error.
func TestServe_ShutdownCancels(t *testing.T) {
	// The answer becomes a stream at once, so that post returns.
	e := newEnv(t, gateway.Options{}, Options{StreamAfter: time.Millisecond})
	resp := e.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__slow",`+meta+`}}`, "tools/call", "mcp__a__slow", nil)
	<-e.calls
	<-e.hooks
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := e.h.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want its context's error", err)
	}
	m := answer(t, resp)
	if errCode(m) != jsonrpc.CodeInternalError || !strings.Contains(fmt.Sprint(m["error"]), "shut down") || m["id"] != float64(3) {
		t.Errorf("the cut call's answer %v, want the shutdown error", m)
	}
	// New requests are refused.
	resp = e.post(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{`+meta+`}}`, "tools/list", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request after Close: %d, want 503", resp.StatusCode)
	}
}

// TestServe_Tasks: a call of a client that declared the tasks extension
// becomes a task (promote_after 0), served with resultType "task"; the
// tasks/* methods answer with resultType "complete", routed by Mcp-Name;
// the 2025 task param is ignored.
func TestServe_Tasks(t *testing.T) {
	e := newEnv(t, gateway.Options{}, Options{})
	res := func(resp *http.Response) map[string]any {
		t.Helper()
		m := answer(t, resp)
		r, ok := m["result"].(map[string]any)
		if !ok {
			t.Fatalf("answer %v, want a result", m)
		}
		return r
	}
	created := res(e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{},"task":{"ttl":1000},`+metaTasks+`}}`, "tools/call", "mcp__a__echo", nil))
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["status"] != "working" || created["task"] != nil {
		t.Fatalf("tools/call = %v, want a flat task", created)
	}
	var got map[string]any
	for got == nil || got["status"] == "working" {
		got = res(e.post(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"`+id+`",`+metaTasks+`}}`, "tasks/get", id, nil))
	}
	if got["resultType"] != "complete" || got["status"] != "completed" || got["taskId"] != id {
		t.Errorf("tasks/get = %v", got)
	}
	inlined, _ := got["result"].(map[string]any)
	if content, _ := inlined["content"].([]any); len(content) != 1 {
		t.Errorf("tasks/get result = %v, want the call's", got["result"])
	}
	for _, m := range []string{"tasks/update", "tasks/cancel"} {
		ack := res(e.post(`{"jsonrpc":"2.0","id":3,"method":"`+m+`","params":{"taskId":"`+id+`","inputResponses":{},`+metaTasks+`}}`, m, id, nil))
		if diff := cmp.Diff(map[string]any{"resultType": "complete"}, ack, cmpIgnoreMeta); diff != "" {
			t.Errorf("%s ack (-want +got):\n%s", m, diff)
		}
	}
	// Without the extension, the same call is answered as any.
	plain := res(e.post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{},"task":{"ttl":1000},`+meta+`}}`, "tools/call", "mcp__a__echo", nil))
	if plain["resultType"] != "complete" || plain["content"] == nil {
		t.Errorf("tools/call without the extension = %v", plain)
	}
	for range 2 {
		if p := <-e.calls; strings.Contains(string(p), `"task"`) {
			t.Errorf("the server got the 2025 task param: %s", p)
		}
	}
}

// cmpIgnoreMeta ignores a result's _meta (the gateway's serverInfo).
var cmpIgnoreMeta = cmp.FilterPath(func(p cmp.Path) bool {
	return p.Last().String() == `["_meta"]`
}, cmp.Ignore())
