package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
)

const testResource = "https://gw.example/mcp"

// fixture is an Authenticator with JWTs from a local issuer, its clock and
// its log.
type fixture struct {
	is    *testIssuer
	clock *jwtClock
	logs  *logBuffer
	a     *Authenticator
}

func newFixture(t *testing.T, is *testIssuer, mod func(o *Options)) *fixture {
	t.Helper()
	f := &fixture{is: is, clock: newJWTClock(), logs: &logBuffer{}}
	opts := Options{
		Keys:       []config.APIKey{keyOf("alice", "alice-key", "ops")},
		JWT:        config.JWT{Issuer: is.srv.URL, JWKSURL: is.srv.URL + "/jwks", Scopes: []string{"mcp:tools"}},
		Resource:   testResource,
		HTTPClient: is.srv.Client(),
		Now:        f.clock.Now,
		Logger:     f.logs.logger(),
	}
	if mod != nil {
		mod(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	return f
}

// claims returns valid claims for f's issuer at f's clock, changed by
// over (a nil value deletes a claim).
func (f *fixture) claims(over map[string]any) map[string]any {
	now := f.clock.Now()
	c := map[string]any{
		"iss":    f.is.srv.URL,
		"aud":    testResource,
		"sub":    "carol",
		"exp":    now.Add(time.Hour).Unix(),
		"iat":    now.Unix(),
		"groups": []string{"ops", "dev"},
		"scope":  "mcp:tools other",
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// named returns p as a token of f's issuer names it: each name is a
// claim's value, "jwt:<issuer>#<value>".
func (f *fixture) named(p Principal) Principal {
	q := Principal{Name: "jwt:" + f.is.srv.URL + "#" + p.Name}
	for _, g := range p.Groups {
		q.Groups = append(q.Groups, "jwt:"+f.is.srv.URL+"#"+g)
	}
	return q
}

// result is what a request through f's middleware got.
type result struct {
	status    int
	principal Principal
	challenge string
	body      string
	err       error
}

func (f *fixture) do(t *testing.T, authorization string) result {
	t.Helper()
	var res result
	h := f.a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res.principal, _ = FromContext(r.Context())
	}))
	req := httptest.NewRequest("POST", "/mcp", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res.status, res.challenge, res.body = rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body.String()
	_, res.err = f.a.Authenticate(req)
	return res
}

// assertNoLeak fails if any part of token, or the secret claim values,
// shows in s.
func assertNoLeak(t *testing.T, where, s, token string, values ...string) {
	t.Helper()
	for _, part := range strings.Split(token, ".") {
		if len(part) >= 8 && strings.Contains(s, part) {
			t.Errorf("%s holds part of the token: %q", where, s)
		}
	}
	for _, v := range values {
		if v != "" && strings.Contains(s, v) {
			t.Errorf("%s holds the claim value %q: %q", where, v, s)
		}
	}
}

func TestJWT(t *testing.T) {
	rsa1, ec1 := key("rsa1"), key("ec1")
	tests := []struct {
		name   string
		mod    func(o *Options)
		key    *testKey       // signs; rsa1 if nil
		header map[string]any // over the default header
		claims map[string]any // over the default claims
		mangle func(token string) string
		secret func(t testing.TB) []byte // the HMAC secret for alg HS256

		status int
		want   Principal // when 200: the claims' values (see fixture.named)
		reason error     // when not 200
	}{
		{name: "valid RS256", status: 200, want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "valid ES256", key: ec1, mod: func(o *Options) { o.JWT.Algorithms = []string{"ES256"} },
			status: 200, want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "groups as one string", claims: map[string]any{"groups": "ops"}, status: 200, want: Principal{Name: "carol", Groups: []string{"ops"}}},
		{name: "no groups", claims: map[string]any{"groups": nil}, status: 200, want: Principal{Name: "carol"}},
		{name: "groups from another claim", mod: func(o *Options) { o.JWT.GroupsClaim = "roles" },
			claims: map[string]any{"roles": []string{"admin"}}, status: 200, want: Principal{Name: "carol", Groups: []string{"admin"}}},
		{name: "principal from another claim", mod: func(o *Options) { o.JWT.PrincipalClaim = "email" },
			claims: map[string]any{"email": "carol@example.com"}, status: 200, want: Principal{Name: "carol@example.com", Groups: []string{"ops", "dev"}}},
		{name: "any printable principal", claims: map[string]any{"sub": "auth0|carol Ünïcode/1"}, status: 200,
			want: Principal{Name: "auth0|carol Ünïcode/1", Groups: []string{"ops", "dev"}}},
		{name: "no kid, one key fits", key: ec1, mod: func(o *Options) { o.JWT.Algorithms = []string{"RS256", "ES256"} }, header: map[string]any{"kid": nil},
			status: 200, want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "no kid, two keys fit", header: map[string]any{"kid": nil}, status: 401, reason: errJWTKey},
		{name: "fractional dates", claims: map[string]any{"exp": float64(newJWTClock().Now().Unix()) + 60.5}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},

		{name: "expired", claims: map[string]any{"exp": newJWTClock().Now().Add(-time.Hour).Unix()}, status: 401, reason: errJWTExpired},
		{name: "expired within leeway", claims: map[string]any{"exp": newJWTClock().Now().Add(-29 * time.Second).Unix()}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "expired at the leeway", claims: map[string]any{"exp": newJWTClock().Now().Add(-30 * time.Second).Unix()}, status: 401, reason: errJWTExpired},
		{name: "expired beyond a set leeway", mod: func(o *Options) { o.JWT.Leeway = config.Duration(5 * time.Second) },
			claims: map[string]any{"exp": newJWTClock().Now().Add(-10 * time.Second).Unix()}, status: 401, reason: errJWTExpired},
		{name: "no exp", claims: map[string]any{"exp": nil}, status: 401, reason: errJWTNoExpiry},
		{name: "exp not a number", claims: map[string]any{"exp": "tomorrow"}, status: 401, reason: errJWTClaims},
		{name: "not yet valid", claims: map[string]any{"nbf": newJWTClock().Now().Add(time.Minute).Unix()}, status: 401, reason: errJWTNotYet},
		{name: "nbf within leeway", claims: map[string]any{"nbf": newJWTClock().Now().Add(20 * time.Second).Unix()}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "issued in the future", claims: map[string]any{"iat": newJWTClock().Now().Add(time.Minute).Unix()}, status: 401, reason: errJWTNotYet},
		{name: "iat within leeway", claims: map[string]any{"iat": newJWTClock().Now().Add(20 * time.Second).Unix()}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},

		{name: "wrong audience", claims: map[string]any{"aud": "https://other.example/mcp"}, status: 401, reason: errJWTAudience},
		{name: "no audience", claims: map[string]any{"aud": nil}, status: 401, reason: errJWTAudience},
		{name: "audience in an array", claims: map[string]any{"aud": []string{"https://other.example", testResource}}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "audience array without ours", claims: map[string]any{"aud": []string{"https://other.example"}}, status: 401, reason: errJWTAudience},
		{name: "configured audience", mod: func(o *Options) { o.JWT.Audience = "api://mcpgw" }, claims: map[string]any{"aud": "api://mcpgw"}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "configured audience, token for the resource", mod: func(o *Options) { o.JWT.Audience = "api://mcpgw" }, status: 401, reason: errJWTAudience},
		{name: "wrong issuer", claims: map[string]any{"iss": "https://evil.example"}, status: 401, reason: errJWTIssuer},

		{name: "alg none", header: map[string]any{"alg": "none"}, status: 401, reason: errJWTAlg},
		{name: "alg none, allowed keys notwithstanding", header: map[string]any{"alg": "none", "kid": nil}, status: 401, reason: errJWTAlg},
		{name: "HS256 with the public key as secret", header: map[string]any{"alg": "HS256"},
			secret: func(t testing.TB) []byte { return publicPEM(t, rsa1) }, status: 401, reason: errJWTAlg},
		{name: "alg not in the allow-list", header: map[string]any{"alg": "RS384"}, status: 401, reason: errJWTAlg},
		{name: "RS384 allowed", mod: func(o *Options) { o.JWT.Algorithms = []string{"RS384"} }, key: key("any"), header: map[string]any{"alg": "RS384"}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "alg other than the key's own", mod: func(o *Options) { o.JWT.Algorithms = []string{"RS256", "RS384"} }, header: map[string]any{"alg": "RS384"},
			status: 401, reason: errJWTKey},
		{name: "kid of a key of another type", key: ec1, header: map[string]any{"kid": rsa1.kid}, status: 401, reason: errJWTKey},
		{name: "tampered signature", mangle: func(tok string) string {
			i := strings.LastIndexByte(tok, '.')
			sig := must(base64Decode(tok[i+1:]))
			sig[10] ^= 1
			return tok[:i+1] + b64(sig)
		}, status: 401, reason: errJWTSignature},
		{name: "tampered payload", mangle: func(tok string) string {
			parts := strings.Split(tok, ".")
			parts[1] = b64([]byte(strings.Replace(string(must(base64Decode(parts[1]))), `"carol"`, `"admin"`, 1)))
			return strings.Join(parts, ".")
		}, status: 401, reason: errJWTSignature},
		{name: "not a JWT", mangle: func(string) string { return "some-opaque-token" }, status: 401, reason: errNotJWT},
		{name: "too long", mangle: func(tok string) string { return tok + strings.Repeat("A", MaxTokenBytes) }, status: 401, reason: errNotJWT},
		{name: "garbage in three parts", mangle: func(string) string { return "aaaa.bbbb.cccc" }, status: 401, reason: errNotJWT},

		{name: "missing scope", claims: map[string]any{"scope": "other"}, status: 403, reason: errScope},
		{name: "no scope at all", claims: map[string]any{"scope": nil}, status: 403, reason: errScope},
		{name: "scope via scp array", claims: map[string]any{"scope": nil, "scp": []string{"other", "mcp:tools"}}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "scope via scp string", claims: map[string]any{"scope": nil, "scp": "mcp:tools"}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "all of several scopes", mod: func(o *Options) { o.JWT.Scopes = []string{"a", "b"} }, claims: map[string]any{"scope": "b a"}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "one of several scopes", mod: func(o *Options) { o.JWT.Scopes = []string{"a", "b"} }, claims: map[string]any{"scope": "b"}, status: 403, reason: errScope},
		{name: "scope not a string", claims: map[string]any{"scope": 7}, status: 401, reason: errJWTClaims},
		{name: "no scopes required", mod: func(o *Options) { o.JWT.Scopes = nil }, claims: map[string]any{"scope": nil}, status: 200,
			want: Principal{Name: "carol", Groups: []string{"ops", "dev"}}},
		{name: "missing scope and expired", claims: map[string]any{"scope": "other", "exp": newJWTClock().Now().Add(-time.Hour).Unix()}, status: 401, reason: errJWTExpired},

		{name: "missing sub", claims: map[string]any{"sub": nil}, status: 401, reason: errJWTPrincipal},
		{name: "empty sub", claims: map[string]any{"sub": ""}, status: 401, reason: errJWTPrincipal},
		{name: "sub not a string", claims: map[string]any{"sub": 42}, status: 401, reason: errJWTPrincipal},
		{name: "sub anonymous", claims: map[string]any{"sub": "anonymous"}, status: 401, reason: errJWTPrincipal},
		{name: "sub with a control character", claims: map[string]any{"sub": "carol\nadmin"}, status: 401, reason: errJWTPrincipal},
		{name: "sub too long", claims: map[string]any{"sub": strings.Repeat("c", 257)}, status: 401, reason: errJWTPrincipal},
		{name: "sub of 256 bytes", claims: map[string]any{"sub": strings.Repeat("c", 256)}, status: 200,
			want: Principal{Name: strings.Repeat("c", 256), Groups: []string{"ops", "dev"}}},
		{name: "groups not strings", claims: map[string]any{"groups": []any{"ops", 1}}, status: 401, reason: errJWTGroups},
		{name: "groups an object", claims: map[string]any{"groups": map[string]any{"a": 1}}, status: 401, reason: errJWTGroups},
		{name: "group with a control character", claims: map[string]any{"groups": []string{"ops\x00"}}, status: 401, reason: errJWTGroups},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := tt.key
			if k == nil {
				k = key("rsa1")
			}
			is := newTestIssuer(t, key("rsa1"), key("ec1"), key("any"))
			f := newFixture(t, is, tt.mod)
			var secret []byte
			if tt.secret != nil {
				secret = tt.secret(t)
			}
			token := mint(t, k, tt.header, f.claims(tt.claims), secret)
			if tt.mangle != nil {
				token = tt.mangle(token)
			}
			got := f.do(t, "Bearer "+token)
			if got.status != tt.status {
				t.Fatalf("status %d (%v), want %d", got.status, got.err, tt.status)
			}
			if tt.status == 200 {
				if diff := cmp.Diff(f.named(tt.want), got.principal); diff != "" {
					t.Errorf("principal (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(got.err, tt.reason) {
				t.Errorf("reason %v, want %v", got.err, tt.reason)
			}
			if e, ok := errors.AsType[*Error](got.err); !ok || e.Status != tt.status || e.Challenge != got.challenge {
				t.Errorf("error %#v; want an *Error with status %d and the challenge sent", got.err, tt.status)
			}
			secrets := []string{"carol", "admin"}
			assertNoLeak(t, "the body", got.body, token, secrets...)
			assertNoLeak(t, "the challenge", got.challenge, token, secrets...)
			assertNoLeak(t, "the error", got.err.Error(), token, secrets...)
			assertNoLeak(t, "the log", f.logs.String(), token, secrets...)
		})
	}
}

func base64Decode(s string) ([]byte, error) {
	return b64Encoding.DecodeString(s)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestJWT_Challenges pins the WWW-Authenticate values exactly (RFC 6750,
// section 3; RFC 9728, section 5.1; MCP 2025-11-25, basic/authorization).
func TestJWT_Challenges(t *testing.T) {
	is := newTestIssuer(t, key("rsa1"))
	const meta = `resource_metadata="https://gw.example/.well-known/oauth-protected-resource"`
	tests := []struct {
		name      string
		scopes    []string
		anonymous bool
		auth      func(f *fixture) string
		status    int
		challenge string
		principal string
	}{
		{"no token", nil, false, func(*fixture) string { return "" }, 401, `Bearer ` + meta, ""},
		{"no token, scopes", []string{"mcp:tools", "mcp:admin"}, false, func(*fixture) string { return "" }, 401,
			`Bearer scope="mcp:tools mcp:admin", ` + meta, ""},
		{"no token, anonymous allowed", nil, true, func(*fixture) string { return "" }, 200, "", Anonymous},
		{"bad token", nil, false, func(*fixture) string { return "Bearer nope" }, 401, `Bearer error="invalid_token", ` + meta, ""},
		{"bad token, anonymous allowed", nil, true, func(*fixture) string { return "Bearer nope" }, 401, `Bearer error="invalid_token", ` + meta, ""},
		{"bad token, scopes", []string{"mcp:tools"}, false, func(*fixture) string { return "Bearer nope" }, 401,
			`Bearer error="invalid_token", scope="mcp:tools", ` + meta, ""},
		{"not bearer", nil, false, func(*fixture) string { return "Basic YWxpY2U6eA==" }, 401, `Bearer error="invalid_token", ` + meta, ""},
		{"insufficient scope", []string{"mcp:tools", "mcp:admin"}, false, func(f *fixture) string {
			return "Bearer " + mint(t, key("rsa1"), nil, f.claims(map[string]any{"scope": "mcp:tools"}), nil)
		}, 403, `Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", ` + meta, ""},
		{"api key beside JWT", []string{"mcp:tools"}, false, func(*fixture) string { return "Bearer alice-key" }, 200, "", "alice"},
		{"JWT beside api keys", nil, false, func(f *fixture) string { return "Bearer " + mint(t, key("rsa1"), nil, f.claims(nil), nil) }, 200, "", "jwt:" + is.srv.URL + "#carol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, is, func(o *Options) { o.JWT.Scopes, o.Anonymous = tt.scopes, tt.anonymous })
			got := f.do(t, tt.auth(f))
			if got.status != tt.status || got.challenge != tt.challenge || got.principal.Name != tt.principal {
				t.Errorf("got %d %q %q; want %d %q %q", got.status, got.challenge, got.principal.Name, tt.status, tt.challenge, tt.principal)
			}
			if tt.status != 200 && f.a.Challenge(got.err) != tt.challenge {
				t.Errorf("Challenge(err) = %q, want %q", f.a.Challenge(got.err), tt.challenge)
			}
		})
	}
}

// TestJWT_KeyRotation: the issuer rotates to a new key. A token signed
// with it names a kid the cached set lacks: it makes one refresh (once the
// rate limit allows) and passes.
func TestJWT_KeyRotation(t *testing.T) {
	is := newTestIssuer(t, key("rsa1"))
	f := newFixture(t, is, nil)
	if got := f.do(t, "Bearer "+mint(t, key("rsa1"), nil, f.claims(nil), nil)); got.status != 200 {
		t.Fatalf("old key: %d %v", got.status, got.err)
	}
	is.set(func(is *testIssuer) { is.keys = []*testKey{key("rsa2")} })
	f.clock.Add(MinJWKSRefresh)
	rotated := mint(t, key("rsa2"), nil, f.claims(nil), nil)
	if got := f.do(t, "Bearer "+rotated); got.status != 200 || got.principal.Name != "jwt:"+is.srv.URL+"#carol" {
		t.Fatalf("new key: %d %v", got.status, got.err)
	}
	// f.do authenticates twice (Middleware, then Authenticate): the
	// second found the new key cached.
	if n := is.jwksHits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (the first token, the rotation)", n)
	}
	// The old key is gone from the set: its tokens fail, and within the
	// rate limit no fetch is made for them.
	if got := f.do(t, "Bearer "+mint(t, key("rsa1"), nil, f.claims(nil), nil)); got.status != 401 || !errors.Is(got.err, errJWTKey) {
		t.Errorf("old key after rotation: %d %v", got.status, got.err)
	}
	if n := is.jwksHits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times, want still 2", n)
	}
}

// TestJWT_UnknownKid: a kid the issuer does not have fails, and makes at
// most one refresh per MinJWKSRefresh, however many requests name it and
// however concurrently.
func TestJWT_UnknownKid(t *testing.T) {
	is := newTestIssuer(t, key("rsa1"))
	f := newFixture(t, is, nil)
	if got := f.do(t, "Bearer "+mint(t, key("rsa1"), nil, f.claims(nil), nil)); got.status != 200 {
		t.Fatalf("known key: %d %v", got.status, got.err)
	}
	unknown := mint(t, key("rsa2"), nil, f.claims(nil), nil) // rsa-2 is not served
	tests := []struct {
		name     string
		advance  time.Duration
		requests int
		hits     int32
	}{
		{"within the rate limit", MinJWKSRefresh - time.Second, 5, 1},
		{"past it, concurrently", time.Second, 20, 2},
		{"again within it", MinJWKSRefresh - time.Second, 20, 2},
		{"past it again", time.Second, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.Add(tt.advance)
			var wg sync.WaitGroup
			statuses := make([]int, tt.requests)
			for i := range tt.requests {
				wg.Go(func() {
					req := httptest.NewRequest("POST", "/mcp", nil)
					req.Header.Set("Authorization", "Bearer "+unknown)
					_, err := f.a.Authenticate(req)
					if e, ok := errors.AsType[*Error](err); ok && errors.Is(err, errJWTKey) {
						statuses[i] = e.Status
					}
				})
			}
			wg.Wait()
			for i, s := range statuses {
				if s != 401 {
					t.Errorf("request %d: %d, want 401 with no key", i, s)
				}
			}
			if n := is.jwksHits.Load(); n != tt.hits {
				t.Errorf("JWKS fetched %d times in all, want %d", n, tt.hits)
			}
		})
	}
	assertNoLeak(t, "the log", f.logs.String(), unknown, "carol")
}

// TestJWT_SharedFetch: requests that all need the keys at once share one
// fetch.
func TestJWT_SharedFetch(t *testing.T) {
	is := newTestIssuer(t, key("rsa1"))
	f := newFixture(t, is, nil)
	token := mint(t, key("rsa1"), nil, f.claims(nil), nil)
	var wg sync.WaitGroup
	names := make([]string, 32)
	for i := range names {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			p, _ := f.a.Authenticate(req)
			names[i] = p.Name
		})
	}
	wg.Wait()
	for i, n := range names {
		if n != "jwt:"+is.srv.URL+"#carol" {
			t.Errorf("request %d: principal %q", i, n)
		}
	}
	if n := is.jwksHits.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1", n)
	}
}

// TestJWT_Refresh: keys are fetched again when their max-age passes, and
// a failed fetch keeps them.
func TestJWT_Refresh(t *testing.T) {
	is := newTestIssuer(t, key("rsa1"))
	is.set(func(is *testIssuer) { is.cacheControl = "public, max-age=120" })
	f := newFixture(t, is, nil)
	ok := func(step string, hits int32) {
		t.Helper()
		if got := f.do(t, "Bearer "+mint(t, key("rsa1"), nil, f.claims(nil), nil)); got.status != 200 {
			t.Fatalf("%s: %d %v", step, got.status, got.err)
		}
		if n := is.jwksHits.Load(); n != hits {
			t.Errorf("%s: JWKS fetched %d times, want %d", step, n, hits)
		}
	}
	ok("first", 1)
	f.clock.Add(119 * time.Second)
	ok("within max-age", 1)
	f.clock.Add(time.Second)
	ok("at max-age", 2)
	// The issuer goes down: past the max-age the keys are kept, and the
	// failure is logged, at most once per MinJWKSRefresh.
	is.set(func(is *testIssuer) { is.down = true })
	f.clock.Add(120 * time.Second)
	ok("issuer down", 3)
	ok("issuer down, rate limited", 3)
	if logs := f.logs.String(); strings.Count(logs, "fetching the issuer's signing keys failed") != 1 || !strings.Contains(logs, "keys_held=1") ||
		!strings.Contains(logs, "503") || !strings.Contains(logs, "level=WARN") {
		t.Errorf("log:\n%s", logs)
	}
}

// TestJWT_JWKSFailures: with no keys held, a failing or misbehaving issuer
// fails tokens with 401 and a logged warning, never a panic.
func TestJWT_JWKSFailures(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(o *Options)
		setup func(is *testIssuer)
		log   string
	}{
		{"down", nil, func(is *testIssuer) { is.down = true }, "503 Service Unavailable"},
		{"oversized", nil, func(is *testIssuer) { is.oversize = true }, "larger than 1048576 bytes"},
		{"no usable key", nil, func(is *testIssuer) { is.keys = []*testKey{key("small")} }, "no usable signing key among 1"},
		{"redirect off https", func(o *Options) { o.JWT.JWKSURL = o.JWT.Issuer + "/redirect" }, nil,
			"redirect to http://keys.example/jwks: must be https"},
		{"unreachable", func(o *Options) { o.JWT.JWKSURL = "http://127.0.0.1:1/jwks" }, nil, "connection refused"},
		{"discovery: metadata names another issuer", func(o *Options) { o.JWT.JWKSURL = "" },
			func(is *testIssuer) { is.metaIssuer = "https://evil.example" }, `names issuer \"https://evil.example\"`},
		{"discovery: no metadata", func(o *Options) { o.JWT.JWKSURL = "" },
			func(is *testIssuer) { is.asMetadata, is.oidc = false, false }, "404 Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := newTestIssuer(t, key("rsa1"))
			if tt.setup != nil {
				is.set(tt.setup)
			}
			f := newFixture(t, is, tt.mod)
			token := mint(t, key("rsa1"), nil, f.claims(nil), nil)
			got := f.do(t, "Bearer "+token)
			if got.status != 401 || !errors.Is(got.err, errJWTNoKeys) ||
				got.challenge != `Bearer error="invalid_token", scope="mcp:tools", resource_metadata="https://gw.example/.well-known/oauth-protected-resource"` {
				t.Errorf("got %d %q %v; want 401 with no keys", got.status, got.challenge, got.err)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "keys_held=0") || !strings.Contains(logs, tt.log) {
				t.Errorf("log lacks the warning with %q:\n%s", tt.log, logs)
			}
			assertNoLeak(t, "the log", logs, token, "carol")
		})
	}
}

// TestJWT_Discovery: without jwks_url, the JWKS is found through the
// issuer's authorization-server metadata, else its OpenID configuration.
func TestJWT_Discovery(t *testing.T) {
	tests := []struct {
		name       string
		asMetadata bool
		oidc       bool
	}{
		{"oauth-authorization-server", true, false},
		{"openid-configuration", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := newTestIssuer(t, key("rsa1"))
			is.set(func(is *testIssuer) { is.asMetadata, is.oidc = tt.asMetadata, tt.oidc })
			f := newFixture(t, is, func(o *Options) { o.JWT.JWKSURL = "" })
			if got := f.do(t, "Bearer "+mint(t, key("rsa1"), nil, f.claims(nil), nil)); got.status != 200 {
				t.Fatalf("%d %v\n%s", got.status, got.err, f.logs.String())
			}
		})
	}
}

// TestJWT_DiscoveryPaths pins the metadata URLs of an issuer with a path.
func TestJWT_DiscoveryPaths(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	ks := newKeySet(Options{HTTPClient: srv.Client(), Now: time.Now, Logger: (&logBuffer{}).logger()}, srv.URL+"/tenant/a", "")
	if _, err := ks.discover(context.Background()); err == nil {
		t.Fatal("discovery succeeded against 404s")
	}
	want := []string{"/.well-known/oauth-authorization-server/tenant/a", "/tenant/a/.well-known/openid-configuration"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestMaxAge(t *testing.T) {
	tests := []struct {
		header []string
		want   time.Duration
	}{
		{nil, time.Hour},
		{[]string{"public, max-age=600"}, 10 * time.Minute},
		{[]string{"max-age=5"}, time.Minute},
		{[]string{"max-age=999999999"}, 24 * time.Hour},
		{[]string{"max-age=99999999999999999999"}, time.Hour},
		{[]string{`max-age="300"`}, 5 * time.Minute},
		{[]string{"no-store"}, time.Minute},
		{[]string{"public", "Max-Age=120"}, 2 * time.Minute},
		{[]string{"max-age=-1"}, time.Hour},
	}
	for _, tt := range tests {
		h := http.Header{"Cache-Control": tt.header}
		if got := maxAge(h); got != tt.want {
			t.Errorf("maxAge(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestNew_JWT(t *testing.T) {
	jwt := config.JWT{Issuer: "https://issuer.example"}
	tests := []struct {
		name string
		opts Options
		want string // in the error; "" for none
	}{
		{"ok", Options{JWT: jwt, Resource: testResource}, ""},
		{"no resource", Options{JWT: jwt}, "Options.Resource"},
		{"relative resource", Options{JWT: jwt, Resource: "/mcp"}, "not an absolute"},
		{"resource with a fragment", Options{JWT: jwt, Resource: testResource + "#x"}, "not an absolute"},
		{"http issuer", Options{JWT: config.JWT{Issuer: "http://issuer.example"}, Resource: testResource}, "must be https"},
		{"loopback http issuer", Options{JWT: config.JWT{Issuer: "http://127.0.0.1:9"}, Resource: testResource}, ""},
		{"issuer with an empty fragment", Options{JWT: config.JWT{Issuer: "https://issuer.example/#"}, Resource: testResource}, `has a "#"`},
		{"http jwks", Options{JWT: config.JWT{Issuer: "https://issuer.example", JWKSURL: "http://keys.example"}, Resource: testResource}, "must be https"},
		{"HS256", Options{JWT: config.JWT{Issuer: "https://issuer.example", Algorithms: []string{"RS256", "HS256"}}, Resource: testResource}, `"HS256" is not accepted`},
		{"none", Options{JWT: config.JWT{Issuer: "https://issuer.example", Algorithms: []string{"none"}}, Resource: testResource}, `"none" is not accepted`},
		{"negative leeway", Options{JWT: config.JWT{Issuer: "https://issuer.example", Leeway: -1}, Resource: testResource}, "leeway"},
		{"scope with a quote", Options{JWT: config.JWT{Issuer: "https://issuer.example", Scopes: []string{`a"b`}}, Resource: testResource}, "not a scope token"},
		{"off: resource not needed", Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("New: %v; want an error with %q", err, tt.want)
			}
		})
	}
}
