package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
)

// Tasks of MCP 2026-07-28: the io.modelcontextprotocol/tasks extension
// (ext-tasks, specification/draft/tasks.md). Creation is the server's
// choice; the gateway makes it for a call it hosts:
//
//	client ─tools/call (extension declared)─► core runs the call in the background
//	  it answers within promote_after ────────► the plain result
//	  its server's input_required comes first ─► relayed as it is (MRTR)
//	  still running, or its server asks for
//	  input (a 2025 request during the call) ─► a hosted task: resultType "task"
//	tasks/get    ─► the record; result or error inlined, or the pending inputRequests
//	tasks/update ─► answers to pending input requests (unknown keys ignored)
//	tasks/cancel ─► ends the call; an empty ack
//
// Records live in the store beside the 2025 ones, under sealed ids bound
// to the principal (a modern client has no session: the anonymous
// principal's ids are bearer capabilities) and to the era, so that an id
// of one era means nothing in the other. The pending input requests live
// with the call, in the process that runs it.

// ExtTasks is the tasks extension's identifier, in capabilities.extensions.
const ExtTasks = "io.modelcontextprotocol/tasks"

// codeMissingCapability is the 2026-07-28 error of a request that needs a
// client capability its client did not declare.
const codeMissingCapability = -32021

// declaresTasks reports whether a client's capabilities declare the tasks
// extension.
func declaresTasks(caps json.RawMessage) bool {
	ext, ok, err := rawjson.Get(caps, "extensions")
	if !ok || err != nil || len(ext) == 0 || ext[0] != '{' {
		return false
	}
	v, ok, err := rawjson.Get(ext, ExtTasks)
	return ok && err == nil && len(v) > 0 && v[0] == '{'
}

// errNeedsTasks is the -32021 of a tasks/* request whose client did not
// declare the extension.
func errNeedsTasks(method string) error {
	return jsonrpc.NewError(codeMissingCapability,
		fmt.Sprintf("%s needs the %s extension: declare it in params._meta clientCapabilities.extensions", method, ExtTasks),
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtTasks: map[string]any{}}}})
}

// errNotInExtension is the -32601 of the 2025 task methods the extension
// removed.
func errNotInExtension(method string) error {
	return jsonrpc.Errorf(jsonrpc.CodeMethodNotFound,
		"method %q does not exist in the %s extension: tasks/get inlines a finished task's result, and there is no tasks/list", method, ExtTasks)
}

// extTask is what a hosted task of the extension holds while its call
// runs: whether the client was given the task yet, and the input
// requests that wait for tasks/update (box, keyed as parked calls key
// theirs, never reused within the task).
type extTask struct {
	box *inputBox

	mu sync.Mutex
	// promoted: the client was answered with the task, and the call's end
	// goes to the record.
	promoted bool
	// over: the call ended before promotion, and its end goes to the
	// client's tools/call (settled).
	over    bool
	settled chan callEnd  // buffered: the call's end, when over
	promote chan struct{} // buffered: an input request came before promotion
	// notify is the tools/call's sink until promotion: progress of a task
	// is not delivered (the extension has none).
	notify func(method string, params json.RawMessage)
	// fetch: a tasks/result of a task on a 2025-11-25 server runs in the
	// background (taskext_bridge.go).
	fetch bool
}

type callEnd struct {
	body json.RawMessage
	err  error
}

// errTaskOver ends the input requests of a task's call that ended.
var errTaskOver = fmt.Errorf("the task's call ended: %w", ErrCallOver)

// sink passes a notification of the call to its tools/call while there
// is one.
func (x *extTask) sink(method string, params json.RawMessage) {
	x.mu.Lock()
	n := x.notify
	x.mu.Unlock()
	if n != nil {
		n(method, params)
	}
}

// newExtTaskID seals a fresh task id of the extension for owner.
func (s *Server) newExtTaskID(owner string) string {
	b, _ := json.Marshal(taskToken{Nonce: s.relay.mint("t") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), Owner: owner, Modern: true, Replica: s.opts.Replica})
	return s.taskSealer.Seal(b)
}

// extToolsCall serves a 2026-07-28 client's tools/call when the gateway
// may answer it with a task: handled is false when it runs as any call
// (a parked call's follow-up too).
func (s *Server) extToolsCall(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (res *Result, err error, handled bool) {
	if !declaresTasks(req.Client.Capabilities) {
		return nil, nil, false
	}
	relay := s.offersTasks(ref.Server)
	if !relay && !s.opts.TaskConfig.HostsTasks(ptrServer(s.serverConfig(ref.Server))) {
		return nil, nil, false
	}
	if _, err := checkInputResponses(params); err != nil {
		return nil, err, true
	}
	opened, st, err := s.openRequestState(req, ref.Server, "tools/call", params)
	if err != nil {
		return nil, err, true
	}
	if st != nil && st.Parked != "" {
		return nil, nil, false
	}
	params = opened
	if relay {
		res, err := s.extRelayCall(ctx, req, ref, params)
		return res, err, true
	}
	cfg := s.opts.TaskConfig
	o := owner(req)
	s.tasks.mu.Lock()
	if s.tasks.closing || s.tasks.hosted[o] >= cfg.MaxHostedPerPrincipal {
		// Over the cap the call runs without a task: the extension
		// leaves the choice to the server.
		s.tasks.mu.Unlock()
		return nil, nil, false
	}
	s.tasks.hosted[o]++
	s.tasks.bg.Add(1)
	s.tasks.mu.Unlock()

	ttl := min(time.Duration(cfg.DefaultTTL), time.Duration(cfg.MaxTTL))
	now := time.Now()
	rec := store.Task{
		ID: s.newExtTaskID(o), Owner: o, Server: ref.Server, Hosted: true, Transport: s.serverConfig(ref.Server).Transport,
		Tool: req.toolName, Status: taskWorking, CreatedAt: now, UpdatedAt: now, TTL: &ttl,
		PollInterval: time.Duration(cfg.PollInterval), ExpiresAt: now.Add(ttl),
	}
	runCtx, cancel := context.WithDeadline(s.life, rec.ExpiresAt)
	runCtx, cancelCause := context.WithCancelCause(runCtx)
	x := &extTask{box: newInputBox(), settled: make(chan callEnd, 1), promote: make(chan struct{}, 1), notify: req.Notify}
	// A server's first request makes the call a task, if it is not one
	// yet.
	x.box.admit = func() error {
		select {
		case x.promote <- struct{}{}:
		default:
		}
		return nil
	}
	lt := &liveTask{cancel: cancelCause, done: make(chan struct{}), ext: x}

	bgReq := *req
	bgReq.Params = append(json.RawMessage(nil), params...) // req's may be reused once Handle returns
	bgReq.members = paramsMembers{}
	bgReq.Cancel = nil // the call may outlive the request
	bgReq.Notify = x.sink
	bgReq.Input = x.box.ask
	// promote makes the call a task: durably recorded before the client
	// learns its id, so that a tasks/get right after the answer finds it
	// (x.mu held).
	promote := func() error {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		if err := s.opts.Tasks.PutTask(sctx, rec); err != nil {
			s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
			return jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not record the task; try again")
		}
		x.promoted = true
		x.notify = nil
		s.tasks.mu.Lock()
		s.tasks.live[rec.ID] = lt
		s.tasks.mu.Unlock()
		return nil
	}
	if cfg.PromoteAfter == 0 {
		// Every such call is a task, before it starts.
		x.mu.Lock()
		err := promote()
		x.mu.Unlock()
		if err != nil {
			s.tasks.mu.Lock()
			if s.tasks.hosted[o]--; s.tasks.hosted[o] <= 0 {
				delete(s.tasks.hosted, o)
			}
			s.tasks.mu.Unlock()
			s.tasks.bg.Done()
			cancel()
			return nil, err, true
		}
	}
	go func() {
		defer s.tasks.bg.Done()
		defer cancel()
		defer close(lt.done)
		body, err := s.runExtCall(runCtx, &bgReq, ref.Server, x)
		x.box.close(errTaskOver)
		s.tasks.mu.Lock()
		if s.tasks.hosted[o]--; s.tasks.hosted[o] <= 0 {
			delete(s.tasks.hosted, o)
		}
		s.tasks.mu.Unlock()
		x.mu.Lock()
		if !x.promoted {
			x.over = true
			x.mu.Unlock()
			x.settled <- callEnd{body, err}
			return
		}
		x.mu.Unlock()
		s.settleHosted(runCtx, &bgReq, rec, body, err, true)
	}()

	if cfg.PromoteAfter == 0 {
		return &Result{Type: ResultTask, Body: extTaskJSON(rec, nil)}, nil, true
	}
	timer := time.NewTimer(time.Duration(cfg.PromoteAfter))
	defer timer.Stop()
	select {
	case end := <-x.settled:
		res, err := s.extAnswer(req, ref.Server, end)
		return res, err, true
	case <-timer.C:
	case <-x.promote:
	case <-ctx.Done():
		cancelCause(context.Cause(ctx))
		return nil, ctx.Err(), true
	}
	x.mu.Lock()
	if x.over {
		x.mu.Unlock()
		res, err := s.extAnswer(req, ref.Server, <-x.settled)
		return res, err, true
	}
	if err := promote(); err != nil {
		x.mu.Unlock()
		cancelCause(errors.New("the gateway could not record the task"))
		return nil, err, true
	}
	x.mu.Unlock()
	return &Result{Type: ResultTask, Body: extTaskJSON(rec, nil)}, nil, true
}

// extAnswer is the tools/call answer of a call that ended before it became
// a task.
func (s *Server) extAnswer(req *Request, server string, end callEnd) (*Result, error) {
	body, err := s.urlInputRequired(req, server, "tools/call", end.body, end.err)
	if err != nil {
		return nil, err
	}
	if res, ok := s.inputRequired(req, server, "tools/call", body); ok {
		return res, nil
	}
	return complete(s.exposeResult(s.cat.Load(), req, server, body, "content", false)), nil
}

// runExtCall makes the call of a hosted task of the extension. A
// 2026-07-28 server's input_required ends it while the client still waits
// for its tools/call (the client answers it as any); once the call is a
// task, the core drives the rounds, asking through the task's input
// requests.
func (s *Server) runExtCall(ctx context.Context, req *Request, server string, x *extTask) (json.RawMessage, error) {
	params := req.Params // its requestState, if any, the server's own
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, req.Notify, nil)
	if err != nil {
		return nil, err
	}
	defer forget()
	who := upstream.Caller{Principal: req.Principal, Session: req.Session}
	ttl := time.Duration(s.opts.TaskConfig.DefaultTTL)
	body, err := s.forwardAs(ctx, req, server, who, "tools/call", params, ttl, 0)
	if err != nil || !isInputRequired(body) {
		return body, err
	}
	x.mu.Lock()
	promoted := x.promoted
	if !promoted {
		x.over = true // decided here: the client gets it as it is
	}
	x.mu.Unlock()
	if !promoted {
		return body, nil
	}
	return s.driveTaskInput(ctx, req, server, who, params, body)
}

// driveTaskInput answers a 2026-07-28 server's input_required results for
// a hosted task: every input request of a round waits at once as the
// task's (a client may answer them in any order, some now, some later),
// then the server is called again with the answers and its state; at most
// maxInputRounds rounds.
func (s *Server) driveTaskInput(ctx context.Context, req *Request, server string, who upstream.Caller, params, body json.RawMessage) (json.RawMessage, error) {
	asker := clientAsker{caps: req.Client.Capabilities, input: req.Input, noInput: "the task cannot ask its client"}
	for round := 1; isInputRequired(body); round++ {
		keys, msgs, err := s.inputRound(server, "tools/call", round, body)
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithCancel(ctx)
		answers := make([]json.RawMessage, len(msgs))
		errs := make([]error, len(msgs))
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Go(func() {
				answers[i], errs[i] = s.ask(actx, server, who, m, asker)
				if errs[i] != nil {
					cancel()
				}
			})
		}
		wg.Wait()
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		responses := make(map[string]json.RawMessage, len(keys))
		for i, k := range keys {
			responses[k] = answers[i]
		}
		next, err := nextRound(params, body, responses)
		if err != nil {
			return nil, err
		}
		if body, err = s.forwardAs(ctx, req, server, who, "tools/call", next, time.Duration(s.opts.TaskConfig.DefaultTTL), 0); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// settleHosted records how a hosted task's call ended: its result, or its
// JSON-RPC error, or why it did not finish. In the extension (modern) a
// result with isError is completed; in 2025-11-25 it is failed. A task
// the client cancelled stays cancelled.
func (s *Server) settleHosted(runCtx context.Context, req *Request, rec store.Task, body json.RawMessage, err error, modern bool) store.Task {
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	cur, gerr := s.opts.Tasks.GetTask(sctx, rec.ID)
	if gerr != nil {
		cur = rec
	}
	if cur.Status == taskCancelled {
		s.taskEnded(cur)
		return cur
	}
	var jerr *jsonrpc.Error
	switch {
	case err == nil:
		cur.Result = s.exposeResult(s.cat.Load(), req, rec.Server, body, "content", false)
		cur.Status, cur.StatusMessage = taskCompleted, ""
		if isErr, _, _ := rawjson.Get(body, "isError"); string(isErr) == "true" && !modern {
			cur.Status = taskFailed
		}
	case errors.As(err, &jerr):
		cur.Error, cur.Status = mustJSON(jerr), taskFailed
		cur.StatusMessage = jerr.Message
	default:
		cur.Status, cur.StatusMessage = taskFailed, err.Error()
		switch {
		case s.life.Err() != nil:
			cur.StatusMessage = "the gateway shut down while the task ran"
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(runCtx), context.DeadlineExceeded):
			cur.StatusMessage = "the task's ttl passed before the call finished"
		}
		cur.Error = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", cur.StatusMessage))
	}
	cur.UpdatedAt = time.Now()
	s.saveTask(cur)
	return cur
}

// extTaskJSON is a record as the extension's task object: the flat Task,
// and the DetailedTask members of its status (inputs: the pending input
// requests of a running task, or nil).
func extTaskJSON(rec store.Task, inputs json.RawMessage) json.RawMessage {
	status := rec.Status
	if status == taskFailed && rec.Error == nil && rec.Result != nil {
		// A 2025-11-25 server's tool error: in the extension, a result.
		status = taskCompleted
	}
	if inputs != nil && !terminal(status) {
		status = taskInputRequired
	} else if status == taskInputRequired {
		// Its requests are gone (answered, or timed out): it works.
		status = taskWorking
	}
	t := map[string]any{
		"taskId":        rec.ID,
		"status":        status,
		"createdAt":     rec.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": rec.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"ttlMs":         nil,
	}
	if rec.TTL != nil {
		t["ttlMs"] = rec.TTL.Milliseconds()
	}
	if rec.PollInterval > 0 {
		t["pollIntervalMs"] = max(rec.PollInterval.Milliseconds(), 1)
	}
	if rec.StatusMessage != "" {
		t["statusMessage"] = rec.StatusMessage
	}
	switch {
	case status == taskInputRequired:
		t["inputRequests"] = inputs
	case status == taskCompleted && rec.Result != nil:
		// The task id is the answer's own; related-task _meta would say
		// it twice.
		t["result"] = withRelatedTask(rec.Result, "")
	case status == taskFailed:
		e := rec.Error
		if e == nil {
			e = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", rec.StatusMessage))
		}
		t["error"] = e
	}
	return mustJSON(t)
}

// extLookup returns the record of the task a modern request names, after
// the checks every tasks/* request of the extension gets.
func (s *Server) extLookup(ctx context.Context, req *Request) (store.Task, error) {
	if !declaresTasks(req.Client.Capabilities) {
		return store.Task{}, errNeedsTasks(req.Method)
	}
	return s.lookupTask(ctx, req)
}

// live returns the in-process state of a hosted task of the extension,
// or nil.
func (s *Server) extLive(id string) *extTask {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	if lt := s.tasks.live[id]; lt != nil {
		return lt.ext
	}
	return nil
}

// elsewhere returns, for a request about the unfinished task rec that
// another replica made, an ElsewhereError naming that replica: its call,
// its waiting input requests and the server session that knows it live
// there. fallback, if not nil, answers when that replica cannot be
// reached. A finished task is served from its record by any replica.
func (s *Server) elsewhere(rec store.Task, fallback func() (*Result, error)) error {
	owner := s.taskReplica(rec.ID)
	if terminal(rec.Status) || owner == s.opts.Replica {
		return nil
	}
	return &ElsewhereError{Replica: owner, Fallback: fallback,
		err: jsonrpc.Errorf(jsonrpc.CodeInternalError, "the task runs on gateway replica %q, which cannot be reached now; try again", owner)}
}

// extTasksGet serves tasks/get of the extension.
func (s *Server) extTasksGet(ctx context.Context, req *Request) (*Result, error) {
	rec, err := s.extLookup(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.elsewhere(rec, func() (*Result, error) { return complete(extTaskJSON(rec, nil)), nil }); err != nil {
		return nil, err
	}
	if !rec.Hosted {
		if s.bridged(rec) {
			return s.extBridgedGet(ctx, req, rec)
		}
		return s.extRelayedGet(ctx, req, rec)
	}
	var inputs json.RawMessage
	if x := s.extLive(rec.ID); x != nil && x.box.len() > 0 {
		inputs = x.box.requests(forModernClient)
	}
	return complete(extTaskJSON(rec, inputs)), nil
}

// extTasksUpdate serves tasks/update: the answers to a task's pending
// input requests.
func (s *Server) extTasksUpdate(ctx context.Context, req *Request) (*Result, error) {
	if !modernClient(req) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method \"tasks/update\" exists only in the %s extension of protocol version 2026-07-28", ExtTasks)
	}
	if !declaresTasks(req.Client.Capabilities) {
		return nil, errNeedsTasks(req.Method)
	}
	responses, err := checkInputResponses(req.Params)
	if err != nil {
		return nil, err
	}
	if responses == nil {
		return nil, invalidParams("tasks/update needs params.inputResponses, an object of the input requests' results, keyed as inputRequests named them")
	}
	rec, err := s.extLookup(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.elsewhere(rec, nil); err != nil {
		return nil, err
	}
	if !rec.Hosted && !s.bridged(rec) {
		if terminal(rec.Status) {
			return complete(json.RawMessage(`{}`)), nil
		}
		if _, err := s.extUpstream(ctx, req, rec, "tasks/update"); err != nil {
			return nil, err
		}
		return complete(json.RawMessage(`{}`)), nil
	}
	if x := s.extLive(rec.ID); x != nil {
		x.box.deliver(responses)
	}
	return complete(json.RawMessage(`{}`)), nil
}

// extTasksCancel serves tasks/cancel of the extension: an empty ack,
// whatever the task's status.
func (s *Server) extTasksCancel(ctx context.Context, req *Request) (*Result, error) {
	rec, err := s.extLookup(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.elsewhere(rec, func() (*Result, error) {
		// Its replica cannot be reached: the record says cancelled, and
		// the call, if it still runs there, ends unread.
		rec.Status, rec.StatusMessage, rec.UpdatedAt = taskCancelled, "cancelled by the client", time.Now()
		s.saveTask(rec)
		return complete(json.RawMessage(`{}`)), nil
	}); err != nil {
		return nil, err
	}
	if !terminal(rec.Status) && !rec.Hosted {
		if s.bridged(rec) {
			s.extBridgedCancel(ctx, req, rec)
		} else if _, err := s.extUpstream(ctx, req, rec, "tasks/cancel"); err != nil {
			return nil, err
		}
	}
	if !terminal(rec.Status) && rec.Hosted {
		s.tasks.mu.Lock()
		lt := s.tasks.live[rec.ID]
		s.tasks.mu.Unlock()
		rec.Status, rec.StatusMessage, rec.UpdatedAt = taskCancelled, "cancelled by the client", time.Now()
		s.saveTask(rec)
		if lt != nil && lt.cancel != nil {
			lt.cancel(errors.New("task cancelled by the client"))
		}
		if lt != nil && lt.ext != nil {
			lt.ext.box.close(errTaskOver)
		}
	}
	return complete(json.RawMessage(`{}`)), nil
}

// offersTasks reports whether server is a 2026-07-28 server that offers
// the tasks extension itself: its tasks are relayed, not hosted.
func (s *Server) offersTasks(server string) bool {
	for _, st := range s.opts.Upstreams.Servers() {
		if st.Name == server {
			return st.Era == upstream.EraModern && declaresTasks(st.Capabilities)
		}
	}
	return false
}

// extRelayCall relays a tools/call to a server that offers the tasks
// extension, told that the client declared it: a task it answers is
// recorded under a sealed id of ours before the client learns of it; any
// other answer is a call's. params are the call's, the server's tool
// name and state in them.
func (s *Server) extRelayCall(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	callerKey, who := s.callerKey(ref.Server, req)
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, req.Notify, nil)
	if err != nil {
		return nil, err
	}
	defer forget()
	req.takesTasks = true
	body, err := s.forwardAs(ctx, req, ref.Server, who, "tools/call", params, 0, onlyCall)
	if body, err = s.urlInputRequired(req, ref.Server, "tools/call", body, err); err != nil {
		return nil, err
	}
	if typ, _ := rawjson.String(body, "resultType"); typ != string(ResultTask) {
		if res, ok := s.inputRequired(req, ref.Server, "tools/call", body); ok {
			return res, nil
		}
		return complete(s.exposeResult(s.cat.Load(), req, ref.Server, body, "content", false)), nil
	}
	upID, _ := rawjson.String(body, "taskId")
	if upID == "" {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError,
			fmt.Sprintf("server %q answered a task without a taskId", ref.Server), errorData{Server: ref.Server})
	}
	now := time.Now()
	o := owner(req)
	rec := store.Task{
		ID: s.newExtTaskID(o), Owner: o, Server: ref.Server, Caller: callerKey, UpstreamID: upID,
		Transport: s.serverConfig(ref.Server).Transport, Tool: req.toolName, Status: taskWorking,
		CreatedAt: now, UpdatedAt: now,
	}
	applyExtTask(&rec, body)
	if rec.TTL == nil {
		// The server keeps it for ever; the gateway keeps its record at
		// most as long as it keeps any task.
		rec.ExpiresAt = now.Add(time.Duration(s.opts.TaskConfig.MaxTTL))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.opts.Tasks.PutTask(sctx, rec); err != nil {
		s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
		if _, cerr := s.opts.Upstreams.Call(sctx, ref.Server, who, "tasks/cancel", mustJSON(map[string]string{"taskId": upID}), &upstream.CallHooks{Capabilities: req.Client.Capabilities, TakesTasks: true}); cerr != nil {
			s.logger.Debug("cancelling a task upstream failed", "server", ref.Server, "err", cerr)
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not record the task; try again")
	}
	out, err := rawjson.Delete(withTaskID(body, rec.ID), "resultType")
	if err != nil {
		out = withTaskID(body, rec.ID)
	}
	return &Result{Type: ResultTask, Body: out}, nil
}

// applyExtTask updates a record from a task object of the extension.
func applyExtTask(rec *store.Task, task json.RawMessage) {
	if st, ok := rawjson.String(task, "status"); ok && !terminal(rec.Status) {
		switch st {
		case taskWorking, taskInputRequired, taskCompleted, taskFailed, taskCancelled:
			rec.Status = st
		}
	}
	if m, ok := rawjson.String(task, "statusMessage"); ok {
		rec.StatusMessage = storable(m)
	}
	if ttl, ok, _ := rawjson.Get(task, "ttlMs"); ok {
		var ms *int64
		if json.Unmarshal(ttl, &ms) == nil {
			if ms == nil {
				rec.TTL = nil
			} else if *ms > 0 {
				d := time.Duration(*ms) * time.Millisecond
				rec.TTL = &d
				rec.ExpiresAt = rec.CreatedAt.Add(d)
			}
		}
	}
	if p, ok, _ := rawjson.Get(task, "pollIntervalMs"); ok {
		var ms int64
		if json.Unmarshal(p, &ms) == nil && ms > 0 {
			rec.PollInterval = time.Duration(ms) * time.Millisecond
		}
	}
	rec.UpdatedAt = time.Now()
}

// extUpstream sends a relayed task's tasks/* request to its server, under
// the server's id, as the client's (the extension declared).
func (s *Server) extUpstream(ctx context.Context, req *Request, rec store.Task, method string) (json.RawMessage, error) {
	params := mustJSON(map[string]string{"taskId": rec.UpstreamID})
	if method == "tasks/update" {
		responses, err := checkInputResponses(req.Params)
		if err != nil {
			return nil, err
		}
		params = mustJSON(map[string]any{"taskId": rec.UpstreamID, "inputResponses": responses})
	}
	req.takesTasks = true
	return s.forwardAs(ctx, req, rec.Server, callerOf(rec), method, params, 0, onlyCall)
}

// extRelayedGet serves tasks/get of a relayed task: from the record once
// it kept the end, else from the server, its result rewritten as a
// call's (names, media) and kept once the task is over.
func (s *Server) extRelayedGet(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	if terminal(rec.Status) && (rec.Result != nil || rec.Error != nil || rec.Status == taskCancelled) {
		return complete(extTaskJSON(rec, nil)), nil
	}
	body, err := s.extUpstream(ctx, req, rec, "tasks/get")
	if err != nil {
		if s.forgotten(&rec, err) {
			return complete(extTaskJSON(rec, nil)), nil
		}
		return nil, err
	}
	applyExtTask(&rec, body)
	out := withTaskID(body, rec.ID)
	switch rec.Status {
	case taskCompleted:
		if res, ok, _ := rawjson.Get(body, "result"); ok {
			rec.Result = s.exposeResult(s.cat.Load(), req, rec.Server, withRelatedTask(res, ""), "content", false)
			if o, err := rawjson.Set(out, "result", rec.Result); err == nil {
				out = o
			}
		}
	case taskFailed:
		if e, ok, _ := rawjson.Get(body, "error"); ok {
			rec.Error = append(json.RawMessage(nil), e...)
		}
	}
	s.saveTask(rec)
	return complete(out), nil
}
