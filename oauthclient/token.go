package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/store"
)

// tokenRecord is what the store keeps, sealed, for one principal at one
// server: the tokens and what refreshing and revoking them needs. Server
// and Principal are sealed in too, so a record moved to another row in the
// database does not open there.
type tokenRecord struct {
	Server       string    `json:"server"`
	Principal    string    `json:"principal"`
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`
	Issuer       string    `json:"issuer"`
	TokenURL     string    `json:"token_url"`
	RevokeURL    string    `json:"revoke_url,omitempty"`
	Resource     string    `json:"resource,omitempty"`
	Client       clientReg `json:"client"`
}

// clientReg is how the gateway is known to one authorization server.
type clientReg struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	// Auth is the token endpoint's client authentication:
	// client_secret_basic, client_secret_post or none.
	Auth string `json:"auth"`
	// Redirect is the redirect URI it was registered with (dynamic
	// registration), to register again when public_url changes.
	Redirect string `json:"redirect,omitempty"`
}

// expiryLeeway refreshes a token this long before it expires, so that a
// request does not leave with a token that expires on the way.
const expiryLeeway = 30 * time.Second

func (r *tokenRecord) expired(now time.Time) bool {
	return !r.Expiry.IsZero() && now.Add(expiryLeeway).After(r.Expiry)
}

// token returns principal's token record for server, from the cache or
// the store; nil when there is none (or it no longer opens: another
// secret sealed it).
func (c *Client) token(ctx context.Context, server, principal string) (*tokenRecord, error) {
	k := tokenKey{server, principal}
	if rec, ok := c.tokens.Get(k); ok {
		return rec, nil
	}
	t, err := c.opts.Store.GetOAuthToken(ctx, server, principal)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token of server %q: %w", server, err)
	}
	var rec tokenRecord
	if err := c.open(t.Data, &rec); err != nil || rec.Server != server || rec.Principal != principal {
		c.logger.Warn("a stored token does not open with this secret; treating the account as not connected", "server", server, "principal", principal)
		return nil, nil
	}
	c.tokens.Add(k, &rec)
	return &rec, nil
}

// putToken stores rec and caches it.
func (c *Client) putToken(ctx context.Context, rec *tokenRecord) error {
	data, err := c.seal(rec)
	if err != nil {
		return err
	}
	if err := c.opts.Store.PutOAuthToken(ctx, store.OAuthToken{Server: rec.Server, Principal: rec.Principal, Data: data}); err != nil {
		return fmt.Errorf("storing the token of server %q: %w", rec.Server, err)
	}
	c.tokens.Add(tokenKey{rec.Server, rec.Principal}, rec)
	return nil
}

// dropToken forgets a token the server or its authorization server no
// longer accepts.
func (c *Client) dropToken(ctx context.Context, rec *tokenRecord) {
	c.tokens.Remove(tokenKey{rec.Server, rec.Principal})
	if err := c.opts.Store.DeleteOAuthToken(ctx, rec.Server, rec.Principal); err != nil && !errors.Is(err, store.ErrNotFound) {
		c.logger.Warn("forgetting a refused token failed", "server", rec.Server, "principal", rec.Principal, "err", err)
	}
}

func (c *Client) seal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return []byte(c.vault.Seal(b)), nil
}

func (c *Client) open(data []byte, v any) error {
	b, err := c.vault.Open(string(data))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// fresh returns a record whose access token has not expired: rec itself,
// or rec refreshed (force: even if it has not expired, because the server
// refused it). It returns nil, and forgets the token, when it cannot be
// refreshed. Refreshes of one token are serialized, and a refresh that
// another request (or replica) already made is taken from the store.
func (c *Client) fresh(ctx context.Context, rec *tokenRecord, force bool) (*tokenRecord, error) {
	if !force && !rec.expired(c.now()) {
		return rec, nil
	}
	k := tokenKey{rec.Server, rec.Principal}
	h := fnv.New32a()
	h.Write([]byte(k.server + "\x00" + k.principal))
	mu := &c.refreshing[h.Sum32()%uint32(len(c.refreshing))]
	mu.Lock()
	defer mu.Unlock()
	// Another request may have refreshed it while this one waited.
	c.tokens.Remove(k)
	cur, err := c.token(ctx, rec.Server, rec.Principal)
	if err != nil || cur == nil {
		return nil, err
	}
	if cur.AccessToken != rec.AccessToken && !cur.expired(c.now()) {
		return cur, nil
	}
	if cur.RefreshToken == "" {
		c.dropToken(ctx, cur)
		return nil, nil
	}
	next, err := c.refresh(ctx, cur)
	if err != nil {
		var oe *oauthError
		if errors.As(err, &oe) {
			// The authorization server refused the refresh token
			// (invalid_grant: revoked, expired, rotated away): the
			// principal must connect again.
			c.logger.Info("refresh refused; the account must be connected again", "server", cur.Server, "principal", cur.Principal, "error_code", oe.Code)
			c.dropToken(ctx, cur)
			return nil, nil
		}
		return nil, fmt.Errorf("refreshing the token of server %q: %w", cur.Server, err)
	}
	if err := c.putToken(ctx, next); err != nil {
		return nil, err
	}
	return next, nil
}

// refresh uses rec's refresh token (RFC 6749 section 6, with the resource
// of RFC 8707), keeping the old refresh token when the server rotates none.
func (c *Client) refresh(ctx context.Context, rec *tokenRecord) (*tokenRecord, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.RefreshToken}}
	if rec.Resource != "" {
		form.Set("resource", rec.Resource)
	}
	hc := c.hc
	if srv, ok := c.opts.Servers(rec.Server); ok {
		hc = c.discoveryClient(srv)
	}
	tok, err := c.tokenRequest(ctx, hc, rec.TokenURL, rec.Client, form)
	if err != nil {
		return nil, err
	}
	next := *rec
	next.AccessToken, next.TokenType, next.Expiry = tok.AccessToken, tok.TokenType, tok.Expiry
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken
	}
	if s := scopesOf(tok); s != nil {
		next.Scopes = s
	}
	return &next, nil
}

// oauthError is an authorization server's error answer (RFC 6749 section
// 5.2). Its description is the server's, which may be shown; it never
// holds our tokens.
type oauthError struct {
	Code        string
	Description string
	Status      int
}

func (e *oauthError) Error() string {
	if e.Description != "" {
		return fmt.Sprintf("the authorization server answered %s: %s", e.Code, e.Description)
	}
	return "the authorization server answered " + e.Code
}

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 1 << 20

// tokenRequest posts form to a token endpoint with the client's
// authentication and reads the token. It is the one token request
// x/oauth2 cannot make: a refresh with extra parameters (resource).
func (c *Client) tokenRequest(ctx context.Context, hc *http.Client, tokenURL string, cl clientReg, form url.Values) (*oauth2.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, nil)
	if err != nil {
		return nil, errors.New("the token endpoint is not a valid URL")
	}
	authenticate(req, form, cl)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return nil, err
	}
	return parseTokenResponse(resp.StatusCode, b, c.now())
}

// parseTokenResponse reads a token endpoint's answer (RFC 6749 sections
// 5.1 and 5.2): the token, or an *oauthError.
func parseTokenResponse(status int, b []byte, now time.Time) (*oauth2.Token, error) {
	var out struct {
		AccessToken  string      `json:"access_token"`
		TokenType    string      `json:"token_type"`
		RefreshToken string      `json:"refresh_token"`
		ExpiresIn    json.Number `json:"expires_in"`
		Scope        string      `json:"scope"`
		Error        string      `json:"error"`
		Description  string      `json:"error_description"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("the token endpoint answered %d without a JSON body", status)
	}
	if out.Error != "" || status != http.StatusOK {
		code := out.Error
		if code == "" {
			code = fmt.Sprintf("HTTP %d", status)
		}
		return nil, &oauthError{Code: printable(code, 64), Description: printable(out.Description, 200), Status: status}
	}
	if out.AccessToken == "" {
		return nil, errors.New("the token endpoint answered without an access_token")
	}
	tok := &oauth2.Token{AccessToken: out.AccessToken, TokenType: out.TokenType, RefreshToken: out.RefreshToken}
	if n, err := out.ExpiresIn.Int64(); err == nil && n > 0 && n < 1<<31 {
		tok.Expiry = now.Add(time.Duration(n) * time.Second)
	}
	if out.Scope != "" {
		tok = tok.WithExtra(map[string]any{"scope": out.Scope})
	}
	return tok, nil
}

// authenticate puts the client's authentication on a token or revocation
// request (RFC 6749 section 2.3.1) and form into its body.
func authenticate(req *http.Request, form url.Values, cl clientReg) {
	switch cl.Auth {
	case "client_secret_basic":
		req.SetBasicAuth(url.QueryEscape(cl.ID), url.QueryEscape(cl.Secret))
	case "client_secret_post":
		form.Set("client_id", cl.ID)
		form.Set("client_secret", cl.Secret)
	default:
		form.Set("client_id", cl.ID)
	}
	body := form.Encode()
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
}

// scopesOf returns the scopes a token response granted, or nil when it
// did not say.
func scopesOf(tok *oauth2.Token) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return nil
}

// revoke asks the authorization server to revoke rec's tokens (RFC 7009),
// the refresh token first (which revokes its access tokens on most
// servers). Failures are logged: the caller forgets the token anyway.
func (c *Client) revoke(ctx context.Context, server string, rec *tokenRecord) {
	if rec.RevokeURL == "" {
		return
	}
	hc := c.hc
	if srv, ok := c.opts.Servers(server); ok {
		hc = c.discoveryClient(srv)
	}
	for _, t := range []struct{ tok, hint string }{{rec.RefreshToken, "refresh_token"}, {rec.AccessToken, "access_token"}} {
		if t.tok == "" {
			continue
		}
		form := url.Values{"token": {t.tok}, "token_type_hint": {t.hint}}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.RevokeURL, nil)
		if err != nil {
			return
		}
		authenticate(req, form, rec.Client)
		resp, err := hc.Do(req)
		if err != nil {
			c.logger.Warn("revoking a token failed", "server", server, "err", err)
			continue
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			c.logger.Warn("the authorization server refused to revoke a token", "server", server, "status", resp.StatusCode)
		}
	}
}

// printable returns the start of s without control characters, for text
// an authorization server sent that may reach a page or a log.
func printable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		s = s[:max]
	}
	return strings.ToValidUTF8(s, "?")
}
