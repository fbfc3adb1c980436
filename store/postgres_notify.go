package store

import (
	"context"
	"fmt"
)

// The channels changes are announced on (LISTEN/NOTIFY), so that the other
// replicas apply them at once rather than at their next re-read: a change
// of the server records (the payload is the server's name), and of a
// principal's finds (the payload is the principal).
const (
	serversChannel = "mcpgw_servers"
	findsChannel   = "mcpgw_finds"
)

// notifyServers announces that the record of the server name changed. The
// change is committed already; a notice that fails to go out is logged
// nowhere: the replicas' periodic re-read is the safety net.
func (p *Postgres) notifyServers(ctx context.Context, name string) {
	p.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, serversChannel, name)
}

// notifyFinds announces that principal's finds changed, as notifyServers:
// a notice that fails to go out is no error, since the other replicas
// read the finds again when they need them.
func (p *Postgres) notifyFinds(ctx context.Context, principal string) {
	p.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, findsChannel, principal)
}

// Watchers are what Watch calls on the notices of other processes.
type Watchers struct {
	Servers func()                 // the server records changed (may be nil)
	Finds   func(principal string) // a principal's finds changed (may be nil)
}

// Watch calls w's functions on each change a process made through this
// database (PutServer and DeleteServer call Servers; PutFinds with
// announce calls Finds), one at a time, until ctx ends or the connection
// fails; it returns why. Both channels share one connection, held apart
// from the pool's max_conns; it listens only on those w has a function
// for.
func (p *Postgres) Watch(ctx context.Context, w Watchers) error {
	return p.watch(ctx, w, func() {})
}

// WatchServers is Watch of the server records alone.
func (p *Postgres) WatchServers(ctx context.Context, changed func()) error {
	return p.Watch(ctx, Watchers{Servers: changed})
}

// watch is Watch, calling listening once it listens.
func (p *Postgres) watch(ctx context.Context, w Watchers, listening func()) error {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("watching the store's changes: %w", p.redact(err))
	}
	conn := c.Hijack() // ours alone: LISTEN belongs to a session
	defer conn.Close(context.WithoutCancel(ctx))
	for _, l := range []struct {
		channel string
		on      bool
	}{{serversChannel, w.Servers != nil}, {findsChannel, w.Finds != nil}} {
		if !l.on {
			continue
		}
		if _, err := conn.Exec(ctx, `LISTEN `+l.channel); err != nil {
			return fmt.Errorf("watching the store's changes: %w", p.redact(err))
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("watching the store's changes: %w", p.redact(err))
		}
		switch {
		case n.Channel == serversChannel && w.Servers != nil:
			w.Servers()
		case n.Channel == findsChannel && w.Finds != nil:
			w.Finds(n.Payload)
		}
	}
}
