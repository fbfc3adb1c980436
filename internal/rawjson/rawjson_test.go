package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSet(t *testing.T) {
	tests := []struct {
		name, in, key, val, want string
	}{
		{"replace keeps bytes", `{"name":"a","inputSchema":{"$schema":"x", "b" : 1.50}}`, "name", `"mcp__s__a"`, `{"name":"mcp__s__a","inputSchema":{"$schema":"x", "b" : 1.50}}`},
		{"replace with spaces", `{ "z" : 1 , "name" : "a" }`, "name", `"b"`, `{ "z" : 1 , "name" : "b" }`},
		{"append", `{"a":1}`, "b", `[1]`, `{"a":1,"b":[1]}`},
		{"append empty", `{ }`, "b", `true`, `{"b":true}`},
		{"duplicates all replaced", `{"a":1,"a":2}`, "a", `3`, `{"a":3,"a":3}`},
		{"escaped key", `{"n\u0061me":"x"}`, "name", `"y"`, `{"n\u0061me":"y"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Set([]byte(tt.in), tt.key, json.RawMessage(tt.val))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Set = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name, in string
		keys     []string
		want     string
	}{
		{"middle", `{"a":1, "b":{"c":2}, "d":"x"}`, []string{"b"}, `{"a":1,"d":"x"}`},
		{"absent unchanged", `{ "a" : 1 }`, []string{"z"}, `{ "a" : 1 }`},
		{"all", `{"a":1,"b":2}`, []string{"a", "b"}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Delete([]byte(tt.in), tt.keys...)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Delete = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestGetAndErrors(t *testing.T) {
	raw, ok, err := Get([]byte(`{"a":{"x":[1,2]},"b":"s"}`), "a")
	if err != nil || !ok || string(raw) != `{"x":[1,2]}` {
		t.Fatalf("Get = %s %v %v", raw, ok, err)
	}
	if s, ok := String([]byte(`{"b":"s"}`), "b"); !ok || s != "s" {
		t.Fatalf("String = %q %v", s, ok)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":1} x`, `{"a":}`, ``, `{"a":1`, `{"a" 1}`, `{"a":1 "b":2}`, `{a:1}`, `{"a`, `{"a":"x}`, `{"a":[1}`} {
		if _, _, err := Get([]byte(bad), "a"); err == nil {
			t.Errorf("Get(%q): want error", bad)
		}
	}
}

func FuzzSet(f *testing.F) {
	f.Add([]byte(`{"name":"a","b":[1,{"c":null}]}`), "name")
	f.Add([]byte(`{}`), "x")
	f.Add([]byte(` { "a" : "\"}" } `), "a")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		if !utf8.ValidString(key) {
			return // keys are the gateway's own ASCII names
		}
		out, err := Set(obj, key, json.RawMessage(`"v"`)) // must not panic
		if err != nil || !json.Valid(obj) {
			return // malformed input: garbage in, garbage out
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("Set produced invalid JSON %q from %q: %v", out, obj, err)
		}
		if string(m[key]) != `"v"` {
			t.Fatalf("Set did not set %q in %q: %q", key, obj, out)
		}
		del, err := Delete(out, key)
		if err != nil {
			t.Fatalf("Delete after Set: %v", err)
		}
		if _, ok, _ := Get(del, key); ok {
			t.Fatalf("Delete left %q in %q", key, del)
		}
	})
}

func TestGetMany(t *testing.T) {
	keys := []string{"progressToken", "_meta"}
	for _, tt := range []struct {
		name, obj string
		want      [2]string // "" for absent
		wantErr   bool
	}{
		{name: "both", obj: `{"_meta":{"a":1},"progressToken":"t"}`, want: [2]string{`"t"`, `{"a":1}`}},
		{name: "one", obj: `{"name":"x","_meta":{}}`, want: [2]string{"", `{}`}},
		{name: "none", obj: `{"name":"x"}`},
		{name: "last duplicate wins", obj: `{"_meta":1,"_meta":2}`, want: [2]string{"", "2"}},
		{name: "escaped key", obj: `{"_m\u0065ta":true}`, want: [2]string{"", "true"}},
		{name: "nested keys are not members", obj: `{"a":{"_meta":1}}`},
		{name: "not an object", obj: `[1]`, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vals := []json.RawMessage{json.RawMessage("stale"), json.RawMessage("stale")}
			err := GetMany([]byte(tt.obj), keys, vals)
			if (err != nil) != tt.wantErr {
				t.Fatalf("GetMany(%s) error %v, want error %v", tt.obj, err, tt.wantErr)
			}
			for i := range keys {
				if string(vals[i]) != tt.want[i] {
					t.Errorf("GetMany(%s)[%s] = %q, want %q", tt.obj, keys[i], vals[i], tt.want[i])
				}
			}
		})
	}
}

// FuzzGet checks Get against encoding/json on objects it accepts.
func FuzzGet(f *testing.F) {
	f.Add([]byte(`{"name":"a","b":[1,{"c":"}"}],"d":"\"x\\"}`), "name")
	f.Add([]byte(`{"n\u0061me":1, "name" : 2}`), "name")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		if !utf8.ValidString(key) {
			return
		}
		raw, ok, err := Get(obj, key)
		// GetMany finds what Get finds, for each of its keys.
		keys := []string{key, "name"}
		vals := make([]json.RawMessage, len(keys))
		if merr := GetMany(obj, keys, vals); (merr != nil) != (err != nil) {
			t.Fatalf("GetMany(%q): %v; Get: %v", obj, merr, err)
		}
		for i, k := range keys {
			if one, _, _ := Get(obj, k); !bytes.Equal(one, vals[i]) {
				t.Fatalf("GetMany(%q) has %q for %q; Get has %q", obj, vals[i], k, one)
			}
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			if err == nil && (len(bytes.TrimSpace(obj)) == 0 || bytes.TrimSpace(obj)[0] != '{') {
				t.Fatalf("Get accepted %q", obj)
			}
			return // malformed input: only "no panic" is promised
		}
		if err != nil {
			t.Fatalf("Get(%q): %v", obj, err)
		}
		want, wantOK := m[key]
		if ok != wantOK || (ok && !jsonSame(raw, want)) {
			t.Fatalf("Get(%q, %q) = %q %v; encoding/json has %q %v", obj, key, raw, ok, want, wantOK)
		}
	})
}

func jsonSame(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func TestMapArray(t *testing.T) {
	upper := func(el json.RawMessage) json.RawMessage {
		if string(el) == `"a"` {
			return json.RawMessage(`"A"`)
		}
		return el
	}
	tests := []struct {
		name, in, want string
		err            bool
	}{
		{"changed", `{"x":1, "l": ["a", 2, {"b":1}] }`, `{"x":1, "l": ["A", 2, {"b":1}] }`, false},
		{"unchanged is the same bytes", `{"l":[ "b" ]}`, `{"l":[ "b" ]}`, false},
		{"missing", `{"x":1}`, `{"x":1}`, false},
		{"not an array", `{"l":{}}`, ``, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MapArray([]byte(tt.in), "l", upper)
			if (err != nil) != tt.err || (!tt.err && string(got) != tt.want) {
				t.Errorf("MapArray = %s, %v; want %s (error %v)", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name   string
		obj    string
		want   string
		wantOK bool
	}{
		{"plain", `{"name":"echo"}`, "echo", true},
		{"escapes", `{"name":"a\"b\u00e9\\"}`, `a"bé\`, true},
		{"empty", `{"name":""}`, "", true},
		{"not a string", `{"name":42}`, "", false},
		{"null", `{"name":null}`, "", false},
		{"missing", `{"other":"x"}`, "", false},
		{"not an object", `["name"]`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := String([]byte(tt.obj), "name")
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("String(%s) = %q, %v; want %q, %v", tt.obj, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "mcp__files__read", "p-17", `a"b`, `back\slash`, "tab\t", "<html>&", "é", "\u2028", "\x7f", "\xff"} {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AppendString(make([]byte, 0, 64)[:0], "mcp__files__read") }); n > 1 {
		t.Errorf("AppendString of plain ASCII allocates %v times, want at most the buffer", n)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("name")
	f.Add("\"\\<>&\x00\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestSetAllocations(t *testing.T) {
	obj := []byte(`{"name":"mcp__files__read","arguments":{"path":"/srv/x"},"_meta":{"progressToken":"p-17"}}`)
	val := json.RawMessage(`"read"`)
	if n := testing.AllocsPerRun(100, func() { Set(obj, "name", val) }); n != 1 {
		t.Errorf("Set allocates %v times, want 1 (the copy)", n)
	}
}

func TestApply(t *testing.T) {
	name := Edit{Key: "name", Val: json.RawMessage(`"read"`)}
	token := Edit{Key: "_meta", In: []Edit{{Key: "progressToken", Val: json.RawMessage(`"mcpgw-p-1"`)}}}
	tests := []struct {
		name, in string
		edits    []Edit
		want     string
	}{
		{"both", `{"name":"mcp__files__read","arguments":{"a":1},"_meta":{"progressToken":7}}`, []Edit{name, token},
			`{"name":"read","arguments":{"a":1},"_meta":{"progressToken":"mcpgw-p-1"}}`},
		{"order and spaces kept", `{ "_meta" : { "x":1, "progressToken" : "c" } , "name" : "n" }`, []Edit{name, token},
			`{ "_meta" : { "x":1, "progressToken" : "mcpgw-p-1" } , "name" : "read" }`},
		{"no _meta: left alone", `{"name":"n"}`, []Edit{name, token}, `{"name":"read"}`},
		{"_meta not an object", `{"name":"n","_meta":[1]}`, []Edit{name, token}, `{"name":"read","_meta":[1]}`},
		{"_meta without a token: appended in it", `{"_meta":{"x":1},"name":"n"}`, []Edit{token, name}, `{"_meta":{"x":1,"progressToken":"mcpgw-p-1"},"name":"read"}`},
		{"absent name appended", `{"a":1}`, []Edit{name}, `{"a":1,"name":"read"}`},
		{"absent in an empty object", ` { } `, []Edit{name}, ` {"name":"read"} `},
		{"duplicates all set", `{"name":"a","name":"b"}`, []Edit{name}, `{"name":"read","name":"read"}`},
		{"escaped key", `{"n\u0061me":"x"}`, []Edit{name}, `{"n\u0061me":"read"}`},
		{"no edits: the same bytes", `{"a" : 1}`, nil, `{"a" : 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Apply([]byte(tt.in), tt.edits...)
			if err != nil || string(got) != tt.want {
				t.Errorf("Apply = %s, %v; want %s", got, err, tt.want)
			}
			// AppendApply keeps what dst holds, and writes in place when
			// dst has the room.
			for _, room := range []int{0, 256} {
				dst := append(make([]byte, 0, room), "prefix:"...)
				got, err := AppendApply(dst, []byte(tt.in), tt.edits...)
				if err != nil || string(got) != "prefix:"+tt.want {
					t.Errorf("AppendApply(room %d) = %s, %v; want prefix:%s", room, got, err, tt.want)
				}
				if inPlace := &got[0] == &dst[0]; inPlace != (room > 0) {
					t.Errorf("AppendApply(room %d) wrote in place: %v", room, inPlace)
				}
			}
		})
	}
	for _, bad := range []string{`[1]`, `{"a":1`, ``} {
		if _, err := Apply([]byte(bad), name); err == nil {
			t.Errorf("Apply(%q): no error", bad)
		}
	}
	if _, err := Apply([]byte(`{}`), Edit{Key: "a", Val: json.RawMessage(`{`)}); err == nil {
		t.Error("Apply took an invalid value")
	}
	obj := []byte(`{"name":"mcp__files__read","arguments":{"path":"/srv/x"},"_meta":{"progressToken":"p-17"}}`)
	if n := testing.AllocsPerRun(100, func() { Apply(obj, name, token) }); n != 1 {
		t.Errorf("Apply allocates %v times, want 1 (the copy)", n)
	}
}

// FuzzApply checks Apply against what encoding/json reads: the edited
// members have their new values, the nested one only where _meta is an
// object, and every other member is as it was.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"name":"a","_meta":{"progressToken":1,"x":[1]},"b":null}`))
	f.Add([]byte(`{"_meta":"s"}`))
	f.Add([]byte(` { } `))
	f.Fuzz(func(t *testing.T, obj []byte) {
		edits := []Edit{{Key: "name", Val: json.RawMessage(`"n"`)}, {Key: "_meta", In: []Edit{{Key: "progressToken", Val: json.RawMessage(`"t"`)}}}}
		out, err := Apply(obj, edits...) // must not panic
		var in map[string]json.RawMessage
		if json.Unmarshal(obj, &in) != nil {
			return // not an object: garbage in, garbage out
		}
		if err != nil {
			t.Fatalf("Apply(%q): %v", obj, err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Apply(%q) = %q, not JSON: %v", obj, out, err)
		}
		if string(got["name"]) != `"n"` {
			t.Fatalf("name not set: %q", out)
		}
		for k, v := range in {
			switch k {
			case "name":
			case "_meta":
				var inMeta, gotMeta map[string]any
				if json.Unmarshal(v, &inMeta) != nil || inMeta == nil {
					if !jsonEqual(v, got[k]) {
						t.Fatalf("a _meta that is not an object changed: %q -> %q", v, got[k])
					}
					continue
				}
				if err := json.Unmarshal(got[k], &gotMeta); err != nil || gotMeta["progressToken"] != "t" {
					t.Fatalf("progressToken not set in %q", got[k])
				}
				delete(inMeta, "progressToken")
				delete(gotMeta, "progressToken")
				if !jsonEqual(mustMarshal(inMeta), mustMarshal(gotMeta)) {
					t.Fatalf("other _meta members changed: %v -> %v", inMeta, gotMeta)
				}
			default:
				if !jsonEqual(v, got[k]) {
					t.Fatalf("member %q changed: %q -> %q", k, v, got[k])
				}
			}
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return string(mustMarshal(x)) == string(mustMarshal(y))
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// skipStringQuoteToQuote is skipString as it was before it read blocks:
// from quote to quote, each escaped by an odd run of backslashes before
// it. FuzzSkipString holds the block reader to it.
func skipStringQuoteToQuote(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			break
		}
		j += i
		k := j
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
	return len(b) + 1
}

func TestSkipString(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, s := range []string{
		`""`, `"abc"`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `"unclosed`, `"unclosed\"`,
		`"` + long + `"`, `"` + long + `\"` + long + `"`, `"` + long + `\\"` + long,
		`"` + strings.Repeat(`\"`, 100) + `"`, `"` + strings.Repeat(`\\`, 100) + `"`,
		`"` + strings.Repeat("x", 63) + `\` + `"` + long + `"`,
		`"` + strings.Repeat("x", 62) + `\\` + `"` + long + `"`,
		`"` + strings.Repeat("x", 64) + strings.Repeat(`\`, 65) + `"` + long + `"`,
		`"` + strings.Repeat(`{\"id\":1,\"name\":\"n\"},`, 40) + `"`,
	} {
		for _, pad := range []string{"", "  ", `{"k":`} {
			b := []byte(pad + s + ` , "next"`)
			if got, want := skipString(b, len(pad)), skipStringQuoteToQuote(b, len(pad)); got != want {
				t.Errorf("skipString(%.80q) = %d, want %d", b, got, want)
			}
		}
	}
}

// TestSkipString_Blocks reads strings that turn to blocks (escaped
// quotes close together) with every alignment of a later backslash run
// and quote to the 64-byte blocks, against the quote-to-quote reading.
func TestSkipString_Blocks(t *testing.T) {
	dense := strings.Repeat(`{\"id\":1,\"n\":\"a\"},`, 6)
	for k := 0; k < 140; k++ {
		for r := 0; r <= 5; r++ {
			for _, mid := range []string{"x", `\n`, `\"`} {
				s := `"` + dense + strings.Repeat(mid, k) + strings.Repeat(`\`, r) + `"` + strings.Repeat("y", 70) + `"`
				b := []byte(s)
				if got, want := skipString(b, 0), skipStringQuoteToQuote(b, 0); got != want {
					t.Fatalf("k=%d r=%d mid=%q: skipString = %d, want %d", k, r, mid, got, want)
				}
			}
		}
	}
}

// FuzzSkipString holds skipString to the quote-to-quote reading on any
// bytes: the two must agree where a string ends, or that it does not.
func FuzzSkipString(f *testing.F) {
	for _, s := range []string{`"a\"b" rest`, `"` + strings.Repeat(`\\\"x`, 40) + `"`, `"` + strings.Repeat("y", 130) + `\\\\\"z"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Also as a long string of runs of plain bytes, backslashes and
		// now and then a quote (each byte a run, as long as its high
		// bits say), which crosses 64-byte blocks every way.
		long := []byte{'"'}
		for _, c := range b {
			long = append(long, bytes.Repeat([]byte{`"\\\\\xxxxxxxxxy`[c%16]}, 1+int(c>>4)%16)...)
		}
		if len(b) == 0 || b[0] != '"' {
			b = append([]byte{'"'}, b...)
		}
		for _, in := range [][]byte{b, long} {
			if got, want := skipString(in, 0), skipStringQuoteToQuote(in, 0); got != want {
				t.Fatalf("skipString(%q) = %d, want %d", in, got, want)
			}
		}
	})
}

// arrayMembersThreePasses is what ArrayMembers does, from Get, Elements
// and Members: the oracle of TestArrayMembers and FuzzArrayMembers. It
// records the calls ArrayMembers would make.
func arrayMembersThreePasses(obj []byte, key string) (calls []string, walked bool) {
	var val []byte
	n := 0
	if Members(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			n, val = n+1, v
		}
		return true
	}) != nil || n != 1 || len(val) == 0 || val[0] != '[' {
		return nil, false
	}
	walked = true
	el := 0
	Elements(val, func(e []byte) {
		if !walked {
			return
		}
		if len(e) == 0 || e[0] != '{' {
			walked = false
			return
		}
		Members(e, func(k, v []byte) bool {
			calls = append(calls, fmt.Sprintf("%d %s=%s", el, k, v))
			return true
		})
		calls = append(calls, fmt.Sprintf("%d done", el))
		el++
	})
	if !walked {
		return nil, false
	}
	// The other members, in their places around the array's calls.
	var all []string
	Members(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			all = append(all, calls...)
		} else {
			all = append(all, fmt.Sprintf("other %s=%s", k, v))
		}
		return true
	})
	return all, true
}

func arrayMembersCalls(obj []byte, key string) (calls []string, walked bool) {
	walked = ArrayMembers(obj, key, func(el int, k, v []byte) bool {
		calls = append(calls, fmt.Sprintf("%d %s=%s", el, k, v))
		return true
	}, func(el int) bool {
		calls = append(calls, fmt.Sprintf("%d done", el))
		return true
	}, func(k, v []byte) {
		calls = append(calls, fmt.Sprintf("other %s=%s", k, v))
	})
	return calls, walked
}

func TestArrayMembers(t *testing.T) {
	for _, in := range []string{
		`{"content":[{"type":"text","text":"a \"b\""},{"text":"c","type":"image"}],"isError":false}`,
		`{"isError":true,"content":[{"type":"text"}],"structuredContent":{"a":[1]},"is\u0045rror":false}`,
		`{ "a" : 1 , "content" : [ { } , { "k" : [1,{"x":"]"}] } ] }`,
		`{"content":[]}`,
		`{"content":[1]}`,
		`{"content":{"type":"text"}}`,
		`{"content":[{"a":1}],"content":[{"b":2}]}`,
		`{"c\u006fntent":[{"a":1}]}`,
		`{"other":[{"a":1}]}`,
		`[]`,
	} {
		got, gotWalked := arrayMembersCalls([]byte(in), "content")
		want, wantWalked := arrayMembersThreePasses([]byte(in), "content")
		if gotWalked != wantWalked || (wantWalked && strings.Join(got, "|") != strings.Join(want, "|")) {
			t.Errorf("ArrayMembers(%s) = %v %q, want %v %q", in, gotWalked, got, wantWalked, want)
		}
	}
	// A callback that returns false stops the walk.
	stops := 0
	if ArrayMembers([]byte(`{"content":[{"a":1,"b":2},{"c":3}]}`), "content", func(int, []byte, []byte) bool { stops++; return false }, func(int) bool { return true }, nil) || stops != 1 {
		t.Errorf("a member callback's false did not stop the walk at once (%d calls)", stops)
	}
	if ArrayMembers([]byte(`{"content":[{"a":1},{"c":3}]}`), "content", func(int, []byte, []byte) bool { return true }, func(int) bool { return false }, nil) {
		t.Error("a done callback's false did not stop the walk")
	}
}

// FuzzArrayMembers holds ArrayMembers to the three-pass walk on any JSON
// object.
func FuzzArrayMembers(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"a \"b\""},{"text":"c","type":"image"}],"isError":false}`))
	f.Add([]byte(`{"x":{"content":[]},"content":[{},{"a":[{"b":"}"}]}]}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !Valid(obj) {
			return
		}
		got, gotWalked := arrayMembersCalls(obj, "content")
		want, wantWalked := arrayMembersThreePasses(obj, "content")
		if gotWalked != wantWalked || (wantWalked && strings.Join(got, "|") != strings.Join(want, "|")) {
			t.Fatalf("ArrayMembers(%s) = %v %q, want %v %q", obj, gotWalked, got, wantWalked, want)
		}
	})
}
