package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Server notifications the gateway does not know (custom event/* pushes)
// are kept in a bounded event store for the admin API, with a dedup window
// so a server repeating itself does not flood it, and are forwarded to
// clients only when the server's config says so (forward_notifications).

// Bounds of the event store.
const (
	maxEvents        = 1000
	eventDedupWindow = 5 * time.Minute
)

// Event is a server notification kept in the event store.
type Event struct {
	// Seq numbers the events of this process from 1, in arrival order:
	// the cursor of EventsPage.
	Seq    uint64          `json:"seq"`
	Server string          `json:"server"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	Time   time.Time       `json:"time"`
	// Repeats counts the copies that arrived within the dedup window after
	// this one and were folded into it.
	Repeats int `json:"repeats,omitempty"`
}

// eventStore is a ring of the last events with a dedup index.
type eventStore struct {
	mu     sync.Mutex
	ring   []Event
	next   int
	full   bool
	window time.Duration
	seen   map[string]dedup // dedup key -> where and when
	now    func() time.Time
	seq    uint64 // of the last event added
}

type dedup struct {
	at  time.Time
	pos int
	seq uint64
}

func newEventStore(size int, window time.Duration) *eventStore {
	return &eventStore{ring: make([]Event, size), window: window, seen: map[string]dedup{}, now: time.Now}
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
// reports whether it was new.
func (e *eventStore) add(server, method string, params json.RawMessage) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	key := dedupKey(server, method, params)
	if d, ok := e.seen[key]; ok && now.Sub(d.at) < e.window && e.ring[d.pos].Method == method && e.ring[d.pos].Server == server {
		e.ring[d.pos].Repeats++
		return false
	}
	// Forget the key of the event this slot held.
	if e.full {
		old := e.ring[e.next]
		if k := dedupKey(old.Server, old.Method, old.Params); e.seen[k].pos == e.next {
			delete(e.seen, k)
		}
	}
	e.seq++
	e.ring[e.next] = Event{Seq: e.seq, Server: server, Method: method, Params: append(json.RawMessage(nil), params...), Time: now}
	e.seen[key] = dedup{at: now, pos: e.next}
	e.next++
	if e.next == len(e.ring) {
		e.next, e.full = 0, true
	}
	// Drop dedup entries past the window, so the index stays small.
	if len(e.seen) > 2*len(e.ring) {
		for k, d := range e.seen {
			if now.Sub(d.at) >= e.window {
				delete(e.seen, k)
			}
		}
	}
	return true
}

// list returns the stored events, oldest first.
func (e *eventStore) list() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	if e.full {
		out = append(out, e.ring[e.next:]...)
	}
	return append(out, e.ring[:e.next]...)
}

// Events returns the server notifications kept in the event store, oldest
// first, for the admin API.
func (s *Server) Events() []Event { return s.events.list() }

// EventsPage returns up to limit events after the one numbered after (all
// from the oldest kept when after is 0), of server and method when they
// are not "", oldest first, and the Seq to pass as after for the next page
// (0 when there is none yet).
func (s *Server) EventsPage(server, method string, after uint64, limit int) (events []Event, next uint64) {
	events = []Event{}
	for _, ev := range s.events.list() {
		if ev.Seq <= after || server != "" && ev.Server != server || method != "" && ev.Method != method {
			continue
		}
		if len(events) == limit {
			return events, events[len(events)-1].Seq
		}
		events = append(events, ev)
	}
	return events, 0
}
