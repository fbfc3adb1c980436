package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// openTest opens a new store in a temporary folder and closes it at the end
// of the test.
func openTest(t testing.TB) *SQLite {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "mcpgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// shipped is what appliedVersions lists for a database this binary made.
var shipped = []string{"1 tasks", "2 servers", "3 events", "4 sessions", "5 replicas", "6 media", "7 oauth", "8 search_finds"}

// appliedVersions lists schema_migrations' versions and names.
func appliedVersions(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v, name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		got = append(got, v+" "+name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestOpen_CreatesPrivateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	path := filepath.Join(dir, "mcpgw.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutTask(t.Context(), task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		want os.FileMode
	}{
		{dir, 0o700},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
	} {
		fi, err := os.Stat(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tt.want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(tt.name), got, tt.want)
		}
	}
}

func TestOpen_Pragmas(t *testing.T) {
	s := openTest(t)
	tests := []struct {
		name   string
		db     *sql.DB
		pragma string
		want   string
	}{
		{"writer journal mode", s.w, "journal_mode", "wal"},
		{"writer busy timeout", s.w, "busy_timeout", "5000"},
		{"writer foreign keys", s.w, "foreign_keys", "1"},
		{"writer synchronous NORMAL", s.w, "synchronous", "1"},
		{"writer writable", s.w, "query_only", "0"},
		{"reader journal mode", s.r, "journal_mode", "wal"},
		{"reader busy timeout", s.r, "busy_timeout", "5000"},
		{"reader foreign keys", s.r, "foreign_keys", "1"},
		{"reader read-only", s.r, "query_only", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			if err := tt.db.QueryRowContext(t.Context(), "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
			}
		})
	}
	if _, err := s.r.ExecContext(t.Context(), `DELETE FROM tasks`); err == nil {
		t.Error("a write through the read pool succeeded")
	}
}

func TestOpen_PathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%20")
	path := filepath.Join(dir, "mcpgw.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTask(t.Context(), task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not where asked: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("the temporary folder holds %d entries, want only %q", len(entries), filepath.Base(dir))
	}
}

func TestOpen_Errors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"folder is a file", filepath.Join(file, "mcpgw.db")},
		{"path is a folder", t.TempDir()},
		{"not a database", notDB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if want := `opening the database "` + tt.path + `": `; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestClose_Twice(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "mcpgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping before Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.GetTask(t.Context(), "t1"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("GetTask after Close = %v, want a closed-database error", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close = nil, want a closed-database error")
	}
}

func TestMigrate(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")

	// A fresh database gets every migration.
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(shipped, appliedVersions(t, s.w)); diff != "" {
		t.Errorf("fresh database: versions (-want +got):\n%s", diff)
	}
	if err := s.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing and keeps the data.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	if diff := cmp.Diff(shipped, appliedVersions(t, s.w)); diff != "" {
		t.Errorf("reopened database: versions (-want +got):\n%s", diff)
	}
	if _, err := s.GetTask(ctx, "t1"); err != nil {
		t.Errorf("reopened database lost its task: %v", err)
	}
	s.Close()

	// A newer binary applies only its new migrations.
	next := append(migrations[:len(migrations):len(migrations)],
		migration{name: "widgets", sql: `CREATE TABLE widgets (id TEXT PRIMARY KEY) STRICT; CREATE INDEX widgets_id ON widgets (id);`},
		migration{name: "gadgets", sql: `CREATE TABLE gadgets (id TEXT PRIMARY KEY) STRICT`},
	)
	s, err = open(ctx, path, next)
	if err != nil {
		t.Fatalf("migrating to %d: %v", len(next), err)
	}
	if diff := cmp.Diff(append(slices.Clone(shipped), fmt.Sprint(len(shipped)+1, " widgets"), fmt.Sprint(len(next), " gadgets")), appliedVersions(t, s.w)); diff != "" {
		t.Errorf("after migrating to %d: versions (-want +got):\n%s", len(next), diff)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO widgets (id) VALUES ('w')`); err != nil {
		t.Errorf("migration %d's table: %v", len(shipped)+1, err)
	}
	s.Close()

	// This binary refuses the database from the future, naming both versions.
	_, err = Open(ctx, path)
	if err == nil {
		t.Fatalf("Open of a database at version %d succeeded", len(next))
	}
	for _, want := range []string{path, fmt.Sprint("schema version ", len(next)), fmt.Sprintf("(version %d)", len(shipped))} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestMigrate_FromVersion1 opens a database made by a binary that knew only
// migration 1 (tasks): this one adds the servers table once and keeps the
// tasks.
func TestMigrate_FromVersion1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	old, err := open(ctx, path, migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1 tasks"}, appliedVersions(t, old.w)); diff != "" {
		t.Errorf("old database: versions (-want +got):\n%s", diff)
	}
	if err := old.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ListServers(ctx); err == nil {
		t.Error("the old database has a servers table")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	for i := range 2 { // migrating, then reopening
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if diff := cmp.Diff(shipped, appliedVersions(t, s.w)); diff != "" {
			t.Errorf("open %d: versions (-want +got):\n%s", i, diff)
		}
		if got, err := s.GetTask(ctx, "t1"); err != nil || !cmp.Equal(task("t1", "principal:alice"), got) {
			t.Errorf("open %d: GetTask = %+v, %v; want the task put before migrating", i, got, err)
		}
		created, err := s.PutServer(ctx, configServer("files", true))
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if created != (i == 0) {
			t.Errorf("open %d: PutServer created = %v, want %v", i, created, i == 0)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrate_FailureRollsBack(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	bad := append(migrations[:len(migrations):len(migrations)],
		migration{name: "half", sql: `CREATE TABLE half (id TEXT) STRICT; CREATE TABLE half (id TEXT) STRICT`},
	)
	_, err := open(ctx, path, bad)
	if err == nil {
		t.Fatal("a failing migration succeeded")
	}
	if want := fmt.Sprintf("applying migration %d (half)", len(bad)); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}

	// The shipped versions stayed, and nothing of the failed one.
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if diff := cmp.Diff(shipped, appliedVersions(t, s.w)); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'half'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the failed migration's first table survived")
	}
}

// TestOpen_Concurrent opens one new file from several stores at once, as two
// processes starting together would: each migration is applied once.
func TestOpen_Concurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	const n = 4
	type opened struct {
		s   *SQLite
		err error
	}
	results := make(chan opened, n)
	for range n {
		go func() {
			s, err := Open(context.Background(), path)
			results <- opened{s, err}
		}()
	}
	for range n {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
			continue
		}
		defer r.s.Close()
	}
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if diff := cmp.Diff(shipped, appliedVersions(t, s.w)); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}
