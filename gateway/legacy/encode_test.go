package legacy

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestEncodeResult(t *testing.T) {
	// tool has every member some version lacks, odd spacing and HTML
	// characters, which must survive where nothing is removed.
	const tool = `{"name":"t", "title":"T","description":"a <b> & c","inputSchema":{"type":"object" ,"properties":{}},"outputSchema":{"type":"object"},"icons":[{"src":"x"}],"execution":{"taskSupport":"forbidden"},"annotations":{"title":"A"},"_meta":{"k":1}}`
	const bare = `{"name":"u","inputSchema":{"type":"object"}}`
	list := `{"tools":[` + tool + `, ` + bare + `],"nextCursor":"c"}`
	tests := []struct {
		name, version, method, in, want string
	}{
		{"list 2025-11-25 untouched", V20251125, "tools/list", list, list},
		{"list 2025-06-18", V20250618, "tools/list", list,
			`{"tools":[{"name":"t","title":"T","description":"a <b> & c","inputSchema":{"type":"object" ,"properties":{}},"outputSchema":{"type":"object"},"annotations":{"title":"A"},"_meta":{"k":1}}, ` + bare + `],"nextCursor":"c"}`},
		{"list 2025-03-26", V20250326, "tools/list", list,
			`{"tools":[{"name":"t","description":"a <b> & c","inputSchema":{"type":"object" ,"properties":{}},"annotations":{"title":"A"}}, ` + bare + `],"nextCursor":"c"}`},
		{"list with nothing to drop keeps its bytes", V20250326, "tools/list", `{"tools":[` + bare + ` , ` + bare + `] }`, `{"tools":[` + bare + ` , ` + bare + `] }`},
		{"list without tools", V20250326, "tools/list", `{}`, `{}`},
		{"list that is not an object", V20250326, "tools/list", `[1]`, `[1]`},
		{"list with tools not an array", V20250326, "tools/list", `{"tools":3}`, `{"tools":3}`},
		{"list with odd elements", V20250618, "tools/list", `{"tools":[1,"x",{"name":"a","icons":[]}]}`, `{"tools":[1,"x",{"name":"a"}]}`},
		{"call 2025-11-25 untouched", V20251125, "tools/call",
			`{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{"a":1}}`,
			`{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{"a":1}}`},
		{"call 2025-06-18 untouched", V20250618, "tools/call",
			`{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{"a":1}}`,
			`{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{"a":1}}`},
		{"call 2025-03-26 link with title", V20250326, "tools/call",
			`{"content":[{"type":"text","text":"x"},{"type":"resource_link","uri":"file:///a","name":"a","title":"The A","mimeType":"text/plain","annotations":{"priority":1}}],"structuredContent":{"a":1},"isError":false}`,
			`{"content":[{"type":"text","text":"x"},{"type":"text","text":"The A: file:///a","annotations":{"priority":1}}],"isError":false}`},
		{"prompt 2025-03-26 link", V20250326, "prompts/get",
			`{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"assistant","content":{"type":"resource_link","uri":"https://gw/media/x.png","name":"image.png"}}]}`,
			`{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"assistant","content":{"type":"text","text":"image.png: https://gw/media/x.png"}}]}`},
		{"prompt 2025-06-18 untouched", V20250618, "prompts/get",
			`{"messages":[{"role":"assistant","content":{"type":"resource_link","uri":"u","name":"n"}}]}`,
			`{"messages":[{"role":"assistant","content":{"type":"resource_link","uri":"u","name":"n"}}]}`},
		{"call 2025-03-26 link with name only", V20250326, "tools/call",
			`{"content":[{"type":"resource_link","uri":"https://e/?a=1&b=<2>","name":"n"}]}`,
			`{"content":[{"type":"text","text":"n: https://e/?a=1&b=<2>"}]}`},
		{"call 2025-03-26 link without name", V20250326, "tools/call",
			`{"content":[{"type":"resource_link","uri":"u"}]}`,
			`{"content":[{"type":"text","text":"u"}]}`},
		{"call 2025-03-26 without links keeps its bytes", V20250326, "tools/call",
			`{"content":[ {"type":"image","data":"AA==","mimeType":"image/png"} ],"isError":true}`,
			`{"content":[ {"type":"image","data":"AA==","mimeType":"image/png"} ],"isError":true}`},
		{"call 2025-03-26 structuredContent only", V20250326, "tools/call",
			`{"content":[],"structuredContent":{"x":[1,2]}}`, `{"content":[]}`},
		{"call 2025-03-26 not an object", V20250326, "tools/call", `"x"`, `"x"`},
		{"other methods untouched", V20250326, "prompts/get", `{"structuredContent":1}`, `{"structuredContent":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(encodeResult(tt.version, tt.method, json.RawMessage(tt.in), false))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncodeResult_NonObject: what a 2026-07-28 server may return and the
// session era has no room for goes: an outputSchema that is not an object
// schema, a structuredContent that is not an object.
func TestEncodeResult_NonObject(t *testing.T) {
	tests := []struct {
		name, version, method, in, want string
		nonObjectOutput                 bool
	}{
		{"list with an array outputSchema", V20251125, "tools/list",
			`{"tools":[{"name":"a","outputSchema":{"type":"array","items":{}}},{"name":"b","outputSchema":{"type":"object"}},{"name":"c","outputSchema":true}]}`,
			`{"tools":[{"name":"a"},{"name":"b","outputSchema":{"type":"object"}},{"name":"c"}]}`, true},
		{"list with an array outputSchema, 2025-03-26", V20250326, "tools/list",
			`{"tools":[{"name":"a","title":"A","outputSchema":{"type":"array"}}]}`,
			`{"tools":[{"name":"a"}]}`, true},
		{"call with array structuredContent", V20251125, "tools/call",
			`{"content":[{"type":"text","text":"[1,2]"}],"structuredContent":[1,2]}`,
			`{"content":[{"type":"text","text":"[1,2]"}]}`, false},
		{"call with a string structuredContent", V20250618, "tools/call",
			`{"content":[],"structuredContent":"x"}`, `{"content":[]}`, false},
		{"read with cache hints", V20251125, "resources/read",
			`{"contents":[{"uri":"a","text":"ttlMs"}],"ttlMs":0,"cacheScope":"public","resultType":"complete"}`,
			`{"contents":[{"uri":"a","text":"ttlMs"}]}`, false},
		{"nested lookalikes stay", V20251125, "tools/call",
			`{"content":[],"structuredContent":{"ttlMs":1,"resultType":"x"}}`,
			`{"content":[],"structuredContent":{"ttlMs":1,"resultType":"x"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(encodeResult(tt.version, tt.method, json.RawMessage(tt.in), tt.nonObjectOutput))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"result keeps bytes", string(resultMessage(jsonrpc.IntID(1), json.RawMessage(`{"a": "<&>"}`))), `{"jsonrpc":"2.0","id":1,"result":{"a": "<&>"}}`},
		{"empty result", string(resultMessage(jsonrpc.StringID("x"), nil)), `{"jsonrpc":"2.0","id":"x","result":{}}`},
		{"error with null id", string(errorMessage(jsonrpc.ID{}, jsonrpc.NewError(-32600, "a <b>", nil))), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a <b>"}}`},
		{"error with data", string(errorMessage(jsonrpc.IntID(2), jsonrpc.NewError(-31005, "big", map[string]int{"limit": 3}))), `{"jsonrpc":"2.0","id":2,"error":{"code":-31005,"message":"big","data":{"limit":3}}}`},
		{"notification", string(notificationMessage("notifications/tools/list_changed", nil)), `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`},
		{"notification with params", string(notificationMessage("n", json.RawMessage(`{"p":1}`))), `{"jsonrpc":"2.0","method":"n","params":{"p":1}}`},
		{"request keeps bytes", string(requestMessage(jsonrpc.StringID("mcpgw-1"), "elicitation/create", json.RawMessage(`{"message": "<&>"}`))), `{"jsonrpc":"2.0","id":"mcpgw-1","method":"elicitation/create","params":{"message": "<&>"}}`},
		{"request without params", string(requestMessage(jsonrpc.StringID("mcpgw-2"), "roots/list", nil)), `{"jsonrpc":"2.0","id":"mcpgw-2","method":"roots/list"}`},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// FuzzEncodeResult feeds upstream results of any shape through every
// version's encoding: it must not panic, and valid JSON stays valid.
func FuzzEncodeResult(f *testing.F) {
	f.Add(`{"tools":[{"name":"t","icons":[],"title":"x"}]}`)
	f.Add(`{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{}}`)
	f.Add(`{"content":[{"type":"resource_link","annotations":null}]}`)
	f.Add(`{"tools":[1,[],{}],"tools":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		for _, v := range Versions {
			for _, m := range []string{"tools/list", "tools/call"} {
				out := encodeResult(v, m, json.RawMessage(in), true)
				if json.Valid([]byte(in)) && !json.Valid(out) {
					t.Fatalf("%s %s: valid %q became invalid %q", v, m, in, out)
				}
			}
		}
	})
}
