package modern

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// FuzzCheck: whatever a client sends, check never panics, and what it
// admits has a supported version whose header matches, a method header
// that matches, and no reserved _meta key left for the core.
func FuzzCheck(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",`+meta+`}}`, "2026-07-28", "tools/call", "x")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`, "2026-07-28", "tools/list", "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:b",`+meta+`}}`, "2026-07-28", "resources/read", "=?base64?YTpi?=")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__region","arguments":{"region":"eu"},`+meta+`}}`, "2026-07-28", "tools/call", "mcp__a__region")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t1",`+metaTasks+`}}`, "2026-07-28", "tasks/get", "t1")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"t1","inputResponses":{"k":{}},`+metaTasks+`}}`, "2026-07-28", "tasks/update", "t1")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":1},`+metaTasks+`}}`, "2026-07-28", "tools/call", "x")
	h := newEnv(f, gateway.Options{}, Options{}).h
	f.Fuzz(func(t *testing.T, body, version, method, name string) {
		msgs, batch, err := jsonrpc.ParseOwnedStrict([]byte(body))
		if err != nil || batch || !msgs[0].IsRequest() {
			return
		}
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set(front.HeaderProtocolVersion, version)
		r.Header.Set(front.HeaderMethod, method)
		r.Header.Set(front.HeaderName, name)
		req, status, jerr := h.check(r, msgs[0])
		if jerr != nil {
			if status != 400 {
				t.Fatalf("a refusal in status %d: %v", status, jerr)
			}
			return
		}
		if member := nameMember(msgs[0].Method); member != "" {
			want, _ := rawjson.String(msgs[0].Params, member)
			if got, err := front.DecodeHeader(name); err != nil || got != want {
				t.Fatalf("admitted an Mcp-Name header %q for params.%s %q", name, member, want)
			}
		}
		if msgs[0].Method == "tools/call" {
			if _, ok, _ := rawjson.Get(req.params, "task"); ok {
				t.Fatalf("params.task left for the core: %s", req.params)
			}
		}
		if req.version != Version || strings.TrimSpace(r.Header.Get(front.HeaderProtocolVersion)) != Version {
			t.Fatalf("admitted version %q", req.version)
		}
		if strings.TrimSpace(method) != msgs[0].Method {
			t.Fatalf("admitted a method header %q for %q", method, msgs[0].Method)
		}
		if m, ok, _ := rawjson.Get(req.params, "_meta"); ok {
			keys, _ := rawjson.Keys(m)
			for _, k := range keys {
				if front.ReservedKey(k) {
					t.Fatalf("reserved key %q left in %s", k, req.params)
				}
			}
		}
	})
}
