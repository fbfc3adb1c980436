package legacy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// SessionRecord is what a SessionStore keeps of a session: what a process
// that did not create it needs to serve it (see "Sessions across
// restarts" in the package doc).
type SessionRecord struct {
	// ID is the session's short id, never its Mcp-Session-Id (a
	// credential).
	ID        string
	Principal string
	Version   string
	// Capabilities and ClientInfo are the client's, from initialize, byte
	// for byte; nil when it sent none. Each is at most MaxClientJSON bytes.
	Capabilities json.RawMessage
	ClientInfo   json.RawMessage
	Created      time.Time
	LastActive   time.Time
}

// SessionStore keeps the records of live sessions. A session that ended
// for good (DELETE, idle, the admin API) has no record; one whose process
// shut down keeps it. Its methods are called from request handlers and
// the janitor, concurrently, each with a context bounded by storeTimeout.
type SessionStore interface {
	// PutSession stores rec, replacing the record of the same ID.
	PutSession(ctx context.Context, rec SessionRecord) error
	// GetSession returns the record of id; found is false when there is
	// none.
	GetSession(ctx context.Context, id string) (rec SessionRecord, found bool, err error)
	// TouchSessions moves the LastActive of each session named forward to
	// the time given; it never moves one back, nor makes a record.
	TouchSessions(ctx context.Context, lastActive map[string]time.Time) error
	// DeleteSessions deletes the records of the sessions named.
	DeleteSessions(ctx context.Context, ids ...string) error
	// DeleteIdleSessions deletes the records last active before before.
	DeleteIdleSessions(ctx context.Context, before time.Time) error
	// ListSessions returns the records last active at or after since, the
	// oldest created first (then by ID), at most limit (positive) of them;
	// their Capabilities may be left out.
	ListSessions(ctx context.Context, since time.Time, limit int) ([]SessionRecord, error)
}

// MaxClientJSON bounds the capabilities, and the clientInfo, a client may
// declare at initialize: a session keeps them for its life, in memory and
// in the store.
const MaxClientJSON = 64 << 10

// storeTimeout bounds each call to the SessionStore.
const storeTimeout = 5 * time.Second

// errNotRecorded is why a session the store could not record is gone: it
// never started.
var errNotRecorded = errors.New("the session could not be recorded")

// refusal is why a session could not be started or restored, as its
// client is told: a JSON-RPC error in an HTTP status, with Retry-After.
type refusal struct {
	status     int
	code       int
	msg        string
	data       any
	retryAfter string
	// reason counts the refusal in the rejections metric, if not "".
	reason string
}

// shuttingDownMsg tells a client the gateway takes no new work.
const shuttingDownMsg = "the gateway is shutting down and takes no new requests; retry shortly (another replica may answer)"

var (
	refuseShutdown = &refusal{status: http.StatusServiceUnavailable, code: jsonrpc.CodeInternalError, msg: shuttingDownMsg, retryAfter: "1"}
	refuseStore    = &refusal{status: http.StatusServiceUnavailable, code: jsonrpc.CodeInternalError, reason: "session_store",
		msg: "the gateway could not reach its session store; retry shortly", retryAfter: "1"}
)

// write answers req with ref, counting it in the rejections metric when
// it has a reason, and returns the error it sent.
func (ref *refusal) write(w http.ResponseWriter, req *http.Request, h *Handler, id jsonrpc.ID) *jsonrpc.Error {
	if ref.reason != "" {
		h.rejected(req.Context(), ref.reason)
	}
	return ref.send(w, id)
}

// send writes ref's answer and returns the error it sent.
func (ref *refusal) send(w http.ResponseWriter, id jsonrpc.ID) *jsonrpc.Error {
	w.Header().Set("Retry-After", ref.retryAfter)
	jerr := jsonrpc.NewError(ref.code, ref.msg, ref.data)
	front.WriteJSON(w, ref.status, errorMessage(id, jerr))
	return jerr
}

// newEpoch returns the mark of this process in the event ids of the
// sessions it restores.
func newEpoch() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// record returns what the store keeps of s.
func (s *session) record() SessionRecord {
	return SessionRecord{ID: s.key, Principal: s.principal, Version: s.version, Capabilities: s.caps, ClientInfo: s.info, Created: s.created, LastActive: s.created}
}

// recordNew stores the record of s, a session admitted for initialize. On
// failure s is gone again and the client is told to retry.
func (h *Handler) recordNew(ctx context.Context, s *session) *refusal {
	if h.opts.Store == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	err := h.opts.Store.PutSession(sctx, s.record())
	cancel()
	if err != nil {
		h.logger.Error("recording a new session failed", "session_id", s.key, "err", err)
		h.end(s, errNotRecorded)
		return refuseStore
	}
	s.mu.Lock()
	s.stored, s.storedActive = true, s.created
	// Ended while it was being recorded (Close, the admin API): a record
	// of a session that ended for good must not stay.
	gone := s.ended && s.cause != errShutdown
	s.mu.Unlock()
	if gone {
		h.forget(s)
	}
	return nil
}

// restore returns the session the id sid names, from the store, for a
// process that did not create it (or no longer holds it), or nil when
// there is none to serve: no store, a seal that does not open, another
// principal's id, no record (ended, or never stored), a record idle past
// IdleTimeout. A cap or a store that fails refuses it instead.
func (h *Handler) restore(r *http.Request, sid string) (*session, *refusal) {
	key, principal, ok := h.storedKey(r, sid)
	if !ok {
		return nil, nil
	}
	rec, found, err := h.servable(r.Context(), key, principal)
	if err != nil {
		h.logger.Error("reading a session from the store failed", "session_id", key, "err", err)
		return nil, refuseStore
	}
	if !found {
		return nil, nil
	}
	s := h.newSession(key, principal, rec.Version, rec.Capabilities, rec.ClientInfo, rec.Created, time.Now())
	s.tag = h.epoch
	s.stored, s.storedActive = true, rec.LastActive
	// Its input requests get ids the old process did not give: a late
	// answer to one of those must not reach a new one.
	var b [4]byte
	rand.Read(b[:])
	s.nextInput = uint64(binary.BigEndian.Uint32(b[:]))
	held, ref := h.admit(s, sid)
	if ref != nil {
		return nil, ref
	}
	if held == s {
		h.logger.Debug("session restored", "session_id", key, "principal", principal, "version", rec.Version)
	}
	return held, nil
}

// forward sends a request for the session sid, which this Handler does
// not hold, to the replica of the cluster that issued it, and reports
// whether the request is answered: by that replica, or here with 404 when
// it is gone (its session went with it). A request that came from
// another replica is never sent on.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, sid string, body []byte) bool {
	if h.opts.Cluster == nil || h.held(sid) != nil || h.opts.Cluster.Forwarded(r) {
		return false
	}
	tok, ok := h.openToken(sid)
	if !ok || tok.Replica == h.opts.Replica || tok.Principal != h.principal(r) {
		return false
	}
	h.logger.Debug("forwarding a session's request to its replica", "session_id", hex.EncodeToString(tok.Nonce), "replica", tok.Replica, "method", r.Method)
	if !h.opts.Cluster.Forward(w, r, body, tok.Replica) {
		writeError(w, http.StatusNotFound, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"session not found: the gateway replica that held it is gone; send initialize without Mcp-Session-Id to start a new one", nil)
	}
	return true
}

// openToken opens the session id sid: false when it was not sealed here
// (by this cluster's secret) as a session id.
func (h *Handler) openToken(sid string) (token, bool) {
	payload, err := h.sealer.Open(sid)
	if err != nil {
		return token{}, false
	}
	var tok token
	if json.Unmarshal(payload, &tok) != nil || len(tok.Nonce) != nonceLen {
		return token{}, false
	}
	return tok, true
}

// storedKey opens the session id sid of a request for a session this
// process does not hold, and returns the short id of the session the
// store may keep for the request's principal. ok is false when there is
// no store, the seal does not open, or the id is another principal's.
func (h *Handler) storedKey(r *http.Request, sid string) (key, principal string, ok bool) {
	tok, ok := h.openToken(sid)
	if !ok {
		return "", "", false
	}
	if h.opts.Store == nil || (h.opts.Cluster != nil && tok.Replica != h.opts.Replica) {
		// In a cluster, another replica's session that was not forwarded
		// to it (forward) went with that replica.
		if tok.Replica != h.opts.Replica {
			h.logger.Debug("request for another replica's session", "replica", tok.Replica)
		}
		return "", "", false
	}
	principal = h.principal(r)
	if tok.Principal != principal {
		return "", "", false
	}
	return hex.EncodeToString(tok.Nonce), principal, true
}

// servable returns the record of the session key for principal (any, when
// ""), if there is one this process could serve: not of a session that
// ended here, not another principal's, not idle past IdleTimeout (such a
// record is deleted).
func (h *Handler) servable(ctx context.Context, key, principal string) (SessionRecord, bool, error) {
	if h.ended.Contains(key) {
		return SessionRecord{}, false, nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	rec, found, err := h.opts.Store.GetSession(sctx, key)
	cancel()
	switch {
	case err != nil:
		return SessionRecord{}, false, err
	case !found:
		return SessionRecord{}, false, nil
	case (principal != "" && rec.Principal != principal) || !supported(rec.Version):
		h.logger.Warn("a stored session does not match its id; not serving it", "session_id", key)
		return SessionRecord{}, false, nil
	case time.Since(rec.LastActive) >= h.idleAfter():
		if err := h.deleteRecords(key); err != nil {
			h.logger.Error("deleting an idle session's record failed", "session_id", key, "err", err)
		}
		return SessionRecord{}, false, nil
	}
	return rec, true, nil
}

// idleAfter is how long a record may go without activity before its
// session is surely idle: the store's last activity may lag by a janitor
// round.
func (h *Handler) idleAfter() time.Duration {
	return h.opts.IdleTimeout + h.janitorInterval()
}

// endStored ends for good the session key that this process does not
// hold, without admitting it (a cap does not stand in the way of ending
// a session): it deletes the record, if there is one this process could
// serve for principal (any, when ""), and reports whether there was.
// A restore that read the record before is refused (admit); one that
// admitted it meanwhile has its session ended here.
func (h *Handler) endStored(ctx context.Context, key, principal string, cause error) (bool, error) {
	if h.opts.Store == nil {
		return false, nil
	}
	_, found, err := h.servable(ctx, key, principal)
	if err != nil {
		return false, fmt.Errorf("reading the session's record: %w", err)
	}
	if !found {
		return false, nil
	}
	if err := h.deleteRecords(key); err != nil {
		return false, fmt.Errorf("deleting the session's record: %w", err)
	}
	h.mu.Lock()
	h.ended.Add(key, struct{}{})
	s := h.sessions[key]
	h.mu.Unlock()
	if s != nil {
		h.end(s, cause)
	}
	h.logger.Debug("stored session ended", "session_id", key, "reason", cause.Error())
	return true, nil
}

// admit puts s, whose id is sid, in the session table, or refuses it (the
// session ended for good, the Handler is closing, a cap is reached). When
// the table already holds the session (a request restored it meanwhile)
// it returns that one.
func (h *Handler) admit(s *session, sid string) (*session, *refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held := h.byToken[sid]; held != nil {
		return held, nil
	}
	switch {
	case h.ended.Contains(s.key):
		// A restore that read the record before the session ended.
		return nil, nil
	case h.state != running:
		return nil, refuseShutdown
	case h.sessions[s.key] != nil:
		// The same session under another id: not one this gateway issued.
		return nil, nil
	case len(h.sessions) >= h.opts.MaxSessions:
		return nil, &refusal{status: http.StatusServiceUnavailable, code: gateway.CodeRateLimited, retryAfter: "60", reason: "sessions",
			msg:  "the gateway holds its maximum of sessions (sessions.max); retry later or end unused sessions with DELETE",
			data: map[string]int{"limit": h.opts.MaxSessions}}
	case h.perPrincipal[s.principal] >= h.opts.MaxSessionsPerPrincipal:
		return nil, &refusal{status: http.StatusTooManyRequests, code: gateway.CodeRateLimited, retryAfter: "60", reason: "sessions",
			msg:  "you hold the maximum of sessions per principal (sessions.max_per_principal); end unused sessions with DELETE, or wait for idle ones to expire",
			data: map[string]int{"limit": h.opts.MaxSessionsPerPrincipal}}
	}
	h.sessions[s.key] = s
	h.byToken[sid] = s
	s.token = sid
	h.perPrincipal[s.principal]++
	return s, nil
}

// forget deletes the record of s, which ended for good, if it has one.
func (h *Handler) forget(s *session) error {
	s.mu.Lock()
	stored := s.stored
	s.stored = false
	s.mu.Unlock()
	if !stored {
		return nil
	}
	if err := h.deleteRecords(s.key); err != nil {
		s.mu.Lock()
		s.stored = true
		s.mu.Unlock()
		return err
	}
	return nil
}

func (h *Handler) deleteRecords(keys ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return h.opts.Store.DeleteSessions(ctx, keys...)
}

// persist carries the activity of the sessions in ss to the store, and
// deletes the records of sessions no process used for longer than
// IdleTimeout: at most once a janitor round per session, so that a
// restarted gateway knows when each was last used within a round. A
// session that is busy (a call in flight, an input request waiting, a
// connected stream) counts as active now: it is not idle, however long
// ago its last request came.
func (h *Handler) persist(ss []*session, now time.Time) {
	if h.opts.Store == nil {
		return
	}
	touches := map[string]time.Time{}
	for _, s := range ss {
		s.mu.Lock()
		at := s.lastActive
		if len(s.calls) > 0 || len(s.inputs) > 0 || s.conns > 0 {
			at = now
		}
		if s.stored && !s.ended && at.After(s.storedActive) {
			touches[s.key] = at
		}
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if len(touches) > 0 {
		if err := h.opts.Store.TouchSessions(ctx, touches); err != nil {
			h.logger.Error("recording the sessions' activity failed", "sessions", len(touches), "err", err)
		} else {
			for _, s := range ss {
				if at, ok := touches[s.key]; ok {
					s.mu.Lock()
					s.storedActive = at
					s.mu.Unlock()
				}
			}
		}
	}
	if err := h.opts.Store.DeleteIdleSessions(ctx, now.Add(-h.idleAfter())); err != nil {
		h.logger.Error("deleting the records of idle sessions failed", "err", err)
	}
}
