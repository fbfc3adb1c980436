package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Event is one server notification the gateway keeps for the admin API
// (GET /admin/events): a notification it does not know, such as a custom
// event/* push.
type Event struct {
	// Seq numbers the events from 1. AddEvent sets it: it only grows and is
	// never reused, even after the oldest events are deleted or the
	// process restarts, so it serves as a paging cursor.
	Seq     uint64
	Server  string          // the upstream server's name
	Method  string          // the notification's method
	Params  json.RawMessage // the notification's params, kept byte for byte; nil if none
	Time    time.Time       // when it arrived; set by AddEvent when zero; returned in UTC
	Repeats int             // copies folded into it by the gateway's dedup window
}

// MaxEvents is how many events a store keeps: AddEvent deletes the oldest
// beyond it.
const MaxEvents = 10000

// maxEvents is MaxEvents, lowered by tests.
var maxEvents uint64 = MaxEvents

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `seq, server, method, params, time, repeats`

// AddEvent stores ev as the newest event and returns the Seq it gave it,
// ignoring ev.Seq. It then deletes the events whose Seq is MaxEvents or
// more below the new one, so the store keeps at most the newest MaxEvents.
func (s *SQLite) AddEvent(ctx context.Context, ev Event) (seq uint64, err error) {
	if err := checkEvent(ev); err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	seq, err = s.addEvent(ctx, ev)
	if err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	return seq, nil
}

// addEvent inserts ev and deletes the first batch of the events it pushes
// out in one transaction; in the steady state that is one row, and the
// store never holds more than MaxEvents. A backlog (MaxEvents was lowered)
// is deleted after the commit, a batch per statement, so the write lock is
// never held for long.
func (s *SQLite) addEvent(ctx context.Context, ev Event) (seq uint64, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO events (server, method, params, time, repeats)
		VALUES (?, ?, ?, ?, ?) RETURNING seq`,
		ev.Server, ev.Method, jsonText(ev.Params), formatTime(ev.Time), ev.Repeats).Scan(&id)
	if err != nil {
		return 0, err
	}
	seq = uint64(id)
	if seq <= maxEvents {
		return seq, tx.Commit()
	}
	bound := int64(seq - maxEvents)
	n, err := s.trimEvents(ctx, tx, bound)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	for n == int64(s.deleteBatch) {
		// The event is stored; a failure here leaves the rest to the next
		// AddEvent.
		if n, err = s.trimEvents(ctx, s.w, bound); err != nil {
			return seq, nil
		}
	}
	return seq, nil
}

// trimEvents deletes up to a batch of the oldest events whose seq is at
// most bound, and returns how many it deleted.
func (s *SQLite) trimEvents(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, bound int64) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE seq <= ? ORDER BY seq LIMIT ?)`, bound, s.deleteBatch)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// checkEvent reports what is wrong with ev, naming the field but never the
// params, which may hold user data.
func checkEvent(ev Event) error {
	switch {
	case ev.Server == "":
		return errors.New("the event has no Server")
	case ev.Method == "":
		return errors.New("the event has no Method")
	case ev.Repeats < 0:
		return errors.New("the event's Repeats is negative")
	case len(ev.Params) > 0 && !json.Valid(ev.Params):
		return errors.New("the event's Params is not valid JSON")
	}
	return checkTime("the event's Time", ev.Time)
}

// AddRepeat counts one more repeat of the event seq, or returns ErrNotFound
// if the store no longer has it.
func (s *SQLite) AddRepeat(ctx context.Context, seq uint64) error {
	if seq > math.MaxInt64 {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, ErrNotFound)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE events SET repeats = repeats + 1 WHERE seq = ?`, int64(seq))
	if err != nil {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, err)
	}
	if n == 0 {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, ErrNotFound)
	}
	return nil
}

// ListEvents returns the events whose Seq is above after, of server and of
// method when they are not "", in Seq order, at most limit of them (all if
// limit <= 0). A caller pages by passing the last Seq it got as after.
func (s *SQLite) ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error) {
	evs, err := s.listEvents(ctx, server, method, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	return evs, nil
}

func (s *SQLite) listEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error) {
	if after >= math.MaxInt64 {
		// No seq is that high; and database/sql does not bind larger
		// uint64s. Still honour ctx, as every other call does.
		return nil, ctx.Err()
	}
	query, args := listEventsQuery(server, method, after, limit)
	return queryAll(ctx, s.r, scanEvent, query, args...)
}

// listEventsQuery is ListEvents' query and its arguments; after must be at
// most math.MaxInt64. A filter that is "" is left out rather than bound as
// "? = ” OR ...", so that SQLite plans with the (server, seq) and
// (method, seq) indexes.
func listEventsQuery(server, method string, after uint64, limit int) (string, []any) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query := `SELECT ` + eventColumns + ` FROM events WHERE seq > ?`
	args := []any{int64(after)}
	if server != "" {
		query += ` AND server = ?`
		args = append(args, server)
	}
	if method != "" {
		query += ` AND method = ?`
		args = append(args, method)
	}
	return query + ` ORDER BY seq LIMIT ?`, append(args, limit)
}

// scanEvent reads one row of eventColumns.
func scanEvent(row interface{ Scan(...any) error }) (Event, error) {
	var (
		ev     Event
		seq    int64
		params sql.NullString
		at     string
	)
	if err := row.Scan(&seq, &ev.Server, &ev.Method, &params, &at, &ev.Repeats); err != nil {
		return Event{}, err
	}
	ev.Seq = uint64(seq)
	var err error
	if ev.Time, err = parseTime(at); err != nil {
		return Event{}, fmt.Errorf("reading time: %w", err)
	}
	if params.Valid {
		ev.Params = json.RawMessage(params.String)
	}
	return ev, nil
}
