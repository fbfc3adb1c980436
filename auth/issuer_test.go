package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// testKey is a signing key of the test issuer.
type testKey struct {
	kid, alg string
	priv     crypto.Signer
}

// Keys are made once: RSA generation is slow.
var testKeys = sync.OnceValue(func() map[string]*testKey {
	rsa1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	rsa2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	rsaSmall, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	ec1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return map[string]*testKey{
		"rsa1":  {kid: "rsa-1", alg: "RS256", priv: rsa1},
		"rsa2":  {kid: "rsa-2", alg: "RS256", priv: rsa2},
		"any":   {kid: "rsa-any", priv: rsa1}, // its JWK names no alg
		"small": {kid: "rsa-small", alg: "RS256", priv: rsaSmall},
		"ec1":   {kid: "ec-1", alg: "ES256", priv: ec1},
	}
})

func key(name string) *testKey { return testKeys()[name] }

// testIssuer is a local authorization server: its metadata, its
// OpenID configuration and its JWKS, with switches to rotate keys, fail
// and misbehave.
type testIssuer struct {
	srv *httptest.Server

	mu           sync.Mutex
	keys         []*testKey // served in the JWKS
	down         bool       // every answer 503
	oversize     bool       // the JWKS is over MaxJWKSBytes
	cacheControl string
	asMetadata   bool   // serve /.well-known/oauth-authorization-server
	oidc         bool   // serve /.well-known/openid-configuration
	metaIssuer   string // the issuer the metadata names; "" the right one

	jwksHits atomic.Int32
}

func newTestIssuer(t *testing.T, keys ...*testKey) *testIssuer {
	t.Helper()
	is := &testIssuer{keys: keys, asMetadata: true, oidc: true}
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *testIssuer) set(f func(is *testIssuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

func (is *testIssuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if r.URL.Path == "/jwks" {
		is.jwksHits.Add(1)
	}
	if is.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	issuer := is.srv.URL
	meta := func() {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"issuer": cmpOr(is.metaIssuer, issuer), "jwks_uri": issuer + "/jwks"})
	}
	switch {
	case r.URL.Path == "/.well-known/oauth-authorization-server" && is.asMetadata:
		meta()
	case r.URL.Path == "/.well-known/openid-configuration" && is.oidc:
		meta()
	case r.URL.Path == "/redirect":
		http.Redirect(w, r, "http://keys.example/jwks", http.StatusFound)
	case r.URL.Path == "/jwks":
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: k.alg, Use: "sig"})
		}
		b, err := json.Marshal(set)
		if err != nil {
			panic(err)
		}
		if is.oversize {
			b = append(b[:len(b)-1], []byte(`,"padding":"`+strings.Repeat("x", MaxJWKSBytes)+`"}`)...)
		}
		if is.cacheControl != "" {
			w.Header().Set("Cache-Control", is.cacheControl)
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

var b64Encoding = base64.RawURLEncoding

func b64(b []byte) string { return b64Encoding.EncodeToString(b) }

// mint returns a compact JWS of claims signed by k. header entries
// override the defaults (alg and kid of k, typ JWT), a nil value deletes
// one. Header alg "none" gives no signature; "HS256" signs with secret.
func mint(t testing.TB, k *testKey, header, claims map[string]any, secret []byte) string {
	t.Helper()
	h := map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"}
	for n, v := range header {
		if v == nil {
			delete(h, n)
		} else {
			h[n] = v
		}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64(hb) + "." + b64(cb)
	var sig []byte
	switch alg := h["alg"]; alg {
	case "none":
	case "HS256":
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	case "RS256", "RS384":
		hash, sum := crypto.SHA256, sha256.Sum256([]byte(input))
		digest := sum[:]
		if alg == "RS384" {
			s := sha512.Sum384([]byte(input))
			hash, digest = crypto.SHA384, s[:]
		}
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.priv.(*rsa.PrivateKey), hash, digest)
	case "ES256":
		sum := sha256.Sum256([]byte(input))
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, k.priv.(*ecdsa.PrivateKey), sum[:])
		if err == nil {
			sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		}
	default:
		t.Fatalf("mint: alg %v", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

// publicPEM returns k's public key in PEM, the HMAC secret of an
// alg-confusion attack (a verifier that feeds the key it holds to
// whatever algorithm the token names).
func publicPEM(t testing.TB, k *testKey) []byte {
	b, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: b})
}

// jwtClock is a settable Now.
type jwtClock struct {
	mu sync.Mutex
	t  time.Time
}

func newJWTClock() *jwtClock { return &jwtClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *jwtClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *jwtClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer collects log lines from concurrent requests.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
