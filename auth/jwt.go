package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/config"
)

// MaxTokenBytes bounds a bearer token tried as a JWT; a longer one is
// refused before any parsing.
const MaxTokenBytes = 32 << 10

// maxNameBytes bounds a principal or group name taken from a JWT.
const maxNameBytes = 256

// defaultAlgorithms are the signature algorithms accepted when config
// names none.
var defaultAlgorithms = []string{"RS256", "ES256"}

// signingAlgorithms are the algorithms a configuration may accept: the
// asymmetric ones of RFC 7518 and EdDSA. "none" and HMAC (HS*) never: with
// a public key as the HMAC secret anyone could sign (alg confusion).
var signingAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// verifier checks JWT access tokens (RFC 9068 profile, RFC 7519 claims)
// against one issuer.
type verifier struct {
	issuer, audience string
	algs             []jose.SignatureAlgorithm
	leeway           time.Duration
	principalClaim   string
	groupsClaim      string
	qualify          func(claim string) string // config.JWT.Qualify
	scopes           []string
	now              func() time.Time
	keys             *keySet
}

// newVerifier returns the verifier of opts.JWT, whose default audience is
// resource.
func newVerifier(opts Options, resource string) (*verifier, error) {
	j := opts.JWT
	if err := checkFetchURL(j.Issuer); err != nil {
		return nil, fmt.Errorf("auth: jwt issuer: %w", err)
	}
	if strings.Contains(j.Issuer, "#") {
		// It would make the names of two issuers' principals ambiguous.
		// Config's Validate refuses it first (auth.jwt.issuer); this
		// second check, in depth, is on purpose.
		return nil, errors.New(`auth: jwt issuer: has a "#"`)
	}
	if j.JWKSURL != "" {
		if err := checkFetchURL(j.JWKSURL); err != nil {
			return nil, fmt.Errorf("auth: jwt jwks_url: %w", err)
		}
	}
	v := &verifier{
		issuer:         j.Issuer,
		audience:       cmpOr(j.Audience, resource),
		leeway:         time.Duration(j.Leeway),
		principalClaim: cmpOr(j.PrincipalClaim, "sub"),
		groupsClaim:    cmpOr(j.GroupsClaim, "groups"),
		qualify:        j.Qualify,
		scopes:         slices.Clone(j.Scopes),
		now:            opts.Now,
	}
	if v.leeway < 0 {
		return nil, errors.New("auth: jwt leeway is negative")
	}
	if v.leeway == 0 {
		v.leeway = config.DefaultJWTLeeway
	}
	algs := j.Algorithms
	if len(algs) == 0 {
		algs = defaultAlgorithms
	}
	for _, a := range algs {
		if !slices.Contains(signingAlgorithms, a) {
			return nil, fmt.Errorf("auth: jwt algorithm %q is not accepted: use one of %s", a, strings.Join(signingAlgorithms, ", "))
		}
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	for _, s := range v.scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return nil, fmt.Errorf("auth: jwt scope %q is not a scope token (RFC 6749, section 3.3)", s)
		}
	}
	v.keys = newKeySet(opts, j.Issuer, j.JWKSURL)
	return v, nil
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// verify returns the principal of a JWT access token, or the reason it is
// refused: an invalidToken, or errScope for a valid token without the
// required scopes. Only the header is read before the signature is
// checked, and nothing of the token goes into the reason.
func (v *verifier) verify(ctx context.Context, token string) (Principal, error) {
	if len(token) > MaxTokenBytes || strings.Count(token, ".") != 2 {
		return Principal{}, errNotJWT
	}
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		if _, ok := errors.AsType[*jose.ErrUnexpectedSignatureAlgorithm](err); ok {
			return Principal{}, errJWTAlg
		}
		return Principal{}, errNotJWT
	}
	h := jws.Signatures[0].Header
	key, err := v.keys.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return Principal{}, err
	}
	payload, err := jws.Verify(key.Key)
	if err != nil {
		return Principal{}, errJWTSignature
	}
	return v.claims(payload)
}

// claims checks the claims of a verified token (RFC 7519, section 4.1;
// RFC 9068, section 4) and maps them to a principal. Scopes come last, so
// that 403 is only ever the answer to an otherwise valid token.
func (v *verifier) claims(payload []byte) (Principal, error) {
	// A map, not a struct: claim names match exactly (encoding/json would
	// fold the case of struct fields).
	var c map[string]json.RawMessage
	if err := json.Unmarshal(payload, &c); err != nil {
		return Principal{}, errJWTClaims
	}
	if iss, ok := stringClaim(c, "iss"); !ok || iss != v.issuer {
		return Principal{}, errJWTIssuer
	}
	if aud, ok := stringsClaim(c, "aud"); !ok || !slices.Contains(aud, v.audience) {
		return Principal{}, errJWTAudience
	}
	now := v.now()
	exp, ok, err := dateClaim(c, "exp")
	switch {
	case err != nil:
		return Principal{}, err
	case !ok:
		return Principal{}, errJWTNoExpiry
	case !now.Before(exp.Add(v.leeway)):
		return Principal{}, errJWTExpired
	}
	for _, name := range []string{"nbf", "iat"} {
		t, ok, err := dateClaim(c, name)
		if err != nil {
			return Principal{}, err
		}
		if ok && now.Add(v.leeway).Before(t) {
			return Principal{}, errJWTNotYet
		}
	}
	name, ok := stringClaim(c, v.principalClaim)
	if !ok || !validJWTName(name) || name == Anonymous {
		return Principal{}, errJWTPrincipal
	}
	var groups []string
	if raw, ok := c[v.groupsClaim]; ok && string(raw) != "null" {
		groups, ok = stringsClaim(c, v.groupsClaim)
		if !ok || slices.ContainsFunc(groups, func(g string) bool { return !validJWTName(g) }) {
			return Principal{}, errJWTGroups
		}
	}
	if len(v.scopes) > 0 {
		have := map[string]bool{}
		for _, claim := range []string{"scope", "scp"} {
			if _, present := c[claim]; !present {
				continue
			}
			list, ok := stringsClaim(c, claim)
			if !ok {
				return Principal{}, errJWTClaims
			}
			for _, s := range list {
				for _, f := range strings.Fields(s) {
					have[f] = true
				}
			}
		}
		for _, s := range v.scopes {
			if !have[s] {
				return Principal{}, errScope
			}
		}
	}
	// The names are qualified by the issuer, so that no token is ever an
	// API key's principal or in a key's group (whose names hold no ":"),
	// nor another issuer's.
	for i, g := range groups {
		groups[i] = v.qualify(g)
	}
	return Principal{Name: v.qualify(name), Groups: groups}, nil
}

// stringClaim returns claim name when it is a JSON string.
func stringClaim(c map[string]json.RawMessage, name string) (string, bool) {
	var s string
	raw, ok := c[name]
	if !ok || json.Unmarshal(raw, &s) != nil || string(raw) == "null" {
		return "", false
	}
	return s, true
}

// stringsClaim returns claim name when it is a string (as a list of one)
// or a list of strings.
func stringsClaim(c map[string]json.RawMessage, name string) ([]string, bool) {
	if s, ok := stringClaim(c, name); ok {
		return []string{s}, true
	}
	var list []string
	raw, ok := c[name]
	if !ok || json.Unmarshal(raw, &list) != nil || list == nil {
		return nil, false
	}
	return list, true
}

// dateClaim returns claim name, a NumericDate (seconds since the epoch,
// maybe with a fraction), and whether it is present. Any other value is
// errJWTClaims.
func dateClaim(c map[string]json.RawMessage, name string) (time.Time, bool, error) {
	raw, ok := c[name]
	if !ok {
		return time.Time{}, false, nil
	}
	var f float64
	// 2^53 seconds is 285 million years: past it a float is no date.
	if json.Unmarshal(raw, &f) != nil || string(raw) == "null" || math.Abs(f) > 1<<53 {
		return time.Time{}, false, errJWTClaims
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// validJWTName reports whether s may name a principal or a group taken
// from a JWT: 1 to 256 bytes of UTF-8 without control characters. The
// issuer's names are not held to config's rule for API key principals,
// which is the operator's own.
func validJWTName(s string) bool {
	if s == "" || len(s) > maxNameBytes || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// checkFetchURL reports whether s is an absolute https URL, or http on a
// loopback host (as config validates), fit to fetch keys from.
func checkFetchURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return errors.New("not an absolute URL")
	}
	return checkFetchScheme(u)
}

func checkFetchScheme(u *url.URL) error {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && config.IsLoopback(u.Hostname()):
	default:
		return errors.New("must be https (or http on a loopback host)")
	}
	return nil
}
