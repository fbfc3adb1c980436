package store

import (
	"context"
	"fmt"
)

// serversChannel is the channel a change of the server records is
// announced on (LISTEN/NOTIFY), so that the other replicas apply it at
// once rather than at their next re-read.
const serversChannel = "mcpgw_servers"

// notifyServers announces that the record of the server name changed. The
// change is committed already; a notice that fails to go out is logged
// nowhere: the replicas' periodic re-read is the safety net.
func (p *Postgres) notifyServers(ctx context.Context, name string) {
	p.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, serversChannel, name)
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
