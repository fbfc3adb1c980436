// Package auth says who is calling: principals from API keys, as HTTP
// middleware (func(http.Handler) http.Handler) that knows no echo and no
// MCP (STYLE.md). It is the first slice of the auth issue: API keys kept
// hashed in config, and anonymous access when config allows it; JWTs,
// access rules and rate limits attach here later.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/config"
)

// Anonymous is the principal of requests without a token, when allowed.
const Anonymous = "anonymous"

// Principal is who made a request.
type Principal struct {
	// Name is the principal's name: an API key's principal, or Anonymous.
	Name string
	// Groups are the groups the principal belongs to.
	Groups []string
}

// IsAnonymous reports whether p is the anonymous principal.
func (p Principal) IsAnonymous() bool { return p.Name == Anonymous }

type ctxKey struct{}

// FromContext returns the principal the middleware put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// Options configures an Authenticator.
type Options struct {
	// Keys are the accepted API keys (their SHA-256, never the keys).
	Keys []config.APIKey
	// Anonymous serves requests without a token as the Anonymous
	// principal; otherwise they get 401.
	Anonymous bool
	// OnRefuse writes the body of a 401; nil writes a plain text one. The
	// MCP edge sets it to write a JSON-RPC error. It must not echo the
	// token.
	OnRefuse func(w http.ResponseWriter, r *http.Request, msg string)
}

// Authenticator names the principal of each request.
type Authenticator struct {
	opts Options
	keys map[[sha256.Size]byte]Principal
}

// New returns an Authenticator for opts. The keys must have passed config
// validation; a malformed one is an error here too.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{opts: opts, keys: make(map[[sha256.Size]byte]Principal, len(opts.Keys))}
	for i, k := range opts.Keys {
		h, ok := strings.CutPrefix(k.KeySHA256, "sha256:")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("auth: api key %d of principal %q is not a sha256 hash", i, k.Principal)
		}
		var sum [sha256.Size]byte
		copy(sum[:], b)
		a.keys[sum] = Principal{Name: k.Principal, Groups: append([]string(nil), k.Groups...)}
	}
	return a, nil
}

// errNoToken and errBadToken are why a request is refused.
var (
	errNoToken  = errors.New("this gateway needs an API key: send Authorization: Bearer <key>")
	errBadToken = errors.New("the API key is not valid")
)

// Authenticate returns the principal of r.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if len(a.keys) == 0 && a.opts.Anonymous {
		// No keys at all: auth is off, and a token (meant for someone
		// else, or left in a client's config) is ignored.
		return Principal{Name: Anonymous}, nil
	}
	if h == "" {
		if a.opts.Anonymous {
			return Principal{Name: Anonymous}, nil
		}
		return Principal{}, errNoToken
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Principal{}, errBadToken
	}
	// The map is keyed by the token's hash, so the lookup compares hashes,
	// which tell an attacker nothing about the keys.
	p, ok := a.keys[sha256.Sum256([]byte(strings.TrimSpace(token)))]
	if !ok {
		return Principal{}, errBadToken
	}
	return p, nil
}

// Challenge returns the WWW-Authenticate value for a refusal by
// Authenticate.
func (a *Authenticator) Challenge(err error) string {
	if errors.Is(err, errBadToken) {
		return `Bearer realm="mcpgw", error="invalid_token"`
	}
	return `Bearer realm="mcpgw"`
}

// Middleware puts the request's principal in its context, or answers 401
// with a WWW-Authenticate challenge.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", a.Challenge(err))
			if a.opts.OnRefuse != nil {
				a.opts.OnRefuse(w, r, err.Error())
				return
			}
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}
