package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
)

// Write writes e to w as one event-stream block: id, event and retry when
// set, then the data, one data line per "\n"-separated line (at least one,
// so that every block written is dispatched), then the blank line. Retry is
// written in whole milliseconds.
//
// It refuses what a reader could not read back: a CR in the data, a CR, LF
// or NUL in the id, a CR or LF in the type, or a negative retry. It does not
// flush w.
func Write(w io.Writer, e Event) error {
	if bytes.IndexByte(e.Data, '\r') >= 0 {
		return errors.New("sse: data contains a carriage return")
	}
	if strings.ContainsAny(e.ID, "\r\n\x00") {
		return errors.New("sse: id contains a line break or NUL")
	}
	if strings.ContainsAny(e.Type, "\r\n") {
		return errors.New("sse: event type contains a line break")
	}
	if e.HasRetry && e.Retry < 0 {
		return errors.New("sse: negative retry")
	}
	var b bytes.Buffer
	if e.HasID {
		b.WriteString("id: ")
		b.WriteString(e.ID)
		b.WriteByte('\n')
	}
	if e.Type != "" {
		b.WriteString("event: ")
		b.WriteString(e.Type)
		b.WriteByte('\n')
	}
	if e.HasRetry {
		b.WriteString("retry: ")
		b.WriteString(strconv.FormatInt(e.Retry.Milliseconds(), 10))
		b.WriteByte('\n')
	}
	data := e.Data
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
