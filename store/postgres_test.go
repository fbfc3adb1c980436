package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// openPostgresAt opens the store on dsn with migrations ms and closes it at
// the end of the test.
func openPostgresAt(t *testing.T, dsn string, ms []migration) *Postgres {
	t.Helper()
	s, err := openPostgres(t.Context(), PostgresOptions{DSN: dsn}, ms)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pgApplied lists schema_migrations' versions and names.
func pgApplied(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(v, " ", name))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// The two drivers' lists must stay in step: the same versions, the same
// names.
func TestPgMigrations_SameAsSQLite(t *testing.T) {
	var a, b []string
	for _, m := range migrations {
		a = append(a, m.name)
	}
	for _, m := range pgMigrations {
		b = append(b, m.name)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("migration names (-sqlite +postgres):\n%s", diff)
	}
}

func TestMigratePostgres(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)

	s, err := OpenPostgres(ctx, PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(shipped, pgApplied(t, s.pool)); diff != "" {
		t.Errorf("fresh database: versions (-want +got):\n%s", diff)
	}
	if err := s.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing and keeps the data.
	s, err = OpenPostgres(ctx, PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	if diff := cmp.Diff(shipped, pgApplied(t, s.pool)); diff != "" {
		t.Errorf("reopened database: versions (-want +got):\n%s", diff)
	}
	if _, err := s.GetTask(ctx, "t1"); err != nil {
		t.Errorf("reopened database lost its task: %v", err)
	}
	s.Close()

	// A newer binary applies only its new migrations.
	next := append(pgMigrations[:len(pgMigrations):len(pgMigrations)],
		migration{name: "widgets", sql: `CREATE TABLE widgets (id text PRIMARY KEY); CREATE INDEX widgets_id ON widgets (id);`},
		migration{name: "gadgets", sql: `CREATE TABLE gadgets (id text PRIMARY KEY)`},
	)
	s, err = openPostgres(ctx, PostgresOptions{DSN: dsn}, next)
	if err != nil {
		t.Fatalf("migrating to %d: %v", len(next), err)
	}
	if diff := cmp.Diff(append(slices.Clone(shipped), fmt.Sprint(len(shipped)+1, " widgets"), fmt.Sprint(len(next), " gadgets")), pgApplied(t, s.pool)); diff != "" {
		t.Errorf("after migrating to %d: versions (-want +got):\n%s", len(next), diff)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO widgets (id) VALUES ('w')`); err != nil {
		t.Errorf("migration %d's table: %v", len(shipped)+1, err)
	}
	s.Close()

	// This binary refuses the database from the future, naming both
	// versions, the driver and the host, never the password.
	_, err = OpenPostgres(ctx, PostgresOptions{DSN: dsn})
	if err == nil {
		t.Fatalf("Open of a database at version %d succeeded", len(next))
	}
	u, _ := url.Parse(dsn)
	pw, _ := u.User.Password()
	for _, want := range []string{"postgres database", u.Host, fmt.Sprint("schema version ", len(next)), fmt.Sprintf("(version %d)", len(shipped))} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if pw != "" && strings.Contains(err.Error(), pw) {
		t.Errorf("error %q shows the password", err)
	}
}

// TestMigratePostgres_FromVersion1 opens a database made by a binary that
// knew only migration 1: this one adds the rest once and keeps the tasks.
func TestMigratePostgres_FromVersion1(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	old := openPostgresAt(t, dsn, pgMigrations[:1])
	if err := old.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ListServers(ctx); err == nil {
		t.Error("the old database has a servers table")
	}
	old.Close()
	for i := range 2 { // migrating, then reopening
		s := openPostgresAt(t, dsn, pgMigrations)
		if diff := cmp.Diff(shipped, pgApplied(t, s.pool)); diff != "" {
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
		s.Close()
	}
}

func TestMigratePostgres_FailureRollsBack(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	bad := append(pgMigrations[:len(pgMigrations):len(pgMigrations)],
		migration{name: "half", sql: `CREATE TABLE half (id text); CREATE TABLE half (id text)`},
	)
	_, err := openPostgres(ctx, PostgresOptions{DSN: dsn}, bad)
	if err == nil {
		t.Fatal("a failing migration succeeded")
	}
	if want := fmt.Sprintf("applying migration %d (half)", len(bad)); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
	s := openPostgresAt(t, dsn, pgMigrations)
	if diff := cmp.Diff(shipped, pgApplied(t, s.pool)); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'half'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the failed migration's first table survived")
	}
}

// TestOpenPostgres_Concurrent opens one new database from several stores
// at once, as replicas starting together do: each migration is applied
// once, and every store opens.
func TestOpenPostgres_Concurrent(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*Postgres, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = OpenPostgres(context.Background(), PostgresOptions{DSN: dsn, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("store %d: %v", i, errs[i])
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	// schema_migrations' key would refuse a second row of one version; a
	// migration run twice would have failed its CREATE TABLE.
	if diff := cmp.Diff(shipped, pgApplied(t, stores[0].pool)); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

// TestOpenPostgres_Errors: every failure names the driver and, past the
// DSN's syntax, the host, and never shows the password.
func TestOpenPostgres_Errors(t *testing.T) {
	const password = "hunter2-pg-password"
	closed := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	// A server that accepts and never answers: a slow database must not
	// hang the start.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(conns.Wait)
	t.Cleanup(func() { silent.Close() }) // runs first: ends the accept loop
	conns.Go(func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				// Read until the client gives up and closes.
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						c.Close()
						return
					}
				}
			})
		}
	})

	tests := []struct {
		name string
		opts PostgresOptions
		want []string
	}{
		{"not a DSN", PostgresOptions{DSN: "postgres://mcpgw:" + password + "@host:notaport/db"}, []string{"opening the postgres database", "not a PostgreSQL connection string"}},
		{"not a DSN, key=value", PostgresOptions{DSN: "host=x password=" + password + " port=notaport"}, []string{"not a PostgreSQL connection string"}},
		{"nobody listens", PostgresOptions{DSN: "postgres://mcpgw:" + password + "@" + closed + "/db?sslmode=disable"}, []string{`postgres database "db" on ` + closed, "connecting"}},
		{"key=value, nobody listens", PostgresOptions{DSN: "host=127.0.0.1 port=" + strings.Split(closed, ":")[1] + " user=mcpgw password=" + password + " dbname=db sslmode=disable"}, []string{`postgres database "db" on ` + closed}},
		{"silent server", PostgresOptions{DSN: "postgres://mcpgw:" + password + "@" + silent.Addr().String() + "/db?sslmode=disable", ConnectTimeout: 200 * time.Millisecond}, []string{"on " + silent.Addr().String(), "connecting"}},
		{"pool too large", PostgresOptions{DSN: "postgres://x@localhost/db", MaxConns: MaxMaxConns + 1}, []string{"pool size 1001 is not from 1 to 1000"}},
		{"negative pool", PostgresOptions{DSN: "postgres://x@localhost/db", MaxConns: -1}, []string{"pool size -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenPostgres(t.Context(), tt.opts)
			if err == nil {
				s.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestOpenPostgres_WrongPassword: the server's refusal is shown, the
// password is not.
func TestOpenPostgres_WrongPassword(t *testing.T) {
	const password = "hunter2-pg-password"
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	s, err := OpenPostgres(t.Context(), PostgresOptions{DSN: u.String()})
	if err == nil {
		s.Close()
		t.Fatal("OpenPostgres succeeded")
	}
	for _, want := range []string{"on " + u.Host, "password authentication failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error %q shows the password", err)
	}
}

// TestPostgres_Text: PostgreSQL's text holds no NUL byte and only valid
// UTF-8. A put of such a value is refused, naming the field and not showing
// it; a lookup of one finds nothing, as no record can have it.
func TestPostgres_Text(t *testing.T) {
	s := openPostgresTest(t)
	ctx := t.Context()
	for _, bad := range []string{"a\x00b", "caf\xe9"} {
		tk := task("t1", "principal:alice")
		tk.StatusMessage = bad
		if err := s.PutTask(ctx, tk); err == nil || !strings.Contains(err.Error(), "the task's StatusMessage holds a NUL byte or invalid UTF-8") {
			t.Errorf("PutTask with StatusMessage %q = %v, want a refusal naming the field", bad, err)
		}
		if _, err := s.AddEvent(ctx, Event{Server: "a", Method: bad}); err == nil || !strings.Contains(err.Error(), "the event's Method holds") {
			t.Errorf("AddEvent with Method %q = %v, want a refusal naming the field", bad, err)
		}
		sess := session("s1", base)
		sess.Principal = bad
		if err := s.PutSession(ctx, sess); err == nil || !strings.Contains(err.Error(), "the session's Principal holds") {
			t.Errorf("PutSession with Principal %q = %v, want a refusal naming the field", bad, err)
		}
		if _, err := s.GetTask(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetTask(%q) = %v, want ErrNotFound", bad, err)
		}
		if _, err := s.GetServer(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetServer(%q) = %v, want ErrNotFound", bad, err)
		}
		if err := s.DeleteServer(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteServer(%q) = %v, want ErrNotFound", bad, err)
		}
		if _, err := s.GetSession(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSession(%q) = %v, want ErrNotFound", bad, err)
		}
		if err := s.TouchSessions(ctx, []SessionTouch{{bad, base}}); err != nil {
			t.Errorf("TouchSessions(%q) = %v", bad, err)
		}
		if err := s.DeleteSessions(ctx, bad); err != nil {
			t.Errorf("DeleteSessions(%q) = %v", bad, err)
		}
		if evs, err := s.ListEvents(ctx, bad, "", 0, 0); err != nil || len(evs) != 0 {
			t.Errorf("ListEvents(%q) = %v, %v; want none", bad, evs, err)
		}
	}
	if ts, err := s.ListTasks(ctx, "principal:alice", "", 0); err != nil || len(ts) != 0 {
		t.Errorf("after only refused puts, ListTasks = %v, %v", idsOf(ts), err)
	}
}

// TestPostgres_SeqNeverReused deletes the newest events behind the store's
// back and reopens the database: the identity column still gives a new seq.
func TestPostgres_SeqNeverReused(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	s := openPostgresAt(t, dsn, pgMigrations)
	addEvents(t, s, 1, ev(0, "a", "event/x", ""), ev(1, "a", "event/x", ""), ev(2, "a", "event/x", ""))
	if _, err := s.pool.Exec(ctx, `DELETE FROM events WHERE seq >= 2`); err != nil {
		t.Fatal(err)
	}
	addEvents(t, s, 4, ev(3, "a", "event/x", ""))
	if _, err := s.pool.Exec(ctx, `DELETE FROM events`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openPostgresAt(t, dsn, pgMigrations)
	addEvents(t, s, 5, ev(4, "a", "event/x", ""))
	if diff := cmp.Diff([]uint64{5}, listSeqs(t, s)); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}

// TestPostgres_Persist: what one store wrote, another on the same
// database reads, as a replica does.
func TestPostgres_Persist(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	a, b := openPostgresAt(t, dsn, pgMigrations), openPostgresAt(t, dsn, pgMigrations)
	if err := a.PutSession(ctx, session("s1", base)); err != nil {
		t.Fatal(err)
	}
	addEvents(t, a, 1, ev(0, "a", "event/x", `{"k": 1}`))
	if err := a.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if got, ok := getSession(t, b, "s1"); !ok || got.Principal != "alice" {
		t.Errorf("the other store's GetSession = %+v, %v", got, ok)
	}
	if got, err := b.GetTask(ctx, "t1"); err != nil || got.ID != "t1" {
		t.Errorf("the other store's GetTask = %+v, %v", got, err)
	}
	addEvents(t, b, 2, ev(1, "b", "event/y", ""))
}

// TestPostgres_UsesIndexes checks the plans of the queries the indexes are
// for, with sequential scans made unattractive (the tables are tiny).
func TestPostgres_UsesIndexes(t *testing.T) {
	s := openPostgresTest(t)
	ctx := t.Context()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `RESET enable_seqscan`)
	tests := []struct {
		query string
		args  []any
		want  string
	}{
		{`SELECT id FROM tasks WHERE ` + unfinishedCondition + ` ORDER BY id`, nil, "tasks_unfinished"},
		{`SELECT id FROM tasks WHERE owner = $1 AND id > $2 ORDER BY id`, []any{"o", ""}, "tasks_owner_id"},
		{`SELECT seq FROM events WHERE seq > $1 AND server = $2 ORDER BY seq`, []any{0, "a"}, "events_server_seq"},
		{`SELECT seq FROM events WHERE seq > $1 AND method = $2 ORDER BY seq`, []any{0, "m"}, "events_method_seq"},
		// The primary keys lead with server: every OAuth lookup, count,
		// listing and delete of a server uses them.
		{`SELECT principal FROM oauth_tokens WHERE server = $1 AND principal <> '' ORDER BY principal`, []any{"a"}, "oauth_tokens_pkey"},
		{`DELETE FROM oauth_tokens WHERE server = $1`, []any{"a"}, "oauth_tokens_pkey"},
		{`DELETE FROM oauth_clients WHERE server = $1`, []any{"a"}, "oauth_clients_pkey"},
		// DeleteExpiredFinds' batches.
		{`SELECT principal FROM search_finds WHERE expires <= $1 LIMIT $2`, []any{formatTime(base), 10}, "search_finds_expires"},
	}
	for _, tt := range tests {
		rows, err := conn.Query(ctx, `EXPLAIN `+tt.query, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if joined := strings.Join(plan, "; "); !strings.Contains(joined, tt.want) {
			t.Errorf("%s: plan %q does not use %s", tt.query, joined, tt.want)
		}
	}
}

func TestPostgres_CloseTwice(t *testing.T) {
	s, err := OpenPostgres(t.Context(), PostgresOptions{DSN: pgtest.DSN(t)})
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
		t.Errorf("GetTask after Close = %v, want a closed-pool error", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close = nil, want a closed-pool error")
	}
}
