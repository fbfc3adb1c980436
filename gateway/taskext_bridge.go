package gateway

import (
	"context"
	"encoding/json"
	"errors"
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
		var jerr *jsonrpc.Error
		if errors.As(err, &jerr) && jerr.Code == jsonrpc.CodeInvalidParams {
			rec.Status, rec.StatusMessage, rec.UpdatedAt = taskFailed, fmt.Sprintf("server %q no longer knows this task", rec.Server), time.Now()
			rec.Error = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", rec.StatusMessage))
			s.saveTask(rec)
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
