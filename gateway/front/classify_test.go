package front

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestClassify(t *testing.T) {
	const modernMeta = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	tests := []struct {
		name    string
		body    string
		session string
		version string
		want    Era
	}{
		{"modern request", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + modernMeta + `}`, "", "2026-07-28", Modern},
		{"modern meta without header", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + modernMeta + `}`, "", "", Modern},
		{"unknown version in meta", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0"}}}`, "", "v999.0.0", Modern},
		{"non-string version in meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`, "", "", Modern},
		{"modern initialize is modern (and refused there)", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + modernMeta + `}`, "", "2026-07-28", Modern},
		{"modern meta with a session", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + modernMeta + `}`, "sid", "2026-07-28", Modern},
		{"modern meta with a session and a legacy header", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + modernMeta + `}`, "sid", "2025-11-25", Legacy},
		{"legacy version in meta with a session", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, "sid", "2025-11-25", Legacy},
		{"legacy version in meta, no session", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, "", "", Modern},
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "", "", Legacy},
		{"initialize with a modern header", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "", "2026-07-28", Legacy},
		{"sessioned request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sid", "2025-11-25", Legacy},
		{"sessioned request with modern header", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sid", "2026-07-28", Legacy},
		{"no meta, modern header", `{"jsonrpc":"2.0","id":101,"method":"server/discover","params":{}}`, "", "2026-07-28", Modern},
		{"no meta, legacy header", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "2025-06-18", Legacy},
		{"no meta, no header", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "", Legacy},
		{"meta not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":[1]}}`, "", "", Legacy},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + modernMeta + `}]`, "", "2026-07-28", Legacy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := jsonrpc.ParseOwnedStrict([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			if tt.session != "" {
				h.Set(HeaderSessionID, tt.session)
			}
			if tt.version != "" {
				h.Set(HeaderProtocolVersion, tt.version)
			}
			if got := Classify(h, msgs, batch); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecodeHeader(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{"echo", "echo", false},
		{"  echo \t", "echo", false},
		{"=?base64?ZWNobw==?=", "echo", false},
		{"=?base64?" + base64.StdEncoding.EncodeToString([]byte("héllo")) + "?=", "héllo", false},
		{"=?base64?***?=", "", true},
		{"=?base64?ZWNobw==", "=?base64?ZWNobw==", false}, // no suffix: literal
		{"=?base64??=", "", false},
	}
	for _, tt := range tests {
		got, err := DecodeHeader(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("DecodeHeader(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "", "2026-07-28")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "", "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sid", "2025-11-25")
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, "", "")
	f.Fuzz(func(t *testing.T, body, session, version string) {
		msgs, batch, err := jsonrpc.ParseOwnedStrict([]byte(body))
		if err != nil {
			return
		}
		h := http.Header{}
		h.Set(HeaderSessionID, session)
		h.Set(HeaderProtocolVersion, version)
		era := Classify(h, msgs, batch)
		// Invariants: a batch is never modern; an initialize is modern only
		// with a protocol version in its _meta; a request with neither
		// _meta version nor a non-legacy header is legacy.
		if batch && era == Modern {
			t.Fatalf("a batch classified modern")
		}
		if !batch && len(msgs) == 1 {
			_, hasMeta := metaVersion(msgs[0].Params)
			if !hasMeta && msgs[0].Method == "initialize" && era == Modern {
				t.Fatalf("initialize without _meta classified modern")
			}
			v := strings.TrimSpace(h.Get(HeaderProtocolVersion))
			if !hasMeta && (v == "" || IsLegacyVersion(v)) && era == Modern {
				t.Fatalf("a request with neither a _meta version nor a modern header classified modern")
			}
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	f.Add("echo")
	f.Add("=?base64?ZWNobw==?=")
	f.Add("=?base64?***?=")
	f.Fuzz(func(t *testing.T, s string) {
		// Whatever is encoded decodes back to itself.
		enc := "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
		got, err := DecodeHeader(enc)
		if err != nil || got != s {
			t.Fatalf("DecodeHeader(encode(%q)) = %q, %v", s, got, err)
		}
		DecodeHeader(s) // never panics
	})
}

func TestReservedKey(t *testing.T) {
	for k, want := range map[string]bool{
		"io.modelcontextprotocol/protocolVersion": true,
		"dev.mcp/x":                      true,
		"org.modelcontextprotocol.api/y": true,
		"com.example.mcp/z":              false,
		"progressToken":                  false,
		"traceparent":                    false,
		"dev.mcpgw/x":                    false,
	} {
		if got := ReservedKey(k); got != want {
			t.Errorf("ReservedKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestStripReserved(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"none", `{"name":"x","_meta":{"progressToken":1}}`, `{"name":"x","_meta":{"progressToken":1}}`},
		{"no _meta", `{"name":"io.modelcontextprotocol/x"}`, `{"name":"io.modelcontextprotocol/x"}`},
		{"some", `{"name":"x","_meta":{"io.modelcontextprotocol/clientInfo":{},"app.example/k":"v"}}`, `{"name":"x","_meta":{"app.example/k":"v"}}`},
		{"all", `{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","dev.mcp/y":1}}`, `{"name":"x"}`},
		{"spelled with escapes", `{"_meta":{"io\u002emodelcontextprotocol/clientInfo":{},"k":1}}`, `{"_meta":{"k":1}}`},
		{"an argument that looks reserved", `{"arguments":{"io.modelcontextprotocol/x":1}}`, `{"arguments":{"io.modelcontextprotocol/x":1}}`},
	}
	for _, tt := range tests {
		got, err := StripReserved(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: StripReserved = %s, %v; want %s", tt.name, got, err, tt.want)
		}
	}
}
