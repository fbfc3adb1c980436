package store

import (
	"context"
	"testing"
	"time"
)

// The store's contract: every test that is not about one driver runs on
// each of them through forEachStore, so that Memory and SQLite
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
	}
)

var (
	_ contractStore = (*Memory)(nil)
	_ contractStore = (*SQLite)(nil)
)

// drivers are the implementations the contract runs on, each opening a new,
// empty store that the test closes at its end.
var drivers = []struct {
	name string
	open func(t testing.TB) contractStore
}{
	{"memory", func(testing.TB) contractStore { return NewMemory() }},
	{"sqlite", func(t testing.TB) contractStore { return openTest(t) }},
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
	}
}

// setDeleteBatch sets how many rows one DELETE of s removes; Memory has no
// batches.
func setDeleteBatch(s contractStore, n int) {
	switch s := s.(type) {
	case *SQLite:
		s.deleteBatch = n
	}
}
