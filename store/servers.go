package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Server is a server record of the admin API: a server registered through
// it, or the state it recorded for a server of the config file.
type Server struct {
	Name      string          // the server's name (not secret: it appears in errors)
	Source    string          // ServerSourceAPI or ServerSourceConfig
	Entry     json.RawMessage // the definition, a JSON object kept byte for byte (api); nil for config
	Enabled   *bool           // nil: no override
	CreatedAt time.Time       // set by PutServer when zero on insert; kept on update; returned in UTC
	UpdatedAt time.Time       // set by PutServer to the time of the put; returned in UTC
}

// The sources of a Server.
const (
	// ServerSourceAPI is a server registered through the admin API; its
	// Entry holds its definition.
	ServerSourceAPI = "api"
	// ServerSourceConfig is a server of the config file for which the admin
	// API recorded state: only an Enabled override, and no Entry.
	ServerSourceConfig = "config"
)

// serverColumns are the columns scanServer reads, in its order.
const serverColumns = `name, source, entry, enabled, created_at, updated_at`

// PutServer stores srv, replacing the record with the same name if there is
// one, and reports whether it created a new record. It sets UpdatedAt to
// now; on insert it sets CreatedAt to now if it is zero, and on update it
// keeps the stored CreatedAt, whatever srv holds.
func (s *SQLite) PutServer(ctx context.Context, srv Server) (created bool, err error) {
	if err := checkServer(srv); err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	created, err = s.putServer(ctx, srv)
	if err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	return created, nil
}

// putServer runs PutServer's transaction. The writer's transactions are
// immediate, so no other write, of this process or another, comes between
// reading the old row and writing the new one.
func (s *SQLite) putServer(ctx context.Context, srv Server) (created bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var createdAt string
	err = tx.QueryRowContext(ctx, `SELECT created_at FROM servers WHERE name = ?`, srv.Name).Scan(&createdAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		created = true
	case err != nil:
		return false, err
	}
	now := s.now()
	if created {
		if srv.CreatedAt.IsZero() {
			srv.CreatedAt = now
		}
		createdAt = formatTime(srv.CreatedAt)
	}
	var enabled any // NULL
	if srv.Enabled != nil {
		enabled = *srv.Enabled
	}
	// An upsert rather than INSERT OR REPLACE, which deletes the old row
	// and so would fire ON DELETE actions of tables that later refer to
	// servers.
	_, err = tx.ExecContext(ctx, `INSERT INTO servers (`+serverColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET source = excluded.source, entry = excluded.entry,
			enabled = excluded.enabled, updated_at = excluded.updated_at`,
		srv.Name, srv.Source, jsonText(srv.Entry), enabled, createdAt, formatTime(now))
	if err != nil {
		return false, err
	}
	return created, tx.Commit()
}

// checkServer reports what is wrong with srv, naming the field but never
// the entry's content: a definition may hold credentials.
func checkServer(srv Server) error {
	if srv.Name == "" {
		return errors.New("the server has no Name")
	}
	switch srv.Source {
	case ServerSourceAPI:
		if len(srv.Entry) == 0 {
			return errors.New("the server's Entry is missing, and a server of source api needs one")
		}
		// RFC 8259 JSON is UTF-8; json.Valid does not check that.
		if !json.Valid(srv.Entry) || !utf8.Valid(srv.Entry) {
			return errors.New("the server's Entry is not valid JSON")
		}
		if !bytes.HasPrefix(bytes.TrimLeft(srv.Entry, " \t\r\n"), []byte("{")) {
			return errors.New("the server's Entry is not a JSON object")
		}
	case ServerSourceConfig:
		if len(srv.Entry) != 0 {
			return errors.New("the server has an Entry, and a server of source config must not")
		}
	default:
		return fmt.Errorf("the server's Source %q is not one of api, config", srv.Source)
	}
	return checkTime("CreatedAt", srv.CreatedAt)
}

// GetServer returns the server record with the given name, or ErrNotFound.
func (s *SQLite) GetServer(ctx context.Context, name string) (Server, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+serverColumns+` FROM servers WHERE name = ?`, name)
	srv, err := scanServer(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Server{}, fmt.Errorf("getting server %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Server{}, fmt.Errorf("getting server %q: %w", name, err)
	}
	return srv, nil
}

// ListServers returns every server record, in name order (byte order).
func (s *SQLite) ListServers(ctx context.Context) ([]Server, error) {
	srvs, err := s.listServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	return srvs, nil
}

func (s *SQLite) listServers(ctx context.Context) ([]Server, error) {
	return queryAll(ctx, s.r, scanServer, `SELECT `+serverColumns+` FROM servers ORDER BY name`)
}

// DeleteServer deletes the server record with the given name, or returns
// ErrNotFound if there is none.
func (s *SQLite) DeleteServer(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM servers WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("deleting server %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("deleting server %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("deleting server %q: %w", name, ErrNotFound)
	}
	return nil
}

// scanServer reads one row of serverColumns.
func scanServer(row interface{ Scan(...any) error }) (Server, error) {
	var (
		srv              Server
		entry            sql.NullString
		enabled          sql.NullBool
		created, updated string
	)
	if err := row.Scan(&srv.Name, &srv.Source, &entry, &enabled, &created, &updated); err != nil {
		return Server{}, err
	}
	var err error
	if srv.CreatedAt, err = parseTime(created); err != nil {
		return Server{}, fmt.Errorf("reading created_at: %w", err)
	}
	if srv.UpdatedAt, err = parseTime(updated); err != nil {
		return Server{}, fmt.Errorf("reading updated_at: %w", err)
	}
	if entry.Valid {
		srv.Entry = json.RawMessage(entry.String)
	}
	if enabled.Valid {
		srv.Enabled = &enabled.Bool
	}
	return srv, nil
}
