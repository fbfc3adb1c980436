package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is a streamable-HTTP MCP server in raw JSON-RPC, strict about
// what the tool must send:
//
//	POST initialize             JSON, sets Mcp-Session-Id
//	POST a notification         202
//	POST tools/call             the arguments' text as a text block; JSON for
//	                            even ids, SSE for odd ids (priming event, a
//	                            notification, the response over two data
//	                            lines, CRLF); isError for ids divisible by
//	                            failEvery, if set
//	POST tools/list             JSON, two tools
//	GET                         an SSE stream held until the client goes
//	DELETE                      ends the session
type fakeServer struct {
	failEvery int64

	mu       sync.Mutex
	sessions map[string]bool // open sessions
	opened   int
	problems []string // what the tool sent wrong

	streams    atomic.Int64 // GET streams open now
	maxStreams atomic.Int64
	calls      atomic.Int64
}

func newFakeServer(t *testing.T, failEvery int64) (*fakeServer, string) {
	t.Helper()
	f := &fakeServer{failEvery: failEvery, sessions: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.problems {
			t.Errorf("fake server: %s", p)
		}
	})
	return f, srv.URL + "/mcp"
}

func (f *fakeServer) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.problems) < 5 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// live returns the number of sessions not yet deleted.
func (f *fakeServer) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

// session checks the headers every request after initialize carries.
func (f *fakeServer) session(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	ok := f.sessions[r.Header.Get("Mcp-Session-Id")]
	f.mu.Unlock()
	if !ok {
		f.problem("%s without a live session id", r.Method)
		http.Error(w, "unknown session", http.StatusNotFound)
		return false
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != protocolVersion {
		f.problem("MCP-Protocol-Version %q", v)
		http.Error(w, "bad version", http.StatusBadRequest)
		return false
	}
	return true
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		f.post(w, r)
	case http.MethodGet:
		f.get(w, r)
	case http.MethodDelete:
		if f.session(w, r) {
			f.mu.Lock()
			delete(f.sessions, r.Header.Get("Mcp-Session-Id"))
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (f *fakeServer) post(w http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Accept"); !strings.Contains(a, "application/json") || !strings.Contains(a, "text/event-stream") {
		f.problem("POST Accept %q", a)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.problem("POST Content-Type %q", ct)
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		f.problem("POST body: %v", err)
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if m.Method == "initialize" {
		f.mu.Lock()
		f.opened++
		sid := "s-" + strconv.Itoa(f.opened)
		f.sessions[sid] = true
		f.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		return
	}
	if !f.session(w, r) {
		return
	}
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/list":
		writeJSON(w, m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"add","inputSchema":{"type":"object"}}]}`)
	case m.Method == "tools/call":
		f.call(w, m.ID, m.Params.Name, m.Params.Arguments.Text)
	default:
		writeJSONText(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no method %s"}}`, m.ID, m.Method))
	}
}

func (f *fakeServer) call(w http.ResponseWriter, rawID json.RawMessage, tool, text string) {
	f.calls.Add(1)
	id, err := strconv.ParseInt(string(rawID), 10, 64)
	if err != nil || tool != "echo" {
		f.problem("tools/call id %s tool %q", rawID, tool)
	}
	quoted, _ := json.Marshal(text)
	isError := f.failEvery > 0 && id%f.failEvery == 0
	result := fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"isError":%t}`, quoted, isError)
	if id%2 == 0 {
		writeJSON(w, rawID, result)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "id: p\r\ndata:\r\n\r\n")
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
	fmt.Fprintf(w, "id: r\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\r\ndata: \"result\":%s}\r\n\r\n", rawID, result)
}

func (f *fakeServer) get(w http.ResponseWriter, r *http.Request) {
	if !f.session(w, r) {
		return
	}
	if a := r.Header.Get("Accept"); !strings.Contains(a, "text/event-stream") {
		f.problem("GET Accept %q", a)
	}
	n := f.streams.Add(1)
	defer f.streams.Add(-1)
	for {
		m := f.maxStreams.Load()
		if n <= m || f.maxStreams.CompareAndSwap(m, n) {
			break
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "id: g\ndata:\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func writeJSON(w http.ResponseWriter, id json.RawMessage, result string) {
	writeJSONText(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func writeJSONText(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, body)
}

// runBench runs the command with args and returns its exit code, its
// report (decoded from -json, which runBench adds) and its output: the
// report and stderr, which holds a stdio server's stderr in direct mode,
// for the test to print when it fails.
func runBench(t *testing.T, args ...string) (int, *report, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"-json"}, args...), &stdout, &stderr)
	output := fmt.Sprintf("report: %s\nstderr:\n%s", stdout.String(), stderr.String())
	if stdout.Len() == 0 {
		return code, nil, output
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, output)
	}
	return code, &rep, output
}

// short makes a run end after a number of requests, never at a time: on a
// loaded machine, under -race, a period of a few hundred milliseconds can
// end before any request is answered. -duration is only an upper bound.
var short = []string{"-sessions", "4", "-requests", "100", "-duration", "10m", "-warmup", "0s"}

func TestHTTPMode(t *testing.T) {
	tests := []struct {
		name      string
		failEvery int64
		args      []string
		wantCode  int
		wantTools int
		wantError string // in the first error sample
		watched   bool
	}{
		{name: "echo", args: []string{"-watch", strconv.Itoa(os.Getpid())}, watched: true},
		{name: "payload", args: []string{"-payload", "100000"}},
		{name: "tools/list", args: []string{"-method", "tools/list"}, wantTools: 2},
		{name: "tool errors counted", failEvery: 3, wantCode: 1, wantError: "isError"},
		{name: "expectation not met", args: []string{"-expect", "nowhere"}, wantCode: 1, wantError: "does not contain"},
		{name: "request limit", args: []string{"-requests", "25"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f, url := newFakeServer(t, tt.failEvery)
			code, rep, output := runBench(t, append(append([]string{"-url", url}, short...), tt.args...)...)
			if code != tt.wantCode || rep == nil {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.wantCode, output)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the run's output:\n%s", output)
				}
			})
			if rep.Mode != modeHTTP || rep.Sessions != 4 || rep.DurationS <= 0 {
				t.Errorf("report %+v", rep)
			}
			if tt.name != "expectation not met" && (rep.Requests == 0 || rep.Latency == nil || rep.RPS <= 0) {
				t.Errorf("no successful requests: %+v", rep)
			}
			if tt.wantError == "" && rep.Errors != 0 {
				t.Errorf("%d errors: %q", rep.Errors, rep.ErrorSamples)
			}
			if tt.wantError != "" && (rep.Errors == 0 || len(rep.ErrorSamples) == 0 || !strings.Contains(rep.ErrorSamples[0], tt.wantError)) {
				t.Errorf("errors %d %q, want some with %q", rep.Errors, rep.ErrorSamples, tt.wantError)
			}
			if l := rep.Latency; l != nil && !(l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("latency percentiles out of order: %+v", l)
			}
			if tt.wantTools > 0 && (rep.Tools == nil || *rep.Tools != tt.wantTools) {
				t.Errorf("tools = %v, want %d", rep.Tools, tt.wantTools)
			}
			if tt.watched && rep.Watched == nil {
				t.Errorf("no watched process in the report: %q", rep.Notes)
			}
			if tt.name == "request limit" && rep.Requests+rep.Errors != 25 {
				t.Errorf("%d requests and %d errors, want 25 in all", rep.Requests, rep.Errors)
			}
			if n := f.live(); n != 0 {
				t.Errorf("%d sessions not deleted", n)
			}
		})
	}
}

// TestHTTPMode_InitURL: with -init-url each session is initialized at one
// endpoint and loaded at the other, as a replica that does not hold the
// session forwards it; two -watch give a report of each process.
func TestHTTPMode_InitURL(t *testing.T) {
	checkGoroutines(t)
	f, initURL := newFakeServer(t, 0)
	var loadCalls, loadInits atomic.Int64
	load := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte(`"initialize"`)):
			loadInits.Add(1)
		case bytes.Contains(body, []byte(`"tools/call"`)):
			loadCalls.Add(1)
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(load.Close)
	pid := strconv.Itoa(os.Getpid())
	code, rep, output := runBench(t, append([]string{"-url", load.URL + "/mcp", "-init-url", initURL, "-watch", pid, "-watch", pid}, short...)...)
	if code != 0 || rep == nil {
		t.Fatalf("exit code %d\n%s", code, output)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's output:\n%s", output)
		}
	})
	if rep.Errors != 0 || rep.Requests == 0 || rep.InitTarget != initURL {
		t.Errorf("report %+v", rep)
	}
	if n, calls := loadInits.Load(), loadCalls.Load(); n != 0 || calls != f.calls.Load() || calls < rep.Requests {
		t.Errorf("the load endpoint got %d initialize and %d of the %d tools/call", n, calls, f.calls.Load())
	}
	f.mu.Lock()
	opened := f.opened
	f.mu.Unlock()
	if opened != 4 {
		t.Errorf("%d sessions initialized, want 4", opened)
	}
	if rep.Watched == nil || len(rep.AlsoWatched) != 1 || rep.AlsoWatched[0].PID != os.Getpid() {
		t.Errorf("watched %+v, also %+v, want two reports of pid %s; notes %q", rep.Watched, rep.AlsoWatched, pid, rep.Notes)
	}
	if n := f.live(); n != 0 {
		t.Errorf("%d sessions not deleted", n)
	}
}

// checkGoroutines fails the test if, once its cleanups before this one
// have run, more goroutines run than before it.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

func TestIdleMode(t *testing.T) {
	checkGoroutines(t)
	f, url := newFakeServer(t, 0)
	code, rep, output := runBench(t, "-url", url, "-idle", "20", "-duration", "200ms", "-watch", strconv.Itoa(os.Getpid()))
	if code != 0 || rep == nil {
		t.Fatalf("exit code %d\n%s", code, output)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's output:\n%s", output)
		}
	})
	if rep.Mode != modeIdle || rep.Sessions != 20 || rep.Errors != 0 || rep.Idle == nil || rep.Idle.RSSPerSessionKiB == nil || rep.Watched == nil {
		t.Errorf("report %+v", rep)
	}
	if n := f.maxStreams.Load(); n != 20 {
		t.Errorf("at most %d GET streams open at once, want 20", n)
	}
	if n := f.streams.Load(); n != 0 {
		t.Errorf("%d GET streams still open", n)
	}
	if n := f.live(); n != 0 {
		t.Errorf("%d sessions not deleted", n)
	}
}

// TestHTTPMode_ServerGone checks that a run against a port nobody listens
// on fails with a clear error and no report.
func TestHTTPMode_ServerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, rep, output := runBench(t, "-url", "http://"+addr+"/mcp", "-duration", "100ms")
	if code != 1 || rep != nil || !strings.Contains(output, "opening session 1 of 1: initialize") {
		t.Errorf("exit code %d, report %+v\n%s", code, rep, output)
	}
}

func TestCheckLoopback(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]net.IPAddr, error) {
		switch host {
		case "localhost":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("::1")}}, nil
		case "example.com":
			return []net.IPAddr{{IP: net.ParseIP("93.184.215.14")}}, nil
		case "split.test":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("10.1.2.3")}}, nil
		}
		return nil, errors.New("no such host")
	}
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080/mcp", true},
		{"http://127.9.9.9/mcp", true},
		{"http://localhost:8080/mcp", true},
		{"http://[::1]:8080/mcp", true},
		{"https://localhost/mcp", true},
		{"http://10.0.0.1/mcp", false},
		{"http://example.com/mcp", false},
		{"http://split.test/mcp", false},
		{"http://unknown.test/mcp", false},
		{"http://[::ffff:8.8.8.8]/mcp", false},
		{"ftp://127.0.0.1/mcp", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := checkLoopback(context.Background(), "-url", tt.url, lookup)
			if (err == nil) != tt.ok {
				t.Errorf("checkLoopback(%s) = %v, want ok %v", tt.url, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "refusing") && !strings.Contains(err.Error(), "http://") {
				t.Errorf("unclear error %q", err)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // in stderr
	}{
		{"help", []string{"-h"}, 0, "-payload"},
		{"no sessions", []string{"-sessions", "0"}, 2, "-sessions must be at least 1"},
		{"unknown method", []string{"-method", "ping"}, 2, "-method must be"},
		{"args not an object", []string{"-args", "[1]"}, 2, "-args must be a JSON object"},
		{"payload with args", []string{"-payload", "10", "-args", "{}"}, 2, "-payload"},
		{"direct without a command", []string{"-direct"}, 2, "needs the server's command"},
		{"direct with idle", []string{"-direct", "-idle", "3", "--", "cat"}, 2, "do not apply"},
		{"command without direct", []string{"--", "cat"}, 2, "needs -direct"},
		{"not http", []string{"-url", "unix:///tmp/x"}, 2, "not an http"},
		{"bad header", []string{"-header", "nocolon"}, 2, "want K:V"},
		{"not loopback", []string{"-url", "http://10.0.0.1:8080/mcp"}, 1, "refusing -url"},
		{"init-url not http", []string{"-init-url", "ftp://127.0.0.1/mcp"}, 2, "-init-url \"ftp://127.0.0.1/mcp\" is not an http"},
		{"init-url not loopback", []string{"-init-url", "http://10.0.0.1:8080/mcp"}, 1, "refusing -init-url"},
		{"init-url with idle", []string{"-init-url", "http://127.0.0.1:1/mcp", "-idle", "3"}, 2, "-init-url goes with neither"},
		{"init-url with task", []string{"-init-url", "http://127.0.0.1:1/mcp", "-task"}, 2, "-init-url goes with neither"},
		{"init-url with direct", []string{"-direct", "-init-url", "http://127.0.0.1:1/mcp", "--", "cat"}, 2, "do not apply"},
		{"task with tools/list", []string{"-task", "-method", "tools/list"}, 2, "-task runs tools/call"},
		{"task with idle", []string{"-task", "-idle", "3"}, 2, "-task goes with neither"},
		{"task with direct", []string{"-task", "-direct", "--", "cat"}, 2, "-task goes with neither"},
		{"watch not a pid", []string{"-watch", "x"}, 2, "want a process id"},
		{"watch zero", []string{"-watch", "0"}, 2, "want a process id"},
		{"watch twice with idle", []string{"-idle", "3", "-watch", "1", "-watch", "2"}, 2, "-idle watches one process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit code %d, stderr:\n%s\nwant code %d and %q", code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestReportText pins the text report's shape.
func TestReportText(t *testing.T) {
	rep := &report{
		Mode: modeHTTP, Target: "http://127.0.0.1:8080/mcp", Method: "tools/call", Tool: "echo", Sessions: 8, DurationS: 10,
		Requests: 123456, RPS: 12345.6, Latency: &latencyReport{P50: 400.1, P90: 700.2, P99: 1200.3, Max: 5000},
		BenchCPUUsPerReq: 12.3, BenchCPUMs: 1518.5,
		Watched: &watchReport{PID: 123, CPUMs: 5629.5, CPUUsPerReq: 45.6, Children: 2, ChildrenCPUMs: 3716, ChildrenCPUUsPerReq: 30.1, PeakRSSMiB: 25.3, RSSMiB: 24, ChildrenRSSMiB: 40.2},
		Notes:   []string{"a note"},
	}
	var b bytes.Buffer
	if err := rep.write(&b, false); err != nil {
		t.Fatal(err)
	}
	want := `mode=http target=http://127.0.0.1:8080/mcp method=tools/call tool=echo sessions=8 duration=10.0s
requests=123456 errors=0 rps=12345.6
latency_us p50=400.1 p90=700.2 p99=1200.3 max=5000.0
bench_cpu_us_per_req=12.3 bench_cpu_ms=1518.5
watched pid=123 cpu_ms=5629.5 cpu_us_per_req=45.6 children=2 children_cpu_ms=3716.0 children_cpu_us_per_req=30.1 peak_rss_mib=25.3 rss_mib=24.0 children_rss_mib=40.2
note: a note
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestReportText_TaskAndWatches pins the text of -init-url, -task and a
// second -watch.
func TestReportText_TaskAndWatches(t *testing.T) {
	rep := &report{
		Mode: modeTask, Target: "http://127.0.0.1:8081/mcp", InitTarget: "http://127.0.0.1:8080/mcp", Method: "tools/call", Tool: "echo", Sessions: 2, DurationS: 5,
		Requests: 10, RPS: 2, Task: &taskReport{Tasks: 12, Gets: 30, GetsPerTask: 2.5},
		Watched:     &watchReport{PID: 1, CPUMs: 10, CPUUsPerReq: 1000},
		AlsoWatched: []*watchReport{{PID: 2, CPUMs: 5, CPUUsPerReq: 500, Children: 1, ChildrenCPUMs: 1, ChildrenCPUUsPerReq: 100}},
	}
	var b bytes.Buffer
	if err := rep.write(&b, false); err != nil {
		t.Fatal(err)
	}
	want := `mode=task target=http://127.0.0.1:8081/mcp init_target=http://127.0.0.1:8080/mcp method=tools/call tool=echo sessions=2 duration=5.0s
requests=10 errors=0 rps=2.0
tasks=12 tasks_get=30 gets_per_task=2.50
bench_cpu_us_per_req=0.0 bench_cpu_ms=0.0
watched pid=1 cpu_ms=10.0 cpu_us_per_req=1000.0 children=0 children_cpu_ms=0.0 children_cpu_us_per_req=0.0 peak_rss_mib=0.0 rss_mib=0.0 children_rss_mib=0.0
watched pid=2 cpu_ms=5.0 cpu_us_per_req=500.0 children=1 children_cpu_ms=1.0 children_cpu_us_per_req=100.0 peak_rss_mib=0.0 rss_mib=0.0 children_rss_mib=0.0
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}
