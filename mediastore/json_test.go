package mediastore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestObjectMembers(t *testing.T) {
	type kv struct{ Key, Raw, Val string }
	tests := []struct {
		name string
		in   string
		want []kv
		ok   bool
	}{
		{"empty", ` { } `, []kv{}, true},
		{"values", `{"a":1,"b" : "x\"y\\" ,"c":[1,{"d":"]}"}],"e":{"f":null},"g":true, "h":-1.5e3}`, []kv{
			{"a", `"a"`, `1`},
			{"b", `"b"`, `"x\"y\\"`},
			{"c", `"c"`, `[1,{"d":"]}"}]`},
			{"e", `"e"`, `{"f":null}`},
			{"g", `"g"`, `true`},
			{"h", `"h"`, `-1.5e3`},
		}, true},
		{"escaped key", `{"ty\u0070e":"image"}`, []kv{{"type", `"ty\u0070e"`, `"image"`}}, true},
		{"backslashes before a quote", `{"a":"\\\\","b":"\\\""}`, []kv{{"a", `"a"`, `"\\\\"`}, {"b", `"b"`, `"\\\""`}}, true},
		{"array", `[1]`, nil, false},
		{"truncated", `{"a":`, nil, false},
		{"unterminated", `{"a":"b`, nil, false},
		{"no colon", `{"a" 1}`, nil, false},
		{"nothing", ``, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ok := objectMembers([]byte(tt.in))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			var got []kv
			if ms != nil {
				got = []kv{}
			}
			for _, m := range ms {
				got = append(got, kv{m.key, string(m.rawKey), string(m.val)})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://x/media/a.png?exp=1&sig=a-b_c", `"https://x/media/a.png?exp=1&sig=a-b_c"`},
		{"<a> \"q\" \\ \n\r\t\x01", `"<a> \"q\" \\ \n\r\t\u0001"`},
		{"é\u2028\u2029", `"é\u2028\u2029"`},
		{"bad \xff utf-8", `"bad \ufffd utf-8"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestPlainBlock(t *testing.T) {
	for _, tt := range []struct {
		block string
		want  bool
	}{
		{`{"type":"text","text":"hi"}`, true},
		{` { "text" : "x" , "type" : "resource_link" , "uri":"a"} `, true},
		{`{"type":"image","data":"AAAA"}`, false},
		{`{"type":"audio"}`, false},
		{`{"type":"resource","resource":{}}`, false},
		{`{"type":"text","type":"image"}`, false}, // the last one wins
		{`{"type":"image","type":"text"}`, true},
		{`{"text":"no type"}`, false},
		{`{"typ\u0065":"text"}`, false}, // an escaped key: look closer
		{`{"type":"imag\u0065"}`, false},
		{`{"type":7}`, false},
		{`[1]`, false},
		{`{"type":"text"`, false},
	} {
		if got := plainBlock([]byte(tt.block)); got != tt.want {
			t.Errorf("plainBlock(%s) = %v, want %v", tt.block, got, tt.want)
		}
	}
}

// TestRewriteContent_TextAllocations checks that a result of text blocks,
// the common one, is looked at without allocating.
func TestRewriteContent_TextAllocations(t *testing.T) {
	s := newTestStore(t, Options{})
	content := []byte(`[{"type":"text","text":"one"},{"type":"text","text":"two"},{"type":"resource_link","uri":"file:///a","name":"a"}]`)
	r := Rewrite{Mode: ModeLink, MinBytes: -1, BaseURL: "https://gw.example"}
	if n := testing.AllocsPerRun(100, func() {
		if out, changed := s.RewriteContent(content, r); changed || &out[0] != &content[0] {
			t.Fatal("text content changed")
		}
	}); n != 0 {
		t.Errorf("RewriteContent of text blocks allocates %v times, want 0", n)
	}
}
