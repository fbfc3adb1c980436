package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
)

// TestPrincipal_SourcesApart: an API key's principal and a token's never
// share a name, whatever the token's claims say, nor do the tokens of two
// issuers; the same holds for groups. Sessions, tasks, media and rate
// limits bind to the name, so equal names would be one caller.
func TestPrincipal_SourcesApart(t *testing.T) {
	isA, isB := newTestIssuer(t, key("rsa1")), newTestIssuer(t, key("rsa1"))
	fa, fb := newFixture(t, isA, nil), newFixture(t, isB, nil)
	a, b := isA.srv.URL, isB.srv.URL
	bearer := func(f *fixture, claims map[string]any) string {
		return "Bearer " + mint(t, key("rsa1"), nil, f.claims(claims), nil)
	}
	tests := []struct {
		name          string
		f             *fixture
		authorization string
		want          Principal
	}{
		{"the API key of alice", fa, "Bearer alice-key", Principal{Name: "alice", Groups: []string{"ops"}}},
		{"a token of sub alice", fa, bearer(fa, map[string]any{"sub": "alice", "groups": []string{"ops"}}),
			Principal{Name: "jwt:" + a + "#alice", Groups: []string{"jwt:" + a + "#ops"}}},
		{"another issuer's token of sub alice", fb, bearer(fb, map[string]any{"sub": "alice", "groups": []string{"ops"}}),
			Principal{Name: "jwt:" + b + "#alice", Groups: []string{"jwt:" + b + "#ops"}}},
		{"a sub with a #", fa, bearer(fa, map[string]any{"sub": "x#alice", "groups": nil}),
			Principal{Name: "jwt:" + a + "#x#alice"}},
		{"a sub that is another issuer's name", fa, bearer(fa, map[string]any{"sub": "jwt:" + b + "#alice", "groups": []string{"jwt:" + b + "#ops"}}),
			Principal{Name: "jwt:" + a + "#jwt:" + b + "#alice", Groups: []string{"jwt:" + a + "#jwt:" + b + "#ops"}}},
		{"a sub that is its own issuer's name", fa, bearer(fa, map[string]any{"sub": "jwt:" + a + "#alice", "groups": nil}),
			Principal{Name: "jwt:" + a + "#jwt:" + a + "#alice"}},
	}
	owner := map[string]string{} // name → the case that got it
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f.do(t, tt.authorization)
			if got.status != 200 {
				t.Fatalf("status %d (%v), want 200", got.status, got.err)
			}
			if diff := cmp.Diff(tt.want, got.principal); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
			if prev, dup := owner[got.principal.Name]; dup {
				t.Errorf("%q and %q are both principal %q", prev, tt.name, got.principal.Name)
			}
			owner[got.principal.Name] = tt.name
		})
	}
}

// TestPrincipal_RateLimitsApart: the rate limit of a key's principal is not
// that of a token with the same sub, nor of another issuer's.
func TestPrincipal_RateLimitsApart(t *testing.T) {
	isA, isB := newTestIssuer(t, key("rsa1")), newTestIssuer(t, key("rsa1"))
	fa, fb := newFixture(t, isA, nil), newFixture(t, isB, nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l, err := NewRateLimiter(RateLimiterOptions{Rate: config.Rate{Rate: 0.001, Burst: 1}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	limited := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	viaA, viaB := fa.a.Middleware(limited), fb.a.Middleware(limited)
	tokenA := "Bearer " + mint(t, key("rsa1"), nil, fa.claims(map[string]any{"sub": "alice"}), nil)
	tokenB := "Bearer " + mint(t, key("rsa1"), nil, fb.claims(map[string]any{"sub": "alice"}), nil)
	steps := []struct {
		who  string
		h    http.Handler
		auth string
	}{
		{"key", viaA, "Bearer alice-key"},
		{"key", viaA, "Bearer alice-key"},
		{"token of A", viaA, tokenA},
		{"token of A", viaA, tokenA},
		{"token of B", viaB, tokenB},
		{"token of B", viaB, tokenB},
	}
	var got []string
	for _, s := range steps {
		req := httptest.NewRequest("POST", "/mcp", nil)
		req.Header.Set("Authorization", s.auth)
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		got = append(got, fmt.Sprintf("%s %d", s.who, rec.Code))
	}
	want := []string{"key 200", "key 429", "token of A 200", "token of A 429", "token of B 200", "token of B 429"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// FuzzClaims: whatever the claims of a verified token, the principal and
// groups it yields are named with the issuer, and so are never an API
// key's or anonymous.
func FuzzClaims(f *testing.F) {
	const issuer = "https://issuer.example/tenant"
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, err := New(Options{JWT: config.JWT{Issuer: issuer}, Resource: testResource, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	v := a.jwt
	valid := fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":%d,"sub":"alice","groups":["ops"]}`, issuer, testResource, now.Add(time.Hour).Unix())
	f.Add([]byte(valid))
	f.Add([]byte(strings.Replace(valid, `"alice"`, `"jwt:https://issuer.example/tenant#alice"`, 1)))
	f.Add([]byte(strings.Replace(valid, `["ops"]`, `"a#b"`, 1)))
	f.Add([]byte(`{"sub":"anonymous"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		p, err := v.claims(payload)
		if err != nil {
			return
		}
		prefix := "jwt:" + issuer + "#"
		for _, name := range append([]string{p.Name}, p.Groups...) {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok || !validJWTName(rest) {
				t.Errorf("a token's name %q is not %q and a valid claim value", name, prefix)
			}
		}
	})
}
