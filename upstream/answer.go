package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Requests a server sends that belong to no call (DESIGN decision 5): the
// ones on the streamable-HTTP GET stream, and over stdio and legacy SSE
// those that come while no call, or more than one, is in flight.
//
//	server ─roots/list─► Client.OnRequest ─► Manager: ping? answered {}
//	                                           │ a RequestFunc (HandleRequests)?
//	                                           ├─ yes: fn(server, who, request): the
//	                                           │  gateway finds the client that owns
//	                                           │  the upstream session of who, or
//	                                           │  calls AnswerForClient
//	                                           └─ no: AnswerForClient
//
// who is the caller the upstream session belongs to: zero for a server's
// base client, the principal (and session, per_session) for a pooled one.
// AnswerForClient gives the gateway's own answer (elicitation cancel,
// sampling an error, roots from the server's config or an empty list) and
// keeps it, with why no client was asked, in the server's status
// (Status.LastAnswered).

// RequestFunc answers a request that server sent on the upstream session
// of who outside any call (elicitation/create, sampling/createMessage,
// roots/list). It returns a result, or a *jsonrpc.Error for the error
// response. It may wait for a person: ctx ends when the server cancels
// its request or the connection ends.
type RequestFunc func(ctx context.Context, server string, who Caller, m *jsonrpc.Message) (json.RawMessage, error)

// Answered is a request of a server that the gateway answered itself, for
// a client that could not be asked. It holds no user data: the method, the
// kind of answer and why, all in the gateway's own words.
type Answered struct {
	// Method is the server's request: elicitation/create,
	// sampling/createMessage or roots/list.
	Method string `json:"method"`
	// Answer is what the server got: "cancel", "an error", "2 roots from
	// config", "an empty list (no roots configured)".
	Answer string `json:"answer"`
	// Reason says why no client was asked.
	Reason string `json:"reason"`
	// At is when the server was answered.
	At time.Time `json:"at"`
}

// DefaultAnswer is the gateway's answer to a server's method for a client
// that cannot be asked, for reason (PROTOCOL.md point 2): elicitation is
// cancelled, sampling is an error that says why, and roots/list gets
// roots (a server's configured ones) or an empty list, not an error:
// servers such as server-filesystem ask at every start and report an
// error as a failure. Other methods are method-not-found. It also
// returns what it answered, as the server's status shows it.
func DefaultAnswer(method string, roots []config.Root, reason string) (json.RawMessage, Answered, error) {
	a := Answered{Method: method, Reason: reason, At: time.Now()}
	switch method {
	case "elicitation/create":
		a.Answer = "cancel"
		return json.RawMessage(`{"action":"cancel"}`), a, nil
	case "roots/list":
		if len(roots) == 0 {
			a.Answer = "an empty list (no roots configured)"
			return json.RawMessage(`{"roots":[]}`), a, nil
		}
		type root struct {
			URI  string `json:"uri"`
			Name string `json:"name,omitempty"`
		}
		list := make([]root, len(roots))
		for i, r := range roots {
			list[i] = root{URI: r.URI, Name: r.Name}
		}
		b, err := json.Marshal(map[string]any{"roots": list})
		if err != nil {
			return nil, a, err
		}
		a.Answer = fmt.Sprintf("%d roots from config", len(roots))
		if len(roots) == 1 {
			a.Answer = "1 root from config"
		}
		return b, a, nil
	case "sampling/createMessage":
		a.Answer = "an error"
		return nil, a, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw has no client to ask for %s: %s", method, reason)
	}
	a.Answer = "method not found"
	return nil, a, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw does not offer %s to this server", method)
}

// HandleRequests has fn answer the requests the servers send outside any
// call, from now until stop; a later call replaces fn. Without one, or
// after stop, the Manager answers them itself (see AnswerForClient).
func (m *Manager) HandleRequests(fn RequestFunc) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextReq++
	id := m.nextReq
	m.requests, m.requestsID = fn, id
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.requestsID == id {
			m.requests = nil
		}
	}
}

// requestHandler is the OnRequest of a client of e for the upstream
// session of who: ping is answered at once, the rest goes to the
// RequestFunc, or gets the gateway's own answer.
func (m *Manager) requestHandler(e *entry, who Caller) RequestHandler {
	return func(ctx context.Context, msg *jsonrpc.Message) (json.RawMessage, error) {
		if msg.Method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		m.mu.Lock()
		fn := m.requests
		m.mu.Unlock()
		if fn != nil {
			return fn(ctx, e.cfg.Name, who, msg)
		}
		return m.answerFor(e, msg.Method, "no client can take requests outside a call")
	}
}

// AnswerForClient answers a server's request for a client that cannot be
// asked, for reason (client-safe words, no user data): with
// DefaultAnswer, the server's configured roots for roots/list. The answer
// becomes the server's Status.LastAnswered, and is logged: roots/list at
// debug, since servers ask it at every start and the answer is the normal
// one; the rest at info, at most once a minute per server. An unknown
// server gets DefaultAnswer without roots.
func (m *Manager) AnswerForClient(server, method, reason string) (json.RawMessage, error) {
	m.mu.Lock()
	e := m.servers[server]
	m.mu.Unlock()
	if e == nil {
		res, _, err := DefaultAnswer(method, nil, reason)
		return res, err
	}
	return m.answerFor(e, method, reason)
}

func (m *Manager) answerFor(e *entry, method, reason string) (json.RawMessage, error) {
	res, a, err := DefaultAnswer(method, e.cfg.Roots, reason)
	level, quiet := slog.LevelDebug, 0
	m.mu.Lock()
	e.status.LastAnswered = &a
	if method != "roots/list" {
		if now := time.Now(); now.Sub(e.answersLogged) >= answersLogEvery {
			level, quiet = slog.LevelInfo, e.answersQuiet
			e.answersLogged, e.answersQuiet = now, 0
		} else {
			e.answersQuiet++
		}
	}
	m.mu.Unlock()
	attrs := []any{"server", e.cfg.Name, "method", method, "answer", a.Answer, "reason", reason}
	if quiet > 0 {
		attrs = append(attrs, "answered_unlogged", quiet)
	}
	m.logger.Log(context.Background(), level, "answering a server request for a client", attrs...)
	return res, err
}

// answersLogEvery is how often the answers the gateway gives a server for
// a client are logged at info: the rest of them at debug, and counted in
// the next line at info.
const answersLogEvery = time.Minute

// SendNotification sends a notification to the upstream session of who at
// server (the base client for a shared server, the caller's pooled one
// otherwise), when it has one that is connected; it never starts one. A
// notifications/roots/list_changed goes to the sessions mirroring the
// caller's capabilities that declared roots too. It returns
// ErrUnknownServer for an unknown server.
func (m *Manager) SendNotification(ctx context.Context, server string, who Caller, method string, params json.RawMessage) error {
	m.mu.Lock()
	e, ok := m.servers[server]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	var cs []*Client
	switch {
	case m.goneLocked(e):
	case e.pool != nil:
		if p := e.pool.clients[e.pool.key(who)]; p != nil && p.connected() {
			cs = append(cs, p.client)
		}
	case e.status.State == StateRunning:
		cs = append(cs, e.client)
	}
	if e.mirrors != nil && !m.goneLocked(e) && method == "notifications/roots/list_changed" {
		key := e.mirrors.key(who)
		for _, p := range e.mirrors.clients {
			if _, roots, _ := rawjson.Get(p.caps, "roots"); roots && p.callerKey == key && p.connected() {
				cs = append(cs, p.client)
			}
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, c := range cs {
		if err := c.Notify(ctx, method, params); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// relaysRoots reports whether an upstream session of srv for who has one
// client that owns it (a pooled one, or a single_user server's), whose
// notifications/roots/list_changed the gateway can pass on: only such a
// session is told that roots may change (listChanged).
func relaysRoots(srv config.Server, who Caller) bool {
	if who != (Caller{}) {
		return true
	}
	return (srv.SessionMode == "" || srv.SessionMode == config.SessionShared) && srv.SingleUser
}

// withoutRootsListChanged returns caps with roots declared without
// listChanged, when it declares roots.
func withoutRootsListChanged(caps json.RawMessage) json.RawMessage {
	if _, ok, err := rawjson.Get(caps, "roots"); !ok || err != nil {
		return caps
	}
	out, err := rawjson.Set(caps, "roots", json.RawMessage(`{}`))
	if err != nil {
		return caps
	}
	return out
}
