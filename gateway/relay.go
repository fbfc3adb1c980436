package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
)

// The relay of one forwarded call (PROTOCOL.md points 1, 2, 9):
//
//	client ─tools/call (id 7, progressToken "p")─► core ─(id 42, token "mcpgw-p-9")─► server
//	client ◄─progress ("p")── core ◄─progress ("mcpgw-p-9")── server
//	client ◄─elicitation/create (our id)── edge ◄─Input── core ◄─elicitation/create (id 3)── server
//	client ──result──► edge ──► core ──result (id 3)──► server
//
// Every id that crosses a hop is the sender's own on that hop: the
// upstream client numbers requests per connection, progress tokens and
// URL-elicitation ids are re-minted here and mapped back, and requests to
// the client get the edge's own ids. While a call waits for a client's
// answer, its timeout is paused.

// errCallTimeout is the cause of a call cancelled by its timeout. Its text
// is the reason the upstream gets in notifications/cancelled.
var errCallTimeout = errors.New("timeout")

// errURLElicitation is the cause of a call cancelled because its server
// asked for URL-mode elicitation that the gateway does not relay from it.
var errURLElicitation = errors.New("URL-mode elicitation is not relayed from a shared server")

// callTimer bounds a forwarded call by its timeout, and can pause while the
// call waits for a client's input.
type callTimer struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	shared bool // ctx is the request's own, not the timer's (newCallTimer)

	mu        sync.Mutex
	timer     *time.Timer
	remaining time.Duration
	deadline  time.Time
	paused    int
	stopped   bool // the call is over; an input request may outlive it
}

// newCallTimer starts the clock of a call made under parent. With a nil
// cancel the call gets a context of its own, a child of parent, which the
// timer ends. A call that is its request's only one may be given the
// request's own cancel (Request.Cancel) instead: the timer then ends
// parent itself, and the call runs on parent, saving a context per call;
// the edge that gave the cancel still answers by what Handle returns.
func newCallTimer(parent context.Context, cancel context.CancelCauseFunc, d time.Duration) *callTimer {
	t := &callTimer{ctx: parent, cancel: cancel, shared: cancel != nil, deadline: time.Now().Add(d)}
	if !t.shared {
		t.ctx, t.cancel = context.WithCancelCause(parent)
	}
	t.timer = time.AfterFunc(d, func() { t.cancel(errCallTimeout) })
	return t
}

// pause stops the clock; calls nest.
func (t *callTimer) pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused++
	if t.paused == 1 && t.timer.Stop() {
		t.remaining = time.Until(t.deadline)
	}
}

// resume starts the clock again with what was left.
func (t *callTimer) resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused--
	if t.paused == 0 && !t.stopped && t.ctx.Err() == nil {
		t.deadline = time.Now().Add(t.remaining)
		t.timer.Reset(t.remaining)
	}
}

// stop ends the clock, and the call's own context; a shared one is the
// request's, which goes on.
func (t *callTimer) stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.timer.Stop()
	if !t.shared {
		t.cancel(nil)
	}
}

// relay holds what the core relays between clients and servers beyond
// one call's bytes: progress tokens and URL-elicitation ids it re-minted.
type relay struct {
	next atomic.Uint64

	mu       sync.Mutex
	progress map[string]*progressRoute // our token -> the call that gave it

	// elicitations maps our URL-elicitation id to its server's id and the
	// session that got it; byUpstream maps back. Both are bounded, and an
	// entry expires after elicitationTTL (checked on read: the expirable
	// LRU of golang-lru v2 runs a goroutine that can never be stopped).
	elicitations *lru.Cache[string, elicitation]
	byUpstream   *lru.Cache[upstreamElicitation, string]
}

type progressRoute struct {
	token  json.RawMessage // the client's own token
	notify func(method string, params json.RawMessage)
}

type elicitation struct {
	server, upstreamID string
	notify             func(method string, params json.RawMessage)
	expires            time.Time
}

type upstreamElicitation struct{ server, id string }

// Bounds of the URL-elicitation ids kept for their completion notices.
const (
	elicitationTTL  = time.Hour
	maxElicitations = 10000
)

func (r *relay) init() {
	r.progress = map[string]*progressRoute{}
	r.elicitations, _ = lru.New[string, elicitation](maxElicitations)
	r.byUpstream, _ = lru.New[upstreamElicitation, string](maxElicitations)
}

func (r *relay) mint(kind string) string {
	return "mcpgw-" + kind + "-" + strconv.FormatUint(r.next.Add(1), 10)
}

// withProgress returns params with rename made (when not nil: the
// upstream's own name) and, when the client sent a progress token and
// there is someone to notify, with the token replaced by one of ours, all
// in one copy; and a func that forgets the token. meta is params' _meta member, nil when absent, which the
// caller read (Request.member). With nothing to change it returns params
// itself. Params that are not an object are an invalidParams error.
func (r *relay) withProgress(params, meta json.RawMessage, notify func(string, json.RawMessage), rename *rawjson.Edit) (json.RawMessage, func(), error) {
	var token json.RawMessage
	if notify != nil && meta != nil {
		token, _, _ = rawjson.Get(meta, "progressToken")
	}
	// The edits live on this stack, and so do the callers' values.
	var (
		all  [2]rawjson.Edit
		in   [1]rawjson.Edit
		buf  [40]byte
		ours string
	)
	n := 0
	if rename != nil {
		all[n] = *rename
		n++
	}
	if token != nil {
		ours = r.mint("p")
		in[0] = rawjson.Edit{Key: "progressToken", Val: rawjson.AppendString(buf[:0], ours)}
		all[n] = rawjson.Edit{Key: "_meta", In: in[:]}
		n++
	}
	if n == 0 {
		return params, noForget, nil
	}
	out, err := rawjson.AppendApply(nil, params, all[:n]...)
	if err != nil {
		return nil, noForget, invalidParams("params must be a JSON object")
	}
	if token == nil {
		return out, noForget, nil
	}
	r.mu.Lock()
	r.progress[ours] = &progressRoute{token: append(json.RawMessage(nil), token...), notify: notify}
	r.mu.Unlock()
	return out, func() {
		r.mu.Lock()
		delete(r.progress, ours)
		r.mu.Unlock()
	}, nil
}

func noForget() {}

// deliverProgress sends a server's notifications/progress to the call
// whose token it carries, under the client's own token. It reports
// whether the token was one of ours.
func (r *relay) deliverProgress(params json.RawMessage) bool {
	tok, ok := rawjson.String(params, "progressToken")
	if !ok {
		return false
	}
	r.mu.Lock()
	route := r.progress[tok]
	r.mu.Unlock()
	if route == nil {
		return false
	}
	out, err := rawjson.Set(params, "progressToken", route.token)
	if err != nil {
		return false
	}
	route.notify("notifications/progress", out)
	return true
}

// userBound reports whether a server's upstream sessions belong to one
// user, so that URL-mode elicitation and -32042 may be relayed from it
// (the spec binds them to the user; DESIGN decision 5).
func (s *Server) userBound(server string) bool {
	sc := s.serverConfig(server)
	switch sc.SessionMode {
	case config.SessionPerPrincipal, config.SessionPerSession:
		return true
	}
	return sc.SingleUser
}

// serverConfig returns a server's configuration, or the zero one.
func (s *Server) serverConfig(server string) config.Server {
	if u, ok := s.opts.Upstreams.(ServerConfigs); ok {
		if sc, ok := u.ServerConfig(server); ok {
			return sc
		}
	}
	for _, sc := range s.opts.Servers {
		if sc.Name == server {
			return sc
		}
	}
	return config.Server{Name: server}
}

// inputHandler returns the handler of the requests a server sends while
// req's call runs (elicitation, sampling, roots).
func (s *Server) inputHandler(req *Request, server string, who upstream.Caller, timer *callTimer) upstream.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		switch m.Method {
		case "ping":
			return json.RawMessage(`{}`), nil
		case "elicitation/create", "sampling/createMessage", "roots/list":
		default:
			return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw does not relay %s", m.Method)
		}
		if m.Method == "elicitation/create" && !s.userBound(server) {
			if mode, _ := rawjson.String(m.Params, "mode"); mode == "url" {
				s.logger.Warn("refusing URL-mode elicitation from a shared server", "server", server, "session_id", req.Session)
				timer.cancel(errURLElicitation)
				return json.RawMessage(`{"action":"cancel"}`), nil
			}
		}
		timer.pause()
		defer timer.resume()
		res, err := s.ask(ctx, server, who, m, clientAsker{
			session: req.Session,
			caps:    req.Client.Capabilities,
			input:   req.Input,
			notify:  req.SessionNotify,
			noInput: "the client's request cannot carry a request to it",
		})
		if errors.Is(err, ErrCallOver) {
			// Taken for the call's, it came as the call answered: it is
			// the server's own (over stdio nothing tells), asked of the
			// owner of the upstream session it came on.
			return s.serverRequest(ctx, server, s.upstreamCaller(server, who.Principal, who.Session), m)
		}
		return res, err
	}
}

// clientAsker is one client as the core asks it for input.
type clientAsker struct {
	session string // for the log
	caps    json.RawMessage
	input   func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// notify gets notifications/elicitation/complete of a URL-mode
	// elicitation.
	notify func(method string, params json.RawMessage)
	// noInput says why the client cannot be asked when input is nil.
	noInput string
}

// errInputTimeout ends the wait for a client's answer at the input
// timeout.
var errInputTimeout = errors.New("the client did not answer in time")

// ask relays a server's request m to a client, and the client's answer
// back; when the client cannot be asked (it did not declare the
// capability) or does not answer within the input timeout, the gateway
// answers for it (AnswerForClient). A request that names a task by the
// server's id names it by ours for the client, and the answer goes back
// under the server's. ctx ends when the server cancels its request.
func (s *Server) ask(ctx context.Context, server string, who upstream.Caller, m *jsonrpc.Message, a clientAsker) (json.RawMessage, error) {
	params := m.Params
	upID, related := relatedTaskID(params)
	params = s.retagTask(server, who, params)
	if m.Method == "elicitation/create" {
		if mode, _ := rawjson.String(params, "mode"); mode == "url" {
			if _, ok := rawjson.String(params, "elicitationId"); ok {
				params = s.mintElicitation(server, params, a.notify)
			} else if out, err := setString(params, "elicitationId", s.relay.mint("e")); err == nil {
				// A 2026-07-28 server's has none (its era correlates
				// through requestState); a 2025 client needs one.
				params = out
			}
		}
	}
	res, err := s.askClient(ctx, server, m.Method, params, a)
	if err == nil && related {
		res = withRelatedTask(res, upID)
	}
	return res, err
}

// askClient sends a client the request method with params, if it
// declared what the request needs, within the input timeout; otherwise,
// or when the client cannot answer, the gateway answers for it. A
// client's own error is returned as it is, and so is ErrCallOver, for the
// caller to ask outside the call.
func (s *Server) askClient(ctx context.Context, server, method string, params json.RawMessage, a clientAsker) (json.RawMessage, error) {
	why := missingCapability(a.caps, method, params)
	if why == "" && a.input == nil {
		why = a.noInput
	}
	if why != "" {
		return s.answerFor(server, method, why)
	}
	ictx, cancel := context.WithTimeoutCause(ctx, s.opts.InputTimeout, errInputTimeout)
	defer cancel()
	res, err := a.input(ictx, method, params)
	if err == nil {
		return res, nil
	}
	var jerr *jsonrpc.Error
	if errors.As(err, &jerr) {
		return nil, jerr // the client's own error
	}
	if errors.Is(err, ErrCallOver) {
		return nil, err
	}
	reason := "the client could not be asked"
	switch {
	case errors.Is(context.Cause(ictx), errInputTimeout):
		reason = "the client did not answer within input_timeout"
	case errors.Is(err, errParkedExpired):
		reason = "the client did not come back for the call within input_timeout"
	}
	s.logger.Info("no answer from the client; answering the server for it", "server", server, "method", method, "session_id", a.session, "err", err)
	return s.answerFor(server, method, reason)
}

// answerFor is the gateway's answer to a server's request for a client
// that cannot be asked, for reason (DESIGN decision 5): elicitation is
// cancelled, sampling an error, roots come from config or are an empty
// list. The server's status shows it.
func (s *Server) answerFor(server, method, reason string) (json.RawMessage, error) {
	return s.opts.Upstreams.AnswerForClient(server, method, reason)
}

// missingCapability says why the client cannot be sent a request, or "".
// A client gets only what it declared (PROTOCOL.md point 2).
func missingCapability(caps json.RawMessage, method string, params json.RawMessage) string {
	has := func(obj json.RawMessage, key string) (json.RawMessage, bool) {
		if len(obj) == 0 {
			return nil, false
		}
		v, ok, err := rawjson.Get(obj, key)
		return v, ok && err == nil && string(v) != "null"
	}
	switch method {
	case "elicitation/create":
		el, ok := has(caps, "elicitation")
		if !ok {
			return "the client did not declare elicitation"
		}
		mode, _ := rawjson.String(params, "mode")
		if mode == "url" {
			if _, ok := has(el, "url"); !ok {
				return "the client did not declare elicitation.url"
			}
		} else if _, url := has(el, "url"); url {
			// {"url":{}} alone declares URL mode only; {} means form.
			if _, form := has(el, "form"); !form {
				return "the client declared URL-mode elicitation only"
			}
		}
	case "sampling/createMessage":
		sm, ok := has(caps, "sampling")
		if !ok {
			return "the client did not declare sampling"
		}
		if _, tools := has(params, "tools"); tools {
			if _, ok := has(sm, "tools"); !ok {
				return "the client did not declare sampling.tools"
			}
		}
	case "roots/list":
		if _, ok := has(caps, "roots"); !ok {
			return "the client did not declare roots"
		}
	}
	return ""
}

// mintElicitation gives a URL-mode elicitation an id of ours, remembered
// with the session to tell when the server says it completed.
func (s *Server) mintElicitation(server string, params json.RawMessage, notify func(string, json.RawMessage)) json.RawMessage {
	id, ok := rawjson.String(params, "elicitationId")
	if !ok {
		return params
	}
	ours := s.relay.mint("e")
	s.relay.elicitations.Add(ours, elicitation{server: server, upstreamID: id, notify: notify, expires: time.Now().Add(elicitationTTL)})
	s.relay.byUpstream.Add(upstreamElicitation{server, id}, ours)
	out, err := setString(params, "elicitationId", ours)
	if err != nil {
		return params
	}
	return out
}

// elicitationComplete relays a server's notifications/elicitation/complete
// to the one session that got that elicitation, under our id.
func (s *Server) elicitationComplete(server string, params json.RawMessage) {
	id, ok := rawjson.String(params, "elicitationId")
	if !ok {
		return
	}
	ours, ok := s.relay.byUpstream.Get(upstreamElicitation{server, id})
	if !ok {
		return // unknown or expired: the spec lets clients ignore it too
	}
	e, ok := s.relay.elicitations.Get(ours)
	if !ok || e.notify == nil || time.Now().After(e.expires) {
		return
	}
	out, err := setString(params, "elicitationId", ours)
	if err != nil {
		return
	}
	e.notify("notifications/elicitation/complete", out)
}

// urlElicitationRequired maps a server's -32042 error: relayed with its
// elicitation ids re-minted from a user-bound server, refused otherwise.
func (s *Server) urlElicitationRequired(req *Request, server string, jerr *jsonrpc.Error) *jsonrpc.Error {
	if !s.userBound(server) {
		return refusedURLElicitation(server)
	}
	out, changed := mapArray(jerr.Data, "elicitations", func(el json.RawMessage) (json.RawMessage, bool) {
		next := s.mintElicitation(server, el, req.SessionNotify)
		return next, string(next) != string(el)
	})
	if !changed {
		return jerr
	}
	return &jsonrpc.Error{Code: jerr.Code, Message: jerr.Message, Data: out}
}

func refusedURLElicitation(server string) *jsonrpc.Error {
	return jsonrpc.NewError(CodeInputRefused,
		fmt.Sprintf("server %q asked for URL-mode elicitation, which mcpgw relays only from servers whose sessions belong to one user (session_mode per_principal or per_session, or single_user: true)", server),
		errorData{Server: server})
}

// CodeURLElicitationRequired is the spec's URLElicitationRequiredError.
const CodeURLElicitationRequired = -32042

// CodeResourceNotFound is the spec's error for resources/read of a resource
// that does not exist (server/resources, "Error Handling").
const CodeResourceNotFound = -32002

// callerString is the store's name of an upstream session (see callerKey).
func callerString(who upstream.Caller) string {
	switch {
	case who.Session != "":
		return "s:" + who.Session
	case who.Principal != "":
		return "p:" + who.Principal
	}
	return ""
}
