package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

func TestStampMeta(t *testing.T) {
	st := stamp{caps: json.RawMessage(`{}`), info: json.RawMessage(`{"name":"mcpgw","version":"t"}`)}
	const ours = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpgw","version":"t"}`
	tests := []struct {
		name    string
		params  string
		stamp   stamp
		want    string
		wantErr bool
	}{
		{name: "no params", params: ``, stamp: st, want: `{"_meta":{` + ours + `}}`},
		{name: "null params", params: `null`, stamp: st, want: `{"_meta":{` + ours + `}}`},
		{name: "params without _meta", params: `{"name":"x","arguments":{"a":1}}`, stamp: st,
			want: `{"name":"x","arguments":{"a":1},"_meta":{` + ours + `}}`},
		{
			name: "caller's reserved keys are replaced, the rest kept",
			params: `{"_meta":{"progressToken":7,"traceparent":"00-abc","io.modelcontextprotocol/protocolVersion":"2099-01-01",` +
				`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/other":1,"app.example/k":"v"},"name":"x"}`,
			stamp: st,
			want:  `{"_meta":{"progressToken":7,"traceparent":"00-abc","app.example/k":"v",` + ours + `},"name":"x"}`,
		},
		{name: "log level", params: `{}`, stamp: stamp{caps: json.RawMessage(`{"sampling":{}}`), info: st.info, logLevel: "debug"},
			want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"mcpgw","version":"t"},"io.modelcontextprotocol/logLevel":"debug"}}`},
		{name: "a non-object _meta is replaced", params: `{"_meta":"x"}`, stamp: st, want: `{"_meta":{` + ours + `}}`},
		{name: "array params", params: `[1]`, stamp: st, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stampMeta(json.RawMessage(tt.params), tt.stamp)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("stampMeta = %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("stampMeta =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestCapsFor(t *testing.T) {
	tests := []struct {
		name     string
		declared string
		allowed  []string
		want     string
	}{
		{"none allowed", `{"sampling":{},"elicitation":{"form":{}}}`, nil, `{}`},
		{"intersection", `{"sampling":{"tools":{}},"elicitation":{"form":{}},"roots":{}}`, []string{"elicitation", "roots", "tasks"}, `{"elicitation":{"form":{}},"roots":{}}`},
		{"nothing declared", ``, []string{"sampling"}, `{}`},
		{"not an object", `[1]`, []string{"sampling"}, `{}`},
		{"duplicate member kept once", `{"sampling":{"a":1},"sampling":{"b":2}}`, []string{"sampling"}, `{"sampling":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(capsFor(json.RawMessage(tt.declared), tt.allowed)); got != tt.want {
				t.Errorf("capsFor = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNormalizeResult(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		want       string
		wantCode   int
		wantMsg    string
		takesInput bool
	}{
		{
			name: "discover-like complete result",
			in:   `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}},"ttlMs":0,"cacheScope":"public","tools":[{"name":"a","inputSchema":{"type":"object","x-new":[1, 2]}}],"nextCursor":"c"}`,
			want: `{"tools":[{"name":"a","inputSchema":{"type":"object","x-new":[1, 2]}}],"nextCursor":"c"}`,
		},
		{
			name: "other _meta kept",
			in:   `{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"app/k":1},"resultType":"complete"}`,
			want: `{"content":[],"_meta":{"app/k":1}}`,
		},
		{name: "legacy-shaped result untouched", in: `{"content":[{"type":"text","text":"hi"}],"isError":false}`, want: `{"content":[{"type":"text","text":"hi"}],"isError":false}`},
		{name: "_meta without serverInfo untouched", in: `{"_meta":{"a":1},"x":2}`, want: `{"_meta":{"a":1},"x":2}`},
		{name: "not an object", in: `[1,2]`, want: `[1,2]`},
		{name: "input_required", in: `{"resultType":"input_required","inputRequests":{}}`, wantCode: jsonrpc.CodeInternalError, wantMsg: "asked for input"},
		{name: "input_required for a caller that takes it", takesInput: true,
			in:   `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s","_meta":{"io.modelcontextprotocol/serverInfo":{}},"ttlMs":0}`,
			want: `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}`},
		{name: "task, even for a caller that takes input", in: `{"resultType":"task"}`, takesInput: true, wantCode: jsonrpc.CodeInternalError, wantMsg: "answered with a task"},
		{name: "task", in: `{"resultType":"task","task":{}}`, wantCode: jsonrpc.CodeInternalError, wantMsg: "answered with a task"},
		{name: "unknown type", in: `{"resultType":"later"}`, wantCode: jsonrpc.CodeInternalError, wantMsg: `resultType "later"`},
		{name: "non-string type", in: `{"resultType":3}`, wantCode: jsonrpc.CodeInternalError, wantMsg: "not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalizeResult("srv", json.RawMessage(tt.in), tt.takesInput, false)
			if tt.wantCode != 0 {
				var jerr *jsonrpc.Error
				if !errors.As(err, &jerr) || jerr.Code != tt.wantCode || !strings.Contains(jerr.Message, tt.wantMsg) || !strings.Contains(jerr.Message, `"srv"`) {
					t.Fatalf("normalizeResult = %s, %v; want error %d with %q naming the server", got, err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("normalizeResult =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func FuzzNormalizeResult(f *testing.F) {
	f.Add([]byte(`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{}},"ttlMs":0,"cacheScope":"public","tools":[]}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/serverInfo":1,"k":[]},"ttlMs":1}`))
	f.Add([]byte(`{"resultType":"input_required"}`))
	f.Add([]byte(`{"resultType":"complete","taskId":"t","ttlMs":5,"cacheScope":"x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		out, err := normalizeResult("s", in, false, false)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("normalizeResult(%s) = %s, not JSON", in, out)
		}
		if !isObject(out) {
			return
		}
		_, task, _ := rawjson.Get(out, "taskId")
		for _, k := range []string{"ttlMs", "cacheScope", "resultType"} {
			if _, ok, _ := rawjson.Get(out, k); ok && !(k == "ttlMs" && task) {
				t.Fatalf("normalizeResult(%s) = %s, still has %s", in, out, k)
			}
		}
		if meta, ok, _ := rawjson.Get(out, "_meta"); ok && isObject(meta) {
			if _, ok, _ := rawjson.Get(meta, metaServerInfo); ok {
				t.Fatalf("normalizeResult(%s) = %s, still has serverInfo", in, out)
			}
		}
		again, err := normalizeResult("s", out, false, false)
		if err != nil || string(again) != string(out) {
			t.Fatalf("normalizeResult is not idempotent on %s: %s, %v", out, again, err)
		}
	})
}

func TestHeaderValue(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"get_weather", "get_weather"},
		{"file:///tmp/a b.txt", "file:///tmp/a b.txt"},
		{"", ""},
		{"héllo", "=?base64?aMOpbGxv?="},
		{" lead", "=?base64?IGxlYWQ=?="},
		{"trail\t", "=?base64?dHJhaWwJ?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="},
		{"=?BASE64?x", "=?base64?PT9CQVNFNjQ/eA==?="},
	}
	for _, tt := range tests {
		got := encodeHeaderValue(tt.in)
		if got != tt.want {
			t.Errorf("encodeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		back, ok := decodeHeaderValue(got)
		if !ok || back != tt.in {
			t.Errorf("decodeHeaderValue(%q) = %q, %v; want %q", got, back, ok, tt.in)
		}
	}
	if _, ok := decodeHeaderValue("=?base64?not base64!?="); ok {
		t.Error("decodeHeaderValue accepted invalid base64")
	}
}

func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"", "a", "héllo", " x", "=?base64?", "=?base64?YQ==?=", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := encodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7E {
				t.Fatalf("encodeHeaderValue(%q) = %q, not visible ASCII", s, enc)
			}
		}
		if enc != "" && (enc[0] == ' ' || enc[len(enc)-1] == ' ' || enc[0] == '\t' || enc[len(enc)-1] == '\t') {
			t.Fatalf("encodeHeaderValue(%q) = %q, has outer blanks", s, enc)
		}
		dec, ok := decodeHeaderValue(enc)
		if !ok || dec != s {
			t.Fatalf("round trip of %q: %q -> %q, %v", s, enc, dec, ok)
		}
		// Any value: decoding never panics, and a valid decode re-encodes
		// to something that decodes to the same.
		if d, ok := decodeHeaderValue(s); ok {
			if d2, ok := decodeHeaderValue(encodeHeaderValue(d)); !ok || d2 != d {
				t.Fatalf("re-encoding %q: %q, %v", d, d2, ok)
			}
		}
	})
}

func TestParamHeaders(t *testing.T) {
	schema := `{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},
		"opts":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
		"plain":{"type":"string"}}}`
	b, err := paramBindings(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args string
		want http.Header
	}{
		{"all", `{"region":"eu-west","count":3,"dry":true,"opts":{"zone":"zürich"},"plain":"x"}`, http.Header{
			"Mcp-Param-Region": {"eu-west"}, "Mcp-Param-Count": {"3"}, "Mcp-Param-Dry-Run": {"true"}, "Mcp-Param-Zone": {"=?base64?esO8cmljaA==?="},
		}},
		{"absent, null and non-primitive values get none", `{"region":null,"count":2.5,"dry":"yes","opts":{"zone":{"a":1}}}`, http.Header{"Mcp-Param-Dry-Run": {"yes"}}},
		{"no arguments", ``, nil},
		{"unsafe integer", `{"count":9007199254740993}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := json.RawMessage(`{"name":"t"}`)
			if tt.args != "" {
				params = json.RawMessage(`{"name":"t","arguments":` + tt.args + `}`)
			}
			if diff := cmp.Diff(tt.want, paramHeaders(b, params)); diff != "" {
				t.Errorf("paramHeaders (-want +got):\n%s", diff)
			}
		})
	}

	bad := []struct{ name, schema string }{
		{"number type", `{"properties":{"n":{"type":"number","x-mcp-header":"N"}}}`},
		{"object type", `{"properties":{"n":{"type":"object","x-mcp-header":"N"}}}`},
		{"not a token", `{"properties":{"n":{"type":"string","x-mcp-header":"Bad Name"}}}`},
		{"empty", `{"properties":{"n":{"type":"string","x-mcp-header":""}}}`},
		{"not a string", `{"properties":{"n":{"type":"string","x-mcp-header":1}}}`},
		{"duplicate without regard to case", `{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}`},
	}
	for _, tt := range bad {
		if b, err := paramBindings(json.RawMessage(tt.schema)); err == nil {
			t.Errorf("%s: paramBindings = %v, want an error", tt.name, b)
		}
	}
}

func TestStripSubscriptionID(t *testing.T) {
	tests := []struct{ in, want, id string }{
		{`{"_meta":{"io.modelcontextprotocol/subscriptionId":5}}`, `{}`, "5"},
		{`{"uri":"file:///a","_meta":{"io.modelcontextprotocol/subscriptionId":"s-1","k":1}}`, `{"uri":"file:///a","_meta":{"k":1}}`, `"s-1"`},
		{`{"uri":"file:///a"}`, `{"uri":"file:///a"}`, ""},
	}
	for _, tt := range tests {
		if got := string(stripSubscriptionID(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("stripSubscriptionID(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if got := subscriptionID(json.RawMessage(tt.in)); got != tt.id {
			t.Errorf("subscriptionID(%s) = %q, want %q", tt.in, got, tt.id)
		}
	}
}

// TestStampFor_TakesInput: a modern server is told the input capabilities
// of a client that takes input_required results, and of no other.
func TestStampFor_TakesInput(t *testing.T) {
	c := newClient(ClientOptions{}, nil)
	declared := json.RawMessage(`{"sampling":{},"elicitation":{"form":{}},"experimental":{"x":{}}}`)
	tests := []struct {
		name  string
		hooks *CallHooks
		want  string
	}{
		{"no hooks", nil, `{}`},
		{"a client that cannot take input", &CallHooks{Capabilities: declared}, `{}`},
		{"a client that takes input", &CallHooks{Capabilities: declared, TakesInput: true}, `{"sampling":{},"elicitation":{"form":{}}}`},
		{"a client that takes tasks", &CallHooks{Capabilities: declared, TakesTasks: true}, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"a client that takes both", &CallHooks{Capabilities: json.RawMessage(`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x.example/other":{}}}`), TakesInput: true, TakesTasks: true},
			`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
	}
	for _, tt := range tests {
		if got := string(c.stampFor(tt.hooks).caps); got != tt.want {
			t.Errorf("%s: caps %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestNormalizeResult_Task: a modern server's task result reaches a
// caller that takes tasks with its resultType, and is an error for any
// other.
func TestNormalizeResult_Task(t *testing.T) {
	task := json.RawMessage(`{"resultType":"task","taskId":"up-1","status":"working","ttlMs":1000,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`)
	got, err := normalizeResult("s", task, false, true)
	if err != nil || string(got) != `{"resultType":"task","taskId":"up-1","status":"working","ttlMs":1000}` {
		t.Errorf("for a caller that takes tasks: %s, %v", got, err)
	}
	var jerr *jsonrpc.Error
	if _, err := normalizeResult("s", task, true, false); !errors.As(err, &jerr) || !strings.Contains(jerr.Message, "task") {
		t.Errorf("for a caller that takes none: %v, want an error", err)
	}
	// tasks/get: the task keeps its ttlMs.
	got, err = normalizeResult("s", json.RawMessage(`{"resultType":"complete","taskId":"up-1","status":"completed","ttlMs":1000,"result":{"content":[]}}`), false, false)
	if err != nil || string(got) != `{"taskId":"up-1","status":"completed","ttlMs":1000,"result":{"content":[]}}` {
		t.Errorf("tasks/get: %s, %v", got, err)
	}
}
