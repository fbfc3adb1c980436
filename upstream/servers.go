package upstream

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

// Changing the servers while the gateway runs (the admin API):
//
//	Add ──────────────────────────────────────────► new entry ─┐
//	Replace, SetEnabled, Restart ── stop the old ─► successor ─┼─ started and
//	Remove ──────────────────────── stop the old ─► (gone)     │  enabled?
//	                                                           ▼
//	                                                       supervise
//
// A change has two steps. Under Manager.mu it takes the old entry out of
// service (stopLocked: its context cancelled, its base and pooled clients
// taken from it and closed in goroutines of the entry) and puts the
// successor in its place, so that from then on calls, Servers and the
// reaper see only the successor, or no server. Then, without the lock, it
// waits for the old entry's work to end (awaitStop, bounded by the stop
// bound), and only then starts the successor: a change blocks until the
// old server has stopped, and the processes of one server never overlap.
// Changes are serialized by Manager.ops for the same reason.
//
// What the old entry still has under way when it stops (a start, a list
// refresh, a notification) finds it stopped and gives up without touching
// the successor or telling the watchers; the deliveries of its events
// already under way are waited for, so that none reaches a watcher after
// the change's own Event.

// Errors of the methods that change the servers. Each is returned wrapped
// with the server's name.
var (
	// ErrServerExists is returned by Add for a name a server already has.
	ErrServerExists = errors.New("server already exists")
	// ErrDisabled is returned by Restart for a disabled server.
	ErrDisabled = errors.New("server disabled")
)

// Add adds srv, already validated, to the servers. If the Manager has
// started and srv is enabled, Add starts it in the background, as Start
// does; before Start it only records it, and Start starts it. It emits an
// Event for srv.Name. A name a server already has gives an error wrapping
// ErrServerExists; after Close, Add returns ErrClosed. It is safe for
// concurrent use.
func (m *Manager) Add(srv config.Server) error {
	if srv.Name == "" {
		return errors.New("adding a server: the server has no name")
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	if _, ok := m.servers[srv.Name]; ok {
		m.mu.Unlock()
		return fmt.Errorf("server %q: %w", srv.Name, ErrServerExists)
	}
	e := m.newEntry(srv, m.newLog(srv.Name))
	m.servers[srv.Name] = e
	if m.started && srv.IsEnabled() {
		m.startLocked(e)
	}
	m.mu.Unlock()
	m.changed(srv.Name)
	return nil
}

// Replace swaps the configuration of the server named srv.Name for srv,
// already validated. It stops the old server, in whatever state it is
// (starting, running, waiting to restart, failed): its base client and
// every pooled client are closed (a stdio child is stopped and reaped),
// and calls in flight on them fail at once with an *UnavailableError
// (state stopped). Replace returns once the old server has stopped, or
// after the stop bound (3×StopGrace+1s), past which the stop goes on in
// the background. Then, if the Manager has started and srv is enabled, it
// starts the new one in the background, as Start does. The server's log
// file is kept and appended to, and its subscriptions and log level are
// restored on the new server as after a restart; its status starts anew
// (no lists, no restarts) until the new server runs. It emits an Event for
// srv.Name. An unknown name gives an error wrapping ErrUnknownServer;
// after Close, Replace returns ErrClosed. It is safe for concurrent use.
func (m *Manager) Replace(srv config.Server) error {
	return m.swap(srv.Name, StateStopped, "its configuration was replaced", func(old *entry) (*entry, error) {
		return m.newEntry(srv, old.log), nil
	})
}

// Remove stops the named server as Replace does, blocking as long, and
// forgets it: it is gone from Servers, Server, ServerConfig and LogPath,
// its log file is closed (and stays on disk), and calls for it get the
// error of an unknown server. Calls in flight fail with an
// *UnavailableError (state stopped). It emits an Event for name. An
// unknown name gives an error wrapping ErrUnknownServer; after Close,
// Remove returns ErrClosed. It is safe for concurrent use.
func (m *Manager) Remove(name string) error {
	return m.swap(name, StateStopped, "the server was removed", func(*entry) (*entry, error) {
		return nil, nil
	})
}

// SetEnabled switches the named server on or off, and its configuration's
// Enabled with it (see ServerConfig). Switching it off stops it as
// Replace does, blocking as long, and leaves it in StateDisabled with no
// lists, so that its tools are no longer offered; calls in flight fail
// with an *UnavailableError (state disabled). Switching it on starts it at
// once in the background if the Manager has started (before Start it
// only records it). A server already in the wanted state is left as it
// is, with no Event; otherwise SetEnabled emits one. An unknown name gives
// an error wrapping ErrUnknownServer; after Close, SetEnabled returns
// ErrClosed. It is safe for concurrent use.
func (m *Manager) SetEnabled(name string, enabled bool) error {
	return m.swap(name, StateDisabled, "", func(old *entry) (*entry, error) {
		if old.cfg.IsEnabled() == enabled {
			return old, nil
		}
		cfg := old.cfg
		on := enabled
		cfg.Enabled = &on
		next := m.newEntry(cfg, old.log)
		next.status.Restarts = old.status.Restarts
		next.errsSeen = slices.Clone(old.errsSeen)
		return next, nil
	})
}

// Restart stops the named server as Replace does, blocking as long, and
// starts it again at once in the background, whatever its state (running,
// waiting to restart, failed, exited): its backoff and its count of
// failures in a row start anew, and Status.Restarts goes up by one. Its
// lists stay in Status meanwhile, as across any restart, and calls in
// flight fail with an *UnavailableError (state restarting). Before Start,
// Restart does nothing (Start starts the server). It emits an Event for
// name. A disabled server gives an error wrapping ErrDisabled, an unknown
// name one wrapping ErrUnknownServer; after Close, Restart returns
// ErrClosed. It is safe for concurrent use.
func (m *Manager) Restart(name string) error {
	return m.swap(name, StateRestarting, "a restart was requested", func(old *entry) (*entry, error) {
		if !old.cfg.IsEnabled() {
			return nil, fmt.Errorf("server %q: %w", name, ErrDisabled)
		}
		if !m.started {
			return old, nil
		}
		next := m.newEntry(old.cfg, old.log)
		next.status = old.status
		next.status.Restarts++
		next.status.PID = 0
		next.status.NextRestart = time.Time{}
		next.listErrs = maps.Clone(old.listErrs)
		next.errsSeen = slices.Clone(old.errsSeen)
		return next, nil
	})
}

// ServerConfig returns the current configuration of the named server, as
// last given to NewManager, Add or Replace, with Enabled as SetEnabled
// left it. It is safe for concurrent use.
func (m *Manager) ServerConfig(name string) (config.Server, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.servers[name]
	if e == nil {
		return config.Server{}, false
	}
	return e.cfg, true
}

// swap runs a change of server name. Under m.mu, decide returns the entry
// that takes the place of old, the server's current one: nil to remove
// the server, or old itself for no change. swap then stops old, waits for
// it, starts the successor if the Manager has started and it is enabled,
// and emits an Event. stopAs and why are the state and error that calls
// in flight on old report (why also goes to the server's log).
func (m *Manager) swap(name string, stopAs State, why string, decide func(old *entry) (*entry, error)) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	old := m.servers[name]
	if old == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownServer, name)
	}
	next, err := decide(old)
	if err != nil || next == old {
		m.mu.Unlock()
		return err
	}
	m.stopLocked(old, stopAs, why)
	if next == nil {
		delete(m.servers, name)
	} else {
		m.servers[name] = next
		if m.started && next.cfg.IsEnabled() {
			next.status.State = StateStarting // once old has stopped
		}
	}
	m.mu.Unlock()

	m.awaitStop(old)
	if next == nil {
		if err := old.log.close(); err != nil {
			m.logger.Warn("closing the log of a removed server failed", "server", name, "err", err)
		}
	}
	m.mu.Lock()
	if next != nil {
		next.seed = old.seed
		if m.started && !m.closed && next.cfg.IsEnabled() {
			m.startLocked(next)
		}
	}
	m.mu.Unlock()
	m.changed(name)
	return nil
}

// stopLocked takes e out of service, the first step of a change: its work
// is cancelled, and its base client and pooled clients are taken from it
// and closed in goroutines of e, each within the stop bound (a stdio child
// is stopped and reaped), so that the calls in flight on them fail at
// once; they and the calls that still reach e report state st and error
// why. m.mu is held and m is not closed.
func (m *Manager) stopLocked(e *entry, st State, why string) {
	live := m.started && e.cfg.IsEnabled()
	e.stopped = true
	e.cancel()
	e.status.State, e.status.Error, e.status.NextRestart = st, why, time.Time{}
	line := "stopped: " + cmp.Or(why, string(st))
	if c := e.client; c != nil {
		e.client = nil
		// The base client's own clientLog (with its credentials to
		// redact) is the supervisor's; line holds no secret.
		m.closeLater(e, c, newClientLog(e.log, "", Credentials{}), line)
	} else if live {
		e.log.write(TagLifecycle, line)
	}
	for _, pl := range e.pools() {
		for key, p := range pl.clients {
			delete(pl.clients, key)
			if p.client != nil {
				m.closeLater(e, p.client, p.log, line)
			}
			// A client still connecting is closed by its connect
			// goroutine, which e's cancelled context ends.
		}
	}
}

// awaitStop waits for the work of e, stopped, to end: its goroutines (the
// supervisor, connects, refreshes, the closing of its clients) and the
// deliveries of its events under way. Closing a client is bounded by the
// stop bound, and the rest ends with e's context, so the wait is bounded
// by the stop bound too; past it (a watcher that blocks, say), the rest
// goes on in the background, Close still waits for its goroutines, and the
// overrun is logged.
func (m *Manager) awaitStop(e *entry) {
	done := make(chan struct{})
	go func() {
		e.work.Wait()
		close(done)
	}()
	bound := m.stopBound()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		m.logger.Warn("a stopped server's work did not end within the stop bound; it goes on ending in the background",
			"server", e.cfg.Name, "bound", bound)
	}
}
