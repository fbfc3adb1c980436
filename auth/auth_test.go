package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/config"
)

func keyOf(principal, token string, groups ...string) config.APIKey {
	s := sha256.Sum256([]byte(token))
	return config.APIKey{Principal: principal, KeySHA256: "sha256:" + hex.EncodeToString(s[:]), Groups: groups}
}

func TestMiddleware(t *testing.T) {
	keys := []config.APIKey{keyOf("alice", "alice-key", "ops"), keyOf("bob", "bob-key")}
	tests := []struct {
		name      string
		anonymous bool
		header    string
		status    int
		principal string
		challenge string
	}{
		{"alice", false, "Bearer alice-key", 200, "alice", ""},
		{"bob, lower-case scheme", false, "bearer bob-key", 200, "bob", ""},
		{"no token, anonymous allowed", true, "", 200, Anonymous, ""},
		{"no token, anonymous refused", false, "", 401, "", `Bearer realm="mcpgw"`},
		{"bad token", true, "Bearer nope", 401, "", `Bearer realm="mcpgw", error="invalid_token"`},
		{"not bearer", true, "Basic YWxpY2U6eA==", 401, "", `Bearer realm="mcpgw", error="invalid_token"`},
		{"empty bearer", true, "Bearer ", 401, "", `Bearer realm="mcpgw", error="invalid_token"`},
		{"not a token68", false, "Bearer alice key", 401, "", `Bearer realm="mcpgw", error="invalid_token"`},
		{"two headers", false, "Bearer alice-key\nBearer bob-key", 401, "", `Bearer realm="mcpgw", error="invalid_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Options{Keys: keys, Anonymous: tt.anonymous})
			if err != nil {
				t.Fatal(err)
			}
			var got Principal
			h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = FromContext(r.Context())
			}))
			req := httptest.NewRequest("POST", "/mcp", nil)
			for v := range strings.SplitSeq(tt.header, "\n") {
				if v != "" {
					req.Header.Add("Authorization", v)
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status || got.Name != tt.principal || rec.Header().Get("WWW-Authenticate") != tt.challenge {
				t.Errorf("status %d principal %q challenge %q; want %d %q %q", rec.Code, got.Name, rec.Header().Get("WWW-Authenticate"), tt.status, tt.principal, tt.challenge)
			}
			if strings.Contains(rec.Body.String(), "key") && strings.Contains(rec.Body.String(), "-key") {
				t.Errorf("the body echoes the token: %s", rec.Body)
			}
		})
	}
	// Without keys, auth is off: a token is ignored.
	off, _ := New(Options{Anonymous: true})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer whatever")
	if p, err := off.Authenticate(r); err != nil || p.Name != Anonymous {
		t.Errorf("auth off: %v, %v", p, err)
	}
	a, _ := New(Options{Keys: keys})
	p, _ := a.Authenticate(func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer alice-key")
		return r
	}())
	if len(p.Groups) != 1 || p.Groups[0] != "ops" {
		t.Errorf("groups = %v", p.Groups)
	}
	if _, err := New(Options{Keys: []config.APIKey{{Principal: "x", KeySHA256: "plain"}}}); err == nil {
		t.Error("New accepted a key that is not a hash")
	}
	// A key's names hold no ":", so that none is a token's (jwt:…).
	for _, k := range []config.APIKey{keyOf("jwt:https://issuer.example#alice", "k"), keyOf("alice", "k", "ops", "jwt:https://issuer.example#ops")} {
		if _, err := New(Options{Keys: []config.APIKey{k}}); err == nil || !strings.Contains(err.Error(), `":"`) {
			t.Errorf("New with key names %q %q: %v, want an error about the colon", k.Principal, k.Groups, err)
		}
	}
}

// TestMiddleware_OnRefuse: OnRefuse writes the answer, with its status,
// under the challenge already set.
func TestMiddleware_OnRefuse(t *testing.T) {
	var status int
	var msg, challenge string
	a, err := New(Options{Keys: []config.APIKey{keyOf("alice", "alice-key")}, OnRefuse: func(w http.ResponseWriter, r *http.Request, s int, m string) {
		status, msg, challenge = s, m, w.Header().Get("WWW-Authenticate")
		w.WriteHeader(s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next called") }))
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer wrong-key")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || status != 401 || msg != errBadKey.Error() || challenge != `Bearer realm="mcpgw", error="invalid_token"` {
		t.Errorf("OnRefuse got %d %q %q, answer %d", status, msg, challenge, rec.Code)
	}
	if _, err := New(Options{Keys: []config.APIKey{{Principal: "x", KeySHA256: "plain"}}}); err == nil {
		t.Error("New accepted a key that is not a hash")
	}
}
