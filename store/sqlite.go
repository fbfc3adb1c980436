package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotFound is returned when a record does not exist, or has expired.
var ErrNotFound = errors.New("not found")

const (
	// busyTimeout is how long a statement waits for a lock held by another
	// connection (a checkpoint, another process) before SQLITE_BUSY.
	busyTimeout = 5 * time.Second

	// deleteBatch bounds how many rows one DELETE removes, so that a large
	// sweep never holds the write lock for long.
	deleteBatch = 500

	// maxReaders bounds the read pool. Each connection holds its own page
	// cache, so this is also a bound on memory.
	maxReaders = 4
)

// SQLite is the store on one SQLite file. It is safe for concurrent use by
// many goroutines. Only one process should open a file at a time; a second
// one works, slowed by lock waits, but is not what it is built for.
type SQLite struct {
	path string
	w    *sql.DB // one connection: every write
	r    *sql.DB // query_only connections: every read

	// The statements on the hot paths, prepared once: preparing is most
	// of the cost of a GetTask.
	putTask, getTask *sql.Stmt

	now         func() time.Time // the clock for expiry; time.Now outside tests
	deleteBatch int              // rows per DELETE in DeleteExpiredTasks

	closeOnce sync.Once
	closeErr  error
}

// Open opens the SQLite database at path, creating it and its folder if
// need be (the folder 0700, the file 0600: tasks hold users' results), and
// applies the migrations it lacks. It fails on a database written by a newer
// mcpgw. The caller must Close it.
func Open(ctx context.Context, path string) (*SQLite, error) {
	s, err := open(ctx, path, migrations)
	if err != nil {
		return nil, fmt.Errorf("opening the database %q: %w", path, err)
	}
	return s, nil
}

func open(ctx context.Context, path string, ms []migration) (_ *SQLite, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	// Create the file ourselves so that it gets our mode, not SQLite's
	// 0644; SQLite gives the -wal and -shm files the same mode as this one.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}

	s := &SQLite{path: abs, now: time.Now, deleteBatch: deleteBatch}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	s.w, err = sql.Open("sqlite", dsn(abs, url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeout.Milliseconds())},
		"_foreign_keys": {"1"},
		"_journal_mode": {"WAL"},
		// NORMAL is safe from corruption in WAL mode; a power cut may lose
		// the last transactions, which a restart handles like a crash.
		"_synchronous": {"NORMAL"},
		// Take the write lock at BEGIN, so that a transaction that reads
		// and then writes waits under the busy timeout instead of failing.
		"_txlock": {"immediate"},
	}))
	if err != nil {
		return nil, err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)

	mode, err := journalMode(ctx, s.w)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("journal mode is %q, not WAL (is the folder on a file system without shared memory, like NFS?)", mode)
	}
	if err := migrate(ctx, s.w, ms); err != nil {
		return nil, err
	}
	if s.putTask, err = s.w.PrepareContext(ctx, putTaskSQL); err != nil {
		return nil, fmt.Errorf("preparing statements: %w", err)
	}

	s.r, err = sql.Open("sqlite", dsn(abs, url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeout.Milliseconds())},
		"_foreign_keys": {"1"},
		"_query_only":   {"1"},
	}))
	if err != nil {
		return nil, err
	}
	s.r.SetMaxOpenConns(maxReaders)
	s.r.SetMaxIdleConns(maxReaders)
	if err := s.r.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connecting the readers: %w", err)
	}
	if s.getTask, err = s.r.PrepareContext(ctx, getTaskSQL); err != nil {
		return nil, fmt.Errorf("preparing statements: %w", err)
	}
	return s, nil
}

// dsn is the driver's name for the file at abs with the given parameters. It
// is a file: URI, so that a '?' or '#' in the path is escaped rather than
// taken for the start of the parameters. SQLite ignores the driver's
// parameters.
// journalMode connects and returns the database's journal mode. Connecting
// sets the DSN's pragmas; switching a new file to WAL takes an exclusive lock
// and SQLite answers a second process doing the same SQLITE_BUSY at once,
// without its busy handler, so it is retried here up to busyTimeout.
func journalMode(ctx context.Context, db *sql.DB) (string, error) {
	deadline := time.Now().Add(busyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		var serr *sqlite.Error
		if err == nil || !errors.As(err, &serr) || serr.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return mode, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

func dsn(abs string, params url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: params.Encode()}
	return u.String()
}

// Ping checks that the database answers a read, for the gateway's
// readiness (/readyz). It is cheap: one query on a pooled reader. It fails
// once the store is closed.
func (s *SQLite) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("reading the database: %w", err)
	}
	return nil
}

// Close closes the database. It may be called more than once; later calls
// return the first call's error.
func (s *SQLite) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, st := range []*sql.Stmt{s.putTask, s.getTask} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("closing the database %q: %w", s.path, err)
		}
	})
	return s.closeErr
}

// queryAll runs a read query and scans every row with scan.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
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
