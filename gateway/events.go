package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/store"
)

// Server notifications the gateway does not know (custom event/* pushes)
// are kept for the admin API, with a dedup window so a server repeating
// itself does not flood it, and are forwarded to clients only when the
// server's config says so (forward_notifications).
//
// The core keeps the last maxEvents in a ring in memory, which also holds
// the dedup index. With Options.Events it writes them to that store too,
// where they outlive the process, and EventsPage reads them from there:
//
//	notification ──► ring: new, or a repeat within the window?
//	                  └─► sync: what the store lacks, oldest first ──► AddEvent, AddRepeat
//	EventsPage ──► ListEvents, then the ring's events the store lacks
//	                  └─ on a read error: the ring alone
//
// Writes are synchronous, on the upstream's notification path, each
// notification's bounded by eventWriteTimeout. writeMu serializes them, so
// the store numbers events in the order of the ring. A failed write logs a
// warning and leaves the event in the ring, unsynced, where EventsPage still
// finds it; writes then pause for eventRetryDelay, so an outage costs the
// notification path one timeout per delay at most. The first notification
// after the pause writes the backlog, oldest first, before its own, and
// Close tries once more. The ring bounds the backlog: an outage longer than
// maxEvents events loses the oldest.
//
// With a store, the store numbers the events, and AUTOINCREMENT keeps its
// seqs growing across restarts. An event not written yet has a provisional
// seq above every seq the core has seen from the store, and when a higher
// one turns up, the provisional seqs move above it. So no seq a client got
// as a cursor passes an event it has not seen (unless the backlog overflowed
// the ring, which lost events anyway): at worst an event shows twice, under
// its provisional seq and then a higher stored one.

// Bounds of the event store.
const (
	maxEvents        = 1000
	eventDedupWindow = 5 * time.Minute

	// eventWriteTimeout bounds the store writes of one notification, and
	// eventReadTimeout the store read of one EventsPage.
	eventWriteTimeout = 2 * time.Second
	eventReadTimeout  = 2 * time.Second
	// eventRetryDelay is how long writes to the store pause after one
	// failed.
	eventRetryDelay = 10 * time.Second
)

// EventStore keeps the events beyond the process; *store.SQLite and
// *store.Memory implement it. Its methods may be called concurrently; the
// core calls AddEvent and AddRepeat one at a time, in the order of the
// events.
type EventStore interface {
	// AddEvent stores ev as the newest event and returns its seq, above
	// every seq the store gave before, also in an earlier process. It
	// ignores ev.Seq, and may delete the oldest events.
	AddEvent(ctx context.Context, ev store.Event) (uint64, error)
	// AddRepeat counts one more repeat of the event seq. An error wrapping
	// store.ErrNotFound means the store no longer has the event.
	AddRepeat(ctx context.Context, seq uint64) error
	// ListEvents returns the events whose seq is above after, of server and
	// of method when they are not "", in seq order, at most limit of them
	// (all if limit <= 0).
	ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]store.Event, error)
}

var (
	_ EventStore = (*store.SQLite)(nil)
	_ EventStore = (*store.Memory)(nil)
)

// Event is a server notification kept in the event store.
type Event struct {
	// Seq numbers the events from 1, in arrival order: the cursor of
	// EventsPage. Without Options.Events it starts again with each process;
	// with it, the store gives it and it keeps growing across restarts.
	Seq    uint64          `json:"seq"`
	Server string          `json:"server"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	Time   time.Time       `json:"time"`
	// Repeats counts the copies that arrived within the dedup window after
	// this one and were folded into it.
	Repeats int `json:"repeats,omitempty"`
}

// eventStore is a ring of the last events with a dedup index, written
// through to an EventStore when it has one.
type eventStore struct {
	mu sync.Mutex
	// ring grows to size as events come, then wraps: until it is full,
	// len(ring) == next. A ring allocated whole at start would be half a
	// megabyte of heap that holds nothing on most gateways, and that the
	// garbage collector scans on every cycle.
	ring   []ringEvent
	size   int
	next   int
	full   bool
	window time.Duration
	seen   map[string]dedup // dedup key -> where and when
	now    func() time.Time
	// seq is the Seq of the last event added; with a store, the highest
	// seq seen from it or given provisionally.
	seq uint64

	// With a store (st not nil); the fields below writeMu are guarded by mu.
	st     EventStore
	logger *slog.Logger
	life   context.Context // bounds the store calls: the core's
	// writeMu is held by add across its store writes, so the store gets
	// the events in ring order. Only its holder changes the ring, under mu
	// as well for EventsPage, which reads it and moves provisional seqs.
	writeMu  sync.Mutex
	unsynced int       // events the store lacks: the newest ones of the ring
	dirty    int       // events in the store that lack repeats
	lost     int       // unsynced events the ring dropped since the last sync that worked
	failing  bool      // the last sync failed
	retryAt  time.Time // writes pause until then after a failure
	written  uint64    // counts AddEvent calls that worked
}

// ringEvent is an event of the ring and how much of it the store has.
type ringEvent struct {
	Event
	synced        bool // the store has the event (never, without a store)
	syncedRepeats int  // the repeats the store counted
}

type dedup struct {
	at  time.Time
	pos int
}

func newEventStore(size int, window time.Duration) *eventStore {
	return &eventStore{size: size, window: window, seen: map[string]dedup{}, now: time.Now}
}

// persist makes e write its events to st, with calls bounded by life and
// failures logged to logger.
func (e *eventStore) persist(st EventStore, life context.Context, logger *slog.Logger) {
	e.st, e.life, e.logger = st, life, logger
}

// dedupKey is the notification's _meta.dedup_key when it has one, else a
// hash of its method and params.
func dedupKey(server, method string, params json.RawMessage) string {
	if meta, ok, _ := rawjson.Get(params, "_meta"); ok {
		if k, ok := rawjson.String(meta, "dedup_key"); ok && k != "" {
			return server + "\x00" + k
		}
	}
	h := sha256.New()
	h.Write([]byte(server + "\x00" + method + "\x00"))
	h.Write(params)
	return hex.EncodeToString(h.Sum(nil))
}

// add stores an event unless the same one came within the window; it
// reports whether it was new. With a store, it returns once the store has
// what it lacked, or the write failed or timed out.
func (e *eventStore) add(server, method string, params json.RawMessage) bool {
	if e.st != nil {
		e.writeMu.Lock()
		defer e.writeMu.Unlock()
		defer e.sync(false) // after mu is released
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	key := dedupKey(server, method, params)
	if d, ok := e.seen[key]; ok && now.Sub(d.at) < e.window && e.ring[d.pos].Method == method && e.ring[d.pos].Server == server {
		r := &e.ring[d.pos]
		r.Repeats++
		if r.synced && r.Repeats == r.syncedRepeats+1 {
			e.dirty++
		}
		return false
	}
	// Forget the key of the event this slot held.
	if e.full {
		old := e.ring[e.next]
		if k := dedupKey(old.Server, old.Method, old.Params); e.seen[k].pos == e.next {
			delete(e.seen, k)
		}
		switch {
		case e.st == nil:
		case !old.synced:
			e.unsynced--
			e.lost++
		case old.syncedRepeats < old.Repeats:
			e.dirty--
		}
	}
	e.seq++
	ev := Event{Seq: e.seq, Server: server, Method: method, Params: append(json.RawMessage(nil), params...), Time: now}
	if e.st != nil {
		ev.Time = now.UTC() // as the store returns it
		e.unsynced++
	}
	if e.full {
		e.ring[e.next] = ringEvent{Event: ev}
	} else {
		e.ring = append(e.ring, ringEvent{Event: ev})
	}
	e.seen[key] = dedup{at: now, pos: e.next}
	e.next++
	if e.next == e.size {
		e.next, e.full = 0, true
	}
	// Drop dedup entries past the window, so the index stays small.
	if len(e.seen) > 2*e.size {
		for k, d := range e.seen {
			if now.Sub(d.at) >= e.window {
				delete(e.seen, k)
			}
		}
	}
	return true
}

// sync writes to the store the events and repeats it lacks, unless writes
// pause after a failure and force is false (writeMu held, mu not).
func (e *eventStore) sync(force bool) {
	e.mu.Lock()
	idle := e.unsynced == 0 && e.dirty == 0 || !force && e.now().Before(e.retryAt)
	e.mu.Unlock()
	if idle {
		return
	}
	ctx, cancel := context.WithTimeout(e.life, eventWriteTimeout)
	defer cancel()
	err := e.write(ctx)
	e.mu.Lock()
	recovered, unsynced, lost := false, e.unsynced, e.lost
	if err != nil {
		e.failing, e.retryAt = true, e.now().Add(eventRetryDelay)
	} else if e.failing {
		recovered = true
		e.failing, e.lost = false, 0
	}
	e.mu.Unlock()
	switch {
	case err != nil:
		e.logger.Warn("writing events to the store failed; keeping them in memory", "err", err, "unsynced", unsynced, "retry_in", eventRetryDelay)
	case recovered:
		e.logger.Info("wrote the events kept in memory to the store", "lost", lost)
	}
}

// write is sync's work: first the unsynced events, oldest first, then the
// repeats the store lacks.
func (e *eventStore) write(ctx context.Context) error {
	for {
		e.mu.Lock()
		if e.unsynced == 0 {
			e.mu.Unlock()
			break
		}
		pos := e.oldestUnsyncedLocked()
		ev := e.ring[pos].Event
		e.mu.Unlock()
		seq, err := e.st.AddEvent(ctx, store.Event{Server: ev.Server, Method: storable(ev.Method), Params: ev.Params, Time: ev.Time, Repeats: ev.Repeats})
		if err != nil {
			return err
		}
		e.mu.Lock()
		r := &e.ring[pos]
		r.Seq, r.synced, r.syncedRepeats = seq, true, ev.Repeats
		e.unsynced--
		e.written++
		e.learnLocked(seq)
		e.mu.Unlock()
	}

	e.mu.Lock()
	var todo []int // ring positions
	if e.dirty > 0 {
		for i, r := range e.ring {
			if r.synced && r.syncedRepeats < r.Repeats {
				todo = append(todo, i)
			}
		}
	}
	e.mu.Unlock()
	for _, pos := range todo {
		for {
			e.mu.Lock()
			seq := e.ring[pos].Seq
			e.mu.Unlock()
			err := e.st.AddRepeat(ctx, seq)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			e.mu.Lock()
			r := &e.ring[pos]
			r.syncedRepeats++
			if err != nil { // the store dropped the event: nothing to count
				r.syncedRepeats = r.Repeats
			}
			done := r.syncedRepeats == r.Repeats
			if done {
				e.dirty--
			}
			e.mu.Unlock()
			if done {
				break
			}
		}
	}
	return nil
}

// oldestUnsyncedLocked is the ring position of the oldest event the store
// lacks (mu held, e.unsynced > 0).
func (e *eventStore) oldestUnsyncedLocked() int {
	return (e.next - e.unsynced + len(e.ring)) % len(e.ring)
}

// learnLocked notes that the store has an event seq, and moves the
// provisional seqs of the events it lacks above it (mu held).
func (e *eventStore) learnLocked(seq uint64) {
	if e.unsynced > 0 {
		first := e.oldestUnsyncedLocked()
		if p := e.ring[first].Seq; p <= seq {
			shift := seq + 1 - p
			for i := range e.unsynced {
				e.ring[(first+i)%len(e.ring)].Seq += shift
			}
			e.seq += shift
		}
	}
	e.seq = max(e.seq, seq)
}

// close makes a last attempt, pause or not, to write what the store lacks.
func (e *eventStore) close() {
	if e.st == nil {
		return
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	e.sync(true)
}

// list returns the events of the ring, oldest first.
func (e *eventStore) list() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Event, 0, len(e.ring))
	if e.full {
		for _, r := range e.ring[e.next:] {
			out = append(out, r.Event)
		}
	}
	for _, r := range e.ring[:e.next] {
		out = append(out, r.Event)
	}
	return out
}

// page is EventsPage: from the ring alone without a store, else from the
// store with what it lacks from the ring (repeats, then the unsynced
// events), or from the ring if reading the store fails.
func (e *eventStore) page(ctx context.Context, server, method string, after uint64, limit int) ([]Event, uint64) {
	if e.st == nil {
		return pageOf(e.list(), server, method, after, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, eventReadTimeout)
	defer cancel()
	n := 0 // all
	if limit > 0 {
		n = limit + 1 // one more tells whether there is a next page
	}
	e.mu.Lock()
	written := e.written
	e.mu.Unlock()
	stored, err := e.st.ListEvents(ctx, server, method, after, n)
	if err != nil {
		e.logger.Warn("reading events from the store failed; serving those in memory", "err", err)
		return pageOf(e.list(), server, method, after, limit)
	}
	evs := make([]Event, 0, len(stored))
	for _, ev := range stored {
		evs = append(evs, Event{Seq: ev.Seq, Server: ev.Server, Method: ev.Method, Params: ev.Params, Time: ev.Time, Repeats: ev.Repeats})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(evs) > 0 {
		e.learnLocked(evs[len(evs)-1].Seq)
	}
	// Add the repeats the store lacks.
	if e.dirty > 0 {
		lacks := map[uint64]int{}
		for _, r := range e.ring {
			if r.synced && r.syncedRepeats < r.Repeats {
				lacks[r.Seq] = r.Repeats - r.syncedRepeats
			}
		}
		for i := range evs {
			evs[i].Repeats += lacks[evs[i].Seq]
		}
	}
	// Add the events the store lacks, all above what it returned. Not if a
	// write landed during the read: the read may have missed that event,
	// and the next page must start below it. It and the unsynced events
	// come on a later page.
	if e.written == written && e.unsynced > 0 {
		for i, first := 0, e.oldestUnsyncedLocked(); i < e.unsynced; i++ {
			evs = append(evs, e.ring[(first+i)%len(e.ring)].Event)
		}
	}
	return pageOf(evs, server, method, after, limit)
}

// pageOf is the page of evs (in Seq order) that EventsPage returns.
func pageOf(evs []Event, server, method string, after uint64, limit int) (events []Event, next uint64) {
	events = []Event{}
	for _, ev := range evs {
		if ev.Seq <= after || server != "" && ev.Server != server || method != "" && ev.Method != method {
			continue
		}
		if limit > 0 && len(events) == limit {
			return events, events[len(events)-1].Seq
		}
		events = append(events, ev)
	}
	return events, 0
}

// Events returns the server notifications this process keeps in memory (the
// last 1000), oldest first.
func (s *Server) Events() []Event { return s.events.list() }

// EventsPage returns up to limit events (all if limit <= 0) after the one
// numbered after (from the oldest kept when after is 0), of server and
// method when they are not "", oldest first, and the Seq to pass as after
// for the next page (0 when there is none yet). With Options.Events it
// reads the store, and serves the events in memory if that fails.
func (s *Server) EventsPage(server, method string, after uint64, limit int) (events []Event, next uint64) {
	return s.events.page(s.life, server, method, after, limit)
}
