package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeServer is an MCP server over streamable HTTP on loopback with two
// tools: add_numbers, which records the arguments it got, and broken, whose
// result is an error.
type fakeServer struct {
	url string

	mu  sync.Mutex
	got []map[string]any
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "add_numbers", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			f.mu.Lock()
			f.got = append(f.got, args)
			f.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "8"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "broken", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewUnstartedServer(h)
	ts.Start() // httptest listens on 127.0.0.1:0
	t.Cleanup(ts.Close)
	f.url = ts.URL + "/mcp"
	return f
}

func (f *fakeServer) calls() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.got...)
}

func TestRun(t *testing.T) {
	f := newFakeServer(t)
	tests := []struct {
		name      string
		args      []string
		wantErr   string // empty: run succeeds
		wantOut   string // in stdout when it succeeds
		wantCalls int    // calls of add_numbers the fake saw
	}{
		{name: "list only", args: []string{"-url", f.url}, wantOut: "tools: add_numbers, broken"},
		{name: "call", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `{"a":5,"b":3}`}, wantOut: "called add_numbers: 1 content block(s)", wantCalls: 1},
		{name: "unknown tool", args: []string{"-url", f.url, "-tool", "nope"}, wantErr: `tool "nope" is not among the 2 tools listed`},
		{name: "error result", args: []string{"-url", f.url, "-tool", "broken"}, wantErr: `tool "broken" answered with isError: true`},
		{name: "args not an object", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `[1]`}, wantErr: "-args: want a JSON object"},
		{name: "args not JSON", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `{"secret":`}, wantErr: "-args: want a JSON object"},
		{name: "no url", args: nil, wantErr: "-url is required"},
		{name: "not loopback", args: []string{"-url", "http://192.0.2.1/mcp"}, wantErr: `-url: host "192.0.2.1" is not loopback`},
		{name: "not http", args: []string{"-url", "file:///etc/passwd"}, wantErr: "-url: want an http URL"},
		{name: "extra argument", args: []string{"-url", f.url, "more"}, wantErr: `unexpected argument "more"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.calls())
			var out bytes.Buffer
			err := run(t.Context(), tt.args, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run() error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("run() error %q repeats the tool arguments", err)
				}
			} else {
				if err != nil {
					t.Fatalf("run() error = %v", err)
				}
				if !strings.Contains(out.String(), tt.wantOut) {
					t.Errorf("run() printed %q, want it to contain %q", out.String(), tt.wantOut)
				}
			}
			calls := f.calls()[before:]
			if len(calls) != tt.wantCalls {
				t.Fatalf("the fake got %d calls of add_numbers, want %d", len(calls), tt.wantCalls)
			}
			for _, c := range calls {
				if c["a"] != 5.0 || c["b"] != 3.0 {
					t.Errorf("the fake got arguments %v, want a=5, b=3", c)
				}
			}
		})
	}
}

// fakeGateway stands in for mcpgw in front of a server that needs an OAuth
// connection. Before the connection it lists only "connect", whose call
// answers a connect URL in the shape under test; following that URL (start
// → the authorization server's authorize → callback, with a cookie set at
// the start and needed at the callback, as a browser keeps it) connects,
// after which "test-tool" is listed. test-tool asks for a connection again
// stepUps more times before it answers, as a server wanting more scopes does.
type fakeGateway struct {
	gatewayConfig
	base string // http://127.0.0.1:PORT
	srv  *mcp.Server

	mu        sync.Mutex
	connected bool
	added     bool
	callbacks int
	asked     int
	pending   map[string]*mcp.ServerSession // elicitation id → the session to tell it is complete
	retries   []*mcp.CallToolParamsRaw      // test-tool calls that carried a requestState
	served    int                           // test-tool calls answered with a result
}

// gatewayConfig is what a test sets of a fakeGateway.
type gatewayConfig struct {
	shape          string // "url-elicitation" (-32042), "input-required" or "error" (-31007)
	connectURL     string // the URL the tools answer with; empty: base + "/oauth/start/s1"; "/x": base + "/x"
	callbackStatus int    // the callback's status; zero: 200
	stepUps        int
	lateTool       bool   // test-tool appears only after the first list that follows the connection
	noComplete     bool   // the callback sends no notifications/elicitation/complete
	listAsks       bool   // before the connection, tools/list answers with the connect URL too
	bearer         string // non-empty: /mcp wants Authorization: Bearer <bearer>, and the browser's URLs must not get it
	refuseFirst    bool   // the first connection brings no test-tool (the server refused the account)
}

func newFakeGateway(t *testing.T, cfg gatewayConfig) *fakeGateway {
	t.Helper()
	g := &fakeGateway{gatewayConfig: cfg, pending: map[string]*mcp.ServerSession{}}
	g.srv = mcp.NewServer(&mcp.Implementation{Name: "fake-mcpgw", Version: "1"}, nil)
	g.srv.AddTool(&mcp.Tool{Name: "connect", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return g.ask(req)
		})
	g.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			g.mu.Lock()
			listAsks := g.listAsks && !g.connected
			g.mu.Unlock()
			if method == "tools/list" && listAsks {
				_, err := g.ask(&mcp.CallToolRequest{Session: req.GetSession().(*mcp.ServerSession)})
				return nil, err
			}
			res, err := next(ctx, method, req)
			if method == "tools/list" {
				g.mu.Lock()
				late := g.connected && !g.added
				g.added = g.added || late
				g.mu.Unlock()
				if late {
					g.addTestTool() // after this answer: the driver must wait for list_changed
				}
			}
			return res, err
		}
	})
	mux := http.NewServeMux()
	// A 2026-07-28 client gets input_required results from a stateless
	// server (the SDK's stateful one negotiates 2025-11-25).
	hopts := &mcp.StreamableHTTPOptions{Stateless: g.shape == "input-required"}
	var mcpHandler http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.srv }, hopts)
	if g.bearer != "" {
		next := mcpHandler
		mcpHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+g.bearer {
				http.Error(w, "who are you?", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux.Handle("/mcp", mcpHandler)
	mux.HandleFunc("/oauth/start/s1", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "fake_session", Value: "s1", Path: "/"})
		http.Redirect(w, r, "/as/authorize?state=st1", http.StatusFound)
	})
	mux.HandleFunc("/oauth/start/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://192.0.2.1/authorize", http.StatusFound)
	})
	mux.HandleFunc("/as/authorize", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/oauth/callback?code=c1&state="+r.URL.Query().Get("state"), http.StatusFound)
	})
	mux.HandleFunc("/oauth/callback", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "the browser sent mcpgw's token", http.StatusBadRequest)
			return
		}
		if c, err := r.Cookie("fake_session"); err != nil || c.Value != "s1" || r.URL.Query().Get("state") != "st1" {
			http.Error(w, "no session cookie or wrong state", http.StatusBadRequest)
			return
		}
		if g.callbackStatus != 0 {
			http.Error(w, "the authorization failed", g.callbackStatus)
			return
		}
		g.mu.Lock()
		g.callbacks++
		if g.refuseFirst && g.callbacks == 1 {
			g.mu.Unlock()
			fmt.Fprint(w, "<html><body>Connected. You can close this window.</body></html>")
			return
		}
		add := !g.connected && !g.lateTool
		g.connected = true
		g.added = g.added || add
		pending := g.pending
		g.pending = map[string]*mcp.ServerSession{}
		g.mu.Unlock()
		if add {
			g.addTestTool()
		}
		if !g.noComplete {
			for id, ss := range pending {
				if err := ss.NotifyElicitationComplete(r.Context(), &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
					t.Errorf("notifying that elicitation %s is complete: %v", id, err)
				}
			}
		}
		fmt.Fprint(w, "<html><body>Connected. You can close this window.</body></html>")
	})
	ts := httptest.NewServer(mux) // on 127.0.0.1:0
	t.Cleanup(ts.Close)
	g.base = ts.URL
	switch {
	case g.connectURL == "":
		g.connectURL = g.base + "/oauth/start/s1"
	case strings.HasPrefix(g.connectURL, "/"):
		g.connectURL = g.base + g.connectURL
	}
	return g
}

func (g *fakeGateway) addTestTool() {
	g.srv.AddTool(&mcp.Tool{Name: "test-tool", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			g.mu.Lock()
			if req.Params.RequestState != "" {
				g.retries = append(g.retries, req.Params)
			}
			again := g.stepUps > 0
			if again {
				g.stepUps--
			}
			g.mu.Unlock()
			if again {
				return g.ask(req)
			}
			g.mu.Lock()
			g.served++
			g.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "test"}}}, nil
		})
}

// ask answers a call with the connect URL, in the fake's shape.
func (g *fakeGateway) ask(req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g.mu.Lock()
	g.asked++
	id := fmt.Sprintf("el-%d", g.asked)
	g.mu.Unlock()
	switch g.shape {
	case "url-elicitation":
		g.mu.Lock()
		g.pending[id] = req.Session
		g.mu.Unlock()
		return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{
			Mode: "url", ElicitationID: id, URL: g.connectURL, Message: "Connect your account at fake",
		}})
	case "input-required":
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"connect-fake": &mcp.ElicitParams{
				Mode: "url", URL: g.connectURL, Message: "Connect your account at fake",
			}},
			RequestState: "state-" + id,
		}, nil
	default:
		data, err := json.Marshal(map[string]string{"server": "fake", "url": g.connectURL})
		if err != nil {
			return nil, err
		}
		return nil, &jsonrpc.Error{Code: -31007, Message: "connect your account at fake: " + g.connectURL, Data: data}
	}
}

func (g *fakeGateway) counts() (callbacks, served int, retries []*mcp.CallToolParamsRaw) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.callbacks, g.served, append([]*mcp.CallToolParamsRaw(nil), g.retries...)
}

func TestRun_Connect(t *testing.T) {
	tests := []struct {
		name          string
		gw            gatewayConfig
		args          []string // after -url
		env           string   // $DRIVER_TEST_TOKEN
		wantErr       string   // empty: run succeeds and test-tool was served once
		wantCallbacks int
	}{
		{
			name: "url elicitation (-32042), then a step-up",
			gw:   gatewayConfig{shape: "url-elicitation", stepUps: 1},
			args: []string{"-connect", "-protocol", "2025-11-25", "-elicit-url", "-tool", "test-tool"}, wantCallbacks: 2,
		},
		{
			name: "input_required result, then a step-up",
			gw:   gatewayConfig{shape: "input-required", stepUps: 1},
			args: []string{"-connect", "-tool", "test-tool"}, wantCallbacks: 2,
		},
		{
			name: "error -31007, then a step-up",
			gw:   gatewayConfig{shape: "error", stepUps: 1},
			args: []string{"-connect", "-protocol", "2025-11-25", "-tool", "test-tool"}, wantCallbacks: 2,
		},
		{
			name: "the tool appears only with list_changed",
			gw:   gatewayConfig{shape: "error", lateTool: true},
			args: []string{"-connect", "-protocol", "2025-11-25", "-tool", "test-tool"}, wantCallbacks: 1,
		},
		{
			name: "the tool appears only with list_changed, 2026",
			gw:   gatewayConfig{shape: "input-required", lateTool: true},
			args: []string{"-connect", "-tool", "test-tool"}, wantCallbacks: 1,
		},
		{
			name: "the list asks for a connection (-31007)",
			gw:   gatewayConfig{shape: "error", listAsks: true},
			args: []string{"-connect", "-protocol", "2025-11-25", "-tool", "test-tool"}, wantCallbacks: 1,
		},
		{
			name: "the list asks for a connection (-32042)",
			gw:   gatewayConfig{shape: "url-elicitation", listAsks: true},
			args: []string{"-connect", "-protocol", "2025-11-25", "-elicit-url", "-tool", "test-tool"}, wantCallbacks: 1,
		},
		{
			name: "the list asks for a connection, without -connect",
			gw:   gatewayConfig{shape: "error", listAsks: true},
			args: []string{"-protocol", "2025-11-25"}, wantErr: "listing the tools asks for a connection (-31007); run with -connect to open it",
		},
		{
			name: "a principal's token",
			gw:   gatewayConfig{shape: "input-required", bearer: "user-key-1"},
			env:  "user-key-1",
			args: []string{"-connect", "-bearer-env", "DRIVER_TEST_TOKEN", "-tool", "test-tool"}, wantCallbacks: 1,
		},
		{
			name: "no token in -bearer-env",
			gw:   gatewayConfig{shape: "input-required", bearer: "user-key-1"},
			args: []string{"-connect", "-bearer-env", "DRIVER_TEST_TOKEN", "-tool", "test-tool"}, wantErr: "-bearer-env: $DRIVER_TEST_TOKEN is empty",
		},
		{
			name: "the first connection is refused: connect again",
			gw:   gatewayConfig{shape: "error", refuseFirst: true},
			args: []string{"-connect", "-connect-wait", "200ms", "-protocol", "2025-11-25", "-tool", "test-tool"}, wantCallbacks: 2,
		},
		{
			name:    "every connection is refused",
			gw:      gatewayConfig{shape: "error", refuseFirst: true},
			args:    []string{"-connect", "-connect-wait", "200ms", "-connect-max", "1", "-protocol", "2025-11-25", "-tool", "test-tool"},
			wantErr: `tool "test-tool" is not listed after 1 connect(s), and no notifications/tools/list_changed came within 200ms`, wantCallbacks: 1,
		},
		{
			name: "without -connect the tool is missing",
			gw:   gatewayConfig{shape: "error"},
			args: []string{"-tool", "test-tool"}, wantErr: `tool "test-tool" is not among the 1 tools listed`,
		},
		{
			name: "connect URL not on loopback",
			gw:   gatewayConfig{shape: "error", connectURL: "http://192.0.2.1/oauth/start/s1"},
			args: []string{"-connect", "-tool", "test-tool"}, wantErr: `connect URL: host "192.0.2.1" is not loopback`,
		},
		{
			name: "connect URL not http",
			gw:   gatewayConfig{shape: "input-required", connectURL: "file:///etc/passwd"},
			args: []string{"-connect", "-tool", "test-tool"}, wantErr: "connect URL: want an http URL",
		},
		{
			name: "redirect away from loopback",
			gw:   gatewayConfig{shape: "error", connectURL: "/oauth/start/elsewhere"},
			args: []string{"-connect", "-tool", "test-tool"}, wantErr: `connect URL: redirected to host "192.0.2.1", which is not loopback`,
		},
		{
			name: "the callback fails",
			gw:   gatewayConfig{shape: "input-required", callbackStatus: http.StatusBadGateway},
			args: []string{"-connect", "-tool", "test-tool"}, wantErr: "connect URL: the last answer was 502 Bad Gateway",
		},
		{
			name: "asks for a connection for ever",
			gw:   gatewayConfig{shape: "error", stepUps: 10},
			args: []string{"-connect", "-connect-max", "3", "-tool", "test-tool"}, wantErr: `tool "test-tool" still asks for a connection after 3 connects`, wantCallbacks: 4,
		},
		{
			name: "no elicitation/complete",
			gw:   gatewayConfig{shape: "url-elicitation", noComplete: true},
			args: []string{"-connect", "-protocol", "2025-11-25", "-elicit-url", "-connect-wait", "200ms", "-tool", "test-tool"}, wantErr: "no notifications/elicitation/complete for elicitation el-1 within 200ms", wantCallbacks: 1,
		},
		{
			name: "bad -connect-max",
			gw:   gatewayConfig{shape: "error"},
			args: []string{"-connect", "-connect-max", "0", "-tool", "test-tool"}, wantErr: "-connect-max: want at least 1",
		},
		{
			name: "bad -protocol",
			gw:   gatewayConfig{shape: "error"},
			args: []string{"-protocol", "2024-01-01"}, wantErr: `-protocol: "2024-01-01" is not one of 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t, tt.gw)
			t.Setenv("DRIVER_TEST_TOKEN", tt.env)
			var out bytes.Buffer
			err := run(t.Context(), append([]string{"-url", g.base + "/mcp", "-timeout", "20s"}, tt.args...), &out)
			callbacks, served, retries := g.counts()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run() error = %v, want one containing %q; printed:\n%s", err, tt.wantErr, out.String())
				}
				if strings.Contains(err.Error(), "/oauth/start/") {
					t.Errorf("run() error %q repeats the connect URL's path", err)
				}
			} else {
				if err != nil {
					t.Fatalf("run() error = %v; printed:\n%s", err, out.String())
				}
				if !strings.Contains(out.String(), "called test-tool: 1 content block(s)") || served != 1 {
					t.Errorf("test-tool served %d times, printed %q; want it called once", served, out.String())
				}
				// A tool that comes late is listed again after list_changed.
				if n := strings.Count(out.String(), "tools after connecting:"); tt.gw.lateTool && n != 2 {
					t.Errorf("printed %d lists after connecting, want 2:\n%s", n, out.String())
				}
			}
			if callbacks != tt.wantCallbacks {
				t.Errorf("the fake's callback connected %d times, want %d", callbacks, tt.wantCallbacks)
			}
			// A 2026 client echoes the requestState and accepts the URL elicitation.
			for _, p := range retries {
				resp, ok := p.InputResponses["connect-fake"].(*mcp.ElicitResult)
				if !strings.HasPrefix(p.RequestState, "state-") || !ok || resp.Action != "accept" {
					t.Errorf("a retry carried requestState %q and inputResponses %v, want the state and an accept", p.RequestState, p.InputResponses)
				}
			}
			if tt.gw.shape == "input-required" && tt.gw.stepUps > 0 && tt.wantErr == "" && len(retries) != tt.gw.stepUps {
				t.Errorf("the fake saw %d retries with a requestState, want %d", len(retries), tt.gw.stepUps)
			}
		})
	}
}

// TestRun_ConnectToolMissing: with -connect, a tool that is not listed and
// no connect tool is an error naming both.
func TestRun_ConnectToolMissing(t *testing.T) {
	f := newFakeServer(t)
	err := run(t.Context(), []string{"-url", f.url, "-connect", "-tool", "nope"}, io.Discard)
	want := `tool "nope" is not among the 2 tools listed, nor is the connect tool "connect"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("run() error = %v, want one containing %q", err, want)
	}
}

// FuzzConnectRequestOf: whatever mcpgw answers, the parse of a connect URL
// neither panics nor yields a request without URLs.
func FuzzConnectRequestOf(f *testing.F) {
	f.Add(int64(-32042), []byte(`{"elicitations":[{"mode":"url","elicitationId":"e1","url":"http://127.0.0.1:1/oauth/start/x","message":"m"}]}`), []byte(`{}`))
	f.Add(int64(-31007), []byte(`{"server":"s","url":"http://127.0.0.1:1/oauth/start/x"}`), []byte(`{}`))
	f.Add(int64(0), []byte(nil), []byte(`{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"mode":"url","url":"http://127.0.0.1:1/x","message":"m"}}},"requestState":"s"}`))
	f.Add(int64(-32042), []byte(`{"elicitations":[null]}`), []byte(`null`))
	f.Add(int64(0), []byte(nil), []byte(`{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"mode":"form","message":"m"}}}}`))
	f.Fuzz(func(t *testing.T, code int64, data, result []byte) {
		var callErr error
		var res *mcp.CallToolResult
		if code != 0 {
			callErr = &jsonrpc.Error{Code: code, Message: "m", Data: data}
		} else if err := json.Unmarshal(result, &res); err != nil {
			return
		}
		ask, err := connectRequestOf(res, callErr)
		if err != nil || ask == nil {
			return
		}
		if len(ask.urls) == 0 {
			t.Fatalf("a connect request without URLs: %+v", ask)
		}
		for _, u := range ask.urls {
			if u == "" {
				t.Fatalf("an empty URL in %+v", ask)
			}
		}
	})
}
