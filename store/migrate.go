package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A migration is one step of the schema. Its version is its place in
// migrations, counting from 1.
type migration struct {
	name string // for errors and the schema_migrations table
	sql  string // one or more statements, run in one transaction
}

// migrations is the schema, oldest first. Append only: never edit, reorder
// or remove a migration that has shipped, since databases out there record
// it as applied. A PostgreSQL store will keep its own list with the same
// versions.
var migrations = []migration{
	{name: "tasks", sql: `
CREATE TABLE tasks (
	id               TEXT    NOT NULL PRIMARY KEY,
	owner            TEXT    NOT NULL,
	server           TEXT    NOT NULL,
	caller           TEXT    NOT NULL,
	upstream_id      TEXT    NOT NULL,
	hosted           INTEGER NOT NULL CHECK (hosted IN (0, 1)),
	transport        TEXT    NOT NULL,
	tool             TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	status_message   TEXT    NOT NULL,
	created_at       TEXT    NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	updated_at       TEXT    NOT NULL,
	ttl_ms           INTEGER,          -- NULL: unlimited
	poll_interval_ms INTEGER NOT NULL, -- 0: none
	result           TEXT,             -- JSON result object
	error            TEXT,             -- JSON-RPC error object
	expires_at       TEXT              -- NULL: never
) STRICT;

-- ListTasks: one owner's tasks in id order.
CREATE INDEX tasks_owner_id ON tasks (owner, id);

-- UnfinishedTasks, at startup. The condition must stay the one in
-- unfinishedCondition, or SQLite will not use the index.
CREATE INDEX tasks_unfinished ON tasks (id)
	WHERE status NOT IN ('completed', 'failed', 'cancelled');

-- DeleteExpiredTasks.
CREATE INDEX tasks_expires_at ON tasks (expires_at) WHERE expires_at IS NOT NULL;
`},
	{name: "servers", sql: `
-- The admin API's server records (servers.go). A server of source 'api' was
-- registered through the admin API and entry is its definition; one of
-- source 'config' is in the config file, and the row holds only the state
-- the admin API recorded for it.
CREATE TABLE servers (
	name       TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
	source     TEXT    NOT NULL CHECK (source IN ('api', 'config')),
	entry      TEXT,    -- JSON object, kept byte for byte; NULL for 'config'
	enabled    INTEGER CHECK (enabled IN (0, 1)), -- NULL: no override
	created_at TEXT    NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	updated_at TEXT    NOT NULL,
	CHECK ((source = 'api' AND entry IS NOT NULL) OR (source = 'config' AND entry IS NULL))
) STRICT;
`},
	{name: "events", sql: `
-- The gateway's event store (events.go): server notifications it does not
-- know, for GET /admin/events. seq is the admin API's cursor: AUTOINCREMENT
-- keeps it growing and never reuses one, even after AddEvent deleted the
-- oldest rows or the newest ones were deleted before a restart.
CREATE TABLE events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	server  TEXT    NOT NULL,
	method  TEXT    NOT NULL,
	params  TEXT,             -- JSON, kept byte for byte; NULL: none
	time    TEXT    NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	repeats INTEGER NOT NULL DEFAULT 0 CHECK (repeats >= 0)
) STRICT;

-- ListEvents by server, by method, in seq order.
CREATE INDEX events_server_seq ON events (server, seq);
CREATE INDEX events_method_seq ON events (method, seq);
`},
	{name: "sessions", sql: `
-- The legacy edge's sessions (sessions.go), so that a restarted gateway
-- serves them. A session that ended has no row; id is the short id, never
-- the Mcp-Session-Id, which is a credential.
CREATE TABLE sessions (
	id             TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
	principal      TEXT NOT NULL,
	version        TEXT NOT NULL CHECK (version <> ''),
	capabilities   TEXT, -- JSON object, kept byte for byte; NULL: none
	client_info    TEXT, -- JSON object, kept byte for byte; NULL: none
	created_at     TEXT NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	last_active_at TEXT NOT NULL
) STRICT;

-- DeleteIdleSessions.
CREATE INDEX sessions_last_active_at ON sessions (last_active_at);
`},
	{name: "replicas", sql: `
-- The replicas of a cluster (replicas.go): each says it is alive by
-- writing seen_at; the others reach it at url. A replica that stops
-- deletes its row; one that died leaves it to lapse.
CREATE TABLE replicas (
	id         TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
	url        TEXT NOT NULL CHECK (url <> ''),
	started_at TEXT NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	seen_at    TEXT NOT NULL,
	servers    TEXT  -- JSON object: each server's state there; NULL: none
) STRICT;
`},
	{name: "media", sql: `
-- Nothing: on SQLite (one replica) the media store keeps its blobs in files
-- under data_dir/media, never in the database. The version is taken so that
-- both drivers' schema_migrations say the same; PostgreSQL's migration 6
-- holds the blobs that its replicas share.
SELECT 1;
`},
	{name: "oauth", sql: `
-- The OAuth client's records (oauth.go): each principal's tokens at each
-- server (principal '' is the gateway's own), and the client registration
-- the gateway made at each authorization server (by issuer) for a server.
-- data is sealed by the caller; the store never reads it. Neither table
-- refers to servers: a server of the config file has no row there, and
-- deleting a server's row must not take its users' tokens with it. The
-- primary keys serve every lookup, count and delete (by server first).
CREATE TABLE oauth_tokens (
	server     TEXT NOT NULL CHECK (server <> ''),
	principal  TEXT NOT NULL,
	data       BLOB NOT NULL CHECK (length(data) BETWEEN 1 AND 65536),
	updated_at TEXT NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	PRIMARY KEY (server, principal)
) STRICT;

CREATE TABLE oauth_clients (
	server     TEXT NOT NULL CHECK (server <> ''),
	issuer     TEXT NOT NULL CHECK (issuer <> ''),
	data       BLOB NOT NULL CHECK (length(data) BETWEEN 1 AND 65536),
	updated_at TEXT NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	PRIMARY KEY (server, issuer)
) STRICT;
`},
	{name: "search_finds", sql: `
-- The tools each principal's 2026-07-28 clients found with the gateway's
-- search_tools (finds.go), which join those clients' tools/list on every
-- replica until expires. names is the exposed names, oldest first, as a
-- JSON array of strings; a put replaces the whole row.
CREATE TABLE search_finds (
	principal TEXT NOT NULL PRIMARY KEY CHECK (principal <> ''),
	names     TEXT NOT NULL, -- JSON array of strings, kept byte for byte
	expires   TEXT NOT NULL  -- UTC, RFC 3339, 9 fraction digits
) STRICT;

-- DeleteExpiredFinds.
CREATE INDEX search_finds_expires ON search_finds (expires);
`},
}

const createMigrationsTable = `
CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at TEXT    NOT NULL
) STRICT`

// migrate brings db up to len(ms). Each missing migration runs in its own
// transaction with its schema_migrations row, so a failure leaves the
// database at the previous version, and a crash never half-applies one.
// The transactions are immediate (the writer's _txlock), so the version
// read inside one cannot change before it commits: two processes opening a
// new file at once apply each migration once.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	if _, err := db.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	for i, m := range ms {
		if err := applyMigration(ctx, db, ms, i+1, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, ms []migration, version int, m migration) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("applying migration %d (%s): %w", version, m.name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if current > len(ms) {
		return fmt.Errorf("the database is at schema version %d, newer than this mcpgw knows (version %d): run a newer mcpgw, or restore a backup", current, len(ms))
	}
	if current >= version {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("applying migration %d (%s): %w", version, m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		version, m.name, formatTime(time.Now())); err != nil {
		return fmt.Errorf("recording migration %d (%s): %w", version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migration %d (%s): %w", version, m.name, err)
	}
	return nil
}

// schemaVersion is the highest migration applied, 0 for a new database.
func schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return v, nil
}
