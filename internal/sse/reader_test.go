package sse_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// readAll returns the events of stream and the error that ended it.
func readAll(r io.Reader, max int64) ([]sse.Event, error) {
	sr := sse.NewReader(r, max)
	var evs []sse.Event
	for {
		ev, err := sr.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func msg(data string) sse.Event { return sse.Event{Data: []byte(data)} }

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		max     int64 // 0 means 1 MiB
		want    []sse.Event
		wantErr error // nil means io.EOF
	}{
		{name: "empty", stream: ""},
		{name: "one event", stream: "data: hello\n\n", want: []sse.Event{msg("hello")}},
		{name: "no space after colon", stream: "data:hello\n\n", want: []sse.Event{msg("hello")}},
		{name: "only one space stripped", stream: "data:  two\n\n", want: []sse.Event{msg(" two")}},
		{name: "multi-line data", stream: "data: a\ndata: b\ndata\ndata: c\n\n", want: []sse.Event{msg("a\nb\n\nc")}},
		{name: "CRLF", stream: "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", want: []sse.Event{msg("a\nb"), msg("c")}},
		{name: "CR", stream: "data: a\rdata: b\r\rdata: c\r\r", want: []sse.Event{msg("a\nb"), msg("c")}},
		{name: "mixed line ends", stream: "data: a\r\ndata: b\rdata: c\n\r\n", want: []sse.Event{msg("a\nb\nc")}},
		{name: "LF CR is two line ends", stream: "data: a\n\rdata: b\n\n", want: []sse.Event{msg("a"), msg("b")}},
		{name: "comments ignored", stream: ": hi\ndata: a\n:\n\n: keep-alive\n\n", want: []sse.Event{msg("a")}},
		{name: "BOM at start", stream: "\xEF\xBB\xBFdata: a\n\n", want: []sse.Event{msg("a")}},
		{name: "second BOM is data", stream: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", want: []sse.Event{msg("b")}},
		{name: "event type", stream: "event: endpoint\ndata: /messages?s=1\n\n", want: []sse.Event{{Type: "endpoint", Data: []byte("/messages?s=1")}}},
		{name: "type does not leak to next event", stream: "event: x\ndata: 1\n\ndata: 2\n\n", want: []sse.Event{{Type: "x", Data: []byte("1")}, msg("2")}},
		{name: "lone event field dispatches nothing", stream: "event: x\n\ndata: 2\n\n", want: []sse.Event{msg("2")}},
		{name: "id", stream: "id: 7\ndata: a\n\n", want: []sse.Event{{ID: "7", HasID: true, Data: []byte("a")}}},
		{name: "priming event", stream: "id: 0_0\ndata: \n\n", want: []sse.Event{{ID: "0_0", HasID: true, Data: []byte{}}}},
		{name: "priming event without data", stream: "id: 0_0\n\n", want: []sse.Event{{ID: "0_0", HasID: true, Data: []byte{}}}},
		{name: "empty id resets", stream: "id\n\n", want: []sse.Event{{HasID: true, Data: []byte{}}}},
		{name: "id with NUL ignored", stream: "id: a\x00b\ndata: x\n\n", want: []sse.Event{msg("x")}},
		{name: "last id wins", stream: "id: 1\nid: 2\ndata: x\n\n", want: []sse.Event{{ID: "2", HasID: true, Data: []byte("x")}}},
		{name: "retry", stream: "retry: 50\n\n", want: []sse.Event{{Retry: 50 * time.Millisecond, HasRetry: true, Data: []byte{}}}},
		{name: "retry with data", stream: "retry: 1000\ndata: a\n\n", want: []sse.Event{{Retry: time.Second, HasRetry: true, Data: []byte("a")}}},
		{name: "bad retry ignored", stream: "retry: 5s\ndata: a\n\nretry: -1\ndata: b\n\nretry:\ndata: c\n\n", want: []sse.Event{msg("a"), msg("b"), msg("c")}},
		{name: "huge retry ignored", stream: "retry: 99999999999999999999\ndata: a\n\n", want: []sse.Event{msg("a")}},
		{name: "unknown fields ignored", stream: "foo: bar\nDATA: x\ndata: a\n\n", want: []sse.Event{msg("a")}},
		{name: "field without colon", stream: "data\n\n", want: []sse.Event{msg("")}},
		{name: "colon in value kept", stream: "data: {\"a\":1}\n\n", want: []sse.Event{msg(`{"a":1}`)}},
		{name: "unterminated event discarded", stream: "data: a\n\ndata: b\n", want: []sse.Event{msg("a")}},
		{name: "unterminated line discarded", stream: "data: a\n\ndata: b", want: []sse.Event{msg("a")}},
		{name: "data at the cap", stream: "data: 12345678\n\n", max: 8, want: []sse.Event{msg("12345678")}},
		{name: "data over the cap", stream: "data: 123456789\n\n", max: 8, wantErr: sse.ErrTooLarge},
		{name: "joined data over the cap", stream: "data: 1234\ndata: 5678\n\n", max: 8, wantErr: sse.ErrTooLarge},
		{name: "comment line over the cap", stream: ":" + strings.Repeat("x", 200) + "\n\n", max: 8, wantErr: sse.ErrTooLarge},
		{name: "unterminated line over the cap", stream: "data: " + strings.Repeat("x", 200), max: 8, wantErr: sse.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			wantErr := tt.wantErr
			if wantErr == nil {
				wantErr = io.EOF
			}
			// Byte by byte too, so that CRLF and the BOM straddle reads.
			for _, r := range []io.Reader{strings.NewReader(tt.stream), iotest.OneByteReader(strings.NewReader(tt.stream))} {
				got, err := readAll(r, max)
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if !errors.Is(err, wantErr) {
					t.Errorf("error = %v, want %v", err, wantErr)
				}
			}
		})
	}
}

// TestReader_PrimingDataIsNotNil pins that a dispatched event's Data is never
// nil, so callers can tell "no event" from "event without data".
func TestReader_PrimingDataIsNotNil(t *testing.T) {
	ev, err := sse.NewReader(strings.NewReader("id: 1\n\n"), 10).Next()
	if err != nil || ev.Data == nil {
		t.Fatalf("Next = %+v, %v; want an event with non-nil empty data", ev, err)
	}
}

// TestReader_ErrorIsSticky checks that Next keeps returning the error that
// ended the stream.
func TestReader_ErrorIsSticky(t *testing.T) {
	boom := errors.New("boom")
	r := sse.NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)), 10)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Fatalf("Next error = %v, want %v", err, boom)
		}
	}
}

// TestReader_DispatchesWithoutReadingAhead checks that an event is returned
// as soon as its blank line arrives, without waiting for more bytes (a
// server keeps the stream open after the priming event).
func TestReader_DispatchesWithoutReadingAhead(t *testing.T) {
	for _, stream := range []string{"id: 1\ndata:\n\n", "id: 1\r\r", "id: 1\r\n\r\n", "\xEF\xBB\xBFid: 1\n\n"} {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(stream))
			// Leave the pipe open until the reader is done.
		}()
		ev, err := sse.NewReader(pr, 100).Next()
		pr.Close()
		if err != nil || ev.ID != "1" {
			t.Errorf("stream %q: Next = %+v, %v", stream, ev, err)
		}
	}
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		ev   sse.Event
		want string
	}{
		{name: "data", ev: msg("a\nb"), want: "data: a\ndata: b\n\n"},
		{name: "empty", ev: sse.Event{}, want: "data: \n\n"},
		{name: "priming", ev: sse.Event{ID: "s1_0", HasID: true, Retry: 50 * time.Millisecond, HasRetry: true}, want: "id: s1_0\nretry: 50\ndata: \n\n"},
		{name: "type", ev: sse.Event{Type: "endpoint", Data: []byte("/m")}, want: "event: endpoint\ndata: /m\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := sse.Write(&b, tt.ev); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []sse.Event{
		{Data: []byte("a\rb")},
		{ID: "a\nb", HasID: true},
		{ID: "a\x00b", HasID: true},
		{Type: "a\r"},
		{Retry: -1, HasRetry: true},
	} {
		if err := sse.Write(io.Discard, bad); err == nil {
			t.Errorf("Write(%+v) = nil, want an error", bad)
		}
	}
}

// TestReader_Release checks that a released Reader's buffer serves a new
// Reader without touching the events the first one returned, and that the
// released Reader answers with an error rather than reading.
func TestReader_Release(t *testing.T) {
	const cap = 1 << 20 // large enough for a pooled buffer
	r1 := sse.NewReader(strings.NewReader("id: 1\ndata: first\n\ndata: rest\n\n"), cap)
	ev1, err := r1.Next()
	if err != nil || string(ev1.Data) != "first" {
		t.Fatalf("Next = %+v, %v", ev1, err)
	}
	r1.Release()
	if _, err := r1.Next(); err == nil {
		t.Fatal("Next after Release: no error")
	}
	for i := range 3 {
		r2 := sse.NewReader(strings.NewReader(strings.Repeat("data: x\n\n", 2)+"data: "+strings.Repeat("y", 40<<10)+"\n\n"), cap)
		for range 2 {
			if ev, err := r2.Next(); err != nil || string(ev.Data) != "x" {
				t.Fatalf("round %d: Next = %q, %v", i, ev.Data, err)
			}
		}
		if ev, err := r2.Next(); err != nil || len(ev.Data) != 40<<10 {
			t.Fatalf("round %d: long event: %d bytes, %v", i, len(ev.Data), err)
		}
		if _, err := r2.Next(); err != io.EOF {
			t.Fatalf("round %d: end = %v", i, err)
		}
		r2.Release()
		r2.Release() // twice is harmless
	}
	if string(ev1.Data) != "first" || ev1.ID != "1" {
		t.Fatalf("an event of the released Reader changed: %+v", ev1)
	}
}
