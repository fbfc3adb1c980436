package legacy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Why a session or a call ended, as context causes.
var (
	errClientCancelled = errors.New("cancelled by the client")
	errDeleted         = errors.New("session deleted by the client")
	errExpired         = errors.New("session idle for too long")
	errShutdown        = errors.New("gateway shutting down")
	errNotResumed      = errors.New("the call's stream was not resumed within the resume window")
	// errAnswered ends the context of a call that answered: nothing
	// cancelled it, and an input request it made may still be answered.
	errAnswered = errors.New("the call answered")
)

// ours reports whether err is one of the causes above, whose text may be
// shown to the client.
func ours(err error) bool {
	switch err {
	case errClientCancelled, errDeleted, errExpired, errShutdown, errNotResumed:
		return true
	}
	return false
}

// session is one downstream session (DESIGN decision 12). Its fields
// after mu are guarded by mu. Lock order: Handler.mu, then session.mu.
type session struct {
	key           string // short id: the random part in hex
	token         string // the Mcp-Session-Id issued for it
	principal     string
	version       string
	caps, info    json.RawMessage
	clientName    string
	clientVersion string
	created       time.Time
	// catalog is the core's catalog version when the session began: a
	// list change merged by then is not news to it (listChanged).
	catalog uint64
	// ask is the session's gateway.Request.SessionInput, made once.
	ask func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

	mu         sync.Mutex
	lastActive time.Time
	calls      map[string]*call // in flight, by the request id's JSON
	streams    map[uint64]*stream
	standalone *stream // stream 0, once a GET opened it
	nextStream uint64
	conns      int // connections attached to a stream
	// inputs are the input requests sent to the client and not yet
	// answered, by our id ("mcpgw-<n>"); nextInput numbers them.
	inputs    map[string]*input
	nextInput uint64
	ended     bool
	cause     error // why it ended
	// tag marks the event ids of a session this process restored from the
	// store (the Handler's epoch), so that an id from before the restart
	// is told apart; "" for a session created here.
	tag string
	// stored reports whether the store holds a record of the session;
	// storedActive is the last activity the record has.
	stored       bool
	storedActive time.Time
}

// call is one request in flight.
type call struct {
	id     jsonrpc.ID
	method string
	ctx    context.Context
	cancel context.CancelCauseFunc
	st     *stream // the stream it is answered on; nil when answered as JSON
	// Under the session's mu, for request: decided is set once the
	// answer is in (JSON when st is still nil), and written is closed
	// once the stream's writer is done. Fields, not variables its
	// closures capture: two allocations fewer per call.
	decided bool
	written chan struct{}
	// baseURL is the gateway's URL as the client reached it through a
	// trusted proxy, or "" (see forwardedBaseURL).
	baseURL string
	// header is the client's HTTP request header, without its
	// credentials, for the servers that forward some of it.
	header http.Header
	// credential is the client's JWT, for token exchange (gateway.CredentialOf).
	credential string
	// exposure is what the client's endpoint URL asks for (?exposure=).
	exposure string
	// groups are the groups of the request's principal, as the auth
	// layer named them for this request (see groupsOf).
	groups []string
}

// nonceLen is the length of a session id's random part.
const nonceLen = 16

// token is the payload of a sealed session id. Replica names the process
// that issued it; a process serves any session whose record its store
// holds, so a restarted process, whatever its name, serves its own.
type token struct {
	Replica   string `json:"r"`
	Principal string `json:"p"`
	Nonce     []byte `json:"n"`
	Created   int64  `json:"t"`
}

// idleLocked reports whether s has been idle past the timeout: no call in
// flight, no input request waiting for the client, no connected stream,
// no activity for IdleTimeout.
func (s *session) idleLocked(now time.Time, idle time.Duration) bool {
	return len(s.calls) == 0 && len(s.inputs) == 0 && s.conns == 0 && now.Sub(s.lastActive) >= idle
}

// endLocked marks s ended, cancels its calls, fails its pending input
// requests and closes its streams. The caller removes s from the Handler's
// table.
func (s *session) endLocked(cause error) bool {
	if s.ended {
		return false
	}
	s.ended, s.cause = true, cause
	for _, c := range s.calls {
		c.cancel(cause)
	}
	// Pending input requests belong to the session: no answer can come.
	for key, in := range s.inputs {
		delete(s.inputs, key)
		in.reply <- reply{err: fmt.Errorf("the client's session ended before it answered: %w", cause)}
	}
	// Writers write what their streams hold, then end.
	for _, st := range s.streams {
		st.finish()
	}
	return true
}

// cancelCalls cancels every call in flight on s with cause.
func (s *session) cancelCalls(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		c.cancel(cause)
	}
}

// newSession returns a session that is not in the table yet.
func (h *Handler) newSession(key, principal, version string, caps, info json.RawMessage, created, now time.Time) *session {
	s := &session{
		key:        key,
		principal:  principal,
		version:    version,
		caps:       caps,
		info:       info,
		created:    created,
		catalog:    h.core.CatalogVersion(),
		lastActive: now,
		calls:      make(map[string]*call),
		streams:    make(map[uint64]*stream),
		inputs:     make(map[string]*input),
		nextStream: 1,
	}
	s.ask = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return h.sessionInput(ctx, s, method, params)
	}
	s.clientName, s.clientVersion = clientOf(info)
	return s
}

// clientOf returns the name and version of a client's clientInfo, or ""
// for what it lacks.
func clientOf(info json.RawMessage) (name, version string) {
	var impl struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if len(info) > 0 && json.Unmarshal(info, &impl) == nil {
		return impl.Name, impl.Version
	}
	return "", ""
}

// create makes a session for an initialize request and returns it with its
// token, or why it was refused (a cap, the store, shutdown).
func (h *Handler) create(r *http.Request, version string, caps, info json.RawMessage) (*session, string, *refusal) {
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	now := time.Now()
	principal := h.principal(r)
	s := h.newSession(hex.EncodeToString(nonce), principal, version, caps, info, now, now)
	tok := h.sealer.Seal(marshal(token{Replica: h.opts.Replica, Principal: principal, Nonce: nonce, Created: now.Unix()}))
	if _, ref := h.admit(s, tok); ref != nil {
		return nil, "", ref
	}
	if ref := h.recordNew(r.Context(), s); ref != nil {
		return nil, "", ref
	}
	return s, tok, nil
}

// lookup returns the live session named by a session id header for the
// request's principal, marking it active, or nil when the id is unknown,
// forged, expired, ended or another principal's. The id is looked up as
// it is among the tokens this Handler holds, which spares opening the
// seal on every request; only an id it does not hold is opened, to
// restore its session from the store (restore). A refusal says why a
// session that exists cannot be served now (a cap, the store).
func (h *Handler) lookup(r *http.Request, id string) (*session, *refusal) {
	s := h.held(id)
	if s == nil {
		return h.restore(r, id)
	}
	return h.live(r, s), nil
}

// held returns the session of the table issued the id, or nil.
func (h *Handler) held(id string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byToken[id]
}

// live returns s, a session of the table, marked active, or nil when it
// is another principal's than the request's, ended, or idle past the
// timeout (it then ends).
func (h *Handler) live(r *http.Request, s *session) *session {
	if s.principal != h.principal(r) {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	if !s.ended && s.idleLocked(now, h.opts.IdleTimeout) {
		s.endLocked(errExpired)
		s.mu.Unlock()
		h.remove(s, errExpired)
		return nil
	}
	ended := s.ended
	s.lastActive = now
	s.mu.Unlock()
	if ended {
		return nil
	}
	return s
}

// end ends s: its calls are cancelled with cause, its streams closed, and
// its id forgotten.
func (h *Handler) end(s *session, cause error) {
	s.mu.Lock()
	s.endLocked(cause)
	s.mu.Unlock()
	h.remove(s, cause)
}

// endForGood ends s for good (DELETE, the admin API). Its record goes
// first: a session that ended here but is still stored would be served
// again after a restart. When the record cannot be deleted, s goes on and
// the error is returned.
func (h *Handler) endForGood(s *session, cause error) error {
	if err := h.forget(s); err != nil {
		return fmt.Errorf("deleting the session's record: %w", err)
	}
	h.end(s, cause)
	return nil
}

// remove drops an ended session from the table, and its record from the
// store unless it only ended here: a gateway that shuts down keeps its
// sessions' records, for the process that comes next. A session that
// ended for good is remembered as such (see admit).
func (h *Handler) remove(s *session, cause error) {
	h.mu.Lock()
	if cause != errShutdown {
		h.ended.Add(s.key, struct{}{})
	}
	removed := h.sessions[s.key] == s
	if removed {
		delete(h.sessions, s.key)
		delete(h.byToken, s.token)
		if h.perPrincipal[s.principal]--; h.perPrincipal[s.principal] <= 0 {
			delete(h.perPrincipal, s.principal)
		}
		h.logger.Debug("session ended", "session_id", s.key, "principal", s.principal, "reason", cause.Error())
	}
	h.mu.Unlock()
	s.mu.Lock()
	livesOn := cause == errShutdown && s.stored
	s.mu.Unlock()
	if removed && cause != errNotRecorded && !livesOn {
		// Not under h.mu, which the sessions gauge's callback takes.
		h.sessionEnded(s)
	}
	// The core forgets what the session held (its subscriptions, its
	// per_session upstreams; a restored session starts them anew).
	h.core.EndSession(s.key)
	if cause != errShutdown {
		if err := h.forget(s); err != nil {
			h.logger.Error("deleting an ended session's record failed; a restarted gateway may serve it until it is idle", "session_id", s.key, "err", err)
		}
	}
}

// snapshot returns the live sessions.
func (h *Handler) snapshot() []*session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		out = append(out, s)
	}
	return out
}

func sortInfos(ss []SessionInfo) {
	sort.Slice(ss, func(i, j int) bool {
		if !ss[i].Created.Equal(ss[j].Created) {
			return ss[i].Created.Before(ss[j].Created)
		}
		return ss[i].ID < ss[j].ID
	})
}

// janitorInterval is how often the janitor looks: often enough that an
// idle session or a stale stream outlives its deadline by at most a
// quarter of it, and at least every 30s.
func (h *Handler) janitorInterval() time.Duration {
	d := min(h.opts.IdleTimeout, h.opts.ResumeWindow) / 4
	return min(max(d, 10*time.Millisecond), 30*time.Second)
}

// janitor ends idle sessions, drops stale finished streams and cancels the
// calls of streams not resumed in time, until Close.
func (h *Handler) janitor() {
	defer close(h.janitorDone)
	t := time.NewTicker(h.janitorInterval())
	defer t.Stop()
	for {
		select {
		case <-h.stopJanitor:
			return
		case now := <-t.C:
			h.sweep(now)
		}
	}
}

// sweep is one janitor round.
func (h *Handler) sweep(now time.Time) {
	ss := h.snapshot()
	for _, s := range ss {
		s.mu.Lock()
		expired := !s.ended && s.idleLocked(now, h.opts.IdleTimeout) && s.endLocked(errExpired)
		if !expired {
			for n, st := range s.streams {
				if st.done && st.att == nil && now.Sub(st.doneAt) >= h.opts.ResumeWindow {
					delete(s.streams, n)
				}
				h.abandonLocked(s, st, now)
			}
		}
		s.mu.Unlock()
		if expired {
			h.remove(s, errExpired)
		}
	}
	h.persist(ss, now)
}

// listChanged sends notifications/<list>/list_changed on the standalone
// stream of every session that has one, but for the sessions that began
// once the change was merged: every list they get has it already (a
// client that connects just after the gateway merged its servers' lists
// would otherwise be told of a change it never saw). It runs on the
// core's goroutine and only appends to buffers.
func (h *Handler) listChanged(ch gateway.Change) {
	msg := notificationMessage("notifications/"+ch.List+"/list_changed", nil)
	for _, s := range h.snapshot() {
		if ch.Version <= s.catalog {
			continue
		}
		s.mu.Lock()
		if st := s.standalone; st != nil && !s.ended {
			h.appendLocked(st, msg)
		}
		s.mu.Unlock()
	}
}
