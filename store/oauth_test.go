package store

import (
	"strings"
	"testing"
)

// TestOAuth_SQLChecks inserts rows directly, past the puts' checks: the
// tables' own constraints refuse an empty key part, empty or oversized
// data, a missing column and a second row of one key, on both drivers.
func TestOAuth_SQLChecks(t *testing.T) {
	type refusal int
	const (
		ok refusal = iota
		check
		notNull
		unique
		notBlob // SQLite's STRICT: data must be a BLOB
	)
	// What each driver says, so that a row refused for another reason (a
	// typo in the test's SQL) fails the test.
	says := map[string]map[refusal]string{
		"sqlite":   {check: "CHECK constraint failed", notNull: "NOT NULL constraint failed", unique: "UNIQUE constraint failed", notBlob: "cannot store TEXT value in BLOB column"},
		"postgres": {check: "violates check constraint", notNull: "violates not-null constraint", unique: "duplicate key value violates unique constraint"},
	}
	type row struct {
		name  string
		table string
		cols  []any // server, principal or issuer, data, updated_at
		want  refusal
	}
	ts := formatTime(base)
	data := []byte{0, 1, 0xff}
	rows := []row{
		{"token", "oauth_tokens", []any{"a", "alice", data, ts}, ok},
		{"gateway's own token", "oauth_tokens", []any{"a", "", data, ts}, ok},
		{"token of data at the bound", "oauth_tokens", []any{"b", "alice", make([]byte, MaxOAuthData), ts}, ok},
		{"token without server", "oauth_tokens", []any{"", "bob", data, ts}, check},
		{"token of empty data", "oauth_tokens", []any{"a", "bob", []byte{}, ts}, check},
		{"token of data over the bound", "oauth_tokens", []any{"a", "bob", make([]byte, MaxOAuthData+1), ts}, check},
		{"token without data", "oauth_tokens", []any{"a", "bob", nil, ts}, notNull},
		{"token without principal", "oauth_tokens", []any{"a", nil, data, ts}, notNull},
		{"token without time", "oauth_tokens", []any{"a", "bob", data, nil}, notNull},
		{"token twice", "oauth_tokens", []any{"a", "alice", data, ts}, unique},
		{"client", "oauth_clients", []any{"a", "https://as.example.com", data, ts}, ok},
		{"client without server", "oauth_clients", []any{"", "https://as.example.com", data, ts}, check},
		{"client without issuer", "oauth_clients", []any{"a", "", data, ts}, check},
		{"client of empty data", "oauth_clients", []any{"a", "https://b.example.com", []byte{}, ts}, check},
		{"client of data over the bound", "oauth_clients", []any{"a", "https://b.example.com", make([]byte, MaxOAuthData+1), ts}, check},
		{"client without data", "oauth_clients", []any{"a", "https://b.example.com", nil, ts}, notNull},
		{"client twice", "oauth_clients", []any{"a", "https://as.example.com", data, ts}, unique},
	}
	sqliteOnly := []row{
		{"token of text data", "oauth_tokens", []any{"a", "carol", "text", ts}, notBlob},
	}
	for _, d := range []struct {
		name string
		rows []row
		// open opens a new store and returns what runs a statement on it.
		open func(t *testing.T) func(query string, args ...any) error
	}{
		{"sqlite", append(rows, sqliteOnly...), func(t *testing.T) func(string, ...any) error {
			s := openTest(t)
			return func(q string, args ...any) error {
				_, err := s.w.ExecContext(t.Context(), q, args...)
				return err
			}
		}},
		{"postgres", rows, func(t *testing.T) func(string, ...any) error {
			s := openPostgresTest(t)
			return func(q string, args ...any) error {
				q = strings.NewReplacer("?1", "$1", "?2", "$2", "?3", "$3", "?4", "$4").Replace(q)
				_, err := s.pool.Exec(t.Context(), q, args...)
				return err
			}
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			exec := d.open(t)
			for _, r := range d.rows {
				t.Run(r.name, func(t *testing.T) {
					key := "principal"
					if r.table == "oauth_clients" {
						key = "issuer"
					}
					err := exec(`INSERT INTO `+r.table+` (server, `+key+`, data, updated_at) VALUES (?1, ?2, ?3, ?4)`, r.cols...)
					want := says[d.name][r.want]
					switch {
					case r.want == ok && err != nil:
						t.Fatalf("insert failed: %v", err)
					case r.want != ok && err == nil:
						t.Fatal("insert succeeded")
					case r.want != ok && !strings.Contains(err.Error(), want):
						t.Errorf("error %q does not mention %q", err, want)
					}
				})
			}
		})
	}
}
