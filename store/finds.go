package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Finds are the tools a principal's 2026-07-28 clients found with the
// gateway's search_tools: they join those clients' tools/list on every
// replica until Expires.
type Finds struct {
	Principal string
	Names     []string // exposed tool names, oldest first
	Expires   time.Time
}

// MaxFindNames bounds Names (the gateway keeps at most 200).
const MaxFindNames = 1000

// Bounds of a Finds record's strings. The principal is the payload of
// PostgreSQL's notice, which must stay under 8000 bytes. A name is an
// exposed tool name, at most 128 characters (the spec's limit), so at most
// 512 bytes: with MaxFindNames, a record stays under half a megabyte.
const (
	maxFindPrincipal = 1024
	maxFindName      = 512
)

// The checks below name the field but never show its value: a principal
// may be a user's e-mail address. All three drivers run them, so that what
// PostgreSQL's text cannot hold, and what encoding/json would not give
// back byte for byte (invalid UTF-8), is refused everywhere alike.

func checkFindsPrincipal(principal string) error {
	if principal == "" || len(principal) > maxFindPrincipal || !textOK(principal) {
		return fmt.Errorf("the Principal must be 1 to %d bytes of UTF-8 without NUL", maxFindPrincipal)
	}
	return nil
}

// checkFinds reports what is wrong with f, field by field.
func checkFinds(f Finds) error {
	if err := checkFindsPrincipal(f.Principal); err != nil {
		return err
	}
	if len(f.Names) > MaxFindNames {
		return fmt.Errorf("the Names must be at most %d, not %d", MaxFindNames, len(f.Names))
	}
	for i, name := range f.Names {
		if name == "" || len(name) > maxFindName || !textOK(name) {
			return fmt.Errorf("each of the Names must be 1 to %d bytes of UTF-8 without NUL, and Names[%d] is not", maxFindName, i)
		}
	}
	if f.Expires.IsZero() {
		return errors.New("the Expires must be set")
	}
	return checkTime("Expires", f.Expires)
}

// findNames is Names for the names column: a JSON array, [] when empty.
func findNames(names []string) ([]byte, error) {
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// readFinds is a row of search_finds read back: Names nil when empty,
// Expires in UTC.
func readFinds(principal string, names []byte, expires string) (Finds, error) {
	f := Finds{Principal: principal}
	if err := json.Unmarshal(names, &f.Names); err != nil {
		return Finds{}, fmt.Errorf("reading names: %w", err)
	}
	if len(f.Names) == 0 {
		f.Names = nil
	}
	var err error
	if f.Expires, err = parseTime(expires); err != nil {
		return Finds{}, fmt.Errorf("reading expires: %w", err)
	}
	return f, nil
}

// PutFinds stores f, replacing the principal's record. announce is for the
// other processes of a PostgreSQL database; SQLite has none.
func (s *SQLite) PutFinds(ctx context.Context, f Finds, announce bool) error {
	if err := checkFinds(f); err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	names, err := findNames(f.Names)
	if err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO search_finds (principal, names, expires) VALUES (?, ?, ?)
		ON CONFLICT (principal) DO UPDATE SET names = excluded.names, expires = excluded.expires`,
		f.Principal, string(names), formatTime(f.Expires))
	if err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	return nil
}

// GetFinds returns principal's record, or ErrNotFound if there is none or
// it expired at or before the store's now.
func (s *SQLite) GetFinds(ctx context.Context, principal string) (Finds, error) {
	if err := checkFindsPrincipal(principal); err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	var names, expires string
	err := s.r.QueryRowContext(ctx, `SELECT names, expires FROM search_finds WHERE principal = ? AND expires > ?`,
		principal, formatTime(s.now())).Scan(&names, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Finds{}, fmt.Errorf("getting search finds: %w", ErrNotFound)
	}
	if err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	f, err := readFinds(principal, []byte(names), expires)
	if err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	return f, nil
}

// DeleteExpiredFinds deletes the records that expired at or before now, in
// batches, and returns how many it deleted.
func (s *SQLite) DeleteExpiredFinds(ctx context.Context, now time.Time) (int, error) {
	if err := checkTime("now", now); err != nil {
		return 0, fmt.Errorf("deleting expired search finds: %w", err)
	}
	return s.deleteInBatches(ctx, "deleting expired search finds", `DELETE FROM search_finds WHERE principal IN (
		SELECT principal FROM search_finds WHERE expires <= ? LIMIT ?)`, formatTime(now))
}
