package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Session is a downstream session of the legacy /mcp edge, kept so that a
// gateway that restarts, or later another replica, can serve it: what its
// client negotiated at initialize, whose it is, and when it was last used.
// A session that ended (DELETE, idle, the admin API) has no record.
type Session struct {
	// ID is the session's short id: the random part of its Mcp-Session-Id
	// in hex. The Mcp-Session-Id itself is a credential and is never
	// stored.
	ID        string
	Principal string
	// Version is the protocol version negotiated at initialize.
	Version string
	// Capabilities and ClientInfo are the client's, from initialize: JSON
	// objects kept byte for byte, nil when it sent none. Each is at most
	// MaxSessionJSON bytes.
	Capabilities json.RawMessage
	ClientInfo   json.RawMessage
	CreatedAt    time.Time // returned in UTC
	LastActiveAt time.Time // returned in UTC
}

// MaxSessionJSON bounds a Session's Capabilities and its ClientInfo, each:
// what a client declares at initialize is small, and a record must not
// let one client fill the database.
const MaxSessionJSON = 64 << 10

// SessionTouch moves a session's LastActiveAt forward.
type SessionTouch struct {
	ID           string
	LastActiveAt time.Time
}

// sessionColumns are the columns scanSession reads, in its order.
const sessionColumns = `id, principal, version, capabilities, client_info, created_at, last_active_at`

// PutSession stores sess, replacing the record with the same ID.
func (s *SQLite) PutSession(ctx context.Context, sess Session) error {
	if err := checkSession(sess); err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET principal = excluded.principal, version = excluded.version,
			capabilities = excluded.capabilities, client_info = excluded.client_info,
			created_at = excluded.created_at, last_active_at = excluded.last_active_at`,
		sess.ID, sess.Principal, sess.Version, jsonText(sess.Capabilities), jsonText(sess.ClientInfo),
		formatTime(sess.CreatedAt), formatTime(sess.LastActiveAt))
	if err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	return nil
}

// GetSession returns the session record with id, or ErrNotFound.
func (s *SQLite) GetSession(ctx context.Context, id string) (Session, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	sess, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("getting a session: %w", ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("getting a session: %w", err)
	}
	return sess, nil
}

// ListSessions returns the records last active at or after since, the
// oldest created first (then by ID), at most limit of them. A listing
// leaves out their Capabilities (nil): it says whose each session is and
// which client, not what the client declared, and stays smaller.
func (s *SQLite) ListSessions(ctx context.Context, since time.Time, limit int) ([]Session, error) {
	if err := checkList(since, limit); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out, err := queryAll(ctx, s.r, scanSession, `SELECT id, principal, version, NULL, client_info, created_at, last_active_at
		FROM sessions WHERE last_active_at >= ? ORDER BY created_at, id LIMIT ?`, formatTime(since), limit)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// checkList reports what is wrong with ListSessions' arguments.
func checkList(since time.Time, limit int) error {
	if limit <= 0 {
		return errors.New("the limit must be positive")
	}
	return checkTime("since", since)
}

// TouchSessions moves the LastActiveAt of each named session forward to
// the time given, in one transaction; a time earlier than the stored one
// and a session without a record change nothing (a touch never brings an
// ended session back).
func (s *SQLite) TouchSessions(ctx context.Context, touches []SessionTouch) (err error) {
	if len(touches) == 0 {
		return nil
	}
	for _, tc := range touches {
		if err := checkTime("LastActiveAt", tc.LastActiveAt); err != nil {
			return fmt.Errorf("touching sessions: %w", err)
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("touching sessions: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = fmt.Errorf("touching sessions: %w", err)
		}
	}()
	st, err := tx.PrepareContext(ctx, `UPDATE sessions SET last_active_at = ?1 WHERE id = ?2 AND last_active_at < ?1`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, tc := range touches {
		if _, err := st.ExecContext(ctx, formatTime(tc.LastActiveAt), tc.ID); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// DeleteSessions deletes the records of the named sessions, in one
// transaction. Names without a record are skipped.
func (s *SQLite) DeleteSessions(ctx context.Context, ids ...string) (err error) {
	if len(ids) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("deleting sessions: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = fmt.Errorf("deleting sessions: %w", err)
		}
	}()
	st, err := tx.PrepareContext(ctx, `DELETE FROM sessions WHERE id = ?`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, id := range ids {
		if _, err := st.ExecContext(ctx, id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// DeleteIdleSessions deletes the sessions last active before before, and
// returns how many it deleted.
func (s *SQLite) DeleteIdleSessions(ctx context.Context, before time.Time) (int, error) {
	if err := checkTime("before", before); err != nil {
		return 0, fmt.Errorf("deleting idle sessions: %w", err)
	}
	return s.deleteInBatches(ctx, "deleting idle sessions", `DELETE FROM sessions WHERE id IN (
		SELECT id FROM sessions WHERE last_active_at < ? LIMIT ?)`, formatTime(before))
}

// checkSession reports what is wrong with sess, naming the field but never
// a value: the principal and what the client declared are its own.
func checkSession(sess Session) error {
	switch {
	case sess.ID == "":
		return errors.New("the session has no ID")
	case sess.Version == "":
		return errors.New("the session has no Version")
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"Capabilities", sess.Capabilities}, {"ClientInfo", sess.ClientInfo}} {
		if len(f.v) == 0 {
			continue
		}
		if len(f.v) > MaxSessionJSON {
			return fmt.Errorf("the session's %s are larger than %d bytes", f.name, MaxSessionJSON)
		}
		if !json.Valid(f.v) || !utf8.Valid(f.v) || !bytes.HasPrefix(bytes.TrimLeft(f.v, " \t\r\n"), []byte("{")) {
			return fmt.Errorf("the session's %s are not a JSON object", f.name)
		}
	}
	if err := checkTime("CreatedAt", sess.CreatedAt); err != nil {
		return err
	}
	return checkTime("LastActiveAt", sess.LastActiveAt)
}

// scanSession reads one row of sessionColumns.
func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var (
		sess             Session
		caps, info       sql.NullString
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
	if caps.Valid {
		sess.Capabilities = json.RawMessage(caps.String)
	}
	if info.Valid {
		sess.ClientInfo = json.RawMessage(info.String)
	}
	return sess, nil
}

// normalizeSession is what a round trip through SQLite does to a session
// record: times in UTC without a monotonic reading, empty JSON as nil. It
// also copies the JSON, so that neither side's later changes reach the
// other.
func normalizeSession(sess Session) Session {
	sess.CreatedAt, sess.LastActiveAt = sess.CreatedAt.UTC().Round(0), sess.LastActiveAt.UTC().Round(0)
	sess.Capabilities = copyJSON(sess.Capabilities)
	sess.ClientInfo = copyJSON(sess.ClientInfo)
	return sess
}

func copyJSON(j json.RawMessage) json.RawMessage {
	if len(j) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), j...)
}

// PutSession stores sess, replacing the record with the same ID.
func (m *Memory) PutSession(ctx context.Context, sess Session) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	if err := checkSession(sess); err != nil {
		return fmt.Errorf("putting a session: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[sess.ID] = normalizeSession(sess)
	return nil
}

// GetSession returns the session record with id, or ErrNotFound.
func (m *Memory) GetSession(ctx context.Context, id string) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, fmt.Errorf("getting a session: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sess, ok := m.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("getting a session: %w", ErrNotFound)
	}
	return normalizeSession(sess), nil
}

// ListSessions lists session records as (*SQLite).ListSessions does.
func (m *Memory) ListSessions(ctx context.Context, since time.Time, limit int) ([]Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	if err := checkList(since, limit); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	since = since.UTC().Round(0)
	m.mu.Lock()
	var out []Session
	for _, sess := range m.sessions {
		if !sess.LastActiveAt.Before(since) {
			sess = normalizeSession(sess)
			sess.Capabilities = nil
			out = append(out, sess)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(len(out), limit)], nil
}

// TouchSessions moves sessions' LastActiveAt forward, as
// (*SQLite).TouchSessions does.
func (m *Memory) TouchSessions(ctx context.Context, touches []SessionTouch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("touching sessions: %w", err)
	}
	for _, tc := range touches {
		if err := checkTime("LastActiveAt", tc.LastActiveAt); err != nil {
			return fmt.Errorf("touching sessions: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tc := range touches {
		sess, ok := m.sessions[tc.ID]
		if ok && sess.LastActiveAt.Before(tc.LastActiveAt.UTC().Round(0)) {
			sess.LastActiveAt = tc.LastActiveAt.UTC().Round(0)
			m.sessions[tc.ID] = sess
		}
	}
	return nil
}

// DeleteSessions deletes the records of the named sessions.
func (m *Memory) DeleteSessions(ctx context.Context, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting sessions: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.sessions, id)
	}
	return nil
}

// DeleteIdleSessions deletes the sessions last active before before.
func (m *Memory) DeleteIdleSessions(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("deleting idle sessions: %w", err)
	}
	if err := checkTime("before", before); err != nil {
		return 0, fmt.Errorf("deleting idle sessions: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, sess := range m.sessions {
		if sess.LastActiveAt.Before(before) {
			delete(m.sessions, id)
			n++
		}
	}
	return n, nil
}
