package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Event is one dispatched block of an event stream.
type Event struct {
	// ID is the value of the block's last id field, when HasID. An empty ID
	// with HasID resets the stream's last event id.
	ID    string
	HasID bool
	// Type is the value of the event field; empty means "message".
	Type string
	// Data is the block's data fields joined with "\n". It is empty for a
	// block that only sets an id or a retry (an MCP "priming event"). The
	// slice belongs to the caller.
	Data []byte
	// Retry is the reconnection time the block sets, when HasRetry.
	Retry    time.Duration
	HasRetry bool
}

// ErrTooLarge is wrapped by the error Next returns when an event's data, or
// one line, is longer than the Reader's cap.
var ErrTooLarge = errors.New("event too large")

// lineSlack is how much longer than the cap a line may be: room for a field
// name, so that an event whose data is exactly the cap fits on one line.
const lineSlack = 64

// maxRetry bounds a retry field; larger values are ignored like malformed ones.
const maxRetry = int64(time.Duration(1<<63-1) / time.Millisecond)

var bom = []byte("\xEF\xBB\xBF")

// Reader reads events from an event stream. It is not safe for concurrent
// use.
type Reader struct {
	br      *bufio.Reader
	max     int64
	started bool // the byte order mark check ran
	skipLF  bool // the last line ended in CR: a following LF belongs to it
	line    []byte
	err     error // sticky
	pooled  bool  // br came from readers
}

// NewReader returns a Reader of r whose events carry at most maxEvent bytes
// of data; no line may be longer than that either (plus a few bytes for the
// field name). It buffers at most about that much. maxEvent must be
// positive.
func NewReader(r io.Reader, maxEvent int64) *Reader {
	if maxEvent <= 0 {
		panic("sse: NewReader with a non-positive cap")
	}
	if maxEvent+lineSlack < bufSize {
		return &Reader{br: bufio.NewReaderSize(r, max(int(maxEvent+lineSlack), 16)), max: maxEvent}
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &Reader{br: br, max: maxEvent, pooled: true}
}

// bufSize is the size of a Reader's buffer, unless its cap is smaller. A
// longer line is gathered in the Reader's line buffer; 8 KiB reads a
// small answer in one read and a 64 KiB one in eight, and keeps the pool
// small: it holds about one buffer per call in flight (it was 32 KiB, and
// 64 calls in flight kept 2 MiB of buffers alive).
const bufSize = 8 << 10

// readers are the buffers of released Readers: a response stream is read
// by a new Reader, one per request, and a buffer made for each was a large
// share of an HTTP upstream call's garbage.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}

// Release gives the Reader's buffer back for a later NewReader. The Reader
// must not be used after; the events it returned stay valid (their data
// is theirs).
func (r *Reader) Release() {
	if r.pooled {
		r.br.Reset(nil)
		readers.Put(r.br)
	}
	r.br, r.pooled, r.line = nil, false, nil
	if r.err == nil {
		r.err = errReleased
	}
}

var errReleased = errors.New("sse: Reader used after Release")

// Next returns the next event that carries data, an id or a retry field.
// Blocks with none of these (comments, blank lines, a lone event field) are
// skipped. At the end of the stream it returns io.EOF, discarding an event
// not yet ended by a blank line; a read error is returned as is, and an
// event over the cap as an error wrapping ErrTooLarge. After an error, Next
// keeps returning it.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) next() (Event, error) {
	if !r.started {
		r.started = true
		if b, _ := r.br.Peek(len(bom)); bytes.Equal(b, bom) {
			r.br.Discard(len(bom))
		}
	}
	var (
		ev      Event
		data    []byte
		hasData bool
	)
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData && !ev.HasID && !ev.HasRetry {
				ev.Type = "" // a block without data dispatches nothing
				continue
			}
			if data == nil {
				data = []byte{}
			}
			ev.Data = data
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			n := int64(len(data)) + int64(len(value))
			if hasData {
				n++
			}
			if n > r.max {
				return Event{}, fmt.Errorf("sse: event data longer than %d bytes: %w", r.max, ErrTooLarge)
			}
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "event":
			ev.Type = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID, ev.HasID = string(value), true
			}
		case "retry":
			if ms, ok := parseRetry(value); ok {
				ev.Retry, ev.HasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// parseRetry accepts ASCII digits only, as the standard says.
func parseRetry(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || ms > maxRetry {
		return 0, false
	}
	return ms, true
}

// readLine returns the next line without its end (CR, LF or CRLF). The slice
// is valid until the next call. A line cut short by the end of the stream is
// dropped: the error is io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	if r.skipLF {
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, err
		}
		r.skipLF = false
		if b[0] == '\n' {
			r.br.Discard(1)
		}
	}
	limit := r.max + lineSlack
	r.line = r.line[:0]
	for {
		if _, err := r.br.Peek(1); err != nil {
			return nil, err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if int64(len(r.line))+int64(n) > limit {
			return nil, fmt.Errorf("sse: line longer than %d bytes: %w", limit, ErrTooLarge)
		}
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			r.br.Discard(n)
			continue
		}
		r.skipLF = buf[i] == '\r'
		r.br.Discard(i + 1)
		return r.line, nil
	}
}
