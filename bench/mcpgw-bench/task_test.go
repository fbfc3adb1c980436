package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeTaskServer is a 2026-07-28 MCP server in raw JSON-RPC that makes every
// tools/call of a client declaring the tasks extension a task, strict about
// what -task must send: no session, the protocol version in the header and
// in _meta, the extension declared, Mcp-Method and Mcp-Name. A task is
// working for its first polls tasks/get, then ends as the behaviour says:
//
//	ok          completed, the arguments' text inlined (over SSE for odd
//	            request ids)
//	plain       tools/call answered with its result, not a task
//	failed      failed, with an error
//	isError     completed with a result of isError: true
//	input       input_required
//	badID       a task id that cannot be a header value
type fakeTaskServer struct {
	behaviour string
	polls     int // tasks/get answered "working" before the end

	mu       sync.Mutex
	tasks    map[string]*fakeTask
	made     int
	gets     int
	problems []string
}

type fakeTask struct {
	text  string
	polls int
}

func newFakeTaskServer(t *testing.T, behaviour string, polls int) (*fakeTaskServer, string) {
	t.Helper()
	f := &fakeTaskServer{behaviour: behaviour, polls: polls, tasks: map[string]*fakeTask{}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.problems {
			t.Errorf("fake task server: %s", p)
		}
	})
	return f, srv.URL + "/mcp"
}

func (f *fakeTaskServer) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.problems) < 5 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

func (f *fakeTaskServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.problem("%s: -task sends only POSTs", r.Method)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			TaskID    string `json:"taskId"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
			Meta struct {
				Version string `json:"io.modelcontextprotocol/protocolVersion"`
				Caps    struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		f.problem("POST body: %v", err)
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	switch {
	case r.Header.Get("Mcp-Session-Id") != "":
		f.problem("%s with a session id", m.Method)
	case r.Header.Get("MCP-Protocol-Version") != modernVersion || m.Params.Meta.Version != modernVersion:
		f.problem("%s: protocol version %q in the header, %q in _meta", m.Method, r.Header.Get("MCP-Protocol-Version"), m.Params.Meta.Version)
	case m.Params.Meta.Caps.Extensions[tasksExtension] == nil:
		f.problem("%s without the tasks extension declared", m.Method)
	case r.Header.Get("Mcp-Method") != m.Method:
		f.problem("Mcp-Method %q for %s", r.Header.Get("Mcp-Method"), m.Method)
	}
	switch m.Method {
	case "tools/call":
		if r.Header.Get("Mcp-Name") != m.Params.Name || m.Params.Name != "echo" {
			f.problem("tools/call of %q with Mcp-Name %q", m.Params.Name, r.Header.Get("Mcp-Name"))
		}
		f.call(w, m.ID, m.Params.Arguments.Text)
	case "tasks/get":
		if r.Header.Get("Mcp-Name") != m.Params.TaskID {
			f.problem("tasks/get of %q with Mcp-Name %q", m.Params.TaskID, r.Header.Get("Mcp-Name"))
		}
		f.get(w, m.ID, m.Params.TaskID)
	default:
		f.problem("method %q", m.Method)
		writeJSONText(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no method"}}`, m.ID))
	}
}

func (f *fakeTaskServer) call(w http.ResponseWriter, id json.RawMessage, text string) {
	quoted, _ := json.Marshal(text)
	if f.behaviour == "plain" {
		writeJSON(w, id, fmt.Sprintf(`{"content":[{"type":"text","text":%s}]}`, quoted))
		return
	}
	f.mu.Lock()
	f.made++
	taskID := fmt.Sprintf("task-%d", f.made)
	if f.behaviour == "badID" {
		taskID += "\r\nX-Injected: 1"
	}
	f.tasks[taskID] = &fakeTask{text: text}
	f.mu.Unlock()
	tid, _ := json.Marshal(taskID)
	writeJSON(w, id, fmt.Sprintf(`{"resultType":"task","taskId":%s,"status":"working","pollIntervalMs":1000,"ttlMs":60000}`, tid))
}

func (f *fakeTaskServer) get(w http.ResponseWriter, id json.RawMessage, taskID string) {
	f.mu.Lock()
	f.gets++
	task := f.tasks[taskID]
	var done bool
	if task != nil {
		task.polls++
		done = task.polls > f.polls
		if done {
			delete(f.tasks, taskID)
		}
	}
	f.mu.Unlock()
	if task == nil {
		f.problem("tasks/get of an unknown or finished task %q", taskID)
		writeJSONText(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown task"}}`, id))
		return
	}
	tid, _ := json.Marshal(taskID)
	quoted, _ := json.Marshal(task.text)
	head := fmt.Sprintf(`{"taskId":%s,"pollIntervalMs":1000,"ttlMs":60000`, tid)
	var result string
	switch {
	case !done:
		result = head + `,"resultType":"complete","status":"working"}`
	case f.behaviour == "failed":
		result = head + `,"resultType":"complete","status":"failed","error":{"code":-32603,"message":"the call broke"}}`
	case f.behaviour == "isError":
		result = head + `,"resultType":"complete","status":"completed","result":{"content":[{"type":"text","text":"no such thing"}],"isError":true}}`
	case f.behaviour == "input":
		result = head + `,"resultType":"complete","status":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}}}`
	default:
		result = head + fmt.Sprintf(`,"resultType":"complete","status":"completed","result":{"content":[{"type":"text","text":%s}]}}`, quoted)
	}
	if n, _ := parseID(id); n%2 == 1 {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, result)
		return
	}
	writeJSON(w, id, result)
}

func TestTaskMode(t *testing.T) {
	tests := []struct {
		behaviour string
		polls     int
		args      []string
		wantCode  int
		wantError string // in the first error sample
	}{
		{behaviour: "ok", polls: 2},
		{behaviour: "ok", polls: 0, args: []string{"-sessions", "1"}},
		{behaviour: "plain", wantCode: 1, wantError: "not a task"},
		{behaviour: "failed", polls: 1, wantCode: 1, wantError: `task failed: JSON-RPC error -32603: the call broke`},
		{behaviour: "isError", wantCode: 1, wantError: "isError"},
		{behaviour: "input", wantCode: 1, wantError: "input_required"},
		{behaviour: "ok", args: []string{"-expect", "nowhere"}, wantCode: 1, wantError: "does not contain"},
		{behaviour: "badID", wantCode: 1, wantError: "task id"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d %s", tt.behaviour, tt.polls, strings.Join(tt.args, " ")), func(t *testing.T) {
			checkGoroutines(t)
			f, url := newFakeTaskServer(t, tt.behaviour, tt.polls)
			code, rep, output := runBench(t, append(append([]string{"-url", url, "-task"}, short...), tt.args...)...)
			if code != tt.wantCode || rep == nil {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.wantCode, output)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the run's output:\n%s", output)
				}
			})
			if rep.Mode != modeTask || rep.Method != "tools/call" || rep.Tool != "echo" {
				t.Errorf("report %+v", rep)
			}
			if tt.wantError != "" {
				if rep.Errors == 0 || len(rep.ErrorSamples) == 0 || !strings.Contains(rep.ErrorSamples[0], tt.wantError) {
					t.Errorf("errors %d %q, want some with %q", rep.Errors, rep.ErrorSamples, tt.wantError)
				}
				return
			}
			if rep.Errors != 0 || rep.Requests == 0 || rep.Latency == nil || rep.Task == nil {
				t.Fatalf("report %+v, errors %q", rep, rep.ErrorSamples)
			}
			f.mu.Lock()
			made, gets := f.made, f.gets
			f.mu.Unlock()
			// Every task the tool made, warmup or not, is polled to its
			// end: polls+1 tasks/get each.
			if want := made * (tt.polls + 1); gets != want || rep.Task.Tasks != int64(made) || rep.Task.Gets != int64(gets) {
				t.Errorf("server: %d tasks, %d tasks/get (want %d); report %+v", made, gets, want, rep.Task)
			}
			if rep.Task.GetsPerTask != float64(tt.polls+1) {
				t.Errorf("tasks/get per task %v, want %d", rep.Task.GetsPerTask, tt.polls+1)
			}
		})
	}
}

func TestParseTask(t *testing.T) {
	tests := []struct {
		name, in string
		want     taskState
		wantErr  string
	}{
		{name: "working", in: `{"resultType":"task","taskId":"t1","status":"working"}`, want: taskState{resultType: "task", id: "t1", status: "working"}},
		{name: "completed", in: `{"taskId":"t1","status":"completed","result":{"content":[]},"resultType":"complete"}`,
			want: taskState{resultType: "complete", id: "t1", status: "completed", result: []byte(`{"content":[]}`)}},
		{name: "escaped id", in: `{"resultType":"task","taskId":"t\u0031","status":"working"}`, want: taskState{resultType: "task", id: "t1", status: "working"}},
		{name: "error inlined", in: `{"taskId":"t1","status":"failed","error":{"code":1,"message":"m"}}`,
			want: taskState{id: "t1", status: "failed", err: []byte(`{"code":1,"message":"m"}`)}},
		{name: "not an object", in: `[1]`, wantErr: "malformed"},
		{name: "id not a string", in: `{"resultType":"task","taskId":7,"status":"working"}`, wantErr: "taskId"},
		{name: "status not a string", in: `{"taskId":"t1","status":null}`, wantErr: "status"},
		{name: "truncated", in: `{"taskId":"t1","status":"wor`, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTask([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("parseTask(%s) = %+v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.resultType != tt.want.resultType || got.id != tt.want.id || got.status != tt.want.status ||
				string(got.result) != string(tt.want.result) || string(got.err) != string(tt.want.err) {
				t.Errorf("parseTask(%s) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzParseTask: a hostile server's task never panics the tool, and what
// parseTask accepts as a task id can go into a header.
func FuzzParseTask(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"task","taskId":"t1","status":"working"}`,
		`{"taskId":"t1","status":"completed","result":{"content":[{"type":"text","text":"x"}]}}`,
		`{"taskId":"a\"b","status":"failed","error":{}}`,
		`{"taskId":"\r\n","status":"working"}`,
		`{}`, `[]`, `{"taskId":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseTask(b)
		if err != nil {
			return
		}
		if st.id != "" {
			if err := checkTaskID(st.id); err == nil && strings.ContainsAny(st.id, "\r\n\x00 ") {
				t.Errorf("task id %q passed the header check", st.id)
			}
		}
	})
}
