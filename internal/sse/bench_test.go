package sse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// benchMax is the cap the upstream HTTP transport gives its readers: the
// default max_response_body (config.DefaultMaxResponseBody).
const benchMax = 64 << 20

// smallResponse is the data of a small tools/call response event.
const smallResponse = `{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hello from the server, a line of text"}],"isError":false}}`

// answerStream returns the body of a streamable-HTTP POST answer, as a
// 2025-11-25 server writes it: a priming event (an id, empty data), then
// the response event.
func answerStream(b *testing.B, data []byte) []byte {
	b.Helper()
	var buf bytes.Buffer
	if err := sse.Write(&buf, sse.Event{ID: "0_1", HasID: true}); err != nil {
		b.Fatal(err)
	}
	if err := sse.Write(&buf, sse.Event{ID: "0_2", HasID: true, Data: data}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// readAnswer reads a POST answer with a new Reader, as the upstream HTTP
// transport does per call (httpTransport.readEvents), and returns the
// response event's data.
func readAnswer(stream []byte) ([]byte, error) {
	r := sse.NewReader(bytes.NewReader(stream), benchMax)
	var last []byte
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return nil, err
		}
		last = ev.Data
	}
}

func benchReadAnswer(b *testing.B, data []byte) {
	stream := answerStream(b, data)
	got, err := readAnswer(stream)
	if err != nil || !bytes.Equal(got, data) {
		b.Fatalf("read %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readAnswer(stream); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReader_SmallEvents reads small events: per op, a whole POST
// answer (priming event and a small response) with a Reader of its own,
// as per call upstream; and events of one long stream through one Reader,
// as on a GET stream.
func BenchmarkReader_SmallEvents(b *testing.B) {
	b.Run("answer", func(b *testing.B) {
		benchReadAnswer(b, []byte(smallResponse))
	})
	b.Run("stream", func(b *testing.B) {
		var one bytes.Buffer
		sse.Write(&one, sse.Event{ID: "0_7", HasID: true, Data: []byte(smallResponse)})
		r := sse.NewReader(&eventLoop{block: one.Bytes()}, benchMax)
		ev, err := r.Next()
		if err != nil || string(ev.Data) != smallResponse {
			b.Fatalf("Next = %q, %v", ev.Data, err)
		}
		b.SetBytes(int64(one.Len()))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReader_Event64KiB reads a POST answer whose response carries a
// 64 KiB result, with a Reader of its own.
func BenchmarkReader_Event64KiB(b *testing.B) {
	benchReadAnswer(b, response64KiB(b))
}

// BenchmarkWrite_Event writes one event with an id, as the legacy edge
// frames every message it sends on a stream.
func BenchmarkWrite_Event(b *testing.B) {
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"small", []byte(smallResponse)},
		{"64KiB", response64KiB(b)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ev := sse.Event{ID: "3_2", HasID: true, Data: bc.data}
			var w bytes.Buffer
			if err := sse.Write(&w, ev); err != nil || !strings.HasPrefix(w.String(), "id: 3_2\ndata: {") {
				b.Fatalf("Write = %q, %v", w.String()[:min(w.Len(), 40)], err)
			}
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				if err := sse.Write(&w, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// response64KiB is the data of a response event whose result holds 64 KiB
// of file-like text (escaped newlines and quotes, on one line).
func response64KiB(b *testing.B) []byte {
	b.Helper()
	var text strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, err := json.Marshal(text.String())
	if err != nil {
		b.Fatal(err)
	}
	return []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":` + string(t) + `}],"isError":false}}`)
}

// eventLoop is an endless stream that repeats block.
type eventLoop struct {
	block []byte
	off   int
}

func (l *eventLoop) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.block[l.off:])
		n += c
		l.off = (l.off + c) % len(l.block)
	}
	return n, nil
}
