// Package store is mcpgw's persistence. It keeps what must outlive a
// process: task records, the admin API's server records (the
// servers registered through it, and its enabled overrides of the config
// file's servers), the gateway's events (the server notifications of
// GET /admin/events, the newest MaxEvents), the legacy edge's sessions
// (so that a restarted gateway serves them) and the OAuth client's records:
// each principal's tokens at each upstream server and the client
// registrations the gateway made at authorization servers (oauth.go),
// sealed by the caller, so the store keeps their bytes and never reads
// them; and in search mode each principal's finds, the tools its
// 2026-07-28 clients found with search_tools, which join those clients'
// tools/list on every replica of a cluster (finds.go). Other admin state
// comes in later migrations.
//
// The default is one SQLite file under data_dir (DESIGN decision 10), through
// the pure-Go driver modernc.org/sqlite, so the binary needs no cgo. Replicas
// share a PostgreSQL database instead (Postgres, through pgx). Callers get
// typed methods (PutTask, GetServer, ...) and never SQL: the gateway declares
// the small interface it needs, and each driver satisfies it with the same
// behaviour, which one contract suite of tests holds Memory, SQLite and
// Postgres to.
//
// # SQLite
//
// Open applies the pragmas every connection needs (WAL, a busy timeout,
// foreign keys) and splits the work between two pools over the same file:
//
//	PutTask, DeleteExpiredTasks,
//	PutServer, DeleteServer,
//	AddEvent, AddRepeat,
//	PutSession, TouchSessions,
//	DeleteSessions, PutOAuthToken,
//	DeleteOAuthTokens, PutFinds,
//	DeleteExpiredFinds, ...      ──► writer: 1 connection, BEGIN IMMEDIATE
//	GetTask, ListTasks, ...,
//	GetServer, ListServers,
//	ListEvents, GetSession,
//	GetOAuthToken, GetFinds, ... ──► readers: a few query_only connections
//
// WAL lets readers run beside the one writer, and a single writer
// connection means the process's own writes queue in database/sql rather
// than failing with SQLITE_BUSY; the busy timeout covers the rest (a
// checkpoint, another process on the same file).
//
// # Migrations
//
// The schema is an ordered list of migrations in Go (migrate.go); the
// schema_migrations table records the versions applied. Open applies the
// missing ones in order, each in its own immediate transaction that
// re-reads the version, so two processes opening one file at once apply
// each migration once. A database whose version is newer than this binary
// knows is refused, never used.
//
// # Values
//
// Times are stored as UTC RFC 3339 text with nine fraction digits, which
// keeps nanoseconds and sorts as text; durations as whole milliseconds (the
// unit MCP uses for ttl and pollInterval); JSON as TEXT, kept byte for
// byte; booleans as 0 or 1; sealed OAuth data as a BLOB.
//
// Errors name the operation that failed but never a task's id (it may be a
// capability a client presents) or its result (it may hold user data). They
// do name a server (its name is not secret) but never show its entry, a
// definition that may hold credentials, nor an event's params, nor an OAuth
// record's principal or data, nor the principal or names of finds.
//
// # PostgreSQL
//
// OpenPostgres opens a pool (pgxpool, PostgresOptions.MaxConns connections)
// and applies the migrations of its own list, pgMigrations: the same
// versions and names as SQLite's, each in a transaction under
// pg_advisory_xact_lock, so replicas starting together apply each once.
// Values are stored as on SQLite (times as the same sortable text, since
// timestamptz keeps only microseconds; JSON as bytea, byte for byte), with
// one difference: PostgreSQL's text holds no NUL byte and no invalid UTF-8,
// so a record with such a string is refused, naming the field. AddEvent
// serializes on an advisory lock, so seqs commit in order across replicas.
// PostgreSQL also keeps the media store's blobs, which every replica
// serves (media.go: bytea rows, and a one-row media_totals that the
// statements adding and deleting them keep, so that the byte budget and
// the metrics never sum the table); SQLite does not, since its one replica
// keeps them in files. A change of the server records, and a put of finds
// that asks for it, is announced with NOTIFY, and Watch hears both kinds
// on one connection, so that the other replicas apply it at once.
// Errors name the host and database, never the DSN's password.
//
// Memory is the same store in memory, for when no database is configured;
// the contract tests hold it to the same behaviour.
package store
