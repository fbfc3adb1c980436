package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr error // after the lines
	}{
		{name: "lf and crlf", in: "a\nb\r\n\nc\n", want: []string{"a", "b", "", "c"}, wantErr: io.EOF},
		{name: "lines longer than the buffer", in: long + "\n" + long + "y\r\n", want: []string{long, long + "y"}, wantErr: io.EOF},
		{name: "last line without LF dropped", in: "a\nb", want: []string{"a"}, wantErr: io.EOF},
		{name: "lone CR is not a line end", in: "a\rb\n", want: []string{"a\rb"}, wantErr: io.EOF},
		{name: "line over the max", in: "ok\n" + long + long + "\n", max: 150, want: []string{"ok"}, wantErr: errTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				lr := newLineReader(r, 16, max)
				var got []string
				var err error
				for {
					var line []byte
					if line, err = lr.next(); err != nil {
						break
					}
					got = append(got, string(line))
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
			}
		})
	}
}

func TestReadSSEResponse(t *testing.T) {
	const resp = `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`
	tests := []struct {
		name         string
		in           string
		want         string // the data returned
		wantRequests int
		wantErr      error
	}{
		{name: "one event", in: "data: " + resp + "\n\n", want: resp},
		{name: "priming event first", in: "id: 0\ndata:\n\n" + "id: 1\ndata: " + resp + "\n\n", want: resp},
		{name: "notifications first", in: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"x\"}}\n\n" + "data: " + resp + "\n\n", want: resp},
		{name: "multi-line data", in: "data: {\"jsonrpc\":\"2.0\",\ndata:  \"id\":3,\ndata:\"result\":{}}\n\n", want: "{\"jsonrpc\":\"2.0\",\n \"id\":3,\n\"result\":{}}"},
		{name: "crlf", in: "id: 7\r\ndata:\r\n\r\n: a comment\r\nretry: 100\r\ndata: " + resp + "\r\n\r\n", want: resp},
		{name: "another id first", in: "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n" + "data: " + resp + "\n\n", want: resp},
		{name: "server request skipped and counted", in: "data: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}\n\n" + "data: " + resp + "\n\n", want: resp, wantRequests: 1},
		{name: "data without space", in: "data:" + resp + "\n\n", want: resp},
		{name: "a field named like data", in: "database: x\ndata: " + resp + "\n\n", want: resp},
		{name: "the rest is not read", in: "data: " + resp + "\n\ndata: {broken\n\n", want: resp},
		{name: "stream ends first", in: "id: 0\ndata:\n\n", wantErr: errNoResponse},
		{name: "event not ended", in: "data: " + resp + "\n", wantErr: errNoResponse},
		{name: "malformed event", in: "data: {\"id\":3,\n\n", wantErr: errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.HalfReader(strings.NewReader(tt.in))} {
				var requests int
				data, env, err := readSSEResponse(newLineReader(r, 16, maxMessage), 3, []byte("stale"), &requests)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("error = %v, want %v", err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != tt.want {
					t.Errorf("data = %q, want %q", data, tt.want)
				}
				if string(env.id) != "3" || env.result == nil {
					t.Errorf("envelope id %q result %q, want the response to 3", env.id, env.result)
				}
				if requests != tt.wantRequests {
					t.Errorf("server requests = %d, want %d", requests, tt.wantRequests)
				}
			}
		})
	}
}
