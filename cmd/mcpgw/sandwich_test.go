package main

// Two-httptest sandwich tests (STYLE.md, Tests): fake upstream MCP servers
// written by hand with raw JSON-RPC over streamable HTTP, so that they can
// assert on exactly what they received, and the whole gateway (newParts)
// in front of them, driven by raw HTTP to check bytes and headers, and once
// by the official go-sdk client.
//
//	raw HTTP / go-sdk client ──► httptest(gateway: newParts) ──► httptest(fakeUpstream)
//	      asserts what the client sees          asserts what the upstream received

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/telemetry"
)

// ---------------------------------------------------------------------------
// The fake upstream.

// rpcRecord is one HTTP request the fake upstream received.
type rpcRecord struct {
	HTTPMethod string
	Header     http.Header
	Body       []byte
	// Method, ID and Params are the JSON-RPC message of a POST, raw as
	// sent; Method is empty for a response and ID for a notification.
	Method string
	ID     json.RawMessage
	Params json.RawMessage
}

func (r rpcRecord) session() string { return r.Header.Get("Mcp-Session-Id") }

// fakeHook answers one request in place of the fake's default.
type fakeHook func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord)

// fakeOptions configure a fakeUpstream. They are fixed once it starts.
type fakeOptions struct {
	// Version is the protocol version the fake answers initialize with.
	// If empty, 2025-11-25.
	Version string
	// Pages are the tools/list pages, each a list of raw tool objects;
	// page i+1 is reached with the cursor "page-<i+2>". Even pages are
	// answered as JSON, odd ones as an event stream. If nil, defaultTools
	// in one page.
	Pages [][]string
	// Hooks answer requests by JSON-RPC method, or "GET" for GET requests,
	// before the fake's defaults.
	Hooks map[string]fakeHook
	// BeforeInitialize, when set, runs before initialize is answered (so a
	// test can hold the handshake).
	BeforeInitialize func(f *fakeUpstream, r *http.Request)
	// NoSession answers a POST whose session id is not live. If nil, 404
	// (the spec).
	NoSession func(w http.ResponseWriter)
}

// fakeUpstream is a streamable HTTP MCP server that records every request
// (HTTP method, headers, raw body) and answers by default:
//
//	POST initialize                 → JSON result, Mcp-Session-Id: sess-<n>
//	POST without a live session id  → 404 (the session expired)
//	POST notification or response   → 202
//	POST tools/list                 → the pages, following the cursor
//	POST tools/call                 → defaultCallResult (SSE; priming on 2025-11-25)
//	GET                             → 405 (no standalone stream)
//	DELETE                          → 200, the session ends
type fakeUpstream struct {
	opts fakeOptions
	srv  *httptest.Server
	// url is the endpoint the gateway is configured with.
	url string
	// done is closed at cleanup, so that held handlers return.
	done chan struct{}

	mu       sync.Mutex
	pages    [][]string // opts.Pages, until setTools
	reqs     []rpcRecord
	sessions int
	live     map[string]bool
}

const (
	defaultVersion = "2025-11-25"
	// defaultCallResult is the fake's answer to tools/call.
	defaultCallResult = `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"ok":true}}`
)

// defaultTools are the fake's tools unless a test gives its own pages.
var defaultTools = []string{
	`{"name":"echo","description":"Answers ok","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`,
	`{"name":"x","inputSchema":{"type":"object"}}`,
}

// newFake starts a fake upstream; cleanup stops it after the gateway (it
// must be created first).
func newFake(t *testing.T, opts fakeOptions) *fakeUpstream {
	t.Helper()
	if opts.Version == "" {
		opts.Version = defaultVersion
	}
	if opts.Pages == nil {
		opts.Pages = [][]string{defaultTools}
	}
	f := &fakeUpstream{opts: opts, pages: opts.Pages, done: make(chan struct{}), live: make(map[string]bool)}
	f.srv = httptest.NewServer(f)
	f.url = f.srv.URL + "/mcp"
	t.Cleanup(func() {
		close(f.done)
		f.srv.Close()
	})
	return f
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := rpcRecord{HTTPMethod: r.Method, Header: r.Header.Clone(), Body: body}
	if r.Method == http.MethodPost {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil {
			rec.Method, rec.ID, rec.Params = m.Method, m.ID, m.Params
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	live := f.live[rec.session()]
	f.mu.Unlock()

	switch r.Method {
	case http.MethodGet:
		if h := f.opts.Hooks["GET"]; h != nil {
			h(f, w, r, rec)
			return
		}
		http.Error(w, "this server offers no standalone stream", http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		f.mu.Lock()
		delete(f.live, rec.session())
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	case http.MethodPost:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rec.Method != "initialize" && !live {
		if f.opts.NoSession != nil {
			f.opts.NoSession(w)
			return
		}
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if h := f.opts.Hooks[rec.Method]; h != nil {
		h(f, w, r, rec)
		return
	}
	switch {
	case rec.Method == "initialize":
		if f.opts.BeforeInitialize != nil {
			f.opts.BeforeInitialize(f, r)
		}
		f.mu.Lock()
		f.sessions++
		sid := "sess-" + strconv.Itoa(f.sessions)
		f.live[sid] = true
		f.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		writeJSONBody(w, rpcResult(rec.ID, `{"protocolVersion":"`+f.opts.Version+`","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1.0"}}`))
	case rec.Method == "" || len(rec.ID) == 0:
		w.WriteHeader(http.StatusAccepted)
	case rec.Method == "tools/list":
		f.toolsList(w, rec)
	case rec.Method == "tools/call":
		f.reply(w, rpcResult(rec.ID, defaultCallResult))
	default:
		writeJSONBody(w, `{"jsonrpc":"2.0","id":`+string(rec.ID)+`,"error":{"code":-32601,"message":"no such method"}}`)
	}
}

func (f *fakeUpstream) toolsList(w http.ResponseWriter, rec rpcRecord) {
	f.mu.Lock()
	pages := f.pages
	f.mu.Unlock()
	var p struct{ Cursor string }
	json.Unmarshal(rec.Params, &p)
	page := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(p.Cursor, "page-"))
		if err != nil || n < 2 || n > len(pages) {
			writeJSONBody(w, `{"jsonrpc":"2.0","id":`+string(rec.ID)+`,"error":{"code":-32602,"message":"bad cursor"}}`)
			return
		}
		page = n - 1
	}
	result := `{"tools":[` + strings.Join(pages[page], ",") + `]`
	if page+1 < len(pages) {
		result += `,"nextCursor":"page-` + strconv.Itoa(page+2) + `"`
	}
	result += `}`
	if page%2 == 0 {
		writeJSONBody(w, rpcResult(rec.ID, result))
	} else {
		f.reply(w, rpcResult(rec.ID, result))
	}
}

// reply answers a request with one message on an event stream, after a
// priming event on 2025-11-25.
func (f *fakeUpstream) reply(w http.ResponseWriter, msg string) {
	if f.opts.Version == "2025-11-25" {
		writeSSE(w, "id: p-0\ndata: \n\n", "id: p-1\ndata: "+msg+"\n\n")
		return
	}
	writeSSE(w, "data: "+msg+"\n\n")
}

// hold blocks until the gateway gives up on r or the test ends.
func (f *fakeUpstream) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

// setTools replaces the tools, as one page.
func (f *fakeUpstream) setTools(tools ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages = [][]string{tools}
}

// expireAll forgets every session, as a restarted server would.
func (f *fakeUpstream) expireAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.live)
}

// requests returns a copy of what the fake received so far.
func (f *fakeUpstream) requests() []rpcRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rpcRecord(nil), f.reqs...)
}

// posts returns the POSTs of JSON-RPC method.
func (f *fakeUpstream) posts(method string) []rpcRecord {
	var out []rpcRecord
	for _, r := range f.requests() {
		if r.HTTPMethod == http.MethodPost && r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// lastPost returns the last POST of method, failing the test when there
// is none.
func (f *fakeUpstream) lastPost(t *testing.T, method string) rpcRecord {
	t.Helper()
	ps := f.posts(method)
	if len(ps) == 0 {
		t.Fatalf("the fake upstream received no %s", method)
	}
	return ps[len(ps)-1]
}

// waitPost waits until the fake received a POST of method and returns the
// last one.
func (f *fakeUpstream) waitPost(t *testing.T, method string) rpcRecord {
	t.Helper()
	waitFor(t, "the fake upstream to receive "+method, func() bool { return len(f.posts(method)) > 0 })
	return f.lastPost(t, method)
}

func rpcResult(id json.RawMessage, result string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
}

func writeJSONBody(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, body)
}

// writeSSE starts an event stream and writes each block (raw SSE text,
// ending in a blank line), flushing after each.
func writeSSE(w http.ResponseWriter, blocks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for _, b := range blocks {
		io.WriteString(w, b)
		rc.Flush()
	}
}

// ---------------------------------------------------------------------------
// The gateway in front.

const (
	adminToken = "sandwich-admin-token"
	// upKey is the upstream api key, given to the config through lookupEnv
	// as UP_KEY. It is no secret: the fake checks it.
	upKey = "up-key-0123456789"
)

// gatewayYAML returns a config with the admin token and servers, each the
// YAML of one list entry (see httpServer).
func gatewayYAML(t *testing.T, servers ...string) string {
	return fmt.Sprintf("data_dir: %q\nadmin:\n  tokens: [\"sha256:%x\"]\nservers:\n%s",
		t.TempDir(), sha256.Sum256([]byte(adminToken)), strings.Join(servers, ""))
}

// httpServer returns the YAML of a streamable HTTP server entry with the
// api key from ${UP_KEY}, plus extra "key: value" lines.
func httpServer(name, url string, extra ...string) string {
	s := fmt.Sprintf("  - name: %s\n    transport: http\n    url: %s\n    api_key: ${UP_KEY}\n", name, url)
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

// gw is the gateway built by newParts, served by an httptest server.
type gw struct {
	url string
	p   *parts
}

// startGateway builds the gateway from yaml (UP_KEY set in its
// environment) and serves it. Cleanup shuts it down before the fakes.
func startGateway(t *testing.T, yaml string) *gw {
	t.Helper()
	return startGatewayWith(t, yaml, testTelemetry(t))
}

// startGatewayWith is startGateway with the telemetry tel.
func startGatewayWith(t *testing.T, yaml string, tel *telemetry.Telemetry) *gw {
	t.Helper()
	env := map[string]string{"UP_KEY": upKey}
	cfg, ps := config.Parse([]byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if len(ps) > 0 {
		t.Fatalf("config: %v", ps)
	}
	if got := cfg.Servers[0].APIKey; got != upKey {
		t.Fatalf("api_key was not expanded from UP_KEY")
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := newParts(cfg, logger, tel)
	if err != nil {
		t.Fatalf("newParts: %v", err)
	}
	srv := httptest.NewServer(p.handler)
	// Cleanups run last-registered first: shutdown, then the server, then
	// the log dump.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.shutdown(ctx, 5*time.Second, nil); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &gw{url: srv.URL, p: p}
}

// serverStatus is the part of GET /admin/servers/{name} the tests read.
type serverStatus struct {
	Name            string `json:"name"`
	State           string `json:"state"`
	Error           string `json:"error"`
	ProtocolVersion string `json:"protocol_version"`
	ToolCount       int    `json:"tool_count"`
}

func (g *gw) status(t *testing.T, name string) serverStatus {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url+"/admin/servers/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /admin/servers/%s: %v", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/servers/%s: %d %s", name, resp.StatusCode, body)
	}
	var st serverStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /admin/servers/%s: %v in %s", name, err, body)
	}
	return st
}

// waitState polls the admin API until server name is in state want. A
// server that fails while the test waits for running fails the test at
// once.
func (g *gw) waitState(t *testing.T, name, want string) serverStatus {
	t.Helper()
	var st serverStatus
	waitFor(t, fmt.Sprintf("server %q to be %s", name, want), func() bool {
		st = g.status(t, name)
		if want == "running" && (st.State == "failed" || st.State == "exited") {
			t.Fatalf("server %q is %s: %s", name, st.State, st.Error)
		}
		return st.State == want
	})
	return st
}

// waitRunning waits until server name is running and its tools are in the
// gateway's merged tools/list: the admin API reports running a moment
// before the catalog is rebuilt, and a call in between would find no tool.
func (g *gw) waitRunning(t *testing.T, name string) serverStatus {
	t.Helper()
	st := g.waitState(t, name, "running")
	probe := g.connect(t, "2025-11-25")
	waitFor(t, fmt.Sprintf("the %d tools of %q in the gateway's tools/list", st.ToolCount, name), func() bool {
		var list struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		json.Unmarshal(probe.postJSON(`{"jsonrpc":"2.0","id":"probe","method":"tools/list"}`), &list)
		n := 0
		for _, tool := range list.Result.Tools {
			if strings.HasPrefix(tool.Name, "mcp__"+name+"__") {
				n++
			}
		}
		return n == st.ToolCount
	})
	return st
}

// client is a raw HTTP MCP client of the gateway's /mcp.
type client struct {
	t       *testing.T
	url     string
	sid     string
	version string
	header  http.Header // extra headers on every POST
}

// connect initializes a session at version and sends initialized. The
// client declares every capability the gateway relays, so that its calls
// go on the upstream session that reads the lists, as these tests expect;
// a client that declares less gets a session of its own at a legacy HTTP
// server (see upstream/mirror.go).
func (g *gw) connect(t *testing.T, version string) *client {
	t.Helper()
	c := &client{t: t, url: g.url + "/mcp", header: http.Header{}}
	resp := c.post(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{"elicitation":{},"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"sandwich","version":"1.0"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Result.ProtocolVersion != version {
		t.Fatalf("initialize: negotiated %q (%v), want %q: %s", m.Result.ProtocolVersion, err, version, body)
	}
	c.sid, c.version = resp.Header.Get("Mcp-Session-Id"), version
	if c.sid == "" {
		t.Fatalf("initialize: no Mcp-Session-Id")
	}
	resp = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d, want 202", resp.StatusCode)
	}
	return c
}

// post sends body with the session's headers and returns the response.
func (c *client) post(body string) *http.Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST /mcp: %v", err)
	}
	return resp
}

// postJSON sends a request the gateway answers itself and returns the
// response body.
func (c *client) postJSON(body string) []byte {
	c.t.Helper()
	resp := c.post(body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		c.t.Fatalf("POST %s: %d %s %s", body, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b
}

// postCall sends a forwarded request and returns its answer as events: the
// events of its stream, read to its end, or one event without an id for
// an answer the gateway sent as JSON (one that was quick and had nothing
// else for the client).
func (c *client) postCall(body string) []sseEvent {
	c.t.Helper()
	resp := c.post(body)
	return readAnswer(c.t, resp)
}

// readAnswer reads an answer to a forwarded request (see postCall).
func readAnswer(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "application/json" {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		return []sseEvent{{Data: string(b)}}
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("want 200 text/event-stream or application/json, got %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the event stream: %v", err)
	}
	return parseSSE(string(b))
}

// sseEvent is one event of a stream: its id (if any) and data.
type sseEvent struct {
	ID    string
	HasID bool
	Data  string
}

// parseSSE splits a whole event stream into events: blocks separated by a
// blank line, with id: and data: fields (one optional space after the
// colon); comments and blocks without fields are skipped.
func parseSSE(s string) []sseEvent {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	var out []sseEvent
	for _, block := range strings.Split(s, "\n\n") {
		var ev sseEvent
		var data []string
		fields := 0
		for _, line := range strings.Split(block, "\n") {
			if line == "" || strings.HasPrefix(line, ":") {
				continue
			}
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "id":
				ev.ID, ev.HasID = value, true
				fields++
			case "data":
				data = append(data, value)
				fields++
			}
		}
		if fields == 0 {
			continue
		}
		ev.Data = strings.Join(data, "\n")
		out = append(out, ev)
	}
	return out
}

// describe renders the client's events for comparison: "priming" for an
// event with an id and no data, "notify <method> <params>" for a
// notification, "result <id> <result>" and "error <id> <code> <data>" for
// responses, with each member's raw bytes as the gateway sent them.
func describe(t *testing.T, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Data == "" {
			if !ev.HasID {
				t.Errorf("an event without data and without an id: %+v", ev)
			}
			out = append(out, "priming")
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int             `json:"code"`
				Data json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatalf("event data is not JSON: %v: %s", err, ev.Data)
		}
		switch {
		case m.Method != "":
			out = append(out, "notify "+m.Method+" "+string(m.Params))
		case m.Error != nil:
			out = append(out, fmt.Sprintf("error %s %d %s", m.ID, m.Error.Code, m.Error.Data))
		default:
			out = append(out, "result "+string(m.ID)+" "+string(m.Result))
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a generous
// bound (a hang, not a measured duration).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !waitUntil(20*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitUntil polls cond until it holds or d passed, and reports whether it
// held.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rawHeaders picks the named headers of h, "" for absent ones.
func rawHeaders(h http.Header, names ...string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = h.Get(n)
	}
	return out
}

// ---------------------------------------------------------------------------
// The tests.

// richTool carries every member a relay could lose or re-encode: $schema,
// $defs, $ref, additionalProperties:false, annotations, icons, execution,
// _meta, escapes, HTML characters, odd number spellings and whitespace,
// with "name" (followed by a space) not first.
const richTool = `{"title":"Rich \u00e9 <tool> & co", "name": "@NAME@","description":"Uses $defs","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"number","maximum":1.50},"y":{"type":"number","minimum":-0.0,"exclusiveMaximum":1E+2}},"additionalProperties":false}},"properties":{"p":{"$ref":"#/$defs/pt"},"name":{"type":"string","description":"a member called name, which must not be renamed"}},"required":["p"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"additionalProperties":false},"annotations":{"title":"Rich","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},"icons":[{"src":"https://example.com/rich.png","mimeType":"image/png","sizes":["48x48"]}],"execution":{"taskSupport":"optional"},"_meta":{"com.example/weight":1.50,"nested":{"a":[1,2.0,3e0]}}}`

func named(tmpl, name string) string { return strings.Replace(tmpl, "@NAME@", name, 1) }

// TestSandwich_RelayFidelity: tools/list follows the upstream's pages and
// renames each tool, every other byte unchanged; tools/call reaches the
// upstream under the tool's own name, the gateway's id, its session,
// version and api key, with the client's arguments and _meta intact, and
// the result comes back byte for byte under the client's id.
func TestSandwich_RelayFidelity(t *testing.T) {
	alpha := `{"name":"@NAME@","inputSchema":{"type":"object"}}`
	x := `{"name":"@NAME@","description":"<x> & y","inputSchema":{"type":"object","properties":{"n":{"type":"number","multipleOf":1.50}}}}`
	callResult := `{"content":[{"type":"text","text":"r\u00e9sultat <b>&amp;</b>"},{"type":"resource_link","uri":"file:///tmp/a.txt","name":"a","mimeType":"text/plain"}], "structuredContent": {"ok":true,"n":1.50}, "isError": false, "_meta": {"com.example/cost": 1.50}}`
	f := newFake(t, fakeOptions{
		Pages: [][]string{
			{named(richTool, "rich"), named(alpha, "alpha")},
			{named(x, "x")},
		},
		Hooks: map[string]fakeHook{"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
			f.reply(w, rpcResult(m.ID, callResult))
		}},
	})
	g := startGateway(t, gatewayYAML(t, httpServer("up", f.url)))
	if st := g.waitRunning(t, "up"); st.ToolCount != 3 {
		t.Fatalf("up lists %d tools, want 3 over two pages", st.ToolCount)
	}
	if got := len(f.posts("tools/list")); got != 2 {
		t.Errorf("the upstream got %d tools/list requests, want 2 (one per page)", got)
	}
	if c := f.lastPost(t, "tools/list"); string(c.Params) != `{"cursor":"page-2"}` {
		t.Errorf("second tools/list params %s, want the upstream's cursor", c.Params)
	}

	c := g.connect(t, "2025-11-25")
	// The client's own credentials must never reach an upstream.
	c.header.Set("Authorization", "Bearer client-own-token")

	body := c.postJSON(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var list struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("tools/list: %v: %s", err, body)
	}
	var got []string
	for _, tool := range list.Result.Tools {
		got = append(got, string(tool))
	}
	// Every byte is kept but the name, and execution.taskSupport where the
	// tool had none: the gateway hosts tasks for any tool (optional).
	hosted := func(tool string) string {
		return strings.TrimSuffix(tool, "}") + `,"execution":{"taskSupport":"optional"}}`
	}
	want := []string{hosted(named(alpha, "mcp__up__alpha")), named(richTool, "mcp__up__rich"), hosted(named(x, "mcp__up__x"))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools/list tools, raw bytes (-want +got):\n%s", diff)
	}
	if list.Result.NextCursor != nil {
		t.Errorf("tools/list nextCursor %q, want the whole merged list in one page", *list.Result.NextCursor)
	}

	const (
		args = `{"n":1.50,"s":"\u00e9 <&>","deep":{"list":[1e2,true,null,-0.0]}}`
		meta = `{"com.example/trace":"t-1","w":1.50}`
	)
	evs := c.postCall(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"mcp__up__x","arguments":` + args + `,"_meta":` + meta + `}}`)
	if diff := cmp.Diff([]string{`result "client-7" ` + callResult}, describe(t, evs)); diff != "" {
		t.Errorf("client's events (-want +got):\n%s", diff)
	}

	call := f.lastPost(t, "tools/call")
	if diff := cmp.Diff(`{"name":"x","arguments":`+args+`,"_meta":`+meta+`}`, string(call.Params)); diff != "" {
		t.Errorf("params the upstream received (-want +got):\n%s", diff)
	}
	var id any
	if err := json.Unmarshal(call.ID, &id); err != nil || id == nil || string(call.ID) == `"client-7"` {
		t.Errorf("the upstream got request id %s, want the gateway's own, not the client's", call.ID)
	}
	wantHeaders := map[string]string{
		"Accept":               "application/json, text/event-stream",
		"Content-Type":         "application/json",
		"Mcp-Protocol-Version": "2025-11-25",
		"Mcp-Session-Id":       "sess-1",
		"Authorization":        "Bearer " + upKey,
	}
	if diff := cmp.Diff(wantHeaders, rawHeaders(call.Header, "Accept", "Content-Type", "Mcp-Protocol-Version", "Mcp-Session-Id", "Authorization")); diff != "" {
		t.Errorf("tools/call headers at the upstream (-want +got):\n%s", diff)
	}
	init := f.lastPost(t, "initialize")
	wantInit := map[string]string{"Authorization": "Bearer " + upKey, "Mcp-Session-Id": "", "Mcp-Protocol-Version": ""}
	if diff := cmp.Diff(wantInit, rawHeaders(init.Header, "Authorization", "Mcp-Session-Id", "Mcp-Protocol-Version")); diff != "" {
		t.Errorf("initialize headers at the upstream (-want +got):\n%s", diff)
	}

	// Shutting down ends the upstream session (cleanup shuts down again,
	// which is a no-op).
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := g.p.shutdown(ctx, 5*time.Second, nil); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	var deletes []map[string]string
	for _, r := range f.requests() {
		if r.HTTPMethod == http.MethodDelete {
			deletes = append(deletes, rawHeaders(r.Header, "Mcp-Session-Id", "Mcp-Protocol-Version", "Authorization"))
		}
	}
	wantDeletes := []map[string]string{{"Mcp-Session-Id": "sess-1", "Mcp-Protocol-Version": "2025-11-25", "Authorization": "Bearer " + upKey}}
	if diff := cmp.Diff(wantDeletes, deletes); diff != "" {
		t.Errorf("DELETEs at the upstream after shutdown (-want +got):\n%s", diff)
	}
}

// TestSandwich_CallRelay runs one tools/call through the gateway against
// upstreams that answer in the ways the transport allows, and checks what
// the client saw and what the upstream received.
func TestSandwich_CallRelay(t *testing.T) {
	tests := []struct {
		name string
		fake fakeOptions
		// server are extra YAML lines of the server entry.
		server []string
		// before runs once the server is running, before the call.
		before func(t *testing.T, f *fakeUpstream)
		// params of the client's tools/call, whose id is "c-1".
		params string
		want   []string // describe of the client's events
		check  func(t *testing.T, f *fakeUpstream)
	}{
		{
			// The server closes the POST stream after its priming event
			// (spec: it may), asking for retry 50ms, and serves the
			// response on the GET that resumes it.
			name: "stream closed after priming, resumed with Last-Event-ID",
			fake: fakeOptions{Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					writeSSE(w, "id: ev-1\nretry: 50\ndata: \n\n")
				},
				"GET": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					if r.Header.Get("Last-Event-ID") != "ev-1" {
						http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
						return
					}
					call := f.posts("tools/call")[0]
					writeSSE(w, "id: ev-2\ndata: "+rpcResult(call.ID, `{"content":[{"type":"text","text":"resumed"}]}`)+"\n\n")
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{}}`,
			want:   []string{`result "c-1" {"content":[{"type":"text","text":"resumed"}]}`},
			check: func(t *testing.T, f *fakeUpstream) {
				var resumes []map[string]string
				for _, r := range f.requests() {
					if r.HTTPMethod == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
						resumes = append(resumes, rawHeaders(r.Header, "Last-Event-ID", "Mcp-Session-Id", "Mcp-Protocol-Version", "Authorization", "Accept"))
					}
				}
				want := []map[string]string{{
					"Last-Event-ID":        "ev-1",
					"Mcp-Session-Id":       "sess-1",
					"Mcp-Protocol-Version": "2025-11-25",
					"Authorization":        "Bearer " + upKey,
					"Accept":               "text/event-stream",
				}}
				if diff := cmp.Diff(want, resumes); diff != "" {
					t.Errorf("resuming GETs at the upstream (-want +got):\n%s", diff)
				}
			},
		},
		{
			// A 2025-03-26 server may answer with a JSON-RPC batch: here a
			// notification about the request, then its response.
			name: "2025-03-26 server answers with a batch",
			fake: fakeOptions{Version: "2025-03-26", Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					var p struct {
						Meta struct {
							ProgressToken json.RawMessage `json:"progressToken"`
						} `json:"_meta"`
					}
					json.Unmarshal(m.Params, &p)
					writeJSONBody(w, `[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(p.Meta.ProgressToken)+`,"progress":1}},`+
						rpcResult(m.ID, `{"content":[{"type":"text","text":"batched"}]}`)+`]`)
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{},"_meta":{"progressToken":"tok-b"}}`,
			want: []string{
				"priming",
				`notify notifications/progress {"progressToken":"tok-b","progress":1}`,
				`result "c-1" {"content":[{"type":"text","text":"batched"}]}`,
			},
			check: func(t *testing.T, f *fakeUpstream) {
				if v := f.lastPost(t, "tools/call").Header.Get("Mcp-Protocol-Version"); v != "2025-03-26" {
					t.Errorf("tools/call carried MCP-Protocol-Version %q, want the version negotiated upstream, 2025-03-26", v)
				}
			},
		},
		{
			// The server forgot the session: the call gets 404, the
			// gateway initializes again once and sends the call again.
			name:   "upstream session expired",
			before: func(t *testing.T, f *fakeUpstream) { f.expireAll() },
			params: `{"name":"mcp__up__x","arguments":{"a":1}}`,
			want:   []string{`result "c-1" ` + defaultCallResult},
			check: func(t *testing.T, f *fakeUpstream) {
				var got []string
				for _, r := range f.requests() {
					if r.HTTPMethod == http.MethodPost {
						got = append(got, r.Method+" "+r.session())
					}
				}
				want := []string{
					// protocol auto asks first; this server is legacy.
					"server/discover ",
					"initialize ", "notifications/initialized sess-1", "tools/list sess-1",
					"tools/call sess-1",
					"initialize ", "notifications/initialized sess-2",
					"tools/call sess-2",
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("POSTs at the upstream, with their session ids (-want +got):\n%s", diff)
				}
				calls := f.posts("tools/call")
				if len(calls) == 2 && !bytes.Equal(calls[0].Params, calls[1].Params) {
					t.Errorf("the call was sent again with params %s, first %s", calls[1].Params, calls[0].Params)
				}
			},
		},
		{
			// The TypeScript SDK answers an unknown session with 400 "No
			// valid session ID" instead of 404 (PROTOCOL.md 11).
			name: "upstream session expired, TypeScript SDK style 400",
			fake: fakeOptions{NoSession: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
			}},
			before: func(t *testing.T, f *fakeUpstream) { f.expireAll() },
			params: `{"name":"mcp__up__x","arguments":{}}`,
			want:   []string{`result "c-1" ` + defaultCallResult},
			check: func(t *testing.T, f *fakeUpstream) {
				var got []string
				for _, r := range f.posts("initialize") {
					got = append(got, r.session())
				}
				if diff := cmp.Diff([]string{"", ""}, got); diff != "" {
					t.Errorf("session ids of the initializes at the upstream (-want +got):\n%s", diff)
				}
				if s := f.lastPost(t, "tools/call").session(); s != "sess-2" {
					t.Errorf("the call was sent again with session %q, want sess-2", s)
				}
			},
		},
		{
			// A progress notification on the call's own stream reaches the
			// client on its own stream, before the response.
			name: "progress on the POST stream",
			fake: fakeOptions{Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					var p struct {
						Meta struct {
							ProgressToken json.RawMessage `json:"progressToken"`
						} `json:"_meta"`
					}
					json.Unmarshal(m.Params, &p)
					writeSSE(w,
						"id: e-0\ndata: \n\n",
						`id: e-1`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(p.Meta.ProgressToken)+`,"progress":1,"total":2,"message":"half <way>"}}`+"\n\n",
						"id: e-2\ndata: "+rpcResult(m.ID, `{"content":[{"type":"text","text":"done"}]}`)+"\n\n")
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{},"_meta":{"progressToken":"tok-1"}}`,
			want: []string{
				"priming",
				`notify notifications/progress {"progressToken":"tok-1","progress":1,"total":2,"message":"half <way>"}`,
				`result "c-1" {"content":[{"type":"text","text":"done"}]}`,
			},
		},
		{
			// A pretty-printed response spread over several data lines: the
			// client gets the same bytes, newlines included.
			name: "response over several data lines",
			fake: fakeOptions{Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					writeSSE(w, "id: m-0\ndata:\n\n",
						"id: m-1\nevent: message\ndata: {\"jsonrpc\": \"2.0\",\ndata:  \"id\": "+string(m.ID)+",\ndata:  \"result\": {\ndata:   \"content\": [{\"type\": \"text\", \"text\": \"multi\"}]\ndata:  }\ndata: }\n\n")
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{}}`,
			// SSE strips one space after "data:".
			want: []string{"result \"c-1\" {\n  \"content\": [{\"type\": \"text\", \"text\": \"multi\"}]\n }"},
		},
		{
			// The server's own JSON-RPC error reaches the client as it is,
			// under the client's id.
			name: "upstream JSON-RPC error",
			fake: fakeOptions{Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					f.reply(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32602,"message":"bad <args>","data":{"field":"n","min":1.50}}}`)
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{"n":0}}`,
			want:   []string{`error "c-1" -32602 {"field":"n","min":1.50}`},
		},
		{
			// A server that never answers: the client gets -31002 naming
			// the server, and the server is told the call was cancelled
			// because of the timeout, under its own id.
			name:   "timeout",
			server: []string{"timeout: 200ms"},
			fake: fakeOptions{Hooks: map[string]fakeHook{
				"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
					writeSSE(w, "id: h-0\ndata: \n\n")
					f.hold(r)
				},
			}},
			params: `{"name":"mcp__up__x","arguments":{}}`,
			want:   []string{`error "c-1" -31002 {"server":"up","timeout":"200ms"}`},
			check: func(t *testing.T, f *fakeUpstream) {
				call := f.lastPost(t, "tools/call")
				n := f.waitPost(t, "notifications/cancelled")
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
					Reason    string          `json:"reason"`
				}
				if err := json.Unmarshal(n.Params, &p); err != nil {
					t.Fatalf("notifications/cancelled params %s: %v", n.Params, err)
				}
				if string(p.RequestID) != string(call.ID) || p.Reason != "timeout" {
					t.Errorf("notifications/cancelled %s, want requestId %s (the upstream's id of the call) and reason \"timeout\"", n.Params, call.ID)
				}
				if n.session() != "sess-1" {
					t.Errorf("notifications/cancelled carried session %q, want sess-1", n.session())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.fake)
			g := startGateway(t, gatewayYAML(t, httpServer("up", f.url, tt.server...)))
			g.waitRunning(t, "up")
			if tt.before != nil {
				tt.before(t, f)
			}
			c := g.connect(t, "2025-11-25")
			evs := c.postCall(`{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":` + tt.params + `}`)
			if diff := cmp.Diff(tt.want, describe(t, evs)); diff != "" {
				t.Errorf("client's events (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestSandwich_Cancel: a client's notifications/cancelled reaches the
// owning upstream under the id the upstream knows the call by. Two
// sessions use the same request id, "client-7": upstream their calls have
// distinct ids, and each cancel names only its own.
func TestSandwich_Cancel(t *testing.T) {
	f := newFake(t, fakeOptions{Hooks: map[string]fakeHook{
		"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
			writeSSE(w, "id: h-0\ndata: \n\n")
			f.hold(r)
		},
	}})
	g := startGateway(t, gatewayYAML(t, httpServer("up", f.url)))
	g.waitRunning(t, "up")

	// callOf returns the upstream's record of the call whose arguments
	// name who.
	callOf := func(who string) rpcRecord {
		t.Helper()
		var out rpcRecord
		waitFor(t, "the upstream to receive the call of "+who, func() bool {
			for _, r := range f.posts("tools/call") {
				if bytes.Contains(r.Params, []byte(`{"who":"`+who+`"}`)) {
					out = r
					return true
				}
			}
			return false
		})
		return out
	}
	cancelledIDs := func() []string {
		var ids []string
		for _, n := range f.posts("notifications/cancelled") {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(n.Params, &p)
			ids = append(ids, string(p.RequestID))
			if n.session() != "sess-1" {
				t.Errorf("notifications/cancelled carried session %q, want sess-1", n.session())
			}
		}
		return ids
	}

	a, b := g.connect(t, "2025-11-25"), g.connect(t, "2025-11-25")
	respA := a.post(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"mcp__up__x","arguments":{"who":"a"}}}`)
	respB := b.post(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"mcp__up__x","arguments":{"who":"b"}}}`)
	callA, callB := callOf("a"), callOf("b")
	if string(callA.ID) == `"client-7"` || string(callB.ID) == `"client-7"` || string(callA.ID) == string(callB.ID) {
		t.Fatalf("upstream ids %s and %s: want the gateway's own, distinct ids, not the clients' \"client-7\"", callA.ID, callB.ID)
	}

	for i, step := range []struct {
		c    *client
		resp *http.Response
		want []string // ids named by the cancels the upstream has received
	}{
		{a, respA, []string{string(callA.ID)}},
		{b, respB, []string{string(callA.ID), string(callB.ID)}},
	} {
		cancel := step.c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"client-7","reason":"the user pressed stop"}}`)
		cancel.Body.Close()
		if cancel.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: %d, want 202", cancel.StatusCode)
		}
		// A cancelled request is not answered: its stream (the answer
		// became one after stream_after, when post returned) ends without
		// a response.
		if diff := cmp.Diff([]string{"priming"}, describe(t, readAnswer(t, step.resp))); diff != "" {
			t.Errorf("client %d's events after cancelling (-want +got):\n%s", i, diff)
		}
		waitFor(t, fmt.Sprintf("%d cancels at the upstream", len(step.want)), func() bool { return len(f.posts("notifications/cancelled")) >= len(step.want) })
		if diff := cmp.Diff(step.want, cancelledIDs()); diff != "" {
			t.Errorf("after client %d cancelled: requestIds of the upstream's notifications/cancelled (-want +got):\n%s", i, diff)
		}
	}
}

// TestSandwich_ListChangedOnPostStream: a server may send
// notifications/tools/list_changed on the stream of the call that changed
// its tools (MCP 2025-11-25, basic/transports: messages before the
// response). The gateway must refresh that server's list, and the client
// must get the gateway's own view of the change, not the upstream's raw
// notification on its call's stream (PROTOCOL.md 6 and 8).
func TestSandwich_ListChangedOnPostStream(t *testing.T) {
	const added = `{"name":"added","inputSchema":{"type":"object"}}`
	f := newFake(t, fakeOptions{Hooks: map[string]fakeHook{
		"tools/call": func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
			f.setTools(append(defaultTools[:len(defaultTools):len(defaultTools)], added)...)
			writeSSE(w,
				"id: l-0\ndata: \n\n",
				`id: l-1`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n\n",
				"id: l-2\ndata: "+rpcResult(m.ID, `{"content":[{"type":"text","text":"added a tool"}]}`)+"\n\n")
		},
	}})
	g := startGateway(t, gatewayYAML(t, httpServer("up", f.url)))
	g.waitRunning(t, "up")
	c := g.connect(t, "2025-11-25")

	evs := c.postCall(`{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"mcp__up__x","arguments":{}}}`)
	if diff := cmp.Diff([]string{`result "c-1" {"content":[{"type":"text","text":"added a tool"}]}`}, describe(t, evs)); diff != "" {
		t.Errorf("client's events on the call's stream (-want +got):\n%s", diff)
	}

	names := func() []string {
		var list struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		json.Unmarshal(c.postJSON(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`), &list)
		var out []string
		for _, tool := range list.Result.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	want := []string{"mcp__up__added", "mcp__up__echo", "mcp__up__x"}
	var got []string
	// On a correct gateway the refresh takes milliseconds; the bound only
	// keeps a failing run short.
	if !waitUntil(5*time.Second, func() bool { got = names(); return cmp.Equal(want, got) }) {
		t.Errorf("the upstream sent tools/list_changed on its POST stream, but the gateway never listed its tools again (tools/list at the upstream: %d; merged tools (-want +got):\n%s)",
			len(f.posts("tools/list")), cmp.Diff(want, got))
	}
}

// TestSandwich_ServerDown: a server whose URL refuses connections is
// restarting with the error, the other one works, and the gateway served
// initialize while the upstreams were still starting.
func TestSandwich_ServerDown(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, fakeOptions{BeforeInitialize: func(f *fakeUpstream, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-f.done:
		}
	}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	g := startGateway(t, gatewayYAML(t, httpServer("up", f.url), httpServer("down", refused)))

	// The upstream "up" is held in its handshake, yet a client can
	// initialize and list (nothing yet).
	c := g.connect(t, "2025-11-25")
	if st := g.status(t, "up"); st.State != "starting" {
		t.Errorf("up is %q while its initialize is held, want starting", st.State)
	}
	body := c.postJSON(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`; string(body) != want {
		t.Errorf("tools/list before any server runs: %s, want %s", body, want)
	}

	// It is restarted with backoff, and says why it is down meanwhile.
	st := g.waitState(t, "down", "restarting")
	if !strings.Contains(st.Error, "connection refused") {
		t.Errorf("down's error %q, want it to say the connection was refused", st.Error)
	}

	close(release)
	g.waitRunning(t, "up")
	evs := c.postCall(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"text":"hi"}}}`)
	if diff := cmp.Diff([]string{`result 2 ` + defaultCallResult}, describe(t, evs)); diff != "" {
		t.Errorf("call to up while down is failed (-want +got):\n%s", diff)
	}
	if st := g.status(t, "down"); st.State != "restarting" {
		t.Errorf("down is %q, want still restarting", st.State)
	}
}

// TestSandwich_SDKClient: the official go-sdk client lists and calls tools
// through the gateway in front of the fake, at its default version (the
// 2026-07-28 era, sessionless, found by server/discover), pinned to
// 2025-11-25 (a session), and pinned to 2025-03-26, where
// structuredContent is dropped.
func TestSandwich_SDKClient(t *testing.T) {
	tests := []struct {
		name, pin, wantVersion string
		wantStructured         bool
	}{
		{"default", "", "2026-07-28", true},
		{"2025-11-25", "2025-11-25", "2025-11-25", true},
		{"2025-03-26", "2025-03-26", "2025-03-26", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fakeOptions{})
			g := startGateway(t, gatewayYAML(t, httpServer("up", f.url)))
			g.waitRunning(t, "up")

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cl := mcp.NewClient(&mcp.Implementation{Name: "sandwich-sdk", Version: "1.0"}, nil)
			var opts *mcp.ClientSessionOptions
			if tt.pin != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: tt.pin}
			}
			cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp"}, opts)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tt.wantVersion {
				t.Errorf("negotiated %q, want %q", got, tt.wantVersion)
			}

			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			if diff := cmp.Diff([]string{"mcp__up__echo", "mcp__up__x"}, names); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"text": "héllo <&>"}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if len(res.Content) != 1 || res.IsError {
				t.Fatalf("CallTool result %+v", res)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "ok" {
				t.Errorf("CallTool content %#v, want the text \"ok\"", res.Content[0])
			}
			if got := res.StructuredContent != nil; got != tt.wantStructured {
				t.Errorf("structuredContent %v, want present: %v", res.StructuredContent, tt.wantStructured)
			}

			call := f.lastPost(t, "tools/call")
			var p struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			}
			if err := json.Unmarshal(call.Params, &p); err != nil {
				t.Fatalf("tools/call params at the upstream %s: %v", call.Params, err)
			}
			if diff := cmp.Diff(map[string]any{"text": "héllo <&>"}, p.Arguments); p.Name != "echo" || diff != "" {
				t.Errorf("the upstream got tool %q with arguments (-want +got):\n%s", p.Name, diff)
			}
			if v := call.Header.Get("Mcp-Protocol-Version"); v != "2025-11-25" {
				t.Errorf("upstream version header %q: the upstream hop keeps its own version, 2025-11-25", v)
			}
		})
	}
}
