package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// testProbeTimeout is the probe bound of the tests whose server never
// answers server/discover: short, so that the fallback comes soon.
const testProbeTimeout = 300 * time.Millisecond

// TestConnect_EraStdio runs real children: the fake server (legacy:
// -32601 to server/discover, or silent, or exiting on it) and the
// official go-sdk server (both eras).
func TestConnect_EraStdio(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		protocol string
		wantEra  string
		wantVer  string
		wantErr  string
	}{
		{name: "legacy answers -32601", mode: "", protocol: config.ProtocolAuto, wantEra: EraLegacy, wantVer: LatestProtocolVersion},
		{name: "legacy never answers", mode: "silent-discover", protocol: config.ProtocolAuto, wantEra: EraLegacy, wantVer: LatestProtocolVersion},
		{name: "sdk server is modern", mode: "sdk", protocol: config.ProtocolAuto, wantEra: EraModern, wantVer: ModernProtocolVersion},
		{name: "sdk server pinned legacy", mode: "sdk", protocol: config.ProtocolLegacy, wantEra: EraLegacy, wantVer: LatestProtocolVersion},
		{name: "sdk server pinned modern", mode: "sdk", protocol: config.ProtocolModern, wantEra: EraModern, wantVer: ModernProtocolVersion},
		{name: "legacy server pinned modern fails", mode: "", protocol: config.ProtocolModern, wantErr: "server/discover"},
		{name: "silent server pinned legacy", mode: "silent-discover", protocol: config.ProtocolLegacy, wantEra: EraLegacy, wantVer: LatestProtocolVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeServerConfig(t, tt.mode)
			srv.Protocol = tt.protocol
			c := startClient(t, srv, ClientOptions{ProbeTimeout: testProbeTimeout})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := c.Connect(ctx)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Connect = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			if got := c.Era(); got != tt.wantEra {
				t.Errorf("Era = %q, want %q", got, tt.wantEra)
			}
			if got := c.Initialized().ProtocolVersion; got != tt.wantVer {
				t.Errorf("protocol version = %q, want %q", got, tt.wantVer)
			}
			name := "echo"
			args := map[string]string{"text": "hi"}
			want := "hi"
			if tt.mode == "sdk" {
				name, args, want = "greet", map[string]string{"name": "era"}, "hello, era"
			}
			text, err := callText(ctx, c, name, args)
			if err != nil || !strings.Contains(text, want) {
				t.Errorf("call after connect = %q, %v; want %q", text, err, want)
			}
		})
	}
}

// TestConnect_ProbeExit: a child that dies when asked server/discover
// fails that start; the next start with the same ProbeMemory initializes
// at once.
func TestConnect_ProbeExit(t *testing.T) {
	srv := fakeServerConfig(t, "exit-on-discover")
	srv.Protocol = config.ProtocolAuto
	var memo ProbeMemory
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first := startClient(t, srv, ClientOptions{Probe: &memo})
	err := first.Connect(ctx)
	if err == nil || !strings.Contains(err.Error(), "exited when asked") {
		t.Fatalf("first Connect = %v, want the exit during server/discover", err)
	}
	second := startClient(t, srv, ClientOptions{Probe: &memo})
	if err := second.Connect(ctx); err != nil {
		t.Fatalf("second Connect: %v", err)
	}
	if got := second.Era(); got != EraLegacy {
		t.Errorf("Era = %q, want legacy", got)
	}
}

// modernHTTP is a scripted HTTP server for the detection cases: discover
// answers server/discover, and initialize starts a legacy session.
type modernHTTP struct {
	t        *testing.T
	discover func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message)
	mu       sync.Mutex
	methods  []string
}

func (f *modernHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "no", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.ParseOne(body)
	if err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, m.Method)
	f.mu.Unlock()
	switch m.Method {
	case "server/discover":
		f.discover(w, r, m)
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		writeJSON(w, encode(f.t, jsonrpc.NewResult(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"legacy","version":"1"}}`))))
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

func (f *modernHTTP) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.methods)
}

func TestConnect_EraHTTP(t *testing.T) {
	jsonErr := func(status, code int, msg string) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
		return func(w http.ResponseWriter, _ *http.Request, m *jsonrpc.Message) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(encode(t, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: code, Message: msg})))
		}
	}
	bare := func(status int) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
		return func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) { w.WriteHeader(status) }
	}
	result := func(res string) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
		return func(w http.ResponseWriter, _ *http.Request, m *jsonrpc.Message) {
			writeJSON(w, encode(t, jsonrpc.NewResult(m.ID, json.RawMessage(res))))
		}
	}
	tests := []struct {
		name     string
		protocol string
		discover func(http.ResponseWriter, *http.Request, *jsonrpc.Message)
		wantEra  string
		wantErr  string
		want     []string // methods the server saw
	}{
		{name: "modern", protocol: config.ProtocolAuto, wantEra: EraModern,
			discover: result(`{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"1"}},"ttlMs":0,"cacheScope":"public"}`),
			want:     []string{"server/discover"}},
		{name: "-32022 listing ours, then a result", protocol: config.ProtocolAuto, wantEra: EraModern,
			discover: func() func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
				var n atomic.Int32
				return func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
					if n.Add(1) == 1 {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(400)
						w.Write(encode(t, jsonrpc.NewErrorResponse(m.ID, jsonrpc.NewError(-32022, "unsupported protocol version", map[string]any{"supported": []string{"2026-07-28"}, "requested": "2026-07-28"}))))
						return
					}
					result(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{}}`)(w, r, m)
				}
			}(),
			want: []string{"server/discover", "server/discover"}},
		{name: "-32022 without ours", protocol: config.ProtocolAuto, wantEra: EraLegacy,
			discover: func(w http.ResponseWriter, _ *http.Request, m *jsonrpc.Message) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				w.Write(encode(t, jsonrpc.NewErrorResponse(m.ID, jsonrpc.NewError(-32022, "unsupported protocol version", map[string]any{"supported": []string{"2025-11-25"}}))))
			},
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "-32601 in a 200", protocol: config.ProtocolAuto, wantEra: EraLegacy, discover: jsonErr(200, -32601, "method not found"),
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "400 without a body", protocol: config.ProtocolAuto, wantEra: EraLegacy, discover: bare(400),
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "400 with a legacy JSON-RPC error", protocol: config.ProtocolAuto, wantEra: EraLegacy, discover: jsonErr(400, -32000, "Bad Request: Server not initialized"),
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "404", protocol: config.ProtocolAuto, wantEra: EraLegacy, discover: bare(404),
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "legacy versions only", protocol: config.ProtocolAuto, wantEra: EraLegacy, discover: result(`{"supportedVersions":["2025-11-25"],"capabilities":{}}`),
			want: []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "never answers", protocol: config.ProtocolAuto, wantEra: EraLegacy,
			discover: func(_ http.ResponseWriter, r *http.Request, _ *jsonrpc.Message) { <-r.Context().Done() },
			want:     []string{"server/discover", "initialize", "notifications/initialized"}},
		{name: "401 fails", protocol: config.ProtocolAuto, discover: bare(401), wantErr: "401", want: []string{"server/discover"}},
		{name: "403 with a JSON-RPC body fails", protocol: config.ProtocolAuto, discover: jsonErr(403, -32000, "forbidden"), wantErr: "403", want: []string{"server/discover"}},
		{name: "500 fails", protocol: config.ProtocolAuto, discover: bare(500), wantErr: "500", want: []string{"server/discover"}},
		{name: "modern pinned, legacy server fails", protocol: config.ProtocolModern, discover: bare(400), wantErr: "does not speak MCP 2026-07-28", want: []string{"server/discover"}},
		{name: "legacy pinned", protocol: config.ProtocolLegacy, wantEra: EraLegacy, want: []string{"initialize", "notifications/initialized"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &modernHTTP{t: t, discover: tt.discover}
			hs := httptest.NewServer(f)
			t.Cleanup(hs.Close)
			srv := testServer("http", hs.URL)
			srv.Protocol = tt.protocol
			c := newTestClient(t, srv, ClientOptions{ProbeTimeout: testProbeTimeout})
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			err := c.Connect(ctx)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Connect = %v, want an error with %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Connect: %v", err)
			} else if got := c.Era(); got != tt.wantEra {
				t.Errorf("Era = %q, want %q", got, tt.wantEra)
			}
			if tt.wantEra == EraModern {
				// The listen stream opens once modern; it is not part of
				// the detection.
				c.Close(ctx)
			}
			got := slices.DeleteFunc(f.seen(), func(m string) bool { return m == "subscriptions/listen" })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("methods the server saw (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConnect_GoSDKHTTP: the official handler, stateless (modern only)
// and stateful (legacy only: it lists no modern version in
// server/discover).
func TestConnect_GoSDKHTTP(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			server := newSDKServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: stateless})
			hs := httptest.NewServer(h)
			t.Cleanup(hs.Close)
			srv := testServer("http", hs.URL)
			srv.Protocol = config.ProtocolAuto
			c := newTestClient(t, srv, ClientOptions{})
			mustConnect(t, c)
			want := EraLegacy
			if stateless {
				want = EraModern
			}
			if got := c.Era(); got != want {
				t.Errorf("Era = %q, want %q", got, want)
			}
			res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), nil)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !strings.Contains(string(res), `"text":"echo: hi"`) || strings.Contains(string(res), "resultType") {
				t.Errorf("result = %s", res)
			}
			tools, err := c.ListTools(callCtx(t))
			if err != nil || len(tools) != 1 {
				t.Fatalf("ListTools = %s, %v", tools, err)
			}
			if _, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"nope","arguments":{}}`), nil); err == nil {
				t.Error("a call of an unknown tool succeeded")
			}
		})
	}
}

// recordingModern is a modern HTTP server that records each POST and
// answers as its handler says; listen requests get an event stream that
// the test drives through listens.
type recordingModern struct {
	t       *testing.T
	mu      sync.Mutex
	posts   []recorded
	answer  func(m *jsonrpc.Message) (status int, body *jsonrpc.Message)
	listens chan *openListen
}

type recorded struct {
	Method string
	Header http.Header
	Params json.RawMessage
}

// openListen is one listen request the server holds open.
type openListen struct {
	id      jsonrpc.ID
	filter  json.RawMessage
	send    chan *jsonrpc.Message // written to the stream; a result ends it
	drop    chan struct{}         // closed to end the stream without a result
	clientG <-chan struct{}       // closed when the client went away
}

func (f *recordingModern) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.t.Errorf("modern server got %s", r.Method)
		http.Error(w, "no", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.ParseOne(body)
	if err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.posts = append(f.posts, recorded{Method: m.Method, Header: r.Header.Clone(), Params: m.Params})
	f.mu.Unlock()
	switch m.Method {
	case "server/discover":
		writeJSON(w, encode(f.t, jsonrpc.NewResult(m.ID, json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rec","version":"1"}}}`))))
		return
	case "subscriptions/listen":
		filter, _, _ := rawjson.Get(m.Params, "notifications")
		l := &openListen{id: m.ID, filter: filter, send: make(chan *jsonrpc.Message), drop: make(chan struct{}), clientG: r.Context().Done()}
		startSSE(w)
		select {
		case f.listens <- l:
		case <-r.Context().Done():
			return
		}
		for {
			select {
			case msg := <-l.send:
				writeEvent(f.t, w, sse.Event{Data: encode(f.t, msg)})
				if msg.IsResponse() {
					return
				}
			case <-l.drop:
				return
			case <-r.Context().Done():
				return
			}
		}
	}
	status, resp := f.answer(m)
	if resp == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(encode(f.t, resp))
}

func (f *recordingModern) last(method string) recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.posts) - 1; i >= 0; i-- {
		if f.posts[i].Method == method {
			return f.posts[i]
		}
	}
	return recorded{}
}

func (f *recordingModern) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.posts {
		if p.Method != "subscriptions/listen" {
			out = append(out, p.Method)
		}
	}
	return out
}

// nextListen waits for the client's next listen request.
func (f *recordingModern) nextListen(t *testing.T) *openListen {
	t.Helper()
	select {
	case l := <-f.listens:
		return l
	case <-time.After(waitLimit):
		t.Fatal("no subscriptions/listen")
		return nil
	}
}

func ack(l *openListen) *jsonrpc.Message {
	p, _ := json.Marshal(map[string]any{"_meta": map[string]any{metaSubscriptionID: l.id}, "notifications": map[string]any{"toolsListChanged": true}})
	return jsonrpc.NewNotification("notifications/subscriptions/acknowledged", p)
}

func listenNote(l *openListen, method string, extra map[string]any) *jsonrpc.Message {
	p := map[string]any{"_meta": map[string]any{metaSubscriptionID: l.id}}
	for k, v := range extra {
		p[k] = v
	}
	b, _ := json.Marshal(p)
	return jsonrpc.NewNotification(method, b)
}

func startRecordingModern(t *testing.T, answer func(m *jsonrpc.Message) (int, *jsonrpc.Message), opts ClientOptions, forward ...string) (*recordingModern, *Client) {
	t.Helper()
	f := &recordingModern{t: t, answer: answer, listens: make(chan *openListen, 4)}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	srv := testServer("http", hs.URL)
	srv.Protocol = config.ProtocolAuto
	srv.ForwardHeaders = forward
	c := newTestClient(t, srv, opts)
	mustConnect(t, c)
	if c.Era() != EraModern {
		t.Fatalf("Era = %q", c.Era())
	}
	return f, c
}

func TestModernHTTP_Requests(t *testing.T) {
	const toolsList = `{"resultType":"complete","ttlMs":60000,"cacheScope":"public","tools":[{"name":"wéather","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},{"name":"bad","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}}]}`
	answer := func(m *jsonrpc.Message) (int, *jsonrpc.Message) {
		name, _ := rawjson.String(m.Params, "name")
		switch {
		case m.Method == "tools/list":
			return 200, jsonrpc.NewResult(m.ID, json.RawMessage(toolsList))
		case m.Method == "tools/call" && name == "ask":
			return 200, jsonrpc.NewResult(m.ID, json.RawMessage(`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}}}`))
		case m.Method == "tools/call" && name == "old":
			return 400, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32022, Message: "unsupported protocol version", Data: json.RawMessage(`{"supported":["2099-01-01"]}`)})
		case m.Method == "tools/call" && name == "caps":
			return 400, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32021, Message: "missing capability"})
		case m.Method == "tools/call":
			return 200, jsonrpc.NewResult(m.ID, json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"ok"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rec"}}}`))
		case m.Method == "completion/complete":
			return 404, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32601, Message: "method not found"})
		case m.Method == "resources/read":
			return 400, nil
		}
		return 200, jsonrpc.NewResult(m.ID, json.RawMessage(`{}`))
	}
	f, c := startRecordingModern(t, answer, ClientOptions{
		Name:               "rec",
		ClientInfo:         json.RawMessage(`{"name":"mcpgw","version":"test"}`),
		ModernCapabilities: []string{"sampling"},
	}, "Mcp-Param-Region", "Mcp-Param-Other", "Mcp-Name", "X-Request-Id")
	ctx := callCtx(t)

	if _, err := c.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	// What the era has no request for is answered without the server.
	for _, m := range []struct{ method, params string }{
		{"ping", ``}, {"logging/setLevel", `{"level":"warning"}`},
		{"resources/subscribe", `{"uri":"file:///a"}`}, {"resources/unsubscribe", `{"uri":"file:///a"}`},
	} {
		res, err := c.Call(ctx, m.method, json.RawMessage(m.params), nil)
		if err != nil || string(res) != `{}` {
			t.Errorf("%s = %s, %v; want {}", m.method, res, err)
		}
	}
	if got := c.LogLevel(); got != "warning" {
		t.Errorf("LogLevel = %q, want warning", got)
	}

	// A hostile client's headers, forwarded by name, never stand in for
	// the request metadata.
	hooks := &CallHooks{Capabilities: json.RawMessage(`{"sampling":{},"elicitation":{"form":{}}}`), Header: http.Header{
		"Mcp-Param-Region": {"forged"}, "Mcp-Param-Other": {"forged"}, "Mcp-Name": {"forged"}, "X-Request-Id": {"r1"},
	}}
	params := `{"name":"wéather","arguments":{"region":"eu west"},"_meta":{"progressToken":"p1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientInfo":{"name":"forged"},"app.example/k":1}}`
	res, err := c.Call(ctx, "tools/call", json.RawMessage(params), hooks)
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != `{"content":[{"type":"text","text":"ok"}]}` {
		t.Errorf("result = %s", res)
	}
	got := f.last("tools/call")
	meta, _, _ := rawjson.Get(got.Params, "_meta")
	var gotMeta map[string]json.RawMessage
	json.Unmarshal(meta, &gotMeta)
	wantMeta := map[string]string{
		"progressToken": `"p1"`,
		"app.example/k": `1`,
		"io.modelcontextprotocol/protocolVersion":    `"2026-07-28"`,
		"io.modelcontextprotocol/clientInfo":         `{"name":"mcpgw","version":"test"}`,
		"io.modelcontextprotocol/clientCapabilities": `{"sampling":{}}`,
		"io.modelcontextprotocol/logLevel":           `"warning"`,
	}
	for k, v := range wantMeta {
		if string(gotMeta[k]) != v {
			t.Errorf("_meta[%s] = %s, want %s", k, gotMeta[k], v)
		}
	}
	if _, ok := gotMeta["traceparent"]; !ok {
		t.Error("_meta lost the traceparent")
	}
	if len(gotMeta) != len(wantMeta)+1 {
		t.Errorf("_meta = %s, want only %d members", meta, len(wantMeta)+1)
	}
	wantHeaders := map[string]string{
		"Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method":           "tools/call",
		"Mcp-Name":             "=?base64?d8OpYXRoZXI=?=",
		"Mcp-Param-Region":     "eu west",
		"Mcp-Param-Other":      "",
		"Mcp-Session-Id":       "",
		"X-Request-Id":         "r1",
	}
	for k, v := range wantHeaders {
		if g := got.Header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}

	// A per-request log level wins over the remembered one; a tool with
	// invalid annotations gets no Mcp-Param headers.
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"bad","arguments":{"n":1}}`), &CallHooks{LogLevel: "debug"}); err != nil {
		t.Fatal(err)
	}
	got = f.last("tools/call")
	if lvl, _, _ := rawjson.Get(got.Params, "_meta"); !strings.Contains(string(lvl), `"io.modelcontextprotocol/logLevel":"debug"`) || got.Header.Get("Mcp-Param-N") != "" {
		t.Errorf("call of bad: _meta %s, Mcp-Param-N %q", lvl, got.Header.Get("Mcp-Param-N"))
	}
	if _, err := c.Call(ctx, "resources/read", json.RawMessage(`{"uri":"file:///x y"}`), nil); err == nil {
		t.Error("resources/read answered 400 without a body succeeded")
	}
	if h := f.last("resources/read").Header; h.Get("Mcp-Name") != "file:///x y" || h.Get("Mcp-Method") != "resources/read" {
		t.Errorf("resources/read headers: %v", h)
	}
	// The tasks extension's methods are routed by their task id.
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if _, err := c.Call(ctx, m, json.RawMessage(`{"taskId":"up-7"}`), nil); err != nil {
			t.Fatal(err)
		}
		if h := f.last(m).Header; h.Get("Mcp-Name") != "up-7" || h.Get("Mcp-Method") != m {
			t.Errorf("%s headers: %v", m, h)
		}
	}

	errTests := []struct {
		method, params string
		code           int
		msg            string
	}{
		{"tools/call", `{"name":"ask","arguments":{}}`, jsonrpc.CodeInternalError, "asked for input"},
		{"tools/call", `{"name":"old","arguments":{}}`, jsonrpc.CodeInternalError, `server "rec" refused protocol version 2026-07-28`},
		{"tools/call", `{"name":"caps","arguments":{}}`, -32021, "missing capability"},
		{"completion/complete", `{}`, jsonrpc.CodeMethodNotFound, "method not found"},
	}
	for _, tt := range errTests {
		_, err := c.Call(ctx, tt.method, json.RawMessage(tt.params), nil)
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) || jerr.Code != tt.code || !strings.Contains(jerr.Message, tt.msg) {
			t.Errorf("%s %s = %v, want error %d with %q", tt.method, tt.params, err, tt.code, tt.msg)
		}
	}
	if err := c.Notify(ctx, "notifications/roots/list_changed", nil); err != nil {
		t.Errorf("Notify: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"server/discover", "tools/list", "tools/call", "tools/call", "resources/read", "tasks/get", "tasks/update", "tasks/cancel", "tools/call", "tools/call", "tools/call", "completion/complete"}
	if diff := cmp.Diff(want, f.methods()); diff != "" {
		t.Errorf("POSTs (-want +got):\n%s", diff)
	}
}

// TestModernHTTP_Listen: the listen stream opens after discover, its
// notifications reach OnNotification without the subscriptionId, a drop
// or a listen result re-opens it, and a subscription change opens a new
// one with the new filter before the old one is closed.
func TestModernHTTP_Listen(t *testing.T) {
	notes := make(chan *jsonrpc.Message, 10)
	f, c := startRecordingModern(t, func(m *jsonrpc.Message) (int, *jsonrpc.Message) {
		return 200, jsonrpc.NewResult(m.ID, json.RawMessage(`{}`))
	}, ClientOptions{OnNotification: func(m *jsonrpc.Message) { notes <- m }})
	ctx := callCtx(t)
	next := func() *jsonrpc.Message {
		t.Helper()
		select {
		case m := <-notes:
			return m
		case <-time.After(waitLimit):
			t.Fatal("no notification")
			return nil
		}
	}

	l1 := f.nextListen(t)
	if string(l1.filter) != `{"promptsListChanged":true,"resourceSubscriptions":[],"resourcesListChanged":true,"toolsListChanged":true}` {
		t.Errorf("first filter = %s", l1.filter)
	}
	if h := f.last("subscriptions/listen").Header; h.Get("Mcp-Method") != "subscriptions/listen" || h.Get("Mcp-Protocol-Version") != ModernProtocolVersion {
		t.Errorf("listen headers: %v", h)
	}
	l1.send <- ack(l1)
	l1.send <- listenNote(l1, "notifications/tools/list_changed", nil)
	if m := next(); m.Method != "notifications/tools/list_changed" || string(m.Params) != `{}` {
		t.Errorf("notification = %s %s", m.Method, m.Params)
	}

	// Dropped without a result: opened again.
	close(l1.drop)
	l2 := f.nextListen(t)
	l2.send <- ack(l2)

	// A subscription: a new listen with the URI, and the old one stays
	// open until the new one is acknowledged.
	if _, err := c.Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"file:///watched"}`), nil); err != nil {
		t.Fatal(err)
	}
	l3 := f.nextListen(t)
	if !strings.Contains(string(l3.filter), `"resourceSubscriptions":["file:///watched"]`) {
		t.Errorf("filter after subscribe = %s", l3.filter)
	}
	select {
	case <-l2.clientG:
		t.Fatal("the old listen closed before the new one was acknowledged")
	default:
	}
	l2.send <- listenNote(l2, "notifications/resources/updated", map[string]any{"uri": "file:///other"})
	if m := next(); m.Method != "notifications/resources/updated" {
		t.Errorf("notification on the old stream = %s", m.Method)
	}
	l3.send <- ack(l3)
	select {
	case <-l2.clientG:
	case <-time.After(waitLimit):
		t.Fatal("the old listen stayed open after the new one was acknowledged")
	}
	l3.send <- listenNote(l3, "notifications/resources/updated", map[string]any{"uri": "file:///watched"})
	if m := next(); m.Method != "notifications/resources/updated" || string(m.Params) != `{"uri":"file:///watched"}` {
		t.Errorf("notification = %s %s", m.Method, m.Params)
	}

	// A graceful close (the listen result): opened again.
	res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]any{metaSubscriptionID: l3.id}})
	l3.send <- jsonrpc.NewResult(l3.id, res)
	l4 := f.nextListen(t)
	if !strings.Contains(string(l4.filter), "file:///watched") {
		t.Errorf("filter after re-open = %s", l4.filter)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l4.clientG:
	case <-time.After(waitLimit):
		t.Fatal("Close left the listen stream open")
	}
}

// TestModernStdio_Listen runs the listen stream over an in-process
// transport without request streams, as stdio is: the notifications
// carry only the subscriptionId, the ack names the listen by it, and
// request-scoped progress still goes to the call's hooks.
func TestModernStdio_Listen(t *testing.T) {
	listens := make(chan *jsonrpc.Message, 4)
	f := newFake(func(f *fakeTransport, m *jsonrpc.Message) error {
		switch m.Method {
		case "server/discover":
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}}}`)), related{})
		case "subscriptions/listen":
			listens <- m
		case "tools/call":
			tok := progressToken(m.Params)
			go func() {
				f.recv(jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":`+tok+`,"progress":1}`)), related{})
				f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"resultType":"complete","content":[]}`)), related{})
			}()
		}
		return nil
	})
	notes := make(chan *jsonrpc.Message, 10)
	c := connect(t, f, ClientOptions{Name: "fake", Protocol: config.ProtocolAuto, OnNotification: func(m *jsonrpc.Message) { notes <- m }})
	if c.Era() != EraModern {
		t.Fatalf("Era = %q", c.Era())
	}
	var l *jsonrpc.Message
	select {
	case l = <-listens:
	case <-time.After(waitLimit):
		t.Fatal("no listen")
	}
	sub := func(method string) *jsonrpc.Message {
		p, _ := json.Marshal(map[string]any{"_meta": map[string]any{metaSubscriptionID: l.ID}})
		return jsonrpc.NewNotification(method, p)
	}
	f.recv(sub("notifications/subscriptions/acknowledged"), related{})
	f.recv(sub("notifications/prompts/list_changed"), related{})
	select {
	case m := <-notes:
		if m.Method != "notifications/prompts/list_changed" || string(m.Params) != `{}` {
			t.Errorf("notification = %s %s", m.Method, m.Params)
		}
	case <-time.After(waitLimit):
		t.Fatal("no notification")
	}
	var progress []string
	var mu sync.Mutex
	hooks := &CallHooks{Notify: func(m *jsonrpc.Message) { mu.Lock(); progress = append(progress, m.Method); mu.Unlock() }}
	if _, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"x","_meta":{"progressToken":42}}`), hooks); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"notifications/progress"}, progress); diff != "" {
		t.Errorf("call notifications (-want +got):\n%s", diff)
	}
	if len(notes) != 0 {
		t.Errorf("a call's progress went to OnNotification")
	}
}

// TestModernStdio_ListenReplaced: when the subscriptions change, the
// listen over stdio is cancelled and the next one is sent only once the
// server has answered the cancelled one (a server that cleans up the old
// one after the new one arrived would forget the new one).
func TestModernStdio_ListenReplaced(t *testing.T) {
	var mu sync.Mutex
	var order []string
	listens := make(chan *jsonrpc.Message, 4)
	cancelled := make(chan string, 4)
	f := newFake(func(f *fakeTransport, m *jsonrpc.Message) error {
		mu.Lock()
		defer mu.Unlock()
		switch m.Method {
		case "server/discover":
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{"supportedVersions":["2026-07-28"],"capabilities":{"resources":{"subscribe":true}}}`)), related{})
		case "subscriptions/listen":
			order = append(order, "listen "+m.ID.String())
			listens <- m
		case "notifications/cancelled":
			id, _, _ := rawjson.Get(m.Params, "requestId")
			order = append(order, "cancelled "+string(id))
			cancelled <- string(id)
		}
		return nil
	})
	c := connect(t, f, ClientOptions{Name: "fake", Protocol: config.ProtocolAuto})
	first := <-listens
	if _, err := c.Call(callCtx(t), "resources/subscribe", json.RawMessage(`{"uri":"test://a"}`), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(waitLimit):
		t.Fatal("the first listen was not cancelled")
	}
	mu.Lock()
	order = append(order, "answered "+first.ID.String())
	mu.Unlock()
	f.recv(jsonrpc.NewResult(first.ID, json.RawMessage(`{}`)), related{})
	var second *jsonrpc.Message
	select {
	case second = <-listens:
	case <-time.After(waitLimit):
		t.Fatal("no second listen")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"listen " + first.ID.String(), "cancelled " + first.ID.String(), "answered " + first.ID.String(), "listen " + second.ID.String()}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
