package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
)

// Parked calls: a 2026-07-28 client calls a server of the session era,
// which asks for input during the call. The client's request cannot carry
// a request to it, so the call waits ("parks") and the client is answered
// input_required, as a server of its own era would answer:
//
//	client ─tools/call─► core ─tools/call─► server (2025-11-25)
//	                     core ◄─elicitation/create (id 3)── server
//	client ◄─input_required {inputRequests: {"elicitation-1": ...},
//	                         requestState: sealed(parked call id)}
//	client ─tools/call + inputResponses + requestState─► core
//	                     core ─result (id 3)─► server
//	client ◄─result (or the next input_required)── core ◄─result── server
//
// The call runs in the background from the first request on; each of the
// client's requests waits on it for its next event: the result, or the
// server's requests (those it sends within gatherQuiet of each other are
// asked in one round). A server's request is asked under the rules of any
// other (capabilities, input_timeout, the default answers of
// AnswerForClient). A client that does not come back within input_timeout
// leaves the server the answer a silent client gets, and the call is
// cancelled. A call that ends while no request of the client waits on it
// keeps its result for the client for input_timeout. A client that goes
// away while it waits on the call cancels it.
//
// A parked call lives in this process's memory: the sealed state names
// the process (Server.replica), and a gateway that restarted, or another
// process, answers the follow-up -32602. A forwarding layer between
// replicas would send the follow-up to the owner the state names.

// Bounds of parked calls.
const (
	// maxParkedPerPrincipal and maxParked bound the calls waiting for
	// their clients' answers: each holds an upstream call. Past them, a
	// server's request is answered as for a client that cannot be asked.
	maxParkedPerPrincipal = 64
	maxParked             = 4096
	// maxPendingInputs bounds the requests one call may have waiting.
	maxPendingInputs = 16
	// gatherQuiet and gatherMax shape a round: a server of the session
	// era sends the requests it needs at once concurrently, and a client
	// answers them best in one round.
	gatherQuiet = 50 * time.Millisecond
	gatherMax   = 500 * time.Millisecond
)

var (
	errTooManyInputs = errors.New("the call has too many requests waiting for the client")
	errTooManyParked = errors.New("too many calls wait for their clients' answers")
)

// inputBox holds the requests a server sent during a call for a client
// that answers them later, in a request of its own (a 2026-07-28 client's
// follow-up call, a task's tasks/update), keyed by names of ours that are
// unique for the call's life.
type inputBox struct {
	changed chan struct{} // a request came, or the box closed
	done    chan struct{} // closed by close

	mu      sync.Mutex
	n       int
	pending map[string]*pendingInput
	order   []string // the keys of pending, oldest first
	closed  error    // set by close: asks fail with it
	// admit, when set, is asked before the first request waits.
	admit func() error
}

type pendingInput struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage // one answer
}

func newInputBox() *inputBox {
	return &inputBox{changed: make(chan struct{}, 1), done: make(chan struct{}), pending: map[string]*pendingInput{}}
}

func (b *inputBox) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// ask is the Request.Input of a client that answers later: it holds the
// request until deliver answers it or ctx ends.
func (b *inputBox) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	b.mu.Lock()
	if b.closed != nil {
		b.mu.Unlock()
		return nil, b.closed
	}
	if len(b.pending) >= maxPendingInputs {
		b.mu.Unlock()
		return nil, errTooManyInputs
	}
	if b.n == 0 && b.admit != nil {
		if err := b.admit(); err != nil {
			b.mu.Unlock()
			return nil, err
		}
	}
	b.n++
	key := inputKey(method, b.n)
	in := &pendingInput{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	b.pending[key] = in
	b.order = append(b.order, key)
	b.mu.Unlock()
	b.signal()
	select {
	case res := <-in.answer:
		return res, nil
	case <-ctx.Done():
		b.withdraw(key)
		return nil, ctx.Err()
	case <-b.done:
		b.withdraw(key)
		return nil, b.closed
	}
}

// inputKey names the n-th input request of a call.
func inputKey(method string, n int) string {
	kind := "input"
	switch method {
	case "elicitation/create":
		kind = "elicitation"
	case "sampling/createMessage":
		kind = "sampling"
	case "roots/list":
		kind = "roots"
	}
	return kind + "-" + strconv.Itoa(n)
}

// withdraw forgets a request nobody waits for any more.
func (b *inputBox) withdraw(key string) *pendingInput {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.pending[key]
	if in == nil {
		return nil
	}
	delete(b.pending, key)
	for i, k := range b.order {
		if k == key {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	return in
}

// len returns how many requests wait.
func (b *inputBox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// requests returns the waiting requests as an inputRequests object, in the
// order they came; edit, when not nil, rewrites each one's params.
func (b *inputBox) requests(edit func(method string, params json.RawMessage) json.RawMessage) json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []byte{'{'}
	for i, key := range b.order {
		in := b.pending[key]
		if i > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendString(out, key)
		out = append(out, `:{"method":`...)
		out = rawjson.AppendString(out, in.method)
		params := in.params
		if edit != nil {
			params = edit(in.method, params)
		}
		// A server may send roots/list without params; clients (the
		// Go SDK's among them) decode an input request's params as an
		// object, so it always has one.
		if p := bytes.TrimSpace(params); len(p) == 0 || string(p) == "null" {
			params = json.RawMessage("{}")
		}
		out = append(out, `,"params":`...)
		out = append(out, params...)
		out = append(out, '}')
	}
	return append(out, '}')
}

// deliver answers the waiting requests that responses, an inputResponses
// object (checkInputResponses), names; it ignores the other keys.
func (b *inputBox) deliver(responses json.RawMessage) {
	rawjson.Members(responses, func(k, v []byte) bool {
		key, err := rawjson.Unquote(k)
		if err != nil {
			return true
		}
		if in := b.withdraw(key); in != nil {
			in.answer <- append(json.RawMessage(nil), v...)
		}
		return true
	})
}

// close fails the waiting requests and any later one with err; once.
func (b *inputBox) close(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return
	}
	b.closed = err
	close(b.done)
	b.signal()
}

// checkInputResponses returns the inputResponses of a 2026-07-28 client's
// params, nil when absent: an object of results, one per input request it
// answers. Anything else is -32602.
func checkInputResponses(params json.RawMessage) (json.RawMessage, error) {
	raw, ok, err := rawjson.Get(params, "inputResponses")
	if err != nil || !ok {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalidParams("inputResponses must be an object of the input requests' results, keyed as inputRequests named them")
	}
	var bad string
	found := false // the key of a bad answer may be ""
	rawjson.Members(raw, func(k, v []byte) bool {
		if len(v) == 0 || v[0] != '{' {
			bad, _ = rawjson.Unquote(k)
			found = true
			return false
		}
		return true
	})
	if found {
		return nil, invalidParams("inputResponses[%q] must be the input request's result, an object", bad)
	}
	return raw, nil
}

// parkedCall is a call of a 2026-07-28 client that may wait for the
// client's answers between its requests.
type parkedCall struct {
	id, principal string
	box           *inputBox
	cancel        context.CancelCauseFunc
	finished      chan struct{} // closed once body and err are set

	mu       sync.Mutex
	body     json.RawMessage
	err      error
	done     bool
	attached bool                                        // a request of the client waits on the call
	notify   func(method string, params json.RawMessage) // that request's Notify
	drop     *time.Timer
	listed   bool // in Server.parked
}

// notifyAttached sends a notification of the call (progress, a log
// message) on the stream of the request that waits on it; with none
// waiting it is dropped, as for a client that went away.
func (pc *parkedCall) notifyAttached(method string, params json.RawMessage) {
	pc.mu.Lock()
	n := pc.notify
	pc.mu.Unlock()
	if n != nil {
		n(method, params)
	}
}

func (pc *parkedCall) attach(notify func(string, json.RawMessage)) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.attached {
		return false
	}
	pc.attached, pc.notify = true, notify
	if pc.drop != nil {
		pc.drop.Stop()
		pc.drop = nil
	}
	return true
}

// parks reports whether a 2026-07-28 client's call to server may park: a
// server of that era answers input_required itself and never asks during
// a call.
func (s *Server) parks(server string) bool {
	if e, ok := s.opts.Upstreams.(ServerEras); ok {
		return e.Era(server) != upstream.EraModern
	}
	return true
}

// ServerEras is implemented by Upstreams that say which era each server
// is spoken to in (*upstream.Manager does).
type ServerEras interface {
	// Era returns upstream.EraModern or upstream.EraLegacy, or "" for a
	// server not connected.
	Era(server string) string
}

// newReplicaID names this process in the states of its parked calls.
func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newParked returns a parked call for req, not yet listed: it is listed
// once its server first asks for input (admit).
func (s *Server) newParked(req *Request) *parkedCall {
	pc := &parkedCall{principal: req.Principal, box: newInputBox(), finished: make(chan struct{})}
	pc.notify, pc.attached = req.Notify, true
	pc.box.admit = func() error { return s.listParked(pc) }
	return pc
}

// listParked makes pc findable by a follow-up, within the bounds, under
// an id of its own (given only now: most calls never ask).
func (s *Server) listParked(pc *parkedCall) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	if len(s.parked) >= maxParked || s.parkedBy[pc.principal] >= maxParkedPerPrincipal {
		s.logger.Warn("answering a server's request for a 2026-07-28 client: too many parked calls", "principal_calls", s.parkedBy[pc.principal], "calls", len(s.parked))
		return errTooManyParked
	}
	pc.mu.Lock()
	pc.id, pc.listed = hex.EncodeToString(b[:]), true
	pc.mu.Unlock()
	s.parked[pc.id] = pc
	s.parkedBy[pc.principal]++
	return nil
}

// unpark forgets pc.
func (s *Server) unpark(pc *parkedCall) {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	pc.mu.Lock()
	id := pc.id
	pc.mu.Unlock()
	if id == "" || s.parked[id] != pc {
		return
	}
	delete(s.parked, id)
	if s.parkedBy[pc.principal]--; s.parkedBy[pc.principal] <= 0 {
		delete(s.parkedBy, pc.principal)
	}
}

// keepParkedResult keeps a finished call's result for a follow-up that no
// request waits for yet, for as long as a client may take to answer.
func (s *Server) keepParkedResult(pc *parkedCall) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.listed {
		return
	}
	pc.drop = time.AfterFunc(s.opts.InputTimeout, func() { s.unpark(pc) })
}

// detach ends a request's wait on pc.
func (s *Server) detach(pc *parkedCall) {
	pc.mu.Lock()
	pc.attached, pc.notify = false, nil
	done := pc.done
	pc.mu.Unlock()
	if done {
		s.keepParkedResult(pc)
	}
}

// runParked makes a 2026-07-28 client's call in the background, with the
// server's requests during it held for the client (inputBox), and waits
// for its first event. params are the call's, its progress token ours;
// forget forgets the token.
func (s *Server) runParked(ctx context.Context, req *Request, pc *parkedCall, server string, who upstream.Caller, method string, params json.RawMessage, forget func()) (json.RawMessage, error) {
	bg := *req
	bg.Params = append(json.RawMessage(nil), params...) // the edge reuses the request's buffer
	bg.members = paramsMembers{}
	bg.Client = Client{
		ProtocolVersion: req.Client.ProtocolVersion,
		Capabilities:    append(json.RawMessage(nil), req.Client.Capabilities...),
		Info:            append(json.RawMessage(nil), req.Client.Info...),
	}
	bg.Header = req.Header.Clone()
	bg.Notify = pc.notifyAttached
	bg.Input = s.parkedInput(pc)
	bg.Cancel = nil
	callCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	pc.cancel = cancel
	stop := context.AfterFunc(s.life, func() { cancel(errGatewayClosed) })
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer stop()
		defer cancel(nil)
		body, err := s.forwardAs(callCtx, &bg, server, who, method, bg.Params, 0, 0)
		forget()
		pc.box.close(ErrCallOver)
		pc.mu.Lock()
		pc.body, pc.err, pc.done = body, err, true
		attached := pc.attached
		pc.mu.Unlock()
		close(pc.finished)
		if !attached {
			s.keepParkedResult(pc)
		}
	}()
	return s.awaitParked(ctx, req, pc)
}

// parkedInput is the Request.Input of a parked call's background call. A
// request the client did not answer within input_timeout while no
// request of it waits on the call unparks the call: the server gets the
// answer of a silent client (askClient), as does any request it sends
// after, at once, and the call runs to its end (within its timeout)
// unread; a late follow-up finds it over. It is not cancelled, so the
// server sees the answer rather than a cancellation racing it.
func (s *Server) parkedInput(pc *parkedCall) func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		res, err := pc.box.ask(ctx, method, params)
		if err != nil && errors.Is(context.Cause(ctx), errInputTimeout) {
			pc.mu.Lock()
			waited := pc.attached
			pc.mu.Unlock()
			if !waited {
				s.unpark(pc)
				pc.box.close(errParkedExpired)
			}
		}
		return res, err
	}
}

// errParkedExpired closes the input of a parked call whose client did not
// come back.
var errParkedExpired = errors.New("the client did not answer within input_timeout")

// errGatewayClosed cancels the parked calls of a gateway shutting down.
var errGatewayClosed = errors.New("the gateway is shutting down")

// awaitParked waits, for req (attached to pc), for the call's next event:
// its result, or the server's requests, which it returns as an
// input_required result naming pc.
func (s *Server) awaitParked(ctx context.Context, req *Request, pc *parkedCall) (json.RawMessage, error) {
	defer s.detach(pc)
	for {
		select {
		case <-pc.finished:
			s.unpark(pc)
			return pc.body, pc.err
		default:
		}
		if pc.box.len() > 0 {
			s.gather(ctx, pc)
			select {
			case <-pc.finished:
				continue
			default:
			}
			if ctx.Err() == nil && pc.box.len() > 0 {
				return s.parkedInputRequired(req, pc), nil
			}
		}
		select {
		case <-pc.finished:
		case <-pc.box.changed:
		case <-ctx.Done():
			// Nobody can take the call's result any more.
			pc.cancel(context.Cause(ctx))
			<-pc.finished
			s.unpark(pc)
			return nil, ctx.Err()
		}
	}
}

// gather waits until the server sent no request for gatherQuiet (at most
// gatherMax), so that the requests it sends at once make one round.
func (s *Server) gather(ctx context.Context, pc *parkedCall) {
	quiet := time.NewTimer(gatherQuiet)
	defer quiet.Stop()
	most := time.NewTimer(gatherMax)
	defer most.Stop()
	for {
		select {
		case <-pc.box.changed:
			quiet.Reset(gatherQuiet)
		case <-quiet.C:
			return
		case <-most.C:
			return
		case <-pc.finished:
			return
		case <-ctx.Done():
			return
		}
	}
}

// parkedInputRequired returns the input_required result that asks req's
// client the requests pc's server waits on, with a sealed requestState
// naming pc.
func (s *Server) parkedInputRequired(req *Request, pc *parkedCall) json.RawMessage {
	b, _ := json.Marshal(requestState{
		Server: req.server, Principal: req.Principal, Method: req.Method, Name: exposedName(req),
		Parked: pc.id, Owner: s.replica, Expires: time.Now().Add(s.opts.InputTimeout).Unix(),
	})
	out := []byte(`{"resultType":"input_required","inputRequests":`)
	out = append(out, pc.box.requests(forModernClient)...)
	out = append(out, `,"requestState":`...)
	out = rawjson.AppendString(out, s.states.Seal(b))
	req.sealed = true
	return append(out, '}')
}

// forModernClient rewrites a 2025 server's request as a 2026-07-28 input
// request: URL-mode elicitation has no elicitationId in that era (the
// completion notice it served is gone).
func forModernClient(method string, params json.RawMessage) json.RawMessage {
	if method != "elicitation/create" {
		return params
	}
	if out, err := rawjson.Delete(params, "elicitationId"); err == nil {
		return out
	}
	return params
}

// urlInputRequired returns, for a 2026-07-28 client, a server's -32042
// (URLElicitationRequiredError, gone from that era) as what that era asks
// instead: an input_required result with the URL-mode elicitations, and a
// sealed state that makes the client's retry a fresh call. Other outcomes
// are returned as they are.
func (s *Server) urlInputRequired(req *Request, server, method string, body json.RawMessage, err error) (json.RawMessage, error) {
	var jerr *jsonrpc.Error
	if err == nil || !errors.As(err, &jerr) || jerr.Code != CodeURLElicitationRequired {
		return body, err
	}
	els, _, _ := rawjson.Get(jerr.Data, "elicitations")
	out := []byte(`{"resultType":"input_required","inputRequests":{`)
	n := 0
	_ = rawjson.Elements(els, func(el []byte) {
		if len(el) == 0 || el[0] != '{' {
			return
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = rawjson.AppendString(out, inputKey("elicitation/create", n))
		out = append(out, `:{"method":"elicitation/create","params":`...)
		out = append(out, forModernClient("elicitation/create", el)...)
		out = append(out, '}')
	})
	if n == 0 {
		return body, err // nothing to ask: the server's error stands
	}
	b, _ := json.Marshal(requestState{
		Server: server, Principal: req.Principal, Method: method, Name: exposedName(req),
		Reissue: true, Expires: time.Now().Add(s.opts.InputTimeout).Unix(),
	})
	out = append(out, `},"requestState":`...)
	out = rawjson.AppendString(out, s.states.Seal(b))
	req.sealed = true
	return append(out, '}'), nil
}

// ElsewhereError is the error of a request that only another replica can
// serve (it holds the parked call the request follows up, or runs the
// task it names): an edge in a cluster sends the request there; without
// one, or when that replica is gone, the answer is Fallback's, or the
// error it wraps.
type ElsewhereError struct {
	// Replica names the replica, as Options.Replica named it there.
	Replica string
	// Fallback, if not nil, answers the request when that replica cannot
	// be reached; otherwise the answer is the error this one wraps.
	Fallback func() (*Result, error)
	err      error
}

func (e *ElsewhereError) Error() string { return e.err.Error() }
func (e *ElsewhereError) Unwrap() error { return e.err }

// resumeParked serves a 2026-07-28 client's follow-up of a parked call:
// its inputResponses answer the server's waiting requests, and it waits
// for the call's next event.
func (s *Server) resumeParked(ctx context.Context, req *Request, st *requestState, params json.RawMessage) (json.RawMessage, error) {
	bad := func(why string) error {
		return invalidParams("invalid requestState: %s; send the request again without requestState and inputResponses to start over", why)
	}
	if st.Owner != s.replica {
		return nil, &ElsewhereError{Replica: st.Owner,
			err: bad("the call it names is held by another gateway process (this one restarted, or another replica holds it)")}
	}
	s.parkMu.Lock()
	pc := s.parked[st.Parked]
	s.parkMu.Unlock()
	if pc == nil || pc.principal != req.Principal {
		return nil, bad("the call it names is over: it ended, expired or was cancelled")
	}
	responses, err := checkInputResponses(params)
	if err != nil {
		return nil, err
	}
	if !pc.attach(req.Notify) {
		return nil, bad("another request already waits on the call it names")
	}
	if responses != nil {
		pc.box.deliver(responses)
	}
	return s.awaitParked(ctx, req, pc)
}
