package rawjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchParams are the params of a tools/call as a client sends them: the
// exposed name, arguments and a _meta with a progress token and a trace
// context. These are the members the core reads and rewrites per call.
const benchParams = `{"name":"mcp__files__read_file","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200,"offset":0,"encoding":"utf-8"},"_meta":{"progressToken":"p-17","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`

// BenchmarkGet_Meta reads params._meta, as the core's Observe and the
// progress relay do for every call.
func BenchmarkGet_Meta(b *testing.B) {
	obj := []byte(benchParams)
	v, ok, err := Get(obj, "_meta")
	if err != nil || !ok || !strings.HasPrefix(string(v), `{"progressToken"`) {
		b.Fatalf("Get = %s, %v, %v", v, ok, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := Get(obj, "_meta"); !ok {
			b.Fatal("no _meta")
		}
	}
}

// BenchmarkString_Name reads the tool's exposed name (gateway paramName).
func BenchmarkString_Name(b *testing.B) {
	obj := []byte(benchParams)
	if s, ok := String(obj, "name"); !ok || s != "mcp__files__read_file" {
		b.Fatalf("String = %q, %v", s, ok)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := String(obj, "name"); !ok {
			b.Fatal("no name")
		}
	}
}

// BenchmarkSet_Name puts the server's own name for the tool into the
// params (gateway setString before forwarding).
func BenchmarkSet_Name(b *testing.B) {
	obj := []byte(benchParams)
	val := json.RawMessage(`"read_file"`)
	out, err := Set(obj, "name", val)
	if err != nil || !strings.HasPrefix(string(out), `{"name":"read_file","arguments"`) {
		b.Fatalf("Set = %s, %v", out, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Set(obj, "name", val); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSet_MetaProgressToken replaces params._meta.progressToken with
// the gateway's own token: Get _meta, Get its token, Set the token in
// _meta, Set _meta in params, the edit gateway relay.withProgress makes.
func BenchmarkSet_MetaProgressToken(b *testing.B) {
	obj := []byte(benchParams)
	ours := json.RawMessage(`"mcpgw-p-123456"`)
	edit := func() ([]byte, error) {
		meta, _, err := Get(obj, "_meta")
		if err != nil {
			return nil, err
		}
		if _, _, err := Get(meta, "progressToken"); err != nil {
			return nil, err
		}
		meta2, err := Set(meta, "progressToken", ours)
		if err != nil {
			return nil, err
		}
		return Set(obj, "_meta", meta2)
	}
	out, err := edit()
	if err != nil || !strings.Contains(string(out), `"_meta":{"progressToken":"mcpgw-p-123456","traceparent"`) {
		b.Fatalf("edit = %s, %v", out, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := edit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMapArray_Content64KiB maps over the content blocks of a
// tools/call result with 64 KiB of text and changes nothing, as the core's
// URI exposure does for every result without resource links.
func BenchmarkMapArray_Content64KiB(b *testing.B) {
	var text strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(`line "` + strings.Repeat("x", 60) + `" of the report` + "\n")
	}
	t, _ := json.Marshal(text.String())
	obj := []byte(`{"content":[{"type":"text","text":"summary"},{"type":"text","text":` + string(t) + `}],"isError":false}`)
	fn := func(el json.RawMessage) json.RawMessage {
		if typ, _ := String(el, "type"); typ == "resource_link" {
			return json.RawMessage(`{}`)
		}
		return el
	}
	out, err := MapArray(obj, "content", fn)
	if err != nil || len(out) != len(obj) {
		b.Fatalf("MapArray = %d bytes, %v", len(out), err)
	}
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MapArray(obj, "content", fn); err != nil {
			b.Fatal(err)
		}
	}
}

// jsonTextResult is a tools/call result whose text block is a 64 KiB
// JSON document, as many servers answer: in the JSON-RPC message every
// quote of the document is escaped, one every few bytes.
func jsonTextResult() []byte {
	var doc strings.Builder
	doc.WriteString("[")
	for i := 0; doc.Len() < 64<<10; i++ {
		fmt.Fprintf(&doc, `{"id":%d,"name":"item %d","tags":["a","b"],"ok":true},`, i, i)
	}
	doc.WriteString("{}]")
	t, _ := json.Marshal(doc.String())
	return []byte(`{"content":[{"type":"text","text":` + string(t) + `}],"isError":false}`)
}

// BenchmarkGet_IsErrorJSONText64KiB reads isError past such a block, as
// the upstream's metrics and the core's outcome each do per call.
func BenchmarkGet_IsErrorJSONText64KiB(b *testing.B) {
	obj := jsonTextResult()
	if v, ok, err := Get(obj, "isError"); err != nil || !ok || string(v) != "false" {
		b.Fatalf("Get = %s, %v, %v", v, ok, err)
	}
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	for b.Loop() {
		Get(obj, "isError")
	}
}

// BenchmarkGet_IsErrorPlainText64KiB reads isError past a block of 64 KiB
// of plain text (no escapes: one long run).
func BenchmarkGet_IsErrorPlainText64KiB(b *testing.B) {
	obj := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 64<<10) + `"}],"isError":false}`)
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	for b.Loop() {
		Get(obj, "isError")
	}
}
