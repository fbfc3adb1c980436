package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Memory must behave as SQLite does: the same tasks put into both read
// back the same from every method.
func TestMemory_SameAsSQLite(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	tasks := []Task{
		task("a1", "principal:alice"),
		func() Task {
			x := task("a2", "principal:alice")
			x.Status, x.Result = "completed", json.RawMessage(`{"content":[{"type":"text","text":"é"}]}`)
			x.TTL, x.PollInterval = ptr(90*time.Second+123456), 1500*time.Millisecond+7
			x.CreatedAt = now.Add(-time.Minute).In(time.FixedZone("X", 3600))
			return x
		}(),
		func() Task {
			x := task("a3", "principal:alice")
			x.Status, x.Error = "failed", json.RawMessage(`{"code":-32602,"message":"no"}`)
			x.ExpiresAt = now.Add(-time.Second) // expired
			return x
		}(),
		func() Task { x := task("b1", "session:s1"); x.Status = "input_required"; x.Hosted = true; return x }(),
		func() Task { x := task("b2", "session:s1"); x.Result = json.RawMessage{}; return x }(),
	}
	sq, mem := openTest(t), NewMemory()
	for _, s := range []interface {
		PutTask(context.Context, Task) error
	}{sq, mem} {
		for _, x := range tasks {
			if err := s.PutTask(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, x := range tasks {
		a, errA := sq.GetTask(ctx, x.ID)
		b, errB := mem.GetTask(ctx, x.ID)
		if errors.Is(errA, ErrNotFound) != errors.Is(errB, ErrNotFound) {
			t.Errorf("GetTask(%s): sqlite %v, memory %v", x.ID, errA, errB)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("GetTask(%s) (-sqlite +memory):\n%s", x.ID, diff)
		}
	}
	for _, q := range []struct {
		owner, after string
		limit        int
	}{{"principal:alice", "", 0}, {"principal:alice", "a1", 1}, {"session:s1", "", 10}, {"nobody", "", 0}} {
		a, _ := sq.ListTasks(ctx, q.owner, q.after, q.limit)
		b, _ := mem.ListTasks(ctx, q.owner, q.after, q.limit)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("ListTasks(%+v) (-sqlite +memory):\n%s", q, diff)
		}
	}
	ua, _ := sq.UnfinishedTasks(ctx)
	ub, _ := mem.UnfinishedTasks(ctx)
	if diff := cmp.Diff(ua, ub); diff != "" {
		t.Errorf("UnfinishedTasks (-sqlite +memory):\n%s", diff)
	}
	na, _ := sq.DeleteExpiredTasks(ctx, now)
	nb, _ := mem.DeleteExpiredTasks(ctx, now)
	if na != nb || na != 1 {
		t.Errorf("DeleteExpiredTasks: sqlite %d, memory %d, want 1", na, nb)
	}
	if err := mem.PutTask(ctx, Task{ID: "x"}); err == nil {
		t.Error("Memory accepted an invalid task")
	}
}
