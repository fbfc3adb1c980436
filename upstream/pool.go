package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

// The clients of a per_principal or per_session server (DESIGN decision
// 5): one per principal, or per downstream session, each its own upstream
// session (HTTP) or process (stdio), with its own credentials.
//
//	Call ─► acquire(key) ── in the pool? ── yes ─► wait for its connect ─► use
//	                            │ no
//	                            ▼
//	                   full? ── the least recently used client with no call
//	                     │      in flight is closed; none: *PoolFullError
//	                     ▼
//	                   add, connect in the background (StartTimeout; the
//	                   callers that come meanwhile wait for the same one)
//
// A client leaves the pool when it dies (the next call makes a new one),
// after IdleTimeout without calls (the reaper), at EndSession (per_session),
// when its server is stopped (Replace, Remove, SetEnabled, Restart), or at
// Close. The pool and its clients are guarded by Manager.mu.
//
// A server's mirrored sessions (mirror.go) are a pool of their own, keyed
// by caller and mirrored capabilities, in the server's session mode
// (shared: one caller); they come and go the same way.

// pool holds one server's clients by caller key.
type pool struct {
	// mode is config.SessionPerPrincipal or config.SessionPerSession, or
	// config.SessionShared for the mirrored sessions of a shared server.
	mode    string
	max     int
	idle    time.Duration
	clients map[string]*pooled
}

// pooled is one caller's client, connecting or connected.
type pooled struct {
	pl        *pool
	key       string
	callerKey string          // pl.key of its caller
	caps      json.RawMessage // the mirrored capabilities; nil for a caller's own session
	principal string
	who       Caller        // the caller that made it, named in its notifications' Events
	label     string        // how the server's log names it
	ready     chan struct{} // closed when the connect ended
	client    *Client       // set before ready is closed, on success
	log       *clientLog    // set with client
	err       error         // set before ready is closed, on failure
	inflight  int           // calls using or waiting for it
	lastUsed  time.Time
}

// newPool returns the pool of srv, or nil for a shared server.
func newPool(srv config.Server) *pool {
	switch srv.SessionMode {
	case config.SessionPerPrincipal, config.SessionPerSession:
	default:
		return nil
	}
	return newPoolOf(srv.SessionMode, srv.Pool)
}

// newPoolOf returns a pool in mode bounded by cfg, with the defaults.
func newPoolOf(mode string, cfg config.Pool) *pool {
	p := &pool{mode: mode, max: cfg.Max, idle: time.Duration(cfg.IdleTimeout), clients: map[string]*pooled{}}
	if p.max <= 0 {
		p.max = config.DefaultPoolMax
	}
	if p.idle <= 0 {
		p.idle = config.DefaultPoolIdle
	}
	return p
}

// owner returns who as far as the pool tells callers apart: the
// principal, and for a per_session server the session too; no one for a
// shared server's.
func (p *pool) owner(who Caller) Caller {
	switch {
	case p.mode == config.SessionShared:
		return Caller{}
	case p.mode == config.SessionPerSession && who.Session != "":
		return who
	}
	return Caller{Principal: who.Principal}
}

func sessionKey(session string) string     { return "s:" + session }
func principalKey(principal string) string { return "p:" + principal }

// key returns the pool key of who, and the principal whose credentials
// its client gets. A per_session server keys a caller without a session
// (a modern-era request) by its principal.
func (p *pool) key(who Caller) string {
	if p.mode == config.SessionShared {
		return "shared"
	}
	if p.mode == config.SessionPerSession && who.Session != "" {
		return sessionKey(who.Session)
	}
	return principalKey(who.Principal)
}

// label names a pooled client in the server's log: the principal, or a
// short hash of the session id (which is a bearer token of sorts).
func (p *pool) label(who Caller) string {
	if p.mode == config.SessionShared {
		return ""
	}
	if p.mode == config.SessionPerSession && who.Session != "" {
		sum := sha256.Sum256([]byte(who.Session))
		return "session " + hex.EncodeToString(sum[:4])
	}
	if who.Principal == "" {
		return "anonymous"
	}
	return "principal " + who.Principal
}

// connected reports whether p has a live client.
func (p *pooled) connected() bool {
	if p.client == nil {
		return false
	}
	select {
	case <-p.client.Done():
		return false
	default:
		return true
	}
}

// acquire returns the caller's client in pl (e's pool or mirrors), the
// one mirroring caps when caps is not nil, connecting it first if needed,
// and counts a call in flight on it until release.
func (m *Manager) acquire(ctx context.Context, e *entry, pl *pool, who Caller, caps json.RawMessage) (*pooled, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, &UnavailableError{Server: e.cfg.Name, State: StateStopped}
	}
	if uerr := stoppedErrLocked(e); uerr != nil {
		m.mu.Unlock()
		return nil, uerr
	}
	callerKey := pl.key(who)
	key, label := callerKey, pl.label(who)
	if caps != nil {
		key += " " + string(caps)
		label = strings.TrimSpace(label + " mirroring " + string(caps))
	}
	p := pl.clients[key]
	if p != nil && p.client != nil && !p.connected() {
		// Died since its last call, and its connect goroutine has not
		// dropped it yet.
		m.retireLocked(e, p, "its connection ended")
		p = nil
	}
	if p == nil {
		if len(pl.clients) >= pl.max {
			victim := pl.lru()
			if victim == nil {
				m.mu.Unlock()
				return nil, &PoolFullError{Server: e.cfg.Name, Max: pl.max}
			}
			m.retireLocked(e, victim, "closed for a new caller (pool full)")
		}
		p = &pooled{pl: pl, key: key, callerKey: callerKey, caps: caps, principal: who.Principal, who: pl.owner(who), label: label, ready: make(chan struct{})}
		pl.clients[key] = p
		m.goEntry(e, func() { m.connectPooled(e, p) })
	}
	p.inflight++
	p.lastUsed = time.Now()
	m.mu.Unlock()
	select {
	case <-p.ready:
	case <-ctx.Done():
		m.release(p)
		return nil, ctx.Err()
	}
	if p.err != nil {
		m.release(p)
		if uerr := m.stoppedErr(e); uerr != nil {
			return nil, uerr
		}
		return nil, &UnavailableError{Server: e.cfg.Name, State: StateFailed, Err: p.err.Error(), Cause: p.err}
	}
	return p, nil
}

// release ends a call's use of p.
func (m *Manager) release(p *pooled) {
	m.mu.Lock()
	p.inflight--
	p.lastUsed = time.Now()
	m.mu.Unlock()
}

// lru returns the least recently used client that is connected (or dead)
// and has no call in flight, or nil.
func (pl *pool) lru() *pooled {
	var victim *pooled
	for _, p := range pl.clients {
		if p.inflight > 0 || p.client == nil {
			continue
		}
		if victim == nil || p.lastUsed.Before(victim.lastUsed) {
			victim = p
		}
	}
	return victim
}

// retireLocked takes p out of e's pool and closes its client in the
// background; a client still connecting is closed by its connect
// goroutine. m.mu is held, m is not closed, and e is in service or being
// stopped.
func (m *Manager) retireLocked(e *entry, p *pooled, why string) {
	if p.pl.clients[p.key] == p {
		delete(p.pl.clients, p.key)
	}
	if p.client != nil {
		m.closeLater(e, p.client, p.log, "stopped: "+why)
	}
}

// dropPooled takes out of the pool a client whose connection ended under
// a call.
func (m *Manager) dropPooled(e *entry, p *pooled, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || p.pl.clients[p.key] != p {
		return
	}
	delete(p.pl.clients, p.key)
	m.closeLater(e, p.client, p.log, "disconnected: "+err.Error())
}

// connectPooled connects p's client within the start timeout, then watches
// it until it dies (and leaves the pool) or leaves the pool otherwise. It
// runs in a goroutine of e (goEntry).
func (m *Manager) connectPooled(e *entry, p *pooled) {
	ctx, cancel := context.WithTimeout(e.ctx, m.opts.StartTimeout)
	defer cancel()
	e.log.write(TagLifecycle, labelled(p.label, "starting ("+describe(e.cfg)+")"))
	c, cl, err := m.dial(ctx, e, p.who, p.label, p.caps)
	var managerLevel string
	if err == nil {
		if err = c.Connect(ctx); err == nil {
			managerLevel = m.restore(ctx, e, c, cl, nil)
		}
	}
	if err != nil && ctx.Err() != nil && e.ctx.Err() == nil {
		err = fmt.Errorf("did not start within %s: %w", m.opts.StartTimeout, err)
	}
	m.mu.Lock()
	if err == nil && (m.goneLocked(e) || p.pl.clients[p.key] != p) {
		err = fmt.Errorf("upstream session of server %q closed while it was starting", e.cfg.Name)
		m.mu.Unlock()
		m.closeNow(c)
		m.mu.Lock()
	}
	if err != nil {
		err = errors.New(cl.redact(err.Error()))
		if !m.closed && p.pl.clients[p.key] == p {
			delete(p.pl.clients, p.key)
		}
		p.err = err
		close(p.ready)
		m.mu.Unlock()
		if e.ctx.Err() == nil {
			m.logger.Warn("starting an upstream session for a caller failed", "server", e.cfg.Name, "principal", p.principal, "err", err)
		}
		cl.lifecycle("start failed: %v", err)
		return
	}
	p.client, p.log = c, cl
	close(p.ready)
	if m.level != "" && m.level != managerLevel {
		m.setLevelLocked(e, c, m.level) // SetLogLevel ran meanwhile
	}
	m.mu.Unlock()
	running := "running"
	if pid := c.PID(); pid != 0 {
		running += fmt.Sprintf(": pid %d", pid)
	}
	cl.lifecycle("%s", running)

	select {
	case <-c.Done():
	case <-e.ctx.Done():
		return // Close or e's stop closes it
	}
	m.mu.Lock()
	if m.goneLocked(e) || p.pl.clients[p.key] != p {
		m.mu.Unlock()
		return // retired: whoever retired it closes it
	}
	delete(p.pl.clients, p.key)
	m.mu.Unlock()
	why := "connection closed"
	if err := c.Err(); err != nil {
		why = cl.redact(err.Error())
	}
	m.logger.Debug("an upstream session for a caller ended", "server", e.cfg.Name, "principal", p.principal, "err", why)
	cl.lifecycle("disconnected: %s", why)
	m.closeNow(c)
}

// reapInterval is how often the reaper looks for idle clients, given the
// shortest idle timeout: often enough that a client outlives its timeout
// by at most a quarter of it.
func reapInterval(idle time.Duration) time.Duration {
	return max(idle/4, 10*time.Millisecond)
}

// reapLocked makes sure that the reaper runs, often enough for a pool with
// idle timeout idle: it starts it with the first pool (at Start, or when a
// pooled server is added or started later), and shortens its interval for
// a pool with a shorter timeout. The interval never grows back: a reaper
// that looks more often than needed only costs a scan. m.mu is held and m
// is not closed.
func (m *Manager) reapLocked(idle time.Duration) {
	d := reapInterval(idle)
	switch {
	case m.reapEvery == 0:
		m.reapEvery = d
		m.wg.Add(1)
		go m.reap(d)
	case d < m.reapEvery:
		m.reapEvery = d
		// Only holders of m.mu send, and the reaper only receives: after
		// the drain, the send does not block.
		select {
		case <-m.reapNudge:
		default:
		}
		m.reapNudge <- d
	}
}

// reap closes, every interval until Close, the pooled clients nobody used
// for their server's idle timeout. A shorter interval comes on reapNudge.
func (m *Manager) reap(interval time.Duration) {
	defer m.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case d := <-m.reapNudge:
			tick.Reset(d)
		case now := <-tick.C:
			m.reapOnce(now)
		}
	}
}

func (m *Manager) reapOnce(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, e := range m.servers {
		for _, pl := range e.pools() {
			for _, p := range pl.clients {
				if p.client != nil && p.inflight == 0 && now.Sub(p.lastUsed) >= pl.idle {
					m.retireLocked(e, p, fmt.Sprintf("idle for %s", pl.idle))
				}
			}
		}
	}
}

// pools returns e's pool and mirrors, those it has.
func (e *entry) pools() []*pool {
	var out []*pool
	for _, pl := range []*pool{e.pool, e.mirrors} {
		if pl != nil {
			out = append(out, pl)
		}
	}
	return out
}
