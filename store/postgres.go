package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of PostgresOptions.
const (
	// DefaultMaxConns is the pool's default size. Small on purpose: every
	// replica holds its own pool, PostgreSQL's max_connections (100 by
	// default) is shared by all of them, and the store's statements are
	// short, so a few connections serve many requests.
	DefaultMaxConns = 10
	// MaxMaxConns bounds PostgresOptions.MaxConns.
	MaxMaxConns = 1000
	// DefaultConnectTimeout bounds one connection attempt, so that a
	// database that does not answer fails the start instead of hanging it.
	DefaultConnectTimeout = 10 * time.Second
)

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	// DSN is the connection string: a URL (postgres://user:pass@host/db)
	// or key=value pairs. It holds a password: it never appears in an
	// error.
	DSN string
	// MaxConns is the pool's size, from 1 to MaxMaxConns. If zero,
	// DefaultMaxConns.
	MaxConns int
	// ConnectTimeout bounds one connection attempt and the first ping. If
	// zero, the DSN's connect_timeout, or DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// Postgres is the store on a PostgreSQL database, which several replicas
// share. It has the methods and the behaviour of SQLite (the contract tests
// hold both to them). It is safe for concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
	// where names the database in errors: driver, host and database,
	// never the user's password.
	where string
	// secret is the password, for redact.
	secret string

	now         func() time.Time // the clock for expiry; time.Now outside tests
	deleteBatch int              // rows per DELETE in the batched deletes

	closeOnce sync.Once
}

// OpenPostgres connects to the database of opts.DSN and applies the
// migrations it lacks, under a lock, so that replicas starting together
// apply each once. It fails on a database written by a newer mcpgw. The
// caller must Close it.
func OpenPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	return openPostgres(ctx, opts, pgMigrations)
}

// pgx rather than database/sql: pgxpool is the driver's own pool, with
// PostgreSQL's types (bytea, bigint, arrays for the batched session
// updates) without database/sql's conversions, statements prepared and
// cached per connection, and it is what LISTEN/NOTIFY and COPY, which later
// slices need, are written against.
func openPostgres(ctx context.Context, opts PostgresOptions, ms []migration) (_ *Postgres, err error) {
	switch {
	case opts.MaxConns == 0:
		opts.MaxConns = DefaultMaxConns
	case opts.MaxConns < 0 || opts.MaxConns > MaxMaxConns:
		return nil, fmt.Errorf("opening the postgres database: the pool size %d is not from 1 to %d", opts.MaxConns, MaxMaxConns)
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		// pgx's error quotes the DSN, and only tries to hide the password.
		return nil, errors.New("opening the postgres database: the dsn is not a PostgreSQL connection string (postgres://user:password@host:port/database?options, or key=value pairs)")
	}
	cfg.MaxConns = int32(opts.MaxConns)
	switch {
	case opts.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	p := &Postgres{
		where:       fmt.Sprintf("postgres database %q on %s", cfg.ConnConfig.Database, hostPort(cfg)),
		now:         time.Now,
		deleteBatch: deleteBatch,
	}
	secret := cfg.ConnConfig.Password
	p.secret = secret
	defer func() {
		if err != nil {
			err = redacted{fmt.Errorf("opening the %s: %w", p.where, err), secret}
		}
	}()
	p.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.pool.Close()
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout)
	defer cancel()
	if err := p.pool.Ping(pctx); err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if err := migratePostgres(ctx, p.pool, ms); err != nil {
		return nil, err
	}
	return p, nil
}

// hostPort is where cfg connects first, as host:port (or the socket
// folder), for errors.
func hostPort(cfg *pgxpool.Config) string {
	h := cfg.ConnConfig.Host
	if strings.HasPrefix(h, "/") {
		return h
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return fmt.Sprintf("%s:%d", h, cfg.ConnConfig.Port)
}

// redacted is err with every copy of secret in its text replaced: pgx's
// connection errors name the user, the host and the database, and a
// password must not follow them into a log even if a server quotes it.
type redacted struct {
	err    error
	secret string
}

func (r redacted) Error() string {
	if r.secret == "" {
		return r.err.Error()
	}
	return strings.ReplaceAll(r.err.Error(), r.secret, "xxxxx")
}

func (r redacted) Unwrap() error { return r.err }

// redact is err naming the database, its password hidden.
func (p *Postgres) redact(err error) error {
	return redacted{fmt.Errorf("the %s: %w", p.where, err), p.secret}
}

// Ping checks that the database answers a read, for the gateway's
// readiness (/readyz). It fails once the store is closed.
func (p *Postgres) Ping(ctx context.Context) error {
	var one int
	if err := p.pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("reading the database: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for the connections in use to be
// released. It may be called more than once.
func (p *Postgres) Close() error {
	p.closeOnce.Do(p.pool.Close)
	return nil
}

// isNoRows reports whether err says a query found no row.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
