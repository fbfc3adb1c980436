package e2e

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The auth tests: OAuth 2.1 resource-server mode with JWTs from a
// local issuer, access rules per principal, and rate limits.

// issuer is a local authorization server: it serves its JWKS and mints
// RS256 tokens.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "e2e-key-1"}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": is.kid,
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// token mints a token with claims over the defaults (iss, sub, exp in an
// hour); alg "none" gives an unsigned one.
func (is *issuer) token(t *testing.T, alg string, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": is.srv.URL, "sub": "carol", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT", "kid": is.kid})
	p, _ := json.Marshal(c)
	signing := b64(h) + "." + b64(p)
	if alg == "none" {
		return signing + "."
	}
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
}

func TestAuth_JWT(t *testing.T) {
	is := newIssuer(t)
	g := startGateway(t, baseEnv(), fmt.Sprintf(`auth:
  jwt:
    issuer: %s
    jwks_url: %s/jwks
    scopes: [mcp]
    groups_claim: groups
servers:
  - name: local
    transport: stdio
    command: %s
`, is.srv.URL, is.srv.URL, bin("demo-server")))
	g.waitState(t, "local", "running")
	resource := g.URL + "/mcp"
	valid := map[string]any{"aud": resource, "scope": "mcp other"}

	// The protected-resource metadata names the resource and its issuer.
	resp, body := fetch(t, g.URL+"/.well-known/oauth-protected-resource", nil)
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &prm) != nil || prm.Resource != resource ||
		!slices.Equal(prm.AuthorizationServers, []string{is.srv.URL}) || !slices.Equal(prm.ScopesSupported, []string{"mcp"}) {
		t.Errorf("GET /.well-known/oauth-protected-resource = %d %s", resp.StatusCode, body)
	}

	// A valid token: a real client works with it.
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-jwt", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: httpClientWith(is.token(t, "RS256", valid))}, nil)
	if err != nil {
		t.Fatalf("connecting with a valid token: %v", err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__local__echo", Arguments: map[string]any{"text": "jwt"}}); err != nil || text(res) != "jwt" {
		t.Fatalf("calling with a valid token: %v %v", res, err)
	}

	with := func(over map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range valid {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	var tokens []string // every token used, to look for in the gateway's log
	defer func() {
		for _, tok := range tokens {
			if tok != "" && strings.Contains(g.Stderr(), tok) {
				t.Error("a token appears in the gateway's log")
			}
		}
	}()
	metadata := `resource_metadata="` + g.URL + `/.well-known/oauth-protected-resource"`
	tampered := is.token(t, "RS256", valid)
	tampered = tampered[:len(tampered)-4] + "AAAA"
	for _, tc := range []struct {
		name   string
		token  string
		status int
		header string
	}{
		{"none", "", 401, metadata},
		{"expired", is.token(t, "RS256", with(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})), 401, `error="invalid_token"`},
		{"wrong audience", is.token(t, "RS256", with(map[string]any{"aud": "https://other.example/mcp"})), 401, `error="invalid_token"`},
		{"wrong issuer", is.token(t, "RS256", with(map[string]any{"iss": "https://evil.example"})), 401, `error="invalid_token"`},
		{"alg none", is.token(t, "none", valid), 401, `error="invalid_token"`},
		{"tampered signature", tampered, 401, `error="invalid_token"`},
		{"missing scope", is.token(t, "RS256", with(map[string]any{"scope": "other"})), 403, `error="insufficient_scope"`},
	} {
		tokens = append(tokens, tc.token)
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.token != "" {
				hdr["Authorization"] = "Bearer " + tc.token
			}
			resp, body := rawPost(t, resource, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, hdr)
			www := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != tc.status || !strings.HasPrefix(www, "Bearer ") || !strings.Contains(www, tc.header) || !strings.Contains(www, metadata) {
				t.Errorf("POST /mcp = %d, WWW-Authenticate %q; want %d with %s and %s", resp.StatusCode, www, tc.status, tc.header, metadata)
			}
			if tc.token != "" && (strings.Contains(body, tc.token) || strings.Contains(www, tc.token)) {
				t.Error("the answer echoes the token")
			}
		})
	}
}

func TestAuth_AccessRules(t *testing.T) {
	const aliceKey, bobKey = "e2e-acl-alice-key", "e2e-acl-bob-key"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`auth:
  api_keys:
    - {principal: alice, key_sha256: %q, groups: [red]}
    - {principal: bob, key_sha256: %q, groups: [blue]}
acl:
  rules:
    - {effect: allow, groups: [red], servers: [one]}
    - {effect: allow, principals: [bob], servers: [two]}
    - {effect: deny, principals: [bob], tools: ["mcp__two__fail"]}
servers:
  - {name: one, transport: stdio, command: %s}
  - {name: two, transport: stdio, command: %s}
`, hashToken(aliceKey), hashToken(bobKey), bin("demo-server"), bin("demo-server")))
	g.waitState(t, "one", "running")
	g.waitState(t, "two", "running")

	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-acl", Version: "1"}, nil)
	dial := func(key string) *mcp.ClientSession {
		t.Helper()
		cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: httpClientWith(key)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := dial(aliceKey), dial(bobKey)
	prefixOnly := func(names []string, prefix string) bool {
		return len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) })
	}
	if names := toolNames(t, alice); !prefixOnly(names, "mcp__one__") {
		t.Errorf("alice's tools = %v, want server one's only", names)
	}
	bobs := toolNames(t, bob)
	if !prefixOnly(bobs, "mcp__two__") || slices.Contains(bobs, "mcp__two__fail") || !slices.Contains(bobs, "mcp__two__echo") {
		t.Errorf("bob's tools = %v, want server two's but fail", bobs)
	}
	// Each calls the other's tool: forbidden, naming the tool.
	for _, tc := range []struct {
		cs   *mcp.ClientSession
		tool string
	}{{alice, "mcp__two__echo"}, {bob, "mcp__one__echo"}, {bob, "mcp__two__fail"}} {
		_, err := tc.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"text": "x"}})
		if err == nil || !strings.Contains(err.Error(), "-31004") && !strings.Contains(err.Error(), "not allowed") || !strings.Contains(err.Error(), tc.tool) {
			t.Errorf("calling %s = %v, want the forbidden error naming it", tc.tool, err)
		}
	}
	if res, err := alice.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__one__echo", Arguments: map[string]any{"text": "mine"}}); err != nil || text(res) != "mine" {
		t.Errorf("alice calling her own tool: %v %v", res, err)
	}

	// Alice's session id with Bob's key: as if it did not exist.
	resp, _ := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		map[string]string{"Authorization": "Bearer " + aliceKey})
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	resp, _ = rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		map[string]string{"Authorization": "Bearer " + bobKey, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice's session with bob's key = %d, want 404", resp.StatusCode)
	}
}

func TestAuth_RateLimit(t *testing.T) {
	const key = "e2e-rate-key"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`auth:
  api_keys:
    - {principal: dora, key_sha256: %q}
rate_limits:
  per_principal: {rate: 1, burst: 3}
servers: []
`, hashToken(key)))
	post := func() *http.Response {
		resp, _ := rawPost(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
			map[string]string{"Authorization": "Bearer " + key})
		return resp
	}
	var limited *http.Response
	for range 10 {
		if resp := post(); resp.StatusCode == http.StatusTooManyRequests {
			limited = resp
			break
		}
	}
	if limited == nil {
		t.Fatal("ten quick requests with a burst of 3 were never limited")
	}
	wait, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	if err != nil || wait < 1 {
		t.Fatalf("429 with Retry-After %q, want whole seconds", limited.Header.Get("Retry-After"))
	}
	// It recovers: after Retry-After (and a little), a request passes.
	deadline := time.Now().Add(time.Duration(wait)*time.Second + 10*time.Second)
	time.Sleep(time.Duration(wait) * time.Second)
	for {
		resp := post()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d well after Retry-After", resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// verify checks an RS256 token of is and returns its subject: what an
// authorization server that trusts is does with it.
func (is *issuer) verify(tok string) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&is.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return "", err
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", err
	}
	if c.Iss != is.srv.URL || time.Now().Unix() > c.Exp {
		return "", fmt.Errorf("wrong issuer or expired")
	}
	return c.Sub, nil
}
