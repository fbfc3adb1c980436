package legacy

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// The fake server "a" offers these tools. echo carries every member that
// some version lacks, so the per-version encoding shows.
var (
	echoTool  = json.RawMessage(`{"name":"echo","title":"Echo","description":"Echoes <text> & more","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false,"$defs":{"x":{"type":"number"}}},"outputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"icons":[{"src":"https://example.com/i.png"}],"execution":{"taskSupport":"optional"},"annotations":{"readOnlyHint":true},"_meta":{"k":"v"}}`)
	plainTool = func(name string) json.RawMessage {
		return json.RawMessage(`{"name":"` + name + `","inputSchema":{"type":"object"}}`)
	}
)

// fake is server "a": it answers tools/call by tool name and lets a test
// hold calls open and watch their contexts.
type fake struct {
	mu      sync.Mutex
	started chan context.Context // each "block" call's ctx, when it starts
	release chan struct{}        // a send lets one "block" call answer
	// answered gets, for each "ask" call, what the server got for its
	// request: the result, "error <code>: <message> <data>", or "failed".
	answered chan string
}

func newFake() *fake {
	return &fake{started: make(chan context.Context, 16), release: make(chan struct{}), answered: make(chan string, 16)}
}

func (f *fake) server() *upstreamtest.Server {
	return &upstreamtest.Server{
		Name:   "a",
		Tools:  []json.RawMessage{echoTool, plainTool("notify"), plainTool("block"), plainTool("link"), plainTool("ask")},
		Handle: f.handle,
	}
}

func (f *fake) handle(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	switch p.Name {
	case "echo":
		var a struct{ Text string }
		json.Unmarshal(p.Arguments, &a)
		t, _ := json.Marshal(a.Text)
		return json.RawMessage(`{"content":[{"type":"text","text":` + string(t) + `}],"structuredContent":{"text":` + string(t) + `}}`), nil
	case "link":
		return json.RawMessage(`{"content":[{"type":"text","text":"see"},{"type":"resource_link","uri":"file:///r.txt","name":"r","title":"The R"}],"structuredContent":{"ok":true}}`), nil
	case "notify":
		// Progress under the token the server got (the core's own, mapped
		// back to the client's).
		var m struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(params, &m)
		for i := 1; i <= 2; i++ {
			hooks.Notify(jsonrpc.NewNotification("notifications/progress",
				json.RawMessage(`{"progressToken":`+string(m.Meta.ProgressToken)+`,"progress":`+string('0'+rune(i))+`}`)))
		}
		return json.RawMessage(`{"content":[]}`), nil
	case "ask":
		return f.ask(ctx, p.Arguments, hooks)
	case "block":
		f.started <- ctx
		select {
		case <-f.release:
			return json.RawMessage(`{"content":[{"type":"text","text":"released"}]}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no tool %q", p.Name)
}

// ask sends the server-to-client request its arguments name through the
// call's hooks, as a server does during a call, and answers with what it
// got back as text. Arguments: method and params of the request; wait:
// first block like "block" until released; complete: then send
// notifications/elicitation/complete for params.elicitationId.
func (f *fake) ask(ctx context.Context, args json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
	var a struct {
		Method   string          `json:"method"`
		Params   json.RawMessage `json:"params"`
		Wait     bool            `json:"wait"`
		Complete bool            `json:"complete"`
	}
	if err := json.Unmarshal(args, &a); err != nil || hooks == nil || hooks.Request == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "ask: no arguments or no way to ask")
	}
	if a.Wait {
		f.started <- ctx
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res, err := hooks.Request(ctx, jsonrpc.NewRequest(jsonrpc.IntID(3), a.Method, a.Params))
	text := string(res)
	if jerr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		text = fmt.Sprintf("error %d: %s %s", jerr.Code, jerr.Message, jerr.Data)
	} else if err != nil {
		text = "failed"
	}
	f.answered <- text
	if a.Complete {
		id, _ := json.Marshal(struct {
			ID json.RawMessage `json:"elicitationId"`
		}{json.RawMessage(mustGet(a.Params, "elicitationId"))})
		hooks.Notify(jsonrpc.NewNotification("notifications/elicitation/complete", id))
	}
	t, _ := json.Marshal(text)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(t) + `}]}`), nil
}

func mustGet(obj json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	json.Unmarshal(obj, &m)
	return m[key]
}

// env is a Handler mounted on echo in an httptest server, over a core
// with the fake server "a".
type env struct {
	t    *testing.T
	fake *fake
	mgr  *upstreamtest.Manager
	core *gateway.Server
	h    *Handler
	srv  *httptest.Server
	url  string
	// closed is set by a test that closes h itself and checks the error.
	closed bool

	mu  sync.Mutex
	log []string // "METHOD rpc-method status" of each HTTP request
}

// record wraps next to log each request's HTTP method, JSON-RPC method
// (for a POST of one message) and status.
func (e *env) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entry := r.Method
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct{ Method string }
			if json.Unmarshal(body, &m) == nil && m.Method != "" {
				entry += " " + m.Method
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		e.mu.Lock()
		e.log = append(e.log, fmt.Sprintf("%s %d", entry, sw.status))
		e.mu.Unlock()
	})
}

func (e *env) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// principalHeader names the principal in tests that need several.
const principalHeader = "X-Test-Principal"

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	return newEnvCore(t, opts, gateway.Options{})
}

// newEnvCore is newEnv with options for the core; its Upstreams are set
// here.
func newEnvCore(t *testing.T, opts Options, coreOpts gateway.Options) *env {
	t.Helper()
	f := newFake()
	mgr := upstreamtest.NewManager(f.server())
	coreOpts.Upstreams = mgr
	if coreOpts.InputTimeout == 0 {
		// A relay that loses an answer fails a test in seconds, not after
		// the default five minutes.
		coreOpts.InputTimeout = 10 * time.Second
	}
	core, err := gateway.New(coreOpts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Core = core
	if opts.Principal == nil {
		opts.Principal = func(r *http.Request) string {
			if p := r.Header.Get(principalHeader); p != "" {
				return p
			}
			return gateway.Anonymous
		}
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ec := echo.New()
	h.Register(ec)
	e := &env{t: t, fake: f, mgr: mgr, core: core, h: h}
	srv := httptest.NewServer(e.record(ec))
	e.srv, e.url = srv, srv.URL+"/mcp"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil && !e.closed {
			t.Errorf("Close: %v", err)
		}
		srv.Close()
		core.Close()
	})
	return e
}

// request builds a request to /mcp with the POST headers a client sends.
func (e *env) request(method, sid, body string, hdr ...string) *http.Request {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	if sid != "" {
		req.Header.Set(HeaderSessionID, sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return req
}

func (e *env) do(req *http.Request) *http.Response {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// post sends a POST and returns the response.
func (e *env) post(sid, body string, hdr ...string) *http.Response {
	e.t.Helper()
	return e.do(e.request(http.MethodPost, sid, body, hdr...))
}

// initialize starts a session of version and returns its id.
func (e *env) initialize(version string, hdr ...string) string {
	e.t.Helper()
	return e.initializeCaps(version, `{}`, hdr...)
}

// initializeCaps starts a session of version whose client declares caps.
func (e *env) initializeCaps(version, caps string, hdr ...string) string {
	e.t.Helper()
	resp := e.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":`+caps+`,"clientInfo":{"name":"test","version":"1.0"}}}`, hdr...)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("initialize: status %d: %s", resp.StatusCode, readAll(e.t, resp))
	}
	sid := resp.Header.Get(HeaderSessionID)
	if sid == "" {
		e.t.Fatal("initialize: no Mcp-Session-Id")
	}
	readAll(e.t, resp)
	return sid
}

// session returns the live session whose token is sid.
func (e *env) session(sid string) *session {
	e.t.Helper()
	payload, err := e.h.sealer.Open(sid)
	if err != nil {
		e.t.Fatal(err)
	}
	var tok token
	json.Unmarshal(payload, &tok)
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	return e.h.sessions[hex.EncodeToString(tok.Nonce)]
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// events reads every event of an SSE response until it ends.
func events(t *testing.T, resp *http.Response) []sse.Event {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream (status %d)", ct, resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 1<<20)
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		out = append(out, ev)
	}
}

// lastMessage returns the response of a POSTed request, answered as JSON
// or as an event stream (its last event).
func lastMessage(t *testing.T, resp *http.Response) rpc {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct == "application/json" {
		return decode(t, []byte(readAll(t, resp)))
	}
	evs := events(t, resp)
	if len(evs) == 0 {
		t.Fatal("an event stream without events")
	}
	return decode(t, evs[len(evs)-1].Data)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newReader(resp *http.Response) *sse.Reader { return sse.NewReader(resp.Body, 1<<20) }

// waitFor polls cond until it holds, failing the test after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rpc is the parts of a JSON-RPC message the tests look at.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
}

func decode(t *testing.T, data []byte) rpc {
	t.Helper()
	var m rpc
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return m
}
