package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// benchCallParams are the params of a small tools/call as the core
// forwards them: the server's own tool name, arguments, and the gateway's
// progress token.
var benchCallParams = json.RawMessage(`{"name":"read_file","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200},"_meta":{"progressToken":"mcpgw-p-17"}}`)

// benchCallResult is the result of a small tools/call.
var benchCallResult = json.RawMessage(`{"content":[{"type":"text","text":"hello from the server, a line of text"}],"isError":false}`)

// benchHooks are the hooks the core gives every forwarded call.
func benchHooks() *CallHooks {
	return &CallHooks{
		Notify:  func(*jsonrpc.Message) {},
		Request: func(context.Context, *jsonrpc.Message) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	}
}

// benchTransport is an in-memory server that answers every request at
// once, on the caller's goroutine, like a stdio server (nothing is related
// to a request). With wire set, the request is encoded and the answer
// parsed from bytes, as the stdio transport does around its pipes.
type benchTransport struct {
	wire bool

	recv      func(*jsonrpc.Message, related)
	ch        chan struct{}
	closeOnce sync.Once
}

func newBenchTransport(wire bool) *benchTransport {
	return &benchTransport{wire: wire, ch: make(chan struct{})}
}

func (t *benchTransport) start(_ context.Context, recv func(*jsonrpc.Message, related)) error {
	t.recv = recv
	return nil
}

func (t *benchTransport) send(_ context.Context, m *jsonrpc.Message) error {
	if t.wire {
		if _, err := jsonrpc.Encode(m); err != nil {
			return err
		}
	}
	if !m.IsRequest() {
		return nil
	}
	var result json.RawMessage
	switch m.Method {
	case "initialize":
		result = initResult(LatestProtocolVersion)
	case "tools/list":
		result = json.RawMessage(`{"tools":[{"name":"read_file","inputSchema":{"type":"object"}}]}`)
	default:
		result = benchCallResult
	}
	resp := jsonrpc.NewResult(m.ID, result)
	if t.wire {
		line, err := jsonrpc.Encode(resp)
		if err != nil {
			return err
		}
		msgs, _, err := jsonrpc.Parse(line)
		if err != nil {
			return err
		}
		resp = msgs[0]
	}
	t.recv(resp, related{})
	return nil
}

func (t *benchTransport) negotiated(string)     {}
func (t *benchTransport) ready(context.Context) {}
func (t *benchTransport) close(context.Context) error {
	t.closeOnce.Do(func() { close(t.ch) })
	return nil
}
func (t *benchTransport) done() <-chan struct{} { return t.ch }
func (t *benchTransport) err() error            { return nil }

// benchCall runs Client.Call of the small tools/call in a loop after
// checking its answer once.
func benchCall(b *testing.B, c *Client, params json.RawMessage, hooks *CallHooks, want string) {
	b.Helper()
	ctx := context.Background()
	res, err := c.Call(ctx, "tools/call", params, hooks)
	if err != nil || !strings.Contains(string(res), want) {
		b.Fatalf("Call = %s, %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", params, hooks); err != nil {
			b.Fatal(err)
		}
	}
}

func closeClient(b *testing.B, c *Client) {
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
}

// BenchmarkClient_Call is the Client's own per-call work (a fresh id, the
// pending call, attribution, the wait for the answer) for a small
// tools/call, over an in-memory server: with hooks as the core passes
// them or none, and with the request encoded and the answer parsed as on
// a wire.
func BenchmarkClient_Call(b *testing.B) {
	for _, bc := range []struct {
		name  string
		wire  bool
		hooks bool
	}{
		{"in_memory/no_hooks", false, false},
		{"in_memory/hooks", false, true},
		{"wire/hooks", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newClient(ClientOptions{Name: "bench"}, newBenchTransport(bc.wire))
			if err := c.Connect(context.Background()); err != nil {
				b.Fatal(err)
			}
			closeClient(b, c)
			var hooks *CallHooks
			if bc.hooks {
				hooks = benchHooks()
			}
			benchCall(b, c, benchCallParams, hooks, "hello from the server")
		})
	}
}

// BenchmarkClient_CallStdio is a small tools/call round trip to a real
// stdio child (the test binary as the fake server, tool "cwd"). The time
// includes the pipes and the child's work; the allocations are the
// gateway side's only.
func BenchmarkClient_CallStdio(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	srv := config.Server{
		Name:      "fake",
		Transport: config.TransportStdio,
		Command:   exe,
		Env:       map[string]string{fakeServerEnv: "", "GORACE": "atexit_sleep_ms=0"},
	}
	c, err := New(srv, ClientOptions{StopGrace: testGrace})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	closeClient(b, c)
	wd, _ := os.Getwd()
	params := json.RawMessage(`{"name":"cwd","arguments":{"text":"a few words of argument"},"_meta":{"progressToken":"mcpgw-p-17"}}`)
	benchCall(b, c, params, benchHooks(), wd)
}

// benchHTTPServer is a streamable HTTP server that answers initialize with
// a session, notifications with 202, GET with 405 (no stream of its own),
// DELETE with 204, and every other request with benchCallResult, as JSON
// or as an event stream (a priming event, then the response).
type benchHTTPServer struct {
	sse bool
}

func (s *benchHTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	m, err := jsonrpc.ParseOne(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := benchCallResult
	if m.Method == "initialize" {
		result = initResult(LatestProtocolVersion)
		w.Header().Set(headerSessionID, "bench-session")
	}
	resp, _ := jsonrpc.Encode(jsonrpc.NewResult(m.ID, result))
	if !s.sse || m.Method == "initialize" {
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var buf bytes.Buffer
	sse.Write(&buf, sse.Event{ID: "1_1", HasID: true})
	sse.Write(&buf, sse.Event{ID: "1_2", HasID: true, Data: resp})
	w.Write(buf.Bytes())
}

// BenchmarkClient_CallHTTP is a small tools/call round trip over the
// streamable HTTP transport to an in-process httptest server on loopback,
// answered as JSON and as an event stream, with the default client, as in
// production. Time and allocations include the client and net/http's
// server.
func BenchmarkClient_CallHTTP(b *testing.B) {
	for _, answer := range []string{"json", "sse"} {
		b.Run(answer, func(b *testing.B) {
			hs := httptest.NewServer(&benchHTTPServer{sse: answer == "sse"})
			defer hs.Close()
			srv := config.Server{Name: "fake", Transport: config.TransportHTTP, URL: hs.URL}
			c, err := New(srv, ClientOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := c.Connect(ctx); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				c.Close(ctx)
			}()
			benchCall(b, c, benchCallParams, benchHooks(), "hello from the server")
		})
	}
}

// BenchmarkManager_Call is Manager.Call of a small tools/call to a shared
// server with an in-memory client: the Manager's routing, limits, client
// span and metrics around Client.Call, with the global (no-op) telemetry
// providers and with a metrics SDK provider as cmd/mcpgw always sets up.
func BenchmarkManager_Call(b *testing.B) {
	for _, bc := range []struct {
		name    string
		metrics bool
	}{
		{"telemetry=noop", false},
		{"telemetry=metrics", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := ManagerOptions{
				Servers: []config.Server{fakeConfig("files")},
				newClient: func(_ config.Server, o ClientOptions) (*Client, error) {
					return newClient(o, newBenchTransport(false)), nil
				},
			}
			if bc.metrics {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				opts.MeterProvider = mp
			}
			m := NewManager(opts)
			m.Start()
			defer m.Close(context.Background())
			deadline := time.Now().Add(waitLimit)
			for {
				if st, ok := m.Server("files"); ok && st.State == StateRunning {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("server files is not running")
				}
				time.Sleep(time.Millisecond)
			}
			ctx := context.Background()
			who := Caller{Principal: "alice", Session: "s1"}
			hooks := benchHooks()
			res, err := m.Call(ctx, "files", who, "tools/call", benchCallParams, hooks)
			if err != nil || !strings.Contains(string(res), "hello from the server") {
				b.Fatalf("Call = %s, %v", res, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Call(ctx, "files", who, "tools/call", benchCallParams, hooks); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLineReader_ReadLine reads lines of a stdio server's stdout
// through one long-lived lineReader, one answer at a time as a server
// writes them (each read ends at the end of a line): small responses, and
// responses with a 64 KiB result, for which the buffer grows from 4 KiB
// once and is kept (it is under lineReaderKeptSize).
func BenchmarkLineReader_ReadLine(b *testing.B) {
	small, err := jsonrpc.Encode(jsonrpc.NewResult(jsonrpc.IntID(42), benchCallResult))
	if err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, _ := json.Marshal(text.String())
	big, err := jsonrpc.Encode(jsonrpc.NewResult(jsonrpc.IntID(42), json.RawMessage(`{"content":[{"type":"text","text":`+string(t)+`}]}`)))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		line []byte
	}{
		{"small", small},
		{"64KiB", big},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lr := newLineReader(&lineLoop{line: append(bytes.Clone(bc.line), '\n')}, config.DefaultMaxResponseBody)
			line, err := lr.readLine()
			if err != nil || !bytes.Equal(line, bc.line) {
				b.Fatalf("readLine = %d bytes, %v; want %d", len(line), err, len(bc.line))
			}
			b.SetBytes(int64(len(bc.line) + 1))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := lr.readLine(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// lineLoop is an endless stdout that repeats line, as a pipe delivers it:
// reads of at most 64 KiB (a pipe's buffer) that never go past the end of
// a line, since the server writes the next only after the next request.
type lineLoop struct {
	line []byte
	off  int
}

func (l *lineLoop) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), 64<<10)], l.line[l.off:])
	l.off = (l.off + n) % len(l.line)
	return n, nil
}
