package store

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The store's contract: every test that is not about one driver runs on
// each of them through forEachStore, so that Memory, SQLite and Postgres
// behave alike case by case.
type (
	taskStore interface {
		PutTask(context.Context, Task) error
		GetTask(context.Context, string) (Task, error)
		ListTasks(ctx context.Context, owner, after string, limit int) ([]Task, error)
		UnfinishedTasks(context.Context) ([]Task, error)
		DeleteExpiredTasks(context.Context, time.Time) (int, error)
	}
	contractStore interface {
		taskStore
		serverStore
		eventStore
		sessionStore
		replicaStore
		oauthStore
		findsStore
	}
)

var (
	_ contractStore = (*Memory)(nil)
	_ contractStore = (*SQLite)(nil)
	_ contractStore = (*Postgres)(nil)
)

// drivers are the implementations the contract runs on, each opening a new,
// empty store that the test closes at its end.
var drivers = []struct {
	name string
	open func(t testing.TB) contractStore
}{
	{"memory", func(testing.TB) contractStore { return NewMemory() }},
	{"sqlite", func(t testing.TB) contractStore { return openTest(t) }},
	{"postgres", func(t testing.TB) contractStore { return openPostgresTest(t) }},
}

// forEachStore runs f in a subtest on a new store of each driver. If now is
// not nil, it is the store's clock.
func forEachStore(t *testing.T, now func() time.Time, f func(t *testing.T, s contractStore)) {
	t.Helper()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			s := d.open(t)
			if now != nil {
				setClock(s, now)
			}
			f(t, s)
		})
	}
}

// setClock sets the clock s reads for expiry and for the times it fills in.
func setClock(s contractStore, now func() time.Time) {
	switch s := s.(type) {
	case *Memory:
		s.now = now
	case *SQLite:
		s.now = now
	case *Postgres:
		s.now = now
	}
}

// setDeleteBatch sets how many rows one DELETE of s removes; Memory has no
// batches.
func setDeleteBatch(s contractStore, n int) {
	switch s := s.(type) {
	case *SQLite:
		s.deleteBatch = n
	case *Postgres:
		s.deleteBatch = n
	}
}

// openPostgresTest opens the store on a new database and closes it at the
// end of the test.
func openPostgresTest(t testing.TB) *Postgres {
	t.Helper()
	s, err := OpenPostgres(t.Context(), PostgresOptions{DSN: pgtest.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
