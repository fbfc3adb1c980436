package oauthclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/config"
)

// The paths the gateway serves for the flow, under PublicURL.
const (
	StartPath            = "/oauth/start/"
	CallbackPath         = "/oauth/callback"
	MetadataDocumentPath = "/oauth/client-metadata.json"
)

// link is a connect link's sealed content: who may connect where, until
// when.
type link struct {
	Server        string   `json:"s"`
	Principal     string   `json:"p"`
	ElicitationID string   `json:"e"`
	Scopes        []string `json:"sc,omitempty"` // step-up: what the server asked for
	Expires       int64    `json:"x"`
}

// flowState is an authorization request's sealed state: everything the
// callback needs, so that any replica can take it.
type flowState struct {
	link
	Nonce    string   `json:"n"` // also in the browser's cookie
	Verifier string   `json:"v"` // PKCE
	Issuer   string   `json:"i"`
	ClientID string   `json:"c"`
	Resource string   `json:"r"`
	Asked    []string `json:"a,omitempty"`
}

// connectRequired mints a connect link for principal at server.
func (c *Client) connectRequired(server, principal string, scopes []string, reason string) *ConnectRequired {
	l := link{Server: server, Principal: principal, ElicitationID: rand.Text(), Scopes: scopes,
		Expires: c.now().Add(c.opts.LinkTTL).Unix()}
	b, _ := json.Marshal(l)
	return &ConnectRequired{
		Server: server, Principal: principal, ElicitationID: l.ElicitationID, Reason: reason,
		URL: c.public.String() + StartPath + c.links.Seal(b),
	}
}

// Handler serves StartPath, CallbackPath and MetadataDocumentPath. They
// need no credentials of the gateway's clients: a browser follows them,
// and the sealed link and state are the capability.
func (c *Client) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StartPath+"{link}", c.serveStart)
	mux.HandleFunc("GET "+CallbackPath, c.serveCallback)
	mux.HandleFunc("GET "+MetadataDocumentPath, c.serveMetadataDocument)
	return mux
}

func (c *Client) serveStart(w http.ResponseWriter, r *http.Request) {
	var l link
	b, err := c.links.Open(r.PathValue("link"))
	if err != nil || json.Unmarshal(b, &l) != nil {
		c.page(w, http.StatusBadRequest, "This link is not valid", "Ask your agent again for a link to connect your account.")
		return
	}
	if c.now().Unix() > l.Expires {
		c.page(w, http.StatusBadRequest, "This link has expired", "Ask your agent again for a link to connect your account.")
		return
	}
	srv, ok := c.opts.Servers(l.Server)
	if !ok || srv.GrantOf() != config.GrantAuthorizationCode {
		c.page(w, http.StatusNotFound, "Unknown server", fmt.Sprintf("The gateway no longer has a server %q that accounts connect to.", l.Server))
		return
	}
	authURL, cookie, err := c.begin(r.Context(), srv, l)
	if err != nil {
		c.logger.Warn("starting a sign-in failed", "server", l.Server, "principal", l.Principal, "err", err)
		c.page(w, http.StatusBadGateway, "The sign-in could not start", err.Error())
		return
	}
	http.SetCookie(w, cookie)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, authURL, http.StatusFound)
}

// begin makes the authorization request of l: discovery (the server's own
// challenge, when it gives one), registration, PKCE and the sealed state.
func (c *Client) begin(ctx context.Context, srv config.Server, l link) (authURL string, cookie *http.Cookie, err error) {
	m, err := c.discovered(ctx, srv)
	if err != nil {
		return "", nil, err
	}
	ch := m.Challenge
	reg, err := c.registration(ctx, srv, m)
	if err != nil {
		return "", nil, err
	}
	if l.Scopes != nil {
		ch.Scopes = l.Scopes
	}
	var granted []string
	if old, _ := c.token(ctx, srv.Name, l.Principal); old != nil && old.Issuer == m.AS.Issuer {
		granted = old.Scopes
	}
	st := flowState{link: l, Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Issuer: m.AS.Issuer,
		ClientID: reg.ID, Resource: m.Resource, Asked: requestScopes(srv, m, ch, granted)}
	st.Expires = c.now().Add(c.opts.LinkTTL).Unix()
	b, err := json.Marshal(st)
	if err != nil {
		return "", nil, err
	}
	state := c.states.Seal(b)
	cfg := oauth2.Config{ClientID: reg.ID, Endpoint: oauth2.Endpoint{AuthURL: m.AS.AuthorizationEndpoint}, RedirectURL: c.RedirectURL(), Scopes: st.Asked}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(st.Verifier)}
	if m.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", m.Resource))
	}
	cookie = &http.Cookie{
		Name: cookieName(st.Nonce), Value: st.Nonce, Path: CallbackPath, MaxAge: int(c.opts.LinkTTL / time.Second),
		HttpOnly: true, Secure: c.public.Scheme == "https", SameSite: http.SameSiteLaxMode,
	}
	return cfg.AuthCodeURL(state, opts...), cookie, nil
}

// cookieName names the cookie of one sign-in, so that a browser may run
// several at once.
func cookieName(nonce string) string {
	h := sha256.Sum256([]byte(nonce))
	return "mcpgw_oauth_" + hex.EncodeToString(h[:6])
}

// probe asks srv, without a token, for its challenge (the 401's
// WWW-Authenticate), which names its metadata and the scopes it wants:
// with an initialize, and when the server lets that through (some let
// the handshake pass unauthenticated), with a tools/list. A server that
// refuses neither gives an empty challenge: discovery then tries the
// well-known places.
func (c *Client) probe(ctx context.Context, srv config.Server) challenge {
	hc := c.discoveryClient(srv)
	send := func(body, sid string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		return hc.Do(req)
	}
	refused := func(resp *http.Response) bool {
		return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
	}
	resp, err := send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpgw","version":"oauth-probe"}}}`, "")
	if err != nil {
		return challenge{}
	}
	drain(resp)
	if refused(resp) {
		return parseChallenge(resp.Header)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid != "" {
		// The probe's session is of no use after it: end it.
		defer func() {
			if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL, nil); err == nil {
				req.Header.Set("Mcp-Session-Id", sid)
				if resp, err := hc.Do(req); err == nil {
					drain(resp)
				}
			}
		}()
	}
	if resp, err = send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, sid); err != nil {
		return challenge{}
	}
	drain(resp)
	if refused(resp) {
		return parseChallenge(resp.Header)
	}
	return challenge{}
}

func (c *Client) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var st flowState
	b, err := c.states.Open(q.Get("state"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		c.page(w, http.StatusBadRequest, "This sign-in is not valid", "Its state is missing or was not made by this gateway. Ask your agent again for a link.")
		return
	}
	if c.now().Unix() > st.Expires {
		c.page(w, http.StatusBadRequest, "This sign-in has expired", "Ask your agent again for a link to connect your account.")
		return
	}
	// The browser that comes back must be the one that started: a state
	// of another principal's sign-in, pasted into this browser, is refused.
	ck, err := r.Cookie(cookieName(st.Nonce))
	if err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(st.Nonce)) != 1 {
		c.logger.Warn("refusing a callback without its sign-in's cookie", "server", st.Server, "principal", st.Principal)
		c.page(w, http.StatusForbidden, "This sign-in belongs to another browser",
			"It was started from another browser, or for another principal. Open the link your agent gave you in this browser.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: ck.Name, Value: "", Path: CallbackPath, MaxAge: -1, HttpOnly: true, Secure: c.public.Scheme == "https", SameSite: http.SameSiteLaxMode})
	if e := q.Get("error"); e != "" {
		c.page(w, http.StatusBadRequest, "The authorization server did not connect your account",
			fmt.Sprintf("It answered %s %s", printable(e, 64), printable(q.Get("error_description"), 200)))
		return
	}
	if err := c.finish(r.Context(), st, q.Get("code"), q.Get("iss"), q.Has("iss")); err != nil {
		c.logger.Warn("completing a sign-in failed", "server", st.Server, "principal", st.Principal, "err", err)
		c.page(w, http.StatusBadGateway, "Your account could not be connected", err.Error())
		return
	}
	c.logger.Info("account connected", "server", st.Server, "principal", st.Principal)
	if c.opts.OnConnected != nil {
		c.opts.OnConnected(st.Server, st.Principal, st.ElicitationID)
	}
	c.page(w, http.StatusOK, "Your account is connected",
		fmt.Sprintf("The gateway now reaches %s with your account. You may close this page and return to your agent.", st.Server))
}

// finish checks the authorization response (RFC 9207's iss) and exchanges
// its code for tokens, which it stores for the state's principal.
func (c *Client) finish(ctx context.Context, st flowState, code, iss string, hasIss bool) error {
	if code == "" {
		return errors.New("the authorization server sent no code")
	}
	srv, ok := c.opts.Servers(st.Server)
	if !ok || srv.GrantOf() != config.GrantAuthorizationCode {
		return fmt.Errorf("the gateway no longer has a server %q that accounts connect to", st.Server)
	}
	m, err := c.discover(ctx, srv, challenge{}, false)
	if err != nil {
		return err
	}
	if m.AS.Issuer != st.Issuer {
		return errors.New("the server's authorization server changed during the sign-in; start again")
	}
	switch {
	case m.AS.AuthorizationResponseIssParameterSupported && !hasIss:
		return errors.New("the authorization server promises an iss parameter (RFC 9207) and sent none; refusing the response")
	case hasIss && iss != st.Issuer:
		return fmt.Errorf("the response names issuer %q, not %q (RFC 9207); refusing it", printable(iss, 200), st.Issuer)
	}
	reg, err := c.registration(ctx, srv, m)
	if err != nil {
		return err
	}
	if reg.ID != st.ClientID {
		return errors.New("the gateway's registration changed during the sign-in; start again")
	}
	cfg := oauth2.Config{ClientID: reg.ID, ClientSecret: reg.Secret, RedirectURL: c.RedirectURL(),
		Endpoint: oauth2.Endpoint{TokenURL: m.AS.TokenEndpoint, AuthStyle: authStyle(reg.Auth)}}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(st.Verifier)}
	if st.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", st.Resource))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.discoveryClient(srv)), code, opts...)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return fmt.Errorf("the authorization server refused the code: %s %s", printable(re.ErrorCode, 64), printable(re.ErrorDescription, 200))
		}
		return errors.New("exchanging the code failed: the token endpoint could not be reached")
	}
	scopes := scopesOf(tok)
	if scopes == nil {
		scopes = st.Asked
	}
	return c.putToken(ctx, &tokenRecord{
		Server: st.Server, Principal: st.Principal,
		AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry,
		Scopes: scopes, Issuer: m.AS.Issuer, TokenURL: m.AS.TokenEndpoint, RevokeURL: m.AS.RevocationEndpoint,
		Resource: st.Resource, Client: reg,
	})
}

func authStyle(method string) oauth2.AuthStyle {
	if method == "client_secret_basic" {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// serveMetadataDocument serves the gateway's client ID metadata document,
// whose URL is its client_id at authorization servers that support them.
func (c *Client) serveMetadataDocument(w http.ResponseWriter, r *http.Request) {
	id := c.MetadataDocumentURL()
	if id == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"client_id":                  id,
		"client_name":                c.opts.ClientName,
		"redirect_uris":              []string{c.RedirectURL()},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · mcpgw</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// page answers a browser with a short page; its text is escaped.
func (c *Client) page(w http.ResponseWriter, status int, title, text string) {
	var buf bytes.Buffer
	pageTemplate.Execute(&buf, struct{ Title, Text string }{title, text})
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
