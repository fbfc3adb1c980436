package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/mediastore"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// benchToolResult returns a tools/call result of one text block of about
// size bytes of file-like text, with a structuredContent member, as a
// 2025-06-18 server sends.
func benchToolResult(size int) json.RawMessage {
	var text strings.Builder
	for text.Len() < size {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, _ := json.Marshal(text.String()[:size])
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(t) + `}],"structuredContent":{"lines":1},"isError":false}`)
}

// benchEventHandler is a Handler with only what appendLocked reads.
func benchEventHandler() *Handler {
	return &Handler{
		opts:   Options{MaxStreamEvents: DefaultMaxStreamEvents, MaxStreamBytes: DefaultMaxStreamBytes},
		logger: discardLogger(),
	}
}

// BenchmarkStream_AppendEvent frames one response as an SSE event on a call's
// stream, as the edge does for every forwarded call: the response message
// (resultMessage), then the event with its id (appendLocked, which
// encodes it with sse.Write and buffers it for resumption). full_buffer
// appends a notification to a stream whose buffer is full
// (MaxStreamEvents), as on a long-lived GET stream.
func BenchmarkStream_AppendEvent(b *testing.B) {
	h := benchEventHandler()
	for _, bc := range []struct {
		name   string
		result json.RawMessage
		full   bool
	}{
		{"small", benchToolResult(100), false},
		{"64KiB", benchToolResult(64 << 10), false},
		{"full_buffer", json.RawMessage(`{"progressToken":"p-17","progress":3,"total":10}`), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			id := jsonrpc.IntID(17)
			var st *stream
			if bc.full {
				st = &stream{num: 0}
				for range DefaultMaxStreamEvents {
					h.appendLocked(st, notificationMessage("notifications/progress", bc.result))
				}
			}
			appendOne := func() *stream {
				if bc.full {
					h.appendLocked(st, notificationMessage("notifications/progress", bc.result))
					return st
				}
				st := &stream{num: 3}
				h.appendLocked(st, resultMessage(id, bc.result))
				return st
			}
			got := appendOne()
			last := got.events[len(got.events)-1].block
			if !bytes.HasPrefix(last, []byte("id: ")) || !bytes.HasSuffix(last, []byte("}\n\n")) || (bc.full && len(got.events) != DefaultMaxStreamEvents) {
				b.Fatalf("event %q…, %d events", last[:min(len(last), 40)], len(got.events))
			}
			b.ReportAllocs()
			for b.Loop() {
				appendOne()
			}
		})
	}
}

// BenchmarkEncodeResult_ToolsCall encodes a tools/call result for the
// client's version: a 2025-11-25 client gets the bytes as they are, a
// 2025-03-26 client loses structuredContent and gets resource links as
// text.
func BenchmarkEncodeResult_ToolsCall(b *testing.B) {
	for _, version := range []string{V20251125, V20250326} {
		b.Run(version, func(b *testing.B) {
			result := benchToolResult(100)
			out := encodeResult(version, "tools/call", result, false)
			if strings.Contains(string(out), "structuredContent") != (version == V20251125) {
				b.Fatalf("encodeResult = %s", out)
			}
			b.ReportAllocs()
			for b.Loop() {
				encodeResult(version, "tools/call", result, false)
			}
		})
	}
}

// benchEdge is a Handler mounted on echo over a core with one fake server
// "files", whose tools small and big answer with a small and a 64 KiB
// result. The Handler and the core are closed when the benchmark ends.
type benchEdge struct {
	ec *echo.Echo
}

func newBenchEdge(b *testing.B, production bool) *benchEdge {
	b.Helper()
	small, big := benchToolResult(100), benchToolResult(64<<10)
	srv := &upstreamtest.Server{
		Name:  "files",
		Tools: []json.RawMessage{json.RawMessage(`{"name":"small","inputSchema":{"type":"object"}}`), json.RawMessage(`{"name":"big","inputSchema":{"type":"object"}}`)},
		Handle: func(_ context.Context, _ string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			if bytes.HasPrefix(params, []byte(`{"name":"big"`)) {
				return big, nil
			}
			return small, nil
		},
	}
	mgr := upstreamtest.NewManager(srv)
	coreOpts := gateway.Options{Upstreams: mgr}
	opts := Options{Replica: "bench"}
	if production {
		ms, err := mediastore.New(mediastore.Options{Dir: b.TempDir(), Secret: []byte(strings.Repeat("m", 32))})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ms.Close() })
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { mp.Shutdown(context.Background()) })
		coreOpts.Media = ms
		coreOpts.MediaConfig = config.Media{Mode: config.MediaLink, MinBytes: config.DefaultMediaMinBytes}
		coreOpts.PublicURL = "https://gw.example"
		coreOpts.MeterProvider = mp
		coreOpts.TracerProvider = noop.NewTracerProvider() // as telemetry.Setup without an OTLP endpoint
		opts.MeterProvider = mp
	}
	core, err := gateway.New(coreOpts)
	if err != nil {
		b.Fatal(err)
	}
	opts.Core = core
	h, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	ec := echo.New()
	h.Register(ec)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Close(ctx)
		core.Close()
	})
	return &benchEdge{ec: ec}
}

// request returns a POST /mcp with the headers a client sends on session
// sid (none when sid is ""), without a body: serve gives each copy its own.
func (e *benchEdge) request(sid, version string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://gw.example/mcp", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Content-Type", "application/json")
	if sid != "" {
		r.Header.Set(HeaderSessionID, sid)
		r.Header.Set(HeaderProtocolVersion, version)
	}
	return r
}

// serve POSTs body with the headers of base and returns the recorded
// answer. base is copied, not changed.
func (e *benchEdge) serve(base *http.Request, body []byte) *httptest.ResponseRecorder {
	r := *base
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	w := httptest.NewRecorder()
	e.ec.ServeHTTP(w, &r)
	return w
}

// initialize starts a session of version and returns its id.
func (e *benchEdge) initialize(b *testing.B, version string) string {
	b.Helper()
	w := e.serve(e.request("", ""), []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	sid := w.Header().Get(HeaderSessionID)
	if w.Code != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	e.serve(e.request(sid, version), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return sid
}

// BenchmarkPost_ToolsCall is one relayed tools/call through the whole
// edge (echo, the POST handler, the session) and the core, to an
// in-memory upstream, recorded with an httptest.ResponseRecorder: ns/op,
// B/op and allocs/op of one call. The upstream answers at once, so the
// call is answered as application/json (within stream_after); 2025-03-26
// sessions get the 2025-03-26 encoding of the result. The _production cases
// set the core and the edge up as cmd/mcpgw does (a media store, the
// metrics SDK). small_httptest_server sends the call over loopback
// HTTP/1.1 with keep-alive to an httptest.Server instead, so it also
// counts net/http's client and server. 64KiB_argument sends a 64 KiB
// argument (a small result): the request body and the params the core
// edits come from pools (the in-memory upstream's own copy of the params,
// which a real transport encodes into a pooled line, remains).
func BenchmarkPost_ToolsCall(b *testing.B) {
	for _, bc := range []struct {
		name       string
		version    string
		tool       string
		production bool
		server     bool
		arg        int // bytes of argument text beyond the path
	}{
		{"2025-11-25/small", V20251125, "small", false, false, 0},
		{"2025-11-25/64KiB", V20251125, "big", false, false, 0},
		{"2025-11-25/64KiB_argument", V20251125, "small", false, false, 64 << 10},
		{"2025-03-26/small", V20250326, "small", false, false, 0},
		{"2025-11-25/small_production", V20251125, "small", true, false, 0},
		{"2025-11-25/64KiB_production", V20251125, "big", true, false, 0},
		{"2025-11-25/small_httptest_server", V20251125, "small", false, true, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newBenchEdge(b, bc.production)
			sid := e.initialize(b, bc.version)
			body := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"mcp__files__` + bc.tool + `","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200,"text":"` + strings.Repeat("x", bc.arg) + `"},"_meta":{"progressToken":"p-17"}}}`)
			base := e.request(sid, bc.version)
			call := func() (status int, ctype string, answer []byte) {
				w := e.serve(base, body)
				return w.Code, w.Header().Get("Content-Type"), w.Body.Bytes()
			}
			if bc.server {
				hs := httptest.NewServer(e.ec)
				defer hs.Close()
				hc := hs.Client()
				base.URL.Scheme, base.URL.Host = "http", strings.TrimPrefix(hs.URL, "http://")
				call = func() (int, string, []byte) {
					r := base.Clone(context.Background())
					r.Body = io.NopCloser(bytes.NewReader(body))
					r.ContentLength = int64(len(body))
					resp, err := hc.Do(r)
					if err != nil {
						b.Fatal(err)
					}
					defer resp.Body.Close()
					answer, err := io.ReadAll(resp.Body)
					if err != nil {
						b.Fatal(err)
					}
					return resp.StatusCode, resp.Header.Get("Content-Type"), answer
				}
			}
			status, ctype, answer := call()
			if status != http.StatusOK || ctype != "application/json" ||
				!bytes.HasPrefix(answer, []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"line \"xxx`)) ||
				bytes.Contains(answer, []byte("structuredContent")) != (bc.version != V20250326) {
				b.Fatalf("answer %d %q: %.200s", status, ctype, answer)
			}
			b.SetBytes(int64(len(answer)))
			b.ReportAllocs()
			for b.Loop() {
				if status, _, _ := call(); status != http.StatusOK {
					b.Fatalf("status %d", status)
				}
			}
		})
	}
}

// BenchmarkPost_PingJSON is one request the edge answers with JSON (ping:
// the core answers it without an upstream), the floor of a POST's cost on
// this edge.
func BenchmarkPost_PingJSON(b *testing.B) {
	e := newBenchEdge(b, false)
	sid := e.initialize(b, V20251125)
	body := []byte(`{"jsonrpc":"2.0","id":17,"method":"ping"}`)
	base := e.request(sid, V20251125)
	w := e.serve(base, body)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != `{"jsonrpc":"2.0","id":17,"result":{}}` {
		b.Fatalf("answer %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		if w := e.serve(base, body); w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
