package sse_test

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// FuzzReader checks the Reader against a plain, whole-input reading of the
// standard's rules (reference below): it never panics, never returns data
// over the cap, returns exactly the reference's events when it reaches the
// end, and a prefix of them when it stops at the cap. It also checks that
// an event written by Write reads back unchanged.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"", "data: a\n\n", "data: a\r\ndata: b\r\n\r\n", "data: a\rdata: b\r\r",
		"\xEF\xBB\xBFid: 1\ndata:\n\n", ": c\nevent: e\ndata: x\n\n", "retry: 50\n\n",
		"id: a\x00\ndata: x\n\n", "data: 123456789\n\n", "data\ndata\n\n", "id\n\nevent: x\n\n",
	} {
		f.Add([]byte(s), uint16(8), "1", "message", []byte("{}"), uint32(0), true)
	}
	f.Add([]byte(""), uint16(100), "", "", []byte("a\nb\n"), uint32(1000), false)
	f.Fuzz(func(t *testing.T, stream []byte, max uint16, id, typ string, data []byte, retryMS uint32, hasRetry bool) {
		cap := int64(max) + 1
		want := reference(stream)
		for _, r := range []io.Reader{bytes.NewReader(stream), iotest.HalfReader(bytes.NewReader(stream))} {
			got, err := readAll(r, cap)
			for _, ev := range got {
				if int64(len(ev.Data)) > cap {
					t.Fatalf("event data of %d bytes over the cap %d", len(ev.Data), cap)
				}
			}
			switch {
			case errors.Is(err, io.EOF):
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("events differ from the reference (-want +got):\n%s", diff)
				}
			case errors.Is(err, sse.ErrTooLarge):
				if len(got) > len(want) {
					t.Fatalf("got %d events before the cap, the reference has %d", len(got), len(want))
				}
				if diff := cmp.Diff(want[:len(got)], got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("events before the cap differ from the reference (-want +got):\n%s", diff)
				}
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}

		// Round trip through Write.
		in := sse.Event{ID: id, HasID: id != "", Type: typ, Data: data, Retry: time.Duration(retryMS) * time.Millisecond, HasRetry: hasRetry}
		var b bytes.Buffer
		if err := sse.Write(&b, in); err != nil {
			return // something a stream cannot carry
		}
		if !in.HasRetry {
			in.Retry = 0
		}
		written := b.String()
		got, err := readAll(&b, int64(len(data)+len(id)+len(typ))+1)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("reading back %q: %v", written, err)
		}
		if diff := cmp.Diff([]sse.Event{in}, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", written, diff)
		}
	})
}

// reference reads a whole stream by the standard's rules, without caps.
func reference(s []byte) []sse.Event {
	s = bytes.TrimPrefix(s, []byte("\xEF\xBB\xBF"))
	var lines [][]byte
	for len(s) > 0 {
		i := bytes.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated line is dropped
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	var (
		evs     []sse.Event
		ev      sse.Event
		data    []string
		hasData bool
	)
	for _, line := range lines {
		if len(line) == 0 {
			if hasData || ev.HasID || ev.HasRetry {
				ev.Data = []byte(joinLines(data))
				evs = append(evs, ev)
			}
			ev, data, hasData = sse.Event{}, nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "data":
			data, hasData = append(data, string(value)), true
		case "event":
			ev.Type = string(value)
		case "id":
			if !bytes.Contains(value, []byte{0}) {
				ev.ID, ev.HasID = string(value), true
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 63); err == nil && ms <= uint64(1<<63-1)/uint64(time.Millisecond) {
				ev.Retry, ev.HasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	return evs
}

func joinLines(ls []string) string {
	var b bytes.Buffer
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}
