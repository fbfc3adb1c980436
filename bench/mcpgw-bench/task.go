package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// taskMeta is the _meta of every request of -task: a 2026-07-28 client is
// sessionless, so each request says who it is and that it takes tasks.
var taskMeta = json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"` + modernVersion +
	`","io.modelcontextprotocol/clientCapabilities":{"extensions":{"` + tasksExtension +
	`":{}}},"io.modelcontextprotocol/clientInfo":{"name":"mcpgw-bench","version":"0.1.0"}}`)

// maxTaskID bounds the task id the tool sends back in a header.
const maxTaskID = 4096

// runTask is -task mode: each session is a sessionless 2026-07-28 client
// that runs one task after the other, tools/call and then tasks/get until
// the task is over. The next tasks/get goes as soon as the last answer
// came, not after the task's pollIntervalMs, so that the run measures what
// a task costs the server rather than the interval; the report counts the
// tasks/get per task.
func runTask(ctx context.Context, c *config) (*report, error) {
	t, err := newTarget(ctx, c, c.sessions, loadBufSize)
	if err != nil {
		return nil, err
	}
	defer t.close()
	ws, err := newWatchers(c.watch)
	if err != nil {
		return nil, err
	}
	var counts taskCounts
	clients := make([]*taskClient, c.sessions)
	calls := make([]callFunc, c.sessions)
	for i := range clients {
		clients[i] = newTaskClient(t, c, &counts)
		calls[i] = clients[i].run
	}
	res := runLoad(ctx, c.plan(), calls, ws.start, ws.stop)
	rep := newLoadReport(modeTask, c.url, c, res)
	tasks, gets := counts.tasks.Load(), counts.gets.Load()
	rep.Task = &taskReport{Tasks: tasks, Gets: gets}
	if tasks > 0 {
		rep.Task.GetsPerTask = round2(float64(gets) / float64(tasks))
	}
	rep.Notes = append(rep.Notes, "each tasks/get is sent as soon as the last answer came, not after pollIntervalMs")
	n := 0
	for _, tc := range clients {
		n += tc.s.requests
	}
	if n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d server-to-client requests on the response streams were not answered", n))
	}
	addWatched(rep, res, ws...)
	return rep, nil
}

// taskCounts are the tasks made and the tasks/get sent, by all clients.
type taskCounts struct {
	tasks, gets atomic.Int64
}

// taskClient is one client of -task, used by one goroutine at a time.
type taskClient struct {
	s      session // no session: its target, buffers and stream reader
	base   http.Header
	call   http.Header // the headers of tools/call
	tmpl   requestTemplate
	check  *checker
	counts *taskCounts
}

func newTaskClient(t *target, c *config, counts *taskCounts) *taskClient {
	base := t.baseHeader()
	base.Set("MCP-Protocol-Version", modernVersion)
	call := base.Clone()
	// The routing headers of 2026-07-28: the method, and the tool or task
	// it is about.
	call.Set("Mcp-Method", "tools/call")
	call.Set("Mcp-Name", c.tool)
	return &taskClient{
		s:      session{t: t, lines: newLineReader(nil, t.buf, maxMessage)},
		base:   base,
		call:   call,
		tmpl:   c.request,
		check:  &c.check,
		counts: counts,
	}
}

// run is the callFunc of one task: its latency runs from sending tools/call
// to the tasks/get that saw it completed.
func (tc *taskClient) run(ctx context.Context) (time.Duration, int, error) {
	s := &tc.s
	s.nextID++
	id := s.nextID
	s.body = tc.tmpl.build(s.body[:0], id)
	start := time.Now()
	st, err := tc.send(ctx, tc.call, id)
	if err != nil {
		return 0, 0, fmt.Errorf("tools/call: %w", err)
	}
	if st.resultType != "task" {
		return 0, 0, fmt.Errorf("tools/call was answered with resultType %.20q, not a task: the server made no task of it (mcpgw makes every call a task with tasks.promote_after: 0s)", st.resultType)
	}
	if err := checkTaskID(st.id); err != nil {
		return 0, 0, err
	}
	tc.counts.tasks.Add(1)
	get := tc.base.Clone()
	get.Set("Mcp-Method", "tasks/get")
	get.Set("Mcp-Name", st.id)
	quoted, _ := json.Marshal(st.id) // cannot fail for a string
	for {
		s.nextID++
		id = s.nextID
		s.body = appendTaskGet(s.body[:0], id, quoted)
		if st, err = tc.send(ctx, get, id); err != nil {
			return 0, 0, fmt.Errorf("tasks/get: %w", err)
		}
		tc.counts.gets.Add(1)
		switch st.status {
		case "working":
			continue
		case "completed":
			lat := time.Since(start)
			if st.result == nil {
				return 0, 0, errors.New("tasks/get: a completed task without its result")
			}
			_, err := tc.check.checkResult(st.result)
			return lat, 0, err
		case "failed":
			if st.err == nil {
				return 0, 0, errors.New("task failed, without an error")
			}
			return 0, 0, fmt.Errorf("task failed: %w", rpcError(st.err))
		case "input_required":
			return 0, 0, errors.New("task input_required: mcpgw-bench answers no input requests")
		default:
			return 0, 0, fmt.Errorf("task status %.20q, want working, completed or failed", st.status)
		}
	}
}

// send posts s.body, request id, with the headers h and returns the task
// of its result.
func (tc *taskClient) send(ctx context.Context, h http.Header, id int64) (taskState, error) {
	resp, err := tc.s.t.post(ctx, h, tc.s.body)
	if err != nil {
		return taskState{}, err
	}
	env, err := tc.s.readAnswer(resp, id)
	if err != nil {
		return taskState{}, err
	}
	result, err := responseResult(env, id)
	if err != nil {
		return taskState{}, err
	}
	return parseTask(result)
}

// appendTaskGet appends the tasks/get of the task whose id is quoted (as
// JSON) to dst.
func appendTaskGet(dst []byte, id int64, quoted []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":"tasks/get","params":{"taskId":`...)
	dst = append(dst, quoted...)
	dst = append(dst, `,"_meta":`...)
	dst = append(dst, taskMeta...)
	return append(dst, "}}"...)
}

// taskState is what the tool reads of a task (tools/call's answer, or
// tasks/get's): the strings decoded, result and error raw. A member that
// is absent is empty.
type taskState struct {
	resultType, id, status string
	result, err            []byte
}

// parseTask reads a task from a result. It checks that the members it
// reads have the right type, not that they are there: the caller knows
// which it needs.
func parseTask(result []byte) (taskState, error) {
	var (
		st  taskState
		bad error
	)
	str := func(name string, value []byte, dst *string) {
		if len(value) == 0 || value[0] != '"' || json.Unmarshal(value, dst) != nil {
			bad = fmt.Errorf("%w: the task's %s is not a string", errMalformed, name)
		}
	}
	err := eachMember(result, func(key, value []byte) {
		switch string(key) {
		case "resultType":
			str("resultType", value, &st.resultType)
		case "taskId":
			str("taskId", value, &st.id)
		case "status":
			str("status", value, &st.status)
		case "result":
			st.result = value
		case "error":
			st.err = value
		}
	})
	if err != nil {
		return taskState{}, fmt.Errorf("the task: %w", err)
	}
	if bad != nil {
		return taskState{}, bad
	}
	return st, nil
}

// checkTaskID refuses a task id the tool cannot send back as the Mcp-Name
// header: empty, too long, or with bytes other than visible ASCII.
func checkTaskID(id string) error {
	if id == "" || len(id) > maxTaskID {
		return fmt.Errorf("the task id is %d bytes, want 1 to %d", len(id), maxTaskID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("the task id %.40q has a byte 0x%02x that cannot go into the Mcp-Name header", id, c)
		}
	}
	return nil
}
