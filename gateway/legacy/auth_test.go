package legacy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
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
