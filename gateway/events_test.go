package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func TestEventsPage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events EventStore
	}{
		{"in memory", nil},
		{"in a store", store.NewMemory()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCore(t, upstreamtest.NewManager(), Options{Events: tc.events})
			for i, ev := range []struct{ server, method string }{
				{"a", "event/x"}, {"b", "event/x"}, {"a", "event/y"}, {"a", "event/x"}, {"b", "event/y"},
			} {
				s.events.add(ev.server, ev.method, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
			}
			tests := []struct {
				name           string
				server, method string
				after          uint64
				limit          int
				want           []uint64
				next           uint64
			}{
				{"all", "", "", 0, 10, []uint64{1, 2, 3, 4, 5}, 0},
				{"no limit", "", "", 0, 0, []uint64{1, 2, 3, 4, 5}, 0},
				{"first page", "", "", 0, 2, []uint64{1, 2}, 2},
				{"second page", "", "", 2, 2, []uint64{3, 4}, 4},
				{"last page", "", "", 4, 2, []uint64{5}, 0},
				{"a full last page", "", "", 3, 2, []uint64{4, 5}, 0},
				{"a server", "a", "", 0, 10, []uint64{1, 3, 4}, 0},
				{"a method", "", "event/y", 0, 10, []uint64{3, 5}, 0},
				{"both, paged", "a", "event/x", 0, 1, []uint64{1}, 1},
				{"past the end", "", "", 9, 10, nil, 0},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, next := s.EventsPage(tt.server, tt.method, tt.after, tt.limit)
					if diff := cmp.Diff(tt.want, seqsOf(got)); diff != "" || next != tt.next {
						t.Errorf("EventsPage = %v next %d, want %v next %d", seqsOf(got), next, tt.want, tt.next)
					}
				})
			}
		})
	}
}

// seqsOf lists the events' seqs.
func seqsOf(evs []Event) (out []uint64) {
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// eventsAt is a fixed time for the events of a test.
var eventsAt = time.Date(2025, 11, 25, 10, 30, 15, 123456789, time.UTC)

// fixClock sets the event store's clock to *now.
func fixClock(s *Server, now *time.Time) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	s.events.now = func() time.Time { return *now }
}

// notify has server send the notification method with params.
func notify(m *upstreamtest.Manager, server, method, params string) {
	m.Notify(server, jsonrpc.NewNotification(method, json.RawMessage(params)))
}

// storedEvents lists every event st has.
func storedEvents(t *testing.T, st EventStore) []store.Event {
	t.Helper()
	evs, err := st.ListEvents(t.Context(), "", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestEvents_StoreRepeats checks that new events and their repeats within
// the dedup window reach the store, and that EventsPage reads them back.
func TestEvents_StoreRepeats(t *testing.T) {
	mem := store.NewMemory()
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "quiet"}, &upstreamtest.Server{Name: "loud"})
	s := newCore(t, m, Options{Events: mem})
	now := eventsAt
	fixClock(s, &now)
	for range 3 {
		notify(m, "quiet", "event/build", `{"status":"ok"}`)
	}
	notify(m, "quiet", "event/build", `{"status":"failed","_meta":{"dedup_key":"b1"}}`)
	notify(m, "quiet", "event/build", `{"status":"failed again","_meta":{"dedup_key":"b1"}}`)
	notify(m, "loud", "event/deploy", `{"v": 2}`)
	// Past the window, the same notification is a new event.
	now = now.Add(eventDedupWindow)
	notify(m, "quiet", "event/build", `{"status":"ok"}`)

	want := []store.Event{
		{Seq: 1, Server: "quiet", Method: "event/build", Params: json.RawMessage(`{"status":"ok"}`), Time: eventsAt, Repeats: 2},
		{Seq: 2, Server: "quiet", Method: "event/build", Params: json.RawMessage(`{"status":"failed","_meta":{"dedup_key":"b1"}}`), Time: eventsAt, Repeats: 1},
		{Seq: 3, Server: "loud", Method: "event/deploy", Params: json.RawMessage(`{"v": 2}`), Time: eventsAt},
		{Seq: 4, Server: "quiet", Method: "event/build", Params: json.RawMessage(`{"status":"ok"}`), Time: now},
	}
	if diff := cmp.Diff(want, storedEvents(t, mem)); diff != "" {
		t.Errorf("the store's events (-want +got):\n%s", diff)
	}
	got, next := s.EventsPage("", "", 0, 10)
	if diff := cmp.Diff(toEvents(want), got); diff != "" || next != 0 {
		t.Errorf("EventsPage (next %d) (-want +got):\n%s", next, diff)
	}
	if diff := cmp.Diff(toEvents(want), s.Events()); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// toEvents is evs as the core returns them.
func toEvents(evs []store.Event) []Event {
	out := []Event{}
	for _, ev := range evs {
		out = append(out, Event{Seq: ev.Seq, Server: ev.Server, Method: ev.Method, Params: ev.Params, Time: ev.Time, Repeats: ev.Repeats})
	}
	return out
}

// TestEvents_Restart runs a core on an SQLite store, closes both, and
// starts a new core on the same file: it serves the old events, and its
// seqs go on from theirs.
func TestEvents_Restart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a"})
	s, err := New(Options{Upstreams: m, Events: db})
	if err != nil {
		t.Fatal(err)
	}
	notify(m, "a", "event/x", `{"n":1}`)
	notify(m, "a", "event/x", `{"n":1}`)
	notify(m, "a", "event/y", `{"n":2}`)
	before, _ := s.EventsPage("", "", 0, 0)
	s.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s = newCore(t, m, Options{Events: db})
	got, next := s.EventsPage("", "", 0, 0)
	if diff := cmp.Diff(before, got); diff != "" || next != 0 {
		t.Errorf("after the restart, EventsPage (next %d) (-before +after):\n%s", next, diff)
	}
	if diff := cmp.Diff([]uint64{1, 2}, seqsOf(got)); diff != "" || got[0].Repeats != 1 {
		t.Errorf("the old events: seqs (-want +got):\n%s\nfirst %+v", diff, got[0])
	}
	if len(s.Events()) != 0 {
		t.Errorf("the new core holds %d events in memory, want none", len(s.Events()))
	}
	// The dedup window does not outlive the process: the same
	// notification is a new event, numbered after the old ones.
	notify(m, "a", "event/x", `{"n":1}`)
	got, next = s.EventsPage("", "", 2, 10)
	if diff := cmp.Diff([]uint64{3}, seqsOf(got)); diff != "" || next != 0 {
		t.Errorf("EventsPage after 2 = %v next %d, want [3] next 0", seqsOf(got), next)
	}
}

// flakyEvents is a store.Memory whose calls fail on demand.
type flakyEvents struct {
	*store.Memory
	failWrites, failReads atomic.Bool
	writes                atomic.Int32 // AddEvent and AddRepeat calls
}

var errDisk = errors.New("disk I/O error")

func (f *flakyEvents) AddEvent(ctx context.Context, ev store.Event) (uint64, error) {
	f.writes.Add(1)
	if f.failWrites.Load() {
		return 0, fmt.Errorf("adding an event: %w", errDisk)
	}
	return f.Memory.AddEvent(ctx, ev)
}

func (f *flakyEvents) AddRepeat(ctx context.Context, seq uint64) error {
	f.writes.Add(1)
	if f.failWrites.Load() {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, errDisk)
	}
	return f.Memory.AddRepeat(ctx, seq)
}

func (f *flakyEvents) ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]store.Event, error) {
	if f.failReads.Load() {
		return nil, fmt.Errorf("listing events: %w", errDisk)
	}
	return f.Memory.ListEvents(ctx, server, method, after, limit)
}

// logBuffer collects a logger's output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(msg string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), msg)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEvents_FailingStore has the store fail writes, then reads too, then
// recover: no event is lost for EventsPage on the way, and the store gets
// the backlog, in order, once writes resume.
func TestEvents_FailingStore(t *testing.T) {
	f := &flakyEvents{Memory: store.NewMemory()}
	var logs logBuffer
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a"}, &upstreamtest.Server{Name: "b"})
	s := newCore(t, m, Options{Events: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := eventsAt
	fixClock(s, &now)
	page := func(server string, after uint64, limit int) string {
		evs, next := s.EventsPage(server, "", after, limit)
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%d %s %s x%d", ev.Seq, ev.Server, ev.Params, ev.Repeats))
		}
		return fmt.Sprintf("%s; next %d", strings.Join(out, ", "), next)
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}

	notify(m, "a", "event/x", `{"n":1}`) // stored as 1
	f.failWrites.Store(true)
	notify(m, "a", "event/x", `{"n":2}`) // fails: kept, as 2
	writes := f.writes.Load()
	notify(m, "b", "event/y", `{"n":3}`) // writes pause: kept, as 3
	notify(m, "a", "event/x", `{"n":2}`) // a repeat of 2
	notify(m, "a", "event/x", `{"n":1}`) // a repeat of 1, which the store has
	if n := f.writes.Load(); n != writes {
		t.Errorf("during the pause, %d writes reached the store", n-writes)
	}
	all := `1 a {"n":1} x1, 2 a {"n":2} x1, 3 b {"n":3} x0; next 0`
	check("EventsPage, writes failing", page("", 0, 10), all)
	check("EventsPage of a, writes failing", page("a", 0, 10), `1 a {"n":1} x1, 2 a {"n":2} x1; next 0`)
	check("first page, writes failing", page("", 0, 2), `1 a {"n":1} x1, 2 a {"n":2} x1; next 2`)
	check("second page, writes failing", page("", 2, 2), `3 b {"n":3} x0; next 0`)

	f.failReads.Store(true)
	check("EventsPage, all failing", page("", 0, 10), all)
	check("second page, all failing", page("", 2, 2), `3 b {"n":3} x0; next 0`)

	// The store is back, but writes still pause.
	f.failWrites.Store(false)
	f.failReads.Store(false)
	notify(m, "b", "event/y", `{"n":4}`)
	if n := f.writes.Load(); n != writes {
		t.Errorf("during the pause, %d writes reached the store", n-writes)
	}
	check("EventsPage, pausing", page("", 0, 10), `1 a {"n":1} x1, 2 a {"n":2} x1, 3 b {"n":3} x0, 4 b {"n":4} x0; next 0`)
	if got := storedEvents(t, f); len(got) != 1 || got[0].Repeats != 0 {
		t.Errorf("during the pause, the store has %+v", got)
	}

	// After the pause, the next notification writes the backlog first.
	now = now.Add(eventRetryDelay)
	notify(m, "b", "event/y", `{"n":5}`)
	want := `1 a {"n":1} x1, 2 a {"n":2} x1, 3 b {"n":3} x0, 4 b {"n":4} x0, 5 b {"n":5} x0; next 0`
	check("EventsPage, recovered", page("", 0, 10), want)
	var stored []string
	for _, ev := range storedEvents(t, f) {
		stored = append(stored, fmt.Sprintf("%d %s %s x%d", ev.Seq, ev.Server, ev.Params, ev.Repeats))
	}
	check("the store, recovered", strings.Join(stored, ", ")+"; next 0", want)
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5}, seqsOf(s.Events())); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}

	for msg, want := range map[string]int{
		"writing events to the store failed":   1,
		"reading events from the store failed": 2,
		"wrote the events kept in memory":      1,
		`{"n":`:                                0, // params are never logged
	} {
		if got := logs.count(msg); got != want {
			t.Errorf("the log has %d times %q, want %d:\n%s", got, msg, want, logs.String())
		}
	}
}

// TestEvents_UnknownSeqs starts a core on a store that holds events it has
// not seen, and has the first write fail: the event kept in memory moves
// above the store's seqs once EventsPage sees them, and keeps that seq when
// it is written.
func TestEvents_UnknownSeqs(t *testing.T) {
	f := &flakyEvents{Memory: store.NewMemory()}
	for i := range 3 {
		if _, err := f.Memory.AddEvent(t.Context(), store.Event{Server: "old", Method: "event/x", Params: json.RawMessage(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a"})
	s := newCore(t, m, Options{Events: f})
	now := eventsAt
	fixClock(s, &now)
	f.failWrites.Store(true)
	notify(m, "a", "event/x", `{}`)
	if diff := cmp.Diff([]uint64{1}, seqsOf(s.Events())); diff != "" {
		t.Errorf("before EventsPage, Events (-want +got):\n%s", diff)
	}
	got, _ := s.EventsPage("a", "", 0, 10) // sees no seq of the store
	if diff := cmp.Diff([]uint64{1}, seqsOf(got)); diff != "" {
		t.Errorf("EventsPage of a (-want +got):\n%s", diff)
	}
	got, next := s.EventsPage("", "", 0, 2)
	if diff := cmp.Diff([]uint64{1, 2}, seqsOf(got)); diff != "" || next != 2 {
		t.Errorf("first page = %v next %d, want [1 2] next 2", seqsOf(got), next)
	}
	got, next = s.EventsPage("", "", 2, 2)
	if diff := cmp.Diff([]uint64{3, 4}, seqsOf(got)); diff != "" || next != 0 || got[1].Server != "a" {
		t.Errorf("second page = %+v next %d, want 3, then a's event as 4, next 0", got, next)
	}

	f.failWrites.Store(false)
	now = now.Add(eventRetryDelay)
	notify(m, "a", "event/y", `{}`)
	got, _ = s.EventsPage("", "", 0, 0)
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5}, seqsOf(got)); diff != "" || got[3].Method != "event/x" || got[4].Method != "event/y" {
		t.Errorf("after writing, EventsPage = %+v", got)
	}
}

// TestEvents_CloseWritesBacklog checks that Close makes a last attempt to
// write what the store lacks, pause or not.
func TestEvents_CloseWritesBacklog(t *testing.T) {
	f := &flakyEvents{Memory: store.NewMemory()}
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a"})
	s, err := New(Options{Upstreams: m, Events: f})
	if err != nil {
		t.Fatal(err)
	}
	f.failWrites.Store(true)
	notify(m, "a", "event/x", `{"n":1}`)
	notify(m, "a", "event/x", `{"n":1}`)
	f.failWrites.Store(false)
	s.Close()
	got := storedEvents(t, f)
	if len(got) != 1 || got[0].Seq != 1 || string(got[0].Params) != `{"n":1}` || got[0].Repeats != 1 {
		t.Errorf("after Close, the store has %+v", got)
	}
}

// hangingEvents is a store whose writes hang until their context ends.
type hangingEvents struct {
	*store.Memory
	writes atomic.Int32
}

func (h *hangingEvents) AddEvent(ctx context.Context, ev store.Event) (uint64, error) {
	h.writes.Add(1)
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestEvents_HangingStore checks the bounds on the notification path: a
// write that hangs costs eventWriteTimeout, and then writes pause.
func TestEvents_HangingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hangingEvents{Memory: store.NewMemory()}
		m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a"})
		s := newCore(t, m, Options{Events: h})
		start := time.Now()
		notify(m, "a", "event/x", `{"n":1}`)
		if d := time.Since(start); d != eventWriteTimeout {
			t.Errorf("the first notification took %v, want %v", d, eventWriteTimeout)
		}
		start = time.Now()
		notify(m, "a", "event/x", `{"n":2}`)
		if d := time.Since(start); d != 0 {
			t.Errorf("a notification during the pause took %v, want 0", d)
		}
		if n := h.writes.Load(); n != 1 {
			t.Errorf("%d writes reached the store, want 1", n)
		}
		got, _ := s.EventsPage("", "", 0, 0)
		if diff := cmp.Diff([]uint64{1, 2}, seqsOf(got)); diff != "" {
			t.Errorf("EventsPage (-want +got):\n%s", diff)
		}
	})
}
