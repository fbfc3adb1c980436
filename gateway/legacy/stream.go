package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// stream is one logical SSE stream of a session: its event buffer, whether
// more is coming, and the connection writing it now. Guarded by its
// session's mu. The design is in the package doc.
type stream struct {
	num     uint64
	tag     string  // its session's tag, marking its event ids
	events  []event // ascending seq; the oldest may have been dropped
	bytes   int64
	lastSeq uint64 // seq of the newest event appended; 0 before any
	// delivered is the highest seq a connection wrote and flushed.
	delivered uint64
	// pending counts the calls whose response is still to be appended;
	// the stream is done when it drops to zero.
	pending int
	done    bool // nothing more will be appended
	doneAt  time.Time
	att     *attachment // the connection writing it, or nil
	// droppedAt is when the connection writing this POST stream went
	// away before the stream was done; zero while one is attached, or
	// once the resume window that started then was dealt with.
	droppedAt time.Time
}

// event is one SSE block, encoded once when appended.
type event struct {
	seq   uint64
	block []byte // "id: ...\ndata: ...\n\n"
	// response marks a JSON-RPC response, which the buffer never drops:
	// it is what the client waits for.
	response bool
}

// attachment is one connection writing a stream.
type attachment struct {
	// wake is poked (never blocking) when events are appended or the
	// stream ends.
	wake chan struct{}
	// detach is closed when a newer connection takes the stream over.
	detach chan struct{}
}

func (st *stream) poke() {
	if st.att != nil {
		select {
		case st.att.wake <- struct{}{}:
		default:
		}
	}
}

// finish marks the stream done.
func (st *stream) finish() {
	if !st.done {
		st.done = true
		st.doneAt = time.Now()
		st.poke()
	}
}

// formatEventID returns the id of event seq of stream num.
func formatEventID(num, seq uint64) string {
	return strconv.FormatUint(num, 10) + "_" + strconv.FormatUint(seq, 10)
}

// parseEventID parses a Last-Event-ID made by formatEventID: two decimal
// numbers without signs or leading zeros, joined by "_".
func parseEventID(id string) (num, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "_")
	if !found {
		return 0, 0, false
	}
	num, ok1 := parseDecimal(a)
	seq, ok2 := parseDecimal(b)
	return num, seq, ok1 && ok2
}

// eventID returns the id of event seq of stream num of a session with
// tag: "<tag>.<num>_<seq>" for a session a process restored, whose
// streams are not those of the process it lived in before; just
// "<num>_<seq>" for one created by this process.
func eventID(tag string, num, seq uint64) string {
	if tag == "" {
		return formatEventID(num, seq)
	}
	return tag + "." + formatEventID(num, seq)
}

// maxTag bounds the tag of an event id.
const maxTag = 16

// parseLastEventID parses a Last-Event-ID made by eventID: an optional
// tag of 1 to maxTag lowercase hex digits and a ".", then what
// parseEventID parses.
func parseLastEventID(id string) (tag string, num, seq uint64, ok bool) {
	rest := id
	if i := strings.IndexByte(id, '.'); i >= 0 {
		tag, rest = id[:i], id[i+1:]
		if tag == "" || len(tag) > maxTag || strings.Trim(tag, "0123456789abcdef") != "" {
			return "", 0, 0, false
		}
	}
	num, seq, ok = parseEventID(rest)
	if !ok {
		return "", 0, 0, false
	}
	return tag, num, seq, true
}

func parseDecimal(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// newStreamLocked opens a POST stream on s, with pending calls.
func (s *session) newStreamLocked(pending int) *stream {
	st := &stream{num: s.nextStream, pending: pending, tag: s.tag}
	s.nextStream++
	s.streams[st.num] = st
	s.trimFinishedLocked()
	return st
}

// standaloneLocked returns stream 0 of s, the standalone GET stream,
// made on first use (by a GET, or by an input request that belongs to no
// call) with the session's tag, like its other streams.
func (s *session) standaloneLocked() *stream {
	if s.standalone == nil {
		s.standalone = &stream{num: 0, tag: s.tag}
		s.streams[0] = s.standalone
	}
	return s.standalone
}

// trimFinishedLocked keeps at most maxFinishedStreams finished streams,
// dropping the oldest.
func (s *session) trimFinishedLocked() {
	var fin []uint64
	for n, st := range s.streams {
		if st.done && st.att == nil && n != 0 {
			fin = append(fin, n)
		}
	}
	if len(fin) <= maxFinishedStreams {
		return
	}
	// Stream numbers grow with time, so the smallest are the oldest.
	for len(fin) > maxFinishedStreams {
		oldest := 0
		for i, n := range fin {
			if n < fin[oldest] {
				oldest = i
			}
		}
		delete(s.streams, fin[oldest])
		fin = append(fin[:oldest], fin[oldest+1:]...)
	}
}

// appendLocked adds a message that is not a response (nil: a priming
// event, empty data) to st and wakes its writer. See appendEventLocked.
func (h *Handler) appendLocked(st *stream, msg []byte) {
	h.appendEventLocked(st, msg, false)
}

// appendResponseLocked adds a JSON-RPC response to st and wakes its
// writer. See appendEventLocked.
func (h *Handler) appendResponseLocked(st *stream, msg []byte) {
	h.appendEventLocked(st, msg, true)
}

// appendEventLocked adds a message to st and wakes its writer. The buffer
// then drops its oldest events beyond the bounds, but never a response
// (which the client waits for; a stream holds at most one per call
// answered on it, and a session's calls are capped by MaxInFlight) and
// never the newest event. Appending to a done stream does nothing.
func (h *Handler) appendEventLocked(st *stream, msg []byte, response bool) {
	if st.done {
		return
	}
	st.lastSeq++
	if bytes.IndexByte(msg, '\r') >= 0 {
		// Only whitespace can hold a raw CR in JSON, and SSE data cannot.
		var b bytes.Buffer
		if json.Compact(&b, msg) == nil {
			msg = b.Bytes()
		}
	}
	var b bytes.Buffer
	b.Grow(len(msg) + 64) // the id and the field names; more if msg has newlines
	if err := sse.Write(&b, sse.Event{ID: eventID(st.tag, st.num, st.lastSeq), HasID: true, Data: msg}); err != nil {
		h.logger.Error("dropping an event that cannot be written as SSE", "err", err)
		return
	}
	st.events = append(st.events, event{seq: st.lastSeq, block: b.Bytes(), response: response})
	st.bytes += int64(b.Len())
	st.trimLocked(h.opts.MaxStreamEvents, h.opts.MaxStreamBytes)
	st.poke()
}

// trimLocked drops the oldest events that are neither responses nor the
// newest while st's buffer is beyond the bounds.
func (st *stream) trimLocked(maxEvents int, maxBytes int64) {
	n := len(st.events)
	if n <= maxEvents && st.bytes <= maxBytes {
		return
	}
	kept := st.events[:0]
	for i, e := range st.events {
		if i < len(st.events)-1 && !e.response && (n > maxEvents || st.bytes > maxBytes) {
			n--
			st.bytes -= int64(len(e.block))
			continue
		}
		kept = append(kept, e)
	}
	clear(st.events[len(kept):]) // let the dropped blocks go
	st.events = kept
}

// gaps counts the events after cursor missing from evs: the ones the
// buffer dropped before a connection wrote them.
func gaps(cursor uint64, evs []event) uint64 {
	var n uint64
	for _, e := range evs {
		n += e.seq - cursor - 1
		cursor = e.seq
	}
	return n
}

// afterLocked returns a copy of the events after seq.
func (st *stream) afterLocked(seq uint64) []event {
	i := 0
	for i < len(st.events) && st.events[i].seq <= seq {
		i++
	}
	if i == len(st.events) {
		return nil
	}
	return append([]event(nil), st.events[i:]...)
}

// attachLocked makes a new connection the writer of st, detaching the
// older one, and counts it on s.
func (s *session) attachLocked(st *stream) *attachment {
	if st.att != nil {
		close(st.att.detach)
		s.conns--
	}
	att := &attachment{wake: make(chan struct{}, 1), detach: make(chan struct{})}
	st.att = att
	st.droppedAt = time.Time{} // resumed in time
	s.conns++
	return att
}

// detachLocked ends att's hold of st, if it still has it. When that leaves
// a POST stream with more to come and nobody writing it, the connection
// dropped: its resume window starts.
func (s *session) detachLocked(st *stream, att *attachment) {
	now := time.Now()
	if st.att == att {
		st.att = nil
		s.conns--
		if !st.done && st.num != 0 {
			st.droppedAt = now
		}
	}
	s.lastActive = now
}

// abandonLocked cancels the calls of a POST stream whose connection
// dropped more than ResumeWindow ago and that no connection resumed since:
// the client is taken to have gone (see "Cancellation and shutdown" in the
// package doc). The core then cancels them upstream.
func (h *Handler) abandonLocked(s *session, st *stream, now time.Time) {
	if st.droppedAt.IsZero() || st.done || st.att != nil || now.Sub(st.droppedAt) < h.opts.ResumeWindow {
		return
	}
	st.droppedAt = time.Time{}
	for _, c := range s.calls {
		if c.st == st {
			c.cancel(errNotResumed)
			h.logger.Debug("request cancelled: its stream was not resumed", "session_id", s.key, "method", c.method, "id", c.id.String(), "stream", st.num)
		}
	}
}

// startSSE writes the headers of an event stream (MCP 2025-11-25,
// basic/transports; X-Accel-Buffering keeps nginx from buffering it).
func startSSE(w http.ResponseWriter) {
	setSSEHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
}

// setSSEHeaders sets the headers of an event stream's response: its type,
// and no caching or proxy buffering.
func setSSEHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// keepAliveComment is what a stream says when it has nothing to say.
var keepAliveComment = []byte(": keep-alive\n\n")

// pump writes st's events after cursor to out as they come, with keep-alive
// comments in between, until the stream is done (or its session ended)
// and written, a newer connection detaches att, the client goes away, or a
// write fails. Then it releases the stream; a finished stream whose every
// event was written is dropped, since nobody needs to resume it.
func (h *Handler) pump(ctx context.Context, out sink, s *session, st *stream, att *attachment, cursor uint64) {
	ka := time.NewTicker(h.opts.KeepAlive)
	defer ka.Stop()
	write := out.write
	finished := false
	defer func() {
		// The session is settled before the client sees the end, so that
		// a resume it sends at once finds the stream gone (400), not an
		// empty one.
		s.mu.Lock()
		s.detachLocked(st, att)
		if finished && st.num != 0 {
			delete(s.streams, st.num)
		}
		s.mu.Unlock()
		out.end()
	}()
	if !write(nil) { // send the headers now
		return
	}
	for {
		s.mu.Lock()
		if st.att != att {
			s.mu.Unlock()
			return
		}
		evs := st.afterLocked(cursor)
		done := st.done
		s.mu.Unlock()
		if len(evs) > 0 {
			if lost := gaps(cursor, evs); lost > 0 {
				h.logger.Debug("events dropped from a full stream buffer", "session_id", s.key, "stream", st.num, "lost", lost)
			}
			var b bytes.Buffer
			for _, e := range evs {
				b.Write(e.block)
			}
			if !write(b.Bytes()) {
				return
			}
			cursor = evs[len(evs)-1].seq
			s.mu.Lock()
			st.delivered = max(st.delivered, cursor)
			s.mu.Unlock()
			ka.Reset(h.opts.KeepAlive)
			continue
		}
		if done {
			finished = true
			return
		}
		select {
		case <-att.wake:
		case <-att.detach:
			return
		case <-ctx.Done():
			return
		case <-ka.C:
			if !write(keepAliveComment) {
				return
			}
		}
	}
}
