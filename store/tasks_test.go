package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// base is a fixed instant with nanoseconds, well in the past.
var base = time.Date(2025, 11, 25, 10, 30, 15, 123456789, time.UTC)

func ptr[T any](v T) *T { return &v }

// task is a minimal valid working task that never expires.
func task(id, owner string) Task {
	return Task{
		ID:        id,
		Owner:     owner,
		Server:    "github",
		Status:    "working",
		CreatedAt: base,
		UpdatedAt: base,
	}
}

// idsOf lists the tasks' IDs.
func idsOf(ts []Task) []string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return ids
}

func TestPutTask_RoundTrip(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		put  Task
		want Task // if zero, put
	}{
		{name: "minimal", put: task("t-minimal", "principal:alice")},
		{
			name: "every field",
			put: Task{
				ID:            "t-every",
				Owner:         "session:5f2a",
				Server:        "github",
				Caller:        "p:alice",
				UpstreamID:    "upstream-77",
				Transport:     "http",
				Tool:          "mcp__github__search",
				Status:        "input_required",
				StatusMessage: "waiting for the user — ünïcode",
				CreatedAt:     base,
				UpdatedAt:     base.Add(90*time.Second + 1),
				TTL:           ptr(10 * time.Minute),
				PollInterval:  1500 * time.Millisecond,
				Result:        json.RawMessage(`{ "content": [ {"type":"text","text":"héllo \u00e9\n"} ], "isError" : false }`),
				ExpiresAt:     base.Add(time.Hour),
			},
		},
		{
			name: "hosted and failed with a JSON-RPC error",
			put: Task{
				ID:           "t-hosted",
				Owner:        "principal:bob",
				Server:       "files",
				Hosted:       true,
				Transport:    "stdio",
				Tool:         "read",
				Status:       "failed",
				CreatedAt:    base,
				UpdatedAt:    base,
				PollInterval: time.Second,
				Error:        json.RawMessage(`{"code":-31001,"message":"upstream unavailable","data":{"server":"files"}}`),
			},
		},
		{
			name: "times in another zone come back in UTC",
			put: func() Task {
				t := task("t-zone", "principal:alice")
				t.CreatedAt = base.In(berlin)
				t.UpdatedAt = base.In(berlin).Add(time.Nanosecond)
				return t
			}(),
			want: func() Task {
				t := task("t-zone", "principal:alice")
				t.UpdatedAt = base.Add(time.Nanosecond)
				return t
			}(),
		},
		{
			name: "zero TTL is not unlimited",
			put: func() Task {
				t := task("t-zero-ttl", "principal:alice")
				t.TTL = ptr(time.Duration(0))
				t.ExpiresAt = base.Add(100 * 365 * 24 * time.Hour) // read before it expires
				return t
			}(),
		},
		{
			name: "TTL without ExpiresAt sets it from CreatedAt",
			put: func() Task {
				t := task("t-ttl", "principal:alice")
				t.TTL = ptr(100 * 365 * 24 * time.Hour)
				return t
			}(),
			want: func() Task {
				t := task("t-ttl", "principal:alice")
				t.TTL = ptr(100 * 365 * 24 * time.Hour)
				t.ExpiresAt = base.Add(100 * 365 * 24 * time.Hour)
				return t
			}(),
		},
		{
			name: "durations are kept to the millisecond",
			put: func() Task {
				t := task("t-ms", "principal:alice")
				t.TTL = ptr(100*365*24*time.Hour + 999*time.Microsecond)
				t.PollInterval = 2*time.Millisecond + 999*time.Microsecond
				return t
			}(),
			want: func() Task {
				t := task("t-ms", "principal:alice")
				t.TTL = ptr(100 * 365 * 24 * time.Hour)
				t.PollInterval = 2 * time.Millisecond
				t.ExpiresAt = base.Add(100 * 365 * 24 * time.Hour)
				return t
			}(),
		},
		{
			name: "empty JSON is none",
			put: func() Task {
				t := task("t-empty-json", "principal:alice")
				t.Result = json.RawMessage{}
				t.Error = json.RawMessage{}
				return t
			}(),
			want: task("t-empty-json", "principal:alice"),
		},
		{
			name: "zero times and a far future",
			put: Task{
				ID:        "t-zero",
				Owner:     "principal:alice",
				Status:    "completed",
				ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
				Result:    json.RawMessage(`null`),
			},
		},
	}
	forEachStore(t, func() time.Time { return base }, func(t *testing.T, s contractStore) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.PutTask(t.Context(), tt.put); err != nil {
					t.Fatal(err)
				}
				got, err := s.GetTask(t.Context(), tt.put.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if want.ID == "" {
					want = tt.put
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("GetTask (-want +got):\n%s", diff)
				}
				// cmp compares times with Equal; the zone must be UTC too.
				for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt, got.ExpiresAt} {
					if tm.Location() != time.UTC {
						t.Errorf("time %v is in %v, want UTC", tm, tm.Location())
					}
				}
			})
		}
	})
}

func TestPutTask_Replaces(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		first := task("t1", "principal:alice")
		first.TTL = ptr(time.Hour * 24 * 365 * 100)
		first.Result = json.RawMessage(`{"partial":true}`)
		if err := s.PutTask(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := task("t1", "principal:alice")
		second.Status = "completed"
		second.StatusMessage = "done"
		second.UpdatedAt = base.Add(time.Minute)
		second.Error = json.RawMessage(`{"code":-32603,"message":"internal"}`)
		if err := s.PutTask(ctx, second); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetTask(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(second, got); diff != "" {
			t.Errorf("GetTask after replacing (-want +got):\n%s", diff)
		}
		all, err := s.ListTasks(ctx, "principal:alice", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 {
			t.Errorf("ListTasks = %d tasks, want 1", len(all))
		}
	})
}

func TestPutTask_Invalid(t *testing.T) {
	const secret = "hunter2-user-data"
	tests := []struct {
		name   string
		change func(*Task)
		want   string
	}{
		{"no ID", func(t *Task) { t.ID = "" }, "no ID"},
		{"no owner", func(t *Task) { t.Owner = "" }, "no Owner"},
		{"unknown status", func(t *Task) { t.Status = "done" }, `Status "done"`},
		{"no status", func(t *Task) { t.Status = "" }, `Status ""`},
		{"negative TTL", func(t *Task) { t.TTL = ptr(-time.Second) }, "TTL is negative"},
		{"negative poll interval", func(t *Task) { t.PollInterval = -1 }, "PollInterval is negative"},
		{"bad result", func(t *Task) { t.Result = json.RawMessage(`{"text":"` + secret) }, "Result is not valid JSON"},
		{"bad error", func(t *Task) { t.Error = json.RawMessage(secret) }, "Error is not valid JSON"},
		{"year 10000", func(t *Task) { t.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "UpdatedAt is outside"},
		{"negative year", func(t *Task) { t.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }, "CreatedAt is outside"},
		{"expiry past 9999", func(t *Task) {
			t.TTL = ptr(time.Duration(1<<63 - 1))
			t.CreatedAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}, "ExpiresAt is outside"},
	}
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tk := task(secret+"-id", "principal:alice")
				tt.change(&tk)
				err := s.PutTask(t.Context(), tk)
				if err == nil {
					t.Fatal("PutTask succeeded")
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "putting a task: ") {
					t.Errorf("error %q, want %q after %q", err, tt.want, "putting a task: ")
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the task's id or data", err)
				}
			})
		}
		if got, err := s.ListTasks(t.Context(), "principal:alice", "", 0); err != nil || len(got) != 0 {
			t.Errorf("after only invalid puts, ListTasks = %v, %v; want none", idsOf(got), err)
		}
	})
}

func TestGetTask_NotFound(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		setClock(s, func() time.Time { return base.Add(time.Hour) })

		expired := task("expired", "principal:alice")
		expired.ExpiresAt = base.Add(time.Hour - time.Nanosecond)
		atNow := task("at-now", "principal:alice")
		atNow.ExpiresAt = base.Add(time.Hour)
		byTTL := task("by-ttl", "principal:alice")
		byTTL.TTL = ptr(time.Minute)
		live := task("live", "principal:alice")
		live.ExpiresAt = base.Add(time.Hour + time.Nanosecond)
		for _, tk := range []Task{expired, atNow, byTTL, live} {
			if err := s.PutTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}

		tests := []struct {
			id      string
			wantErr error
		}{
			{"absent", ErrNotFound},
			{"expired", ErrNotFound},
			{"at-now", ErrNotFound},
			{"by-ttl", ErrNotFound},
			{"live", nil},
			{"", ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.id, func(t *testing.T) {
				got, err := s.GetTask(ctx, tt.id)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("GetTask(%q) error = %v, want %v", tt.id, err, tt.wantErr)
				}
				if err != nil && !cmp.Equal(Task{}, got) {
					t.Errorf("GetTask(%q) returned %+v with its error", tt.id, got)
				}
			})
		}
	})
}

func TestListTasks(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		setClock(s, func() time.Time { return base.Add(time.Hour) })
		for _, tk := range []Task{
			task("a3", "principal:alice"),
			task("a1", "principal:alice"),
			task("a5", "principal:alice"),
			task("a2", "principal:alice"),
			task("b1", "principal:bob"),
			task("a4", "session:a4"),
			func() Task {
				tk := task("a0-expired", "principal:alice")
				tk.ExpiresAt = base
				return tk
			}(),
		} {
			if err := s.PutTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name         string
			owner, after string
			limit        int
			want         []string
		}{
			{"all", "principal:alice", "", 0, []string{"a1", "a2", "a3", "a5"}},
			{"negative limit is all", "principal:alice", "", -1, []string{"a1", "a2", "a3", "a5"}},
			{"first page", "principal:alice", "", 2, []string{"a1", "a2"}},
			{"second page", "principal:alice", "a2", 2, []string{"a3", "a5"}},
			{"last page", "principal:alice", "a5", 2, nil},
			{"after an id that is gone", "principal:alice", "a4", 0, []string{"a5"}},
			{"limit above the count", "principal:alice", "", 100, []string{"a1", "a2", "a3", "a5"}},
			{"another owner", "principal:bob", "", 0, []string{"b1"}},
			{"a session owner", "session:a4", "", 0, []string{"a4"}},
			{"unknown owner", "principal:carol", "", 0, nil},
			{"empty owner", "", "", 0, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.ListTasks(ctx, tt.owner, tt.after, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, idsOf(got)); diff != "" {
					t.Errorf("ListTasks(%q, %q, %d) (-want +got):\n%s", tt.owner, tt.after, tt.limit, diff)
				}
			})
		}

		// Listed tasks are whole.
		got, err := s.ListTasks(ctx, "principal:bob", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Task{task("b1", "principal:bob")}, got); diff != "" {
			t.Errorf("ListTasks (-want +got):\n%s", diff)
		}
	})
}

func TestUnfinishedTasks(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		setClock(s, func() time.Time { return base.Add(time.Hour) })

		with := func(id, status string, expires time.Time) Task {
			tk := task(id, "principal:"+id)
			tk.Status = status
			tk.ExpiresAt = expires
			return tk
		}
		puts := []Task{
			with("working", "working", time.Time{}),
			with("input", "input_required", time.Time{}),
			with("completed", "completed", time.Time{}),
			with("failed", "failed", time.Time{}),
			with("cancelled", "cancelled", time.Time{}),
			with("working-expired", "working", base),
			with("working-later", "working", base.Add(2*time.Hour)),
		}
		for _, tk := range puts {
			if err := s.PutTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.UnfinishedTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []Task{puts[1], puts[0], puts[6]} // in ID order
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("UnfinishedTasks (-want +got):\n%s", diff)
		}
	})
}

func TestDeleteExpiredTasks(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		setDeleteBatch(s, 4)
		const expiredN = 4*2 + 3 // more than one batch
		for i := range expiredN {
			tk := task(fmt.Sprintf("old-%04d", i), "principal:alice")
			tk.ExpiresAt = base.Add(time.Duration(i) * time.Millisecond)
			if err := s.PutTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		keep := []Task{task("never", "principal:alice"), task("later", "principal:alice")}
		keep[1].ExpiresAt = base.Add(time.Hour)
		for _, tk := range keep {
			if err := s.PutTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}

		now := base.Add(time.Duration(expiredN-1) * time.Millisecond) // the last one expires exactly now
		n, err := s.DeleteExpiredTasks(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if n != expiredN {
			t.Errorf("DeleteExpiredTasks = %d, want %d", n, expiredN)
		}
		if n, err := s.DeleteExpiredTasks(ctx, now); err != nil || n != 0 {
			t.Errorf("DeleteExpiredTasks again = %d, %v; want 0, nil", n, err)
		}

		// Even what reads no longer show is gone from the table.
		setClock(s, func() time.Time { return base.Add(-time.Hour) })
		got, err := s.ListTasks(ctx, "principal:alice", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"later", "never"}, idsOf(got)); diff != "" {
			t.Errorf("tasks left (-want +got):\n%s", diff)
		}
	})
}

func TestTasks_ContextCancelled(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.PutTask(ctx, task("t1", "principal:alice")); !errors.Is(err, context.Canceled) {
			t.Errorf("PutTask = %v, want context.Canceled", err)
		}
		if _, err := s.GetTask(ctx, "t1"); !errors.Is(err, context.Canceled) {
			t.Errorf("GetTask = %v, want context.Canceled", err)
		}
		if _, err := s.ListTasks(ctx, "principal:alice", "", 0); !errors.Is(err, context.Canceled) {
			t.Errorf("ListTasks = %v, want context.Canceled", err)
		}
		if _, err := s.UnfinishedTasks(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("UnfinishedTasks = %v, want context.Canceled", err)
		}
		if _, err := s.DeleteExpiredTasks(ctx, base); !errors.Is(err, context.Canceled) {
			t.Errorf("DeleteExpiredTasks = %v, want context.Canceled", err)
		}
	})
}

// TestTasks_Concurrent runs 50 goroutines that write, read, list and sweep
// at once; run it with -race. None may see SQLITE_BUSY or a torn task.
func TestTasks_Concurrent(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		const goroutines, rounds = 50, 10
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				owner := fmt.Sprintf("principal:p%02d", g)
				for r := range rounds {
					tk := task(fmt.Sprintf("g%02d-r%02d", g, r), owner)
					tk.UpdatedAt = base.Add(time.Duration(r) * time.Second)
					tk.Result = json.RawMessage(fmt.Sprintf(`{"g":%d,"r":%d}`, g, r))
					if err := s.PutTask(ctx, tk); err != nil {
						errs <- err
						return
					}
					got, err := s.GetTask(ctx, tk.ID)
					if err != nil {
						errs <- err
						return
					}
					if diff := cmp.Diff(tk, got); diff != "" {
						errs <- fmt.Errorf("goroutine %d round %d: GetTask (-want +got):\n%s", g, r, diff)
						return
					}
					// Everyone writes the shared task too.
					shared := task("shared", "principal:all")
					shared.StatusMessage = tk.ID
					if err := s.PutTask(ctx, shared); err != nil {
						errs <- err
						return
					}
					if r%5 == 0 {
						if _, err := s.ListTasks(ctx, owner, "", 0); err != nil {
							errs <- err
							return
						}
						if _, err := s.DeleteExpiredTasks(ctx, base); err != nil {
							errs <- err
							return
						}
					}
				}
				list, err := s.ListTasks(ctx, owner, "", 0)
				if err != nil {
					errs <- err
					return
				}
				if len(list) != rounds {
					errs <- fmt.Errorf("goroutine %d: ListTasks = %d tasks, want %d", g, len(list), rounds)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// benchTask is a typical finished task: a small text result.
func benchTask(id string) Task {
	tk := task(id, "principal:alice")
	tk.Status = "completed"
	tk.Caller = "p:alice"
	tk.UpstreamID = "upstream-" + id
	tk.Transport = "http"
	tk.Tool = "mcp__github__search"
	tk.TTL = ptr(100 * 365 * 24 * time.Hour)
	tk.PollInterval = time.Second
	tk.Result = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 512) + `"}]}`)
	return tk
}

// benchDrivers runs f on a new store of each database driver (Memory has
// nothing to measure), for the ratio of PostgreSQL to SQLite.
func benchDrivers(b *testing.B, f func(b *testing.B, s contractStore)) {
	for _, d := range drivers {
		if d.name == "memory" {
			continue
		}
		b.Run(d.name, func(b *testing.B) { f(b, d.open(b)) })
	}
}

func BenchmarkPutTask(b *testing.B) {
	benchDrivers(b, func(b *testing.B, s contractStore) {
		ctx := b.Context()
		tasks := make([]Task, 1024)
		for i := range tasks {
			tasks[i] = benchTask(fmt.Sprintf("task-%04d", i))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := s.PutTask(ctx, tasks[i%len(tasks)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkGetTask(b *testing.B) {
	benchDrivers(b, func(b *testing.B, s contractStore) {
		ctx := b.Context()
		ids := make([]string, 1024)
		for i := range ids {
			ids[i] = fmt.Sprintf("task-%04d", i)
			if err := s.PutTask(ctx, benchTask(ids[i])); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.GetTask(ctx, ids[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := s.GetTask(ctx, ids[i%len(ids)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	})
}

// BenchmarkListTasks lists one owner's 100 tasks, a page of 20.
func BenchmarkListTasks(b *testing.B) {
	benchDrivers(b, func(b *testing.B, s contractStore) {
		ctx := b.Context()
		for i := range 100 {
			if err := s.PutTask(ctx, benchTask(fmt.Sprintf("task-%04d", i))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if ts, err := s.ListTasks(ctx, "principal:alice", "task-0040", 20); err != nil || len(ts) != 20 {
				b.Fatalf("ListTasks = %d tasks, %v", len(ts), err)
			}
		}
	})
}

// BenchmarkAddEvent adds events past MaxEvents' trimming point.
func BenchmarkAddEvent(b *testing.B) {
	benchDrivers(b, func(b *testing.B, s contractStore) {
		ctx := b.Context()
		e := ev(0, "github", "event/x", `{"k":"`+strings.Repeat("x", 256)+`"}`)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.AddEvent(ctx, e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestUnfinishedTasks_UsesIndex checks SQLite's plan: UnfinishedTasks must
// read the tasks_unfinished index, not the table.
func TestUnfinishedTasks_UsesIndex(t *testing.T) {
	s := openTest(t)
	var plan string
	if err := s.r.QueryRowContext(t.Context(), `EXPLAIN QUERY PLAN SELECT `+taskColumns+` FROM tasks
		WHERE `+unfinishedCondition+` AND `+unexpired+` ORDER BY id`, "x").Scan(new(int), new(int), new(int), &plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "tasks_unfinished") {
		t.Errorf("UnfinishedTasks does not use its index: %s", plan)
	}
}
