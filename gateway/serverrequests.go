package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/upstream"
)

// Requests a server sends outside any call (DESIGN decision 5): on the
// streamable-HTTP GET stream, or over stdio while no call is in flight,
// such as the roots/list server-filesystem asks at every start. No call
// names the client, but the upstream session does when one client owns
// it:
//
//	per_session       the downstream session it was opened for
//	per_principal     the principal's one live session, if it has only one
//	shared            nobody; with single_user, the one live session
//	                  that called the server, if there is only one
//	(a server's base client, which reads its lists: nobody)
//
// The owner is asked like a call's client (ask: its capabilities, the
// input timeout, cancellation), through the SessionInput of its session:
// the legacy edge sends the request on the session's GET stream. When
// there is no owner, the gateway answers for the client (AnswerForClient),
// and the server's status says what and why.
//
// The other way, a client's notifications/roots/list_changed goes to every
// upstream session its session owns (RootsChanged), so that their servers
// ask it for its roots again.

// liveSession is what the core keeps of a live downstream session, from
// its first request to EndSession.
type liveSession struct {
	principal string
	caps      json.RawMessage
	notify    func(method string, params json.RawMessage) // Request.SessionNotify
	input     func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

	mu sync.Mutex
	// singleUser are the single_user servers the session called: another
	// principal's session that never did is not taken for the user.
	singleUser map[string]bool
	// asking counts the requests outside its calls the session is being
	// asked (at most maxAsking).
	asking int
}

// maxAsking bounds the requests outside its calls that one session is
// asked at once: each waits up to the input timeout, and a server could
// send any number.
const maxAsking = 8

// usedSingleUser notes that session called server, a single_user one.
func (s *Server) usedSingleUser(session, server string) {
	s.sessionsMu.RLock()
	ls := s.sessions[session]
	s.sessionsMu.RUnlock()
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.singleUser == nil {
		ls.singleUser = map[string]bool{}
	}
	ls.singleUser[server] = true
}

// called reports whether the session called server, a single_user one.
func (ls *liveSession) called(server string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.singleUser[server]
}

// Why the gateway answered for a client, as the server's status shows it.
const (
	reasonShared      = "no one client owns the shared upstream session"
	reasonListReader  = "no client owns the upstream session that reads the server's lists"
	reasonEnded       = "the client's session has ended"
	reasonNoPrincipal = "the principal has no open session"
	reasonNoCaller    = "no open client session has called the single-user server"
	reasonSeveral     = "several client sessions share the upstream session"
	reasonOutsideCall = "the client cannot be asked outside its calls"
	reasonBusy        = "the client is already being asked as many requests outside its calls as mcpgw allows"
)

// serverRequest answers a request server sent on the upstream session of
// who outside any call: the session's owner is asked, or the gateway
// answers for it.
func (s *Server) serverRequest(ctx context.Context, server string, who upstream.Caller, m *jsonrpc.Message) (json.RawMessage, error) {
	switch m.Method {
	case "elicitation/create", "sampling/createMessage", "roots/list":
	default: // ping is the upstream client's to answer
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw does not relay %s", m.Method)
	}
	session, ls, why := s.owner(server, who)
	if ls == nil {
		return s.answerFor(server, m.Method, why)
	}
	ls.mu.Lock()
	busy := ls.asking >= maxAsking
	if !busy {
		ls.asking++
	}
	ls.mu.Unlock()
	if busy {
		return s.answerFor(server, m.Method, reasonBusy)
	}
	defer func() {
		ls.mu.Lock()
		ls.asking--
		ls.mu.Unlock()
	}()
	res, err := s.ask(ctx, server, who, m, clientAsker{
		session: session,
		caps:    ls.caps,
		input:   ls.input,
		notify:  ls.notify,
		noInput: reasonOutsideCall,
	})
	if errors.Is(err, ErrCallOver) { // an edge's mistake: there is no call
		return s.answerFor(server, m.Method, "the client could not be asked")
	}
	return res, err
}

// owner returns the live session that owns the upstream session of who at
// server, with its id, or nil and why none does (see the table above).
func (s *Server) owner(server string, who upstream.Caller) (string, *liveSession, string) {
	if who == (upstream.Caller{}) {
		sc := s.serverConfig(server)
		switch {
		case sc.SessionMode == config.SessionPerPrincipal || sc.SessionMode == config.SessionPerSession:
			return "", nil, reasonListReader
		case !sc.SingleUser:
			return "", nil, reasonShared
		}
		return s.onlySession(reasonNoCaller, func(ls *liveSession) bool { return ls.called(server) })
	}
	if who.Session != "" {
		s.sessionsMu.RLock()
		ls := s.sessions[who.Session]
		s.sessionsMu.RUnlock()
		if ls == nil || ls.principal != who.Principal {
			return "", nil, reasonEnded
		}
		return who.Session, ls, ""
	}
	return s.onlySession(reasonNoPrincipal, func(ls *liveSession) bool { return ls.principal == who.Principal })
}

// onlySession returns the one live session that match accepts, or nil and
// why there is not exactly one (none: the reason none).
func (s *Server) onlySession(none string, match func(*liveSession) bool) (string, *liveSession, string) {
	s.sessionsMu.RLock()
	defer s.sessionsMu.RUnlock()
	var (
		id    string
		found *liveSession
	)
	for k, ls := range s.sessions {
		if !match(ls) {
			continue
		}
		if found != nil {
			return "", nil, reasonSeveral
		}
		id, found = k, ls
	}
	if found == nil {
		return "", nil, none
	}
	return id, found, ""
}

// notifyTimeout bounds passing one client notification on to one upstream
// session.
const notifyTimeout = 10 * time.Second

// RootsChanged passes a client's notifications/roots/list_changed on to
// each upstream session that session owns and that is connected, so that
// its server asks the client for its roots again. A session that sent no
// request yet owns none. It works in the background: the client's
// notification is answered at once, whatever the upstreams do.
func (s *Server) RootsChanged(session string) {
	s.sessionsMu.RLock()
	ls := s.sessions[session]
	s.sessionsMu.RUnlock()
	if ls == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.bg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bg.Done()
		s.rootsChanged(s.life, session, ls)
	}()
}

// rootsChanged is RootsChanged's work, for the session ls.
func (s *Server) rootsChanged(ctx context.Context, session string, ls *liveSession) {
	for _, st := range s.opts.Upstreams.Servers() {
		who := s.upstreamCaller(st.Name, ls.principal, session)
		if id, owner, _ := s.owner(st.Name, who); owner != ls || id != session {
			continue
		}
		nctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		err := s.opts.Upstreams.SendNotification(nctx, st.Name, who, "notifications/roots/list_changed", nil)
		cancel()
		if err != nil {
			s.logger.Debug("passing on notifications/roots/list_changed failed", "server", st.Name, "session_id", session, "err", err)
		}
	}
}
