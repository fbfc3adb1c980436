package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Each method below is its SQLite namesake on PostgreSQL: the same checks,
// errors and results; the comments say only where the SQL differs.

// textOK reports whether PostgreSQL's text can hold s: valid UTF-8 without
// a NUL byte. SQLite's TEXT holds any bytes.
func textOK(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// checkText reports the first of fields PostgreSQL's text cannot hold,
// naming it but never showing its value.
func checkText(what string, fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if !textOK(fields[i+1]) {
			return fmt.Errorf("the %s's %s holds a NUL byte or invalid UTF-8, which PostgreSQL text cannot store", what, fields[i])
		}
	}
	return nil
}

// jsonBytes is j for a bytea column: NULL when empty.
func jsonBytes(j json.RawMessage) []byte {
	if len(j) == 0 {
		return nil
	}
	return []byte(j)
}

// rawJSON is a bytea column read back: nil for NULL. pgx gives each row
// its own slice.
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// noLimit is LIMIT's argument for limit: NULL, which is no limit, when
// limit <= 0.
func noLimit(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}

const pgPutTaskSQL = `INSERT INTO tasks (` + taskColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT (id) DO UPDATE SET
	owner = excluded.owner, server = excluded.server, caller = excluded.caller,
	upstream_id = excluded.upstream_id, hosted = excluded.hosted, transport = excluded.transport,
	tool = excluded.tool, status = excluded.status, status_message = excluded.status_message,
	created_at = excluded.created_at, updated_at = excluded.updated_at, ttl_ms = excluded.ttl_ms,
	poll_interval_ms = excluded.poll_interval_ms, result = excluded.result, error = excluded.error,
	expires_at = excluded.expires_at`

const pgUnexpired = `(expires_at IS NULL OR expires_at > $%d)`

// PutTask stores t, replacing the task with the same ID if there is one.
func (p *Postgres) PutTask(ctx context.Context, t Task) error {
	if err := checkTask(t); err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	if err := checkText("task", "ID", t.ID, "Owner", t.Owner, "Server", t.Server, "Caller", t.Caller,
		"UpstreamID", t.UpstreamID, "Transport", t.Transport, "Tool", t.Tool, "StatusMessage", t.StatusMessage); err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	var ttl *int64
	if t.TTL != nil {
		ms := t.TTL.Milliseconds()
		ttl = &ms
		if t.ExpiresAt.IsZero() {
			t.ExpiresAt = t.CreatedAt.Add(time.Duration(ms) * time.Millisecond)
		}
	}
	var expires *string
	if !t.ExpiresAt.IsZero() {
		if err := checkTime("ExpiresAt", t.ExpiresAt); err != nil {
			return fmt.Errorf("putting a task: %w", err)
		}
		e := formatTime(t.ExpiresAt)
		expires = &e
	}
	_, err := p.pool.Exec(ctx, pgPutTaskSQL,
		t.ID, t.Owner, t.Server, t.Caller, t.UpstreamID, t.Hosted, t.Transport, t.Tool, t.Status, t.StatusMessage,
		formatTime(t.CreatedAt), formatTime(t.UpdatedAt), ttl, t.PollInterval.Milliseconds(),
		jsonBytes(t.Result), jsonBytes(t.Error), expires)
	if err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	return nil
}

// GetTask returns the task with the given ID, or ErrNotFound if there is
// none or it has expired.
func (p *Postgres) GetTask(ctx context.Context, id string) (Task, error) {
	if !textOK(id) {
		// No task has that id; still honour ctx, as every call does.
		if err := ctx.Err(); err != nil {
			return Task{}, fmt.Errorf("getting a task: %w", err)
		}
		return Task{}, fmt.Errorf("getting a task: %w", ErrNotFound)
	}
	row := p.pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1 AND `+fmt.Sprintf(pgUnexpired, 2),
		id, formatTime(p.now()))
	t, err := pgScanTask(row)
	if isNoRows(err) {
		return Task{}, fmt.Errorf("getting a task: %w", ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("getting a task: %w", err)
	}
	return t, nil
}

// ListTasks returns owner's unexpired tasks whose IDs sort after after, in
// ID order, at most limit of them (all if limit <= 0).
func (p *Postgres) ListTasks(ctx context.Context, owner, after string, limit int) ([]Task, error) {
	if err := checkText("listing", "owner", owner, "cursor", after); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	ts, err := pgQueryAll(ctx, p, pgScanTask, `SELECT `+taskColumns+` FROM tasks
		WHERE owner = $1 AND id > $2 AND `+fmt.Sprintf(pgUnexpired, 3)+` ORDER BY id LIMIT $4`,
		owner, after, formatTime(p.now()), noLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return ts, nil
}

// UnfinishedTasks returns every unexpired task that is in no terminal
// status, in ID order.
func (p *Postgres) UnfinishedTasks(ctx context.Context) ([]Task, error) {
	ts, err := pgQueryAll(ctx, p, pgScanTask, `SELECT `+taskColumns+` FROM tasks
		WHERE `+unfinishedCondition+` AND `+fmt.Sprintf(pgUnexpired, 1)+` ORDER BY id`,
		formatTime(p.now()))
	if err != nil {
		return nil, fmt.Errorf("listing unfinished tasks: %w", err)
	}
	return ts, nil
}

// DeleteExpiredTasks deletes the tasks that expired at or before now, in
// batches, and returns how many it deleted.
func (p *Postgres) DeleteExpiredTasks(ctx context.Context, now time.Time) (int, error) {
	if err := checkTime("now", now); err != nil {
		return 0, fmt.Errorf("deleting expired tasks: %w", err)
	}
	return p.deleteInBatches(ctx, "deleting expired tasks", `DELETE FROM tasks WHERE id IN (
		SELECT id FROM tasks WHERE expires_at <= $1 LIMIT $2)`, formatTime(now))
}

// deleteInBatches is (*SQLite).deleteInBatches: each batch is its own
// statement, so its own transaction.
func (p *Postgres) deleteInBatches(ctx context.Context, what, query, bound string) (int, error) {
	total := 0
	for {
		tag, err := p.pool.Exec(ctx, query, bound, p.deleteBatch)
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		n := tag.RowsAffected()
		total += int(n)
		if n < int64(p.deleteBatch) {
			return total, nil
		}
	}
}

// pgQueryAll runs a read query and scans every row with scan.
func pgQueryAll[T any](ctx context.Context, p *Postgres, scan func(pgx.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := p.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// pgScanTask reads one row of taskColumns.
func pgScanTask(row pgx.Row) (Task, error) {
	var (
		t                Task
		created, updated string
		ttl              *int64
		poll             int64
		result, rpcErr   []byte
		expires          *string
	)
	err := row.Scan(&t.ID, &t.Owner, &t.Server, &t.Caller, &t.UpstreamID, &t.Hosted, &t.Transport, &t.Tool,
		&t.Status, &t.StatusMessage, &created, &updated, &ttl, &poll, &result, &rpcErr, &expires)
	if err != nil {
		return Task{}, err
	}
	if t.CreatedAt, err = parseTime(created); err != nil {
		return Task{}, fmt.Errorf("reading created_at: %w", err)
	}
	if t.UpdatedAt, err = parseTime(updated); err != nil {
		return Task{}, fmt.Errorf("reading updated_at: %w", err)
	}
	if expires != nil {
		if t.ExpiresAt, err = parseTime(*expires); err != nil {
			return Task{}, fmt.Errorf("reading expires_at: %w", err)
		}
	}
	if ttl != nil {
		d := time.Duration(*ttl) * time.Millisecond
		t.TTL = &d
	}
	t.PollInterval = time.Duration(poll) * time.Millisecond
	t.Result, t.Error = rawJSON(result), rawJSON(rpcErr)
	return t, nil
}

// PutServer stores srv, replacing the record with the same name if there is
// one, and reports whether it created a new record, as (*SQLite).PutServer.
func (p *Postgres) PutServer(ctx context.Context, srv Server) (created bool, err error) {
	if err := checkServer(srv); err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	if err := checkText("server", "Name", srv.Name); err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	now := p.now()
	if srv.CreatedAt.IsZero() {
		srv.CreatedAt = now
	}
	// One statement, so atomic against every other replica: the update
	// keeps created_at, and xmax is 0 only in a row this statement
	// inserted (an updated row carries the updating transaction's id).
	// Clocks are read before the statement, so a put that read its clock
	// first may land after another replica's insert: updated_at is never
	// set before created_at (the text sorts as the time does).
	err = p.pool.QueryRow(ctx, `INSERT INTO servers (`+serverColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (name) DO UPDATE SET source = excluded.source, entry = excluded.entry,
			enabled = excluded.enabled, updated_at = GREATEST(excluded.updated_at, servers.created_at)
		RETURNING xmax = 0`,
		srv.Name, srv.Source, jsonBytes(srv.Entry), srv.Enabled, formatTime(srv.CreatedAt), formatTime(now)).Scan(&created)
	if err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	p.notifyServers(ctx, srv.Name)
	return created, nil
}

// GetServer returns the server record with the given name, or ErrNotFound.
func (p *Postgres) GetServer(ctx context.Context, name string) (Server, error) {
	if !textOK(name) {
		if err := ctx.Err(); err != nil {
			return Server{}, fmt.Errorf("getting server %q: %w", name, err)
		}
		return Server{}, fmt.Errorf("getting server %q: %w", name, ErrNotFound)
	}
	srv, err := pgScanServer(p.pool.QueryRow(ctx, `SELECT `+serverColumns+` FROM servers WHERE name = $1`, name))
	if isNoRows(err) {
		return Server{}, fmt.Errorf("getting server %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Server{}, fmt.Errorf("getting server %q: %w", name, err)
	}
	return srv, nil
}

// ListServers returns every server record, in name order (byte order).
func (p *Postgres) ListServers(ctx context.Context) ([]Server, error) {
	srvs, err := pgQueryAll(ctx, p, pgScanServer, `SELECT `+serverColumns+` FROM servers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	return srvs, nil
}

// DeleteServer deletes the server record with the given name, or returns
// ErrNotFound if there is none.
func (p *Postgres) DeleteServer(ctx context.Context, name string) error {
	if !textOK(name) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("deleting server %q: %w", name, err)
		}
		return fmt.Errorf("deleting server %q: %w", name, ErrNotFound)
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM servers WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("deleting server %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("deleting server %q: %w", name, ErrNotFound)
	}
	p.notifyServers(ctx, name)
	return nil
}

// pgScanServer reads one row of serverColumns.
func pgScanServer(row pgx.Row) (Server, error) {
	var (
		srv              Server
		entry            []byte
		created, updated string
	)
	if err := row.Scan(&srv.Name, &srv.Source, &entry, &srv.Enabled, &created, &updated); err != nil {
		return Server{}, err
	}
	var err error
	if srv.CreatedAt, err = parseTime(created); err != nil {
		return Server{}, fmt.Errorf("reading created_at: %w", err)
	}
	if srv.UpdatedAt, err = parseTime(updated); err != nil {
		return Server{}, fmt.Errorf("reading updated_at: %w", err)
	}
	srv.Entry = rawJSON(entry)
	return srv, nil
}

// AddEvent stores ev as the newest event and returns the Seq it gave it,
// then deletes the events MaxEvents or more below it, as (*SQLite).AddEvent.
func (p *Postgres) AddEvent(ctx context.Context, ev Event) (seq uint64, err error) {
	if err := checkEvent(ev); err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	if err := checkText("event", "Server", ev.Server, "Method", ev.Method); err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	if ev.Time.IsZero() {
		ev.Time = p.now()
	}
	seq, err = p.addEvent(ctx, ev)
	if err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	return seq, nil
}

// addEvent inserts ev and deletes the first batch of the events it pushes
// out in one transaction, under eventsLock: without it two replicas' inserts
// could commit out of seq order, and a reader that paged past the later seq
// would never see the earlier one. Events are rare (notifications the
// gateway does not know), so the lock costs little. A backlog is deleted
// after the commit, a batch per statement.
func (p *Postgres) addEvent(ctx context.Context, ev Event) (seq uint64, err error) {
	var id, n int64
	var bound int64
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, eventsLock); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO events (server, method, params, time, repeats)
			VALUES ($1, $2, $3, $4, $5) RETURNING seq`,
			ev.Server, ev.Method, jsonBytes(ev.Params), formatTime(ev.Time), ev.Repeats).Scan(&id)
		if err != nil {
			return err
		}
		if uint64(id) <= maxEvents {
			return nil
		}
		bound = id - int64(maxEvents)
		n, err = p.trimEvents(ctx, tx, bound)
		return err
	})
	if err != nil {
		return 0, err
	}
	for n == int64(p.deleteBatch) {
		// The event is stored; a failure here leaves the rest to the next
		// AddEvent.
		if n, err = p.trimEvents(ctx, p.pool, bound); err != nil {
			break
		}
	}
	return uint64(id), nil
}

// trimEvents deletes up to a batch of the oldest events whose seq is at
// most bound, and returns how many it deleted.
func (p *Postgres) trimEvents(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, bound int64) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE seq <= $1 ORDER BY seq LIMIT $2)`, bound, p.deleteBatch)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// AddRepeat counts one more repeat of the event seq, or returns ErrNotFound
// if the store no longer has it.
func (p *Postgres) AddRepeat(ctx context.Context, seq uint64) error {
	if seq > math.MaxInt64 {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, ErrNotFound)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE events SET repeats = repeats + 1 WHERE seq = $1`, int64(seq))
	if err != nil {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, ErrNotFound)
	}
	return nil
}

// ListEvents returns the events whose Seq is above after, of server and of
// method when they are not "", in Seq order, at most limit of them (all if
// limit <= 0).
func (p *Postgres) ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error) {
	evs, err := p.listEvents(ctx, server, method, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	return evs, nil
}

func (p *Postgres) listEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error) {
	if after >= math.MaxInt64 || !textOK(server) || !textOK(method) {
		// No event has that seq, server or method.
		return nil, ctx.Err()
	}
	// Filters that are "" are left out, so that the planner can use the
	// (server, seq) and (method, seq) indexes.
	query := `SELECT ` + eventColumns + ` FROM events WHERE seq > $1`
	args := []any{int64(after)}
	if server != "" {
		args = append(args, server)
		query += fmt.Sprintf(` AND server = $%d`, len(args))
	}
	if method != "" {
		args = append(args, method)
		query += fmt.Sprintf(` AND method = $%d`, len(args))
	}
	args = append(args, noLimit(limit))
	query += fmt.Sprintf(` ORDER BY seq LIMIT $%d`, len(args))
	return pgQueryAll(ctx, p, pgScanEvent, query, args...)
}

// pgScanEvent reads one row of eventColumns.
func pgScanEvent(row pgx.Row) (Event, error) {
	var (
		ev      Event
		seq     int64
		params  []byte
		at      string
		repeats int64
	)
	if err := row.Scan(&seq, &ev.Server, &ev.Method, &params, &at, &repeats); err != nil {
		return Event{}, err
	}
	ev.Seq, ev.Repeats = uint64(seq), int(repeats)
	var err error
	if ev.Time, err = parseTime(at); err != nil {
		return Event{}, fmt.Errorf("reading time: %w", err)
	}
	ev.Params = rawJSON(params)
	return ev, nil
}

// PutSession stores sess, replacing the record with the same ID.
func (p *Postgres) PutSession(ctx context.Context, sess Session) error {
	if err := checkSession(sess); err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	if err := checkText("session", "ID", sess.ID, "Principal", sess.Principal, "Version", sess.Version); err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET principal = excluded.principal, version = excluded.version,
			capabilities = excluded.capabilities, client_info = excluded.client_info,
			created_at = excluded.created_at, last_active_at = excluded.last_active_at`,
		sess.ID, sess.Principal, sess.Version, jsonBytes(sess.Capabilities), jsonBytes(sess.ClientInfo),
		formatTime(sess.CreatedAt), formatTime(sess.LastActiveAt))
	if err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	return nil
}

// GetSession returns the session record with id, or ErrNotFound.
func (p *Postgres) GetSession(ctx context.Context, id string) (Session, error) {
	if !textOK(id) {
		if err := ctx.Err(); err != nil {
			return Session{}, fmt.Errorf("getting a session: %w", err)
		}
		return Session{}, fmt.Errorf("getting a session: %w", ErrNotFound)
	}
	sess, err := pgScanSession(p.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if isNoRows(err) {
		return Session{}, fmt.Errorf("getting a session: %w", ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("getting a session: %w", err)
	}
	return sess, nil
}

// ListSessions returns the records last active at or after since, the
// oldest created first (then by ID), at most limit of them, without their
// Capabilities.
func (p *Postgres) ListSessions(ctx context.Context, since time.Time, limit int) ([]Session, error) {
	if err := checkList(since, limit); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out, err := pgQueryAll(ctx, p, pgScanSession, `SELECT id, principal, version, NULL::bytea, client_info, created_at, last_active_at
		FROM sessions WHERE last_active_at >= $1 ORDER BY created_at, id LIMIT $2`, formatTime(since), limit)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// TouchSessions moves the LastActiveAt of each named session forward to
// the time given, in one statement (so one transaction); of two touches of
// one session the later counts.
func (p *Postgres) TouchSessions(ctx context.Context, touches []SessionTouch) error {
	if len(touches) == 0 {
		return nil
	}
	ids := make([]string, 0, len(touches))
	ats := make([]string, 0, len(touches))
	for _, tc := range touches {
		if err := checkTime("LastActiveAt", tc.LastActiveAt); err != nil {
			return fmt.Errorf("touching sessions: %w", err)
		}
		if !textOK(tc.ID) {
			continue // no session has that id
		}
		ids = append(ids, tc.ID)
		ats = append(ats, formatTime(tc.LastActiveAt))
	}
	_, err := p.pool.Exec(ctx, `UPDATE sessions AS s SET last_active_at = t.at
		FROM (SELECT id, max(at COLLATE "C") AS at FROM unnest($1::text[], $2::text[]) AS u(id, at) GROUP BY id) AS t
		WHERE s.id = t.id AND s.last_active_at < t.at`, ids, ats)
	if err != nil {
		return fmt.Errorf("touching sessions: %w", err)
	}
	return nil
}

// DeleteSessions deletes the records of the named sessions, in one
// statement. Names without a record are skipped.
func (p *Postgres) DeleteSessions(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	ok := make([]string, 0, len(ids))
	for _, id := range ids {
		if textOK(id) {
			ok = append(ok, id)
		}
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM sessions WHERE id = ANY($1)`, ok); err != nil {
		return fmt.Errorf("deleting sessions: %w", err)
	}
	return nil
}

// DeleteIdleSessions deletes the sessions last active before before, in
// batches, and returns how many it deleted.
func (p *Postgres) DeleteIdleSessions(ctx context.Context, before time.Time) (int, error) {
	if err := checkTime("before", before); err != nil {
		return 0, fmt.Errorf("deleting idle sessions: %w", err)
	}
	return p.deleteInBatches(ctx, "deleting idle sessions", `DELETE FROM sessions WHERE id IN (
		SELECT id FROM sessions WHERE last_active_at < $1 LIMIT $2)`, formatTime(before))
}

// pgScanSession reads one row of sessionColumns.
func pgScanSession(row pgx.Row) (Session, error) {
	var (
		sess             Session
		caps, info       []byte
		created, touched string
	)
	if err := row.Scan(&sess.ID, &sess.Principal, &sess.Version, &caps, &info, &created, &touched); err != nil {
		return Session{}, err
	}
	var err error
	if sess.CreatedAt, err = parseTime(created); err != nil {
		return Session{}, fmt.Errorf("reading created_at: %w", err)
	}
	if sess.LastActiveAt, err = parseTime(touched); err != nil {
		return Session{}, fmt.Errorf("reading last_active_at: %w", err)
	}
	sess.Capabilities, sess.ClientInfo = rawJSON(caps), rawJSON(info)
	return sess, nil
}

// GetOAuthToken returns principal's token for server, or ErrNotFound.
func (p *Postgres) GetOAuthToken(ctx context.Context, server, principal string) (OAuthToken, error) {
	op := oauthOp("getting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	t := OAuthToken{Server: server, Principal: principal}
	var updated string
	err := p.pool.QueryRow(ctx, `SELECT data, updated_at FROM oauth_tokens WHERE server = $1 AND principal = $2`,
		server, principal).Scan(&t.Data, &updated)
	if isNoRows(err) {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if err == nil {
		t.UpdatedAt, err = parseUpdatedAt(updated)
	}
	if err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	return t, nil
}

// PutOAuthToken stores t, replacing the token of the same server and
// principal, in one statement: of two replicas putting at once, one wins
// whole.
func (p *Postgres) PutOAuthToken(ctx context.Context, t OAuthToken) error {
	op := oauthOp("putting oauth token", t.Server)
	if err := checkOAuthToken(t); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO oauth_tokens (server, principal, data, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (server, principal) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		t.Server, t.Principal, t.Data, formatTime(p.now()))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// DeleteOAuthToken deletes principal's token for server, or returns
// ErrNotFound if there is none.
func (p *Postgres) DeleteOAuthToken(ctx context.Context, server, principal string) error {
	op := oauthOp("deleting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM oauth_tokens WHERE server = $1 AND principal = $2`, server, principal)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return nil
}

// DeleteOAuthTokens deletes all of server's tokens, the gateway's own
// among them, in one statement, and returns how many.
func (p *Postgres) DeleteOAuthTokens(ctx context.Context, server string) (int, error) {
	op := oauthOp("deleting oauth tokens", server)
	if err := checkOAuthServer(server); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM oauth_tokens WHERE server = $1`, server)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return int(tag.RowsAffected()), nil
}

// CountOAuthTokens returns how many principals hold a token for server;
// the gateway's own (principal "") is not counted.
func (p *Postgres) CountOAuthTokens(ctx context.Context, server string) (int, error) {
	op := oauthOp("counting oauth tokens", server)
	if err := checkOAuthServer(server); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM oauth_tokens WHERE server = $1 AND principal <> ''`,
		server).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// ListOAuthPrincipals returns the principals that hold a token for server,
// in byte order (the column is COLLATE "C"), without the gateway's own.
func (p *Postgres) ListOAuthPrincipals(ctx context.Context, server string) ([]string, error) {
	op := oauthOp("listing oauth principals", server)
	if err := checkOAuthServer(server); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := pgQueryAll(ctx, p, func(row pgx.Row) (string, error) { return scanString(row) },
		`SELECT principal FROM oauth_tokens WHERE server = $1 AND principal <> '' ORDER BY principal`, server)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// GetOAuthClient returns the gateway's registration at issuer for server,
// or ErrNotFound.
func (p *Postgres) GetOAuthClient(ctx context.Context, server, issuer string) (OAuthClient, error) {
	op := oauthOp("getting oauth client", server)
	if err := checkClientKey(server, issuer); err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	c := OAuthClient{Server: server, Issuer: issuer}
	var updated string
	err := p.pool.QueryRow(ctx, `SELECT data, updated_at FROM oauth_clients WHERE server = $1 AND issuer = $2`,
		server, issuer).Scan(&c.Data, &updated)
	if isNoRows(err) {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if err == nil {
		c.UpdatedAt, err = parseUpdatedAt(updated)
	}
	if err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	return c, nil
}

// PutOAuthClient stores c, replacing the registration of the same server
// and issuer, in one statement.
func (p *Postgres) PutOAuthClient(ctx context.Context, c OAuthClient) error {
	op := oauthOp("putting oauth client", c.Server)
	if err := checkOAuthClient(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO oauth_clients (server, issuer, data, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (server, issuer) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		c.Server, c.Issuer, c.Data, formatTime(p.now()))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// DeleteOAuthClients deletes all of server's registrations. A server with
// none is no error.
func (p *Postgres) DeleteOAuthClients(ctx context.Context, server string) error {
	op := oauthOp("deleting oauth clients", server)
	if err := checkOAuthServer(server); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM oauth_clients WHERE server = $1`, server); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// PutFinds stores f, replacing the principal's record, in one statement;
// if announce, it then tells the other processes (Watch) that the
// principal's finds changed.
func (p *Postgres) PutFinds(ctx context.Context, f Finds, announce bool) error {
	if err := checkFinds(f); err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	names, err := findNames(f.Names)
	if err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO search_finds (principal, names, expires) VALUES ($1, $2, $3)
		ON CONFLICT (principal) DO UPDATE SET names = excluded.names, expires = excluded.expires`,
		f.Principal, names, formatTime(f.Expires))
	if err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	if announce {
		p.notifyFinds(ctx, f.Principal)
	}
	return nil
}

// GetFinds returns principal's record, or ErrNotFound if there is none or
// it expired at or before the store's now.
func (p *Postgres) GetFinds(ctx context.Context, principal string) (Finds, error) {
	if err := checkFindsPrincipal(principal); err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	var (
		names   []byte
		expires string
	)
	err := p.pool.QueryRow(ctx, `SELECT names, expires FROM search_finds WHERE principal = $1 AND expires > $2`,
		principal, formatTime(p.now())).Scan(&names, &expires)
	if isNoRows(err) {
		return Finds{}, fmt.Errorf("getting search finds: %w", ErrNotFound)
	}
	if err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	f, err := readFinds(principal, names, expires)
	if err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	return f, nil
}

// DeleteExpiredFinds deletes the records that expired at or before now, in
// batches, and returns how many it deleted.
func (p *Postgres) DeleteExpiredFinds(ctx context.Context, now time.Time) (int, error) {
	if err := checkTime("now", now); err != nil {
		return 0, fmt.Errorf("deleting expired search finds: %w", err)
	}
	return p.deleteInBatches(ctx, "deleting expired search finds", `DELETE FROM search_finds WHERE principal IN (
		SELECT principal FROM search_finds WHERE expires <= $1 LIMIT $2)`, formatTime(now))
}
