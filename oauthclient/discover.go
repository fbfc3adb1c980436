package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
)

// serverMeta is what discovery found about one server: its resource, its
// authorization server and what it asks for.
type serverMeta struct {
	Resource string
	// Scopes are the server's scopes_supported (RFC 9728).
	Scopes []string
	AS     *oauthex.AuthServerMeta
	// Challenge is what the server said when it was discovered.
	Challenge challenge
}

// challenge is what a server's 401 or 403 said (WWW-Authenticate).
type challenge struct {
	ResourceMetadata string
	Scopes           []string
	Error            string
}

func parseChallenge(h http.Header) challenge {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return challenge{}
	}
	var ch challenge
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		if v := c.Params["resource_metadata"]; v != "" && ch.ResourceMetadata == "" {
			ch.ResourceMetadata = v
		}
		if v := c.Params["scope"]; v != "" && ch.Scopes == nil {
			ch.Scopes = strings.Fields(v)
		}
		if v := c.Params["error"]; v != "" && ch.Error == "" {
			ch.Error = v
		}
	}
	return ch
}

// discover finds srv's authorization server, as the spec orders it: the
// protected resource metadata the challenge names, then at the well-known
// path of the server's endpoint, then at its root; without any, the
// 2025-03-26 fallback (the server's origin is its authorization server).
// It is cached per server; fresh skips the cache (another challenge named
// another metadata URL, or the authorization server moved).
func (c *Client) discover(ctx context.Context, srv config.Server, ch challenge, fresh bool) (*serverMeta, error) {
	key := srv.Name + " " + srv.URL
	if m, ok := c.meta.Get(key); ok && !fresh && ch.ResourceMetadata == "" {
		return m, nil
	}
	hc := c.discoveryClient(srv)
	var prm *oauthex.ProtectedResourceMetadata
	for _, u := range prmURLs(ch.ResourceMetadata, srv.URL) {
		p, err := getResourceMetadata(ctx, hc, u.url, u.resource)
		if err != nil {
			// Metadata that is there and wrong (another resource's, say)
			// ends discovery: guessing on would hand the user's consent
			// to whoever served it.
			return nil, fmt.Errorf("the protected resource metadata of server %q: %w", srv.Name, err)
		}
		if p != nil {
			prm = p
			break
		}
	}
	if prm == nil && ch.ResourceMetadata != "" {
		return nil, fmt.Errorf("server %q named protected resource metadata that is not there", srv.Name)
	}
	m := &serverMeta{}
	issuer := ""
	if prm != nil {
		m.Resource, m.Scopes, issuer = prm.Resource, prm.ScopesSupported, prm.AuthorizationServers[0]
	} else {
		u, err := url.Parse(srv.URL)
		if err != nil {
			return nil, fmt.Errorf("server %q has an invalid URL", srv.Name)
		}
		issuer = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
		m.Resource = canonicalResource(srv.URL)
	}
	asm, err := sdkauth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return nil, fmt.Errorf("reading the authorization server metadata of server %q: %w", srv.Name, err)
	}
	if asm == nil {
		if prm != nil && !sameOrigin(issuer, srv.URL) {
			return nil, fmt.Errorf("the authorization server %s of server %q serves no metadata", issuer, srv.Name)
		}
		// 2025-03-26: the default endpoints at the server's origin.
		asm = &oauthex.AuthServerMeta{
			Issuer:                issuer,
			AuthorizationEndpoint: issuer + "/authorize",
			TokenEndpoint:         issuer + "/token",
			RegistrationEndpoint:  issuer + "/register",
		}
	}
	m.AS, m.Challenge = asm, ch
	c.meta.Add(key, m)
	return m, nil
}

// discovered returns what discovery knows of srv, asking the server (a
// probe) and its metadata only when nothing is cached: a sign-in link
// opened again and again costs the server and its authorization server
// nothing more.
func (c *Client) discovered(ctx context.Context, srv config.Server) (*serverMeta, error) {
	if m, ok := c.meta.Get(srv.Name + " " + srv.URL); ok {
		return m, nil
	}
	return c.discover(ctx, srv, c.probe(ctx, srv), true)
}

// rediscover forgets what discovery knew of srv, after the server refused
// a token: its authorization server may have changed.
func (c *Client) rediscover(srv config.Server) { c.meta.Remove(srv.Name + " " + srv.URL) }

type prmURL struct{ url, resource string }

// prmURLs lists where a server's protected resource metadata may be, with
// the resource each must name (RFC 9728 section 3.3): where the challenge
// says, else at the path of the server's endpoint, then at its root.
func prmURLs(named, serverURL string) []prmURL {
	if named != "" {
		return []prmURL{{named, serverURL}}
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil
	}
	var out []prmURL
	origin := url.URL{Scheme: u.Scheme, Host: u.Host}
	if p := strings.Trim(u.Path, "/"); p != "" {
		at := origin
		at.Path = "/.well-known/oauth-protected-resource/" + p
		out = append(out, prmURL{at.String(), serverURL})
	}
	root := origin
	root.Path = "/.well-known/oauth-protected-resource"
	return append(out, prmURL{root.String(), origin.String()})
}

// maxMetadata bounds a metadata document.
const maxMetadata = 1 << 20

// getResourceMetadata reads protected resource metadata at u, which must
// be for resource; nil, nil when there is none there (a 4xx).
func getResourceMetadata(ctx context.Context, hc *http.Client, u, resource string) (*oauthex.ProtectedResourceMetadata, error) {
	if err := checkHTTPSOrLoopback(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("invalid metadata URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", safeURL(u), resp.StatusCode)
	}
	var prm oauthex.ProtectedResourceMetadata
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(&prm); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON metadata", safeURL(u))
	}
	if canonicalResource(prm.Resource) != canonicalResource(resource) {
		return nil, fmt.Errorf("it is for resource %q, not %q", printable(prm.Resource, 200), resource)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("it names no authorization server")
	}
	for _, as := range prm.AuthorizationServers {
		if err := checkHTTPSOrLoopback(as); err != nil {
			return nil, fmt.Errorf("authorization server %q: %w", printable(as, 200), err)
		}
	}
	return &prm, nil
}

// checkHTTPSOrLoopback refuses a URL that is not https, but for a loopback
// host (tests, local development).
func checkHTTPSOrLoopback(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "":
		return errors.New("not an absolute URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && config.IsLoopback(u.Hostname()):
		return nil
	}
	return errors.New("not https (only a loopback host may use http)")
}

// safeURL is u without its query, for errors.
func safeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// canonicalResource is a server URL as the spec's canonical server URI:
// lower-case scheme and host, no fragment, no query.
func canonicalResource(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.Fragment, u.RawQuery, u.User = "", "", nil
	return u.String()
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// requestScopes are the scopes to ask for: the challenge's, else the
// resource's scopes_supported, else the configured ones; with any granted
// before (step-up keeps what was granted), and offline_access when the
// authorization server offers it, for a refresh token.
func requestScopes(srv config.Server, m *serverMeta, ch challenge, granted []string) []string {
	var want []string
	switch {
	case len(ch.Scopes) > 0:
		want = ch.Scopes
	case len(m.Scopes) > 0:
		want = m.Scopes
	case srv.OAuth != nil:
		want = srv.OAuth.Scopes
	}
	out := slices.Clone(granted)
	for _, s := range want {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if m.AS != nil && slices.Contains(m.AS.ScopesSupported, "offline_access") && !slices.Contains(out, "offline_access") {
		out = append(out, "offline_access")
	}
	return out
}

// registration returns how the gateway is known to m's authorization
// server for srv, in the spec's order: the client configured for it, a
// client ID metadata document where the server supports those, else a
// registration made dynamically (RFC 7591) and kept in the store.
func (c *Client) registration(ctx context.Context, srv config.Server, m *serverMeta) (clientReg, error) {
	o := srv.OAuth
	if o != nil && o.ClientID != "" {
		reg := clientReg{ID: o.ClientID, Secret: o.ClientSecret, Auth: "none"}
		if o.ClientSecret != "" {
			reg.Auth = authMethod(m.AS.TokenEndpointAuthMethodsSupported)
		}
		return reg, nil
	}
	cimd := ""
	if o != nil {
		cimd = o.ClientMetadataURL
	}
	if cimd == "" {
		cimd = c.MetadataDocumentURL()
	}
	if cimd != "" && m.AS.ClientIDMetadataDocumentSupported {
		return clientReg{ID: cimd, Auth: "none"}, nil
	}
	if m.AS.RegistrationEndpoint == "" {
		return clientReg{}, fmt.Errorf("the authorization server of server %q offers no way for the gateway to register: configure oauth.client_id (a client registered beforehand)", srv.Name)
	}
	redirect := c.RedirectURL()
	if rec, err := c.opts.Store.GetOAuthClient(ctx, srv.Name, m.AS.Issuer); err == nil {
		var reg clientReg
		if c.open(rec.Data, &reg) == nil && reg.Redirect == redirect {
			return reg, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return clientReg{}, fmt.Errorf("reading the registration for server %q: %w", srv.Name, err)
	}
	resp, err := oauthex.RegisterClient(ctx, m.AS.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:  []string{redirect},
		GrantTypes:    []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"},
		ClientName:    c.opts.ClientName,
		// The gateway is a web application: its redirect URI is
		// its public URL, not a loopback port of a device.
		ApplicationType: "web",
	}, c.discoveryClient(srv))
	if err != nil {
		return clientReg{}, fmt.Errorf("registering the gateway at the authorization server of server %q: %w", srv.Name, err)
	}
	reg := clientReg{ID: resp.ClientID, Secret: resp.ClientSecret, Redirect: redirect, Auth: resp.TokenEndpointAuthMethod}
	switch {
	case reg.Auth == "" && reg.Secret != "":
		reg.Auth = "client_secret_basic" // RFC 7591's default
	case reg.Auth == "":
		reg.Auth = "none"
	}
	data, err := c.seal(reg)
	if err != nil {
		return clientReg{}, err
	}
	if err := c.opts.Store.PutOAuthClient(ctx, store.OAuthClient{Server: srv.Name, Issuer: m.AS.Issuer, Data: data}); err != nil {
		return clientReg{}, fmt.Errorf("storing the registration for server %q: %w", srv.Name, err)
	}
	c.logger.Info("registered at an authorization server", "server", srv.Name, "issuer", m.AS.Issuer)
	return reg, nil
}

// authMethod picks the token endpoint authentication for a client with a
// secret from what the authorization server supports: client_secret_basic
// by default (RFC 8414), client_secret_post when that is all it lists.
func authMethod(supported []string) string {
	if len(supported) == 0 || slices.Contains(supported, "client_secret_basic") {
		return "client_secret_basic"
	}
	if slices.Contains(supported, "client_secret_post") {
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// discoveryClient is the HTTP client of srv's authorization requests: it
// reaches private and loopback addresses only when srv itself is on one,
// so a hostile server's metadata cannot point the gateway at a host of
// its internal network.
func (c *Client) discoveryClient(srv config.Server) *http.Client {
	if c.opts.HTTPClient != nil {
		return c.opts.HTTPClient
	}
	if u, err := url.Parse(srv.URL); err == nil && internalHost(u.Hostname()) {
		return internalClient
	}
	return c.hc
}

// internalHost reports whether host is loopback, private or link-local
// (or names localhost).
func internalHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && !publicIP(ip)
}

func publicIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsLinkLocalUnicast() &&
		!ip.IsMulticast() && !ip.IsUnspecified() && !cgnat.Contains(ip)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

var errInternalAddress = errors.New("refusing an internal address: the server is public, so its authorization server must be")

// defaultHTTPClient reaches public addresses only.
func defaultHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || !publicIP(ip) {
				return errInternalAddress
			}
			return nil
		}}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// internalClient reaches any address, for servers on internal ones.
var internalClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}()
