package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/store"
)

// Tasks across eras: a 2026-07-28 client's task on a 2025-11-25 server
// whose tool runs as a task there (execution.taskSupport optional or
// required):
//
//	client ─tools/call (extension)─► core ─tools/call + task {ttl}─► server
//	client ◄─resultType task, flat, our id── core ◄─CreateTaskResult {task}──
//	client ─tasks/get─► core ─tasks/get─► server; once terminal, tasks/result
//	                    once, kept and inlined (isError: completed)
//	  input_required: core ─tasks/result─► server, in the background; the
//	  server's requests on it wait as the task's inputRequests, and
//	  tasks/update answers them
//	client ─tasks/cancel─► core ─tasks/cancel─► server; an empty ack

// bridgesTasks reports whether a 2026-07-28 client's call of a tool with
// the 2025 task support support runs as a task of the server's own.
func bridgesTasks(support string) bool { return support == "optional" || support == "required" }

// extLegacyCall creates a task on a 2025-11-25 server for a 2026-07-28
// client that declared the extension, and answers with it flat, under a
// sealed id of ours, recorded first. params are the call's, the server's
// tool name in them.
func (s *Server) extLegacyCall(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	callerKey, who := s.callerKey(ref.Server, req)
	ttl := min(time.Duration(s.opts.TaskConfig.DefaultTTL), time.Duration(s.opts.TaskConfig.MaxTTL))
	params, err := rawjson.Set(params, "task", mustJSON(map[string]int64{"ttl": ttl.Milliseconds()}))
	if err != nil {
		return nil, invalidParams("params must be a JSON object")
	}
	// A task has no progress in the extension: the server's goes
	// nowhere, under a token of ours.
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, func(string, json.RawMessage) {}, nil)
	if err != nil {
		return nil, err
	}
	body, err := s.forwardAs(ctx, req, ref.Server, who, "tools/call", params, 0, onlyCall)
	if body, err = s.urlInputRequired(req, ref.Server, "tools/call", body, err); err != nil {
		forget()
		return nil, err
	}
	task, ok, _ := rawjson.Get(body, "task")
	upID, _ := rawjson.String(task, "taskId")
	if !ok || upID == "" {
		forget()
		return complete(s.exposeResult(s.cat.Load(), req, ref.Server, body, "content", false)), nil
	}
	now := time.Now()
	o := owner(req)
	rec := store.Task{
		ID: s.newExtTaskID(o), Owner: o, Server: ref.Server, Caller: callerKey, UpstreamID: upID,
		Transport: s.serverConfig(ref.Server).Transport, Tool: req.toolName, Status: taskWorking,
		CreatedAt: now, UpdatedAt: now,
	}
	applyTask(&rec, task)
	rec.UpdatedAt = now
	if rec.TTL == nil {
		rec.ExpiresAt = now.Add(time.Duration(s.opts.TaskConfig.MaxTTL))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.opts.Tasks.PutTask(sctx, rec); err != nil {
		forget()
		s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
		if _, cerr := s.opts.Upstreams.Call(sctx, ref.Server, who, "tasks/cancel", mustJSON(map[string]string{"taskId": upID}), nil); cerr != nil {
			s.logger.Debug("cancelling a task upstream failed", "server", ref.Server, "err", cerr)
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not record the task; try again")
	}
	s.tasks.mu.Lock()
	s.tasks.byUpstream[upstreamTask{ref.Server, callerKey, upID}] = rec.ID
	s.tasks.live[rec.ID] = &liveTask{forget: forget, ext: &extTask{box: newInputBox()}}
	s.tasks.mu.Unlock()
	return &Result{Type: ResultTask, Body: extTaskJSON(rec, nil)}, nil
}

// bridged reports whether a record is a 2026-07-28 client's task on a
// 2025-11-25 server (not one a server of the extension keeps).
func (s *Server) bridged(rec store.Task) bool {
	return !rec.Hosted && rec.UpstreamID != "" && !s.offersTasks(rec.Server)
}

// extBridgedGet serves tasks/get of a task on a 2025-11-25 server: the
// record once it kept the end; else the server's tasks/get, and its
// tasks/result once the task is over (kept), or, while it asks for input,
// in the background, its requests waiting as the task's.
func (s *Server) extBridgedGet(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	if terminal(rec.Status) && (rec.Result != nil || rec.Error != nil || rec.Status == taskCancelled) {
		return complete(extTaskJSON(rec, nil)), nil
	}
	x := s.extLive(rec.ID)
	if x != nil && x.fetching() {
		// A tasks/result is under way: the server asks through it.
		var inputs json.RawMessage
		if x.box.len() > 0 {
			inputs = x.box.requests(forTaskClient)
		}
		return complete(extTaskJSON(rec, inputs)), nil
	}
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/get", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, onlyCall)
	if err != nil {
		if s.forgotten(&rec, err) {
			return complete(extTaskJSON(rec, nil)), nil
		}
		return nil, err
	}
	applyTask(&rec, body)
	switch {
	case wantsResult(rec):
		s.saveTask(rec)
		rec = s.keepResult(ctx, req, rec)
	case rec.Status == taskInputRequired && x != nil:
		s.saveTask(rec)
		s.fetchInBackground(req, rec, x)
	default:
		s.saveTask(rec)
	}
	return complete(extTaskJSON(rec, nil)), nil
}

// forTaskClient rewrites a 2025 server's request during a task as one of
// a task's inputRequests: no elicitationId (forModernClient), no
// related-task _meta (the task is the one asked about).
func forTaskClient(method string, params json.RawMessage) json.RawMessage {
	return withRelatedTask(forModernClient(method, params), "")
}

// fetching reports whether a background tasks/result of the task runs.
func (x *extTask) fetching() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.fetch
}

// fetchInBackground asks a 2025-11-25 server for a task's result while it
// waits for input, once: its requests on that tasks/result wait in the
// task's box for tasks/update, and its end is kept.
func (s *Server) fetchInBackground(req *Request, rec store.Task, x *extTask) {
	x.mu.Lock()
	if x.fetch {
		x.mu.Unlock()
		return
	}
	x.fetch = true
	x.mu.Unlock()
	s.tasks.mu.Lock()
	if s.tasks.closing {
		s.tasks.mu.Unlock()
		return
	}
	s.tasks.bg.Add(1)
	s.tasks.mu.Unlock()
	bg := &Request{Method: "tasks/result", Principal: req.Principal, Groups: req.Groups, Client: req.Client,
		BaseURL: req.BaseURL, Input: x.box.ask}
	deadline := taskDeadline(rec, time.Duration(s.opts.TaskConfig.DefaultTTL))
	go func() {
		defer s.tasks.bg.Done()
		ctx, cancel := context.WithDeadline(s.life, deadline)
		defer cancel()
		if _, _, err := s.fetchResult(ctx, bg, rec, time.Until(deadline)); err != nil {
			s.logger.Debug("fetching a task's result failed", "server", rec.Server, "err", err)
		}
		x.mu.Lock()
		x.fetch = false
		x.mu.Unlock()
	}()
}

// extBridgedCancel sends tasks/cancel of a task on a 2025-11-25 server to
// it, and records what it answers.
func (s *Server) extBridgedCancel(ctx context.Context, req *Request, rec store.Task) {
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/cancel", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, onlyCall)
	if err != nil {
		// A task the server finished or forgot: the ack stands.
		s.logger.Debug("cancelling a task upstream failed", "server", rec.Server, "err", err)
		return
	}
	applyTask(&rec, body)
	s.saveTask(rec)
}

// Tasks across eras, the other way: a 2025-11-25 client's task-augmented
// call of a tool of a 2026-07-28 server that offers the extension:
//
//	client ─tools/call + task─► core ─tools/call (extension declared)─► server
//	client ◄─CreateTaskResult {task}── core ◄─resultType task── server
//	  (a plain result: a task of the gateway's, completed at once)
//	client ─tasks/get─► core ─tasks/get─► server (result kept once over)
//	client ─tasks/result─► core: tasks/get at pollIntervalMs until over; an
//	  input_required task's inputRequests are asked of the client as 2025
//	  requests tied to the task, and answered with tasks/update
//	client ─tasks/cancel─► core ─tasks/cancel─► server

// legacyExtTask runs a 2025-11-25 client's task on a server that offers
// the extension. params are the call's, the server's tool name in them.
func (s *Server) legacyExtTask(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	callerKey, who := s.callerKey(ref.Server, req)
	params, _ = rawjson.Delete(params, "task")
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, req.SessionNotify, nil)
	if err != nil {
		return nil, err
	}
	req.takesTasks = true
	body, err := s.forwardAs(ctx, req, ref.Server, who, "tools/call", params, 0, 0)
	if err == nil && isInputRequired(body) {
		// Input before the task: asked of the client now (MRTR rounds).
		body, err = s.driveInput(ctx, req, ref.Server, "tools/call", who, params, body, 0)
	}
	if err != nil {
		forget()
		return nil, err
	}
	now := time.Now()
	o := owner(req)
	rec := store.Task{
		ID: s.newTaskID(o), Owner: o, Server: ref.Server, Caller: callerKey,
		Transport: s.serverConfig(ref.Server).Transport, Tool: req.toolName, Status: taskWorking,
		CreatedAt: now, UpdatedAt: now,
	}
	if typ, _ := rawjson.String(body, "resultType"); typ == string(ResultTask) {
		rec.UpstreamID, _ = rawjson.String(body, "taskId")
		if rec.UpstreamID == "" {
			forget()
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError,
				fmt.Sprintf("server %q answered a task without a taskId", ref.Server), errorData{Server: ref.Server})
		}
		applyExtTask(&rec, body)
		if rec.TTL == nil {
			rec.ExpiresAt = now.Add(time.Duration(s.opts.TaskConfig.MaxTTL))
		}
	} else {
		// The server answered at once; the client asked for a task, and
		// gets one, finished.
		forget()
		forget = noForget
		ttl := min(time.Duration(s.opts.TaskConfig.DefaultTTL), time.Duration(s.opts.TaskConfig.MaxTTL))
		rec.Hosted, rec.TTL, rec.ExpiresAt = true, &ttl, now.Add(ttl)
		rec.PollInterval = time.Duration(s.opts.TaskConfig.PollInterval)
		rec.Result = s.exposeResult(s.cat.Load(), req, ref.Server, body, "content", false)
		rec.Status = taskCompleted
		if isErr, _, _ := rawjson.Get(body, "isError"); string(isErr) == "true" {
			rec.Status = taskFailed
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.opts.Tasks.PutTask(sctx, rec); err != nil {
		forget()
		s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not record the task; try again")
	}
	if rec.UpstreamID != "" {
		s.tasks.mu.Lock()
		s.tasks.byUpstream[upstreamTask{ref.Server, callerKey, rec.UpstreamID}] = rec.ID
		s.tasks.live[rec.ID] = &liveTask{notify: req.SessionNotify, forget: forget}
		s.tasks.mu.Unlock()
	}
	return complete(mustJSON(map[string]json.RawMessage{"task": taskJSON(rec)})), nil
}

// extKept reports whether a relayed task's record holds its end.
func extKept(rec store.Task) bool {
	return terminal(rec.Status) && (rec.Result != nil || rec.Error != nil || rec.Status == taskCancelled)
}

// pollExt asks a server of the extension for a 2025 client's task
// (tasks/get) and records what it says: a result rewritten as a call's
// (a tool error failed, the 2025 way), an error. It returns the record
// and the server's task.
func (s *Server) pollExt(ctx context.Context, req *Request, rec store.Task) (store.Task, json.RawMessage, error) {
	req.takesTasks = true
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/get", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, 0)
	if err != nil {
		if s.forgotten(&rec, err) {
			return rec, nil, nil
		}
		return rec, nil, err
	}
	applyExtTask(&rec, body)
	switch rec.Status {
	case taskCompleted:
		if res, ok, _ := rawjson.Get(body, "result"); ok {
			rec.Result = s.exposeResult(s.cat.Load(), req, rec.Server, res, "content", false)
			if isErr, _, _ := rawjson.Get(res, "isError"); string(isErr) == "true" {
				rec.Status = taskFailed
			}
		}
	case taskFailed:
		if e, ok, _ := rawjson.Get(body, "error"); ok {
			rec.Error = append(json.RawMessage(nil), e...)
		}
	}
	s.saveTask(rec)
	return rec, body, nil
}

// legacyExtGet serves a 2025 client's tasks/get of its task on a server
// of the extension.
func (s *Server) legacyExtGet(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	if !extKept(rec) {
		var err error
		if rec, _, err = s.pollExt(ctx, req, rec); err != nil {
			return nil, err
		}
	}
	return complete(taskJSON(rec)), nil
}

// legacyExtResult serves a 2025 client's tasks/result of its task on a
// server of the extension: it polls the server's tasks/get until the task
// is over, asking the client the task's input requests as 2025 requests
// tied to the task and answering them with tasks/update.
func (s *Server) legacyExtResult(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	deadline := taskDeadline(rec, time.Duration(s.opts.TaskConfig.DefaultTTL))
	asker := clientAsker{session: req.Session, caps: req.Client.Capabilities, input: req.Input, notify: req.SessionNotify,
		noInput: "the client's request cannot carry a request to it"}
	for {
		if extKept(rec) {
			if rec.Status == taskCancelled {
				return nil, errCancelled(rec)
			}
			return storedResult(rec)
		}
		rec2, body, err := s.pollExt(ctx, req, rec)
		if err != nil {
			return nil, err
		}
		rec = rec2
		if rec.Status == taskInputRequired {
			if err := s.answerExtInput(ctx, req, rec, body, asker); err != nil {
				return nil, err
			}
			continue
		}
		if extKept(rec) {
			continue
		}
		wait := min(max(rec.PollInterval, minPoll), maxPoll, time.Until(deadline))
		if wait <= 0 {
			return nil, timedOut(rec.Server, "tasks/result", time.Since(rec.CreatedAt))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// answerExtInput asks a 2025 client a server's input requests of its task
// (body, the server's tasks/get), each tied to the task, and sends the
// answers with tasks/update.
func (s *Server) answerExtInput(ctx context.Context, req *Request, rec store.Task, body json.RawMessage, asker clientAsker) error {
	requests, _, _ := rawjson.Get(body, "inputRequests")
	responses := map[string]json.RawMessage{}
	var bad error
	rawjson.Members(requests, func(key, val []byte) bool {
		name, err := rawjson.Unquote(key)
		if err != nil {
			return true
		}
		method, _ := rawjson.String(val, "method")
		params, _, _ := rawjson.Get(val, "params")
		switch method {
		case "elicitation/create", "sampling/createMessage", "roots/list":
		default:
			bad = jsonrpc.NewError(jsonrpc.CodeInternalError,
				fmt.Sprintf("server %q asked for input of an unknown kind %q", rec.Server, method), errorData{Server: rec.Server})
			return false
		}
		if mode, _ := rawjson.String(params, "mode"); method == "elicitation/create" && mode == "url" {
			if !s.userBound(rec.Server) {
				bad = refusedURLElicitation(rec.Server)
				return false
			}
			if _, ok := rawjson.String(params, "elicitationId"); !ok {
				if p, err := setString(params, "elicitationId", s.relay.mint("e")); err == nil {
					params = p
				}
			}
		}
		res, err := s.askClient(ctx, rec.Server, method, mustRelated(params, rec.ID), asker)
		if err != nil {
			bad = err
			return false
		}
		responses[name] = withRelatedTask(res, "")
		return true
	})
	if bad != nil {
		return bad
	}
	if len(responses) == 0 {
		return nil
	}
	req.takesTasks = true
	_, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/update",
		mustJSON(map[string]any{"taskId": rec.UpstreamID, "inputResponses": responses}), 0, 0)
	return err
}

// legacyExtCancel serves a 2025 client's tasks/cancel of its task on a
// server of the extension: the server is asked, and the task is
// cancelled for the client.
func (s *Server) legacyExtCancel(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	req.takesTasks = true
	if _, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/cancel", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, 0); err != nil {
		return nil, err
	}
	rec.Status, rec.StatusMessage, rec.UpdatedAt = taskCancelled, "cancelled by the client", time.Now()
	s.saveTask(rec)
	return complete(taskJSON(rec)), nil
}
