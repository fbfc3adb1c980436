package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// extFake is a server with no task support of its own, whose calls the
// gateway hosts as tasks of the 2026-07-28 extension.
type extFake struct {
	release chan struct{} // closed: "wait" returns
	mu      sync.Mutex
	seen    []string // each call's arguments.value, in order
	cancels int      // calls of "wait" that ended by cancellation
}

func newExtFake() *extFake { return &extFake{release: make(chan struct{})} }

func (f *extFake) server(name string) *upstreamtest.Server {
	return &upstreamtest.Server{Name: name, Capabilities: json.RawMessage(`{"tools":{}}`), Transport: "http",
		Tools: raws(
			`{"name":"echo","inputSchema":{"type":"object"}}`,
			`{"name":"wait","inputSchema":{"type":"object"}}`,
			`{"name":"oops","inputSchema":{"type":"object"}}`,
			`{"name":"broken","inputSchema":{"type":"object"}}`,
			`{"name":"ask","inputSchema":{"type":"object"}}`,
			`{"name":"mrtr","inputSchema":{"type":"object"}}`,
			`{"name":"two","inputSchema":{"type":"object"}}`,
		),
		Handle: f.handle}
}

func (f *extFake) handle(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
	if method != "tools/call" {
		return json.RawMessage(`{}`), nil
	}
	name, _ := rawjson.String(params, "name")
	args, _, _ := rawjson.Get(params, "arguments")
	value, _ := rawjson.String(args, "value")
	f.mu.Lock()
	f.seen = append(f.seen, value)
	f.mu.Unlock()
	text := func(s string) json.RawMessage {
		return mustJSON(map[string]any{"content": []map[string]string{{"type": "text", "text": s}}})
	}
	switch name {
	case "echo":
		return text("echo:" + value), nil
	case "wait":
		select {
		case <-f.release:
			return text("waited:" + value), nil
		case <-ctx.Done():
			f.mu.Lock()
			f.cancels++
			f.mu.Unlock()
			return nil, ctx.Err()
		}
	case "oops":
		return json.RawMessage(`{"content":[{"type":"text","text":"it went wrong"}],"isError":true}`), nil
	case "broken":
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "boom")
	case "ask":
		m := &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(`{"mode":"form","message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`)}
		res, err := hooks.Request(ctx, m)
		if err != nil {
			return nil, err
		}
		return text("answer:" + string(res)), nil
	case "two":
		if resp, ok, _ := rawjson.Get(params, "inputResponses"); ok {
			return text("two:" + string(resp)), nil
		}
		return json.RawMessage(`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"form","message":"a?","requestedSchema":{"type":"object"}}},"b":{"method":"elicitation/create","params":{"mode":"form","message":"b?","requestedSchema":{"type":"object"}}}}}`), nil
	case "mrtr":
		if resp, ok, _ := rawjson.Get(params, "inputResponses"); ok {
			st, _ := rawjson.String(params, "requestState")
			return text("mrtr:" + st + ":" + string(resp)), nil
		}
		return json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"mode":"form","message":"who?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}},"requestState":"round-1"}`), nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no tool %q", name)
}

const extCaps = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// modernReq is a 2026-07-28 request of principal with capabilities caps.
func modernReq(principal, caps, method, params string) *Request {
	return &Request{Method: method, Principal: principal, Params: json.RawMessage(params),
		Client: Client{ProtocolVersion: "2026-07-28", Capabilities: json.RawMessage(caps)}}
}

// extCall runs a modern request and returns its result.
func extCall(t *testing.T, s *Server, req *Request) *Result {
	t.Helper()
	res, err := s.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", req.Method, err)
	}
	return res
}

// extDone returns a channel closed once the hosted task id has stopped
// running and its end is recorded; nil if it already has.
func extDone(s *Server, id string) <-chan struct{} {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	if lt := s.tasks.live[id]; lt != nil {
		return lt.done
	}
	return nil
}

// extSettled waits for done, from extDone.
func extSettled(t *testing.T, done <-chan struct{}) {
	t.Helper()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the task still runs")
	}
}

// extPending waits until the hosted task id has n input requests pending.
func extPending(t *testing.T, s *Server, id string, n int) {
	t.Helper()
	s.tasks.mu.Lock()
	lt := s.tasks.live[id]
	s.tasks.mu.Unlock()
	if lt == nil || lt.ext == nil {
		t.Fatalf("task %s is not a live hosted task", id)
	}
	deadline := time.After(10 * time.Second)
	for {
		got := lt.ext.box.len()
		if got == n {
			return
		}
		select {
		case <-lt.ext.box.changed:
		case <-deadline:
			t.Fatalf("task %s has %d input requests pending, want %d", id, got, n)
		}
	}
}

func extGet(t *testing.T, s *Server, principal, id string) map[string]json.RawMessage {
	t.Helper()
	res := extCall(t, s, modernReq(principal, extCaps, "tasks/get", `{"taskId":"`+id+`"}`))
	var got map[string]json.RawMessage
	if err := json.Unmarshal(res.Body, &got); err != nil {
		t.Fatalf("tasks/get = %s: %v", res.Body, err)
	}
	return got
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// TestTaskExt_Hosted: a 2026-07-28 client that declared the tasks
// extension gets a task for a call still running after promote_after, and
// tasks/get inlines its end: a result (isError too) as completed, a
// JSON-RPC error as failed.
func TestTaskExt_Hosted(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{
		TaskConfig: config.Tasks{Host: new(true), PollInterval: config.Duration(250 * time.Millisecond)}})
	for _, tc := range []struct {
		name, tool, status string
		check              func(t *testing.T, got map[string]json.RawMessage)
	}{
		{"result", "echo", "completed", func(t *testing.T, got map[string]json.RawMessage) {
			if !strings.Contains(string(got["result"]), "echo:v") || strings.Contains(string(got["result"]), "related-task") {
				t.Errorf("result = %s, want the call's, without related-task _meta", got["result"])
			}
			if _, ok := got["error"]; ok {
				t.Errorf("a completed task carries error: %v", got)
			}
		}},
		{"isError", "oops", "completed", func(t *testing.T, got map[string]json.RawMessage) {
			if !strings.Contains(string(got["result"]), `"isError":true`) {
				t.Errorf("result = %s, want the isError result", got["result"])
			}
		}},
		{"error", "broken", "failed", func(t *testing.T, got map[string]json.RawMessage) {
			var e jsonrpc.Error
			if err := json.Unmarshal(got["error"], &e); err != nil || e.Code != jsonrpc.CodeInternalError || e.Message != "boom" {
				t.Errorf("error = %s, want the server's -32603", got["error"])
			}
			if _, ok := got["result"]; ok {
				t.Errorf("a failed task carries result: %v", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.opts.TaskConfig.PromoteAfter = 0
			res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__`+tc.tool+`","arguments":{"value":"v"}}`))
			var created map[string]json.RawMessage
			if err := json.Unmarshal(res.Body, &created); err != nil {
				t.Fatal(err)
			}
			id := str(created["taskId"])
			done := extDone(s, id)
			if res.Type != ResultTask || id == "" || str(created["status"]) != "working" {
				t.Fatalf("tools/call = %s %s, want a working task", res.Type, res.Body)
			}
			for _, k := range []string{"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
				if _, ok := created[k]; !ok {
					t.Errorf("CreateTaskResult has no %s: %s", k, res.Body)
				}
			}
			for _, k := range []string{"task", "ttl", "pollInterval", "result", "error", "inputRequests"} {
				if _, ok := created[k]; ok {
					t.Errorf("CreateTaskResult has %s: %s", k, res.Body)
				}
			}
			if string(created["pollIntervalMs"]) != "250" || string(created["ttlMs"]) != "3600000" {
				t.Errorf("ttlMs, pollIntervalMs = %s, %s; want 3600000, 250", created["ttlMs"], created["pollIntervalMs"])
			}
			extSettled(t, done)
			got := extGet(t, s, "alice", id)
			if str(got["taskId"]) != id || str(got["status"]) != tc.status {
				t.Fatalf("tasks/get = %v, want %s", got, tc.status)
			}
			tc.check(t, got)
		})
	}

	t.Run("fast call is answered", func(t *testing.T) {
		s.opts.TaskConfig.PromoteAfter = config.Duration(time.Hour)
		res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"quick"}}`))
		if res.Type != ResultComplete || !strings.Contains(string(res.Body), "echo:quick") {
			t.Errorf("tools/call = %s %s, want the plain result", res.Type, res.Body)
		}
	})
	t.Run("no extension declared", func(t *testing.T) {
		s.opts.TaskConfig.PromoteAfter = 0
		res := extCall(t, s, modernReq("alice", `{}`, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"sync"}}`))
		if res.Type != ResultComplete || !strings.Contains(string(res.Body), "echo:sync") {
			t.Errorf("tools/call = %s %s, want the plain result", res.Type, res.Body)
		}
	})
	t.Run("server does not host", func(t *testing.T) {
		s.opts.TaskConfig.PromoteAfter = 0
		s.opts.TaskConfig.Host = new(false)
		defer func() { s.opts.TaskConfig.Host = new(true) }()
		res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"own"}}`))
		if res.Type != ResultComplete {
			t.Errorf("tools/call = %s %s, want the plain result", res.Type, res.Body)
		}
	})
}

// TestTaskExt_Refusals: a task id works only for its principal and its
// era; the methods need the extension declared; tasks/result and
// tasks/list are not in the extension; tasks/update's input is checked.
func TestTaskExt_Refusals(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	s.opts.TaskConfig.PromoteAfter = 0
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"v"}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	extSettled(t, extDone(s, id))
	anon := extCall(t, s, modernReq(Anonymous, extCaps, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"v"}}`))
	anonID, _ := rawjson.String(anon.Body, "taskId")
	extSettled(t, extDone(s, anonID))

	for _, tc := range []struct {
		name string
		req  *Request
		code int
		msg  string
	}{
		{"another principal", modernReq("bob", extCaps, "tasks/get", `{"taskId":"`+id+`"}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"another principal cancels", modernReq("bob", extCaps, "tasks/cancel", `{"taskId":"`+id+`"}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"another principal updates", modernReq("bob", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{}}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"anonymous reads a named principal's", modernReq(Anonymous, extCaps, "tasks/get", `{"taskId":"`+id+`"}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"named principal reads anonymous's", modernReq("alice", extCaps, "tasks/get", `{"taskId":"`+anonID+`"}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"a 2025 session presents it", &Request{Method: "tasks/get", Principal: "alice", Session: "S", Params: json.RawMessage(`{"taskId":"` + id + `"}`)}, jsonrpc.CodeInvalidParams, "unknown task"},
		{"forged", modernReq("alice", extCaps, "tasks/get", `{"taskId":"tasks-conformance-nonexistent-12345"}`), jsonrpc.CodeInvalidParams, "unknown task"},
		{"no taskId", modernReq("alice", extCaps, "tasks/get", `{}`), jsonrpc.CodeInvalidParams, "params.taskId"},
		{"get without the extension", modernReq("alice", `{}`, "tasks/get", `{"taskId":"`+id+`"}`), codeMissingCapability, "io.modelcontextprotocol/tasks"},
		{"update without the extension", modernReq("alice", `{}`, "tasks/update", `{"taskId":"`+id+`","inputResponses":{}}`), codeMissingCapability, "io.modelcontextprotocol/tasks"},
		{"cancel without the extension", modernReq("alice", `{}`, "tasks/cancel", `{"taskId":"`+id+`"}`), codeMissingCapability, "io.modelcontextprotocol/tasks"},
		{"tasks/result", modernReq("alice", extCaps, "tasks/result", `{"taskId":"`+id+`"}`), jsonrpc.CodeMethodNotFound, "tasks/get inlines"},
		{"tasks/list", modernReq("alice", extCaps, "tasks/list", `{}`), jsonrpc.CodeMethodNotFound, "tasks/list"},
		{"update without inputResponses", modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`"}`), jsonrpc.CodeInvalidParams, "params.inputResponses"},
		{"update with an array", modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":[]}`), jsonrpc.CodeInvalidParams, "inputResponses must be an object"},
		{"update with a null", modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":null}`), jsonrpc.CodeInvalidParams, "inputResponses must be an object"},
		{"update with a number answer", modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"k":12345}}`), jsonrpc.CodeInvalidParams, `inputResponses["k"] must be the input request's result`},
		{"tasks/update in 2025", &Request{Method: "tasks/update", Principal: "alice", Session: "S", Params: json.RawMessage(`{"taskId":"x"}`)}, jsonrpc.CodeMethodNotFound, "tasks/update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Handle(context.Background(), tc.req)
			jerr := assertCode(t, err, tc.code, tc.msg)
			if strings.Contains(jerr.Message, "12345") {
				t.Errorf("the error repeats the client's input: %q", jerr.Message)
			}
			if tc.code == codeMissingCapability && !strings.Contains(string(jerr.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
				t.Errorf("-32021 data = %s, want requiredCapabilities", jerr.Data)
			}
		})
	}
	// The owners see their own.
	if got := extGet(t, s, "alice", id); str(got["status"]) != "completed" {
		t.Errorf("alice's task = %v", got)
	}
	if got := extGet(t, s, Anonymous, anonID); str(got["status"]) != "completed" {
		t.Errorf("the anonymous principal's task = %v", got)
	}
}

// TestTaskExt_Input: a server's request during a hosted call makes the
// call a task at once, input_required with the request in inputRequests;
// tasks/update answers it, partly or wholly; unknown keys are ignored.
func TestTaskExt_Input(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	s.opts.TaskConfig.PromoteAfter = config.Duration(time.Hour)

	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__ask","arguments":{}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	done := extDone(s, id)
	if res.Type != ResultTask {
		t.Fatalf("tools/call = %s %s, want a task as soon as the server asked", res.Type, res.Body)
	}
	got := extGet(t, s, "alice", id)
	if str(got["status"]) != "input_required" {
		t.Fatalf("tasks/get = %v, want input_required", got)
	}
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(got["inputRequests"], &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("inputRequests = %s", got["inputRequests"])
	}
	var key string
	for k, r := range reqs {
		key = k
		if r.Method != "elicitation/create" || !strings.Contains(string(r.Params), `"message":"name?"`) {
			t.Errorf("inputRequests[%q] = %+v", k, r)
		}
	}
	// An unknown key is ignored; the answer resumes the call.
	ack := extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"nope":{"action":"decline"}}}`))
	if string(ack.Body) != `{}` || ack.Type != ResultComplete {
		t.Errorf("tasks/update = %s %s, want an empty ack", ack.Type, ack.Body)
	}
	if got := extGet(t, s, "alice", id); str(got["status"]) != "input_required" {
		t.Errorf("after an unknown key: %v", got)
	}
	extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Ada"}}}}`))
	extSettled(t, done)
	got = extGet(t, s, "alice", id)
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), `Ada`) {
		t.Errorf("tasks/get = %v, want the answer in the result", got)
	}
	if _, ok := got["inputRequests"]; ok {
		t.Errorf("a finished task lists input requests: %v", got)
	}

	// Without elicitation declared, the gateway answers for the client:
	// the task never waits.
	res = extCall(t, s, modernReq("alice", `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, "tools/call", `{"name":"mcp__s__ask","arguments":{}}`))
	if res.Type != ResultComplete || !strings.Contains(string(res.Body), `cancel`) {
		t.Errorf("tools/call without elicitation = %s %s, want the gateway's cancel", res.Type, res.Body)
	}
}

// TestTaskExt_ModernUpstreamInput: a 2026-07-28 server's input_required
// before the call became a task reaches the client as it is (its state
// sealed); after, it becomes the task's inputRequests, and the answer
// reaches the server with its own state.
func TestTaskExt_ModernUpstreamInput(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})

	s.opts.TaskConfig.PromoteAfter = config.Duration(time.Hour)
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__mrtr","arguments":{}}`))
	if res.Type != ResultInputRequired || strings.Contains(string(res.Body), "round-1") || strings.Contains(string(res.Body), "taskId") {
		t.Fatalf("tools/call = %s %s, want input_required with the state sealed", res.Type, res.Body)
	}

	s.opts.TaskConfig.PromoteAfter = 0
	res = extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__mrtr","arguments":{}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	done := extDone(s, id)
	if res.Type != ResultTask {
		t.Fatalf("tools/call = %s %s, want a task", res.Type, res.Body)
	}
	extPending(t, s, id, 1)
	got := extGet(t, s, "alice", id)
	var reqs map[string]json.RawMessage
	if err := json.Unmarshal(got["inputRequests"], &reqs); err != nil || len(reqs) != 1 || str(got["status"]) != "input_required" {
		t.Fatalf("tasks/get = %v", got)
	}
	for k := range reqs {
		extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"`+k+`":{"action":"accept","content":{"name":"Alice"}}}}`))
	}
	extSettled(t, done)
	got = extGet(t, s, "alice", id)
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), `mrtr:round-1:{\"q\":{\"action\":\"accept\",\"content\":{\"name\":\"Alice\"}}}`) {
		t.Errorf("tasks/get = %v, want the server's own key and state", got)
	}
}

// TestTaskExt_ParallelInput: the input requests of one round of a
// 2026-07-28 server wait at once; a partial tasks/update leaves the rest
// pending, and the round ends when all are answered.
func TestTaskExt_ParallelInput(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	s.opts.TaskConfig.PromoteAfter = 0
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__two","arguments":{}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	done := extDone(s, id)
	extPending(t, s, id, 2)
	got := extGet(t, s, "alice", id)
	var reqs map[string]struct {
		Params struct{ Message string }
	}
	if err := json.Unmarshal(got["inputRequests"], &reqs); err != nil || len(reqs) != 2 {
		t.Fatalf("inputRequests = %s, want both of the round", got["inputRequests"])
	}
	keyOf := map[string]string{}
	for k, r := range reqs {
		keyOf[r.Params.Message] = k
	}
	extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"`+keyOf["b?"]+`":{"action":"accept","content":{"v":"B"}}}}`))
	extPending(t, s, id, 1)
	got = extGet(t, s, "alice", id)
	if str(got["status"]) != "input_required" || !strings.Contains(string(got["inputRequests"]), `"a?"`) || strings.Contains(string(got["inputRequests"]), `"b?"`) {
		t.Fatalf("after a partial update: %v", got)
	}
	extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"`+keyOf["a?"]+`":{"action":"accept","content":{"v":"A"}}}}`))
	extSettled(t, done)
	got = extGet(t, s, "alice", id)
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), `\"a\":{\"action\":\"accept\",\"content\":{\"v\":\"A\"}}`) || !strings.Contains(string(got["result"]), `\"b\":{\"action\":\"accept\",\"content\":{\"v\":\"B\"}}`) {
		t.Errorf("tasks/get = %v, want both answers under the server's keys", got)
	}
}

// TestTaskExt_Cancel: tasks/cancel ends the call upstream and answers an
// empty ack, on a running task and a finished one alike.
func TestTaskExt_Cancel(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{TaskConfig: config.Tasks{MaxHostedPerPrincipal: 1}})
	s.opts.TaskConfig.PromoteAfter = 0
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__wait","arguments":{"value":"long"}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	done := extDone(s, id)
	if res.Type != ResultTask {
		t.Fatalf("tools/call = %s %s", res.Type, res.Body)
	}
	// At the cap, the next call runs without a task.
	capped := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__echo","arguments":{"value":"capped"}}`))
	if capped.Type != ResultComplete || !strings.Contains(string(capped.Body), "echo:capped") {
		t.Errorf("a call over the cap = %s %s, want its plain result", capped.Type, capped.Body)
	}
	for range 2 {
		ack := extCall(t, s, modernReq("alice", extCaps, "tasks/cancel", `{"taskId":"`+id+`"}`))
		if string(ack.Body) != `{}` {
			t.Errorf("tasks/cancel = %s, want an empty ack", ack.Body)
		}
	}
	extSettled(t, done)
	if got := extGet(t, s, "alice", id); str(got["status"]) != "cancelled" {
		t.Errorf("tasks/get after cancel = %v", got)
	}
	close(f.release)
}

// TestTaskExt_CancelStopsCall: a cancelled task's call ends upstream.
func TestTaskExt_CancelStopsCall(t *testing.T) {
	f := newExtFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	s.opts.TaskConfig.PromoteAfter = 0
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__wait","arguments":{"value":"long"}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	done := extDone(s, id)
	extCall(t, s, modernReq("alice", extCaps, "tasks/cancel", `{"taskId":"`+id+`"}`))
	extSettled(t, done)
	if got := extGet(t, s, "alice", id); str(got["status"]) != "cancelled" {
		t.Errorf("tasks/get = %v, want cancelled", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff(1, f.cancels); diff != "" {
		t.Errorf("calls cancelled upstream (-want +got):\n%s", diff)
	}
}

// FuzzCheckInputResponses: whatever a client sends as tasks/update's
// params, checkInputResponses never panics, and what it admits is an
// object of objects.
func FuzzCheckInputResponses(f *testing.F) {
	f.Add(`{"taskId":"t","inputResponses":{"a":{"action":"accept","content":{"x":1}}}}`)
	f.Add(`{"taskId":"t","inputResponses":{}}`)
	f.Add(`{"taskId":"t","inputResponses":{"a":12345}}`)
	f.Add(`{"taskId":"t","inputResponses":null}`)
	f.Add(`{"inputResponses":{"\u00e9":{},"b":[]}}`)
	f.Fuzz(func(t *testing.T, params string) {
		got, err := checkInputResponses(json.RawMessage(params))
		if err != nil {
			assertCode(t, err, jsonrpc.CodeInvalidParams, "inputResponses")
			return
		}
		if got == nil || !json.Valid([]byte(params)) {
			return
		}
		var obj map[string]map[string]json.RawMessage
		if err := json.Unmarshal(got, &obj); err != nil {
			t.Fatalf("admitted inputResponses %s: %v", got, err)
		}
	})
}

// extUpstreamFake is a 2026-07-28 server that offers the tasks extension.
type extUpstreamFake struct {
	mu     sync.Mutex
	status map[string]string // by its task id
	seen   []string          // method and params of each request
	tasks  []bool            // TakesTasks of each tools/call
	next   int
}

func (f *extUpstreamFake) server(name string) *upstreamtest.Server {
	return &upstreamtest.Server{Name: name, Era: upstream.EraModern, Transport: "http",
		Capabilities: json.RawMessage(`{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`),
		Tools:        raws(`{"name":"job","inputSchema":{"type":"object"}}`),
		Handle:       f.handle}
}

func (f *extUpstreamFake) handle(_ context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, method+" "+string(params))
	id, _ := rawjson.String(params, "taskId")
	task := func(id string) json.RawMessage {
		out := `{"taskId":"` + id + `","status":"` + f.status[id] + `","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":50`
		switch f.status[id] {
		case "completed":
			out += `,"result":{"content":[{"type":"text","text":"done ` + id + `"}]}`
		case "input_required":
			out += `,"inputRequests":{"q":{"method":"elicitation/create","params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object"}}}}`
		}
		return json.RawMessage(out + "}")
	}
	switch method {
	case "tools/call":
		f.tasks = append(f.tasks, hooks.TakesTasks)
		if !hooks.TakesTasks {
			return json.RawMessage(`{"content":[{"type":"text","text":"sync"}]}`), nil
		}
		f.next++
		id := fmt.Sprintf("up-%d", f.next)
		f.status[id] = "working"
		t, _ := rawjson.Set(task(id), "resultType", json.RawMessage(`"task"`))
		return t, nil
	case "tasks/get", "tasks/update", "tasks/cancel":
		if _, ok := f.status[id]; !ok || !hooks.TakesTasks {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no task %q", id)
		}
		switch method {
		case "tasks/get":
			return task(id), nil
		case "tasks/update":
			f.status[id] = "completed"
		case "tasks/cancel":
			f.status[id] = "cancelled"
		}
		return json.RawMessage(`{}`), nil
	}
	return json.RawMessage(`{}`), nil
}

func (f *extUpstreamFake) set(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if status == "" {
		delete(f.status, id)
		return
	}
	f.status[id] = status
}

func (f *extUpstreamFake) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// TestTaskExt_Relay: a server that offers the tasks extension gets it
// declared only for a client that did; its task reaches the client under
// a sealed id of ours, and tasks/get, tasks/update and tasks/cancel reach
// it under its own, the result rewritten as a call's and kept.
func TestTaskExt_Relay(t *testing.T) {
	f := &extUpstreamFake{status: map[string]string{}}
	s := newCore(t, upstreamtest.NewManager(f.server("m")), Options{})

	plain := extCall(t, s, modernReq("alice", `{}`, "tools/call", `{"name":"mcp__m__job","arguments":{}}`))
	if plain.Type != ResultComplete || !strings.Contains(string(plain.Body), "sync") {
		t.Fatalf("tools/call without the extension = %s %s", plain.Type, plain.Body)
	}
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__m__job","arguments":{}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	if res.Type != ResultTask || id == "" || strings.Contains(string(res.Body), "up-1") || !strings.Contains(string(res.Body), `"ttlMs":60000`) {
		t.Fatalf("tools/call = %s %s, want the server's task under our id", res.Type, res.Body)
	}
	if got := extGet(t, s, "alice", id); str(got["status"]) != "working" || str(got["taskId"]) != id {
		t.Errorf("tasks/get = %v", got)
	}
	f.set("up-1", "input_required")
	if got := extGet(t, s, "alice", id); str(got["status"]) != "input_required" || !strings.Contains(string(got["inputRequests"]), `"q"`) {
		t.Errorf("tasks/get = %v, want the server's inputRequests", got)
	}
	ack := extCall(t, s, modernReq("alice", extCaps, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"q":{"action":"accept","content":{}}}}`))
	if string(ack.Body) != `{}` {
		t.Errorf("tasks/update = %s", ack.Body)
	}
	got := extGet(t, s, "alice", id)
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "done up-1") {
		t.Errorf("tasks/get = %v, want the result", got)
	}
	// Kept: the server may forget it now.
	f.set("up-1", "")
	if got := extGet(t, s, "alice", id); str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "done up-1") {
		t.Errorf("tasks/get after the server forgot = %v", got)
	}
	if _, err := s.Handle(context.Background(), modernReq("bob", extCaps, "tasks/get", `{"taskId":"`+id+`"}`)); err == nil {
		t.Error("another principal read the task")
	}

	// A second task: cancelled, then forgotten by the server.
	res = extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__m__job","arguments":{}}`))
	id2, _ := rawjson.String(res.Body, "taskId")
	extCall(t, s, modernReq("alice", extCaps, "tasks/cancel", `{"taskId":"`+id2+`"}`))
	if got := extGet(t, s, "alice", id2); str(got["status"]) != "cancelled" {
		t.Errorf("tasks/get after cancel = %v", got)
	}
	res = extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__m__job","arguments":{}}`))
	id3, _ := rawjson.String(res.Body, "taskId")
	f.set("up-3", "")
	if got := extGet(t, s, "alice", id3); str(got["status"]) != "failed" || !strings.Contains(string(got["error"]), "no longer knows") {
		t.Errorf("tasks/get of a forgotten task = %v", got)
	}

	want := []string{
		`tools/call {"name":"job","arguments":{}}`,
		`tools/call {"name":"job","arguments":{}}`,
		`tasks/get {"taskId":"up-1"}`,
		`tasks/get {"taskId":"up-1"}`,
		`tasks/update {"inputResponses":{"q":{"action":"accept","content":{}}},"taskId":"up-1"}`,
		`tasks/get {"taskId":"up-1"}`,
		`tools/call {"name":"job","arguments":{}}`,
		`tasks/cancel {"taskId":"up-2"}`,
		`tasks/get {"taskId":"up-2"}`,
		`tools/call {"name":"job","arguments":{}}`,
		`tasks/get {"taskId":"up-3"}`,
	}
	if diff := cmp.Diff(want, f.log()); diff != "" {
		t.Errorf("the server saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{false, true, true, true}, f.tasks); diff != "" {
		t.Errorf("TakesTasks of the calls (-want +got):\n%s", diff)
	}
}

// TestTaskExt_Bridge: a 2026-07-28 client's task on a 2025-11-25 server
// whose tool runs as a task there: the server gets the 2025 task param,
// the client a flat task under our id; tasks/get reaches the server's
// tasks/get, and its tasks/result once the task is over, inlined and
// kept; tasks/cancel reaches its tasks/cancel and answers an empty ack.
func TestTaskExt_Bridge(t *testing.T) {
	f := newTaskFake()
	s := newCore(t, upstreamtest.NewManager(f.server("s")), Options{})
	res := extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__job","arguments":{"value":"v1"}}`))
	id, _ := rawjson.String(res.Body, "taskId")
	if res.Type != ResultTask || id == "" || strings.Contains(string(res.Body), "up-1") || !strings.Contains(string(res.Body), `"ttlMs":60000`) || strings.Contains(string(res.Body), `"task"`) {
		t.Fatalf("tools/call = %s %s, want a flat task under our id", res.Type, res.Body)
	}
	if got := extGet(t, s, "alice", id); str(got["status"]) != "working" {
		t.Errorf("tasks/get = %v", got)
	}
	got := extGet(t, s, "alice", id)
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "done:v1") || strings.Contains(string(got["result"]), "related-task") {
		t.Errorf("tasks/get = %v, want the result inlined", got)
	}
	if got := extGet(t, s, "alice", id); str(got["status"]) != "completed" {
		t.Errorf("tasks/get from the record = %v", got)
	}
	if _, err := s.Handle(context.Background(), modernReq("bob", extCaps, "tasks/get", `{"taskId":"`+id+`"}`)); err == nil {
		t.Error("another principal read the task")
	}

	// A tool that requires a task: a task for a client that declared the
	// extension, the polled result for one that did not.
	res = extCall(t, s, modernReq("alice", extCaps, "tools/call", `{"name":"mcp__s__must","arguments":{"value":"v2"}}`))
	id2, _ := rawjson.String(res.Body, "taskId")
	if res.Type != ResultTask {
		t.Fatalf("tools/call of a required tool = %s %s", res.Type, res.Body)
	}
	ack := extCall(t, s, modernReq("alice", extCaps, "tasks/cancel", `{"taskId":"`+id2+`"}`))
	if string(ack.Body) != `{}` {
		t.Errorf("tasks/cancel = %s, want an empty ack", ack.Body)
	}
	if got := extGet(t, s, "alice", id2); str(got["status"]) != "cancelled" {
		t.Errorf("tasks/get after cancel = %v", got)
	}
	res = extCall(t, s, modernReq("alice", `{}`, "tools/call", `{"name":"mcp__s__must","arguments":{"value":"v3"}}`))
	if res.Type != ResultComplete || !strings.Contains(string(res.Body), "done:v3") {
		t.Errorf("tools/call without the extension = %s %s, want the polled result", res.Type, res.Body)
	}
	want := []string{"tools/call", "tasks/get", "tasks/get", "tasks/result", "tools/call", "tasks/cancel", "tools/call", "tasks/get", "tasks/get", "tasks/result"}
	if diff := cmp.Diff(want, f.log()); diff != "" {
		t.Errorf("the server saw (-want +got):\n%s", diff)
	}
}

// TestTaskExt_LegacyClientOnExt: a 2025-11-25 client's task-augmented call
// of a tool of a server that offers the extension: the server is told the
// extension and its task reaches the client as a CreateTaskResult under
// our id; tasks/get reaches its tasks/get; tasks/result polls it, asks the
// client its input requests tied to the task and answers them with
// tasks/update, and returns the inlined result; tasks/cancel reaches its
// tasks/cancel.
func TestTaskExt_LegacyClientOnExt(t *testing.T) {
	f := &extUpstreamFake{status: map[string]string{}}
	s := newCore(t, upstreamtest.NewManager(f.server("m")), Options{})
	var asked []string
	var askedMu sync.Mutex
	req := func(method, params string) *Request {
		return &Request{Method: method, Principal: "alice", Session: "S", Params: json.RawMessage(params),
			Client: Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{"elicitation":{}}`)},
			Input: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				askedMu.Lock()
				defer askedMu.Unlock()
				asked = append(asked, method+" "+string(params))
				return json.RawMessage(`{"action":"accept","content":{}}`), nil
			}}
	}
	body, err := call(t, s, req("tools/call", `{"name":"mcp__m__job","arguments":{},"task":{"ttl":60000}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, status := taskOf(t, body)
	if id == "" || status != "working" || strings.Contains(string(body), "up-1") || !strings.Contains(string(body), `"ttl":60000`) {
		t.Fatalf("tools/call = %s, want a CreateTaskResult under our id", body)
	}
	body, err = call(t, s, req("tasks/get", `{"taskId":"`+id+`"}`))
	if _, st := taskOf(t, body); err != nil || st != "working" || !strings.Contains(string(body), id) {
		t.Errorf("tasks/get = %s, %v", body, err)
	}
	// input_required: tasks/result asks the client, tied to the task, and
	// the server completes on tasks/update.
	f.set("up-1", "input_required")
	body, err = call(t, s, req("tasks/result", `{"taskId":"`+id+`"}`))
	if err != nil || !strings.Contains(string(body), "done up-1") {
		t.Fatalf("tasks/result = %s, %v", body, err)
	}
	if got, _ := relatedTaskID(body); got != id {
		t.Errorf("tasks/result not tied to the task: %s", body)
	}
	askedMu.Lock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create ") || !strings.Contains(asked[0], `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("the client was asked %q, want the elicitation tied to the task", asked)
	}
	askedMu.Unlock()
	body, err = call(t, s, req("tasks/get", `{"taskId":"`+id+`"}`))
	if _, st := taskOf(t, body); err != nil || st != "completed" {
		t.Errorf("tasks/get after = %s, %v", body, err)
	}

	body, err = call(t, s, req("tools/call", `{"name":"mcp__m__job","arguments":{},"task":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := taskOf(t, body)
	body, err = call(t, s, req("tasks/cancel", `{"taskId":"`+id2+`"}`))
	if _, st := taskOf(t, body); err != nil || st != "cancelled" {
		t.Errorf("tasks/cancel = %s, %v", body, err)
	}
	want := []string{
		`tools/call {"name":"job","arguments":{}}`,
		`tasks/get {"taskId":"up-1"}`,
		`tasks/get {"taskId":"up-1"}`,
		`tasks/update {"inputResponses":{"q":{"action":"accept","content":{}}},"taskId":"up-1"}`,
		`tasks/get {"taskId":"up-1"}`,
		`tools/call {"name":"job","arguments":{}}`,
		`tasks/cancel {"taskId":"up-2"}`,
	}
	if diff := cmp.Diff(want, f.log()); diff != "" {
		t.Errorf("the server saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, true}, f.tasks); diff != "" {
		t.Errorf("TakesTasks of the calls (-want +got):\n%s", diff)
	}
}
