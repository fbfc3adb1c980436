package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// taskFake is a fake server with 2025-11-25 task support: a task is done
// after two tasks/get, or at once on tasks/result.
type taskFake struct {
	mu    sync.Mutex
	tasks map[string]*fakeTask
	calls []string
	next  int
}

type fakeTask struct {
	status string
	gets   int
	value  string
}

const taskCaps = `{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`

func newTaskFake() *taskFake { return &taskFake{tasks: map[string]*fakeTask{}} }

func (f *taskFake) server(name string) *upstreamtest.Server {
	return &upstreamtest.Server{Name: name, Capabilities: json.RawMessage(taskCaps), Transport: "http",
		Tools: raws(
			`{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`,
			`{"name":"must","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`,
			`{"name":"plain","inputSchema":{"type":"object"}}`,
		),
		Handle: f.handle}
}

func (f *taskFake) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *taskFake) handle(ctx context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	taskID, _ := rawjson.String(params, "taskId")
	t := f.tasks[taskID]
	taskObj := func(id string, t *fakeTask) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"taskId":%q,"status":%q,"createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1}`, id, t.status))
	}
	switch method {
	case "tools/call":
		name, _ := rawjson.String(params, "name")
		args, _, _ := rawjson.Get(params, "arguments")
		value, _ := rawjson.String(args, "value")
		if _, asked, _ := rawjson.Get(params, "task"); !asked {
			if name == "must" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "must needs a task")
			}
			if name == "plain" {
				if value == "block" {
					f.mu.Unlock()
					<-ctx.Done()
					f.mu.Lock()
					return nil, ctx.Err()
				}
				return json.RawMessage(`{"content":[{"type":"text","text":"plain:` + value + `"}]}`), nil
			}
		}
		f.next++
		id := fmt.Sprintf("up-%d", f.next)
		f.tasks[id] = &fakeTask{status: "working", value: value}
		return json.RawMessage(`{"task":` + string(taskObj(id, f.tasks[id])) + `}`), nil
	case "tasks/get", "tasks/cancel", "tasks/result":
		if t == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no such task")
		}
		switch method {
		case "tasks/get":
			if t.gets++; t.gets >= 2 && t.status == "working" {
				t.status = "completed"
			}
			return taskObj(taskID, t), nil
		case "tasks/cancel":
			if t.status == "completed" || t.status == "cancelled" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "task is terminal")
			}
			t.status = "cancelled"
			return taskObj(taskID, t), nil
		}
		t.status = "completed"
		return json.RawMessage(`{"content":[{"type":"text","text":"done:` + t.value + `"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + taskID + `"}}}`), nil
	}
	return json.RawMessage(`{}`), nil
}

func call(t *testing.T, s *Server, req *Request) (json.RawMessage, error) {
	t.Helper()
	res, err := s.Handle(context.Background(), req)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

func taskOf(t *testing.T, body json.RawMessage) (id, status string) {
	t.Helper()
	if task, ok, _ := rawjson.Get(body, "task"); ok {
		body = task
	}
	id, _ = rawjson.String(body, "taskId")
	status, _ = rawjson.String(body, "status")
	return id, status
}

func TestTasks_Relay(t *testing.T) {
	f := newTaskFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	a := &recorder{}
	sessA := func(method, params string) *Request {
		return &Request{Method: method, Session: "A", Principal: Anonymous, SessionNotify: a.sink, Params: json.RawMessage(params)}
	}
	body, err := call(t, s, sessA("tools/call", `{"name":"mcp__s__job","arguments":{"value":"v1"},"task":{"ttl":60000}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, status := taskOf(t, body)
	if id == "" || strings.HasPrefix(id, "up-") || status != "working" {
		t.Fatalf("CreateTaskResult = %s: want the gateway's id", body)
	}
	idParams := `{"taskId":"` + id + `"}`

	body, err = call(t, s, sessA("tasks/get", idParams))
	if gid, st := taskOf(t, body); err != nil || gid != id || st != "working" {
		t.Fatalf("tasks/get = %s, %v", body, err)
	}
	body, err = call(t, s, sessA("tasks/result", idParams))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := relatedTaskID(body); got != id || !strings.Contains(string(body), "done:v1") {
		t.Fatalf("tasks/result = %s, want the result tied to our id", body)
	}
	before := len(f.log())
	body2, err := call(t, s, sessA("tasks/result", idParams))
	if err != nil || string(body2) != string(body) || len(f.log()) != before {
		t.Errorf("second tasks/result = %s, %v (upstream calls %d -> %d): want the stored result, no upstream call", body2, err, before, len(f.log()))
	}
	body, _ = call(t, s, sessA("tasks/get", idParams))
	if _, st := taskOf(t, body); st != "completed" {
		t.Errorf("tasks/get after the result: %s", body)
	}
	_, err = call(t, s, sessA("tasks/cancel", idParams))
	assertCode(t, err, jsonrpc.CodeInvalidParams, "already completed")

	// Another session, a forged id: the same answer.
	other := &Request{Method: "tasks/get", Session: "B", Principal: Anonymous, Params: json.RawMessage(idParams)}
	_, err1 := s.Handle(context.Background(), other)
	forged := &Request{Method: "tasks/get", Session: "A", Principal: Anonymous, Params: json.RawMessage(`{"taskId":"up-1"}`)}
	_, err2 := s.Handle(context.Background(), forged)
	j1 := assertCode(t, err1, jsonrpc.CodeInvalidParams, "unknown task")
	j2 := assertCode(t, err2, jsonrpc.CodeInvalidParams, "unknown task")
	if strings.ReplaceAll(j1.Message, shorten(id), "X") != strings.ReplaceAll(j2.Message, "up-1", "X") {
		t.Errorf("another session's id and a forged one are told apart: %q vs %q", j1.Message, j2.Message)
	}
	for _, m := range []string{"tasks/result", "tasks/cancel"} {
		_, err := s.Handle(context.Background(), &Request{Method: m, Session: "B", Principal: Anonymous, Params: json.RawMessage(idParams)})
		assertCode(t, err, jsonrpc.CodeInvalidParams, "unknown task")
	}

	// Cancel, and list.
	body, _ = call(t, s, sessA("tools/call", `{"name":"mcp__s__job","arguments":{"value":"v2"},"task":{}}`))
	id2, _ := taskOf(t, body)
	body, err = call(t, s, sessA("tasks/cancel", `{"taskId":"`+id2+`"}`))
	if gid, st := taskOf(t, body); err != nil || gid != id2 || st != "cancelled" {
		t.Fatalf("tasks/cancel = %s, %v", body, err)
	}
	body, _ = call(t, s, sessA("tasks/list", `{}`))
	var list struct {
		Tasks []struct{ TaskID, Status string }
	}
	json.Unmarshal(body, &list)
	got := map[string]string{}
	for _, tk := range list.Tasks {
		got[tk.TaskID] = tk.Status
	}
	if diff := cmp.Diff(map[string]string{id: "completed", id2: "cancelled"}, got); diff != "" {
		t.Errorf("tasks/list (-want +got):\n%s", diff)
	}
	body, _ = call(t, s, &Request{Method: "tasks/list", Session: "B", Principal: Anonymous, Params: json.RawMessage(`{}`)})
	if string(body) != `{"tasks":[]}` {
		t.Errorf("another session's tasks/list = %s", body)
	}
}

func TestTasks_StatusNotification(t *testing.T) {
	f := newTaskFake()
	m := upstreamtest.NewManager(f.server("s"))
	s := newCore(t, m, Options{})
	a := &recorder{}
	body, err := call(t, s, &Request{Method: "tools/call", Session: "A", SessionNotify: a.sink, Params: json.RawMessage(`{"name":"mcp__s__job","task":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := taskOf(t, body)
	m.Notify("s", jsonrpc.NewNotification("notifications/tasks/status", json.RawMessage(`{"taskId":"up-1","status":"input_required","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z","ttl":60000}`)))
	m.Notify("s", jsonrpc.NewNotification("notifications/tasks/status", json.RawMessage(`{"taskId":"up-999","status":"working"}`)))
	want := []string{`notifications/tasks/status {"taskId":"` + id + `","status":"input_required","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z","ttl":60000}`}
	if diff := cmp.Diff(want, a.got()); diff != "" {
		t.Errorf("status notifications (-want +got):\n%s", diff)
	}
}

// TestTasks_KeepsFinishedResult: once the gateway sees a relayed task
// finish, it fetches and keeps the result, so the client's tasks/result
// costs the server nothing and outlives the server's memory of the task.
func TestTasks_KeepsFinishedResult(t *testing.T) {
	f := newTaskFake()
	m := upstreamtest.NewManager(f.server("s"))
	s := newCore(t, m, Options{})
	req := func(method, params string) *Request {
		return &Request{Method: method, Session: "A", Principal: Anonymous, Params: json.RawMessage(params)}
	}

	// Seen finished through tasks/get.
	body, err := call(t, s, req("tools/call", `{"name":"mcp__s__job","arguments":{"value":"v1"},"task":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := taskOf(t, body)
	idParams := `{"taskId":"` + id + `"}`
	for _, want := range []string{"working", "completed"} {
		body, err = call(t, s, req("tasks/get", idParams))
		if _, st := taskOf(t, body); err != nil || st != want {
			t.Fatalf("tasks/get = %s, %v; want %s", body, err, want)
		}
	}
	if diff := cmp.Diff([]string{"tools/call", "tasks/get", "tasks/get", "tasks/result"}, f.log()); diff != "" {
		t.Errorf("upstream requests once the task finished (-want +got):\n%s", diff)
	}
	f.mu.Lock()
	clear(f.tasks) // the server forgets it
	f.mu.Unlock()
	body, err = call(t, s, req("tasks/result", idParams))
	if err != nil || !strings.Contains(string(body), "done:v1") {
		t.Fatalf("tasks/result = %s, %v; want the kept result", body, err)
	}
	if got, _ := relatedTaskID(body); got != id {
		t.Errorf("kept result not tied to the gateway's id: %s", body)
	}
	if n := len(f.log()); n != 4 {
		t.Errorf("tasks/result of a kept result reached the server: %v", f.log())
	}

	// Seen finished through the server's notification: kept in the
	// background.
	body, _ = call(t, s, req("tools/call", `{"name":"mcp__s__job","arguments":{"value":"v2"},"task":{}}`))
	id2, _ := taskOf(t, body)
	f.mu.Lock()
	f.tasks["up-2"].status = "completed"
	f.mu.Unlock()
	m.Notify("s", jsonrpc.NewNotification("notifications/tasks/status", json.RawMessage(`{"taskId":"up-2","status":"completed","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z","ttl":60000}`)))
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(f.log()[4:], "tasks/result") {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never fetched the result of a task its server said completed; upstream saw %v", f.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The fetch runs in the background: wait until it kept the result, or
	// the call below may race it upstream.
	for {
		if rec, err := s.opts.Tasks.GetTask(context.Background(), id2); err == nil && rec.Result != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never kept the result it fetched; upstream saw %v", f.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	body, err = call(t, s, req("tasks/result", `{"taskId":"`+id2+`"}`))
	if err != nil || !strings.Contains(string(body), "done:v2") {
		t.Fatalf("tasks/result = %s, %v", body, err)
	}
	if diff := cmp.Diff([]string{"tools/call", "tasks/result"}, f.log()[4:]); diff != "" {
		t.Errorf("upstream requests of the notified task (-want +got):\n%s", diff)
	}
}

// TestRetagTask: a server's related-task _meta names the gateway's id of
// a task its client knows, and nothing for any other task.
func TestRetagTask(t *testing.T) {
	f := newTaskFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	body, err := call(t, s, &Request{Method: "tools/call", Session: "A", Principal: Anonymous, Params: json.RawMessage(`{"name":"mcp__s__job","task":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := taskOf(t, body)
	for _, tc := range []struct{ name, in, want string }{
		{"known", `{"level":"info","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"},"k":1}}`,
			`{"level":"info","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"},"k":1}}`},
		{"unknown, other meta kept", `{"level":"info","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-9"},"k":1}}`,
			`{"level":"info","_meta":{"k":1}}`},
		{"unknown, meta emptied", `{"level":"info","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-9"}}}`,
			`{"level":"info"}`},
		{"another server's", `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`, `{}`},
		{"none", `{"level":"info"}`, `{"level":"info"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := "s"
			if tc.name == "another server's" {
				server = "other"
			}
			got := s.retagTask(server, upstream.Caller{}, json.RawMessage(tc.in))
			var g, w any
			json.Unmarshal(got, &g)
			json.Unmarshal([]byte(tc.want), &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("retagTask(%s) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestTasks_BlockAndPoll(t *testing.T) {
	f := newTaskFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	body, err := call(t, s, &Request{Method: "tools/call", Session: "A", Params: json.RawMessage(`{"name":"mcp__s__must","arguments":{"value":"x"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != `{"content":[{"type":"text","text":"done:x"}]}` {
		t.Errorf("result = %s, want the task's result, not tied to a task", body)
	}
	if diff := cmp.Diff([]string{"tools/call", "tasks/get", "tasks/get", "tasks/result"}, f.log()); diff != "" {
		t.Errorf("upstream requests (-want +got):\n%s", diff)
	}
}

func TestTasks_Hosted(t *testing.T) {
	f := newTaskFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{TaskConfig: config.Tasks{PollInterval: config.Duration(time.Millisecond), MaxHostedPerPrincipal: 1}})
	a := &recorder{}
	req := func(method, params string) *Request {
		return &Request{Method: method, Session: "A", SessionNotify: a.sink, Params: json.RawMessage(params)}
	}
	body, err := call(t, s, req("tools/call", `{"name":"mcp__s__plain","arguments":{"value":"p"},"task":{"ttl":5000}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, status := taskOf(t, body)
	if id == "" || status != "working" || !strings.Contains(string(body), `"ttl":5000`) {
		t.Fatalf("hosted CreateTaskResult = %s", body)
	}
	body, err = call(t, s, req("tasks/result", `{"taskId":"`+id+`"}`))
	if err != nil || !strings.Contains(string(body), "plain:p") {
		t.Fatalf("tasks/result = %s, %v", body, err)
	}
	if got, _ := relatedTaskID(body); got != id {
		t.Errorf("hosted result not tied to its task: %s", body)
	}
	body, _ = call(t, s, req("tasks/get", `{"taskId":"`+id+`"}`))
	if _, st := taskOf(t, body); st != "completed" {
		t.Errorf("tasks/get = %s", body)
	}
	if diff := cmp.Diff([]string{"tools/call"}, f.log()); diff != "" {
		t.Errorf("upstream saw (-want +got):\n%s", diff)
	}

	// A hosted task that blocks: the cap, then cancel reaches the server.
	body, err = call(t, s, req("tools/call", `{"name":"mcp__s__plain","arguments":{"value":"block"},"task":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	bid, _ := taskOf(t, body)
	_, err = s.Handle(context.Background(), req("tools/call", `{"name":"mcp__s__plain","arguments":{"value":"p"},"task":{}}`))
	assertCode(t, err, CodeRateLimited, "hosted tasks running")
	body, err = call(t, s, req("tasks/cancel", `{"taskId":"`+bid+`"}`))
	if _, st := taskOf(t, body); err != nil || st != "cancelled" {
		t.Fatalf("cancel = %s, %v", body, err)
	}
	_, err = s.Handle(context.Background(), req("tasks/result", `{"taskId":"`+bid+`"}`))
	assertCode(t, err, jsonrpc.CodeInternalError, "was cancelled")
	// The cap frees once the cancelled call has ended.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Handle(context.Background(), req("tools/call", `{"name":"mcp__s__plain","arguments":{"value":"p"},"task":{}}`))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cap never freed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTasks_ToolsListTaskSupport(t *testing.T) {
	f := newTaskFake()
	plainServer := &upstreamtest.Server{Name: "p", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)}
	no := false
	for _, tt := range []struct {
		name string
		opts Options
		want map[string]string
	}{
		{"hosting on", Options{}, map[string]string{"mcp__s__job": "optional", "mcp__s__must": "optional", "mcp__s__plain": "optional", "mcp__p__t": "optional"}},
		{"hosting off", Options{TaskConfig: config.Tasks{Host: &no}}, map[string]string{"mcp__s__job": "optional", "mcp__s__must": "optional", "mcp__s__plain": "forbidden", "mcp__p__t": "forbidden"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newCore(t, upstreamtest.NewManager(f.server("s"), plainServer), tt.opts)
			body, _ := call(t, s, &Request{Method: "tools/list"})
			var list struct {
				Tools []struct {
					Name      string
					Execution struct{ TaskSupport string }
				}
			}
			json.Unmarshal(body, &list)
			got := map[string]string{}
			for _, tl := range list.Tools {
				got[tl.Name] = tl.Execution.TaskSupport
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("taskSupport (-want +got):\n%s", diff)
			}
			if tt.name == "hosting off" {
				_, err := s.Handle(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__p__t","task":{}}`)})
				assertCode(t, err, jsonrpc.CodeMethodNotFound, "cannot run as a task")
			}
		})
	}
}

func TestTasks_RecoverAfterRestart(t *testing.T) {
	ctx := context.Background()
	db := store.NewMemory()
	now := time.Now()
	for _, rec := range []store.Task{
		{ID: "hosted", Owner: "principal:a", Server: "s", Hosted: true, Status: "working", CreatedAt: now, UpdatedAt: now},
		{ID: "stdio", Owner: "principal:a", Server: "s", UpstreamID: "u1", Transport: "stdio", Status: "working", CreatedAt: now, UpdatedAt: now},
		{ID: "http", Owner: "principal:a", Server: "s", UpstreamID: "u2", Transport: "http", Status: "input_required", CreatedAt: now, UpdatedAt: now},
		{ID: "done", Owner: "principal:a", Server: "s", UpstreamID: "u3", Transport: "stdio", Status: "completed", CreatedAt: now, UpdatedAt: now, Result: json.RawMessage(`{"content":[]}`)},
	} {
		if err := db.PutTask(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	newCore(t, upstreamtest.NewManager(), Options{Tasks: db})
	for id, want := range map[string]string{"hosted": "failed", "stdio": "failed", "http": "input_required", "done": "completed"} {
		rec, err := db.GetTask(ctx, id)
		if err != nil || rec.Status != want {
			t.Errorf("%s: %q (%v), want %q", id, rec.Status, err, want)
		}
		if want == "failed" && (rec.StatusMessage == "" || rec.Error == nil) {
			t.Errorf("%s failed without saying why: %+v", id, rec)
		}
	}
}

// TestTasks_RelayedAcrossRestart: a relayed task on an HTTP server outlives
// the gateway: a new core on the same store and secret asks the server
// again, and one the server forgot fails saying so.
func TestTasks_RelayedAcrossRestart(t *testing.T) {
	f := newTaskFake()
	db := store.NewMemory()
	secret := []byte(strings.Repeat("k", 32))
	req := func(method, params string) *Request {
		return &Request{Method: method, Session: "A", Principal: "alice", Params: json.RawMessage(params)}
	}
	first, err := New(Options{Upstreams: upstreamtest.NewManager(f.server("s")), Tasks: db, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range []string{"kept", "forgotten"} {
		body, err := call(t, first, req("tools/call", `{"name":"mcp__s__job","arguments":{"value":"`+v+`"},"task":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := taskOf(t, body)
		ids = append(ids, id)
	}
	first.Close()
	f.mu.Lock()
	delete(f.tasks, "up-2")
	f.mu.Unlock()

	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{Tasks: db, Secret: secret})
	for _, want := range []string{"working", "completed"} {
		body, err := call(t, s, req("tasks/get", `{"taskId":"`+ids[0]+`"}`))
		if _, st := taskOf(t, body); err != nil || st != want {
			t.Fatalf("tasks/get after the restart = %s, %v; want %s", body, err, want)
		}
	}
	body, err := call(t, s, req("tasks/result", `{"taskId":"`+ids[0]+`"}`))
	if err != nil || !strings.Contains(string(body), "done:kept") {
		t.Errorf("tasks/result after the restart = %s, %v", body, err)
	}
	body, err = call(t, s, req("tasks/get", `{"taskId":"`+ids[1]+`"}`))
	if err != nil || !strings.Contains(string(body), `"status":"failed"`) || !strings.Contains(string(body), "no longer knows this task") {
		t.Errorf("tasks/get of a task the server forgot = %s, %v; want failed saying so", body, err)
	}
}

// TestKeptAtMost: whatever lifetime a server claims for its task, or
// none, the gateway keeps the record at most max_ttl after its creation.
func TestKeptAtMost(t *testing.T) {
	created := time.Now().UTC().Truncate(time.Millisecond)
	dur := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		name    string
		ttl     *time.Duration
		expires time.Time
		wantTTL *time.Duration
		want    time.Time
	}{
		{"no lifetime", nil, time.Time{}, nil, created.Add(time.Hour)},
		{"a longer ttl", dur(1000 * time.Hour), time.Time{}, dur(time.Hour), created.Add(time.Hour)},
		{"a shorter ttl", dur(time.Minute), time.Time{}, dur(time.Minute), created.Add(time.Minute)},
		{"a later expiry", dur(time.Minute), created.Add(48 * time.Hour), dur(time.Minute), created.Add(time.Hour)},
		{"an earlier expiry", nil, created.Add(time.Second), nil, created.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := keptAtMost{store.NewMemory(), time.Hour}
			err := k.PutTask(context.Background(), store.Task{ID: "t", Owner: "o", Status: taskWorking, CreatedAt: created, UpdatedAt: created, TTL: tc.ttl, ExpiresAt: tc.expires})
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.GetTask(context.Background(), "t")
			if err != nil {
				t.Fatal(err)
			}
			if !got.ExpiresAt.Equal(tc.want) || !cmp.Equal(got.TTL, tc.wantTTL) {
				t.Errorf("kept ttl %v until %v, want ttl %v until %v", got.TTL, got.ExpiresAt, tc.wantTTL, tc.want)
			}
		})
	}
}

// TestRecoverTasks_Replicas: a replica that starts fails only its own
// unfinished hosted tasks (its calls died with it), never those another
// replica of the cluster runs over the same store.
func TestRecoverTasks_Replicas(t *testing.T) {
	shared := store.NewMemory()
	secret := []byte(strings.Repeat("s", 32))
	m := func() *upstreamtest.Manager { return upstreamtest.NewManager(&upstreamtest.Server{Name: "up"}) }
	r1 := newCore(t, m(), Options{Tasks: shared, Secret: secret, Replica: "r1"})
	now := time.Now()
	rec := store.Task{ID: r1.newExtTaskID("alice"), Owner: "alice", Server: "up", Hosted: true, Transport: "http", Tool: "slow",
		Status: taskWorking, CreatedAt: now, UpdatedAt: now}
	if err := shared.PutTask(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		got, err := shared.GetTask(context.Background(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	newCore(t, m(), Options{Tasks: shared, Secret: secret, Replica: "r2"})
	if got := status(); got != taskWorking {
		t.Errorf("r1's task after r2 started: %s, want still working", got)
	}
	newCore(t, m(), Options{Tasks: shared, Secret: secret, Replica: "r1"})
	if got := status(); got != taskFailed {
		t.Errorf("r1's task after r1 started again: %s, want failed", got)
	}
}

func TestStorable(t *testing.T) {
	for in, want := range map[string]string{
		"working on it": "working on it",
		"a\x00b":        "a\uFFFDb",
		"bad \xff byte": "bad \uFFFD byte",
		"":              "",
	} {
		if got := storable(in); got != want {
			t.Errorf("storable(%q) = %q, want %q", in, got, want)
		}
	}
}
