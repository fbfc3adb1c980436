package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

// Anonymous is the principal of requests without a token, when allowed.
const Anonymous = "anonymous"

// Principal is who made a request.
type Principal struct {
	// Name is the principal's name, which sessions, tasks, media, rate
	// limits and access rules bind to: an API key's principal as
	// configured (config validation allows no ":" in it), Anonymous, or
	// for a JWT its principal claim (config auth.jwt.principal_claim)
	// qualified by the issuer, "jwt:<issuer>#<claim value>"
	// (config.JWT.Qualify). So a token never gets a key's name, whatever
	// its claims, nor do the tokens of two issuers share one.
	Name string
	// Groups are the groups the principal belongs to: an API key's, or a
	// JWT's groups claim, each qualified by the issuer like Name.
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
	// principal; otherwise they get 401. A request with a token is
	// always checked. With no Keys and JWTs off, Anonymous turns auth off:
	// every request is anonymous and a token is ignored.
	Anonymous bool
	// JWT accepts OAuth 2.1 access tokens: JWTs signed by the issuer's
	// keys (config auth.jwt). Off when JWT.Issuer is "". Zero fields take
	// the defaults config.JWT documents: Audience is Resource, Algorithms
	// RS256 and ES256, Leeway config.DefaultJWTLeeway, PrincipalClaim
	// "sub", GroupsClaim "groups", AuthorizationServers the Issuer.
	JWT config.JWT
	// Resource is the gateway's resource URL, <public_url>/mcp (RFC 8707,
	// RFC 9728): the default audience of JWTs, the "resource" of the
	// protected-resource metadata, and, by its origin, where challenges
	// say that metadata is. Required with JWT; unused without it.
	Resource string
	// HTTPClient fetches the issuer's metadata and keys. If nil, a client
	// of the package's own. Either way each refresh is bounded by
	// JWKSTimeout and each answer by MaxJWKSBytes, and redirects (when the
	// client has no CheckRedirect of its own) must stay on https or a
	// loopback host.
	HTTPClient *http.Client
	// Now returns the current time, for tests. If nil, time.Now.
	Now func() time.Time
	// Logger receives the warnings about fetching the issuer's keys. Nil
	// discards them. No log line holds a token or a claim's value.
	Logger *slog.Logger
	// OnRefuse writes the answer to a request that Middleware refuses:
	// status (401, or 403 for a token without the required scopes) and a
	// body. msg says why and is safe to show: it never holds the token or
	// a claim's value. The WWW-Authenticate header is already set. The MCP
	// edge sets it to write a JSON-RPC error; nil writes plain text.
	OnRefuse func(w http.ResponseWriter, r *http.Request, status int, msg string)
}

// Authenticator names the principal of each request. It is safe for
// concurrent use and holds no goroutine; the issuer's keys are fetched
// during the requests that need them.
type Authenticator struct {
	opts Options
	keys map[[sha256.Size]byte]Principal
	jwt  *verifier         // nil when JWTs are off
	meta *resourceMetadata // nil when JWTs are off
}

// New returns an Authenticator for opts. The keys and the JWT settings
// must have passed config validation; a malformed one is an error here
// too, as are JWTs without a Resource. New does no I/O.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{opts: opts, keys: make(map[[sha256.Size]byte]Principal, len(opts.Keys))}
	for i, k := range opts.Keys {
		sum, ok := config.ParseTokenHash(k.KeySHA256)
		if !ok {
			return nil, fmt.Errorf("auth: api key %d of principal %q is not a sha256 hash", i, k.Principal)
		}
		// A token's names start "jwt:" (config.JWT.Qualify): a key's name
		// with a ":" could be one. Config's validPrincipal refuses it
		// first; this second check, in depth, is on purpose.
		if strings.Contains(k.Principal, ":") || slices.ContainsFunc(k.Groups, func(g string) bool { return strings.Contains(g, ":") }) {
			return nil, fmt.Errorf("auth: api key %d of principal %q has a \":\" in a name", i, k.Principal)
		}
		a.keys[sum] = Principal{Name: k.Principal, Groups: append([]string(nil), k.Groups...)}
	}
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	if a.opts.Logger == nil {
		a.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.JWT.Enabled() {
		meta, err := newResourceMetadata(opts.Resource, opts.JWT)
		if err != nil {
			return nil, err
		}
		v, err := newVerifier(a.opts, meta.resource)
		if err != nil {
			return nil, err
		}
		a.jwt, a.meta = v, meta
	}
	return a, nil
}

// Error is why Authenticate refused a request: the status and challenge
// of the answer, and a reason that is safe to show the client (it never
// holds the token or a claim's value).
type Error struct {
	// Status is http.StatusUnauthorized for a missing or bad token, or
	// http.StatusForbidden for a valid token without the required scopes.
	Status int
	// Challenge is the value of the answer's WWW-Authenticate header
	// (RFC 6750, section 3; RFC 9728, section 5.1).
	Challenge string
	// Err is the reason.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// The reasons for refusing a request. Those of invalidToken answer
// error="invalid_token"; errNoKey and errNoToken no error code (RFC 6750,
// section 3.1: the request had no credentials); errScope
// error="insufficient_scope".
var (
	errNoKey   = errors.New("this gateway needs an API key: send Authorization: Bearer <key>")
	errNoToken = errors.New("this gateway needs an API key or an OAuth access token: send Authorization: Bearer <token>")
	errScope   = errors.New("the access token lacks a scope this gateway requires")
)

// invalidToken is a reason a token is refused with error="invalid_token".
type invalidToken string

func (e invalidToken) Error() string { return string(e) }

const (
	errNotBearer    invalidToken = "the Authorization header is not one bearer token (Bearer and a token68, RFC 6750)"
	errBadKey       invalidToken = "the API key is not valid"
	errNotJWT       invalidToken = "the bearer token is neither a known API key nor a signed JWT"
	errJWTAlg       invalidToken = "the access token's signature algorithm is not accepted"
	errJWTKey       invalidToken = "the access token is signed with no key the issuer publishes"
	errJWTNoKeys    invalidToken = "the issuer's signing keys could not be fetched, so no access token can be checked now"
	errJWTSignature invalidToken = "the access token's signature is not valid"
	errJWTClaims    invalidToken = "the access token's claims are malformed"
	errJWTIssuer    invalidToken = "the access token is from another issuer"
	errJWTAudience  invalidToken = "the access token is not meant for this gateway (its audience)"
	errJWTNoExpiry  invalidToken = "the access token has no expiry (exp)"
	errJWTExpired   invalidToken = "the access token has expired"
	errJWTNotYet    invalidToken = "the access token is not valid yet (nbf or iat)"
	errJWTPrincipal invalidToken = "the access token names no valid principal"
	errJWTGroups    invalidToken = "the access token's groups are not a list of valid names"
)

// Authenticate returns the principal of r. A bearer token is tried as an
// API key first, then as a JWT when JWTs are on. A refusal is an *Error.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if len(a.keys) == 0 && a.jwt == nil && a.opts.Anonymous {
		// No keys and no issuer: auth is off, and a token (meant for
		// someone else, or left in a client's config) is ignored.
		return Principal{Name: Anonymous}, nil
	}
	hs := r.Header.Values("Authorization")
	if len(hs) == 0 || len(hs) == 1 && hs[0] == "" {
		if a.opts.Anonymous {
			return Principal{Name: Anonymous}, nil
		}
		if a.jwt != nil {
			return Principal{}, a.refuse(errNoToken)
		}
		return Principal{}, a.refuse(errNoKey)
	}
	token, ok := parseBearer(hs[0])
	if !ok || len(hs) > 1 {
		return Principal{}, a.refuse(errNotBearer)
	}
	// The map is keyed by the token's hash, so the lookup compares hashes,
	// which tell an attacker nothing about the keys.
	if p, ok := a.keys[sha256.Sum256([]byte(token))]; ok {
		return p, nil
	}
	if a.jwt == nil {
		return Principal{}, a.refuse(errBadKey)
	}
	p, err := a.jwt.verify(r.Context(), token)
	if err != nil {
		return Principal{}, a.refuse(err)
	}
	return p, nil
}

// refuse returns the *Error for reason.
func (a *Authenticator) refuse(reason error) *Error {
	e := &Error{Status: http.StatusUnauthorized, Err: reason}
	var code string
	if errors.Is(reason, errScope) {
		e.Status, code = http.StatusForbidden, "insufficient_scope"
	} else if _, bad := errors.AsType[invalidToken](reason); bad {
		code = "invalid_token"
	}
	e.Challenge = a.challenge(code)
	return e
}

// challenge returns the WWW-Authenticate value with error code (none if
// ""). With JWTs on it names the scopes required and where the
// protected-resource metadata is (MCP 2025-11-25, basic/authorization,
// "Protected Resource Metadata Discovery Requirements"); with API keys
// only it names the realm.
func (a *Authenticator) challenge(code string) string {
	var params []string
	if a.meta == nil {
		params = append(params, `realm="mcpgw"`)
	}
	if code != "" {
		params = append(params, `error="`+code+`"`)
	}
	if a.meta != nil {
		if len(a.meta.ScopesSupported) > 0 {
			params = append(params, "scope="+quote(strings.Join(a.meta.ScopesSupported, " ")))
		}
		params = append(params, "resource_metadata="+quote(a.meta.url))
	}
	return "Bearer " + strings.Join(params, ", ")
}

// quote returns s as an RFC 9110 quoted-string.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// Challenge returns the WWW-Authenticate value for a refusal by
// Authenticate (its *Error's Challenge); for any other error, that of an
// invalid token.
func (a *Authenticator) Challenge(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Challenge
	}
	return a.challenge("invalid_token")
}

// Middleware puts the request's principal in its context, or answers the
// refusal: 401 (403 for missing scopes) with a WWW-Authenticate challenge
// and OnRefuse's body.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			e, _ := errors.AsType[*Error](err)
			w.Header().Set("WWW-Authenticate", e.Challenge)
			if a.opts.OnRefuse != nil {
				a.opts.OnRefuse(w, r, e.Status, e.Error())
				return
			}
			http.Error(w, e.Error(), e.Status)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}
