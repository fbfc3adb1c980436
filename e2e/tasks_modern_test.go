package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildTaskExt builds, once, fixtures/taskextserver into binDir.
var buildTaskExt = sync.OnceValues(func() (string, error) {
	args := []string{"build", "-o", binDir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./fixtures/taskextserver")...).CombinedOutput()
	return string(out), err
})

// startTaskExt runs fixtures/taskextserver with args and returns its URL.
func startTaskExt(t *testing.T, name string, args ...string) (string, *process) {
	t.Helper()
	if out, err := buildTaskExt(); err != nil {
		t.Fatalf("building taskextserver: %v\n%s", err, out)
	}
	p := start(t, baseEnv(), "taskextserver", append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	url := p.waitLine(t, name+"'s listening line", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	return url, p
}

// extClient is a raw 2026-07-28 client with a key: the go-sdk has no
// tasks extension.
type extClient struct {
	t    *testing.T
	url  string
	key  string
	caps map[string]any
	next int
}

var tasksExtCaps = map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}

// post sends one request, with the routing headers a client of the
// extension sends, and returns its answer.
func (c *extClient) post(method string, params map[string]any) rpcMessage {
	c.t.Helper()
	c.next++
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": c.caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-tasks", "version": "1"},
	}
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	h.Set("MCP-Protocol-Version", modernVersion)
	h.Set("Mcp-Method", method)
	switch method {
	case "tools/call":
		h.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result":
		h.Set("Mcp-Name", fmt.Sprint(params["taskId"]))
	}
	return postRaw(c.t, c.url+"/mcp", h, string(body)).final(c.t, fmt.Sprint(c.next))
}

// result is post for a request that must succeed.
func (c *extClient) result(method string, params map[string]any) map[string]any {
	c.t.Helper()
	m := c.post(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	return m.Result
}

// await polls tasks/get at the task's pollIntervalMs, as a client of the
// extension does, until done says so.
func (c *extClient) await(id string, done func(task map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		task := c.result("tasks/get", map[string]any{"taskId": id})
		if done(task) {
			return task
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is still %v after a minute", id, task["status"])
		}
		poll, _ := task["pollIntervalMs"].(float64)
		time.Sleep(time.Duration(max(poll, 10)) * time.Millisecond)
	}
}

func terminalTask(task map[string]any) bool {
	switch task["status"] {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

func firstText(res any) string {
	r, _ := res.(map[string]any)
	content, _ := r["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	block, _ := content[0].(map[string]any)
	s, _ := block["text"].(string)
	return s
}

// TestTasksModern drives mcpgw with raw 2026-07-28 clients that declare
// the tasks extension: tasks hosted in front of a server without it
// (taskextserver) and relayed from one that offers it (taskextserver
// -tasks), polled to their results, with input by tasks/update, cancelled,
// and refused to another principal and to a client without the extension.
func TestTasksModern(t *testing.T) {
	plainURL, _ := startTaskExt(t, "plain")
	extURL, ext := startTaskExt(t, "ext", "-tasks")
	const aliceKey, bobKey = "e2e-tasks-alice-key", "e2e-tasks-bob-key"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`
auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
    - {principal: bob, key_sha256: %q}
tasks:
  promote_after: 100ms
  poll_interval: 50ms
servers:
  - {name: plain, transport: http, url: %q, protocol: modern}
  - {name: ext, transport: http, url: %q, protocol: modern}
`, hashToken(aliceKey), hashToken(bobKey), plainURL, extURL))
	g.waitState(t, "plain", "running")
	g.waitState(t, "ext", "running")
	alice := &extClient{t: t, url: g.URL, key: aliceKey, caps: tasksExtCaps}
	bob := &extClient{t: t, url: g.URL, key: bobKey, caps: tasksExtCaps}
	noExt := &extClient{t: t, url: g.URL, key: aliceKey, caps: map[string]any{"elicitation": map[string]any{}}}

	disc := alice.result("server/discover", map[string]any{})
	caps, _ := disc["capabilities"].(map[string]any)
	if exts, _ := caps["extensions"].(map[string]any); exts["io.modelcontextprotocol/tasks"] == nil || caps["tasks"] != nil {
		t.Errorf("server/discover capabilities = %v, want the tasks extension and no 2025 tasks", caps)
	}

	for _, server := range []string{"plain", "ext"} {
		t.Run(server, func(t *testing.T) {
			alice.t, bob.t, noExt.t = t, t, t
			tool := func(name string) string { return "mcp__" + server + "__" + name }

			// Polled to its result.
			created := alice.result("tools/call", map[string]any{"name": tool("slow_compute"), "arguments": map[string]any{"seconds": 1, "label": "e2e"}})
			id, _ := created["taskId"].(string)
			if created["resultType"] != "task" || id == "" || strings.HasPrefix(id, "task-") {
				t.Fatalf("tools/call = %v, want a task under the gateway's id", created)
			}
			done := alice.await(id, terminalTask)
			if done["status"] != "completed" || firstText(done["result"]) != "computed e2e in 1s" || done["resultType"] != "complete" {
				t.Errorf("tasks/get = %v, want the result inlined", done)
			}

			// Input through tasks/update.
			created = alice.result("tools/call", map[string]any{"name": tool("confirm_delete"), "arguments": map[string]any{"filename": "a.txt"}})
			id, _ = created["taskId"].(string)
			asking := alice.await(id, func(task map[string]any) bool { return task["status"] != "working" })
			reqs, _ := asking["inputRequests"].(map[string]any)
			if asking["status"] != "input_required" || len(reqs) != 1 {
				t.Fatalf("tasks/get = %v, want one input request", asking)
			}
			answers := map[string]any{}
			for k := range reqs {
				answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
			}
			if ack := alice.result("tasks/update", map[string]any{"taskId": id, "inputResponses": answers}); len(ack) != 2 || ack["resultType"] != "complete" {
				t.Errorf("tasks/update = %v, want an empty ack", ack)
			}
			if done := alice.await(id, terminalTask); done["status"] != "completed" || firstText(done["result"]) != "deleted a.txt" {
				t.Errorf("tasks/get = %v, want the confirmed delete", done)
			}

			// Cancelled.
			created = alice.result("tools/call", map[string]any{"name": tool("slow_compute"), "arguments": map[string]any{"seconds": 60, "label": "long"}})
			id, _ = created["taskId"].(string)
			// Another principal knows nothing of it.
			for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
				ans := bob.post(m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
				if ans.Error == nil || ans.Error.Code != -32602 || !strings.Contains(ans.Error.Message, "unknown task") {
					t.Errorf("bob's %s of alice's task = %+v, want -32602", m, ans)
				}
			}
			if ack := alice.result("tasks/cancel", map[string]any{"taskId": id}); len(ack) != 2 || ack["resultType"] != "complete" {
				t.Errorf("tasks/cancel = %v, want an empty ack", ack)
			}
			if done := alice.await(id, terminalTask); done["status"] != "cancelled" {
				t.Errorf("tasks/get after cancel = %v", done)
			}

			// The 2025 methods are gone; a client without the extension
			// gets no task.
			for _, m := range []string{"tasks/result", "tasks/list"} {
				if ans := alice.post(m, map[string]any{"taskId": id}); ans.Error == nil || ans.Error.Code != -32601 {
					t.Errorf("%s = %+v, want -32601", m, ans)
				}
			}
			plain := noExt.result("tools/call", map[string]any{"name": tool("slow_compute"), "arguments": map[string]any{"seconds": 0.5, "label": "sync"}})
			if plain["resultType"] != "complete" || firstText(plain) != "computed sync in 0.5s" {
				t.Errorf("tools/call without the extension = %v, want the plain result", plain)
			}
			if ans := noExt.post("tasks/get", map[string]any{"taskId": id}); ans.Error == nil || ans.Error.Code != -32021 {
				t.Errorf("tasks/get without the extension = %+v, want -32021", ans)
			}
		})
	}
	t.Run("relay under the server's own ids", func(t *testing.T) {
		alice.t, noExt.t = t, t
		// The server saw its own ids, with Mcp-Name, never ours.
		if !strings.Contains(ext.Stderr(), "req method=tasks/get tasks=true name=task-") {
			t.Errorf("the server saw no tasks/get of its own ids:\n%s", ext.Stderr())
		}
		// Its required tool, without the extension: its -32021.
		ans := noExt.post("tools/call", map[string]any{"name": "mcp__ext__failing_job", "arguments": map[string]any{}})
		if ans.Error == nil || ans.Error.Code != -32021 || !strings.Contains(string(ans.Error.Data), "io.modelcontextprotocol/tasks") {
			t.Errorf("a required tool without the extension = %+v, want -32021", ans)
		}
	})
}

// TestTasksModernOnLegacyServer: a 2026-07-28 client's task on a 2025-11-25
// server with task support of its own (fixtures/taskserver, stdio): the
// server runs the 2025 task, the client polls the extension's; the
// server's elicitation while the task is input_required reaches the client
// as the task's inputRequests, and tasks/update answers it; a tool error
// is a completed task with isError.
func TestTasksModernOnLegacyServer(t *testing.T) {
	const aliceKey = "e2e-tasks-alice-key"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`
auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
servers:
  - {name: legacy, transport: stdio, command: %q, protocol: legacy}
`, hashToken(aliceKey), bin("taskserver")))
	g.waitState(t, "legacy", "running")
	alice := &extClient{t: t, url: g.URL, key: aliceKey, caps: tasksExtCaps}

	created := alice.result("tools/call", map[string]any{"name": "mcp__legacy__compute", "arguments": map[string]any{"seconds": 1, "value": "x"}})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["task"] != nil || created["ttlMs"] == nil {
		t.Fatalf("tools/call = %v, want a flat task", created)
	}
	if done := alice.await(id, terminalTask); done["status"] != "completed" || firstText(done["result"]) != "value=x" {
		t.Errorf("tasks/get = %v, want the result inlined", done)
	}

	created = alice.result("tools/call", map[string]any{"name": "mcp__legacy__fail_task", "arguments": map[string]any{}})
	id, _ = created["taskId"].(string)
	done := alice.await(id, terminalTask)
	if r, _ := done["result"].(map[string]any); done["status"] != "completed" || r["isError"] != true {
		t.Errorf("tasks/get of a tool error = %v, want completed with isError", done)
	}

	created = alice.result("tools/call", map[string]any{"name": "mcp__legacy__ask_task", "arguments": map[string]any{"question": "name?"}})
	id, _ = created["taskId"].(string)
	asking := alice.await(id, func(task map[string]any) bool {
		reqs, _ := task["inputRequests"].(map[string]any)
		return len(reqs) > 0 || terminalTask(task)
	})
	reqs, _ := asking["inputRequests"].(map[string]any)
	if asking["status"] != "input_required" || len(reqs) != 1 {
		t.Fatalf("tasks/get = %v, want the server's elicitation", asking)
	}
	answers := map[string]any{}
	for k, r := range reqs {
		if m, _ := r.(map[string]any); m["method"] != "elicitation/create" || strings.Contains(fmt.Sprint(m["params"]), "related-task") {
			t.Errorf("inputRequests[%s] = %v", k, r)
		}
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"answer": "Ada"}}
	}
	alice.result("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
	if done := alice.await(id, terminalTask); done["status"] != "completed" || !strings.Contains(firstText(done["result"]), "Ada") {
		t.Errorf("tasks/get = %v, want the answer in the result", done)
	}

	created = alice.result("tools/call", map[string]any{"name": "mcp__legacy__compute", "arguments": map[string]any{"seconds": 60, "value": "long"}})
	id, _ = created["taskId"].(string)
	if ack := alice.result("tasks/cancel", map[string]any{"taskId": id}); len(ack) != 2 {
		t.Errorf("tasks/cancel = %v, want an empty ack", ack)
	}
	if done := alice.await(id, terminalTask); done["status"] != "cancelled" {
		t.Errorf("tasks/get after cancel = %v", done)
	}
}

// TestTasksLegacyClientOnModernServer: a 2025-11-25 client's
// task-augmented calls of tools of a 2026-07-28 server that offers the
// tasks extension (taskextserver -tasks): a CreateTaskResult under our id;
// tasks/get and tasks/result (which polls the server's tasks/get) reach
// the server's task; its input request reaches the client as
// elicitation/create tied to the task, and the answer reaches the server
// with tasks/update; tasks/cancel cancels it.
func TestTasksLegacyClientOnModernServer(t *testing.T) {
	extURL, ext := startTaskExt(t, "ext", "-tasks")
	g := startGateway(t, baseEnv(), fmt.Sprintf(`
tasks:
  host: false
servers:
  - {name: ext, transport: http, url: %q, protocol: modern}
`, extURL))
	g.waitState(t, "ext", "running")
	tc := dialTasks(t, g, nil)
	// Its tools are listed as tasks the client may ask for, though the
	// gateway hosts none.
	var list struct {
		Tools []struct {
			Name      string
			Execution struct{ TaskSupport string }
		}
	}
	json.Unmarshal(tc.call(t, "tools/list", map[string]any{}), &list)
	for _, tool := range list.Tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("tools/list: %s has taskSupport %q, want optional", tool.Name, tool.Execution.TaskSupport)
		}
	}

	taskID := func(res json.RawMessage) string {
		var r struct {
			Task struct{ TaskID, Status string }
		}
		if err := json.Unmarshal(res, &r); err != nil || r.Task.TaskID == "" || strings.HasPrefix(r.Task.TaskID, "task-") {
			t.Fatalf("tools/call = %s, want a CreateTaskResult under the gateway's id", res)
		}
		return r.Task.TaskID
	}
	id := taskID(tc.call(t, "tools/call", map[string]any{"name": "mcp__ext__slow_compute", "arguments": map[string]any{"seconds": 1, "label": "old"}, "task": map[string]any{"ttl": 60000}}))
	if got := tc.call(t, "tasks/get", map[string]any{"taskId": id}); !strings.Contains(string(got), `"status":"working"`) {
		t.Errorf("tasks/get = %s", got)
	}
	res := tc.call(t, "tasks/result", map[string]any{"taskId": id})
	if !strings.Contains(string(res), "computed old in 1s") || !strings.Contains(string(res), `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("tasks/result = %s, want the result tied to the task", res)
	}

	id = taskID(tc.call(t, "tools/call", map[string]any{"name": "mcp__ext__confirm_delete", "arguments": map[string]any{"filename": "b.txt"}, "task": map[string]any{}}))
	res = tc.call(t, "tasks/result", map[string]any{"taskId": id})
	if !strings.Contains(string(res), "b.txt") {
		t.Errorf("tasks/result = %s", res)
	}
	asked := tc.asked.all()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create|") || !strings.Contains(asked[0], `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("the client was asked %q, want one elicitation tied to the task", asked)
	}

	id = taskID(tc.call(t, "tools/call", map[string]any{"name": "mcp__ext__slow_compute", "arguments": map[string]any{"seconds": 60, "label": "long"}, "task": map[string]any{}}))
	if got := tc.call(t, "tasks/cancel", map[string]any{"taskId": id}); !strings.Contains(string(got), `"status":"cancelled"`) {
		t.Errorf("tasks/cancel = %s", got)
	}
	if e := tc.callErr(t, "tasks/result", map[string]any{"taskId": id}); !strings.Contains(e.Message, "cancelled") {
		t.Errorf("tasks/result of a cancelled task = %v", e)
	}
	log := ext.Stderr()
	for _, want := range []string{"req method=tools/call tasks=true", "req method=tasks/update tasks=true name=task-", "req method=tasks/cancel tasks=true name=task-"} {
		if !strings.Contains(log, want) {
			t.Errorf("the server saw no %q:\n%s", want, log)
		}
	}
}
