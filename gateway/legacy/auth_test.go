package legacy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
)

func apiKey(principal, token string) config.APIKey {
	s := sha256.Sum256([]byte(token))
	return config.APIKey{Principal: principal, KeySHA256: "sha256:" + hex.EncodeToString(s[:])}
}

// With Auth, a request needs a key (401 with a challenge otherwise), and a
// session belongs to the key's principal: another principal's key gets 404.
func TestAuth(t *testing.T) {
	a, err := auth.New(auth.Options{Keys: []config.APIKey{apiKey("alice", "alice-key"), apiKey("bob", "bob-key")}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Auth: a})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

	resp := e.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="mcpgw"` || !strings.Contains(body, `"id":null`) {
		t.Errorf("no key: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	resp = e.post("", list, "Authorization", "Bearer wrong")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) || strings.Contains(readAll(t, resp), "wrong") {
		t.Errorf("bad key: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	sid := e.initialize(V20251125, "Authorization", "Bearer alice-key")
	if resp := e.post(sid, list, "Authorization", "Bearer alice-key"); resp.StatusCode != http.StatusOK {
		t.Errorf("alice on her session: %d", resp.StatusCode)
	}
	if resp := e.post(sid, list, "Authorization", "Bearer bob-key"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob on alice's session: %d, want 404", resp.StatusCode)
	}
	for _, s := range e.h.Sessions() {
		if s.Principal != "alice" {
			t.Errorf("session principal %q, want alice", s.Principal)
		}
	}
}

// The groups of the auth principal reach the core with each request: the
// core's access rules let a group use server "a", and only the key whose
// principal is in it sees and calls its tools.
func TestAuth_Groups(t *testing.T) {
	alice := apiKey("alice", "alice-key")
	alice.Groups = []string{"ops", "eng"}
	a, err := auth.New(auth.Options{Keys: []config.APIKey{alice, apiKey("bob", "bob-key")}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvCore(t, Options{Auth: a}, gateway.Options{ACL: config.ACL{Rules: []config.ACLRule{
		{Effect: config.ACLAllow, Groups: []string{"eng"}, Servers: []string{"a"}},
	}}})
	tests := []struct {
		name, key string
		wantTools bool
		wantCall  string // the result, or the error's code and message
	}{
		{name: "in the group", key: "alice-key", wantTools: true, wantCall: `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"text":"hi"}}`},
		{name: "not in it", key: "bob-key", wantCall: `-31004 tool "mcp__a__echo" is not allowed for this caller; ask the gateway's operator for access`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{"Authorization", "Bearer " + tt.key}
			sid := e.initialize(V20251125, hdr...)
			m := decode(t, []byte(readAll(t, e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, hdr...))))
			var list struct{ Tools []json.RawMessage }
			if m.Error != nil || json.Unmarshal(m.Result, &list) != nil {
				t.Fatalf("tools/list: %s %v", m.Result, m.Error)
			}
			if got := len(list.Tools) > 0; got != tt.wantTools {
				t.Errorf("tools/list has tools: %t, want %t (%s)", got, tt.wantTools, m.Result)
			}
			m = lastMessage(t, e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"hi"}}}`, hdr...))
			got := string(m.Result)
			if m.Error != nil {
				got = fmt.Sprintf("%d %s", m.Error.Code, m.Error.Message)
			}
			if got != tt.wantCall {
				t.Errorf("tools/call = %s, want %s", got, tt.wantCall)
			}
		})
	}
}
