package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The stdio tests run real child processes: the test binary itself,
// re-executed with fakeServerEnv set, acts as an upstream server. The switch
// is in an init function rather than TestMain so that it does not claim the
// package's only TestMain.
const fakeServerEnv = "MCPGW_TEST_STDIO_SERVER"

func init() {
	if mode, ok := os.LookupEnv(fakeServerEnv); ok {
		os.Exit(runFakeServer(mode))
	}
}

// testGrace is the StopGrace of the tests: short, so that escalation to
// SIGTERM and SIGKILL is quick.
const testGrace = 200 * time.Millisecond

// fakeServer is the re-executed test binary acting as a newline-delimited
// JSON-RPC MCP server. mode is a comma-separated set of:
//
//	(none)            answers initialize (2025-11-25), tools/list in two
//	                  pages, tools/call of echo, env, cwd, slow,
//	                  cancellations, child
//	oldversion        negotiates 2025-03-26
//	batch             negotiates 2025-03-26 and answers tools/list and
//	                  tools/call inside JSON arrays (with a notification)
//	repeat-cursor     the second page of tools/list repeats its cursor
//	crash             any tools/call writes a stderr line and exits 3
//	big               any tools/call is answered with a line over 64 KiB
//	ignore-stdin-eof  ignores EOF on stdin and SIGTERM: only SIGKILL stops it
//	spawn-child       starts a grandchild that sleeps and ignores SIGTERM
//	deaf              never reads stdin
//	sdk               runs runSDKServer instead
//	sleep             the grandchild of spawn-child
//	fail-first=N      counts its starts in the file $MCPGW_TEST_COUNTER and
//	                  on the first N exits 1 (stderr "not yet", and
//	                  $MCPGW_TEST_LEAK) once it has
//	                  read a line (initialize), so that the client always
//	                  sees the same failure
//	logging           declares the logging capability
//	exit-on-discover  exits 4 when asked server/discover
//	silent-discover   never answers server/discover
//
// Besides, it writes $MCPGW_TEST_LEAK to stderr when set, and its tools
// include pid, log (two notifications/message first), and elicit, roots
// and sample, which send the server request of that name to the client
// and answer with the client's answer.
type fakeServer struct {
	modes map[string]bool
	child int // pid of the spawn-child grandchild

	wmu sync.Mutex // one line at a time on stdout

	mu      sync.Mutex
	slow    map[string]bool // ids of slow calls in flight, by raw id
	cancels []fakeCancel
	waiters map[string]chan fakeMsg // our requests to the client, by id
	nextID  int
	wg      sync.WaitGroup
}

// fakeCancel is a notifications/cancelled the fake server received.
type fakeCancel struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason"`
	Matched   bool            `json:"matched"` // the id was a slow call in flight
}

type fakeMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func runFakeServer(mode string) int {
	s := &fakeServer{modes: map[string]bool{}, slow: map[string]bool{}, waiters: map[string]chan fakeMsg{}}
	for m := range strings.SplitSeq(mode, ",") {
		if n, ok := strings.CutPrefix(m, "fail-first="); ok {
			if fakeStartCount() <= atoiOr(n, 0) {
				bufio.NewReader(os.Stdin).ReadString('\n')
				fmt.Fprintln(os.Stderr, "not yet", os.Getenv("MCPGW_TEST_LEAK"))
				return 1
			}
			continue
		}
		s.modes[m] = true
	}
	if v := os.Getenv("MCPGW_TEST_LEAK"); v != "" {
		fmt.Fprintln(os.Stderr, "leaking", v)
	}
	switch {
	case s.modes["sleep"]:
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return 0
	case s.modes["sdk"]:
		return runSDKServer()
	}
	if s.modes["ignore-stdin-eof"] {
		signal.Ignore(syscall.SIGTERM)
	}
	if s.modes["spawn-child"] {
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{fakeServerEnv + "=sleep", "GORACE=atexit_sleep_ms=0"}
		cmd.Stderr = os.Stderr // holds the stderr pipe open, as a careless child would
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake server: spawning child:", err)
			return 2
		}
		s.child = cmd.Process.Pid
	}
	fmt.Fprintln(os.Stderr, "fake server starting")
	// Noise a client must skip: blank lines, a line that is not JSON and
	// one that is JSON but not JSON-RPC.
	os.Stdout.WriteString("\n  \r\nthis is not json\n{\"hello\":\"world\"}\n")
	if s.modes["deaf"] {
		time.Sleep(time.Hour)
		return 0
	}

	r := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			s.handle(line)
		}
		if err != nil {
			break
		}
	}
	if s.modes["ignore-stdin-eof"] {
		select {} // until SIGKILL
	}
	s.wg.Wait()
	return 0
}

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// runSDKServer serves one greet tool with the official go-sdk over stdio
// until stdin closes: an independent implementation of the server side.
func runSDKServer() int {
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk-peer", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "says hello"},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "sdk server:", err)
		return 1
	}
	return 0
}

// counterEnv names the file where fail-first counts starts.
const counterEnv = "MCPGW_TEST_COUNTER"

// fakeStartCount adds one to the start count in $MCPGW_TEST_COUNTER and
// returns it. Starts of one server are sequential, so no locking.
func fakeStartCount() int {
	path := os.Getenv(counterEnv)
	b, _ := os.ReadFile(path)
	n := atoiOr(strings.TrimSpace(string(b)), 0) + 1
	os.WriteFile(path, []byte(strconv.Itoa(n)), 0o600)
	return n
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// ask sends the client a request and waits for its answer.
func (s *fakeServer) ask(method string, params any) fakeMsg {
	s.mu.Lock()
	s.nextID++
	id := json.RawMessage(strconv.Quote(fmt.Sprintf("srv-%d", s.nextID)))
	ch := make(chan fakeMsg, 1)
	s.waiters[string(id)] = ch
	s.mu.Unlock()
	s.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return <-ch
}

func (s *fakeServer) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.writeLine(b, "\n")
}

func (s *fakeServer) writeLine(b []byte, eol string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	os.Stdout.Write(append(b, eol...))
}

func response(id json.RawMessage, result any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": result}
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []map[string]any{{"type": "text", "text": text}}}
}

func (s *fakeServer) handle(line []byte) {
	var m fakeMsg
	if err := json.Unmarshal(line, &m); err != nil {
		fmt.Fprintln(os.Stderr, "fake server: bad line:", err)
		return
	}
	switch m.Method {
	case "":
		s.mu.Lock()
		ch := s.waiters[string(m.ID)]
		delete(s.waiters, string(m.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	case "initialize":
		version := LatestProtocolVersion
		if s.modes["oldversion"] || s.modes["batch"] {
			version = protocol20250326
		}
		caps := map[string]any{"tools": map[string]any{"listChanged": true}}
		if s.modes["logging"] {
			caps["logging"] = map[string]any{}
		}
		s.write(response(m.ID, map[string]any{
			"protocolVersion": version,
			"capabilities":    caps,
			"serverInfo":      map[string]any{"name": "fake", "version": "1"},
		}))
	case "notifications/initialized":
	case "server/discover":
		switch {
		case s.modes["exit-on-discover"]:
			fmt.Fprintln(os.Stderr, "fatal: unexpected server/discover")
			os.Exit(4)
		case s.modes["silent-discover"]:
		default:
			s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "unknown method"}})
		}
	case "tools/list":
		s.toolsList(m)
	case "tools/call":
		s.toolsCall(m)
	case "notifications/cancelled":
		var p fakeCancel
		json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		p.Matched = s.slow[string(p.RequestID)]
		delete(s.slow, string(p.RequestID))
		s.cancels = append(s.cancels, p)
		s.mu.Unlock()
	case "ping":
		s.write(response(m.ID, map[string]any{}))
	default:
		if m.ID != nil {
			s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "unknown method"}})
		}
	}
}

func (s *fakeServer) toolsList(m fakeMsg) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(m.Params, &p)
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}}
	}
	var res map[string]any
	eol := "\n"
	switch p.Cursor {
	case "":
		res = map[string]any{"tools": []any{tool("echo"), tool("env")}, "nextCursor": "page2"}
	case "page2":
		res = map[string]any{"tools": []any{tool("slow"), tool("cancellations")}}
		if s.modes["repeat-cursor"] {
			res["nextCursor"] = "page2"
		}
		eol = "\r\n" // a CRLF line reads like any other
	default:
		s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "bad cursor"}})
		return
	}
	var v any = response(m.ID, res)
	if s.modes["batch"] {
		v = []any{v}
	}
	b, _ := json.Marshal(v)
	s.writeLine(b, eol)
}

func (s *fakeServer) toolsCall(m fakeMsg) {
	if s.modes["crash"] {
		fmt.Fprintln(os.Stderr, "fatal: out of cheese")
		os.Exit(3)
	}
	if s.modes["big"] {
		s.write(response(m.ID, textResult(strings.Repeat("x", 100<<10))))
		return
	}
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
	}
	json.Unmarshal(m.Params, &p)
	switch p.Name {
	case "echo":
		// Answered out of order, as a server with concurrency would.
		s.wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			res := response(m.ID, textResult(p.Arguments.Text))
			if !s.modes["batch"] {
				s.write(res)
				return
			}
			s.write([]any{
				map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "echo " + p.Arguments.Text}},
				res,
			})
		})
	case "env":
		env := os.Environ()
		slices.Sort(env)
		b, _ := json.Marshal(env)
		s.write(response(m.ID, textResult(string(b))))
	case "cwd":
		wd, _ := os.Getwd()
		s.write(response(m.ID, textResult(wd)))
	case "child":
		s.write(response(m.ID, textResult(strconv.Itoa(s.child))))
	case "pid":
		s.write(response(m.ID, textResult(strconv.Itoa(os.Getpid()))))
	case "log":
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "warning", "logger": "db", "data": map[string]any{"slow": true}}})
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "two\nlines"}})
		s.write(response(m.ID, textResult("logged")))
	case "elicit", "roots", "sample":
		method := map[string]string{"elicit": "elicitation/create", "roots": "roots/list", "sample": "sampling/createMessage"}[p.Name]
		s.wg.Go(func() {
			answer := s.ask(method, map[string]any{"message": "who are you?"})
			text := string(answer.Result)
			if answer.Error != nil {
				text = "error " + string(answer.Error)
			}
			s.write(response(m.ID, textResult(text)))
		})
	case "slow":
		// No answer: the client is expected to cancel. The notification
		// tells the test the request arrived.
		s.mu.Lock()
		s.slow[string(m.ID)] = true
		s.mu.Unlock()
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "slow started"}})
	case "cancellations":
		s.mu.Lock()
		b, _ := json.Marshal(s.cancels)
		s.mu.Unlock()
		s.write(response(m.ID, textResult(string(b))))
	default:
		s.write(response(m.ID, map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "unknown tool"}}}))
	}
}

// fakeServerConfig is the config of a server running the fake in mode.
func fakeServerConfig(t *testing.T, mode string) config.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.Server{
		Name:      "fake",
		Transport: config.TransportStdio,
		Command:   exe,
		// The race detector sleeps a second at exit unless told not to.
		Env: map[string]string{fakeServerEnv: mode, "GORACE": "atexit_sleep_ms=0"},
	}
}

// logOnFailure returns logger (nil: none) with every record, at every
// level, also kept for the test's log if the test fails: a stdio child's
// stderr lines among them (a panic, a race report), and what the client or
// manager saw of it. Its cleanup runs after those registered later, such as
// the Close of what the logger is given to.
func logOnFailure(t *testing.T, logger *slog.Logger) *slog.Logger {
	t.Helper()
	logs := &syncBuffer{}
	h := slog.Handler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if logger != nil {
		h = slog.NewMultiHandler(logger.Handler(), h)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs, with the servers' stderr:\n%s", logs.String())
		}
	})
	return slog.New(h)
}

// startClient creates a Client for srv and closes it (and checks its child
// was reaped) when the test ends.
func startClient(t *testing.T, srv config.Server, opts ClientOptions) *Client {
	t.Helper()
	checkNoLeaks(t)
	if opts.StopGrace == 0 {
		opts.StopGrace = testGrace
	}
	opts.Logger = logOnFailure(t, opts.Logger)
	c, err := New(srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if pid := c.PID(); pid != 0 && !reaped(pid) {
			t.Errorf("child %d still exists after Close", pid)
		}
	})
	return c
}

// connectClient is startClient and Connect.
func connectClient(t *testing.T, srv config.Server, opts ClientOptions) *Client {
	t.Helper()
	c := startClient(t, srv, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c
}

// callText calls tool and returns the text of its first content block.
func callText(ctx context.Context, c *Client, tool string, args any) (string, error) {
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	raw, err := c.Call(ctx, "tools/call", params, nil)
	if err != nil {
		return "", err
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		return "", fmt.Errorf("no content in %s", raw)
	}
	return res.Content[0].Text, nil
}

func toolNames(t *testing.T, tools []json.RawMessage) []string {
	t.Helper()
	var names []string
	for _, raw := range tools {
		var tool struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// reaped reports whether pid is gone: no such process, not even a zombie.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// dead reports whether pid is gone or a zombie. A grandchild killed with
// the group is reparented to PID 1, which in a container may never reap it.
func dead(pid int) bool {
	if reaped(pid) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the ")" that closes the command name.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// eventually polls cond until it holds or a generous bound passes. It
// measures nothing: the bound only keeps a broken test from hanging.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// logRecorder is a slog.Handler that keeps every record, with the
// attributes of its logger.
type logRecorder struct {
	store *logStore
	attrs []slog.Attr
}

type logStore struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogRecorder() *logRecorder { return &logRecorder{store: &logStore{}} }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.store.mu.Lock()
	h.store.records = append(h.store.records, rec)
	h.store.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{store: h.store, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the records with msg.
func (h *logRecorder) find(msg string) []logRecord {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	var out []logRecord
	for _, r := range h.store.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

func TestStdio_Session(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		mode          string
		command       string   // default: the test binary
		args          []string // default: none
		wantVersion   string
		wantBatchNote bool // echo answers come with a notification in the same batch
	}{
		{name: "latest", mode: "", wantVersion: "2025-11-25"},
		{name: "older version", mode: "oldversion", wantVersion: "2025-03-26"},
		{name: "batches", mode: "batch", wantVersion: "2025-03-26", wantBatchNote: true},
		// A bare command name is found through PATH; the server is then
		// a child of the shell, in the shell's group.
		{name: "through sh -c", mode: "", command: "sh", args: []string{"-c", `"$0"; exit $?`, exe}, wantVersion: "2025-11-25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeServerConfig(t, tt.mode)
			if tt.command != "" {
				srv.Command, srv.Args = tt.command, tt.args
			}
			logs := newLogRecorder()
			var (
				notesMu sync.Mutex
				notes   []string
			)
			c := connectClient(t, srv, ClientOptions{
				Logger: slog.New(logs),
				OnNotification: func(m *jsonrpc.Message) {
					notesMu.Lock()
					notes = append(notes, m.Method)
					notesMu.Unlock()
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			if got := c.Initialized().ProtocolVersion; got != tt.wantVersion {
				t.Errorf("protocol version = %q, want %q", got, tt.wantVersion)
			}
			if c.PID() == 0 {
				t.Error("PID = 0 for a running stdio server")
			}
			tools, err := c.ListTools(ctx)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if diff := cmp.Diff([]string{"echo", "env", "slow", "cancellations"}, toolNames(t, tools)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}

			// Many callers share the connection; each gets its own answer
			// although the server answers out of order.
			const n = 50
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					want := fmt.Sprintf("message %d", i)
					got, err := callText(ctx, c, "echo", map[string]string{"text": want})
					if err != nil {
						t.Errorf("call %d: %v", i, err)
					} else if got != want {
						t.Errorf("call %d got %q, want %q", i, got, want)
					}
				})
			}
			wg.Wait()

			if tt.wantBatchNote {
				notesMu.Lock()
				got := len(notes)
				notesMu.Unlock()
				if got != n {
					t.Errorf("got %d notifications from batches, want %d", got, n)
				}
			}

			// The stderr line is logged at debug with the server's name; the
			// noise on stdout is logged and skipped.
			if !slices.ContainsFunc(logs.find("server stderr"), func(r logRecord) bool {
				return r.attrs["server"] == "fake" && r.attrs["line"] == "fake server starting"
			}) {
				t.Error(`no "server stderr" log with server=fake and the child's line`)
			}
			if got := c.LastStderr(); got != "fake server starting" {
				t.Errorf("LastStderr = %q, want %q", got, "fake server starting")
			}
			dropped := logs.find("dropping a stdout line that is not JSON-RPC")
			if len(dropped) != 2 || dropped[0].attrs["line"] != "this is not json" || dropped[0].attrs["server"] != "fake" {
				t.Errorf("dropped-line logs = %v, want the two noise lines with server=fake", dropped)
			}

			if err := c.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case <-c.Done():
			default:
				t.Fatal("Done not closed after Close")
			}
			if err := c.Err(); err != nil {
				t.Errorf("Err after a clean Close = %v, want nil", err)
			}
			if !reaped(c.PID()) {
				t.Errorf("child %d not reaped after Close", c.PID())
			}
			if _, err := callText(ctx, c, "echo", map[string]string{"text": "late"}); !errors.Is(err, ErrClosed) {
				t.Errorf("Call after Close = %v, want ErrClosed", err)
			}
			if err := c.Notify(ctx, "notifications/roots/list_changed", nil); err == nil {
				t.Error("Notify after Close succeeded")
			}
		})
	}
}

func TestStdio_RepeatedCursor(t *testing.T) {
	c := connectClient(t, fakeServerConfig(t, "repeat-cursor"), ClientOptions{})
	_, err := c.ListTools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `repeated cursor "page2"`) {
		t.Fatalf("ListTools = %v, want a repeated-cursor error", err)
	}
}

func TestStdio_Environment(t *testing.T) {
	t.Setenv("MCPGW_TEST_SECRET", "hunter2")
	t.Setenv("HOME", "/home/fake")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	srv := fakeServerConfig(t, "")
	srv.Env["SERVER_TOKEN"] = "configured"
	srv.Env["LANG"] = "fr_FR.UTF-8" // the configured env wins
	srv.Cwd = dir
	c := connectClient(t, srv, ClientOptions{})
	ctx := context.Background()

	text, err := callText(ctx, c, "env", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"HOME=/home/fake",
		"LANG=fr_FR.UTF-8",
		fakeServerEnv + "=",
		"PATH=" + os.Getenv("PATH"),
		"SERVER_TOKEN=configured",
		"TMPDIR=" + dir,
		"GORACE=atexit_sleep_ms=0",
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("child environment (-want +got):\n%s", diff)
	}

	wd, err := callText(ctx, c, "cwd", nil)
	if err != nil {
		t.Fatal(err)
	}
	if wd != dir {
		t.Errorf("child working directory = %q, want %q", wd, dir)
	}
}

func TestStdio_Crash(t *testing.T) {
	c := connectClient(t, fakeServerConfig(t, "crash"), ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := c.PID()
	if pid == 0 {
		t.Fatal("PID = 0")
	}

	// The call is pending when the process dies.
	_, err := callText(ctx, c, "echo", map[string]string{"text": "hi"})
	var cerr *ConnectionError
	if !errors.As(err, &cerr) || cerr.Server != "fake" {
		t.Fatalf("pending Call = %v, want a *ConnectionError for server fake", err)
	}
	<-c.Done()
	const wantErr = `process exited: exit status 3 (last stderr: "fatal: out of cheese")`
	if err := c.Err(); err == nil || err.Error() != wantErr {
		t.Errorf("Err = %v, want %s", err, wantErr)
	}
	var exit *exec.ExitError
	if !errors.As(c.Err(), &exit) || exit.ExitCode() != 3 {
		t.Errorf("Err does not unwrap to an *exec.ExitError with code 3: %v", c.Err())
	}
	if got := c.LastStderr(); got != "fatal: out of cheese" {
		t.Errorf("LastStderr = %q", got)
	}
	if got := c.PID(); got != pid {
		t.Errorf("PID after exit = %d, want %d", got, pid)
	}
	if !reaped(pid) {
		t.Errorf("crashed child %d not reaped", pid)
	}

	// Sending to the dead process fails at once with the same cause.
	_, err = callText(ctx, c, "echo", map[string]string{"text": "again"})
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Call after the crash = %v, want a *ConnectionError naming the exit", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("Close after the crash = %v", err)
	}
	if err := c.Err(); err == nil {
		t.Error("Close after a crash cleared Err")
	}
}

func TestStdio_CloseEscalation(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		grace      time.Duration
		wantSignal string // the last signal sent to the group, "" for none
	}{
		// A long grace: Close returns when the child exits, not after it.
		{name: "exits on EOF", mode: "", grace: time.Minute, wantSignal: ""},
		{name: "ignores EOF and SIGTERM", mode: "ignore-stdin-eof", grace: testGrace, wantSignal: "killed"},
		// The grandchild ignores SIGTERM and holds the stderr pipe; the
		// child exits on EOF. The group is killed after the child is
		// reaped.
		{name: "leftover grandchild", mode: "spawn-child", grace: time.Minute, wantSignal: ""},
		{name: "stubborn child and grandchild", mode: "ignore-stdin-eof,spawn-child", grace: testGrace, wantSignal: "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := newLogRecorder()
			c := connectClient(t, fakeServerConfig(t, tt.mode), ClientOptions{Logger: slog.New(logs), StopGrace: tt.grace})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pid := c.PID()
			grandchild := 0
			if strings.Contains(tt.mode, "spawn-child") {
				text, err := callText(ctx, c, "child", nil)
				if err != nil {
					t.Fatal(err)
				}
				if grandchild, err = strconv.Atoi(text); err != nil || grandchild == 0 {
					t.Fatalf("child pid %q", text)
				}
			}
			if err := c.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := c.Err(); err != nil {
				t.Errorf("Err after Close = %v, want nil", err)
			}
			if !reaped(pid) {
				t.Errorf("child %d not reaped after Close", pid)
			}
			if grandchild != 0 && !eventually(func() bool { return dead(grandchild) }) {
				t.Errorf("grandchild %d survived Close", grandchild)
			}
			var signals []string
			for _, r := range logs.find("signalling the server's process group") {
				signals = append(signals, r.attrs["signal"])
			}
			last := ""
			if len(signals) > 0 {
				last = signals[len(signals)-1]
			}
			if last != tt.wantSignal {
				t.Errorf("signals sent = %v, want the last to be %q", signals, tt.wantSignal)
			}
		})
	}
}

// TestStdio_CloseContext checks that a Close whose context ends kills the
// child at once instead of waiting out the grace periods.
func TestStdio_CloseContext(t *testing.T) {
	c := connectClient(t, fakeServerConfig(t, "ignore-stdin-eof"), ClientOptions{StopGrace: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !reaped(c.PID()) {
		t.Errorf("child %d not reaped", c.PID())
	}
}

func TestStdio_MessageTooLarge(t *testing.T) {
	c := connectClient(t, fakeServerConfig(t, "big"), ClientOptions{MaxMessageBytes: 64 << 10})
	_, err := callText(context.Background(), c, "echo", map[string]string{"text": "hi"})
	const want = `server "fake" sent a message larger than 65536 bytes`
	var cerr *ConnectionError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Call = %v, want a *ConnectionError saying %s", err, want)
	}
	<-c.Done()
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("Err = %v, want %s", err, want)
	}
}

// firedDeadline is a context whose deadline passes when fire is called, so
// that a test ends a call on a deadline at a moment of its choosing.
type firedDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newFiredDeadline() *firedDeadline {
	return &firedDeadline{Context: context.Background(), done: make(chan struct{})}
}

func (c *firedDeadline) Done() <-chan struct{} { return c.done }

func (c *firedDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *firedDeadline) fire() { c.once.Do(func() { close(c.done) }) }

func TestStdio_Cancellation(t *testing.T) {
	tests := []struct {
		name       string
		ctx        func() (context.Context, func())
		wantErr    error
		wantReason string
	}{
		{
			name: "deadline",
			ctx: func() (context.Context, func()) {
				ctx := newFiredDeadline()
				return ctx, ctx.fire
			},
			wantErr:    context.DeadlineExceeded,
			wantReason: "timeout",
		},
		{
			name:       "cancel",
			ctx:        func() (context.Context, func()) { return context.WithCancel(context.Background()) },
			wantErr:    context.Canceled,
			wantReason: "cancelled by the client",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{}, 1)
			c := connectClient(t, fakeServerConfig(t, ""), ClientOptions{
				OnNotification: func(m *jsonrpc.Message) {
					if m.Method == "notifications/message" {
						started <- struct{}{}
					}
				},
			})
			ctx, end := tt.ctx()
			errc := make(chan error, 1)
			go func() {
				_, err := callText(ctx, c, "slow", nil)
				errc <- err
			}()
			<-started // the server has the request
			end()
			if err := <-errc; !errors.Is(err, tt.wantErr) {
				t.Fatalf("Call = %v, want %v", err, tt.wantErr)
			}

			// The client sent notifications/cancelled before Call
			// returned, and the server reads in order, so it has it.
			text, err := callText(context.Background(), c, "cancellations", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []fakeCancel
			if err := json.Unmarshal([]byte(text), &got); err != nil {
				t.Fatal(err)
			}
			// The only call before slow was the handshake, so slow's id
			// is the next one; Matched says the server saw that very id.
			want := []fakeCancel{{RequestID: json.RawMessage("2"), Reason: tt.wantReason, Matched: true}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cancellations seen by the server (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStdio_GoSDKServer(t *testing.T) {
	c := connectClient(t, fakeServerConfig(t, "sdk"), ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := c.Initialized().ProtocolVersion; got != LatestProtocolVersion {
		t.Errorf("protocol version = %q, want %q", got, LatestProtocolVersion)
	}
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"greet"}, toolNames(t, tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	got, err := callText(ctx, c, "greet", map[string]string{"name": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello, gateway"; got != want {
		t.Errorf("greet = %q, want %q", got, want)
	}
}

// The tests below drive the transport directly.

func newTestStdio(t *testing.T, mode string) *stdioTransport {
	t.Helper()
	checkNoLeaks(t)
	opts := &ClientOptions{Name: "fake", StopGrace: testGrace, Logger: logOnFailure(t, nil)}
	tr := newStdioTransport(fakeServerConfig(t, mode), opts).(*stdioTransport)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if pid := tr.pid(); pid != 0 && !reaped(pid) {
			t.Errorf("child %d still exists after close", pid)
		}
	})
	return tr
}

func TestStdioTransport_RecvUnrelated(t *testing.T) {
	tr := newTestStdio(t, "")
	got := make(chan related, 1)
	if err := tr.start(context.Background(), func(m *jsonrpc.Message, rel related) { got <- rel }); err != nil {
		t.Fatal(err)
	}
	if err := tr.send(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(7), "ping", nil)); err != nil {
		t.Fatal(err)
	}
	if rel := <-got; rel.IsValid() {
		t.Errorf("related = %s, want the zero id", rel)
	}
}

func TestStdioTransport_StartFailure(t *testing.T) {
	srv := fakeServerConfig(t, "")
	srv.Command = "mcpgw-no-such-command"
	tr := newStdioTransport(srv, &ClientOptions{Name: "fake"})
	err := tr.start(context.Background(), func(*jsonrpc.Message, related) {})
	if err == nil || !strings.Contains(err.Error(), `starting server "fake"`) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("start = %v, want a not-found error naming the server", err)
	}
	<-tr.done()
	if err := tr.close(context.Background()); err != nil {
		t.Errorf("close after a failed start = %v", err)
	}
	if err := tr.send(context.Background(), jsonrpc.NewNotification("x", nil)); err == nil {
		t.Error("send after a failed start succeeded")
	}
}

func TestStdioTransport_CloseBeforeStart(t *testing.T) {
	tr := newStdioTransport(fakeServerConfig(t, ""), &ClientOptions{Name: "fake"})
	if err := tr.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-tr.done()
	if err := tr.start(context.Background(), func(*jsonrpc.Message, related) {}); err == nil {
		t.Error("start after close succeeded")
	}
}

// TestStdioTransport_FullPipe sends to a child that never reads: the send
// gives up with its context, and close still stops everything, including
// the goroutine that finishes the half-written line.
func TestStdioTransport_FullPipe(t *testing.T) {
	tr := newTestStdio(t, "deaf")
	if err := tr.start(context.Background(), func(*jsonrpc.Message, related) {}); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	ctx := newFiredDeadline()
	errc := make(chan error, 1)
	go func() { errc <- tr.send(ctx, jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", big)) }()
	// Once the first send holds the write lock it is stuck in a write of
	// 1 MiB to a 64 KiB pipe nobody reads.
	if !eventually(func() bool { return len(tr.wmu) == 1 }) {
		t.Fatal("the first send never took the write lock")
	}
	// A second sender waits behind it, until its context ends.
	ctx2, cancel2 := context.WithCancel(context.Background())
	errc2 := make(chan error, 1)
	go func() { errc2 <- tr.send(ctx2, jsonrpc.NewNotification("notifications/progress", nil)) }()
	cancel2()
	if err := <-errc2; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting send = %v, want context.Canceled", err)
	}
	ctx.fire()
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("send to a full pipe = %v, want context.DeadlineExceeded", err)
	}
}

// TestStdioTransport_CloseDuringSends closes while many goroutines send;
// run with -race. Every send either succeeds or fails; none hangs.
func TestStdioTransport_CloseDuringSends(t *testing.T) {
	tr := newTestStdio(t, "")
	if err := tr.start(context.Background(), func(*jsonrpc.Message, related) {}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for j := range 50 {
				err := tr.send(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(int64(i*1000+j)), "ping", nil))
				if err != nil {
					var cerr *ConnectionError
					if !errors.As(err, &cerr) {
						t.Errorf("send after close = %v, want a *ConnectionError", err)
					}
					return
				}
			}
		})
	}
	var closers sync.WaitGroup
	for range 3 {
		closers.Go(func() {
			if err := tr.close(context.Background()); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	closers.Wait()
	wg.Wait()
	if err := tr.err(); err != nil {
		t.Errorf("err after close = %v, want nil", err)
	}
	if err := tr.send(context.Background(), jsonrpc.NewNotification("x", nil)); err == nil {
		t.Error("send after close succeeded")
	}
}

// TestStdioTransport_BatchedLines queues sends behind a held write lock:
// the sender that gets the lock writes them all in one write, and the
// server gets each message whole, once (each ping is answered under its
// own id). A queued send whose context ends leaves the queue unsent.
// Large lines are written in several writes of at most maxPooledLine
// bytes (one line each, above that).
func TestStdioTransport_BatchedLines(t *testing.T) {
	for _, pad := range []int{0, 100 << 10, maxPooledLine + 1} {
		t.Run(fmt.Sprintf("pad=%d", pad), func(t *testing.T) { testBatchedLines(t, pad) })
	}
}

func testBatchedLines(t *testing.T, pad int) {
	var params json.RawMessage
	if pad > 0 {
		params = json.RawMessage(`{"pad":"` + strings.Repeat("x", pad) + `"}`)
	}
	tr := newTestStdio(t, "")
	var mu sync.Mutex
	answered := map[string]int{}
	if err := tr.start(context.Background(), func(m *jsonrpc.Message, _ related) {
		mu.Lock()
		answered[m.ID.String()]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	tr.wmu <- struct{}{} // a writer busy elsewhere
	n := 20
	if pad > 0 {
		n = 6
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- tr.send(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(int64(i)), "ping", params))
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- tr.send(ctx, jsonrpc.NewRequest(jsonrpc.StringID("gone"), "ping", nil)) }()
	queued := func() int {
		tr.qmu.Lock()
		defer tr.qmu.Unlock()
		return len(tr.queue)
	}
	if !eventually(func() bool { return queued() == n+1 }) {
		t.Fatalf("%d lines queued, want %d", queued(), n+1)
	}
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled queued send = %v, want context.Canceled", err)
	}
	if q := queued(); q != n {
		t.Errorf("%d lines queued after a cancel, want %d", q, n)
	}
	<-tr.wmu // the busy writer is done: one of the senders writes the lot
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("send: %v", err)
		}
	}
	if !eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(answered) == n }) {
		t.Fatalf("%d distinct answers, want %d", len(answered), n)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range answered {
		if k != 1 || id == `"gone"` {
			t.Errorf("id %s answered %d times", id, k)
		}
	}
}
