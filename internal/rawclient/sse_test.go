package rawclient

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEventReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []event
		wantErr error // after the events; io.EOF if nil
	}{
		{name: "one message", in: "data: {}\n\n", want: []event{{data: []byte("{}")}}},
		{name: "crlf and multi-line data", in: "data: a\r\ndata:b\r\n\r\n", want: []event{{data: []byte("a\nb")}}},
		{name: "priming event", in: "id: 1\ndata:\n\n", want: []event{{id: "1", hasID: true, data: []byte{}}}},
		{name: "retry and type", in: "event: ping\nretry: 250\ndata: x\n\n",
			want: []event{{typ: "ping", data: []byte("x"), retry: 250 * time.Millisecond, hasRetry: true}}},
		{name: "bad retry ignored", in: "retry: +5\nretry: 1e3\ndata: x\n\n", want: []event{{data: []byte("x")}}},
		{name: "comments and blank blocks skipped", in: ": hi\n\n\nevent: lone\n\ndata: x\n\n", want: []event{{data: []byte("x")}}},
		{name: "id with NUL ignored", in: "id: a\x00b\ndata: x\n\n", want: []event{{data: []byte("x")}}},
		{name: "byte order mark", in: "\xEF\xBB\xBFdata: x\n\n", want: []event{{data: []byte("x")}}},
		{name: "unterminated event dropped", in: "data: x\n\ndata: y\n", want: []event{{data: []byte("x")}}},
		{name: "data at the cap", in: "data: 1234\ndata: 5\n\n", max: 6, want: []event{{data: []byte("1234\n5")}}},
		{name: "data over the cap", in: "data: 1234\ndata: 56\n\n", max: 6, wantErr: errTooLarge},
		{name: "line over the cap", in: "data: " + strings.Repeat("x", 200) + "\n\n", max: 6, wantErr: errTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 10
			}
			r := newEventReader(strings.NewReader(tt.in), max)
			var got []event
			var err error
			for {
				var ev event
				if ev, err = r.next(); err != nil {
					break
				}
				got = append(got, ev)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			wantErr := tt.wantErr
			if wantErr == nil {
				wantErr = io.EOF
			}
			if !errors.Is(err, wantErr) {
				t.Errorf("final error = %v, want %v", err, wantErr)
			}
		})
	}
}

func FuzzEventReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "id: 1\nretry: 10\ndata:\n\n", ": c\r\ndata: a\r\ndata: b\r\n\r\n", "\xEF\xBB\xBFdata"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		const max = 64
		r := newEventReader(strings.NewReader(in), max)
		for {
			ev, err := r.next()
			if err != nil {
				return
			}
			if len(ev.data) > max {
				t.Fatalf("event data of %d bytes, over the cap %d", len(ev.data), max)
			}
		}
	})
}
