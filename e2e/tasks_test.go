package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/rawclient"
)

// The task tests run the gateway in front of the task server
// (e2e/fixtures/taskserver, over stdio and HTTP: task support of its own),
// the demo server (none: the gateway hosts its tasks) and npm's
// server-everything, and drive it with rawclient, since the Go SDK has no
// tasks. They cover the three paths of a task through the gateway:
//
//	relay         tools/call+task, tasks/get|result|cancel|list, status
//	              notifications, elicitation while input_required
//	block & poll  tools/call without task of a tool that requires one
//	hosted        tools/call+task of a tool whose server has no tasks
//
// and who may see a task, what survives a restart, and what tools/list
// says. The task server writes "req method=<m>[ taskId=<id>]" on stderr for
// every request it gets, and "task created id=<id> tool=<name>" and "task
// cancelled id=<id>"; the COST lines count its requests per task on each
// path.

// taskUpstream is one server behind a task test gateway.
type taskUpstream struct {
	name string
	// kind is "stdio" or "http" for the task server over that transport,
	// "demo" for the demo server over stdio, "everything" for npm's
	// server-everything over stdio.
	kind  string
	extra string // YAML added to the entry, each line indented by four spaces
}

// taskTransports are the two transports of the task server.
var taskTransports = []string{"stdio", "http"}

// taskServersYAML starts the HTTP task servers of ups and returns the
// servers: section for them and the HTTP servers' processes by name.
func taskServersYAML(t *testing.T, ups []taskUpstream) (string, map[string]*process) {
	t.Helper()
	procs := map[string]*process{}
	var b strings.Builder
	b.WriteString("servers:\n")
	for _, u := range ups {
		switch u.kind {
		case "http":
			p := start(t, baseEnv(), "taskserver", "-http", "127.0.0.1:0", "-name", u.name)
			url := p.waitLine(t, "the task server's address", func(l string) string {
				if u, ok := strings.CutPrefix(l, "listening on "); ok {
					return strings.TrimSpace(u)
				}
				return ""
			})
			procs[u.name] = p
			fmt.Fprintf(&b, "  - name: %s\n    transport: http\n    url: %s\n", u.name, url)
		case "stdio":
			fmt.Fprintf(&b, "  - name: %s\n    transport: stdio\n    command: %s\n    args: [\"-name\", %q]\n", u.name, bin("taskserver"), u.name)
		case "demo":
			fmt.Fprintf(&b, "  - name: %s\n    transport: stdio\n    command: %s\n    args: [\"-name\", %q]\n", u.name, bin("demo-server"), u.name)
		case "everything":
			node, script := serverEverything(t)
			fmt.Fprintf(&b, "  - name: %s\n    transport: stdio\n    command: %s\n    args: [%q, \"stdio\"]\n", u.name, node, script)
		default:
			t.Fatalf("unknown upstream kind %q", u.kind)
		}
		b.WriteString(u.extra)
	}
	return b.String(), procs
}

// startTaskGateway starts the upstreams and a gateway with global (YAML of
// gateway settings) in front of them, and waits until every server runs.
func startTaskGateway(t *testing.T, global string, ups ...taskUpstream) *relayGateway {
	t.Helper()
	servers, procs := taskServersYAML(t, ups)
	rg := &relayGateway{http: procs}
	rg.gateway = startGateway(t, baseEnv(), global+servers)
	for _, u := range ups {
		rg.waitState(t, u.name, "running")
	}
	return rg
}

// startGatewayIn is startGateway with the config file and data directory
// in dir, so that a second gateway can start where the first stopped.
func startGatewayIn(t *testing.T, dir, config string) *gateway {
	t.Helper()
	return startGatewayAt(t, dir, "127.0.0.1:0", config)
}

// startGatewayAt is startGatewayIn listening on listen.
func startGatewayAt(t *testing.T, dir, listen, config string) *gateway {
	t.Helper()
	full := fmt.Sprintf("listen: %s\ndata_dir: %s\nadmin:\n  tokens: [%q]\nlog:\n  level: debug\n%s",
		listen, filepath.Join(dir, "data"), hashToken(adminToken), config)
	path := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, baseEnv(), "mcpgw", "serve", "--config", path)
	addr := p.waitLine(t, "the gateway's listening line", func(l string) string {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
		return ""
	})
	return &gateway{process: p, URL: "http://" + addr, Admin: adminToken, DataDir: filepath.Join(dir, "data")}
}

// stopWith sends sig to the process's group and waits for it to end, at
// most a minute (then SIGKILL). The cleanup of start finds it ended.
func (p *process) stopWith(t testing.TB, sig syscall.Signal) {
	t.Helper()
	syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Errorf("the process did not end within a minute of signal %v", sig)
	}
}

// taskLines returns the complete lines a task server wrote on stderr so
// far: an HTTP server's own pipe, or the [stderr] lines of a stdio
// server's log file (whose last line may still be being written).
func taskLines(t testing.TB, rg *relayGateway, server string) []string {
	t.Helper()
	var raw []string
	if p := rg.http[server]; p != nil {
		raw = strings.Split(p.Stderr(), "\n")
	} else {
		for _, l := range strings.Split(rg.serverLog(t, server), "\n") {
			if loc := stderrTag.FindStringIndex(l); loc != nil {
				raw = append(raw, l[loc[1]:])
			} else {
				raw = append(raw, "") // keeps a partial last line out below
			}
		}
	}
	raw = raw[:len(raw)-1] // after the last "\n": empty or incomplete
	var lines []string
	for _, l := range raw {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitTaskLine waits until one of a task server's stderr lines from index
// from on matches re, and returns its index and submatches.
func waitTaskLine(t testing.TB, rg *relayGateway, server string, from int, re string) (int, []string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(time.Minute)
	for {
		lines := taskLines(t, rg, server)
		for i := from; i < len(lines); i++ {
			if m := rx.FindStringSubmatch(lines[i]); m != nil {
				return i, m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stderr line of %s after line %d matches %s within a minute; stderr:\n%s", server, from, re, strings.Join(lines, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var reqLine = regexp.MustCompile(`^req method=(\S+)`)

// countRequests counts the task server's tools/call and tasks/* requests
// in lines[from:to+1] by method.
func countRequests(lines []string, from, to int) map[string]int {
	n := map[string]int{}
	for _, l := range lines[from : to+1] {
		if m := reqLine.FindStringSubmatch(l); m != nil && (m[1] == "tools/call" || strings.HasPrefix(m[1], "tasks/")) {
			n[m[1]]++
		}
	}
	return n
}

// costString renders request counts for a COST line.
func costString(n map[string]int) string {
	total := 0
	var parts []string
	for _, m := range []string{"tools/call", "tasks/get", "tasks/result", "tasks/cancel", "tasks/list"} {
		if n[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", m, n[m]))
			total += n[m]
		}
	}
	return fmt.Sprintf("%s (%d upstream requests)", strings.Join(parts, " "), total)
}

// taskObj is a Task object.
type taskObj struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func (tk taskObj) terminal() bool {
	return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled"
}

// taskClient is a rawclient session that records what the gateway sends
// it, and answers elicitations: "forty-two" to a schema with an answer
// property (the task server), "historical" to one with interpretation
// (server-everything).
type taskClient struct {
	*rawclient.Client
	notes recorder // "<method>|<params>" of each notification
	asked recorder // "<method>|<params>" of each request, as it came
}

// dialTasks starts a session at the gateway with header (nil: none),
// declaring form elicitation.
func dialTasks(t testing.TB, g *gateway, header http.Header) *taskClient {
	t.Helper()
	tc := &taskClient{}
	c, err := rawclient.Dial(ctxT(t), g.URL+"/mcp", rawclient.Options{
		Capabilities: json.RawMessage(`{"elicitation":{"form":{}}}`),
		ClientInfo:   json.RawMessage(`{"name":"e2e-tasks","version":"1"}`),
		Header:       header,
		OnRequest:    tc.answer,
		OnNotification: func(method string, params json.RawMessage) {
			tc.notes.add(method + "|" + string(params))
		},
	})
	if err != nil {
		t.Fatalf("connecting to the gateway: %v", err)
	}
	tc.Client = c
	t.Cleanup(func() { c.Close(context.Background()) })
	return tc
}

func (tc *taskClient) answer(_ context.Context, method string, params json.RawMessage) (json.RawMessage, *rawclient.Error) {
	tc.asked.add(method + "|" + string(params))
	if method != "elicitation/create" {
		return nil, &rawclient.Error{Code: rawclient.CodeMethodNotFound, Message: "the e2e client offers no " + method}
	}
	var p struct {
		RequestedSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"requestedSchema"`
	}
	json.Unmarshal(params, &p)
	content := map[string]string{}
	if _, ok := p.RequestedSchema.Properties["answer"]; ok {
		content["answer"] = "forty-two"
	}
	if _, ok := p.RequestedSchema.Properties["interpretation"]; ok {
		content["interpretation"] = "historical"
	}
	b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
	return b, nil
}

// call sends a request that must succeed.
func (tc *taskClient) call(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	res, err := tc.Call(ctxT(t), method, params)
	if err != nil {
		t.Fatalf("%s %s: %v", method, mustString(params), err)
	}
	return res
}

// callErr sends a request that must fail with a JSON-RPC error, within 30
// seconds (a tasks/result that wrongly blocks does not hang the test).
func (tc *taskClient) callErr(t testing.TB, method string, params any) *rawclient.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tc.Call(ctx, method, params)
	var rpcErr *rawclient.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("%s %s = %s, %v; want a JSON-RPC error", method, mustString(params), res, err)
	}
	return rpcErr
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// create calls tool as a task (ttl 0: none asked) and returns the Task of
// the CreateTaskResult.
func (tc *taskClient) create(t testing.TB, tool string, args map[string]any, ttl int64) taskObj {
	t.Helper()
	task := map[string]any{}
	if ttl > 0 {
		task["ttl"] = ttl
	}
	res := tc.call(t, "tools/call", map[string]any{"name": tool, "arguments": args, "task": task})
	var ctr struct {
		Task    *taskObj        `json:"task"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(res, &ctr); err != nil || ctr.Task == nil || ctr.Task.TaskID == "" || ctr.Content != nil {
		t.Fatalf("tools/call %s with task = %s, want a CreateTaskResult", tool, res)
	}
	return *ctr.Task
}

// get is tasks/get.
func (tc *taskClient) get(t testing.TB, id string) taskObj {
	t.Helper()
	res := tc.call(t, "tasks/get", map[string]string{"taskId": id})
	var tk taskObj
	if err := json.Unmarshal(res, &tk); err != nil {
		t.Fatalf("tasks/get = %s: %v", res, err)
	}
	if tk.TaskID != id {
		t.Errorf("tasks/get answered taskId %q, want the gateway's %q", tk.TaskID, id)
	}
	return tk
}

// poll calls tasks/get at the task's pollInterval (between 50ms and 1s)
// until until says yes, at most a minute; it returns the last Task and how
// many tasks/get it sent.
func (tc *taskClient) poll(t testing.TB, id string, until func(taskObj) bool) (taskObj, int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for n := 1; ; n++ {
		tk := tc.get(t, id)
		if until(tk) {
			return tk, n
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s (%s) after a minute of polling", id, tk.Status, tk.StatusMessage)
		}
		time.Sleep(min(max(time.Duration(tk.PollInterval)*time.Millisecond, 50*time.Millisecond), time.Second))
	}
}

func isTerminal(tk taskObj) bool { return tk.terminal() }

func statusIs(s string) func(taskObj) bool { return func(tk taskObj) bool { return tk.Status == s } }

// result is tasks/result.
func (tc *taskClient) result(t testing.TB, id string) json.RawMessage {
	t.Helper()
	return tc.call(t, "tasks/result", map[string]string{"taskId": id})
}

// toolResult is the part of a CallToolResult the tests read.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool                       `json:"isError"`
	Meta    map[string]json.RawMessage `json:"_meta"`
	Task    json.RawMessage            `json:"task"`
}

func decodeResult(t testing.TB, raw json.RawMessage) toolResult {
	t.Helper()
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// relatedTask is the taskId of the related-task _meta, or "".
func relatedTask(meta map[string]json.RawMessage) string {
	var rel struct {
		TaskID string `json:"taskId"`
	}
	json.Unmarshal(meta["io.modelcontextprotocol/related-task"], &rel)
	return rel.TaskID
}

// paramsMeta is the _meta of a request's params.
func paramsMeta(params string) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal([]byte(params), &p)
	return p.Meta
}

// statusNote is a notifications/tasks/status recorded by a taskClient.
func statusNote(s string) (taskObj, bool) {
	params, ok := strings.CutPrefix(s, "notifications/tasks/status|")
	if !ok {
		return taskObj{}, false
	}
	var tk taskObj
	json.Unmarshal([]byte(params), &tk)
	return tk, true
}

// quoted matches the quoted task id in the gateway's "unknown task" message.
var quoted = regexp.MustCompile(`"[^"]*"`)

// noTaskShape is an "unknown task" error with the id taken out, to compare
// the answers to different ids.
func noTaskShape(e *rawclient.Error) string {
	return fmt.Sprintf("%d %s data=%s", e.Code, quoted.ReplaceAllString(e.Message, `"<id>"`), e.Data)
}

// apiKeyHeader is the header of a request with an API key.
func apiKeyHeader(key string) http.Header {
	return http.Header{"Authorization": {"Bearer " + key}}
}

// TestTasks_ToolsList checks execution.taskSupport in tools/list: a tool
// that allows or requires a task upstream is optional (the gateway serves
// required ones without a task by block and poll); a tool without task
// support of its own is optional while the gateway hosts tasks for its
// server and forbidden when it does not (tasks.host, host_tasks); a
// forbidden tool called as a task is -32601. And the tasks capability:
// tasks/list only for a principal that is not anonymous.
func TestTasks_ToolsList(t *testing.T) {
	const key = "e2e-tasks-alice-key"
	auth := fmt.Sprintf("auth:\n  anonymous: true\n  api_keys:\n    - principal: alice\n      key_sha256: %q\n", hashToken(key))
	tests := []struct {
		name      string
		global    string
		ups       []taskUpstream
		want      map[string]string // exposed tool → execution.taskSupport
		forbidden string            // a forbidden tool, called as a task
	}{
		{
			name:   "hosting on",
			global: auth,
			ups: []taskUpstream{
				{name: "tasks", kind: "stdio"},
				{name: "tasks-nohost", kind: "http", extra: "    host_tasks: false\n"},
				{name: "demo", kind: "demo"},
				{name: "demo-nohost", kind: "demo", extra: "    host_tasks: false\n"},
			},
			want: map[string]string{
				"mcp__tasks__compute":          "optional",
				"mcp__tasks__must_task":        "optional", // required upstream
				"mcp__tasks__fail_task":        "optional",
				"mcp__tasks__ask_task":         "optional",
				"mcp__tasks__plain":            "optional", // forbidden upstream, hosted
				"mcp__tasks-nohost__compute":   "optional",
				"mcp__tasks-nohost__must_task": "optional",
				"mcp__tasks-nohost__plain":     "forbidden",
				"mcp__demo__echo":              "optional",
				"mcp__demo__slow":              "optional",
				"mcp__demo-nohost__echo":       "forbidden",
				"mcp__demo-nohost__slow":       "forbidden",
			},
			forbidden: "mcp__demo-nohost__echo",
		},
		{
			name:   "hosting off",
			global: "tasks:\n  host: false\n",
			ups: []taskUpstream{
				{name: "tasks", kind: "stdio"},
				{name: "demo", kind: "demo"},
				{name: "demo-hosted", kind: "demo", extra: "    host_tasks: true\n"},
			},
			want: map[string]string{
				"mcp__tasks__compute":     "optional",
				"mcp__tasks__must_task":   "optional",
				"mcp__tasks__plain":       "forbidden",
				"mcp__demo__echo":         "forbidden",
				"mcp__demo__slow":         "forbidden",
				"mcp__demo-hosted__echo":  "optional",
				"mcp__demo-hosted__slow":  "optional",
				"mcp__demo-hosted__image": "optional",
			},
			forbidden: "mcp__tasks__plain",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := startTaskGateway(t, tt.global, tt.ups...)
			c := dialTasks(t, rg.gateway, nil)
			var got map[string]string
			// A server's state turns running just before the catalog
			// merges its tools: list until every wanted tool is there.
			for deadline := time.Now().Add(30 * time.Second); ; {
				var list struct {
					Tools []struct {
						Name      string `json:"name"`
						Execution *struct {
							TaskSupport *string `json:"taskSupport"`
						} `json:"execution"`
					} `json:"tools"`
				}
				if err := json.Unmarshal(c.call(t, "tools/list", nil), &list); err != nil {
					t.Fatal(err)
				}
				got = map[string]string{}
				for _, tool := range list.Tools {
					if tool.Execution == nil || tool.Execution.TaskSupport == nil {
						t.Errorf("tool %s is listed without execution.taskSupport", tool.Name)
						continue
					}
					if _, ok := tt.want[tool.Name]; ok {
						got[tool.Name] = *tool.Execution.TaskSupport
					}
				}
				if len(got) == len(tt.want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("execution.taskSupport (-want +got):\n%s", diff)
			}

			e := c.callErr(t, "tools/call", map[string]any{"name": tt.forbidden, "arguments": map[string]any{"text": "x"}, "task": map[string]any{}})
			if e.Code != -32601 {
				t.Errorf("tools/call %s with task = %v, want -32601", tt.forbidden, e)
			}
		})
	}

	t.Run("capabilities", func(t *testing.T) {
		rg := startTaskGateway(t, auth, taskUpstream{name: "tasks", kind: "stdio"})
		for _, tc := range []struct {
			name   string
			header http.Header
			want   string
		}{
			{"anonymous", nil, `{"cancel":{},"requests":{"tools":{"call":{}}}}`},
			{"api key", apiKeyHeader(key), `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`},
		} {
			c := dialTasks(t, rg.gateway, tc.header)
			var init struct {
				Capabilities struct {
					Tasks json.RawMessage `json:"tasks"`
				} `json:"capabilities"`
			}
			json.Unmarshal(c.InitializeResult(), &init)
			var got, want any
			json.Unmarshal(init.Capabilities.Tasks, &got)
			json.Unmarshal([]byte(tc.want), &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: capabilities.tasks (-want +got):\n%s", tc.name, diff)
			}
		}
	})
}

// TestTasks_Relay relays tasks to the task server over stdio and HTTP:
// the CreateTaskResult names the task by a gateway id, never the server's;
// tasks/get, tasks/result (with the related-task _meta), tasks/cancel and
// a failed task reach the server under its own id; status notifications
// reach the creating session's GET stream under the gateway's id; an
// elicitation while input_required reaches the client on its tasks/result;
// tasks/list pages through a session's tasks.
func TestTasks_Relay(t *testing.T) {
	for _, tr := range taskTransports {
		t.Run(tr, func(t *testing.T) {
			rg := startTaskGateway(t, "", taskUpstream{name: "tasks", kind: tr})

			t.Run("create poll result", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				from := len(taskLines(t, rg, "tasks"))
				tk := c.create(t, "mcp__tasks__compute", map[string]any{"seconds": 0.5, "value": "relayed"}, 60000)
				_, m := waitTaskLine(t, rg, "tasks", from, `^task created id=(\S+) tool=compute$`)
				upID := m[1]
				if tk.Status != "working" || tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval != 200 {
					t.Errorf("CreateTaskResult task = %+v, want working, the server's ttl 60000 and pollInterval 200", tk)
				}
				if strings.Contains(tk.TaskID, upID) {
					t.Errorf("the gateway's task id %q shows the server's %q", tk.TaskID, upID)
				}
				final, gets := c.poll(t, tk.TaskID, isTerminal)
				if final.Status != "completed" {
					t.Fatalf("task = %+v, want completed", final)
				}
				raw := c.result(t, tk.TaskID)
				res := decodeResult(t, raw)
				if res.text() != "value=relayed" || res.IsError || relatedTask(res.Meta) != tk.TaskID {
					t.Errorf("tasks/result = %s, want value=relayed tied to %s", raw, tk.TaskID)
				}
				if strings.Contains(string(raw), upID) {
					t.Errorf("tasks/result shows the server's task id: %s", raw)
				}
				resultAt, _ := waitTaskLine(t, rg, "tasks", from, `^req method=tasks/result taskId=`+regexp.QuoteMeta(upID)+`$`)
				lines := taskLines(t, rg, "tasks")
				cost := countRequests(lines, from, resultAt)
				t.Logf("COST relay (%s): client sent tools/call=1 tasks/get=%d tasks/result=1; upstream got %s", tr, gets, costString(cost))
				if cost["tools/call"] != 1 || cost["tasks/result"] != 1 || cost["tasks/get"] > gets {
					t.Errorf("upstream requests for one relayed task: %v; want 1 tools/call, at most the client's %d tasks/get, 1 tasks/result", cost, gets)
				}

				// A second tasks/result is served from the record; a plain
				// call after it marks where its request would have been.
				if again := c.result(t, tk.TaskID); string(again) != string(raw) {
					t.Errorf("second tasks/result = %s, want %s", again, raw)
				}
				c.call(t, "tools/call", map[string]any{"name": "mcp__tasks__plain"})
				markAt, _ := waitTaskLine(t, rg, "tasks", resultAt+1, `^req method=tools/call$`)
				if n := countRequests(taskLines(t, rg, "tasks"), resultAt+1, markAt)["tasks/result"]; n != 0 {
					t.Errorf("the second tasks/result reached the server (%d requests)", n)
				}
			})

			t.Run("status notifications", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				other := dialTasks(t, rg.gateway, nil)
				for _, cl := range []*taskClient{c, other} {
					if err := cl.OpenStream(ctxT(t)); err != nil {
						t.Fatal(err)
					}
				}
				tk := c.create(t, "mcp__tasks__compute", map[string]any{"seconds": 0.3, "value": "notified"}, 60000)
				c.notes.wait(t, "notifications/tasks/status completed for "+tk.TaskID, func(s string) bool {
					n, ok := statusNote(s)
					return ok && n.TaskID == tk.TaskID && n.Status == "completed"
				})
				for _, s := range c.notes.all() {
					if n, ok := statusNote(s); ok && n.TaskID != tk.TaskID {
						t.Errorf("a status notification names a task the session does not know: %s", s)
					}
				}
				if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "completed" {
					t.Errorf("task = %+v, want completed", final)
				}
				for _, s := range other.notes.all() {
					if strings.HasPrefix(s, "notifications/tasks/status|") {
						t.Errorf("another session got the task's status notification: %s", s)
					}
				}
			})

			t.Run("failed", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				tk := c.create(t, "mcp__tasks__fail_task", nil, 60000)
				if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "failed" {
					t.Errorf("task = %+v, want failed", final)
				}
				res := decodeResult(t, c.result(t, tk.TaskID))
				if !res.IsError || res.text() != "fail_task: failed on purpose" || relatedTask(res.Meta) != tk.TaskID {
					t.Errorf("tasks/result = %+v, want the tool's isError result tied to the task", res)
				}
			})

			t.Run("cancel", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				from := len(taskLines(t, rg, "tasks"))
				tk := c.create(t, "mcp__tasks__compute", map[string]any{"seconds": 300}, 60000)
				_, m := waitTaskLine(t, rg, "tasks", from, `^task created id=(\S+) tool=compute$`)
				upID := m[1]
				var got taskObj
				json.Unmarshal(c.call(t, "tasks/cancel", map[string]string{"taskId": tk.TaskID}), &got)
				if got.TaskID != tk.TaskID || got.Status != "cancelled" {
					t.Errorf("tasks/cancel = %+v, want the task cancelled under the gateway's id", got)
				}
				waitTaskLine(t, rg, "tasks", from, `^task cancelled id=`+regexp.QuoteMeta(upID)+`$`)
				if tk := c.get(t, tk.TaskID); tk.Status != "cancelled" {
					t.Errorf("tasks/get after cancel = %+v, want cancelled", tk)
				}
				if e := c.callErr(t, "tasks/cancel", map[string]string{"taskId": tk.TaskID}); e.Code != -32602 {
					t.Errorf("tasks/cancel of a cancelled task = %v, want -32602", e)
				}
				// A cancelled task has no result; the gateway says so
				// itself, and never names the server's own id.
				from = len(taskLines(t, rg, "tasks"))
				e := c.callErr(t, "tasks/result", map[string]string{"taskId": tk.TaskID})
				if e.Code != -32603 || !strings.Contains(e.Message, "was cancelled; it has no result") || strings.Contains(e.Message, upID) {
					t.Errorf("tasks/result of a cancelled task = %d %q, want -32603 saying it was cancelled, without the server's id", e.Code, e.Message)
				}
				// A later request marks where the server's log has got to.
				c.create(t, "mcp__tasks__compute", map[string]any{"value": "marker"}, 60000)
				to, _ := waitTaskLine(t, rg, "tasks", from, `^task created id=`)
				if n := countRequests(taskLines(t, rg, "tasks"), from, to)["tasks/result"]; n != 0 {
					t.Errorf("tasks/result of a cancelled task reached the server %d times, want 0", n)
				}
				if e := c.callErr(t, "tasks/get", map[string]string{"taskId": upID}); e.Code != -32602 {
					t.Errorf("tasks/get under the server's own id = %v, want -32602", e)
				}
			})

			t.Run("elicitation", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				from := len(taskLines(t, rg, "tasks"))
				tk := c.create(t, "mcp__tasks__ask_task", map[string]any{"question": "What is six times seven?"}, 60000)
				_, m := waitTaskLine(t, rg, "tasks", from, `^task created id=(\S+) tool=ask_task$`)
				upID := m[1]
				c.poll(t, tk.TaskID, statusIs("input_required"))
				raw := c.result(t, tk.TaskID)
				res := decodeResult(t, raw)
				if res.text() != `action=accept content={"answer":"forty-two"}` || relatedTask(res.Meta) != tk.TaskID {
					t.Errorf("tasks/result = %s, want the answer, tied to %s", raw, tk.TaskID)
				}
				asked := c.asked.all()
				if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create|") || !strings.Contains(asked[0], "What is six times seven?") {
					t.Fatalf("the client was asked %q, want the task's one elicitation", asked)
				}
				params := strings.TrimPrefix(asked[0], "elicitation/create|")
				if got := relatedTask(paramsMeta(params)); got != tk.TaskID {
					t.Errorf("the elicitation's related-task is %q, want the gateway's id %q", got, tk.TaskID)
				}
				if strings.Contains(params, upID) {
					t.Errorf("the elicitation shows the server's task id: %s", params)
				}
				if final := c.get(t, tk.TaskID); final.Status != "completed" {
					t.Errorf("task after its result = %+v, want completed", final)
				}
			})

			t.Run("list", func(t *testing.T) {
				c := dialTasks(t, rg.gateway, nil)
				const n = 53 // more than one page of 50
				var want []string
				for i := range n {
					want = append(want, c.create(t, "mcp__tasks__compute", map[string]any{"value": fmt.Sprint(i)}, 60000).TaskID)
				}
				var got []string
				var cursor string
				pages := 0
				for {
					params := map[string]any{}
					if cursor != "" {
						params["cursor"] = cursor
					}
					var page struct {
						Tasks      []taskObj `json:"tasks"`
						NextCursor string    `json:"nextCursor"`
					}
					json.Unmarshal(c.call(t, "tasks/list", params), &page)
					pages++
					for _, tk := range page.Tasks {
						if tk.Status == "" || tk.CreatedAt == "" {
							t.Errorf("tasks/list entry %+v lacks status or createdAt", tk)
						}
						got = append(got, tk.TaskID)
					}
					if page.NextCursor == "" || pages > 10 {
						break
					}
					if pages == 1 {
						// Another session cannot use the cursor.
						other := dialTasks(t, rg.gateway, nil)
						if e := other.callErr(t, "tasks/list", map[string]string{"cursor": page.NextCursor}); e.Code != -32602 {
							t.Errorf("another session's tasks/list with the cursor = %v, want -32602", e)
						}
					}
					cursor = page.NextCursor
				}
				slices.Sort(want)
				slices.Sort(got)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tasks/list over %d pages (-want +got):\n%s", pages, diff)
				}
				if pages != 2 {
					t.Errorf("tasks/list of %d tasks took %d pages, want 2 (50 a page)", n, pages)
				}
				if e := c.callErr(t, "tasks/list", map[string]string{"cursor": "not-a-cursor"}); e.Code != -32602 {
					t.Errorf("tasks/list with a bad cursor = %v, want -32602", e)
				}
			})
		})
	}
}

// TestTasks_BlockAndPoll calls a tool whose server requires a task
// without one: the gateway creates the task, polls it and answers the
// call with the tool's result, not naming the task.
func TestTasks_BlockAndPoll(t *testing.T) {
	for _, tr := range taskTransports {
		t.Run(tr, func(t *testing.T) {
			rg := startTaskGateway(t, "", taskUpstream{name: "tasks", kind: tr})
			c := dialTasks(t, rg.gateway, nil)
			from := len(taskLines(t, rg, "tasks"))
			raw := c.call(t, "tools/call", map[string]any{"name": "mcp__tasks__must_task", "arguments": map[string]any{"seconds": 1, "value": "waited"}})
			res := decodeResult(t, raw)
			if res.text() != "value=waited" || res.IsError || res.Task != nil || relatedTask(res.Meta) != "" {
				t.Errorf("tools/call must_task = %s, want the tool's result value=waited, naming no task", raw)
			}
			_, m := waitTaskLine(t, rg, "tasks", from, `^task created id=(\S+) tool=must_task$`)
			resultAt, _ := waitTaskLine(t, rg, "tasks", from, `^req method=tasks/result taskId=`+regexp.QuoteMeta(m[1])+`$`)
			cost := countRequests(taskLines(t, rg, "tasks"), from, resultAt)
			t.Logf("COST block-and-poll (%s, a 1s task, server pollInterval 200ms clamped to 500ms): client sent tools/call=1; upstream got %s", tr, costString(cost))
			if cost["tools/call"] != 1 || cost["tasks/result"] != 1 || cost["tasks/get"] < 1 {
				t.Errorf("upstream requests of block and poll: %v; want 1 tools/call, some tasks/get, 1 tasks/result", cost)
			}
		})
	}
}

// TestTasks_Ownership checks that a task belongs to its principal, and an
// anonymous one to its session: anyone else's tasks/get, tasks/result and
// tasks/cancel get the same -32602 as a forged or expired id, and their
// tasks/list does not show it.
func TestTasks_Ownership(t *testing.T) {
	const aliceKey, bobKey = "e2e-tasks-alice-key", "e2e-tasks-bob-key"
	rg := startTaskGateway(t,
		fmt.Sprintf("auth:\n  anonymous: true\n  api_keys:\n    - principal: alice\n      key_sha256: %q\n    - principal: bob\n      key_sha256: %q\n",
			hashToken(aliceKey), hashToken(bobKey)),
		taskUpstream{name: "tasks", kind: "stdio"},
		taskUpstream{name: "demo", kind: "demo"})
	clients := map[string]*taskClient{
		"anon1":  dialTasks(t, rg.gateway, nil),
		"anon2":  dialTasks(t, rg.gateway, nil),
		"alice1": dialTasks(t, rg.gateway, apiKeyHeader(aliceKey)),
		"alice2": dialTasks(t, rg.gateway, apiKeyHeader(aliceKey)),
		"bob":    dialTasks(t, rg.gateway, apiKeyHeader(bobKey)),
	}

	// The reference: an id the gateway never issued.
	ref := noTaskShape(clients["anon1"].callErr(t, "tasks/get", map[string]string{"taskId": "forged-task-id-0123456789abcdef"}))
	if !strings.HasPrefix(ref, "-32602 ") {
		t.Fatalf("tasks/get of a forged id = %s, want -32602", ref)
	}

	// anon1 and alice1 each have a relayed and a hosted task, running.
	owned := map[string]map[string]string{} // owner → kind → id
	for _, o := range []string{"anon1", "alice1"} {
		c := clients[o]
		owned[o] = map[string]string{
			"relayed": c.create(t, "mcp__tasks__compute", map[string]any{"seconds": 300}, 600000).TaskID,
			"hosted":  c.create(t, "mcp__demo__slow", map[string]any{"seconds": 300}, 600000).TaskID,
		}
	}
	wantNoTask := func(t *testing.T, who, method, id, what string) {
		t.Helper()
		e := clients[who].callErr(t, method, map[string]string{"taskId": id})
		if got := noTaskShape(e); got != ref {
			t.Errorf("%s: %s of %s = %s; want the answer to a forged id, %s", who, method, what, got, ref)
		}
	}
	for _, tc := range []struct {
		name, who, owner string
	}{
		{"another anonymous session", "anon2", "anon1"},
		{"a principal, of an anonymous session's", "alice1", "anon1"},
		{"another principal", "bob", "alice1"},
		{"an anonymous session, of a principal's", "anon2", "alice1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for kind, id := range owned[tc.owner] {
				for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
					wantNoTask(t, tc.who, method, id, tc.owner+"'s "+kind+" task")
				}
			}
			var list struct {
				Tasks []taskObj `json:"tasks"`
			}
			json.Unmarshal(clients[tc.who].call(t, "tasks/list", nil), &list)
			for _, tk := range list.Tasks {
				for _, id := range owned[tc.owner] {
					if tk.TaskID == id {
						t.Errorf("%s's tasks/list shows %s's task %s", tc.who, tc.owner, id)
					}
				}
			}
		})
	}
	t.Run("forged ids", func(t *testing.T) {
		id := owned["anon1"]["relayed"]
		other := "A"
		if id[len(id)/2] == 'A' {
			other = "B"
		}
		tampered := id[:len(id)/2] + other + id[len(id)/2+1:]
		for _, bad := range []string{tampered, id + "x", "x" + id, strings.Repeat("A", len(id))} {
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				wantNoTask(t, "anon1", method, bad, "a forged id")
			}
		}
	})
	t.Run("same principal, another session", func(t *testing.T) {
		c := clients["alice2"]
		for kind, id := range owned["alice1"] {
			if tk := c.get(t, id); tk.Status != "working" {
				t.Errorf("alice's other session: %s task = %+v, want working", kind, tk)
			}
		}
		var list struct {
			Tasks []taskObj `json:"tasks"`
		}
		json.Unmarshal(c.call(t, "tasks/list", nil), &list)
		var ids []string
		for _, tk := range list.Tasks {
			ids = append(ids, tk.TaskID)
		}
		for kind, id := range owned["alice1"] {
			if !slices.Contains(ids, id) {
				t.Errorf("alice's other session: tasks/list lacks the %s task", kind)
			}
		}
	})
	t.Run("owners still have them", func(t *testing.T) {
		for o, ids := range owned {
			for kind, id := range ids {
				if tk := clients[o].get(t, id); tk.Status != "working" {
					t.Errorf("%s's %s task after the others' attempts = %+v, want working", o, kind, tk)
				}
				var got taskObj
				json.Unmarshal(clients[o].call(t, "tasks/cancel", map[string]string{"taskId": id}), &got)
				if got.Status != "cancelled" {
					t.Errorf("%s: tasks/cancel of its %s task = %+v, want cancelled", o, kind, got)
				}
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		c := clients["anon1"]
		for _, tool := range []string{"mcp__tasks__compute", "mcp__demo__echo"} {
			tk := c.create(t, tool, map[string]any{"text": "short-lived"}, 1000)
			deadline := time.Now().Add(time.Minute)
			for {
				_, err := c.Call(ctxT(t), "tasks/get", map[string]string{"taskId": tk.TaskID})
				var e *rawclient.Error
				if errors.As(err, &e) {
					if got := noTaskShape(e); got != ref {
						t.Errorf("%s: tasks/get of an expired task = %s, want %s", tool, got, ref)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: a task with ttl 1000ms is still served after a minute", tool)
				}
				time.Sleep(100 * time.Millisecond)
			}
			wantNoTask(t, "anon1", "tasks/result", tk.TaskID, "an expired task")
		}
	})
}

// TestTasks_Hosted runs tasks of tools whose server has no task support
// (the demo server; the task server's plain tool) in the gateway: the
// CreateTaskResult has the configured ttl and pollInterval, the task ends
// completed (or failed) with the call's result, a status notification
// reaches the GET stream, cancelling it cancels the call upstream, and the
// hosted tasks one principal may run are capped.
func TestTasks_Hosted(t *testing.T) {
	rg := startTaskGateway(t, "tasks:\n  default_ttl: 2m\n  max_ttl: 5m\n  poll_interval: 300ms\n  max_hosted_per_principal: 2\n",
		taskUpstream{name: "demo", kind: "demo"},
		taskUpstream{name: "tasks", kind: "stdio"})

	t.Run("echo", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		tk := c.create(t, "mcp__demo__echo", map[string]any{"text": "hosted echo"}, 60000)
		if tk.Status != "working" || tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval != 300 {
			t.Errorf("CreateTaskResult task = %+v, want working, ttl 60000, pollInterval 300", tk)
		}
		if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "completed" {
			t.Fatalf("task = %+v, want completed", final)
		}
		raw := c.result(t, tk.TaskID)
		if res := decodeResult(t, raw); res.text() != "hosted echo" || res.IsError || relatedTask(res.Meta) != tk.TaskID {
			t.Errorf("tasks/result = %s, want the echo tied to %s", raw, tk.TaskID)
		}
	})
	t.Run("slow", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		if err := c.OpenStream(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		tk := c.create(t, "mcp__demo__slow", map[string]any{"seconds": 1}, 60000)
		if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "completed" {
			t.Fatalf("task = %+v, want completed", final)
		}
		raw := c.result(t, tk.TaskID)
		if res := decodeResult(t, raw); res.text() != "slept 1 seconds" || relatedTask(res.Meta) != tk.TaskID {
			t.Errorf("tasks/result = %s, want slept 1 seconds tied to %s", raw, tk.TaskID)
		}
		c.notes.wait(t, "notifications/tasks/status completed", func(s string) bool {
			n, ok := statusNote(s)
			return ok && n.TaskID == tk.TaskID && n.Status == "completed"
		})
	})
	t.Run("failed", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		tk := c.create(t, "mcp__demo__fail", nil, 60000)
		if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "failed" {
			t.Errorf("task = %+v, want failed", final)
		}
		raw, err := c.Call(ctxT(t), "tasks/result", map[string]string{"taskId": tk.TaskID})
		if err == nil && !decodeResult(t, raw).IsError {
			t.Errorf("tasks/result of a failed task = %s, want an isError result or an error", raw)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		for _, tc := range []struct {
			asked, want int64
		}{
			{0, 120000},        // tasks.default_ttl
			{36000000, 300000}, // capped at tasks.max_ttl
		} {
			tk := c.create(t, "mcp__demo__echo", map[string]any{"text": "ttl"}, tc.asked)
			if tk.TTL == nil || *tk.TTL != tc.want {
				t.Errorf("ttl asked %d: task = %+v, want ttl %d", tc.asked, tk, tc.want)
			}
			c.poll(t, tk.TaskID, isTerminal)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		before := strings.Count(rg.serverLog(t, "demo"), "slow: cancelled")
		tk := c.create(t, "mcp__demo__slow", map[string]any{"seconds": 300}, 60000)
		var got taskObj
		json.Unmarshal(c.call(t, "tasks/cancel", map[string]string{"taskId": tk.TaskID}), &got)
		if got.TaskID != tk.TaskID || got.Status != "cancelled" {
			t.Errorf("tasks/cancel = %+v, want the task cancelled", got)
		}
		deadline := time.Now().Add(time.Minute)
		for strings.Count(rg.serverLog(t, "demo"), "slow: cancelled") == before {
			if time.Now().After(deadline) {
				t.Fatalf("the demo server never wrote slow: cancelled; its log:\n%s", rg.serverLog(t, "demo"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if tk := c.get(t, tk.TaskID); tk.Status != "cancelled" {
			t.Errorf("tasks/get after cancel = %+v, want cancelled", tk)
		}
		if e := c.callErr(t, "tasks/cancel", map[string]string{"taskId": tk.TaskID}); e.Code != -32602 {
			t.Errorf("tasks/cancel of a cancelled task = %v, want -32602", e)
		}
		c.callErr(t, "tasks/result", map[string]string{"taskId": tk.TaskID})
	})
	t.Run("limit", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		var ids []string
		for range 2 {
			ids = append(ids, c.create(t, "mcp__demo__slow", map[string]any{"seconds": 300}, 60000).TaskID)
		}
		e := c.callErr(t, "tools/call", map[string]any{"name": "mcp__demo__slow", "arguments": map[string]any{"seconds": 300}, "task": map[string]any{}})
		if e.Code != -31003 {
			t.Errorf("a third hosted task = %v, want -31003", e)
		}
		for _, id := range ids {
			c.call(t, "tasks/cancel", map[string]string{"taskId": id})
		}
		// Once the cancelled calls ended, there is room again.
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := c.Call(ctxT(t), "tools/call", map[string]any{"name": "mcp__demo__echo", "arguments": map[string]any{"text": "room"}, "task": map[string]any{}})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no room for a hosted task a minute after cancelling: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("plain tool of a task server", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		from := len(taskLines(t, rg, "tasks"))
		tk := c.create(t, "mcp__tasks__plain", nil, 60000)
		final, gets := c.poll(t, tk.TaskID, isTerminal)
		if final.Status != "completed" {
			t.Fatalf("task = %+v, want completed", final)
		}
		if res := decodeResult(t, c.result(t, tk.TaskID)); res.text() != "plain: ok" {
			t.Errorf("tasks/result = %+v, want plain: ok", res)
		}
		// A plain call after it marks the end of the task's requests.
		c.call(t, "tools/call", map[string]any{"name": "mcp__tasks__compute", "arguments": map[string]any{"value": "mark"}})
		firstAt, _ := waitTaskLine(t, rg, "tasks", from, `^req method=tools/call$`)
		markAt, _ := waitTaskLine(t, rg, "tasks", firstAt+1, `^req method=tools/call$`)
		cost := countRequests(taskLines(t, rg, "tasks"), from, markAt-1)
		t.Logf("COST hosted (stdio, pollInterval 300ms): client sent tools/call=1 tasks/get=%d tasks/result=1; upstream got %s", gets, costString(cost))
		if diff := cmp.Diff(map[string]int{"tools/call": 1}, cost); diff != "" {
			t.Errorf("upstream requests of a hosted task (-want +got):\n%s", diff)
		}
	})
}

// TestTasks_ServerEverything runs npm's server-everything, whose
// simulate-research-query requires a task and, with ambiguous, asks the
// client for a clarification while input_required: relayed as a task, and
// by block and poll, where the elicitation comes on the call's own stream.
func TestTasks_ServerEverything(t *testing.T) {
	rg := startTaskGateway(t, "list_changed_debounce: 50ms\n", taskUpstream{name: "everything", kind: "everything"})
	const tool = "mcp__everything__simulate-research-query"

	// The server adds the tool once initialized (it checks the gateway's
	// capabilities), then says its list changed.
	type listed struct {
		Name      string `json:"name"`
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	c := dialTasks(t, rg.gateway, nil)
	deadline := time.Now().Add(time.Minute)
	for {
		var list struct {
			Tools []listed `json:"tools"`
		}
		json.Unmarshal(c.call(t, "tools/list", nil), &list)
		i := slices.IndexFunc(list.Tools, func(tl listed) bool { return tl.Name == tool })
		if i >= 0 {
			if got := list.Tools[i].Execution.TaskSupport; got != "optional" {
				t.Errorf("%s is listed with taskSupport %q, want optional (required upstream)", tool, got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never listed %s", tool)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("relay", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		tk := c.create(t, tool, map[string]any{"topic": "tidal power"}, 60000)
		if final, _ := c.poll(t, tk.TaskID, isTerminal); final.Status != "completed" {
			t.Fatalf("task = %+v, want completed", final)
		}
		raw := c.result(t, tk.TaskID)
		if res := decodeResult(t, raw); !strings.Contains(res.text(), "# Research Report: tidal power") || relatedTask(res.Meta) != tk.TaskID {
			t.Errorf("tasks/result = %.300s, want the report tied to %s", raw, tk.TaskID)
		}
	})
	t.Run("relay with elicitation", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		tk := c.create(t, tool, map[string]any{"topic": "tidal power", "ambiguous": true}, 60000)
		c.poll(t, tk.TaskID, func(tk taskObj) bool { return tk.Status == "input_required" || tk.terminal() })
		raw := c.result(t, tk.TaskID)
		if res := decodeResult(t, raw); !strings.Contains(res.text(), "# Research Report: tidal power (historical)") || relatedTask(res.Meta) != tk.TaskID {
			t.Errorf("tasks/result = %.300s, want the report on the historical interpretation tied to %s", raw, tk.TaskID)
		}
		asked := c.asked.all()
		if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create|") {
			t.Fatalf("the client was asked %q, want one elicitation", asked)
		}
		if got := relatedTask(paramsMeta(strings.TrimPrefix(asked[0], "elicitation/create|"))); got != tk.TaskID {
			t.Errorf("the elicitation's related-task is %q, want the gateway's id %q", got, tk.TaskID)
		}
	})
	t.Run("block and poll", func(t *testing.T) {
		c := dialTasks(t, rg.gateway, nil)
		raw := c.call(t, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"topic": "tidal power"}})
		res := decodeResult(t, raw)
		if !strings.Contains(res.text(), "# Research Report: tidal power") || res.Task != nil || relatedTask(res.Meta) != "" {
			t.Errorf("tools/call = %.300s, want the report, naming no task", raw)
		}
	})
	t.Run("block and poll with elicitation", func(t *testing.T) {
		// No GET stream: the elicitation can only come on the call's.
		c := dialTasks(t, rg.gateway, nil)
		raw := c.call(t, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"topic": "tidal power", "ambiguous": true}})
		res := decodeResult(t, raw)
		if !strings.Contains(res.text(), "# Research Report: tidal power (historical)") || res.Task != nil || relatedTask(res.Meta) != "" {
			t.Errorf("tools/call = %.300s, want the report on the historical interpretation, naming no task", raw)
		}
		asked := c.asked.all()
		if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create|") {
			t.Fatalf("the client was asked %q, want one elicitation", asked)
		}
		// The client asked for no task: the elicitation should name none
		// either (certainly not the server's own task id).
		if got := relatedTask(paramsMeta(strings.TrimPrefix(asked[0], "elicitation/create|"))); got != "" {
			t.Errorf("the elicitation of a call without a task names the task %q (the server's own id): %s", got, asked[0])
		}
	})
}

// TestTasks_Restart stops the gateway and starts it again on the same
// data directory and secret: a finished task's result is still served to
// the same principal, and a task that was running (hosted, or relayed to a
// stdio server, which restarted with the gateway) is failed, saying why.
func TestTasks_Restart(t *testing.T) {
	const key = "e2e-tasks-restart-key"
	config := func(servers string) string {
		return fmt.Sprintf("secret: %q\nauth:\n  anonymous: false\n  api_keys:\n    - principal: alice\n      key_sha256: %q\n%s",
			"e2e-tasks-restart-secret-0123456789abcdef", hashToken(key), servers)
	}
	// The HTTP task server outlives the gateways; its tasks belong to the
	// upstream session that created them, which ends with the gateway.
	servers, _ := taskServersYAML(t, []taskUpstream{{name: "tasks", kind: "stdio"}, {name: "demo", kind: "demo"}, {name: "remote", kind: "http"}})

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			g := startGatewayIn(t, dir, config(servers))
			g.waitState(t, "tasks", "running")
			g.waitState(t, "demo", "running")
			g.waitState(t, "remote", "running")
			c := dialTasks(t, g, apiKeyHeader(key))

			relayed := c.create(t, "mcp__tasks__compute", map[string]any{"value": "before restart"}, 600000).TaskID
			c.poll(t, relayed, isTerminal)
			relayedResult := c.result(t, relayed)
			hosted := c.create(t, "mcp__demo__echo", map[string]any{"text": "kept"}, 600000).TaskID
			c.poll(t, hosted, isTerminal)
			unfetched := c.create(t, "mcp__tasks__compute", map[string]any{"value": "never fetched"}, 600000).TaskID
			if tk, _ := c.poll(t, unfetched, isTerminal); tk.Status != "completed" {
				t.Fatalf("task = %+v, want completed", tk)
			}
			runningHosted := c.create(t, "mcp__demo__slow", map[string]any{"seconds": 300}, 600000).TaskID
			runningRelayed := c.create(t, "mcp__tasks__compute", map[string]any{"seconds": 300}, 600000).TaskID
			runningRemote := c.create(t, "mcp__remote__compute", map[string]any{"seconds": 300}, 600000).TaskID
			demoPID := g.status(t, "demo").PID
			tasksPID := g.status(t, "tasks").PID

			g.stopWith(t, sig)
			if sig == syscall.SIGKILL {
				// The stdio servers, in their own process groups, end
				// when their stdin closes; make sure they do.
				for _, pid := range []int{demoPID, tasksPID} {
					deadline := time.Now().Add(time.Minute)
					for syscall.Kill(pid, 0) == nil {
						if time.Now().After(deadline) {
							syscall.Kill(pid, syscall.SIGKILL)
							t.Errorf("stdio server pid %d outlived its killed gateway by a minute", pid)
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}

			g = startGatewayIn(t, dir, config(servers))
			g.waitState(t, "tasks", "running")
			g.waitState(t, "demo", "running")
			g.waitState(t, "remote", "running")
			c = dialTasks(t, g, apiKeyHeader(key))

			if tk := c.get(t, relayed); tk.Status != "completed" {
				t.Errorf("relayed task after the restart = %+v, want completed", tk)
			}
			if got := c.result(t, relayed); string(got) != string(relayedResult) {
				t.Errorf("relayed task's result after the restart = %s, want %s", got, relayedResult)
			}
			if tk := c.get(t, hosted); tk.Status != "completed" {
				t.Errorf("hosted task after the restart = %+v, want completed", tk)
			}
			if res := decodeResult(t, c.result(t, hosted)); res.text() != "kept" || relatedTask(res.Meta) != hosted {
				t.Errorf("hosted task's result after the restart = %+v, want kept", res)
			}
			for _, tc := range []struct {
				name, id, why string
			}{
				{"running hosted", runningHosted, map[syscall.Signal]string{syscall.SIGTERM: "the gateway shut down", syscall.SIGKILL: "the gateway restarted"}[sig]},
				{"running relayed (stdio)", runningRelayed, "restarted with the gateway"},
				// Kept at the restart and asked again: the server no
				// longer knows it.
				{"running relayed (HTTP)", runningRemote, `server "remote" no longer knows this task`},
			} {
				tk := c.get(t, tc.id)
				if tk.Status != "failed" || !strings.Contains(tk.StatusMessage, tc.why) {
					t.Errorf("%s task after the restart = %+v, want failed saying %q", tc.name, tk, tc.why)
				}
				c.callErr(t, "tasks/result", map[string]string{"taskId": tc.id})
			}
			// A relayed task that completed before the restart, its
			// result not yet asked for: the gateway kept the result when
			// its tasks/get saw the task finish, so it is still served
			// (the stdio server that ran it is gone).
			before := c.get(t, unfetched)
			raw, err := c.Call(ctxT(t), "tasks/result", map[string]string{"taskId": unfetched})
			if err != nil || decodeResult(t, raw).text() != "value=never fetched" {
				t.Errorf("relayed task completed before the restart, result not fetched: tasks/get = %s (%s), then tasks/result = %s, %v; want value=never fetched",
					before.Status, before.StatusMessage, raw, err)
				after := c.get(t, unfetched)
				t.Logf("and tasks/get after that tasks/result = %s (%s)", after.Status, after.StatusMessage)
			}

			var list struct {
				Tasks []taskObj `json:"tasks"`
			}
			json.Unmarshal(c.call(t, "tasks/list", nil), &list)
			var ids []string
			for _, tk := range list.Tasks {
				ids = append(ids, tk.TaskID)
			}
			want := []string{relayed, hosted, unfetched, runningHosted, runningRelayed, runningRemote}
			slices.Sort(ids)
			slices.Sort(want)
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("tasks/list after the restart (-want +got):\n%s", diff)
			}
		})
	}
}
