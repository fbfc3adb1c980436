package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEnvelope(t *testing.T) {
	type spans struct{ ID, Method, Result, Err string }
	tests := []struct {
		name    string
		in      string
		want    spans
		wantErr bool
	}{
		{name: "result", in: `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, want: spans{ID: "7", Result: `{"content":[]}`}},
		{name: "error", in: `{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no"}}`, want: spans{ID: `"a"`, Err: `{"code":-32601,"message":"no"}`}},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":[1,2]}}`, want: spans{Method: `"notifications/progress"`}},
		{name: "request", in: `{"method":"ping","id":3,"jsonrpc":"2.0"}`, want: spans{ID: "3", Method: `"ping"`}},
		{name: "whitespace", in: " {\n \"id\" : 1 ,\t\"result\" :\r\n {\"a\" : [ ] } }\n", want: spans{ID: "1", Result: `{"a" : [ ] }`}},
		{name: "strings with brackets and escapes", in: `{"result":{"text":"}]\"{[\\","n":null},"id":2}`,
			want: spans{ID: "2", Result: `{"text":"}]\"{[\\","n":null}`}},
		{name: "nested arrays", in: `{"id":1,"result":[[{"a":[]}],true,false,-1.5e3]}`, want: spans{ID: "1", Result: `[[{"a":[]}],true,false,-1.5e3]`}},
		{name: "repeated key: the last wins", in: `{"id":1,"id":2,"result":null}`, want: spans{ID: "2", Result: "null"}},
		{name: "empty object", in: `{}`},
		{name: "escaped key not recognised", in: `{"i\u0064":1}`},

		{name: "empty", in: ``, wantErr: true},
		{name: "array", in: `[{"id":1}]`, wantErr: true},
		{name: "unterminated string", in: `{"id":"1}`, wantErr: true},
		{name: "missing colon", in: `{"id" 1}`, wantErr: true},
		{name: "missing value", in: `{"id":}`, wantErr: true},
		{name: "unclosed object", in: `{"id":1,"result":{"a":1}`, wantErr: true},
		{name: "mismatched brackets", in: `{"result":[}],"id":1}`, wantErr: true},
		{name: "trailing garbage", in: `{"id":1} x`, wantErr: true},
		{name: "escaped closing quote", in: `{"id":"a\"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := parseEnvelope([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseEnvelope(%q) succeeded, want an error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := spans{string(env.id), string(env.method), string(env.result), string(env.err)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseEnvelope checks the in-place JSON walkers against
// encoding/json: they never panic; on a valid JSON object whose keys have
// no escapes parseEnvelope finds exactly the members encoding/json finds,
// and on a valid array eachElement finds its elements.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\"b"}]}}`,
		`{"jsonrpc":"2.0","method":"m","params":[1,{"a":"}"}]}`,
		`{"id":"x","error":{"code":1,"message":"\\"}}`, `{}`, ` { "id" : 1 } `, `[]`, `{"a":`,
		`[1, "a", {"b":[]}, [null]]`, `{"tools":[{},{}]}`, `{"content":[{"type":"text","text":"x"}],"isError":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []checker{{method: "tools/call", expect: []byte("x"), textLen: 1}, {method: "tools/list"}} {
			c.checkResult(b) // must not panic
		}
		var elems []string
		errElems := eachElement(b, func(v []byte) { elems = append(elems, string(v)) })
		var refElems []json.RawMessage
		if json.Unmarshal(b, &refElems) == nil && refElems != nil {
			if errElems != nil || len(elems) != len(refElems) {
				t.Fatalf("eachElement(%q) = %q, %v; encoding/json finds %d elements", b, elems, errElems, len(refElems))
			}
			for i := range elems {
				if elems[i] != string(refElems[i]) {
					t.Fatalf("eachElement(%q) element %d = %q, want %q", b, i, elems[i], refElems[i])
				}
			}
		}

		env, err := parseEnvelope(b)
		var ref map[string]json.RawMessage
		if bytes.IndexByte(b, '\\') >= 0 || json.Unmarshal(b, &ref) != nil || ref == nil {
			return // escapes, invalid JSON, or not an object
		}
		if err != nil {
			t.Fatalf("parseEnvelope(%q) = %v on a valid object", b, err)
		}
		for key, got := range map[string][]byte{"id": env.id, "method": env.method, "result": env.result, "error": env.err} {
			want, ok := ref[key]
			if ok != (got != nil) || string(want) != string(got) {
				t.Fatalf("parseEnvelope(%q).%s = %q, encoding/json says %q", b, key, got, want)
			}
		}
	})
}

func TestParseEnvelope_NoAllocs(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 4096) + `"}]}}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := parseEnvelope(msg); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("parseEnvelope allocates %v times, want 0", allocs)
	}
}

func TestRequestTemplate(t *testing.T) {
	tmpl := newTemplate("tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`))
	buf := tmpl.build(nil, 41)
	want := `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	if string(buf) != want {
		t.Errorf("build = %s, want %s", buf, want)
	}
	if !json.Valid(buf) {
		t.Error("not valid JSON")
	}
	allocs := testing.AllocsPerRun(100, func() { buf = tmpl.build(buf[:0], 1<<40) })
	if allocs != 0 {
		t.Errorf("build into a reused buffer allocates %v times, want 0", allocs)
	}
}

func TestResponseResult(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // the result, or a substring of the error
		wantErr bool
	}{
		{name: "result", in: `{"jsonrpc":"2.0","id":5,"result":{"a":1}}`, want: `{"a":1}`},
		{name: "JSON-RPC error", in: `{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad params"}}`, want: "JSON-RPC error -32602: bad params", wantErr: true},
		{name: "other id", in: `{"jsonrpc":"2.0","id":6,"result":{}}`, want: "response id 6, want 5", wantErr: true},
		{name: "string id", in: `{"jsonrpc":"2.0","id":"5","result":{}}`, want: "want 5", wantErr: true},
		{name: "no result", in: `{"jsonrpc":"2.0","id":5}`, want: "without a result", wantErr: true},
		{name: "null result", in: `{"jsonrpc":"2.0","id":5,"result":null}`, want: "without a result", wantErr: true},
		{name: "a request", in: `{"jsonrpc":"2.0","id":5,"method":"ping"}`, want: "request or notification", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := parseEnvelope([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := responseResult(env, 5)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v, want one containing %q", err, tt.want)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("responseResult = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestCheckResult(t *testing.T) {
	call := checker{method: "tools/call", expect: []byte("hello")}
	tests := []struct {
		name      string
		chk       checker
		result    string
		wantTools int
		wantErr   string // a substring; empty for success
	}{
		{name: "echo", chk: call, result: `{"content":[{"type":"text","text":"hello"}]}`},
		{name: "tool error", chk: call, result: `{"content":[{"type":"text","text":"hello, it broke"}],"isError":true}`, wantErr: "isError"},
		{name: "not the text", chk: call, result: `{"content":[{"type":"text","text":"bye"}]}`, wantErr: "does not contain"},
		{name: "escaped text", chk: checker{method: "tools/call", expect: []byte("a<b")},
			result: `{"content":[{"type":"text","text":"a\u003cb"}]}`},
		{name: "no expectation", chk: checker{method: "tools/call"}, result: `{"content":[]}`},
		{name: "payload length", chk: checker{method: "tools/call", textLen: 5}, result: `{"content":[{"type":"text","text":"xx"},{"type":"image","data":"AA=="},{"type":"text","text":"xxx"}]}`},
		{name: "payload short", chk: checker{method: "tools/call", textLen: 5}, result: `{"content":[{"type":"text","text":"xxxx"}]}`, wantErr: "4 bytes, want 5"},
		{name: "not JSON", chk: call, result: `{"content":`, wantErr: "malformed"},
		{name: "no content", chk: call, result: `{"structuredContent":{"text":"hello"}}`, wantErr: "no content array"},
		{name: "content not an array", chk: call, result: `{"content":{"text":"hello"}}`, wantErr: "malformed"},
		{name: "text block without text", chk: checker{method: "tools/call", textLen: 1}, result: `{"content":[{"type":"text"}]}`, wantErr: "without text"},
		{name: "escaped payload length", chk: checker{method: "tools/call", textLen: 4}, result: `{"content":[{"text":"a\n\u00e9","type":"text"}]}`},
		{name: "tool error with escaped text", chk: call, result: `{"isError":true,"content":[{"type":"text","text":"no \"x\""}]}`, wantErr: `isError): no "x"`},
		{name: "isError false", chk: call, result: `{"isError":false,"content":[{"type":"text","text":"hello"}]}`},
		{name: "tools", chk: checker{method: "tools/list"}, result: `{"tools":[{"name":"a","inputSchema":{}},{"name":"b"},{"name":"c"}],"nextCursor":"x"}`, wantTools: 3},
		{name: "no tools", chk: checker{method: "tools/list"}, result: `{}`, wantErr: "without tools"},
		{name: "empty tools", chk: checker{method: "tools/list"}, result: `{"tools":[]}`},
		{name: "tools not an array", chk: checker{method: "tools/list"}, result: `{"tools":{"a":1}}`, wantErr: "malformed"},
		{name: "tools cut short", chk: checker{method: "tools/list"}, result: `{"tools":[{"name":"a"},]}`, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.chk.checkResult([]byte(tt.result))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("checkResult error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantTools {
				t.Errorf("tools = %d, want %d", n, tt.wantTools)
			}
		})
	}
}
