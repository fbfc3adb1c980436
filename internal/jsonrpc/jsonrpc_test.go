package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		batch   bool
		kinds   []string // "request", "notification", "response"
		ids     []string
		errCode int
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false, []string{"request"}, []string{"1"}, 0},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x"}}`, false, []string{"request"}, []string{`"a-1"`}, 0},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, []string{"notification"}, []string{""}, 0},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{}}`, false, []string{"response"}, []string{"7"}, 0},
		{"error response", `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`, false, []string{"response"}, []string{"7"}, 0},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, false, []string{"response"}, []string{""}, 0},
		{"batch", ` [{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":2,"result":null}]`, true,
			[]string{"request", "notification", "response"}, []string{"1", "", "2"}, 0},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`, false, []string{"request"}, []string{"1"}, 0},
		{"params null is absent", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, false, []string{"request"}, []string{"1"}, 0},
		{"invalid UTF-8 in a string id is mended", "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\xc3\",\"method\":\"m\"}", false, []string{"request"}, []string{"\"a\uFFFDb\uFFFD\""}, 0},
		{"a lone surrogate escape is valid JSON text", `{"jsonrpc":"2.0","id":"\ud800","method":"m"}`, false, []string{"request"}, []string{`"\ud800"`}, 0},

		{"empty", ``, false, nil, nil, CodeInvalidRequest},
		{"not json", `{"jsonrpc":`, false, nil, nil, CodeParseError},
		{"empty batch", `[]`, true, nil, nil, CodeInvalidRequest},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"m"}`, false, nil, nil, CodeInvalidRequest},
		{"no version", `{"id":1,"method":"m"}`, false, nil, nil, CodeInvalidRequest},
		{"null request id", `{"jsonrpc":"2.0","id":null,"method":"m"}`, false, nil, nil, CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, false, nil, nil, CodeInvalidRequest},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"m"}`, false, nil, nil, CodeInvalidRequest},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, false, nil, nil, CodeInvalidRequest},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, false, nil, nil, CodeInvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, false, nil, nil, CodeInvalidRequest},
		{"neither result nor error", `{"jsonrpc":"2.0","id":1}`, false, nil, nil, CodeInvalidRequest},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, false, nil, nil, CodeInvalidRequest},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, false, nil, nil, CodeInvalidRequest},
		{"bad error object", `{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`, false, nil, nil, CodeInvalidRequest},
		{"scalar", `42`, false, nil, nil, CodeInvalidRequest},
		{"bad batch element", `[{"jsonrpc":"2.0","method":"a"},3]`, true, nil, nil, CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := Parse([]byte(tt.in))
			if tt.errCode != 0 {
				var jerr *Error
				if !errors.As(err, &jerr) || jerr.Code != tt.errCode {
					t.Fatalf("Parse error = %v, want code %d", err, tt.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if batch != tt.batch {
				t.Errorf("batch = %v", batch)
			}
			var kinds, ids []string
			for _, m := range msgs {
				switch {
				case m.IsRequest():
					kinds = append(kinds, "request")
				case m.IsNotification():
					kinds = append(kinds, "notification")
				case m.IsResponse():
					kinds = append(kinds, "response")
				}
				ids = append(ids, m.ID.String())
			}
			if diff := cmp.Diff(tt.kinds, kinds); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.ids, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeKeepsIDAndRawMembers(t *testing.T) {
	m, err := ParseOne([]byte(`{"jsonrpc":"2.0","id":"x\u00e9","method":"m","params":{"b":1.50,"a":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Encode(m)
	if want := `{"jsonrpc":"2.0","id":"x\u00e9","method":"m","params":{"b":1.50,"a":[]}}`; string(out) != want {
		t.Errorf("Encode = %s, want %s", out, want)
	}
	out, _ = Encode(NewErrorResponse(ID{}, &Error{Code: -32700, Message: "bad"}))
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`; string(out) != want {
		t.Errorf("Encode = %s, want %s", out, want)
	}
	out, _ = Encode(NewResult(IntID(3), json.RawMessage("{\"html\": \"<b>&amp;</b>\",\n \"n\": 1e3}")))
	if want := `{"jsonrpc":"2.0","id":3,"result":{"html":"<b>&amp;</b>","n":1e3}}`; string(out) != want {
		t.Errorf("Encode = %s, want %s", out, want)
	}
	out, _ = Encode(NewNotification("n", nil))
	if want := `{"jsonrpc":"2.0","method":"n"}`; string(out) != want {
		t.Errorf("Encode = %s, want %s", out, want)
	}
	if _, err := ParseOne([]byte(`[{"jsonrpc":"2.0","method":"a"}]`)); err == nil {
		t.Error("ParseOne accepted a batch")
	}
}

// TestParse_UTF8 checks both answers to invalid UTF-8: ParseOwned mends
// every member, each bad byte one U+FFFD, and ParseOwnedStrict refuses the
// message, naming the first bad byte. Valid UTF-8, and escapes of any kind,
// pass both untouched.
func TestParse_UTF8(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // what ParseOwned's message encodes to (� is U+FFFD)
		// strict is ParseOwnedStrict's error message; "": it accepts in.
		strict string
	}{
		{
			name:   "id",
			in:     "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
			want:   `{"jsonrpc":"2.0","id":"�","method":"ping"}`,
			strict: "body is not valid JSON text: byte 23 is not part of a UTF-8 sequence (JSON text is UTF-8)",
		},
		{
			name:   "params, a truncated sequence and an overlong one",
			in:     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"a\":\"x\xe2\x82y\",\"b\":\"\xc0\xaf\"}}",
			want:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"x��y","b":"��"}}`,
			strict: "body is not valid JSON text: byte 62 is not part of a UTF-8 sequence (JSON text is UTF-8)",
		},
		{
			name:   "result, an encoded surrogate",
			in:     "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"\xed\xa0\x80\"}}",
			want:   `{"jsonrpc":"2.0","id":1,"result":{"text":"���"}}`,
			strict: "body is not valid JSON text: byte 42 is not part of a UTF-8 sequence (JSON text is UTF-8)",
		},
		{
			name: "valid UTF-8, U+FFFD itself and escapes are kept",
			in:   `{"jsonrpc":"2.0","id":"é\ud800","method":"m","params":{"t":"日本\uFFFD` + "\uFFFD" + `\u00e9"}}`,
			want: `{"jsonrpc":"2.0","id":"é\ud800","method":"m","params":{"t":"日本\uFFFD` + "\uFFFD" + `\u00e9"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			msgs, _, err := ParseOwned(bytes.Clone(in))
			if err != nil {
				t.Fatalf("ParseOwned: %v", err)
			}
			if got := mustEncode(msgs[0]); got != tt.want {
				t.Errorf("ParseOwned's message = %s, want %s", got, tt.want)
			}
			_, _, err = ParseOwnedStrict(bytes.Clone(in))
			if tt.strict == "" {
				if err != nil {
					t.Errorf("ParseOwnedStrict: %v", err)
				}
				return
			}
			if jerr, ok := errors.AsType[*Error](err); !ok || jerr.Code != CodeParseError || jerr.Message != tt.strict {
				t.Errorf("ParseOwnedStrict error = %v, want code %d %q", err, CodeParseError, tt.strict)
			}
		})
	}
}

// FuzzParseStrict: ParseOwnedStrict refuses with a parse error exactly
// what is not UTF-8, and otherwise answers as Parse.
func FuzzParseStrict(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xc3\"}]",
		"\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, sb, serr := ParseOwnedStrict(bytes.Clone(data))
		if !utf8.Valid(bytes.TrimSpace(data)) && len(bytes.TrimSpace(data)) > 0 {
			if jerr, ok := errors.AsType[*Error](serr); !ok || jerr.Code != CodeParseError {
				t.Fatalf("ParseOwnedStrict(%q) = %v, want a parse error", data, serr)
			}
			return
		}
		msgs, b, err := Parse(data)
		if fmt.Sprint(err) != fmt.Sprint(serr) || b != sb || len(msgs) != len(strict) {
			t.Fatalf("ParseOwnedStrict(%q) = %d, %v, %v; Parse = %d, %v, %v", data, len(strict), sb, serr, len(msgs), b, err)
		}
		for i := range msgs {
			if mustEncode(msgs[i]) != mustEncode(strict[i]) {
				t.Fatalf("message %d: %s, Parse's %s", i, mustEncode(strict[i]), mustEncode(msgs[i]))
			}
		}
	})
}

// FuzzIDUnmarshal: an id that UnmarshalJSON accepts goes back out as
// valid JSON text, the bytes it came in.
func FuzzIDUnmarshal(f *testing.F) {
	for _, s := range []string{`1`, `"a"`, `null`, `-1.5e3`, `"\ud800"`, "\"\xff\"", `{}`, ` "x" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var id ID
		if id.UnmarshalJSON(data) != nil {
			return
		}
		out, err := id.MarshalJSON()
		if err != nil || !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("UnmarshalJSON(%q) gave an id that encodes to %q, %v", data, out, err)
		}
		if id.IsValid() && string(out) != string(bytes.TrimSpace(data)) {
			t.Fatalf("UnmarshalJSON(%q) encodes back to %q", data, out)
		}
	})
}

// FuzzParse: Parse never panics; what it accepts re-encodes to messages that
// parse again to the same kinds, ids and members, as valid JSON text.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":"a","result":{"x":[1,2]}},{"jsonrpc":"2.0","method":"n","params":{}}]`,
		`{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32000,"message":"m","data":null}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"\xc3\",\"params\":{\"\xe2\x82\":\"\xed\xa0\x80\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _, err := Parse(data)
		if err != nil {
			var jerr *Error
			if !errors.As(err, &jerr) {
				t.Fatalf("Parse returned a non-JSON-RPC error: %v", err)
			}
			return
		}
		for _, m := range msgs {
			out, err := Encode(m)
			if err != nil {
				t.Fatalf("Encode(%+v): %v", m, err)
			}
			if !utf8.Valid(out) {
				t.Fatalf("Parse(%q) gave a message that encodes to invalid UTF-8: %q", data, out)
			}
			again, err := ParseOne(out)
			if err != nil {
				t.Fatalf("re-parse of %s: %v", out, err)
			}
			if again.ID != m.ID || again.Method != m.Method || again.IsRequest() != m.IsRequest() || again.IsResponse() != m.IsResponse() {
				t.Fatalf("round trip changed %s into %s", out, mustEncode(again))
			}
			if !jsonEqual(again.Params, m.Params) || !jsonEqual(again.Result, m.Result) {
				t.Fatalf("round trip changed members of %s", out)
			}
		}
	})
}

func mustEncode(m *Message) string { b, _ := Encode(m); return string(b) }

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return cmp.Equal(x, y)
}

// referenceParse is Parse written with encoding/json, to check the
// scanner against: members by exact name into a map (last one wins), then
// the same rules. It returns the messages, or the error code.
func referenceParse(data []byte) ([]*Message, int) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, CodeInvalidRequest
	}
	if !json.Valid(data) {
		return nil, CodeParseError
	}
	one := func(raw json.RawMessage) (*Message, int) {
		var mem map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &mem) != nil {
			return nil, CodeInvalidRequest
		}
		str := func(v json.RawMessage) (s string, present bool, ok bool) {
			if v == nil || string(v) == "null" {
				return "", false, true
			}
			return s, true, json.Unmarshal(v, &s) == nil
		}
		jr, jrOK, ok1 := str(mem["jsonrpc"])
		method, hasMethod, ok2 := str(mem["method"])
		if !ok1 || !ok2 || !jrOK || jr != Version {
			return nil, CodeInvalidRequest
		}
		m := &Message{JSONRPC: Version}
		id, hasID := mem["id"]
		if hasID && string(id) != "null" {
			if id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9') {
				return nil, CodeInvalidRequest
			}
			m.ID = ID{raw: string(id)}
		}
		result, hasResult := mem["result"]
		errv, hasErr := mem["error"]
		if hasMethod {
			params, hasParams := mem["params"]
			if method == "" || hasResult || hasErr || (hasID && string(id) == "null") {
				return nil, CodeInvalidRequest
			}
			if hasParams && string(params) != "null" {
				if params[0] != '{' && params[0] != '[' {
					return nil, CodeInvalidRequest
				}
				m.Params = params
			}
			m.Method = method
			return m, 0
		}
		hasErr = hasErr && string(errv) != "null"
		if hasResult == hasErr || !hasID {
			return nil, CodeInvalidRequest
		}
		if hasResult {
			m.Result = result
			return m, 0
		}
		var e Error
		if json.Unmarshal(errv, &e) != nil {
			return nil, CodeInvalidRequest
		}
		m.Error = &e
		return m, 0
	}
	if data[0] != '[' {
		m, code := one(data)
		if code != 0 {
			return nil, code
		}
		return []*Message{m}, 0
	}
	var raws []json.RawMessage
	json.Unmarshal(data, &raws)
	if len(raws) == 0 {
		return nil, CodeInvalidRequest
	}
	var out []*Message
	for _, raw := range raws {
		m, code := one(raw)
		if code != 0 {
			return nil, code
		}
		out = append(out, m)
	}
	return out, 0
}

// FuzzParseReference: Parse's scanner decides and decodes like the
// encoding/json reference, member for member.
func FuzzParseReference(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":"\"}"}}}`,
		`[{"jsonrpc":"2.0","id":"a","result":{"x":[1,2]}},{"jsonrpc":"2.0","method":"n","params":{}}]`,
		`{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32000,"message":"m","data":null}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		`{"jsonrpc":"2.0","JSONRPC":"1","method":"x","method":"y"}`,
		`{"jsonrpc":"2\u002e0","m\u0065thod":"x","params":null}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`,
		`{"jsonrpc":null,"method":"x"}`,
		`{"jsonrpc":"2.0","method":7}`,
		` [ ] `,
		`[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _, err := Parse(data)
		want, code := referenceParse(data)
		if code != 0 {
			jerr, ok := errors.AsType[*Error](err)
			if !ok || jerr.Code != code {
				t.Fatalf("Parse(%q) = %v, want error code %d", data, err, code)
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v; the reference accepts it", data, err)
		}
		if len(msgs) != len(want) {
			t.Fatalf("Parse(%q): %d messages, want %d", data, len(msgs), len(want))
		}
		// Invalid UTF-8 is mended by Parse and decoded to the same U+FFFDs
		// by encoding/json: the members are then the same values, not the
		// same bytes.
		mended := !utf8.Valid(data)
		for i, m := range msgs {
			w := want[i]
			if m.Method != w.Method {
				t.Errorf("message %d: method %q, want %q", i, m.Method, w.Method)
			}
			same := func(a, b []byte) bool { return string(a) == string(b) || mended && jsonEqual(a, b) }
			if !same(m.ID.Raw(), w.ID.Raw()) || !same(m.Params, w.Params) || !same(m.Result, w.Result) || !cmp.Equal(m.Error, w.Error) {
				t.Errorf("message %d of %q:\n got %+v\nwant %+v", i, data, m, w)
			}
		}
	})
}

// TestAppendEncode checks that AppendEncode appends what Encode returns,
// in the room dst has, the compacted form included.
func TestAppendEncode(t *testing.T) {
	for _, m := range []*Message{
		NewRequest(IntID(7), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)),
		NewResult(StringID("a"), json.RawMessage("{\"x\":\n[1, 2]}")),
		NewErrorResponse(IntID(1), &Error{Code: -32601, Message: "no"}),
		NewNotification("notifications/initialized", nil),
	} {
		want, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 3, 512)
		copy(dst, "abc")
		got, err := AppendEncode(dst, m)
		if err != nil || string(got) != "abc"+string(want) {
			t.Errorf("AppendEncode = %q, %v; want abc%s", got, err, want)
		}
		if &got[0] != &dst[0] {
			t.Errorf("AppendEncode did not use dst's room for %s", want)
		}
	}
}
