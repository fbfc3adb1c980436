package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Bounds of fetching the issuer's keys.
const (
	// MaxJWKSBytes bounds the answer of each fetch: the JWKS and the
	// authorization-server metadata.
	MaxJWKSBytes = 1 << 20
	// JWKSTimeout bounds one refresh of the keys, discovery included.
	JWKSTimeout = 10 * time.Second
	// MinJWKSRefresh is the least time between two fetches of the keys:
	// a token naming an unknown key id, or a failing issuer, cannot make
	// the gateway fetch more often.
	MinJWKSRefresh = 30 * time.Second
	// DefaultJWKSMaxAge is how long keys are kept when their answer has
	// no Cache-Control max-age; one that has is bounded to
	// [MinJWKSMaxAge, MaxJWKSMaxAge].
	DefaultJWKSMaxAge = time.Hour
	MinJWKSMaxAge     = time.Minute
	MaxJWKSMaxAge     = 24 * time.Hour
)

// minRSABits is the smallest RSA key taken from a JWKS (RFC 7518, section
// 3.3: "a key of size 2048 bits or larger MUST be used").
const minRSABits = 2048

// keySet is the issuer's signing keys, fetched lazily: on the first token,
// when they are older than their max-age, and when a token names a key id
// they lack. Fetches are at most one per MinJWKSRefresh, concurrent callers
// share one, and a failed fetch keeps the keys already held. It holds no
// goroutine: the caller that starts a fetch runs it.
type keySet struct {
	issuer string
	url    string // the configured jwks_url; "" discovers it
	client *http.Client
	now    func() time.Time
	logger *slog.Logger

	mu        sync.Mutex
	keys      *keys         // nil before the first good fetch
	expires   time.Time     // when keys are due for a refresh
	lastFetch time.Time     // when the last fetch started; zero before the first
	inflight  chan struct{} // closed when the running fetch ends; nil when none

	// discovered is the jwks_uri found by discovery; only the one running
	// fetch reads and writes it (fetches are ordered by mu and inflight).
	discovered string
}

// keys is one fetched JWKS: its usable signing keys, public parts only.
type keys struct {
	byKID map[string][]jose.JSONWebKey
	all   []jose.JSONWebKey
}

func newKeySet(opts Options, issuer, jwksURL string) *keySet {
	client := &http.Client{Timeout: JWKSTimeout}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		client = &c
	}
	if client.CheckRedirect == nil {
		client.CheckRedirect = checkRedirect
	}
	return &keySet{
		issuer: issuer,
		url:    jwksURL,
		client: client,
		now:    opts.Now,
		logger: opts.Logger.With("component", "auth"),
	}
}

// checkRedirect keeps redirects of key fetches on https (or loopback http),
// at most 5.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if err := checkFetchScheme(req.URL); err != nil {
		return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
	}
	return nil
}

// key returns the key that verifies a token with header kid and alg, or
// errJWTKey when the issuer has none such, errJWTNoKeys when no keys could
// be fetched at all.
func (ks *keySet) key(ctx context.Context, kid, alg string) (jose.JSONWebKey, error) {
	ks.mu.Lock()
	stale := ks.keys == nil || !ks.now().Before(ks.expires)
	ks.mu.Unlock()
	if stale {
		ks.refresh(ctx)
	}
	if k, ok := ks.current().find(kid, alg); ok {
		return k, nil
	}
	// An unknown key id may be a key the issuer has rotated in since.
	if ks.refresh(ctx) {
		if k, ok := ks.current().find(kid, alg); ok {
			return k, nil
		}
	}
	if ks.current() == nil {
		return jose.JSONWebKey{}, errJWTNoKeys
	}
	return jose.JSONWebKey{}, errJWTKey
}

func (ks *keySet) current() *keys {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys
}

// refresh fetches the keys, or waits for the fetch under way, and reports
// whether it did. It does nothing within MinJWKSRefresh of the last fetch.
func (ks *keySet) refresh(ctx context.Context) bool {
	ks.mu.Lock()
	if ch := ks.inflight; ch != nil {
		ks.mu.Unlock()
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	now := ks.now()
	if !ks.lastFetch.IsZero() && now.Sub(ks.lastFetch) < MinJWKSRefresh {
		ks.mu.Unlock()
		return false
	}
	ks.lastFetch = now
	ch := make(chan struct{})
	ks.inflight = ch
	ks.mu.Unlock()

	var (
		got *keys
		ttl time.Duration
		err error
	)
	defer func() {
		ks.mu.Lock()
		if got != nil {
			ks.keys, ks.expires = got, ks.now().Add(ttl)
		}
		held := ks.keys
		ks.inflight = nil
		close(ch)
		ks.mu.Unlock()
		if err != nil {
			n := 0
			if held != nil {
				n = len(held.all)
			}
			ks.logger.Warn("fetching the issuer's signing keys failed; keeping the keys held",
				"issuer", ks.issuer, "keys_held", n, "err", err)
		}
	}()
	// The fetch serves every caller waiting for it, so one caller going
	// away does not cancel it; JWKSTimeout bounds it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), JWKSTimeout)
	defer cancel()
	got, ttl, err = ks.fetch(fctx)
	return true
}

// fetch gets the JWKS, discovering its URL first when it is not
// configured, and returns its usable keys and how long to keep them.
func (ks *keySet) fetch(ctx context.Context) (*keys, time.Duration, error) {
	u := ks.url
	if u == "" {
		if ks.discovered == "" {
			d, err := ks.discover(ctx)
			if err != nil {
				return nil, 0, err
			}
			ks.discovered = d
		}
		u = ks.discovered
	}
	body, h, err := ks.get(ctx, u)
	if err == nil {
		var set *keys
		if set, err = parseJWKS(body); err == nil {
			return set, maxAge(h), nil
		}
		err = fmt.Errorf("jwks %s: %w", u, err)
	}
	ks.discovered = "" // discover again next time: the issuer may have moved it
	return nil, 0, err
}

// discover returns the jwks_uri of the issuer's authorization-server
// metadata (RFC 8414, section 3: /.well-known/oauth-authorization-server
// inserted before the issuer's path), else of its OpenID configuration
// (OpenID Connect Discovery 1.0, section 4: appended to it). The metadata
// must name the same issuer (RFC 8414, section 3.3).
func (ks *keySet) discover(ctx context.Context) (string, error) {
	iu, err := url.Parse(ks.issuer)
	if err != nil {
		return "", err
	}
	origin := iu.Scheme + "://" + iu.Host
	candidates := []string{
		origin + "/.well-known/oauth-authorization-server" + strings.TrimSuffix(iu.EscapedPath(), "/"),
		strings.TrimSuffix(ks.issuer, "/") + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, c := range candidates {
		body, _, err := ks.get(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var m struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		switch {
		case json.Unmarshal(body, &m) != nil:
			err = errors.New("not a JSON object")
		case m.Issuer != ks.issuer:
			err = fmt.Errorf("names issuer %q, not %q", m.Issuer, ks.issuer)
		case m.JWKSURI == "":
			err = errors.New("has no jwks_uri")
		default:
			if err = checkFetchURL(m.JWKSURI); err == nil {
				return m.JWKSURI, nil
			}
			err = fmt.Errorf("jwks_uri: %w", err)
		}
		errs = append(errs, fmt.Errorf("metadata %s: %w", c, err))
	}
	return "", fmt.Errorf("discovering the issuer's jwks_uri: %w", errors.Join(errs...))
}

// get fetches u, bounded by MaxJWKSBytes.
func (ks *keySet) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > MaxJWKSBytes {
		return nil, nil, fmt.Errorf("GET %s: the answer is larger than %d bytes", u, MaxJWKSBytes)
	}
	return body, resp.Header, nil
}

// parseJWKS returns the usable signing keys of a JWKS (RFC 7517, section
// 5): RSA of 2048 bits or more, ECDSA on P-256, P-384 or P-521, Ed25519;
// not marked for encryption; public parts only. Other keys are skipped, so
// one key the package cannot use does not lose the others.
func parseJWKS(body []byte) (*keys, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errors.New("not a JSON object with keys")
	}
	set := &keys{byKID: map[string][]jose.JSONWebKey{}}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) != nil || k.Use != "" && k.Use != "sig" {
			continue
		}
		k = k.Public() // an empty key for a symmetric one
		if !k.Valid() {
			continue
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < minRSABits {
				continue
			}
		case *ecdsa.PublicKey:
			if curveAlg(pub.Curve) == "" {
				continue
			}
		case ed25519.PublicKey:
		default:
			continue
		}
		k.Certificates = nil // only the key is used, not its chain
		set.all = append(set.all, k)
		set.byKID[k.KeyID] = append(set.byKID[k.KeyID], k)
	}
	if len(set.all) == 0 {
		return nil, fmt.Errorf("no usable signing key among %d", len(doc.Keys))
	}
	return set, nil
}

// find returns the key with id kid that fits alg. A token without a key id
// takes the one key that fits alg, if there is just one.
func (k *keys) find(kid, alg string) (jose.JSONWebKey, bool) {
	if k == nil {
		return jose.JSONWebKey{}, false
	}
	candidates := k.byKID[kid]
	if kid == "" {
		candidates = k.all
	}
	var found []jose.JSONWebKey
	for _, c := range candidates {
		if fits(c, alg) {
			found = append(found, c)
		}
	}
	if len(found) == 0 || kid == "" && len(found) > 1 {
		return jose.JSONWebKey{}, false
	}
	return found[0], true
}

// fits reports whether key may verify a signature by alg: its type (and
// curve) matches, and so does its own "alg" when it has one.
func fits(key jose.JSONWebKey, alg string) bool {
	if key.Algorithm != "" && key.Algorithm != alg {
		return false
	}
	switch pub := key.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return curveAlg(pub.Curve) == alg
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// curveAlg returns the ECDSA algorithm of curve c (RFC 7518, section 3.4).
func curveAlg(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// maxAge returns how long to keep keys fetched with header h: the
// Cache-Control max-age bounded to [MinJWKSMaxAge, MaxJWKSMaxAge], the
// least for no-store or no-cache, else DefaultJWKSMaxAge.
func maxAge(h http.Header) time.Duration {
	d := DefaultJWKSMaxAge
	for _, v := range h.Values("Cache-Control") {
		for dir := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return MinJWKSMaxAge
			case "max-age":
				if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 {
					d = time.Duration(min(n, int64(MaxJWKSMaxAge/time.Second))) * time.Second
				}
			}
		}
	}
	return min(max(d, MinJWKSMaxAge), MaxJWKSMaxAge)
}
