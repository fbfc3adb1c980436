package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchCall is a tools/call of a realistic size (about 200 bytes) as a
// client sends it: a tool name, a few arguments and a progress token.
const benchCall = `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"mcp__files__read_file","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200,"offset":0},"_meta":{"progressToken":"p-17"}}}`

// benchResult64KiB returns a tools/call result whose one text block holds
// 64 KiB of file-like text, with the newlines and quotes a file has, so
// that the JSON string carries escapes.
func benchResult64KiB(b *testing.B) json.RawMessage {
	b.Helper()
	var text strings.Builder
	for i := 0; text.Len() < 64<<10; i++ {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, err := json.Marshal(text.String())
	if err != nil {
		b.Fatal(err)
	}
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(t) + `}],"isError":false}`)
}

// BenchmarkParse_ToolsCall parses one client request, as the legacy edge
// does for every POST.
func BenchmarkParse_ToolsCall(b *testing.B) {
	data := []byte(benchCall)
	m, err := ParseOne(data)
	if err != nil || m.Method != "tools/call" || m.ID.String() != "17" {
		b.Fatalf("ParseOne = %+v, %v", m, err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseOne(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse_Response64KiB parses one server response with a 64 KiB
// result, as the upstream transports do for every answer (a stdio line,
// an SSE event's data, a JSON body).
func BenchmarkParse_Response64KiB(b *testing.B) {
	data, err := Encode(NewResult(IntID(42), benchResult64KiB(b)))
	if err != nil {
		b.Fatal(err)
	}
	msgs, batch, err := Parse(data)
	if err != nil || batch || len(msgs) != 1 || !msgs[0].IsResponse() || len(msgs[0].Result) < 64<<10 {
		b.Fatalf("Parse = %d messages, batch %v, %v", len(msgs), batch, err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseOwnedStrict_ToolsCall4MiB parses a 4 MiB tools/call as the
// legacy edge does a client's POST (the UTF-8 check included), with text
// arguments of ASCII and of text with multi-byte characters on every
// line.
func BenchmarkParseOwnedStrict_ToolsCall4MiB(b *testing.B) {
	for _, tc := range []struct{ name, line string }{
		{"ascii", "The quick brown fox jumps over the lazy dog, 0123456789 and some more text.\n"},
		{"multibyte", "Größere Füchse springen über faule Hunde: 日本語のテキスト, ünïcödé.\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			text, _ := json.Marshal(strings.Repeat(tc.line, (4<<20)/len(tc.line)))
			data := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__fs__write","arguments":{"text":` + string(text) + `}}}`)
			buf := make([]byte, len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, data)
				if _, _, err := ParseOwnedStrict(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode_ToolsCall encodes the request the upstream client sends
// for a call (under its own id), as the stdio and HTTP transports do.
func BenchmarkEncode_ToolsCall(b *testing.B) {
	in, err := ParseOne([]byte(benchCall))
	if err != nil {
		b.Fatal(err)
	}
	m := NewRequest(IntID(42), in.Method, in.Params)
	out, err := Encode(m)
	if err != nil || !strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":42,"method":"tools/call"`) {
		b.Fatalf("Encode = %s, %v", out, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode_Response64KiB encodes a response with a 64 KiB result:
// MarshalJSON, then json.Compact over the whole message.
func BenchmarkEncode_Response64KiB(b *testing.B) {
	m := NewResult(IntID(42), benchResult64KiB(b))
	out, err := Encode(m)
	if err != nil || len(out) < 64<<10 {
		b.Fatalf("Encode = %d bytes, %v", len(out), err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalJSON_Response64KiB is Encode without the compaction, to
// tell the two costs apart.
func BenchmarkMarshalJSON_Response64KiB(b *testing.B) {
	m := NewResult(IntID(42), benchResult64KiB(b))
	out, err := m.MarshalJSON()
	if err != nil || len(out) < 64<<10 {
		b.Fatalf("MarshalJSON = %d bytes, %v", len(out), err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
