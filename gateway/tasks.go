package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
)

// Tasks (MCP 2025-11-25, basic/utilities/tasks). Three paths:
//
//	relay         client ─tools/call+task─► gateway ─tools/call+task─► server
//	              (the server's task id is replaced by a sealed gateway id;
//	              tasks/get|result|cancel go to the server under its own id)
//	block & poll  client ─tools/call─► gateway ─tools/call+task─► server,
//	              then tasks/get at pollInterval until terminal or
//	              input_required, then tasks/result: the call's result
//	hosted        client ─tools/call+task─► gateway runs the plain call in
//	              the background and serves tasks/* itself
//
// Task records live in the store, in one flat shape, so a finished task's
// result survives a restart. A task id is a sealed token naming the task
// and its owner: the caller's principal, or for the anonymous principal
// the session (the spec's rule for requestors it cannot identify: such
// tasks are not listed across sessions and do not outlive them).

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// metaRelatedTask is the _meta key that ties a message to a task.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// Bounds of polling a task for a client (block and poll).
const (
	minPoll = 500 * time.Millisecond
	maxPoll = 30 * time.Second
)

// TaskStore is what the core needs of the store; *store.SQLite has it.
type TaskStore interface {
	PutTask(ctx context.Context, t store.Task) error
	GetTask(ctx context.Context, id string) (store.Task, error)
	ListTasks(ctx context.Context, owner, after string, limit int) ([]store.Task, error)
	UnfinishedTasks(ctx context.Context) ([]store.Task, error)
	DeleteExpiredTasks(ctx context.Context, now time.Time) (int, error)
}

var _ TaskStore = (*store.SQLite)(nil)

// keptAtMost is a TaskStore that keeps no record longer than max after
// its creation, whatever lifetime a server claims for its task (or none):
// a server cannot make the gateway's store grow for ever.
type keptAtMost struct {
	TaskStore
	max time.Duration
}

func (k keptAtMost) PutTask(ctx context.Context, t store.Task) error {
	if t.TTL != nil && *t.TTL > k.max {
		d := k.max
		t.TTL = &d
	}
	limit := t.CreatedAt.Add(k.max)
	if t.ExpiresAt.IsZero() && t.TTL != nil {
		t.ExpiresAt = t.CreatedAt.Add(*t.TTL)
	}
	if t.ExpiresAt.IsZero() || t.ExpiresAt.After(limit) {
		t.ExpiresAt = limit
	}
	return k.TaskStore.PutTask(ctx, t)
}

// tasks is the core's task state beyond the store: what lives only while
// the process does.
type tasks struct {
	mu sync.Mutex
	// live maps a gateway task id to its in-process state.
	live map[string]*liveTask
	// byUpstream maps (server, caller, upstream task id) to a gateway id,
	// for the server's notifications and related-task _meta.
	byUpstream map[upstreamTask]string
	// hosted counts each principal's running hosted tasks.
	hosted map[string]int
	bg     sync.WaitGroup
	// closing is set by Close before it waits for bg; guarded by mu.
	closing bool
}

type upstreamTask struct{ server, caller, id string }

// liveTask is what a task holds while the process runs.
type liveTask struct {
	notify func(method string, params json.RawMessage) // the creating session's sink
	forget func()                                      // drops the task's progress token
	// hosted tasks only:
	cancel context.CancelCauseFunc
	done   chan struct{}      // closed when the hosted call ended
	input  chan inputProvider // a tasks/result that can answer input requests
	ext    *extTask           // a task of the 2026-07-28 extension
}

// inputProvider is a waiting tasks/result request's way to ask its client.
type inputProvider func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

func (t *tasks) init() {
	t.live = map[string]*liveTask{}
	t.byUpstream = map[upstreamTask]string{}
	t.hosted = map[string]int{}
}

// taskToken is what a sealed task id carries.
type taskToken struct {
	Nonce string `json:"n"`
	Owner string `json:"o"`
	// Modern marks a task of the 2026-07-28 extension (taskext.go): its
	// id means nothing to a 2025 client's tasks/*, and the other way.
	Modern bool `json:"m,omitempty"`
	// Replica names the replica of a cluster that made the task, which
	// alone runs a hosted task's call and holds its waiting input
	// requests (Options.Replica; "" for a gateway alone).
	Replica string `json:"r,omitempty"`
}

// storable is a server's free text as every store keeps it: PostgreSQL's
// text holds no NUL, so NULs (and any invalid UTF-8) become U+FFFD.
func storable(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// taskReplica returns the replica that made the task id, or "".
func (s *Server) taskReplica(id string) string {
	b, err := s.taskSealer.Open(id)
	var tok taskToken
	if err != nil || json.Unmarshal(b, &tok) != nil {
		return ""
	}
	return tok.Replica
}

// owner returns who a request's tasks belong to. A modern request has no
// session: its tasks are its principal's, the anonymous one's too.
func owner(req *Request) string {
	if (req.Principal == "" || req.Principal == Anonymous) && req.Session != "" {
		return "session:" + req.Session
	}
	if req.Principal == "" {
		return "principal:" + Anonymous
	}
	return "principal:" + req.Principal
}

// newTaskID seals a fresh task id for owner.
func (s *Server) newTaskID(owner string) string {
	b, _ := json.Marshal(taskToken{Nonce: s.relay.mint("t") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), Owner: owner, Replica: s.opts.Replica})
	return s.taskSealer.Seal(b)
}

// errNoTask is the one answer to a task id that is forged, expired, or
// another owner's: it never tells which.
func errNoTask(id string) error {
	return invalidParams("unknown task %q: no task of yours has this id (it may have expired)", shorten(id))
}

func shorten(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

// lookupTask returns the record of the task a request names, if the
// caller owns it.
func (s *Server) lookupTask(ctx context.Context, req *Request) (store.Task, error) {
	id, ok := rawjson.String(req.Params, "taskId")
	if !ok || id == "" {
		return store.Task{}, invalidParams("%s needs params.taskId", req.Method)
	}
	b, err := s.taskSealer.Open(id)
	var tok taskToken
	if err != nil || json.Unmarshal(b, &tok) != nil || tok.Owner != owner(req) || tok.Modern != modernClient(req) {
		return store.Task{}, errNoTask(id)
	}
	rec, err := s.opts.Tasks.GetTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Task{}, errNoTask(id)
	}
	if err != nil {
		s.logger.Error("reading a task failed", "err", err)
		return store.Task{}, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not read its task records; try again")
	}
	if rec.Owner != owner(req) { // cannot happen with a sealed id; checked anyway
		return store.Task{}, errNoTask(id)
	}
	req.routed(rec.Server)
	return rec, nil
}

// taskJSON is the Task object of a record, under the gateway's id.
func taskJSON(rec store.Task) json.RawMessage {
	t := map[string]any{
		"taskId":        rec.ID,
		"status":        rec.Status,
		"createdAt":     rec.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": rec.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"ttl":           nil,
	}
	if rec.TTL != nil {
		t["ttl"] = rec.TTL.Milliseconds()
	}
	if rec.PollInterval > 0 {
		t["pollInterval"] = rec.PollInterval.Milliseconds()
	}
	if rec.StatusMessage != "" {
		t["statusMessage"] = rec.StatusMessage
	}
	b, _ := json.Marshal(t)
	return b
}

// applyTask updates a record from a server's Task object.
func applyTask(rec *store.Task, task json.RawMessage) {
	if st, ok := rawjson.String(task, "status"); ok && !terminal(rec.Status) {
		rec.Status = st
	}
	if m, ok := rawjson.String(task, "statusMessage"); ok {
		rec.StatusMessage = storable(m)
	}
	if ttl, ok, _ := rawjson.Get(task, "ttl"); ok {
		var ms *int64
		if json.Unmarshal(ttl, &ms) == nil {
			if ms == nil {
				rec.TTL = nil
			} else {
				d := time.Duration(*ms) * time.Millisecond
				rec.TTL = &d
				rec.ExpiresAt = rec.CreatedAt.Add(d)
			}
		}
	}
	if p, ok, _ := rawjson.Get(task, "pollInterval"); ok {
		var ms int64
		if json.Unmarshal(p, &ms) == nil {
			rec.PollInterval = time.Duration(ms) * time.Millisecond
		}
	}
	rec.UpdatedAt = time.Now()
}

// callerKey names the upstream session a task lives on, by the server's
// session mode, and back.
func (s *Server) callerKey(server string, req *Request) (string, upstream.Caller) {
	who := s.upstreamCaller(server, req.Principal, req.Session)
	switch {
	case who.Session != "":
		return "s:" + who.Session, who
	case who.Principal != "":
		return "p:" + who.Principal, who
	}
	return "", who
}

// upstreamCaller is the upstream session at server that serves a request
// of principal's session, by the server's session mode: the session's own
// (per_session), the principal's (per_principal), or the shared one (the
// zero Caller).
func (s *Server) upstreamCaller(server, principal, session string) upstream.Caller {
	switch s.serverConfig(server).SessionMode {
	case config.SessionPerPrincipal:
		return upstream.Caller{Principal: principal}
	case config.SessionPerSession:
		return upstream.Caller{Principal: principal, Session: session}
	}
	return upstream.Caller{}
}

func callerOf(rec store.Task) upstream.Caller {
	switch {
	case len(rec.Caller) > 2 && rec.Caller[:2] == "p:":
		return upstream.Caller{Principal: rec.Caller[2:]}
	case len(rec.Caller) > 2 && rec.Caller[:2] == "s:":
		p := ""
		if o := rec.Owner; len(o) > 10 && o[:10] == "principal:" {
			p = o[10:]
		}
		return upstream.Caller{Principal: p, Session: rec.Caller[2:]}
	}
	return upstream.Caller{}
}

// withTaskID returns obj with its taskId member set to id.
func withTaskID(obj json.RawMessage, id string) json.RawMessage {
	out, err := setString(obj, "taskId", id)
	if err != nil {
		return obj
	}
	return out
}

// withRelatedTask rewrites the related-task _meta of params to id, if it
// has one; with id "", it drops it.
func withRelatedTask(params json.RawMessage, id string) json.RawMessage {
	meta, ok, _ := rawjson.Get(params, "_meta")
	if !ok {
		return params
	}
	rel, ok, _ := rawjson.Get(meta, metaRelatedTask)
	if !ok {
		return params
	}
	var meta2 json.RawMessage
	var err error
	if id == "" {
		meta2, err = rawjson.Delete(meta, metaRelatedTask)
	} else {
		rel2 := withTaskID(rel, id)
		meta2, err = rawjson.Set(meta, metaRelatedTask, rel2)
	}
	if err != nil {
		return params
	}
	if keys, _ := rawjson.Keys(meta2); len(keys) == 0 {
		out, err := rawjson.Delete(params, "_meta")
		if err != nil {
			return params
		}
		return out
	}
	out, err := rawjson.Set(params, "_meta", meta2)
	if err != nil {
		return params
	}
	return out
}

// relatedTaskID returns the task id of params' related-task _meta.
func relatedTaskID(params json.RawMessage) (string, bool) {
	meta, ok, _ := rawjson.Get(params, "_meta")
	if !ok {
		return "", false
	}
	rel, ok, _ := rawjson.Get(meta, metaRelatedTask)
	if !ok {
		return "", false
	}
	return rawjson.String(rel, "taskId")
}

// retagTask rewrites the related-task _meta of a server's message to the
// gateway's id of that task; a task the client never saw (one of a
// block-and-poll call, or one already forgotten) is not named at all, so a
// server's own task ids never reach clients.
func (s *Server) retagTask(server string, who upstream.Caller, params json.RawMessage) json.RawMessage {
	upID, ok := relatedTaskID(params)
	if !ok {
		return params
	}
	id, _ := s.gatewayTaskFor(server, callerString(who), upID)
	return withRelatedTask(params, id)
}

// gatewayTaskFor returns the gateway id of a server's task.
func (s *Server) gatewayTaskFor(server, caller, upstreamID string) (string, bool) {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	id, ok := s.tasks.byUpstream[upstreamTask{server, caller, upstreamID}]
	return id, ok
}

// taskCall decides how a tools/call is served: normally, as a relayed
// task, by block and poll, or as a hosted task.
func (s *Server) taskCall(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage, rename rawjson.Edit) (*Result, error, bool) {
	cat := s.cat.Load()
	support := cat.taskSupport[ref]
	if modernClient(req) {
		// The extension's tasks are the gateway's choice, not the
		// client's: params.task is not of this era.
		renamed, err := rawjson.Apply(params, rename)
		if err != nil {
			return nil, invalidParams("params must be a JSON object"), true
		}
		_, followUp, _ := rawjson.Get(params, "requestState")
		switch {
		case declaresTasks(req.Client.Capabilities) && bridgesTasks(support) && !followUp:
			res, err := s.extLegacyCall(ctx, req, ref, renamed)
			return res, err, true
		case support != "required":
			return s.extToolsCall(ctx, req, ref, renamed)
		}
	}
	_, asked := req.member(params, "task")
	if !asked && support != "required" {
		return nil, nil, false
	}
	params, err := rawjson.Apply(params, rename)
	if err != nil {
		return nil, invalidParams("params must be a JSON object"), true
	}
	if asked && req.Client.ProtocolVersion != "" && req.Client.ProtocolVersion < "2025-11-25" {
		// A revision without tasks: the field means nothing (the spec's
		// rule for receivers without the capability).
		params, _ = rawjson.Delete(params, "task")
		asked = false
	}
	switch {
	case asked && (support == "optional" || support == "required"):
		res, err := s.relayTask(ctx, req, ref, params)
		return res, err, true
	case asked && s.offersTasks(ref.Server):
		res, err := s.legacyExtTask(ctx, req, ref, params)
		return res, err, true
	case asked && s.opts.TaskConfig.HostsTasks(ptrServer(s.serverConfig(ref.Server))):
		res, err := s.hostTask(ctx, req, ref, params)
		return res, err, true
	case asked:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "tool %q cannot run as a task: its server has no task support and this gateway does not host tasks for it; call it without \"task\"", req.toolName), true
	case support == "required":
		res, err := s.blockAndPoll(ctx, req, ref, params)
		return res, err, true
	}
	return nil, nil, false
}

func ptrServer(sc config.Server) *config.Server { return &sc }

// relayTask creates a task on the server and answers with it under a
// gateway id.
func (s *Server) relayTask(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	callerKey, who := s.callerKey(ref.Server, req)
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, req.SessionNotify, nil)
	if err != nil {
		return nil, err
	}
	body, err := s.forwardAs(ctx, req, ref.Server, who, "tools/call", params, 0, 0)
	if err != nil {
		forget()
		return nil, err
	}
	task, ok, _ := rawjson.Get(body, "task")
	upID, _ := rawjson.String(task, "taskId")
	if !ok || upID == "" {
		// The server ran it without a task (allowed when it did not
		// declare the capability for this request): a plain result.
		forget()
		return complete(s.exposeResult(s.cat.Load(), req, ref.Server, body, "content", false)), nil
	}
	now := time.Now()
	rec := store.Task{
		ID: s.newTaskID(owner(req)), Owner: owner(req), Server: ref.Server, Caller: callerKey,
		UpstreamID: upID, Transport: s.serverConfig(ref.Server).Transport, Tool: req.toolName,
		Status: taskWorking, CreatedAt: now, UpdatedAt: now,
	}
	applyTask(&rec, task)
	rec.UpdatedAt = now
	if rec.TTL == nil {
		// The server keeps it for ever; the gateway keeps its record at
		// most as long as it keeps any task.
		rec.ExpiresAt = now.Add(time.Duration(s.opts.TaskConfig.MaxTTL))
	}
	if err := s.opts.Tasks.PutTask(ctx, rec); err != nil {
		s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
	}
	s.tasks.mu.Lock()
	s.tasks.byUpstream[upstreamTask{ref.Server, callerKey, upID}] = rec.ID
	s.tasks.live[rec.ID] = &liveTask{notify: req.SessionNotify, forget: forget}
	s.tasks.mu.Unlock()
	out, err := rawjson.Set(body, "task", withTaskID(task, rec.ID))
	if err != nil {
		out = body
	}
	return complete(out), nil
}

// taskEnded forgets what the process held for a task that reached a
// terminal status.
func (s *Server) taskEnded(rec store.Task) {
	s.tasks.mu.Lock()
	lt := s.tasks.live[rec.ID]
	delete(s.tasks.live, rec.ID)
	for k, id := range s.tasks.byUpstream {
		if id == rec.ID {
			delete(s.tasks.byUpstream, k)
		}
	}
	s.tasks.mu.Unlock()
	if lt != nil && lt.forget != nil {
		lt.forget()
	}
}

// saveTask stores a record, logging a failure (the answer to the client
// does not depend on it).
func (s *Server) saveTask(rec store.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.opts.Tasks.PutTask(ctx, rec); err != nil {
		s.logger.Error("storing a task failed", "server", rec.Server, "err", err)
	}
	if terminal(rec.Status) {
		s.taskEnded(rec)
	}
}

// tasksGet serves tasks/get.
func (s *Server) tasksGet(ctx context.Context, req *Request) (*Result, error) {
	if modernClient(req) {
		return s.extTasksGet(ctx, req)
	}
	rec, err := s.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	if !rec.Hosted && s.offersTasks(rec.Server) {
		return s.legacyExtGet(ctx, req, rec)
	}
	if wantsResult(rec) {
		rec = s.keepResult(ctx, req, rec) // not kept when it finished
	}
	if rec.Hosted || terminal(rec.Status) {
		return complete(taskJSON(rec)), nil
	}
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/get", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, 0)
	if err != nil {
		if s.forgotten(&rec, err) {
			return complete(taskJSON(rec)), nil
		}
		return nil, err
	}
	applyTask(&rec, body)
	s.saveTask(rec)
	if wantsResult(rec) {
		// Once a client has been told a task finished, its result is
		// the gateway's to keep.
		if kept := s.keepResult(ctx, req, rec); kept.Status != rec.Status {
			return complete(taskJSON(kept)), nil
		}
	}
	return complete(withTaskID(body, rec.ID)), nil
}

// tasksCancel serves tasks/cancel.
func (s *Server) tasksCancel(ctx context.Context, req *Request) (*Result, error) {
	if modernClient(req) {
		return s.extTasksCancel(ctx, req)
	}
	rec, err := s.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	if terminal(rec.Status) {
		return nil, invalidParams("task %q is already %s and cannot be cancelled", shorten(rec.ID), rec.Status)
	}
	if !rec.Hosted && s.offersTasks(rec.Server) {
		return s.legacyExtCancel(ctx, req, rec)
	}
	if rec.Hosted {
		s.tasks.mu.Lock()
		lt := s.tasks.live[rec.ID]
		s.tasks.mu.Unlock()
		rec.Status, rec.StatusMessage, rec.UpdatedAt = taskCancelled, "cancelled by the client", time.Now()
		s.saveTask(rec)
		if lt != nil && lt.cancel != nil {
			lt.cancel(errors.New("task cancelled by the client"))
		}
		return complete(taskJSON(rec)), nil
	}
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/cancel", mustJSON(map[string]string{"taskId": rec.UpstreamID}), 0, 0)
	if err != nil {
		return nil, err
	}
	applyTask(&rec, body)
	s.saveTask(rec)
	return complete(withTaskID(body, rec.ID)), nil
}

// tasksResult serves tasks/result: the underlying call's result once the
// task is terminal, relaying the server's input requests meanwhile.
func (s *Server) tasksResult(ctx context.Context, req *Request) (*Result, error) {
	if modernClient(req) {
		return nil, errNotInExtension(req.Method)
	}
	rec, err := s.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	if rec.Hosted {
		return s.hostedResult(ctx, req, rec)
	}
	if s.offersTasks(rec.Server) {
		return s.legacyExtResult(ctx, req, rec)
	}
	return s.relayedResult(ctx, req, rec)
}

// relayedResult serves tasks/result for a relayed task: from the record
// when the gateway kept its result, else from the server (waiting until the
// task is terminal), keeping what it answers.
func (s *Server) relayedResult(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	if terminal(rec.Status) && (rec.Result != nil || rec.Error != nil) {
		return storedResult(rec)
	}
	if rec.Status == taskCancelled {
		return nil, errCancelled(rec)
	}
	deadline := taskDeadline(rec, time.Duration(s.opts.TaskConfig.DefaultTTL))
	_, res, err := s.fetchResult(ctx, req, rec, time.Until(deadline))
	return res, err
}

// wantsResult reports whether the gateway should fetch and keep a relayed
// task's result now: it is finished, with a result, and not yet kept.
func wantsResult(rec store.Task) bool {
	return !rec.Hosted && terminal(rec.Status) && rec.Status != taskCancelled && rec.Result == nil && rec.Error == nil
}

// keepResult fetches and keeps the result of a relayed task the gateway
// has just seen finish, so that the result outlives the server's memory of
// the task (a stdio server restarts with the gateway; any server may purge
// a task). The client's tasks/result is then answered from the record: the
// task costs the server no extra request. It returns the updated record.
func (s *Server) keepResult(ctx context.Context, req *Request, rec store.Task) store.Task {
	got, _, err := s.fetchResult(ctx, req, rec, 0)
	var jerr *jsonrpc.Error
	if err != nil && (!errors.As(err, &jerr) || gatewayCode(jerr.Code)) {
		s.logger.Debug("keeping a finished task's result failed; the client's tasks/result will ask again", "server", rec.Server, "err", err)
		return rec
	}
	return got
}

// keepResultLater is keepResult in the background, for a task whose end
// the gateway learnt from a server's notification.
func (s *Server) keepResultLater(rec store.Task) {
	req := &Request{Method: "tasks/result", Principal: Anonymous}
	if p, ok := strings.CutPrefix(rec.Owner, "principal:"); ok {
		req.Principal = p
	} else {
		req.Session = strings.TrimPrefix(rec.Owner, "session:")
	}
	// Under tasks.mu, so that no Add races Close's Wait.
	s.tasks.mu.Lock()
	if s.tasks.closing {
		s.tasks.mu.Unlock()
		return
	}
	s.tasks.bg.Add(1)
	s.tasks.mu.Unlock()
	go func() {
		defer s.tasks.bg.Done()
		s.keepResult(s.life, req, rec)
	}()
}

// forgotten reports whether err, the answer to tasks/get of a relayed
// task, says its server no longer knows it (-32602); if so rec is failed,
// with that error as its end, and saved.
func (s *Server) forgotten(rec *store.Task, err error) bool {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeInvalidParams {
		return false
	}
	rec.Status, rec.StatusMessage, rec.UpdatedAt = taskFailed, fmt.Sprintf("server %q no longer knows this task", rec.Server), time.Now()
	rec.Error = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", rec.StatusMessage))
	s.saveTask(*rec)
	return true
}

// fetchResult asks the server for a relayed task's result (tasks/result
// waits until the task is terminal, relaying the server's input requests
// to req's client meanwhile), and keeps what it answers in the record.
func (s *Server) fetchResult(ctx context.Context, req *Request, rec store.Task, timeout time.Duration) (store.Task, *Result, error) {
	body, err := s.forwardAs(ctx, req, rec.Server, callerOf(rec), "tasks/result",
		mustJSON(map[string]string{"taskId": rec.UpstreamID}), timeout, 0)
	var jerr *jsonrpc.Error
	switch {
	case errors.As(err, &jerr) && jerr.Code == jsonrpc.CodeInvalidParams && rec.Status == taskCompleted:
		// The server forgot a task it had finished (it restarted, or
		// purged it) before the gateway kept its result. (A failed task's
		// -32602 may be its call's own error, and is relayed as such.)
		rec.StatusMessage = fmt.Sprintf("server %q no longer knows this task; its result is lost", rec.Server)
		jerr = jsonrpc.Errorf(jsonrpc.CodeInternalError, "task %q completed, but %s", shorten(rec.ID), rec.StatusMessage)
		rec.Error, err = mustJSON(jerr), jerr
	case err == nil:
		body = tiedTo(body, rec.ID)
		body = s.exposeResult(s.cat.Load(), req, rec.Server, body, "content", false)
		rec.Result = body
		if rec.Status != taskCancelled {
			rec.Status = taskCompleted
			if isErr, _, _ := rawjson.Get(body, "isError"); string(isErr) == "true" {
				rec.Status = taskFailed
			}
		}
	case errors.As(err, &jerr) && !gatewayCode(jerr.Code):
		// The server's own error is the task's result (the spec:
		// tasks/result returns the underlying request's error), but
		// it names the task by the gateway's id, never the server's.
		own := *jerr
		own.Message = strings.ReplaceAll(own.Message, rec.UpstreamID, shorten(rec.ID))
		jerr, err = &own, &own
		rec.Error = mustJSON(jerr)
		if rec.Status != taskCancelled {
			rec.Status = taskFailed
		}
	default:
		return rec, nil, err
	}
	rec.UpdatedAt = time.Now()
	s.saveTask(rec)
	if err != nil {
		return rec, nil, err
	}
	return rec, complete(body), nil
}

// errCancelled is tasks/result's answer for a cancelled task: it has no
// result.
func errCancelled(rec store.Task) error {
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "task %q was cancelled; it has no result", shorten(rec.ID))
}

// storedResult answers tasks/result from a record.
func storedResult(rec store.Task) (*Result, error) {
	if rec.Error != nil {
		var jerr jsonrpc.Error
		if json.Unmarshal(rec.Error, &jerr) == nil {
			return nil, &jerr
		}
	}
	if rec.Result == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "task %q is %s but its result was not kept", shorten(rec.ID), rec.Status)
	}
	return complete(tiedTo(rec.Result, rec.ID)), nil
}

// tiedTo returns a tasks/result result with its related-task _meta naming
// the gateway's task id (the spec: tasks/result MUST carry it).
func tiedTo(result json.RawMessage, id string) json.RawMessage {
	return withRelatedTask(mustRelated(result, id), id)
}

// taskDeadline is when the gateway stops waiting for a task.
func taskDeadline(rec store.Task, def time.Duration) time.Time {
	if rec.TTL != nil {
		return rec.CreatedAt.Add(*rec.TTL)
	}
	return time.Now().Add(def)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// tasksList serves tasks/list: the caller's own tasks across servers, in
// pages of our own.
func (s *Server) tasksList(ctx context.Context, req *Request) (*Result, error) {
	if modernClient(req) {
		return nil, errNotInExtension(req.Method)
	}
	const page = 50
	after := ""
	if c, ok := rawjson.String(req.Params, "cursor"); ok && c != "" {
		cur, ok := s.openCursor(c)
		if !ok || cur.Method != "tasks/list" || cur.Principal != owner(req) || time.Now().Unix() > cur.Expires {
			return nil, invalidParams("invalid cursor: it was not issued to you by this gateway for tasks/list, or it expired; call tasks/list without a cursor")
		}
		after = cur.After
	}
	recs, err := s.opts.Tasks.ListTasks(ctx, owner(req), after, page+1)
	if err != nil {
		s.logger.Error("listing tasks failed", "err", err)
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not read its task records; try again")
	}
	more := len(recs) > page
	if more {
		recs = recs[:page]
	}
	items := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		items[i] = taskJSON(r)
	}
	out := map[string]any{"tasks": items}
	if more {
		out["nextCursor"] = s.sealCursor(cursor{Method: "tasks/list", After: recs[len(recs)-1].ID, Principal: owner(req), Expires: time.Now().Add(cursorTTL).Unix()})
	}
	return complete(mustJSON(out)), nil
}

// taskStatus relays a server's notifications/tasks/status to the session
// that created the task, under the gateway's id, and records it.
func (s *Server) taskStatus(server string, who upstream.Caller, params json.RawMessage) {
	upID, ok := rawjson.String(params, "taskId")
	if !ok {
		return
	}
	caller := ""
	switch {
	case who.Session != "":
		caller = "s:" + who.Session
	case who.Principal != "":
		caller = "p:" + who.Principal
	}
	id, ok := s.gatewayTaskFor(server, caller, upID)
	if !ok {
		return
	}
	s.tasks.mu.Lock()
	lt := s.tasks.live[id]
	s.tasks.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rec, err := s.opts.Tasks.GetTask(ctx, id); err == nil {
		applyTask(&rec, params)
		s.saveTask(rec)
		if wantsResult(rec) {
			s.keepResultLater(rec)
		}
	}
	if lt != nil && lt.notify != nil {
		lt.notify("notifications/tasks/status", withTaskID(params, id))
	}
}

// blockAndPoll serves a call of a tool whose server requires a task, for a
// client that did not ask for one: the gateway creates the task, polls it,
// and returns its result as the call's (not subject to the call timeout;
// bounded by the task's ttl, else the default task ttl).
func (s *Server) blockAndPoll(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	_, who := s.callerKey(ref.Server, req)
	params, err := rawjson.Set(params, "task", json.RawMessage(`{}`))
	if err != nil {
		return nil, invalidParams("tools/call params must be a JSON object")
	}
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, req.Notify, nil)
	if err != nil {
		return nil, err
	}
	defer forget()
	body, err := s.forwardAs(ctx, req, ref.Server, who, "tools/call", params, 0, 0)
	if err != nil {
		return nil, err
	}
	task, _, _ := rawjson.Get(body, "task")
	upID, _ := rawjson.String(task, "taskId")
	if upID == "" {
		return complete(s.exposeResult(s.cat.Load(), req, ref.Server, body, "content", false)), nil
	}
	rec := store.Task{Server: ref.Server, UpstreamID: upID, CreatedAt: time.Now()}
	applyTask(&rec, task)
	deadline := taskDeadline(rec, time.Duration(s.opts.TaskConfig.DefaultTTL))
	taskParams := mustJSON(map[string]string{"taskId": upID})
	cancelUpstream := func(why string) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := s.opts.Upstreams.Call(cctx, ref.Server, who, "tasks/cancel", taskParams, nil); err != nil {
			s.logger.Debug("cancelling a task upstream failed", "server", ref.Server, "err", err)
		}
		s.logger.Info("cancelled a task the gateway was waiting for", "server", ref.Server, "why", why)
	}
	for status := rec.Status; !terminal(status) && status != taskInputRequired; {
		wait := min(max(rec.PollInterval, minPoll), maxPoll)
		select {
		case <-ctx.Done():
			cancelUpstream("the client cancelled the call")
			return nil, ctx.Err()
		case <-time.After(min(wait, time.Until(deadline))):
		}
		if time.Now().After(deadline) {
			cancelUpstream("the task's deadline passed")
			return nil, timedOut(ref.Server, "tools/call", time.Until(deadline)+time.Since(rec.CreatedAt))
		}
		got, err := s.forwardAs(ctx, req, ref.Server, who, "tasks/get", taskParams, 0, 0)
		if err != nil {
			if ctx.Err() != nil {
				cancelUpstream("the client cancelled the call")
			}
			return nil, err
		}
		applyTask(&rec, got)
		status, _ = rawjson.String(got, "status")
	}
	// Terminal, or input_required: tasks/result returns the result, and
	// relays the server's input requests onto this call's stream.
	res, err := s.forwardAs(ctx, req, ref.Server, who, "tasks/result", taskParams, time.Until(deadline), 0)
	if err != nil {
		if ctx.Err() != nil {
			cancelUpstream("the client cancelled the call")
		}
		return nil, err
	}
	// The client asked for no task: the result does not name one.
	res = withRelatedTask(res, "")
	return complete(s.exposeResult(s.cat.Load(), req, ref.Server, res, "content", false)), nil
}

// hostTask runs a plain call as a task of the gateway's own.
func (s *Server) hostTask(ctx context.Context, req *Request, ref naming.Ref, params json.RawMessage) (*Result, error) {
	cfg := s.opts.TaskConfig
	ttl := time.Duration(cfg.DefaultTTL)
	if tp, ok, _ := rawjson.Get(params, "task"); ok {
		var t struct {
			TTL *int64 `json:"ttl"`
		}
		if json.Unmarshal(tp, &t) == nil && t.TTL != nil && *t.TTL > 0 {
			ttl = time.Duration(*t.TTL) * time.Millisecond
		}
	}
	ttl = min(ttl, time.Duration(cfg.MaxTTL))
	params, _ = rawjson.Delete(params, "task")
	o := owner(req)
	s.tasks.mu.Lock()
	if s.tasks.hosted[o] >= cfg.MaxHostedPerPrincipal {
		s.tasks.mu.Unlock()
		s.rejected(ctx, "hosted_tasks")
		return nil, jsonrpc.NewError(CodeRateLimited,
			fmt.Sprintf("you have %d hosted tasks running, the most this gateway runs for one principal; wait for one to finish", cfg.MaxHostedPerPrincipal),
			map[string]int{"limit": cfg.MaxHostedPerPrincipal})
	}
	s.tasks.hosted[o]++
	s.tasks.mu.Unlock()

	now := time.Now()
	rec := store.Task{
		ID: s.newTaskID(o), Owner: o, Server: ref.Server, Hosted: true, Transport: s.serverConfig(ref.Server).Transport,
		Tool: req.toolName, Status: taskWorking, CreatedAt: now, UpdatedAt: now, TTL: &ttl,
		PollInterval: time.Duration(cfg.PollInterval), ExpiresAt: now.Add(ttl),
	}
	if err := s.opts.Tasks.PutTask(ctx, rec); err != nil {
		s.tasks.mu.Lock()
		s.tasks.hosted[o]--
		s.tasks.mu.Unlock()
		s.logger.Error("storing a task failed", "server", ref.Server, "err", err)
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not record the task; try again")
	}
	runCtx, cancel := context.WithDeadline(s.life, rec.ExpiresAt)
	runCtx, cancelCause := context.WithCancelCause(runCtx)
	lt := &liveTask{notify: req.SessionNotify, cancel: cancelCause, done: make(chan struct{}), input: make(chan inputProvider)}
	s.tasks.mu.Lock()
	s.tasks.live[rec.ID] = lt
	s.tasks.mu.Unlock()

	// The background call: the client's progress goes to its session, and
	// the server's input requests wait for a tasks/result to answer them.
	bgReq := *req
	bgReq.Params = params // a copy: req's may be reused once Handle returns
	bgReq.Cancel = nil    // the task outlives the request's context
	bgReq.Notify = req.SessionNotify
	bgReq.Input = func(ictx context.Context, method string, p json.RawMessage) (json.RawMessage, error) {
		return s.hostedInput(ictx, rec.ID, lt, method, p)
	}
	s.tasks.bg.Add(1)
	go func() {
		defer s.tasks.bg.Done()
		defer cancel()
		defer close(lt.done)
		body, err := s.forwardAs(runCtx, &bgReq, ref.Server, upstream.Caller{Principal: req.Principal, Session: req.Session}, "tools/call", params, ttl, 0)
		s.tasks.mu.Lock()
		s.tasks.hosted[o]--
		if s.tasks.hosted[o] <= 0 {
			delete(s.tasks.hosted, o)
		}
		s.tasks.mu.Unlock()
		cur := s.settleHosted(runCtx, &bgReq, rec, body, err, false)
		if cur.Status == taskCancelled {
			return
		}
		if lt.notify != nil {
			lt.notify("notifications/tasks/status", taskJSON(cur))
		}
	}()
	return complete(mustJSON(map[string]json.RawMessage{"task": taskJSON(rec)})), nil
}

// hostedInput handles a server's input request during a hosted task: the
// task is input_required until a tasks/result of its client takes the
// request (the spec: the requestor calls tasks/result to receive them).
func (s *Server) hostedInput(ctx context.Context, id string, lt *liveTask, method string, params json.RawMessage) (json.RawMessage, error) {
	s.setHostedStatus(id, lt, taskInputRequired, "waiting for the client's input: call tasks/result")
	defer s.setHostedStatus(id, lt, taskWorking, "")
	params = withRelatedTask(mustRelated(params, id), id)
	select {
	case ask := <-lt.input:
		return ask(ctx, method, params)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// mustRelated adds the related-task _meta to params when it has none.
func mustRelated(params json.RawMessage, id string) json.RawMessage {
	if _, ok := relatedTaskID(params); ok {
		return params
	}
	meta, ok, _ := rawjson.Get(params, "_meta")
	if !ok {
		meta = json.RawMessage(`{}`)
	}
	meta2, err := rawjson.Set(meta, metaRelatedTask, mustJSON(map[string]string{"taskId": id}))
	if err != nil {
		return params
	}
	out, err := rawjson.Set(params, "_meta", meta2)
	if err != nil {
		return params
	}
	return out
}

func (s *Server) setHostedStatus(id string, lt *liveTask, status, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := s.opts.Tasks.GetTask(ctx, id)
	if err != nil || terminal(rec.Status) || rec.Status == status {
		return
	}
	rec.Status, rec.StatusMessage, rec.UpdatedAt = status, msg, time.Now()
	if err := s.opts.Tasks.PutTask(ctx, rec); err != nil {
		s.logger.Error("storing a task failed", "server", rec.Server, "err", err)
	}
	if lt.notify != nil {
		lt.notify("notifications/tasks/status", taskJSON(rec))
	}
}

// hostedResult serves tasks/result for a hosted task: it answers the
// task's input requests through this request's client while it waits.
func (s *Server) hostedResult(ctx context.Context, req *Request, rec store.Task) (*Result, error) {
	s.tasks.mu.Lock()
	lt := s.tasks.live[rec.ID]
	s.tasks.mu.Unlock()
	if lt != nil {
		ask := inputProvider(func(ictx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			res, err := s.askClient(ictx, rec.Server, method, params, clientAsker{
				session: req.Session,
				caps:    req.Client.Capabilities,
				input:   req.Input,
				notify:  req.SessionNotify,
				noInput: "the client's request cannot carry a request to it",
			})
			if errors.Is(err, ErrCallOver) { // its tasks/result was answered
				return s.answerFor(rec.Server, method, "the client could not be asked")
			}
			return res, err
		})
	wait:
		for {
			select {
			case lt.input <- ask:
			case <-lt.done:
				break wait
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	final, err := s.opts.Tasks.GetTask(gctx, rec.ID)
	if err != nil {
		return nil, errNoTask(rec.ID)
	}
	if final.Status == taskCancelled {
		return nil, errCancelled(rec)
	}
	return storedResult(final)
}

// recoverTasks settles, at start, the tasks a previous process left
// unfinished: a hosted one ran in that process and failed with it; one
// relayed to a stdio server lost its server, which restarted with the
// gateway; one on an HTTP server is kept, and its next tasks/get asks the
// server (which fails it if the server no longer knows it).
func (s *Server) recoverTasks(ctx context.Context) {
	recs, err := s.opts.Tasks.UnfinishedTasks(ctx)
	if err != nil {
		s.logger.Error("reading unfinished tasks failed", "err", err)
		return
	}
	for _, rec := range recs {
		if s.taskReplica(rec.ID) != s.opts.Replica {
			// Another replica's: it runs there, or that replica recovers
			// it when it comes back under its name.
			continue
		}
		switch {
		case rec.Hosted:
			rec.Status, rec.StatusMessage = taskFailed, "the gateway restarted while the task ran"
			rec.Error = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", rec.StatusMessage))
		case rec.Transport == config.TransportStdio:
			rec.Status, rec.StatusMessage = taskFailed, fmt.Sprintf("server %q (stdio) restarted with the gateway and lost the task", rec.Server)
			rec.Error = mustJSON(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", rec.StatusMessage))
		default:
			s.tasks.byUpstream[upstreamTask{rec.Server, rec.Caller, rec.UpstreamID}] = rec.ID
			continue
		}
		rec.UpdatedAt = time.Now()
		if err := s.opts.Tasks.PutTask(ctx, rec); err != nil {
			s.logger.Error("storing a task failed", "server", rec.Server, "err", err)
		}
	}
}

// purgeTasks deletes expired task records, every purgeInterval until Close.
func (s *Server) purgeTasks() {
	defer s.tasks.bg.Done()
	s.everyPurge(func(ctx context.Context, now time.Time) {
		if n, err := s.opts.Tasks.DeleteExpiredTasks(ctx, now); err != nil {
			s.logger.Warn("purging expired tasks failed", "err", err)
		} else if n > 0 {
			s.logger.Debug("purged expired tasks", "count", n)
		}
		// Forget what the process holds for tasks whose record is gone
		// (a relayed task nobody polled to its end).
		s.tasks.mu.Lock()
		ids := make([]string, 0, len(s.tasks.live))
		for id := range s.tasks.live {
			ids = append(ids, id)
		}
		s.tasks.mu.Unlock()
		for _, id := range ids {
			if _, err := s.opts.Tasks.GetTask(ctx, id); errors.Is(err, store.ErrNotFound) {
				s.taskEnded(store.Task{ID: id})
			}
		}
	})
}

// everyPurge calls purge every purgeInterval, with a context bounded to
// 30 s, until Close.
func (s *Server) everyPurge(purge func(ctx context.Context, now time.Time)) {
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(s.life, 30*time.Second)
			purge(ctx, now)
			cancel()
		}
	}
}

const purgeInterval = 10 * time.Minute

// gatewayCode reports whether code is one of the gateway's own errors
// (the server could not be reached, timed out...), which say nothing of the
// task.
func gatewayCode(code int) bool { return code <= -31001 && code >= -31099 }
