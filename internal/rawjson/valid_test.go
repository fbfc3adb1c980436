package rawjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// nest returns n levels of open, then inner, then n levels of close.
func nest(n int, open, inner, close string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// validCases are the inputs of TestValid and the seeds of FuzzValid. want
// is what encoding/json.Valid returns, which TestValid checks too.
var validCases = []struct {
	name string
	in   string
	want bool
}{
	// Literals and whitespace.
	{"null", `null`, true},
	{"true", `true`, true},
	{"false", `false`, true},
	{"surrounding whitespace", " \t\n\r null \t\n\r", true},
	{"empty", ``, false},
	{"only whitespace", " \t\n\r", false},
	{"short null", `nul`, false},
	{"short true", `tru`, false},
	{"short false", `fals`, false},
	{"long null", `nulll`, false},
	{"true then letter", `truex`, false},
	{"capital True", `True`, false},
	{"NaN", `NaN`, false},
	{"Infinity", `Infinity`, false},
	{"vertical tab", "\v1", false},
	{"form feed", "1\f", false},
	{"NUL after value", "1\x00", false},
	{"byte order mark", "\xef\xbb\xbf1", false},
	{"non-breaking space", "\u00a01", false},
	{"two values", `1 2`, false},
	{"two objects", `{}{}`, false},
	{"comment", `/*c*/1`, false},

	// Numbers.
	{"zero", `0`, true},
	{"minus zero", `-0`, true},
	{"integer", `1234567890`, true},
	{"negative", `-12`, true},
	{"fraction", `3.14159`, true},
	{"zero fraction", `0.0`, true},
	{"exponent", `1e10`, true},
	{"capital exponent", `1E10`, true},
	{"plus exponent", `1e+10`, true},
	{"minus exponent", `-1.5e-10`, true},
	{"zero exponent", `0e0`, true},
	{"huge", `1e999999999999`, true},
	{"long", `123456789012345678901234567890.123456789012345678901234567890`, true},
	{"leading zero", `01`, false},
	{"minus leading zero", `-01`, false},
	{"zero zero", `00`, false},
	{"minus alone", `-`, false},
	{"minus letter", `-a`, false},
	{"minus space", `- 1`, false},
	{"plus", `+1`, false},
	{"leading dot", `.5`, false},
	{"trailing dot", `1.`, false},
	{"dot exponent", `1.e2`, false},
	{"two dots", `1.2.3`, false},
	{"bare exponent", `1e`, false},
	{"exponent sign only", `1e+`, false},
	{"exponent two signs", `1e+-1`, false},
	{"exponent fraction", `1e1.5`, false},
	{"hex", `0x10`, false},
	{"number then letter", `1a`, false},

	// Strings.
	{"empty string", `""`, true},
	{"string", `"hello, world"`, true},
	{"all short escapes", `"\"\\\/\b\f\n\r\t"`, true},
	{"unicode escape", `"\u00e9\uABCD\uabcd\u0000"`, true},
	{"surrogate pair", `"\uD834\uDD1E"`, true},
	{"lone surrogate", `"\uD834"`, true},
	{"UTF-8", `"héllo, 世界 🎉"`, true},
	{"invalid UTF-8", "\"\xff\xfe\xc0\x80\xed\xa0\x80\"", true},
	{"DEL", "\"\x7f\"", true},
	{"space", `" "`, true},
	{"bracket bytes", `"{[,:]}"`, true},
	{"unclosed", `"abc`, false},
	{"quote only", `"`, false},
	{"escaped close", `"\"`, false},
	{"trailing backslash", `"abc\`, false},
	{"unknown escape", `"\x41"`, false},
	{"escaped apostrophe", `"\'"`, false},
	{"capital U", `"\U0041"`, false},
	{"short unicode", `"\u12"`, false},
	{"short unicode at end", `"\u12`, false},
	{"non-hex unicode", `"\u12G4"`, false},
	{"raw NUL", "\"\x00\"", false},
	{"raw tab", "\"a\tb\"", false},
	{"raw newline", "\"a\nb\"", false},
	{"raw 0x1f", "\"\x1f\"", false},
	{"single quotes", `'a'`, false},
	{"string then value", `"a"1`, false},

	// Arrays and objects.
	{"empty array", `[]`, true},
	{"empty object", `{}`, true},
	{"spaced empty array", "[ \n]", true},
	{"spaced empty object", "{ \n}", true},
	{"array", `[1,"a",true,false,null,{},[]]`, true},
	{"object", `{"a":1,"b":"x","c":[true,{"d":null}]}`, true},
	{"spaced object", " { \"a\" : [ 1 , 2 ] , \"b\" : { } } ", true},
	{"duplicate keys", `{"a":1,"a":2}`, true},
	{"empty key", `{"":0}`, true},
	{"escaped key", `{"\"}":"{\""}`, true},
	{"nested empties", `[[[]],{"a":{}},[{}]]`, true},
	{"unclosed array", `[1,2`, false},
	{"unclosed object", `{"a":1`, false},
	{"open bracket", `[`, false},
	{"open brace", `{`, false},
	{"close bracket", `]`, false},
	{"close brace", `}`, false},
	{"trailing comma in array", `[1,]`, false},
	{"leading comma in array", `[,1]`, false},
	{"double comma", `[1,,2]`, false},
	{"missing comma", `[1 2]`, false},
	{"trailing comma in object", `{"a":1,}`, false},
	{"comma only object", `{,}`, false},
	{"key only", `{"a"}`, false},
	{"key colon", `{"a":}`, false},
	{"missing colon", `{"a" 1}`, false},
	{"bare key", `{a:1}`, false},
	{"number key", `{1:1}`, false},
	{"single-quoted key", `{'a':1}`, false},
	{"unclosed key", `{"a:1}`, false},
	{"array closed by brace", `[1}`, false},
	{"object closed by bracket", `{"a":1]`, false},
	{"extra close", `[1]]`, false},
	{"extra brace", `{}}`, false},
	{"array then letter", `[1]x`, false},
	{"colon in array", `[1:2]`, false},

	// Depth: encoding/json fails on the bracket that opens level 10001.
	{"arrays 10000 deep", nest(10000, "[", "", "]"), true},
	{"arrays 10001 deep", nest(10001, "[", "", "]"), false},
	{"objects 10000 deep", nest(9999, `{"a":`, "{}", "}"), true},
	{"objects 10001 deep", nest(10000, `{"a":`, "{}", "}"), false},
	{"mixed 10000 deep", nest(5000, `[{"":`, "0", "}]"), true},
	{"mixed 10001 deep", nest(5000, `[{"":`, "[]", "}]"), false},
	{"mixed 9999 deep", nest(4999, `[{"":`, "[]", "}]"), true},
	{"mixed 10000 deep with value", nest(5000, `{"":[`, "1", "]}"), true},
	{"mixed 10002 deep", nest(5001, `{"":[`, "", "]}"), false},
	{"unclosed 10001 deep", strings.Repeat("[", 10001), false},
	{"object in array at 10001", nest(10000, "[", "{}", "]"), false},
	{"array in object at 10001", nest(10000, `{"a":`, "[]", "}"), false},
	{"scalars 10000 deep", nest(9999, "[0,", "[true]", "]"), true},
	{"wrong close at depth 130", nest(65, `[{"a":`, "1", "]}"), false},
	{"alternating 200 deep", nest(100, `[{"a":`, "1", "}]"), true},
}

func TestValid(t *testing.T) {
	for _, tt := range validCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := json.Valid([]byte(tt.in)); got != tt.want {
				t.Fatalf("json.Valid = %v, want %v: the case is wrong", got, tt.want)
			}
			if got := Valid([]byte(tt.in)); got != tt.want {
				t.Errorf("Valid = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestValid_StringBoundaries puts each byte that ends a run of plain string
// bytes at every offset of a long string, so that it falls in every lane of
// the eight-byte fast path and in the bytewise tail.
func TestValid_StringBoundaries(t *testing.T) {
	specials := []string{`"`, `\`, `\"`, `\\`, `\n`, `\u00e9`, `\u00`, `\q`, "\x00", "\x1f", "\t", "\x20", "\x7f", "\x80", "\xff"}
	for _, s := range specials {
		for n := range 40 {
			for _, tail := range []int{0, 1, 7, 8, 9, 20} {
				in := []byte(`["` + strings.Repeat("x", n) + s + strings.Repeat("é", tail) + `"]`)
				if got, want := Valid(in), json.Valid(in); got != want {
					t.Errorf("Valid(%q) = %v, json.Valid = %v", in, got, want)
				}
			}
		}
	}
}

// TestValid_LongRuns checks strings whose plain runs outgrow the eight-byte
// path (shortRun), with each byte that ends a run placed around that limit
// and deep in long runs, and with several long runs in one string, so that
// the quote and backslash longRuns keeps are reused and looked for again.
func TestValid_LongRuns(t *testing.T) {
	specials := []string{`"`, `\`, `\"`, `\\`, `\n`, `\u00e9`, `\u00`, `\q`, "\x00", "\x1f", "\t", "\x7f", "\xff"}
	runs := []int{shortRun - 9, shortRun - 1, shortRun, shortRun + 1, shortRun + 7, shortRun + 8, shortRun + 31, shortRun + 32, shortRun + 33, 300, 1000}
	for _, s := range specials {
		for _, n := range runs {
			for _, second := range []int{0, 5, shortRun + 3, 500} {
				for _, close := range []string{`"]`, `"`, ``, `\"]`, `\"x"]`} {
					in := []byte(`["` + strings.Repeat("x", n) + s + strings.Repeat("y", second) + `\"` + strings.Repeat("z", n) + close)
					if got, want := Valid(in), json.Valid(in); got != want {
						t.Errorf("Valid(%q) = %v, json.Valid = %v", in, got, want)
					}
				}
			}
		}
	}
	// Many long strings in one document, some with escapes between long runs.
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strings.Repeat("é", i) + `\"` + strings.Repeat("x", 2*i) + `\n` + strings.Repeat("y", 3*i) + `"`)
	}
	b.WriteString(`],"b":"` + strings.Repeat("q", 70) + `"}`)
	in := []byte(b.String())
	if !Valid(in) || !json.Valid(in) {
		t.Errorf("Valid = %v, json.Valid = %v, for many long strings; want true", Valid(in), json.Valid(in))
	}
	in[len(in)-5] = '\x01' // a control character in the last long run
	if Valid(in) || json.Valid(in) {
		t.Errorf("Valid = %v, json.Valid = %v, with a control character in the last run; want false", Valid(in), json.Valid(in))
	}
}

func TestIndexControl(t *testing.T) {
	for n := range 80 {
		plain := []byte(strings.Repeat("a\x7f\x80 ~", 20))[:n]
		if got := indexControl(plain); got != -1 {
			t.Errorf("indexControl(%q) = %d, want -1", plain, got)
		}
		for at := range n {
			for _, c := range []byte{0x00, 0x01, 0x1f} {
				b := append([]byte(nil), plain...)
				b[at] = c
				if at+1 < n {
					b[at+1] = 0x00 // a later one must not be found first
				}
				if got := indexControl(b); got != at {
					t.Errorf("indexControl(%q) = %d, want %d", b, got, at)
				}
			}
		}
	}
}

func TestValid_NoAllocs(t *testing.T) {
	for _, in := range [][]byte{
		validBenchText(),
		[]byte(nest(10000, "[", "", "]")),
		[]byte(nest(10001, "[", "", "]")),
	} {
		if n := testing.AllocsPerRun(10, func() { Valid(in) }); n != 0 {
			t.Errorf("Valid(%d bytes) made %v allocations, want 0", len(in), n)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, tt := range validCases {
		if len(tt.in) < 1000 { // the deep cases would slow the fuzzer's mutations
			f.Add([]byte(tt.in))
		}
	}
	f.Add([]byte(validBenchCall))
	f.Add([]byte(nest(70, `[{"a":`, "1", "}]")))
	f.Add([]byte(`["` + strings.Repeat("x", 2*shortRun) + `\"` + strings.Repeat("y", shortRun+9) + `\n` + strings.Repeat("z", 3*shortRun) + `"]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat(`xxxxxxx\"\\\u00e9`, 8) + `"}]}}`))
	f.Add(jsonTextResult())
	f.Add([]byte(`["` + strings.Repeat(`{\"a\":\"b\"},`, 12) + strings.Repeat("x", 70) + `\u00e9\"` + "\x1f" + `"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := Valid(data), json.Valid(data)
		if got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
		checkValidMembers(t, data, want)
	})
}

// checkValidMembers holds ValidMembers to Valid's answer and, on valid
// JSON, to the members Members finds.
func checkValidMembers(t *testing.T, data []byte, valid bool) {
	t.Helper()
	var got [][2]string
	ok := ValidMembers(data, func(key, val []byte) {
		got = append(got, [2]string{string(key), string(val)})
	})
	if ok != valid {
		t.Fatalf("ValidMembers(%q) = %v, want %v", data, ok, valid)
	}
	if !valid {
		return
	}
	var want [][2]string
	if trimmed := bytes.TrimSpace(data); trimmed[0] == '{' {
		Members(trimmed, func(key, val []byte) bool {
			want = append(want, [2]string{string(key), string(val)})
			return true
		})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ValidMembers(%q) visited %q, Members finds %q", data, got, want)
	}
}

// TestValid_KeepsBuffersOnTheStack: Valid must not leak data, or every
// caller's buffer on the stack moves to the heap (the core checks the
// edits it builds in stack buffers).
func TestValid_KeepsBuffersOnTheStack(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		var buf [32]byte
		if !Valid(append(buf[:0], `{"a":[1,"x"],"b":{}}`...)) {
			t.Fatal("not valid")
		}
	})
	if allocs != 0 {
		t.Errorf("Valid on a stack buffer: %v allocations, want 0", allocs)
	}
}

func TestValidMembers(t *testing.T) {
	for _, in := range []string{
		`{}`,
		` { "a" : 1 , "b":[1,{"c":2}] ,"d":{},"e":[],"f":"x\"y","g":true,"h":null,"i":-1.5e3 } `,
		`{"a\u0062":{"b":{"c":[[]]}},"a\u0062":2}`,
		"{\n\"k\"\t:\r\"v\"\n}",
		`[{"a":1}]`,
		`"s"`,
		`12`,
		`{"content":[{"type":"text","text":"` + strings.Repeat(`{\"a\":\"b\"},`, 20) + `"}],"isError":false}`,
	} {
		checkValidMembers(t, []byte(in), true)
	}
	for _, in := range []string{`{"a":1,}`, `{"a":1`, `{"a" 1}`, `{"a":1}x`, `{"a":[1}`, `{"a":"\x"}`} {
		checkValidMembers(t, []byte(in), false)
	}
}

// validBenchCall is a tools/call request as a client sends it.
const validBenchCall = `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"mcp__files__read_file","arguments":{"path":"/srv/data/reports/2025/q3.txt","limit":200},"_meta":{"progressToken":"p-17"}}}`

// validBenchText returns a tools/call result with 64 KiB of text, mostly
// plain with an escape now and then, as a file read returns it.
func validBenchText() []byte {
	var text strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(strings.Repeat("x", 1000) + `\n\"quoted\" \\ caf\u00e9\t`)
	}
	return []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text.String() + `"}]}}`)
}

// validBenchBlob returns a resources/read result with 64 KiB of base64,
// one run of plain bytes.
func validBenchBlob() []byte {
	blob := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfa, 0xce, 0xb0, 0x0c, 0x42}, 48<<10/5))
	return []byte(`{"jsonrpc":"2.0","id":1,"result":{"contents":[{"uri":"file:///logo.png","mimeType":"image/png","blob":"` + blob + `"}]}}`)
}

// validBenchTools returns a tools/list result of 1000 tools with input
// schemas, as the gateway merges it from its upstreams.
func validBenchTools() []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":2,"result":{"tools":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"mcp__server%d__tool_%d","title":"Tool %d","description":"Reads a file from the \"server%d\" workspace and returns its text.",`+
			`"inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"Path of the file"},"limit":{"type":"integer","minimum":1,"maximum":10000,"default":200},"offset":{"type":"number","default":0.5e1},"recursive":{"type":"boolean","default":false},"tags":{"type":"array","items":{"type":"string"}}},"required":["path"],"additionalProperties":false},`+
			`"annotations":{"readOnlyHint":true,"openWorldHint":null}}`, i%10, i, i, i%10)
	}
	b.WriteString(`],"nextCursor":null}}`)
	return []byte(b.String())
}

func BenchmarkValid(b *testing.B) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"ToolsCall", []byte(validBenchCall)},
		{"Text64KiB", validBenchText()},
		{"ToolsList1000", validBenchTools()},
		{"Blob64KiB", validBenchBlob()},
		{"JSONText64KiB", jsonTextResult()},
	}
	impls := []struct {
		name  string
		valid func([]byte) bool
	}{
		{"rawjson", Valid},
		{"encoding_json", json.Valid},
	}
	for _, in := range inputs {
		if !json.Valid(in.data) {
			b.Fatalf("%s is not valid JSON", in.name)
		}
		for _, impl := range impls {
			b.Run(in.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					if !impl.valid(in.data) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}

// TestValid_Blocks checks strings that turn to blocks (escapes close
// together) against encoding/json, with every alignment of a later
// escape, a bad escape, a control character or the end to the 64-byte
// blocks.
func TestValid_Blocks(t *testing.T) {
	dense := strings.Repeat(`{\"id\":1,\"n\":\"a\"},`, 6)
	for k := 0; k < 140; k++ {
		for _, tail := range []string{
			`\"ok"`, `\\"`, `\\\"x"`, `\u00e9x"`, `\/"`,
			`\x"`, `\u12G4"`, `\u12"`, "\x01\"", "\t\"", `\`, `"`, ``,
		} {
			for _, fill := range []string{"x", `\n`, "é"} {
				in := []byte(`["` + dense + strings.Repeat(fill, k) + tail + `, 1]`)
				if got, want := Valid(in), json.Valid(in); got != want {
					t.Fatalf("k=%d fill=%q tail=%q: Valid = %v, json.Valid = %v", k, fill, tail, got, want)
				}
			}
		}
	}
}
