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
			// Only a 2025 task request is refused in a 200: its headers
			// were right.
			if status != 400 && !(status == 200 && strings.Contains(jerr.Message, "2025-11-25 task")) {
				t.Fatalf("a refusal in status %d: %v", status, jerr)
			}
			return
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
