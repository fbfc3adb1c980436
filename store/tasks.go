package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Task is one task record, in the one flat shape both protocol eras' edges
// map (DESIGN decision 11).
type Task struct {
	ID            string          // the gateway's task id (opaque to the store)
	Owner         string          // "principal:<name>" or "session:<id>": who may see it
	Server        string          // the upstream server's name
	Caller        string          // the upstream session the task lives on ("" shared; e.g. "p:alice" or "s:<id>"), opaque to the store
	UpstreamID    string          // the upstream's own task id; "" for a task the gateway hosts
	Hosted        bool            // the gateway runs the call itself
	Transport     string          // the server's transport when created (stdio, http, sse), for restart handling
	Tool          string          // the exposed tool name, for listing and logs
	Status        string          // working | input_required | completed | failed | cancelled
	StatusMessage string          // the status's human-readable note, if any
	CreatedAt     time.Time       // returned in UTC
	UpdatedAt     time.Time       // returned in UTC
	TTL           *time.Duration  // nil = unlimited; kept to the millisecond
	PollInterval  time.Duration   // 0 = none; kept to the millisecond
	Result        json.RawMessage // the final result of the underlying call (a result object), when known
	Error         json.RawMessage // or the final JSON-RPC error object {"code","message","data"}, when it failed with one
	ExpiresAt     time.Time       // zero = never; if zero and TTL is set, PutTask stores CreatedAt+TTL
}

// The task statuses (MCP 2025-11-25, tasks). The last three are terminal.
const (
	statusWorking       = "working"
	statusInputRequired = "input_required"
	statusCompleted     = "completed"
	statusFailed        = "failed"
	statusCancelled     = "cancelled"
)

// unfinishedCondition selects tasks in no terminal status. It is the
// condition of the tasks_unfinished index, word for word.
const unfinishedCondition = `status NOT IN ('completed', 'failed', 'cancelled')`

// taskColumns are the columns scanTask reads, in its order.
const taskColumns = `id, owner, server, caller, upstream_id, hosted, transport, tool, status, status_message,
	created_at, updated_at, ttl_ms, poll_interval_ms, result, error, expires_at`

// unexpired selects rows whose expiry is after the time bound to it.
const unexpired = `(expires_at IS NULL OR expires_at > ?)`

// putTaskSQL inserts a task or replaces the one with its ID. It is an
// upsert rather than INSERT OR REPLACE, which deletes the old row and so
// would fire ON DELETE actions of tables that later refer to tasks.
const putTaskSQL = `INSERT INTO tasks (` + taskColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	owner = excluded.owner, server = excluded.server, caller = excluded.caller,
	upstream_id = excluded.upstream_id, hosted = excluded.hosted, transport = excluded.transport,
	tool = excluded.tool, status = excluded.status, status_message = excluded.status_message,
	created_at = excluded.created_at, updated_at = excluded.updated_at, ttl_ms = excluded.ttl_ms,
	poll_interval_ms = excluded.poll_interval_ms, result = excluded.result, error = excluded.error,
	expires_at = excluded.expires_at`

// getTaskSQL reads one unexpired task by ID.
const getTaskSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ? AND ` + unexpired

// PutTask stores t, replacing the task with the same ID if there is one.
func (s *SQLite) PutTask(ctx context.Context, t Task) error {
	if err := checkTask(t); err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	var ttl sql.NullInt64
	if t.TTL != nil {
		ttl = sql.NullInt64{Int64: t.TTL.Milliseconds(), Valid: true}
		if t.ExpiresAt.IsZero() {
			t.ExpiresAt = t.CreatedAt.Add(time.Duration(ttl.Int64) * time.Millisecond)
		}
	}
	var expires sql.NullString
	if !t.ExpiresAt.IsZero() {
		if err := checkTime("ExpiresAt", t.ExpiresAt); err != nil {
			return fmt.Errorf("putting a task: %w", err)
		}
		expires = sql.NullString{String: formatTime(t.ExpiresAt), Valid: true}
	}
	_, err := s.putTask.ExecContext(ctx,
		t.ID, t.Owner, t.Server, t.Caller, t.UpstreamID, t.Hosted, t.Transport, t.Tool, t.Status, t.StatusMessage,
		formatTime(t.CreatedAt), formatTime(t.UpdatedAt), ttl, t.PollInterval.Milliseconds(),
		jsonText(t.Result), jsonText(t.Error), expires)
	if err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	return nil
}

// checkTask reports what is wrong with t, naming the field but never its
// value: the id may be a capability and the result the user's data.
func checkTask(t Task) error {
	switch {
	case t.ID == "":
		return errors.New("the task has no ID")
	case t.Owner == "":
		return errors.New("the task has no Owner")
	case t.TTL != nil && *t.TTL < 0:
		return errors.New("the task's TTL is negative")
	case t.PollInterval < 0:
		return errors.New("the task's PollInterval is negative")
	case len(t.Result) > 0 && !json.Valid(t.Result):
		return errors.New("the task's Result is not valid JSON")
	case len(t.Error) > 0 && !json.Valid(t.Error):
		return errors.New("the task's Error is not valid JSON")
	}
	switch t.Status {
	case statusWorking, statusInputRequired, statusCompleted, statusFailed, statusCancelled:
	default:
		return fmt.Errorf("the task's Status %q is not one of working, input_required, completed, failed, cancelled", t.Status)
	}
	if err := checkTime("CreatedAt", t.CreatedAt); err != nil {
		return err
	}
	return checkTime("UpdatedAt", t.UpdatedAt)
}

// GetTask returns the task with the given ID, or ErrNotFound if there is
// none or it has expired.
func (s *SQLite) GetTask(ctx context.Context, id string) (Task, error) {
	row := s.getTask.QueryRowContext(ctx, id, formatTime(s.now()))
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("getting a task: %w", ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("getting a task: %w", err)
	}
	return t, nil
}

// ListTasks returns owner's unexpired tasks whose IDs sort after after (all
// of them if after is ""), in ID order, at most limit of them (all if limit
// <= 0). A caller pages by passing the last ID it got as after.
func (s *SQLite) ListTasks(ctx context.Context, owner, after string, limit int) ([]Task, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	ts, err := s.queryTasks(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE owner = ? AND id > ? AND `+unexpired+` ORDER BY id LIMIT ?`,
		owner, after, formatTime(s.now()), limit)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return ts, nil
}

// UnfinishedTasks returns every unexpired task that is in no terminal
// status (working or input_required), in ID order, for the gateway to
// settle after a restart.
func (s *SQLite) UnfinishedTasks(ctx context.Context) ([]Task, error) {
	ts, err := s.queryTasks(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE `+unfinishedCondition+` AND `+unexpired+` ORDER BY id`,
		formatTime(s.now()))
	if err != nil {
		return nil, fmt.Errorf("listing unfinished tasks: %w", err)
	}
	return ts, nil
}

// DeleteExpiredTasks deletes the tasks that expired at or before now and
// returns how many it deleted. It deletes in batches, so it can be stopped
// through ctx, keeping what it deleted so far.
func (s *SQLite) DeleteExpiredTasks(ctx context.Context, now time.Time) (int, error) {
	if err := checkTime("now", now); err != nil {
		return 0, fmt.Errorf("deleting expired tasks: %w", err)
	}
	return s.deleteInBatches(ctx, "deleting expired tasks", `DELETE FROM tasks WHERE id IN (
		SELECT id FROM tasks WHERE expires_at <= ? LIMIT ?)`, formatTime(now))
}

// deleteInBatches runs query, a DELETE of at most a batch of the rows
// whose bound is bound (its first parameter; the batch size is its
// second), until a batch deletes fewer, and returns how many it deleted
// in all. Each batch is its own transaction, so a stop through ctx keeps
// what was deleted so far.
func (s *SQLite) deleteInBatches(ctx context.Context, what, query, bound string) (int, error) {
	total := 0
	for {
		res, err := s.w.ExecContext(ctx, query, bound, s.deleteBatch)
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		total += int(n)
		if n < int64(s.deleteBatch) {
			return total, nil
		}
	}
}

func (s *SQLite) queryTasks(ctx context.Context, query string, args ...any) ([]Task, error) {
	return queryAll(ctx, s.r, scanTask, query, args...)
}

// scanTask reads one row of taskColumns.
func scanTask(row interface{ Scan(...any) error }) (Task, error) {
	var (
		t                       Task
		created, updated        string
		ttl                     sql.NullInt64
		poll                    int64
		result, rpcErr, expires sql.NullString
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
	if expires.Valid {
		if t.ExpiresAt, err = parseTime(expires.String); err != nil {
			return Task{}, fmt.Errorf("reading expires_at: %w", err)
		}
	}
	if ttl.Valid {
		d := time.Duration(ttl.Int64) * time.Millisecond
		t.TTL = &d
	}
	t.PollInterval = time.Duration(poll) * time.Millisecond
	if result.Valid {
		t.Result = json.RawMessage(result.String)
	}
	if rpcErr.Valid {
		t.Error = json.RawMessage(rpcErr.String)
	}
	return t, nil
}

// timeLayout is RFC 3339 with all nine fraction digits. In UTC, between
// years 0 and 9999, its strings sort as their times do, so SQL can compare
// them.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }

// checkTime rejects a time that formatTime cannot write in sortable form.
func checkTime(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s is outside years 0 to 9999", field)
	}
	return nil
}

// jsonText is j for a TEXT column: NULL when empty.
func jsonText(j json.RawMessage) sql.NullString {
	if len(j) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: string(j), Valid: true}
}
