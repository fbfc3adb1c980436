package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpgw/mcpgw/config"
)

// Transport returns the RoundTripper of one upstream client of srv, made
// for principal ("" for the gateway's own client of the server, which
// reads its lists): it sends next the requests with the token they need.
// Requests to another origin than srv's (a redirect elsewhere) go without
// one: a token is never sent to a server it was not issued for.
func (c *Client) Transport(srv config.Server, principal string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{c: c, server: srv.Name, origin: srv.URL, principal: principal, next: next}
}

type transport struct {
	c         *Client
	server    string
	origin    string // the server's URL, as configured when the client was made
	principal string
	next      http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	srv, ok := t.c.opts.Servers(t.server)
	if !ok || srv.OAuth == nil || !sameOrigin(req.URL.String(), t.origin) || !sameOrigin(srv.URL, t.origin) {
		return t.next.RoundTrip(req)
	}
	switch srv.GrantOf() {
	case config.GrantClientCredentials:
		return t.serviceAccount(req, srv)
	case config.GrantAuthorizationCode, config.GrantTokenExchange:
		return t.perUser(req, srv)
	}
	return nil, fmt.Errorf("server %q: oauth grant %s is not supported by this gateway", t.server, srv.GrantOf())
}

// errNoCatalogAccount is the gateway's own client's error while no
// principal has an account connected at a per-user server.
var errNoCatalogAccount = errors.New("no principal has connected an account yet; the gateway lists the server's tools once one has (until then it lists its connect tool)")

// catalogRefused starts the error of the gateway's own client whose
// account the server refused.
const catalogRefused = "refused the account the gateway lists it with"

// WaitsForAccount reports whether a server's last error (its status's
// text) says the gateway has no account to list it with, or the one it
// had was refused: a principal's connected account revives it.
func WaitsForAccount(errText string) bool {
	return strings.Contains(errText, errNoCatalogAccount.Error()) || strings.Contains(errText, catalogRefused)
}

func (t *transport) perUser(req *http.Request, srv config.Server) (*http.Response, error) {
	ctx := req.Context()
	principal := t.principal
	if principal == "" {
		// The gateway's own client reads the lists with the account of
		// some principal: tool definitions belong to the server, calls
		// never go this way (the server is per_principal).
		p, err := t.c.catalogPrincipal(ctx, srv.Name)
		if err != nil {
			return nil, err
		}
		if p == "" {
			return nil, errNoCatalogAccount
		}
		principal = p
	}
	rec, err := t.c.usable(ctx, srv, principal)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec, err = t.c.fresh(ctx, rec, false); err != nil {
			return nil, err
		}
	}
	if rec == nil {
		return nil, t.needConnect(principal, nil, "no account is connected, or its authorization ended")
	}
	resp, err := t.send(req, rec)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		drain(resp)
		if req.GetBody != nil || req.Body == nil {
			if next, err := t.c.fresh(ctx, rec, true); err != nil {
				return nil, err
			} else if next != nil {
				retry, err := rewind(req)
				if err != nil {
					return nil, err
				}
				if resp, err = t.send(retry, next); err != nil || resp.StatusCode != http.StatusUnauthorized {
					return resp, err
				}
				drain(resp)
				rec = next
			}
		}
		t.c.dropToken(ctx, rec)
		t.c.rediscover(srv)
		return nil, t.needConnect(principal, nil, "the server no longer accepts your authorization")
	case http.StatusForbidden:
		ch := parseChallenge(resp.Header)
		if ch.Error != "insufficient_scope" {
			return resp, nil
		}
		drain(resp)
		if len(ch.Scopes) == 0 || subset(ch.Scopes, rec.Scopes) {
			// Granted already: connecting again would ask for
			// the same and be refused the same, in a loop.
			return nil, fmt.Errorf("server %q refuses the request although the account has the permissions it asks for (%s)", t.server, strings.Join(ch.Scopes, " "))
		}
		want := union(rec.Scopes, ch.Scopes)
		return nil, t.needConnect(principal, want, "the server needs more permissions: "+strings.Join(ch.Scopes, " "))
	}
	return resp, nil
}

// usable returns principal's token for srv if it was issued for the
// server srv now is: a server whose URL an admin changed to another origin
// must not get the tokens of the one it replaced, which are forgotten.
func (c *Client) usable(ctx context.Context, srv config.Server, principal string) (*tokenRecord, error) {
	rec, err := c.token(ctx, srv.Name, principal)
	if err != nil || rec == nil {
		return nil, err
	}
	if rec.Resource != "" && !sameOrigin(rec.Resource, srv.URL) {
		c.logger.Warn("forgetting a token issued for another origin than the server's URL", "server", srv.Name, "principal", principal)
		c.dropToken(ctx, rec)
		return nil, nil
	}
	return rec, nil
}

// needConnect is the error of a request that needs principal to connect
// (again); for the gateway's own client, a plain error: there is no user
// to ask.
func (t *transport) needConnect(principal string, scopes []string, reason string) error {
	if t.principal == "" {
		return fmt.Errorf("server %q %s: %s", t.server, catalogRefused, reason)
	}
	if srv, ok := t.c.opts.Servers(t.server); ok && srv.GrantOf() == config.GrantTokenExchange {
		// Nothing for the user to do: the next request exchanges
		// their token again.
		return fmt.Errorf("server %q: %w (%s)", t.server, ErrExchangedTokenRefused, reason)
	}
	return t.c.connectRequired(t.server, principal, scopes, reason)
}

// send sends a copy of req with rec's access token.
func (t *transport) send(req *http.Request, rec *tokenRecord) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "Bearer "+rec.AccessToken)
	return t.next.RoundTrip(out)
}

// rewind returns req with its body again, to send it a second time.
func rewind(req *http.Request) (*http.Request, error) {
	out := req.Clone(req.Context())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		out.Body = b
	}
	return out, nil
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// subset reports whether every scope of a is in b.
func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// catalogPrincipal returns a principal with an account connected at
// server ("" when there is none), keeping the one it returned before
// while that one stays connected.
func (c *Client) catalogPrincipal(ctx context.Context, server string) (string, error) {
	c.catalogMu.Lock()
	defer c.catalogMu.Unlock()
	if p, ok := c.catalog[server]; ok {
		if rec, err := c.token(ctx, server, p); err == nil && rec != nil {
			return p, nil
		}
		delete(c.catalog, server)
	}
	ps, err := c.opts.Store.ListOAuthPrincipals(ctx, server)
	if err != nil {
		return "", fmt.Errorf("listing the accounts connected at server %q: %w", server, err)
	}
	for _, p := range ps {
		if rec, err := c.token(ctx, server, p); err == nil && rec != nil {
			c.catalog[server] = p
			return p, nil
		}
	}
	return "", nil
}

// serviceAccount sends req with the gateway's own token of a
// client_credentials server, fetching one when it has none, and again
// (with the wider scopes) when the server refuses it.
func (t *transport) serviceAccount(req *http.Request, srv config.Server) (*http.Response, error) {
	ctx := req.Context()
	rec, err := t.c.usable(ctx, srv, "")
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.expired(t.c.now()) {
		if rec, err = t.c.clientCredentials(ctx, srv, challenge{}, nil); err != nil {
			return nil, err
		}
	}
	resp, err := t.send(req, rec)
	if err != nil {
		return nil, err
	}
	var scopes []string
	switch resp.StatusCode {
	case http.StatusUnauthorized:
	case http.StatusForbidden:
		ch := parseChallenge(resp.Header)
		if ch.Error != "insufficient_scope" {
			return resp, nil
		}
		scopes = union(rec.Scopes, ch.Scopes)
	default:
		return resp, nil
	}
	if req.GetBody == nil && req.Body != nil {
		return resp, nil
	}
	ch := parseChallenge(resp.Header)
	drain(resp)
	if rec, err = t.c.clientCredentials(ctx, srv, ch, scopes); err != nil {
		return nil, err
	}
	retry, err := rewind(req)
	if err != nil {
		return nil, err
	}
	return t.send(retry, rec)
}

// clientCredentials gets the gateway's own token of srv (RFC 6749 section
// 4.4, with the resource of RFC 8707) and stores it.
func (c *Client) clientCredentials(ctx context.Context, srv config.Server, ch challenge, scopes []string) (*tokenRecord, error) {
	if ch.ResourceMetadata == "" && ch.Scopes == nil {
		ch = c.probe(ctx, srv)
	}
	m, err := c.discover(ctx, srv, ch, ch.ResourceMetadata != "")
	if err != nil {
		return nil, err
	}
	reg, err := c.registration(ctx, srv, m)
	if err != nil {
		return nil, err
	}
	if scopes != nil {
		ch.Scopes = scopes
	}
	asked := requestScopes(srv, m, ch, nil)
	asked = slices.DeleteFunc(asked, func(s string) bool { return s == "offline_access" })
	cfg := clientcredentials.Config{ClientID: reg.ID, ClientSecret: reg.Secret, TokenURL: m.AS.TokenEndpoint,
		Scopes: asked, AuthStyle: authStyle(reg.Auth)}
	if m.Resource != "" {
		cfg.EndpointParams = url.Values{"resource": {m.Resource}}
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.discoveryClient(srv)))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("the authorization server of server %q refused the gateway's client credentials: %s %s", srv.Name, printable(re.ErrorCode, 64), printable(re.ErrorDescription, 200))
		}
		return nil, fmt.Errorf("getting a token for server %q: the token endpoint could not be reached", srv.Name)
	}
	granted := scopesOf(tok)
	if granted == nil {
		granted = asked
	}
	rec := &tokenRecord{Server: srv.Name, AccessToken: tok.AccessToken, TokenType: tok.TokenType, Expiry: tok.Expiry,
		Scopes: granted, Issuer: m.AS.Issuer, TokenURL: m.AS.TokenEndpoint, RevokeURL: m.AS.RevocationEndpoint,
		Resource: m.Resource, Client: reg}
	if err := c.putToken(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// ErrExchangedTokenRefused is the error of a request whose exchanged token
// the server refused (expired early, revoked): the token is forgotten, and
// the next Check exchanges the caller's token again, so the request may be
// sent once more.
var ErrExchangedTokenRefused = errors.New("the server refused the token the gateway exchanged for yours")

// Token exchange (RFC 8693) grant and token types.
const (
	grantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// exchange trades credential, the caller's token from the identity
// provider the gateway and srv trust, for a token of srv's own (RFC 8693),
// and stores it for principal.
func (c *Client) exchange(ctx context.Context, srv config.Server, principal, credential string) (*tokenRecord, error) {
	m, err := c.discovered(ctx, srv)
	if err != nil {
		return nil, err
	}
	reg, err := c.registration(ctx, srv, m)
	if err != nil {
		return nil, err
	}
	asked := requestScopes(srv, m, m.Challenge, nil)
	asked = slices.DeleteFunc(asked, func(s string) bool { return s == "offline_access" })
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {credential},
		"subject_token_type":   {tokenTypeAccessToken},
		"requested_token_type": {tokenTypeAccessToken},
	}
	if m.Resource != "" {
		form.Set("resource", m.Resource)
	}
	if len(asked) > 0 {
		form.Set("scope", strings.Join(asked, " "))
	}
	tok, err := c.tokenRequest(ctx, c.discoveryClient(srv), m.AS.TokenEndpoint, reg, form)
	if err != nil {
		var oe *oauthError
		if errors.As(err, &oe) {
			return nil, fmt.Errorf("the authorization server of server %q refused to exchange your token: %w", srv.Name, oe)
		}
		return nil, fmt.Errorf("exchanging your token for server %q: the token endpoint could not be reached", srv.Name)
	}
	granted := scopesOf(tok)
	if granted == nil {
		granted = asked
	}
	rec := &tokenRecord{Server: srv.Name, Principal: principal, AccessToken: tok.AccessToken, TokenType: tok.TokenType,
		Expiry: tok.Expiry, Scopes: granted, Issuer: m.AS.Issuer, TokenURL: m.AS.TokenEndpoint, RevokeURL: m.AS.RevocationEndpoint,
		Resource: m.Resource, Client: reg}
	if err := c.putToken(ctx, rec); err != nil {
		return nil, err
	}
	c.logger.Info("exchanged a caller's token", "server", srv.Name, "principal", principal)
	return rec, nil
}
