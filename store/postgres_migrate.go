package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgMigrations is the PostgreSQL schema, oldest first: the same versions
// and names as migrations (SQLite's), one for one, so that both drivers'
// schema_migrations say the same. Append only, as there.
//
// Column types: times are text in timeLayout, as in SQLite, because
// timestamptz keeps microseconds and the store keeps nanoseconds; they are
// COLLATE "C" so that comparing and sorting them is comparing bytes. Ids and
// names are COLLATE "C" too: lists come in byte order on both drivers. JSON
// is bytea, never text or jsonb: it is kept byte for byte, and json.Valid
// lets through invalid UTF-8 inside strings, which text refuses.
var pgMigrations = []migration{
	{name: "tasks", sql: `
CREATE TABLE tasks (
	id               text    COLLATE "C" NOT NULL PRIMARY KEY,
	owner            text    COLLATE "C" NOT NULL,
	server           text    NOT NULL,
	caller           text    NOT NULL,
	upstream_id      text    NOT NULL,
	hosted           boolean NOT NULL,
	transport        text    NOT NULL,
	tool             text    NOT NULL,
	status           text    NOT NULL,
	status_message   text    NOT NULL,
	created_at       text    COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	updated_at       text    COLLATE "C" NOT NULL,
	ttl_ms           bigint,           -- NULL: unlimited
	poll_interval_ms bigint  NOT NULL, -- 0: none
	result           bytea,            -- JSON result object
	error            bytea,            -- JSON-RPC error object
	expires_at       text    COLLATE "C" -- NULL: never
);

-- ListTasks: one owner's tasks in id order.
CREATE INDEX tasks_owner_id ON tasks (owner, id);

-- UnfinishedTasks, at startup. The condition must stay the one in
-- unfinishedCondition, or PostgreSQL will not use the index.
CREATE INDEX tasks_unfinished ON tasks (id)
	WHERE status NOT IN ('completed', 'failed', 'cancelled');

-- DeleteExpiredTasks.
CREATE INDEX tasks_expires_at ON tasks (expires_at) WHERE expires_at IS NOT NULL;
`},
	{name: "servers", sql: `
-- The admin API's server records (servers.go); see SQLite's migration 2.
CREATE TABLE servers (
	name       text    COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> ''),
	source     text    NOT NULL CHECK (source IN ('api', 'config')),
	entry      bytea,   -- JSON object, kept byte for byte; NULL for 'config'
	enabled    boolean, -- NULL: no override
	created_at text    COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	updated_at text    COLLATE "C" NOT NULL,
	CHECK ((source = 'api' AND entry IS NOT NULL) OR (source = 'config' AND entry IS NULL))
);
`},
	{name: "events", sql: `
-- The gateway's event store (events.go). seq is the admin API's cursor: a
-- sequence never gives a value twice, even after rows were deleted; AddEvent
-- takes eventsLock around its insert, so seqs also commit in order and a
-- reader paging by seq never skips one that commits late.
CREATE TABLE events (
	seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	server  text   COLLATE "C" NOT NULL,
	method  text   COLLATE "C" NOT NULL,
	params  bytea,           -- JSON, kept byte for byte; NULL: none
	time    text   NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	repeats bigint NOT NULL DEFAULT 0 CHECK (repeats >= 0)
);

-- ListEvents by server, by method, in seq order.
CREATE INDEX events_server_seq ON events (server, seq);
CREATE INDEX events_method_seq ON events (method, seq);
`},
	{name: "sessions", sql: `
-- The legacy edge's sessions (sessions.go); see SQLite's migration 4.
CREATE TABLE sessions (
	id             text COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
	principal      text NOT NULL,
	version        text NOT NULL CHECK (version <> ''),
	capabilities   bytea, -- JSON object, kept byte for byte; NULL: none
	client_info    bytea, -- JSON object, kept byte for byte; NULL: none
	created_at     text COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	last_active_at text COLLATE "C" NOT NULL
);

-- DeleteIdleSessions.
CREATE INDEX sessions_last_active_at ON sessions (last_active_at);
`},
	{name: "replicas", sql: `
-- The replicas of a cluster (replicas.go); see SQLite's migration 5.
CREATE TABLE replicas (
	id         text COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
	url        text NOT NULL CHECK (url <> ''),
	started_at text COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	seen_at    text COLLATE "C" NOT NULL,
	servers    bytea -- JSON object: each server's state there; NULL: none
);
`},
	{name: "media", sql: `
-- The media store's blobs, which every replica serves (media.go). id is the
-- blob's keyed hash of its owner and bytes, so one id is one content: a
-- second put of it only refreshes its times. stored_at ends its life
-- (media.max_age); last_used orders the eviction under media.max_bytes.
-- A blob over about 2 kB is TOASTed out of line, so the heap row and its
-- indexes stay small.
CREATE TABLE media (
	id        text   COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
	owner     text   NOT NULL,
	mime_type text   NOT NULL CHECK (mime_type <> ''),
	size      bigint NOT NULL CHECK (size >= 0),
	stored_at text   COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	last_used text   COLLATE "C" NOT NULL,
	data      bytea  NOT NULL,
	CHECK (octet_length(data) = size)
);

-- DeleteExpiredMedia.
CREATE INDEX media_stored_at ON media (stored_at);
-- TrimMedia: the least recently used first.
CREATE INDEX media_last_used ON media (last_used, id);

-- The count and bytes of the media table, kept by the statements that add
-- and delete its rows, in their transactions, so that the byte budget and
-- the metrics read one row instead of summing the table.
CREATE TABLE media_totals (
	one   boolean NOT NULL PRIMARY KEY DEFAULT true CHECK (one),
	files bigint  NOT NULL CHECK (files >= 0),
	bytes bigint  NOT NULL CHECK (bytes >= 0)
);
INSERT INTO media_totals (one, files, bytes) VALUES (true, 0, 0);
`},
	{name: "oauth", sql: `
-- The OAuth client's records (oauth.go); see SQLite's migration 7. No
-- foreign key to servers: config-file servers have no row there.
CREATE TABLE oauth_tokens (
	server     text  COLLATE "C" NOT NULL CHECK (server <> ''),
	principal  text  COLLATE "C" NOT NULL,
	data       bytea NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 65536),
	updated_at text  COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	PRIMARY KEY (server, principal)
);

CREATE TABLE oauth_clients (
	server     text  COLLATE "C" NOT NULL CHECK (server <> ''),
	issuer     text  COLLATE "C" NOT NULL CHECK (issuer <> ''),
	data       bytea NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 65536),
	updated_at text  COLLATE "C" NOT NULL, -- UTC, RFC 3339, 9 fraction digits
	PRIMARY KEY (server, issuer)
);
`},
	{name: "search_finds", sql: `
-- The tools each principal found with search_tools (finds.go); see
-- SQLite's migration 8.
CREATE TABLE search_finds (
	principal text  COLLATE "C" NOT NULL PRIMARY KEY CHECK (principal <> ''),
	names     bytea NOT NULL, -- JSON array of strings, kept byte for byte
	expires   text  COLLATE "C" NOT NULL -- UTC, RFC 3339, 9 fraction digits
);

-- DeleteExpiredFinds.
CREATE INDEX search_finds_expires ON search_finds (expires);
`},
}

// Advisory lock keys, in the database's own space: the migration lock
// serializes replicas starting together; eventsLock serializes AddEvent.
const (
	migrateLock int64 = 0x6d6370_67770001 // "mcp" "gw" 1
	eventsLock  int64 = 0x6d6370_67770002
)

const pgCreateMigrationsTable = `
CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer NOT NULL PRIMARY KEY,
	name       text    NOT NULL,
	applied_at text    NOT NULL
)`

// migratePostgres brings the database up to len(ms). Each missing migration
// runs in its own transaction with its schema_migrations row, under
// pg_advisory_xact_lock: a replica that waited for another reads the
// version it left, so replicas starting together apply each migration once.
// PostgreSQL's DDL is transactional, so a failure leaves the previous
// version.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	for i, m := range ms {
		if err := applyPgMigration(ctx, pool, ms, i+1, m); err != nil {
			return err
		}
	}
	return nil
}

func applyPgMigration(ctx context.Context, pool *pgxpool.Pool, ms []migration, version int, m migration) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return fmt.Errorf("waiting for the migration lock: %w", err)
		}
		// Under the lock: CREATE TABLE IF NOT EXISTS is not safe against a
		// concurrent one.
		if _, err := tx.Exec(ctx, pgCreateMigrationsTable); err != nil {
			return fmt.Errorf("creating schema_migrations: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if current > len(ms) {
			return fmt.Errorf("the database is at schema version %d, newer than this mcpgw knows (version %d): run a newer mcpgw, or restore a backup", current, len(ms))
		}
		if current >= version {
			return nil
		}
		// Without arguments pgx sends the text as it is (the simple
		// protocol), so a migration may hold several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("applying migration %d (%s): %w", version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			version, m.name, formatTime(time.Now())); err != nil {
			return fmt.Errorf("recording migration %d (%s): %w", version, m.name, err)
		}
		return nil
	})
}
