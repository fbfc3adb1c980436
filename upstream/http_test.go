package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Secrets the fakes expect; no error or log line may contain them.
const (
	testAPIKey      = "sk-test-5ecret-key"
	testHeaderValue = "hdr-5ecret-value"
)

// waitLimit bounds waits for something a test expects to happen; reaching it
// is a failure, not a measurement.
const waitLimit = 10 * time.Second

// hit is one request a fake server received.
type hit struct {
	HTTP        string // POST, GET, DELETE
	RPC         string // the JSON-RPC method, "response" for a response
	Session     string // Mcp-Session-Id
	Version     string // MCP-Protocol-Version
	LastEventID string
}

// fakeHTTP is a streamable HTTP MCP server that asserts what it receives:
// bearer auth and the configured header on every request, the content
// headers, no session id and no protocol version on initialize, the current
// session and the negotiated version on everything after it.
type fakeHTTP struct {
	t       *testing.T
	version string // what initialize answers; default LatestProtocolVersion
	sse     bool   // answer requests with an event stream (priming event first)
	// expireOn makes requests for this method end the session: expireTimes
	// of them (negative: all) are answered expireStatus with expireBody.
	expireOn     string
	expireTimes  int
	expireStatus int
	expireBody   string
	// onRequest answers a request other than initialize, or returns false
	// to leave it to the default (tools/list: one tool; anything else: its
	// params echoed as the result).
	onRequest func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool
	// onNotification answers a notification (or a response) of the
	// session, or returns false for the default 202.
	onNotification func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool
	// onGet serves a GET; nil answers 405.
	onGet func(w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	sessions int
	session  string // the valid session, "" when none
	hits     []hit
	hitCh    chan hit // every hit, when not nil (buffered)
}

func newFakeHTTP(t *testing.T) *fakeHTTP {
	return &fakeHTTP{t: t, version: LatestProtocolVersion, hitCh: make(chan hit, 1000)}
}

// start serves f on a new httptest server, closed when the test ends.
func (f *fakeHTTP) start() *httptest.Server {
	srv := httptest.NewServer(f)
	f.t.Cleanup(srv.Close)
	return srv
}

func (f *fakeHTTP) record(h hit) {
	f.mu.Lock()
	f.hits = append(f.hits, h)
	f.mu.Unlock()
	select {
	case f.hitCh <- h:
	default:
	}
}

// methods returns "HTTP RPC" for each hit so far, without GETs (the GET
// stream opens in the background, in no fixed order).
func (f *fakeHTTP) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, h := range f.hits {
		if h.HTTP != http.MethodGet {
			out = append(out, strings.TrimSpace(h.HTTP+" "+h.RPC))
		}
	}
	return out
}

func (f *fakeHTTP) allHits() []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hits)
}

// waitHit waits for a hit that match accepts.
func (f *fakeHTTP) waitHit(match func(hit) bool) hit {
	f.t.Helper()
	for _, h := range f.allHits() {
		if match(h) {
			return h
		}
	}
	timeout := time.After(waitLimit)
	for {
		select {
		case h := <-f.hitCh:
			if match(h) {
				return h
			}
		case <-timeout:
			f.t.Fatalf("the expected request never arrived; got %+v", f.allHits())
		}
	}
}

func (f *fakeHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := f.t
	if got := r.Header.Get("Authorization"); got != "Bearer "+testAPIKey {
		t.Errorf("%s: Authorization = %q, want the bearer key", r.Method, got)
		http.Error(w, "no", http.StatusUnauthorized)
		return
	}
	if got := r.Header.Get("X-Test"); got != testHeaderValue {
		t.Errorf("%s: configured header X-Test = %q", r.Method, got)
	}
	h := hit{
		HTTP:        r.Method,
		Session:     r.Header.Get("Mcp-Session-Id"),
		Version:     r.Header.Get("MCP-Protocol-Version"),
		LastEventID: r.Header.Get("Last-Event-ID"),
	}
	f.mu.Lock()
	session := f.session
	f.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("POST Content-Type = %q", ct)
		}
		if a := r.Header.Get("Accept"); !strings.Contains(a, "application/json") || !strings.Contains(a, "text/event-stream") {
			t.Errorf("POST Accept = %q, want both types", a)
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.ParseOne(body)
		if err != nil {
			t.Errorf("POST body %s: %v", body, err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		h.RPC = m.Method
		if m.IsResponse() {
			h.RPC = "response"
		}
		f.record(h)
		if m.Method == "initialize" {
			if h.Session != "" || h.Version != "" {
				t.Errorf("initialize carried session %q and version %q; want neither", h.Session, h.Version)
			}
			f.mu.Lock()
			f.sessions++
			f.session = fmt.Sprintf("session-%d", f.sessions)
			w.Header().Set("Mcp-Session-Id", f.session)
			f.mu.Unlock()
			res := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1"}}`, f.version)
			f.reply(w, m.ID, json.RawMessage(res))
			return
		}
		switch {
		case h.Session == "":
			http.Error(w, "Bad Request: missing session id", http.StatusBadRequest)
			return
		case h.Session != session:
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		if h.Version != f.version {
			t.Errorf("POST %s: MCP-Protocol-Version = %q, want %q", h.RPC, h.Version, f.version)
		}
		if m.Method != "" && m.Method == f.expireOn && f.expireTimes != 0 {
			f.mu.Lock()
			f.expireTimes--
			f.session = ""
			f.mu.Unlock()
			http.Error(w, f.expireBody, f.expireStatus)
			return
		}
		if !m.IsRequest() {
			if f.onNotification != nil && f.onNotification(w, r, m) {
				return
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if f.onRequest != nil && f.onRequest(w, r, m) {
			return
		}
		switch m.Method {
		case "tools/list":
			f.reply(w, m.ID, json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`))
		default:
			params := m.Params
			if params == nil {
				params = json.RawMessage(`{}`)
			}
			f.reply(w, m.ID, params)
		}
	case http.MethodGet:
		f.record(h)
		if a := r.Header.Get("Accept"); a != "text/event-stream" {
			t.Errorf("GET Accept = %q", a)
		}
		if h.Session != session {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		if h.Version != f.version {
			t.Errorf("GET: MCP-Protocol-Version = %q, want %q", h.Version, f.version)
		}
		if f.onGet == nil {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
			return
		}
		f.onGet(w, r)
	case http.MethodDelete:
		f.record(h)
		w.WriteHeader(http.StatusNoContent)
	default:
		t.Errorf("unexpected %s", r.Method)
	}
}

// reply answers request id with result, as JSON or as an event stream.
func (f *fakeHTTP) reply(w http.ResponseWriter, id jsonrpc.ID, result json.RawMessage) {
	resp := jsonrpc.NewResult(id, result)
	if f.sse {
		startSSE(w)
		writeEvent(f.t, w, sse.Event{ID: "prime-" + id.String(), HasID: true})
		writeEvent(f.t, w, sse.Event{ID: "ev-" + id.String(), HasID: true, Data: encode(f.t, resp)})
		return
	}
	writeJSON(w, encode(f.t, resp))
}

func encode(t *testing.T, ms ...*jsonrpc.Message) []byte {
	var raws []json.RawMessage
	for _, m := range ms {
		b, err := jsonrpc.Encode(m)
		if err != nil {
			t.Errorf("encode: %v", err)
		}
		raws = append(raws, b)
	}
	if len(raws) == 1 {
		return raws[0]
	}
	b, _ := json.Marshal(raws)
	return b
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

func writeEvent(t *testing.T, w http.ResponseWriter, ev sse.Event) {
	if err := sse.Write(w, ev); err != nil {
		t.Errorf("writing an event: %v", err)
	}
	w.(http.Flusher).Flush()
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// testServer returns the config of a server at url with the test secrets.
func testServer(transport, url string) config.Server {
	return config.Server{
		Name:      "fake",
		Transport: transport,
		URL:       url,
		APIKey:    testAPIKey,
		Headers:   map[string]string{"X-Test": testHeaderValue},
	}
}

// newTestClient returns an unconnected Client of srv. When the test ends it
// is closed, its logs are checked for secrets, and no goroutine of the
// transports may be left.
func newTestClient(t *testing.T, srv config.Server, opts ClientOptions) *Client {
	t.Helper()
	checkNoLeaks(t)
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertNoSecrets(t, "logs", logs.String())
	})
	return c
}

func assertNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{testAPIKey, testHeaderValue, "query-5ecret"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s contain a secret: %s", what, s)
		}
	}
}

// checkNoLeaks fails the test if goroutines of the transports, clients,
// managers or r3labs/sse are still running once the test's other cleanups
// ran. The package's tests do not run in parallel.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(waitLimit)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			var leaked []string
			for _, g := range strings.Split(stacks, "\n\n") {
				if strings.Contains(g, "upstream.(*httpTransport)") || strings.Contains(g, "upstream.(*sseTransport)") || strings.Contains(g, "r3labs/sse") ||
					strings.Contains(g, "upstream.(*stdioTransport)") || strings.Contains(g, "upstream.(*Manager)") || strings.Contains(g, "upstream.(*Client)") {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leaked goroutines:\n%s", strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func mustConnect(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func TestHTTP_Answers(t *testing.T) {
	tests := []struct {
		name    string
		sse     bool
		version string
	}{
		{name: "json", version: LatestProtocolVersion},
		{name: "event stream with priming event", sse: true, version: LatestProtocolVersion},
		{name: "json 2025-03-26", version: protocol20250326},
		{name: "event stream 2025-06-18", sse: true, version: protocol20250618},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeHTTP(t)
			f.sse, f.version = tt.sse, tt.version
			srv := f.start()
			c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
			mustConnect(t, c)
			if got := c.Initialized().ProtocolVersion; got != tt.version {
				t.Errorf("negotiated %q, want %q", got, tt.version)
			}
			tools, err := c.ListTools(callCtx(t))
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(tools) != 1 || !strings.Contains(string(tools[0]), `"echo"`) {
				t.Errorf("tools = %s", tools)
			}
			res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"x":1}}`), nil)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if want := `{"name":"echo","arguments":{"x":1}}`; string(res) != want {
				t.Errorf("result = %s, want %s", res, want)
			}
			// The GET stream was tried (405 here) with the session and version.
			f.waitHit(func(h hit) bool { return h.HTTP == http.MethodGet })
			if err := c.Close(callCtx(t)); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case <-c.Done():
			default:
				t.Error("Done not closed after Close")
			}
			if err := c.Err(); err != nil {
				t.Errorf("Err after Close = %v, want nil", err)
			}
			want := []string{"POST initialize", "POST notifications/initialized", "POST tools/list", "POST tools/call", "DELETE"}
			if diff := cmp.Diff(want, f.methods()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			hits := f.allHits()
			if del := hits[len(hits)-1]; del.Session != "session-1" || del.Version != tt.version {
				t.Errorf("DELETE carried session %q version %q", del.Session, del.Version)
			}
		})
	}
}

// TestHTTP_ConcurrentCalls runs calls side by side over event streams that
// also carry a notification and a server request tied to each call.
func TestHTTP_ConcurrentCalls(t *testing.T) {
	f := newFakeHTTP(t)
	f.sse = true
	f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		startSSE(w)
		writeEvent(t, w, sse.Event{ID: "p" + m.ID.String(), HasID: true})
		progress := jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":`+m.ID.String()+`,"progress":1}`))
		writeEvent(t, w, sse.Event{ID: "n" + m.ID.String(), HasID: true, Data: encode(t, progress)})
		ping := jsonrpc.NewRequest(jsonrpc.StringID("ping-"+m.ID.String()), "ping", nil)
		writeEvent(t, w, sse.Event{ID: "q" + m.ID.String(), HasID: true, Data: encode(t, ping)})
		writeEvent(t, w, sse.Event{ID: "r" + m.ID.String(), HasID: true, Data: encode(t, jsonrpc.NewResult(m.ID, m.Params))})
		return true
	}
	srv := f.start()
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
	mustConnect(t, c)

	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var mu sync.Mutex
			var notes []string
			hooks := &CallHooks{Notify: func(m *jsonrpc.Message) {
				mu.Lock()
				notes = append(notes, m.Method)
				mu.Unlock()
			}}
			params := json.RawMessage(fmt.Sprintf(`{"name":"echo","arguments":{"i":%d}}`, i))
			res, err := c.Call(callCtx(t), "tools/call", params, hooks)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if string(res) != string(params) {
				t.Errorf("call %d: result %s, want %s", i, res, params)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{"notifications/progress"}, notes); diff != "" {
				t.Errorf("call %d: notifications (-want +got):\n%s", i, diff)
			}
		})
	}
	wg.Wait()
	// Each server ping was answered by a POST of a response.
	answered := 0
	for answered < n {
		f.waitHit(func(h hit) bool { return h.RPC == "response" })
		answered = 0
		for _, h := range f.allHits() {
			if h.RPC == "response" {
				answered++
			}
		}
	}
}

// TestHTTP_Resume covers a POST stream the server closes before answering
// (spec 2025-11-25: after the priming event it may close the connection at
// any time; the client resumes with GET + Last-Event-ID after retry ms).
func TestHTTP_Resume(t *testing.T) {
	tests := []struct {
		name string
		// post writes the POST's stream for request id; resume answers the
		// GET that resumes it (lastID is its Last-Event-ID) and returns the
		// event ids it sent.
		post    func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID)
		resume  func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID, lastID string)
		wantErr string   // "" means the call succeeds
		wantIDs []string // the Last-Event-ID of each resuming GET
	}{
		{
			name: "closed after the priming event",
			post: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID) {
				startSSE(w)
				writeEvent(t, w, sse.Event{ID: "prime-1", HasID: true, Retry: 50 * time.Millisecond, HasRetry: true})
			},
			resume: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID, lastID string) {
				startSSE(w)
				writeEvent(t, w, sse.Event{ID: "ev-2", HasID: true, Data: encode(t, jsonrpc.NewResult(id, json.RawMessage(`{"resumed":true}`)))})
			},
			wantIDs: []string{"prime-1"},
		},
		{
			name: "closed twice",
			post: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID) {
				startSSE(w)
				writeEvent(t, w, sse.Event{ID: "prime-1", HasID: true, Retry: time.Millisecond, HasRetry: true})
			},
			resume: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID, lastID string) {
				startSSE(w)
				if lastID == "prime-1" {
					note := jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"half way"}`))
					writeEvent(t, w, sse.Event{ID: "ev-2", HasID: true, Data: encode(t, note)})
					return
				}
				writeEvent(t, w, sse.Event{ID: "ev-3", HasID: true, Data: encode(t, jsonrpc.NewResult(id, json.RawMessage(`{"resumed":true}`)))})
			},
			wantIDs: []string{"prime-1", "ev-2"},
		},
		{
			name: "closed without an event id",
			post: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID) {
				startSSE(w)
				writeEvent(t, w, sse.Event{Data: encode(t, jsonrpc.NewNotification("notifications/message", json.RawMessage(`{}`)))})
			},
			wantErr: "server closed the response stream before answering",
		},
		{
			name: "resumes that make no progress",
			post: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID) {
				startSSE(w)
				writeEvent(t, w, sse.Event{ID: "prime-1", HasID: true, Retry: time.Millisecond, HasRetry: true})
			},
			resume: func(t *testing.T, w http.ResponseWriter, id jsonrpc.ID, lastID string) {
				startSSE(w)
				fmt.Fprint(w, ": nothing new\n\n")
			},
			wantErr: "5 attempts to resume it made no progress",
			wantIDs: []string{"prime-1", "prime-1", "prime-1", "prime-1", "prime-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeHTTP(t)
			var mu sync.Mutex
			var callID jsonrpc.ID
			f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
				if m.Method != "tools/call" {
					return false
				}
				mu.Lock()
				callID = m.ID
				mu.Unlock()
				tt.post(t, w, m.ID)
				return true
			}
			f.onGet = func(w http.ResponseWriter, r *http.Request) {
				lastID := r.Header.Get("Last-Event-ID")
				if lastID == "" || tt.resume == nil {
					// Not a resume: the server offers no GET stream.
					http.Error(w, "no", http.StatusMethodNotAllowed)
					return
				}
				mu.Lock()
				id := callID
				mu.Unlock()
				tt.resume(t, w, id, lastID)
			}
			srv := f.start()
			var notes []string
			var nmu sync.Mutex
			c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
			mustConnect(t, c)
			hooks := &CallHooks{Notify: func(m *jsonrpc.Message) {
				nmu.Lock()
				notes = append(notes, m.Method)
				nmu.Unlock()
			}}
			res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"slow"}`), hooks)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Call error = %v, want one containing %q", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				if string(res) != `{"resumed":true}` {
					t.Errorf("result = %s", res)
				}
			}
			var gotIDs []string
			for _, h := range f.allHits() {
				if h.HTTP == http.MethodGet && h.LastEventID != "" {
					gotIDs = append(gotIDs, h.LastEventID)
					if h.Session != "session-1" || h.Version != LatestProtocolVersion {
						t.Errorf("resuming GET carried session %q version %q", h.Session, h.Version)
					}
				}
			}
			if diff := cmp.Diff(tt.wantIDs, gotIDs); diff != "" {
				t.Errorf("Last-Event-ID of the resuming GETs (-want +got):\n%s", diff)
			}
			if tt.name == "closed twice" && !slices.Equal(notes, []string{"notifications/message"}) {
				t.Errorf("notifications tied to the call = %v", notes)
			}
		})
	}
}

// TestHTTP_ResumeAfterExpiry checks that a session that expires while a
// call's stream is being resumed fails that call (the server had it; it is
// not sent again) and that the next call initializes a new session.
func TestHTTP_ResumeAfterExpiry(t *testing.T) {
	f := newFakeHTTP(t)
	f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		f.mu.Lock()
		f.session = "" // the server forgets the session
		f.mu.Unlock()
		startSSE(w)
		writeEvent(t, w, sse.Event{ID: "prime-1", HasID: true, Retry: time.Millisecond, HasRetry: true})
		return true
	}
	srv := f.start()
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
	mustConnect(t, c)
	_, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "session expired before the server answered") || errors.Is(err, errSessionExpired) {
		t.Fatalf("Call error = %v", err)
	}
	if _, err := c.ListTools(callCtx(t)); err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	want := []string{
		"POST initialize", "POST notifications/initialized", "POST tools/call",
		"POST initialize", "POST notifications/initialized", "POST tools/list",
	}
	if diff := cmp.Diff(want, f.methods()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestHTTP_Batch covers a 2025-03-26 server answering with a JSON-RPC batch
// (a notification tied to the call, then the response), as JSON and as an
// event.
func TestHTTP_Batch(t *testing.T) {
	for _, useSSE := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", useSSE), func(t *testing.T) {
			f := newFakeHTTP(t)
			f.version = protocol20250326
			f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
				if m.Method != "tools/call" {
					return false
				}
				batch := encode(t,
					jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"p","progress":1}`)),
					jsonrpc.NewResult(m.ID, json.RawMessage(`{"batched":true}`)))
				if !useSSE {
					writeJSON(w, batch)
					return true
				}
				startSSE(w)
				writeEvent(t, w, sse.Event{Data: batch})
				return true
			}
			srv := f.start()
			c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
			mustConnect(t, c)
			var notes []string
			res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{}`), &CallHooks{Notify: func(m *jsonrpc.Message) { notes = append(notes, m.Method) }})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if string(res) != `{"batched":true}` {
				t.Errorf("result = %s", res)
			}
			if diff := cmp.Diff([]string{"notifications/progress"}, notes); diff != "" {
				t.Errorf("notifications (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHTTP_SessionExpiry covers a server that forgets the session: the
// Client initializes again, once, without a session id, and resends.
func TestHTTP_SessionExpiry(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		times   int  // -1: every time
		notify  bool // the expiry is seen by a notification first
		wantErr bool
	}{
		{name: "404", status: http.StatusNotFound, body: "Session not found", times: 1},
		{name: "seen by a notification", status: http.StatusNotFound, body: "Session not found", times: 1, notify: true},
		{name: "TypeScript SDK 400", status: http.StatusBadRequest, body: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`, times: 1},
		{name: "expires every time", status: http.StatusNotFound, body: "Session not found", times: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeHTTP(t)
			f.expireOn, f.expireTimes, f.expireStatus, f.expireBody = "tools/list", tt.times, tt.status, tt.body
			want := []string{
				"POST initialize", "POST notifications/initialized", "POST tools/list",
				"POST initialize", "POST notifications/initialized", "POST tools/list",
			}
			if tt.notify {
				f.expireOn = "notifications/roots/list_changed"
				want = slices.Delete(want, 2, 3)
				want = slices.Insert(want, 2, "POST notifications/roots/list_changed")
			}
			srv := f.start()
			c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
			mustConnect(t, c)
			if tt.notify {
				if err := c.Notify(callCtx(t), "notifications/roots/list_changed", nil); !errors.Is(err, errSessionExpired) {
					t.Fatalf("Notify error = %v, want %v", err, errSessionExpired)
				}
			}
			tools, err := c.ListTools(callCtx(t))
			if tt.wantErr {
				if !errors.Is(err, errSessionExpired) {
					t.Fatalf("ListTools error = %v, want %v", err, errSessionExpired)
				}
			} else if err != nil || len(tools) != 1 {
				t.Fatalf("ListTools = %s, %v", tools, err)
			}
			if diff := cmp.Diff(want, f.methods()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			var inits []hit
			for _, h := range f.allHits() {
				if h.RPC == "initialize" {
					inits = append(inits, h)
				}
			}
			if len(inits) != 2 || inits[1].Session != "" || inits[1].Version != "" {
				t.Errorf("initializations = %+v; want a second one without session or version", inits)
			}
		})
	}
}

// TestHTTP_GetStream covers the GET stream: it carries the session and the
// version, delivers what the server pushes to OnNotification, answers the
// server's requests, and reconnects when the server ends it.
func TestHTTP_GetStream(t *testing.T) {
	f := newFakeHTTP(t)
	var gets sync.WaitGroup
	f.onGet = func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		defer gets.Done()
		startSSE(w)
		if r.Header.Get("Last-Event-ID") == "" {
			// The first connection: one notification, then the server
			// ends the stream, which the client reopens.
			writeEvent(t, w, sse.Event{ID: "g1", HasID: true, Data: encode(t, jsonrpc.NewNotification("notifications/tools/list_changed", nil))})
			return
		}
		ping := jsonrpc.NewRequest(jsonrpc.StringID("srv-ping"), "ping", nil)
		writeEvent(t, w, sse.Event{ID: "g2", HasID: true, Data: encode(t, ping)})
		<-r.Context().Done()
	}
	srv := f.start()
	notes := make(chan string, 10)
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{
		OnNotification: func(m *jsonrpc.Message) { notes <- m.Method },
	})
	mustConnect(t, c)
	select {
	case got := <-notes:
		if got != "notifications/tools/list_changed" {
			t.Errorf("OnNotification got %q", got)
		}
	case <-time.After(waitLimit):
		t.Fatal("the notification on the GET stream never arrived")
	}
	// The reconnection carried the last event id; the ping was answered.
	h := f.waitHit(func(h hit) bool { return h.HTTP == http.MethodGet && h.LastEventID == "g1" })
	if h.Session != "session-1" || h.Version != LatestProtocolVersion {
		t.Errorf("GET carried session %q version %q", h.Session, h.Version)
	}
	f.waitHit(func(h hit) bool { return h.RPC == "response" })
	if err := c.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	gets.Wait() // Close ended the held GET
}

// TestHTTP_GetStreamStops checks that the GET stream gives up by itself
// when the server offers none (405) or forgot the session (404), and keeps
// going (with backoff) on other failures until stopped.
func TestHTTP_GetStreamStops(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		wantStop bool
	}{
		{name: "405", status: http.StatusMethodNotAllowed, wantStop: true},
		{name: "404", status: http.StatusNotFound, wantStop: true},
		{name: "TypeScript SDK 400", status: http.StatusBadRequest, wantStop: true},
		{name: "503", status: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoLeaks(t)
			gets := make(chan struct{}, 100)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gets <- struct{}{}
				http.Error(w, "Bad Request: No valid session ID provided", tt.status)
			}))
			t.Cleanup(srv.Close)
			tr := newHTTPTransport(testServer("http", srv.URL), &ClientOptions{HTTPClient: srv.Client()}).(*httpTransport)
			tr.recv = func(*jsonrpc.Message, related) { t.Error("a message arrived") }
			t.Cleanup(func() { tr.close(context.Background()) })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			returned := make(chan struct{})
			go func() {
				tr.runGetStream(ctx, "session-1", LatestProtocolVersion)
				close(returned)
			}()
			<-gets
			if !tt.wantStop {
				<-gets // it tries again
				cancel()
			}
			select {
			case <-returned:
			case <-time.After(waitLimit):
				t.Fatal("the GET stream did not stop")
			}
		})
	}
}

// TestHTTP_CloseDuringCall checks that Close ends a call in flight: one
// whose answer has not begun, and one reading its answer's stream, through
// the default client and through another.
func TestHTTP_CloseDuringCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started bool // the answer's stream has begun
		client  func(*httptest.Server) *http.Client
	}{
		{name: "no answer yet", started: false},
		{name: "stream begun", started: true},
		{name: "no answer yet, another client", started: false, client: (*httptest.Server).Client},
		{name: "stream begun, another client", started: true, client: (*httptest.Server).Client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCloseDuringCall(t, tc.started, tc.client)
		})
	}
}

func testCloseDuringCall(t *testing.T, started bool, client func(*httptest.Server) *http.Client) {
	f := newFakeHTTP(t)
	f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		if started {
			startSSE(w)
			writeEvent(t, w, sse.Event{ID: "p", HasID: true})
		}
		<-r.Context().Done()
		return true
	}
	srv := f.start()
	var opts ClientOptions
	if client != nil {
		opts.HTTPClient = client(srv)
	}
	c := newTestClient(t, testServer("http", srv.URL), opts)
	mustConnect(t, c)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{}`), nil)
		errc <- err
	}()
	f.waitHit(func(h hit) bool { return h.RPC == "tools/call" })
	if err := c.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(callCtx(t)); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Error("the call succeeded")
		}
		t.Logf("the call: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("Close returned with the call still in flight")
	}
	if _, err := c.Call(callCtx(t), "tools/list", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after Close = %v, want ErrClosed", err)
	}
	f.waitHit(func(h hit) bool { return h.HTTP == http.MethodDelete })
}

// TestHTTP_EndlessAnswerToANotification checks that the answer to a
// notification that the server never ends is read for drainTimeout at
// most, with the client still open and the notification's context alive:
// its connection is then closed.
func TestHTTP_EndlessAnswerToANotification(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(*httptest.Server) *http.Client
	}{
		{name: "default client"},
		{name: "another client", client: (*httptest.Server).Client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeHTTP(t)
			ended := make(chan struct{})
			f.onNotification = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
				if m.Method != "notifications/roots/list_changed" {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "{")
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the client closed the connection
				close(ended)
				return true
			}
			srv := f.start()
			var opts ClientOptions
			if tc.client != nil {
				opts.HTTPClient = tc.client(srv)
			}
			c := newTestClient(t, testServer("http", srv.URL), opts)
			mustConnect(t, c)
			if err := c.Notify(context.Background(), "notifications/roots/list_changed", nil); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ended:
			case <-time.After(waitLimit):
				t.Fatalf("the answer was still being read %s after the notification (drainTimeout %s)", waitLimit, drainTimeout)
			}
		})
	}
}

// TestHTTP_CancelOnContext checks that a call whose context ends stops
// reading its stream and that the server hears notifications/cancelled.
func TestHTTP_CancelOnContext(t *testing.T) {
	f := newFakeHTTP(t)
	f.sse = true
	f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		startSSE(w)
		writeEvent(t, w, sse.Event{ID: "p", HasID: true})
		<-r.Context().Done() // never answers
		return true
	}
	srv := f.start()
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
	mustConnect(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{}`), nil)
		errc <- err
	}()
	f.waitHit(func(h hit) bool { return h.RPC == "tools/call" })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Call error = %v, want context.Canceled", err)
	}
	f.waitHit(func(h hit) bool { return h.RPC == "notifications/cancelled" })
}

// TestHTTP_Errors covers answers that are errors: body caps, statuses, and
// that no error names a secret.
func TestHTTP_Errors(t *testing.T) {
	big := `{"text":"` + strings.Repeat("x", 4096) + `"}`
	tests := []struct {
		name    string
		handler func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message)
		wantErr string
	}{
		{
			name: "json body over the cap",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				writeJSON(w, encode(t, jsonrpc.NewResult(m.ID, json.RawMessage(big))))
			},
			wantErr: "server's answer is larger than the limit of 1024 bytes",
		},
		{
			name: "event over the cap",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				startSSE(w)
				writeEvent(t, w, sse.Event{ID: "1", HasID: true, Data: encode(t, jsonrpc.NewResult(m.ID, json.RawMessage(big)))})
			},
			wantErr: "server sent an event larger than the limit of 1024 bytes",
		},
		{
			name: "500 echoing secrets",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				http.Error(w, "oops: Authorization: Bearer "+testAPIKey+"; X-Test: "+testHeaderValue+strings.Repeat(" and more", 100), http.StatusInternalServerError)
			},
			wantErr: "server answered 500 Internal Server Error: oops: Authorization: Bearer [redacted]; X-Test: [redacted] and more",
		},
		{
			name: "401",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				http.Error(w, "bad key "+testAPIKey, http.StatusUnauthorized)
			},
			wantErr: "server answered 401 Unauthorized: unauthorized (check api_key)",
		},
		{
			name: "403",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				w.WriteHeader(http.StatusForbidden)
			},
			wantErr: "server answered 403 Forbidden: unauthorized (check api_key)",
		},
		{
			name: "json without the response",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				writeJSON(w, encode(t, jsonrpc.NewNotification("notifications/message", nil)))
			},
			wantErr: "does not contain the response",
		},
		{
			name: "202 to a request",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				w.WriteHeader(http.StatusAccepted)
			},
			wantErr: "server answered 202 Accepted to a request, without a response",
		},
		{
			name: "html",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html>"))
			},
			wantErr: `content type "text/html"`,
		},
		{
			name: "not JSON-RPC",
			handler: func(t *testing.T, w http.ResponseWriter, m *jsonrpc.Message) {
				writeJSON(w, []byte(`{"hello":1}`))
			},
			wantErr: "server's answer is not JSON-RPC",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeHTTP(t)
			f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
				if m.Method != "tools/call" {
					return false
				}
				tt.handler(t, w, m)
				return true
			}
			srv := f.start()
			c := newTestClient(t, testServer("http", srv.URL+"/?token=query-5ecret"), ClientOptions{MaxMessageBytes: 1024})
			mustConnect(t, c)
			_, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{}`), nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Call error = %v, want one containing %q", err, tt.wantErr)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes: %v", len(err.Error()), err)
			}
			assertNoSecrets(t, "error", err.Error())
			// The client still works.
			if _, err := c.ListTools(callCtx(t)); err != nil {
				t.Errorf("ListTools after the error: %v", err)
			}
		})
	}
}

// TestHTTP_Redirect: a server URL that answers with a redirect is
// followed, the request's body sent again and its headers kept, as
// http.Client does; each request reaches the old URL once, so a server
// that runs a call and then redirects does not run it twice.
func TestHTTP_Redirect(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			f := newFakeHTTP(t)
			var (
				mu  sync.Mutex
				old []string // "HTTP RPC" of each POST to /old
			)
			mux := http.NewServeMux()
			mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					m, err := jsonrpc.ParseOne(body)
					if err != nil {
						t.Errorf("POST /old body %s: %v", body, err)
					} else {
						mu.Lock()
						old = append(old, "POST "+m.Method)
						mu.Unlock()
					}
				}
				http.Redirect(w, r, "/mcp", code)
			})
			mux.Handle("/mcp", f)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c := newTestClient(t, testServer("http", srv.URL+"/old"), ClientOptions{})
			mustConnect(t, c)
			tools, err := c.ListTools(callCtx(t))
			if err != nil || len(tools) == 0 {
				t.Fatalf("ListTools through the redirect: %d tools, %v", len(tools), err)
			}
			want := []string{"POST initialize", "POST notifications/initialized", "POST tools/list"}
			if diff := cmp.Diff(want, f.methods()); diff != "" {
				t.Errorf("requests at the target (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(want, old); diff != "" {
				t.Errorf("requests at the old URL (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHTTP_ConnectErrors checks that failures to reach a server name it by
// scheme, host and path only.
func TestHTTP_ConnectErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			c := newTestClient(t, testServer(transport, url+"/mcp?token=query-5ecret"), ClientOptions{})
			err := c.Connect(callCtx(t))
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), url+"/mcp") {
				t.Errorf("error %q does not name the server", err)
			}
			assertNoSecrets(t, "error", err.Error())
		})
	}
}

// TestHTTP_GoSDK runs the client against the official Go SDK's streamable
// HTTP server (stateful). go-sdk supports 2026-07-28 too; we ask 2025-11-25
// and it must agree.
func TestHTTP_GoSDK(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			server := newSDKServer()
			var gets sync.WaitGroup
			getSeen := make(chan struct{}, 10)
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
					t.Errorf("%s without the bearer key", r.Method)
				}
				if r.Method == http.MethodGet {
					gets.Add(1)
					defer gets.Done()
					select {
					case getSeen <- struct{}{}:
					default:
					}
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			notes := make(chan string, 10)
			c := newTestClient(t, testServer("http", srv.URL), ClientOptions{
				OnNotification: func(m *jsonrpc.Message) { notes <- m.Method },
			})
			mustConnect(t, c)
			if got := c.Initialized().ProtocolVersion; got != LatestProtocolVersion {
				t.Errorf("negotiated %q", got)
			}
			tools, err := c.ListTools(callCtx(t))
			if err != nil || len(tools) != 1 {
				t.Fatalf("ListTools = %s, %v", tools, err)
			}
			res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), nil)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !strings.Contains(string(res), `"text":"echo: hi"`) {
				t.Errorf("result = %s", res)
			}
			// A tool added later is announced on the GET stream.
			select {
			case <-getSeen:
			case <-time.After(waitLimit):
				t.Fatal("no GET stream")
			}
			deadline := time.After(waitLimit)
		wait:
			for i := 0; ; i++ {
				addEcho(server, fmt.Sprintf("echo%d", i))
				select {
				case got := <-notes:
					if got != "notifications/tools/list_changed" {
						t.Errorf("notification %q", got)
					}
					break wait
				case <-time.After(100 * time.Millisecond):
					// The GET may not be subscribed yet; announce again.
				case <-deadline:
					t.Fatal("list_changed never arrived on the GET stream")
				}
			}
			if err := c.Close(callCtx(t)); err != nil {
				t.Fatal(err)
			}
			gets.Wait()
		})
	}
}

func newSDKServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "real", Version: "1"}, nil)
	addEcho(server, "echo")
	return server
}

func addEcho(server *mcp.Server, name string) {
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: name, Description: "echoes"}, func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil, nil
	})
}

// TestHTTP_GetStreamIdle checks that a GET stream silent for longer than
// StreamIdleTimeout is cut and opened again, resuming after the last
// event.
func TestHTTP_GetStreamIdle(t *testing.T) {
	f := newFakeHTTP(t)
	var mu sync.Mutex
	gets := 0
	firstCut := make(chan struct{})
	f.onGet = func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gets++
		n := gets
		mu.Unlock()
		startSSE(w)
		if n == 1 {
			// One event, then silence, until the client gives up on it.
			writeEvent(t, w, sse.Event{ID: "g1", HasID: true, Data: encode(t, jsonrpc.NewNotification("notifications/tools/list_changed", nil))})
			<-r.Context().Done()
			close(firstCut)
			return
		}
		<-r.Context().Done()
	}
	srv := f.start()
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{StreamIdleTimeout: 50 * time.Millisecond})
	mustConnect(t, c)
	h := f.waitHit(func(h hit) bool { return h.HTTP == http.MethodGet && h.LastEventID == "g1" })
	if h.Session != "session-1" || h.Version != LatestProtocolVersion {
		t.Errorf("re-opened GET carried session %q version %q", h.Session, h.Version)
	}
	select {
	case <-firstCut:
	case <-time.After(waitLimit):
		t.Fatal("the silent stream was never cut")
	}
}

// TestHTTP_SessionExpiryRestores checks that a session initialized again
// after the server forgot it gets the old one's subscriptions and log
// level before the call is sent again.
func TestHTTP_SessionExpiryRestores(t *testing.T) {
	f := newFakeHTTP(t)
	f.expireOn, f.expireTimes, f.expireStatus, f.expireBody = "tools/call", 1, http.StatusNotFound, "Session not found"
	srv := f.start()
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{})
	mustConnect(t, c)
	for _, call := range []struct{ method, params string }{
		{"resources/subscribe", `{"uri":"file:///a"}`},
		{"logging/setLevel", `{"level":"warning"}`},
		{"tools/call", `{"name":"echo"}`},
	} {
		if _, err := c.Call(callCtx(t), call.method, json.RawMessage(call.params), nil); err != nil {
			t.Fatalf("%s: %v", call.method, err)
		}
	}
	want := []string{
		"POST initialize", "POST notifications/initialized",
		"POST resources/subscribe", "POST logging/setLevel", "POST tools/call",
		"POST initialize", "POST notifications/initialized",
		"POST resources/subscribe", "POST logging/setLevel", "POST tools/call",
	}
	if diff := cmp.Diff(want, f.methods()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// blockingBody is a response body for release whose reads wait until
// unblock is closed; reading is closed when the first read begins.
type blockingBody struct {
	reading, unblock chan struct{}
	once             sync.Once
	closed           atomic.Int32
}

func newBlockingBody() *blockingBody {
	return &blockingBody{reading: make(chan struct{}), unblock: make(chan struct{})}
}

func (b *blockingBody) Read([]byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	<-b.unblock
	return 0, io.EOF
}

func (b *blockingBody) Close() error {
	b.closed.Add(1)
	return nil
}

// TestRelease: a body we stopped reading is drained in the background,
// no longer following its sender's context, and closed once drained, so
// that its connection can be reused; once the transport is closed it is
// closed at once.
func TestRelease(t *testing.T) {
	checkNoLeaks(t)
	tr := newHTTPTransport(testServer("http", "http://127.0.0.1:1/mcp"), &ClientOptions{}).(*httpTransport)
	t.Cleanup(func() { tr.close(context.Background()) })

	body := newBlockingBody()
	var detached atomic.Bool
	ended := make(chan struct{}) // the exchange's cancel was called
	var once sync.Once
	tr.release(body, func() { detached.Store(true) }, func() { once.Do(func() { close(ended) }) })
	select {
	case <-body.reading:
	case <-time.After(waitLimit):
		t.Fatal("the body was never drained")
	}
	// The drain is in its read.
	if body.closed.Load() != 0 {
		t.Error("the body was closed while it was being drained")
	}
	if !detached.Load() {
		t.Error("the body is drained while its exchange still follows the sender's context")
	}
	select {
	case <-ended:
		t.Error("the exchange was cancelled while its body was being drained")
	default:
	}
	close(body.unblock)
	select {
	case <-ended:
	case <-time.After(waitLimit):
		t.Fatal("the exchange was never cancelled after the drain")
	}
	if n := body.closed.Load(); n != 1 {
		t.Errorf("the drained body was closed %d times; want 1", n)
	}

	// A closed transport starts no drain.
	tr.close(context.Background())
	late := newBlockingBody()
	cancelled := false
	tr.release(late, func() {}, func() { cancelled = true })
	if late.closed.Load() != 1 || !cancelled {
		t.Errorf("after close: body closed %d times, exchange cancelled %v; want 1, true", late.closed.Load(), cancelled)
	}
	select {
	case <-late.reading:
		t.Error("a closed transport drained a body")
	default:
	}
}

// TestHTTP_AnswerToANotificationKeepsTheConnection: the body of a 202
// to a notification or to a response, still coming when send returns and
// the sender's context ends (as the Client ends it), is drained in the
// background to its end, and every such POST reuses the one connection.
func TestHTTP_AnswerToANotificationKeepsTheConnection(t *testing.T) {
	checkNoLeaks(t)
	proceed := make(chan struct{}) // the handler ends its answer's body
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "accepted")
		w.(http.Flusher).Flush() // chunked: the body has no length
		select {
		case <-proceed:
		case <-r.Context().Done():
		}
	}))
	var (
		mu       sync.Mutex
		accepted int
		closed   = make(chan struct{}, 100)
	)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			mu.Lock()
			accepted++
			mu.Unlock()
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	pooled := make(chan struct{}, 100)
	hc := &http.Client{Transport: idleTracer{base: defaultHTTPClient.Transport.(*http.Transport).Clone(), pooled: pooled}}
	tr := newHTTPTransport(config.Server{Name: "fake", Transport: config.TransportHTTP, URL: srv.URL}, &ClientOptions{HTTPClient: hc}).(*httpTransport)
	if err := tr.start(context.Background(), func(*jsonrpc.Message, related) {}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.close(context.Background()) })

	const n = 5
	for i := range n {
		m := jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":1,"progress":1}`))
		if i%2 == 1 {
			m = jsonrpc.NewResult(jsonrpc.IntID(int64(i)), json.RawMessage(`{}`)) // an answer to a server's request
		}
		ctx := newFollowedCtx()
		if err := tr.send(ctx, m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		// The body's drain must not end with the sender's context: the
		// race of its end with the body's is not for this test to win.
		if n := ctx.followers(); n != 0 {
			t.Errorf("POST %d: %d exchange(s) still end with the sender's context once send returned", i, n)
		}
		ctx.cancel() // as the Client does once send returns
		timeout := time.After(waitLimit)
		select {
		case proceed <- struct{}{}:
		case <-closed:
			t.Fatalf("the connection of POST %d was closed before its answer's body ended", i)
		case <-timeout:
			t.Fatalf("POST %d: the handler never finished", i)
		}
		select {
		case <-pooled:
		case <-closed:
			t.Fatalf("the connection of POST %d was closed instead of going back to the pool", i)
		case <-timeout:
			t.Fatalf("the connection of POST %d never went back to the pool", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if accepted != 1 {
		t.Errorf("%d POSTs answered 202 with a body opened %d connections; want 1", n, accepted)
	}
}

// followedCtx is a context that knows which functions context.AfterFunc
// registered on it and did not stop (context.AfterFunc uses a context's
// own AfterFunc method when it derives from no context of the context
// package that can end): what still follows it.
type followedCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}

	mu   sync.Mutex
	fs   map[int]func() // nil once cancelled
	next int
}

func newFollowedCtx() *followedCtx {
	return &followedCtx{Context: context.Background(), done: make(chan struct{}), fs: make(map[int]func())}
}

func (c *followedCtx) Done() <-chan struct{} { return c.done }

func (c *followedCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

func (c *followedCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fs == nil {
		go f()
		return func() bool { return false }
	}
	k := c.next
	c.next++
	c.fs[k] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.fs[k]
		delete(c.fs, k)
		return ok
	}
}

// followers returns how many AfterFunc functions wait for c to end.
func (c *followedCtx) followers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fs)
}

// cancel ends c and runs its AfterFunc functions.
func (c *followedCtx) cancel() {
	c.mu.Lock()
	close(c.done)
	fs := c.fs
	c.fs = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// TestHTTP_StreamEndsAfterTheCall: a server that ends a call's event
// stream only after the answer (as the official Go SDK's does, in a
// write of its own) keeps its connection, and the next call reuses it,
// though the first call's context ended before the stream did.
func TestHTTP_StreamEndsAfterTheCall(t *testing.T) {
	f := newFakeHTTP(t)
	end := make(chan struct{}) // closed: the streams end
	f.onRequest = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		startSSE(w)
		writeEvent(t, w, sse.Event{ID: "ev-" + m.ID.String(), HasID: true, Data: encode(t, jsonrpc.NewResult(m.ID, json.RawMessage(`{"n":1}`)))})
		w.(http.Flusher).Flush()
		select {
		case <-end:
		case <-r.Context().Done():
		}
		return true
	}
	var (
		mu               sync.Mutex
		accepted, closed int
		states           = make(chan http.ConnState, 100)
	)
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		switch st {
		case http.StateNew:
			accepted++
		case http.StateClosed:
			closed++
		}
		mu.Unlock()
		states <- st
	}
	srv.Start()
	t.Cleanup(srv.Close)
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return accepted, closed
	}
	// The default client's transport, telling when it puts a connection
	// back in its pool.
	pooled := make(chan struct{}, 100)
	hc := &http.Client{Transport: idleTracer{base: defaultHTTPClient.Transport.(*http.Transport).Clone(), pooled: pooled}}
	c := newTestClient(t, testServer("http", srv.URL), ClientOptions{HTTPClient: hc})
	mustConnect(t, c)
	f.waitHit(func(h hit) bool { return h.HTTP == http.MethodGet }) // the GET stream's try, answered 405

	ctx, cancel := context.WithCancel(context.Background())
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo"}`), nil); err != nil {
		t.Fatalf("first call: %v", err)
	}
	for len(states) > 0 { // what came before the stream's end
		<-states
	}
	for len(pooled) > 0 { // the connections of the exchanges before
		<-pooled
	}
	cancel() // as the edge ends a call's context once its answer is relayed
	close(end)
	// The server ends the stream and waits for the next request (idle),
	// or sees the connection closed.
	timeout := time.After(waitLimit)
	for st := http.StateActive; st != http.StateIdle && st != http.StateClosed; {
		select {
		case st = <-states:
		case <-timeout:
			t.Fatal("the server never finished the first call's stream")
		}
	}
	// The client's drain reads the stream's end in the background and then
	// puts the connection back in the pool.
	select {
	case <-pooled:
	case <-timeout:
		t.Fatal("the first call's connection never went back to the pool")
	}
	before, closedBefore := counts()
	if closedBefore != 0 {
		t.Fatalf("%d connection(s) closed after the first call; want its connection kept", closedBefore)
	}
	res, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo"}`), nil)
	if err != nil || string(res) != `{"n":1}` {
		t.Fatalf("second call: %s, %v", res, err)
	}
	if after, _ := counts(); after != before {
		t.Errorf("the second call dialled %d new connection(s), want it to reuse the first call's", after-before)
	}
}

// idleTracer is an http.RoundTripper that signals pooled each time base
// puts a request's connection back in its pool of idle connections.
type idleTracer struct {
	base   http.RoundTripper
	pooled chan<- struct{}
}

func (it idleTracer) RoundTrip(r *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{PutIdleConn: func(err error) {
		if err == nil {
			it.pooled <- struct{}{}
		}
	}}
	return it.base.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}
