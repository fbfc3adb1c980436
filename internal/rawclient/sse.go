package rawclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// errTooLarge is wrapped by the error the event reader returns for an event
// or a line longer than its cap.
var errTooLarge = errors.New("event too large")

// event is one dispatched block of an event stream.
type event struct {
	id       string
	hasID    bool
	typ      string // the event field; "" means "message"
	data     []byte
	retry    time.Duration
	hasRetry bool
}

// eventReader reads a text/event-stream body one event at a time. It is a
// compact version of the HTML standard's rules: lines end in LF or CRLF (a
// lone CR is not a line end here); a blank line dispatches; lines starting
// with a colon are comments; data fields are joined with "\n"; an id with a
// NUL is ignored; retry is digits only; an event cut short by the end of the
// stream is dropped. No line and no event's data may exceed max bytes.
type eventReader struct {
	sc      *bufio.Scanner
	max     int
	started bool
}

func newEventReader(r io.Reader, max int) *eventReader {
	sc := bufio.NewScanner(r)
	// A line holds at most max bytes of data plus its field name.
	sc.Buffer(make([]byte, 0, min(max+64, 4096)), max+64)
	return &eventReader{sc: sc, max: max}
}

// next returns the next event carrying data, an id or a retry field, io.EOF
// at the end of the stream, or an error (one wrapping errTooLarge for an
// event over the cap).
func (r *eventReader) next() (event, error) {
	var (
		ev      event
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if hasData || ev.hasID || ev.hasRetry {
				if ev.data == nil {
					ev.data = []byte{}
				}
				return ev, nil
			}
			ev = event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			n := len(ev.data) + len(value)
			if hasData {
				n++
			}
			if n > r.max {
				return event{}, fmt.Errorf("event data longer than %d bytes: %w", r.max, errTooLarge)
			}
			if hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, value...)
			hasData = true
		case "event":
			ev.typ = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id, ev.hasID = string(value), true
			}
		case "retry":
			// ParseUint takes no sign; 32 bits bound the wait to weeks.
			if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
				ev.retry, ev.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return event{}, fmt.Errorf("event stream line longer than %d bytes: %w", r.max+64, errTooLarge)
		}
		return event{}, err
	}
	return event{}, io.EOF
}
