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

// WatchServers calls changed each time a process changed the server
// records through this database (PutServer, DeleteServer), until ctx ends
// or the connection fails; it returns why. It holds one connection of its
// own, outside the pool's max_conns.
func (p *Postgres) WatchServers(ctx context.Context, changed func()) error {
	return p.watchServers(ctx, changed, func() {})
}

// watchServers is WatchServers, calling listening once it listens.
func (p *Postgres) watchServers(ctx context.Context, changed, listening func()) error {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("watching the server records: %w", p.redact(err))
	}
	conn := c.Hijack() // ours alone: LISTEN belongs to a session
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+serversChannel); err != nil {
		return fmt.Errorf("watching the server records: %w", p.redact(err))
	}
	listening()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("watching the server records: %w", p.redact(err))
		}
		changed()
	}
}
