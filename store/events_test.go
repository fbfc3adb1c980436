package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// eventStore is the event half of the contract (contract_test.go).
type eventStore interface {
	AddEvent(context.Context, Event) (uint64, error)
	AddRepeat(context.Context, uint64) error
	ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error)
}

// forEachEventStore is forEachStore for the events tests.
func forEachEventStore(t *testing.T, now func() time.Time, f func(t *testing.T, s eventStore)) {
	t.Helper()
	forEachStore(t, now, func(t *testing.T, s contractStore) { f(t, s) })
}

// setMaxEvents lowers MaxEvents for one test.
func setMaxEvents(t *testing.T, n uint64) {
	old := maxEvents
	maxEvents = n
	t.Cleanup(func() { maxEvents = old })
}

// ev is an event of server and method at time at(i), with params.
func ev(i int, server, method, params string) Event {
	e := Event{Server: server, Method: method, Time: at(i)}
	if params != "" {
		e.Params = json.RawMessage(params)
	}
	return e
}

// withSeq is e as ListEvents returns it once stored as seq.
func withSeq(e Event, seq uint64) Event {
	e.Seq = seq
	return e
}

// addEvents adds evs in order and checks that they get seqs from first on.
func addEvents(t *testing.T, s eventStore, first uint64, evs ...Event) {
	t.Helper()
	for i, e := range evs {
		seq, err := s.AddEvent(t.Context(), e)
		if err != nil {
			t.Fatalf("AddEvent %d: %v", i, err)
		}
		if want := first + uint64(i); seq != want {
			t.Fatalf("AddEvent %d = seq %d, want %d", i, seq, want)
		}
	}
}

// listSeqs lists every event's seq, in order.
func listSeqs(t *testing.T, s eventStore) []uint64 {
	t.Helper()
	evs, err := s.ListEvents(t.Context(), "", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

func TestListEvents(t *testing.T) {
	evs := []Event{
		ev(0, "a", "event/x", `{"n":0}`),
		ev(1, "b", "event/x", `{"n":1}`),
		ev(2, "a", "event/y", ``),
		ev(3, "a", "event/x", `{"n":3}`),
		ev(4, "b", "event/y", `[4]`),
		ev(5, "A", "event/x", `{"n":5}`),
	}
	stored := func(seqs ...uint64) []Event {
		var out []Event
		for _, seq := range seqs {
			out = append(out, withSeq(evs[seq-1], seq))
		}
		return out
	}
	tests := []struct {
		name           string
		server, method string
		after          uint64
		limit          int
		want           []Event
	}{
		{name: "all", want: stored(1, 2, 3, 4, 5, 6)},
		{name: "all, limit above the count", limit: 100, want: stored(1, 2, 3, 4, 5, 6)},
		{name: "negative limit is all", limit: -1, want: stored(1, 2, 3, 4, 5, 6)},
		{name: "first page", limit: 2, want: stored(1, 2)},
		{name: "second page", after: 2, limit: 2, want: stored(3, 4)},
		{name: "last page", after: 4, limit: 2, want: stored(5, 6)},
		{name: "past the end", after: 6, limit: 2},
		{name: "far past the end", after: math.MaxInt64},
		{name: "past int64", after: math.MaxUint64},
		{name: "a server", server: "a", want: stored(1, 3, 4)},
		{name: "servers are exact", server: "A", want: stored(6)},
		{name: "a method", method: "event/y", want: stored(3, 5)},
		{name: "both", server: "a", method: "event/x", want: stored(1, 4)},
		{name: "both, paged", server: "a", method: "event/x", after: 1, limit: 1, want: stored(4)},
		{name: "a server, after", server: "b", after: 2, want: stored(5)},
		{name: "an unknown server", server: "c"},
		{name: "an unknown method", method: "event/z"},
	}
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		addEvents(t, s, 1, evs...)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.ListEvents(t.Context(), tt.server, tt.method, tt.after, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ListEvents(%q, %q, %d, %d) (-want +got):\n%s", tt.server, tt.method, tt.after, tt.limit, diff)
				}
				for _, e := range got {
					if e.Time.Location() != time.UTC {
						t.Errorf("event %d: time %v is in %v, want UTC", e.Seq, e.Time, e.Time.Location())
					}
				}
			})
		}
	})
}

func TestAddEvent_Values(t *testing.T) {
	// Params whose bytes no re-encoding would keep: spacing, key order,
	// escapes, a number beyond float64, invalid UTF-8 in a string.
	const params = " { \"z\" : 1e400, \"a\": \"caf\\u00e9 — é\", \"raw\": \"\xff\", \"list\": [ ] } "
	now := base.Add(time.Hour)
	forEachEventStore(t, func() time.Time { return now }, func(t *testing.T, s eventStore) {
		in := []Event{
			ev(0, "a", "event/x", params),
			{Server: "a", Method: "event/x", Params: json.RawMessage(`null`), Time: at(1).In(time.FixedZone("CET", 3600))},
			{Server: "a", Method: "event/x", Params: json.RawMessage{}, Time: at(2)},
			{Seq: 99, Server: "a", Method: "event/x", Time: at(3), Repeats: 7}, // Seq is the store's
			{Server: "a", Method: "event/x"}, // Time from the store's clock
		}
		addEvents(t, s, 1, in...)
		want := []Event{
			withSeq(ev(0, "a", "event/x", params), 1),
			withSeq(ev(1, "a", "event/x", `null`), 2),
			withSeq(ev(2, "a", "event/x", ``), 3),
			{Seq: 4, Server: "a", Method: "event/x", Time: at(3), Repeats: 7},
			{Seq: 5, Server: "a", Method: "event/x", Time: now},
		}
		got, err := s.ListEvents(t.Context(), "", "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListEvents (-want +got):\n%s", diff)
		}
		if len(got) > 0 && string(got[0].Params) != params {
			t.Errorf("params came back as %q, want %q", got[0].Params, params)
		}
		// The store keeps its own copy.
		in[0].Params[3] = 'Z'
		got[0].Params[3] = 'Y'
		again, err := s.ListEvents(t.Context(), "", "", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if string(again[0].Params) != params {
			t.Errorf("after the caller's changes, params are %q, want %q", again[0].Params, params)
		}
	})
}

func TestAddEvent_Invalid(t *testing.T) {
	const secret = "hunter2-token"
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"no server", Event{Method: "event/x"}, "no Server"},
		{"no method", Event{Server: "a"}, "no Method"},
		{"negative repeats", Event{Server: "a", Method: "event/x", Repeats: -1}, "Repeats is negative"},
		{"invalid params", Event{Server: "a", Method: "event/x", Params: json.RawMessage(`{"token":"` + secret)}, "Params is not valid JSON"},
		{"two values", Event{Server: "a", Method: "event/x", Params: json.RawMessage(`{"token":"` + secret + `"} {}`)}, "Params is not valid JSON"},
		{"time after 9999", Event{Server: "a", Method: "event/x", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "Time is outside"},
	}
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				seq, err := s.AddEvent(t.Context(), tt.ev)
				if err == nil {
					t.Fatalf("AddEvent succeeded with seq %d", seq)
				}
				if !strings.HasPrefix(err.Error(), "adding an event: ") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q, want %q after %q", err, tt.want, "adding an event: ")
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the params", err)
				}
			})
		}
		// Refused events take no seq.
		addEvents(t, s, 1, ev(0, "a", "event/x", ""))
	})
}

func TestAddRepeat(t *testing.T) {
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		ctx := t.Context()
		addEvents(t, s, 1, ev(0, "a", "event/x", `{}`), ev(1, "b", "event/y", `{}`))
		for _, seq := range []uint64{1, 2, 1} {
			if err := s.AddRepeat(ctx, seq); err != nil {
				t.Fatalf("AddRepeat(%d): %v", seq, err)
			}
		}
		for _, seq := range []uint64{0, 3, math.MaxInt64, math.MaxUint64} {
			err := s.AddRepeat(ctx, seq)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("AddRepeat(%d) = %v, want ErrNotFound", seq, err)
			}
			if want := fmt.Sprintf("adding a repeat of event %d: ", seq); err != nil && !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		}
		got, err := s.ListEvents(ctx, "", "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []Event{withSeq(ev(0, "a", "event/x", `{}`), 1), withSeq(ev(1, "b", "event/y", `{}`), 2)}
		want[0].Repeats, want[1].Repeats = 2, 1
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListEvents (-want +got):\n%s", diff)
		}
	})
}

// TestAddEvent_Trim checks that the store keeps the newest maxEvents, that
// seqs keep growing past the deleted ones, and that a backlog (maxEvents
// lowered) is deleted in batches by the next AddEvent.
func TestAddEvent_Trim(t *testing.T) {
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		setMaxEvents(t, 5)
		setDeleteBatch(s.(contractStore), 2)
		ctx := t.Context()
		for i := range 12 {
			addEvents(t, s, uint64(i+1), ev(i, "a", "event/x", fmt.Sprintf(`{"i":%d}`, i)))
			want := []uint64{}
			for seq := max(1, i-3); seq <= i+1; seq++ {
				want = append(want, uint64(seq))
			}
			if diff := cmp.Diff(want, listSeqs(t, s), cmpEmpty); diff != "" {
				t.Fatalf("after %d events, seqs (-want +got):\n%s", i+1, diff)
			}
		}
		got, err := s.ListEvents(ctx, "", "", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Event{withSeq(ev(7, "a", "event/x", `{"i":7}`), 8)}, got); diff != "" {
			t.Errorf("the oldest kept (-want +got):\n%s", diff)
		}
		if err := s.AddRepeat(ctx, 7); !errors.Is(err, ErrNotFound) {
			t.Errorf("AddRepeat of a deleted event = %v, want ErrNotFound", err)
		}

		// Lowered to 1: the next add deletes the 5 older rows, over 3
		// batches of 2.
		maxEvents = 1
		addEvents(t, s, 13, ev(12, "a", "event/x", ""))
		if diff := cmp.Diff([]uint64{13}, listSeqs(t, s)); diff != "" {
			t.Errorf("after lowering the bound, seqs (-want +got):\n%s", diff)
		}
	})
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("empty", func(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
})

// TestAddEvent_SeqNeverReused deletes the newest events behind the store's
// back and reopens the file: AUTOINCREMENT still gives a new seq.
func TestAddEvent_SeqNeverReused(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	addEvents(t, s, 1, ev(0, "a", "event/x", ""), ev(1, "a", "event/x", ""), ev(2, "a", "event/x", ""))
	if _, err := s.w.ExecContext(ctx, `DELETE FROM events WHERE seq >= 2`); err != nil {
		t.Fatal(err)
	}
	addEvents(t, s, 4, ev(3, "a", "event/x", ""))
	if _, err := s.w.ExecContext(ctx, `DELETE FROM events`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addEvents(t, s, 5, ev(4, "a", "event/x", ""))
	if diff := cmp.Diff([]uint64{5}, listSeqs(t, s)); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}

// TestMemory_SeqNeverReused is TestAddEvent_SeqNeverReused for Memory,
// whose events can only go by trimming.
func TestMemory_SeqNeverReused(t *testing.T) {
	setMaxEvents(t, 1)
	m := NewMemory()
	addEvents(t, m, 1, ev(0, "a", "event/x", ""), ev(1, "a", "event/x", ""))
	m.events = nil
	addEvents(t, m, 3, ev(2, "a", "event/x", ""))
}

func TestEvents_Persist(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	addEvents(t, s, 1, ev(0, "a", "event/x", `{"k": 1}`))
	if err := s.AddRepeat(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addEvents(t, s, 2, ev(1, "b", "event/y", ""))
	got, err := s.ListEvents(ctx, "", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{withSeq(ev(0, "a", "event/x", `{"k": 1}`), 1), withSeq(ev(1, "b", "event/y", ""), 2)}
	want[0].Repeats = 1
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListEvents after reopening (-want +got):\n%s", diff)
	}
}

func TestEvents_ContextCancelled(t *testing.T) {
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		addEvents(t, s, 1, ev(0, "a", "event/x", ""))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.AddEvent(ctx, ev(1, "a", "event/x", "")); !errors.Is(err, context.Canceled) {
			t.Errorf("AddEvent = %v, want context.Canceled", err)
		}
		if err := s.AddRepeat(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("AddRepeat = %v, want context.Canceled", err)
		}
		for _, after := range []uint64{0, math.MaxUint64} {
			if _, err := s.ListEvents(ctx, "", "", after, 0); !errors.Is(err, context.Canceled) {
				t.Errorf("ListEvents after %d = %v, want context.Canceled", after, err)
			}
		}
		got, err := s.ListEvents(t.Context(), "", "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Event{withSeq(ev(0, "a", "event/x", ""), 1)}, got); diff != "" {
			t.Errorf("after cancelled calls (-want +got):\n%s", diff)
		}
	})
}

// TestAddEvent_Concurrent adds, repeats and lists from goroutines at once;
// run it with -race. Every event gets its own seq, and every repeat counts.
func TestAddEvent_Concurrent(t *testing.T) {
	forEachEventStore(t, nil, func(t *testing.T, s eventStore) {
		ctx := t.Context()
		const goroutines, rounds = 10, 10
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seqs = map[uint64]bool{}
		)
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					seq, err := s.AddEvent(ctx, ev(0, fmt.Sprint(g), "event/x", fmt.Sprintf(`{"r":%d}`, r)))
					if err == nil {
						err = s.AddRepeat(ctx, seq)
					}
					if err == nil {
						_, err = s.ListEvents(ctx, fmt.Sprint(g), "", 0, 5)
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seqs[seq] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got, err := s.ListEvents(ctx, "", "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) != goroutines*rounds || len(got) != goroutines*rounds {
			t.Errorf("%d distinct seqs and %d events, want %d", len(seqs), len(got), goroutines*rounds)
		}
		for i, e := range got {
			if e.Seq != uint64(i+1) || e.Repeats != 1 {
				t.Errorf("event %d: seq %d, repeats %d; want seq %d, repeats 1", i, e.Seq, e.Repeats, i+1)
			}
		}
	})
}

// TestMigrate_FromVersion2 opens a database made by a binary that knew
// migrations 1 and 2: this one adds the events table and keeps the tasks and
// servers.
func TestMigrate_FromVersion2(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	old, err := open(ctx, path, migrations[:2])
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.PutServer(ctx, apiServer("github", `{"url":"https://example.com"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ListEvents(ctx, "", "", 0, 0); err == nil {
		t.Error("the old database has an events table")
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
		if got, err := s.GetServer(ctx, "github"); err != nil || string(got.Entry) != `{"url":"https://example.com"}` {
			t.Errorf("open %d: GetServer = %+v, %v; want the server put before migrating", i, got, err)
		}
		addEvents(t, s, uint64(i+1), ev(i, "github", "event/x", ""))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvents_SQLChecks inserts rows directly, past AddEvent's checks: the
// table's own constraints refuse what AddEvent refuses.
func TestEvents_SQLChecks(t *testing.T) {
	s := openTest(t)
	ts := formatTime(base)
	tests := []struct {
		name    string
		row     []any // server, method, params, time, repeats
		wantErr string
	}{
		{"ok", []any{"a", "event/x", `{}`, ts, 0}, ""},
		{"no params", []any{"a", "event/x", nil, ts, 3}, ""},
		{"negative repeats", []any{"a", "event/x", nil, ts, -1}, "CHECK constraint failed"},
		{"repeats as text", []any{"a", "event/x", nil, ts, "many"}, "cannot store TEXT value in INTEGER column"},
		{"no server", []any{nil, "event/x", nil, ts, 0}, "NOT NULL constraint failed"},
		{"no method", []any{"a", nil, nil, ts, 0}, "NOT NULL constraint failed"},
		{"no time", []any{"a", "event/x", nil, nil, 0}, "NOT NULL constraint failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.w.ExecContext(t.Context(), `INSERT INTO events (server, method, params, time, repeats) VALUES (?, ?, ?, ?, ?)`, tt.row...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("insert failed: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatal("insert succeeded")
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
	if diff := cmp.Diff([]uint64{1, 2}, listSeqs(t, s)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestListEvents_UsesIndexes checks the plans of the filtered queries: a
// filter must seek its index rather than scan the table.
func TestListEvents_UsesIndexes(t *testing.T) {
	s := openTest(t)
	tests := []struct {
		server, method string
		want           string
	}{
		{"a", "", "events_server_seq"},
		{"", "event/x", "events_method_seq"},
		{"a", "event/x", "events_"},
		{"", "", "INTEGER PRIMARY KEY"},
	}
	for _, tt := range tests {
		query, args := listEventsQuery(tt.server, tt.method, 0, 10)
		rows, err := s.r.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, tt.want) || strings.Contains(joined, "USE TEMP B-TREE") {
			t.Errorf("server %q, method %q: plan %q, want a search with %q and no sort", tt.server, tt.method, joined, tt.want)
		}
	}
}
