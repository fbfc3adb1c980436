package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// ServerOAuth makes the gateway an OAuth 2.1 client of an http or sse
// server, as the MCP authorization spec describes: the server's 401 leads
// to its protected resource metadata, then to its authorization server's.
// An empty mapping (oauth: {}) discovers everything and registers the
// gateway by its client ID metadata document or dynamically.
type ServerOAuth struct {
	// Grant is GrantAuthorizationCode (the default: each principal
	// connects an account of their own), GrantClientCredentials (one
	// token for the whole gateway, no user) or GrantTokenExchange (the
	// client's own token is exchanged for one for the server, RFC 8693).
	Grant string `yaml:"grant"`
	// ClientID and ClientSecret are a client registered beforehand at the
	// server's authorization server. If ClientID is empty, the gateway
	// identifies itself by ClientMetadataURL or registers dynamically
	// (RFC 7591). ClientSecret is expanded from ${VAR}.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// ClientMetadataURL is the https URL of a client ID metadata document
	// describing the gateway, used as its client_id where the
	// authorization server supports such documents. If empty and
	// public_url is https, the gateway serves its own at
	// <public_url>/oauth/client-metadata.json.
	ClientMetadataURL string `yaml:"client_metadata_url"`
	// Scopes are asked for when the server's challenge names none and its
	// metadata lists none. If empty, those the server asks for.
	Scopes []string `yaml:"scopes"`
}

// Grants of ServerOAuth.Grant.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantTokenExchange     = "token_exchange"
)

var grants = []string{GrantAuthorizationCode, GrantClientCredentials, GrantTokenExchange}

// GrantOf returns the server's grant, or "" for a server without oauth.
func (s *Server) GrantOf() string {
	if s.OAuth == nil {
		return ""
	}
	if s.OAuth.Grant == "" {
		return GrantAuthorizationCode
	}
	return s.OAuth.Grant
}

// PerUser reports whether each principal reaches the server with a token
// of their own (grants authorization_code and token_exchange): such a
// server always runs one upstream session per principal.
func (s *Server) PerUser() bool {
	g := s.GrantOf()
	return g == GrantAuthorizationCode || g == GrantTokenExchange
}

// validateOAuth adds the problems of s.OAuth. The messages never show
// client_secret.
func validateOAuth(s *Server, path string, add func(path, format string, args ...any)) {
	o := s.OAuth
	if o == nil {
		return
	}
	p := join(path, "oauth")
	if s.Transport == TransportStdio {
		add(p, "is for http and sse servers; a stdio server gets its credentials through env")
	}
	if s.APIKey != "" {
		add(join(path, "api_key"), "conflicts with oauth, which sends the server's own tokens as Authorization; use one of them")
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "authorization") {
			add(join(join(path, "headers"), k), "conflicts with oauth, which sends the server's own tokens as Authorization")
		}
	}
	if o.Grant != "" && !slices.Contains(grants, o.Grant) {
		add(join(p, "grant"), "%q is not one of %s", o.Grant, strings.Join(grants, ", "))
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		add(join(p, "client_secret"), "needs client_id: a secret belongs to a client registered beforehand")
	}
	if hasControl(o.ClientID) {
		add(join(p, "client_id"), "contains a control character, such as a newline")
	}
	if hasControl(o.ClientSecret) {
		add(join(p, "client_secret"), "contains a control character, such as a newline")
	}
	if (o.Grant == GrantClientCredentials || o.Grant == GrantTokenExchange) && o.ClientID == "" {
		add(join(p, "client_id"), "missing; the %s grant needs a client registered beforehand (client_id and client_secret)", o.Grant)
	}
	if u := o.ClientMetadataURL; u != "" {
		pu, err := url.Parse(u)
		switch {
		case err != nil || pu.Host == "":
			add(join(p, "client_metadata_url"), "is not an absolute URL")
		case pu.Scheme != "https" && !IsLoopback(pu.Hostname()):
			add(join(p, "client_metadata_url"), "must be an https URL: a client ID metadata document is fetched by the authorization server")
		case pu.Path == "" || pu.Path == "/":
			add(join(p, "client_metadata_url"), "needs a path: a client ID metadata document URL names a document, not a site")
		case pu.Fragment != "" || pu.User != nil:
			add(join(p, "client_metadata_url"), "must have no fragment and no user info")
		}
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			add(fmt.Sprintf("%s[%d]", join(p, "scopes"), i), "%q is not a scope (one word, no spaces or quotes)", sc)
		}
	}
	if s.PerUser() && s.SessionMode != "" && s.SessionMode != SessionPerPrincipal {
		add(join(path, "session_mode"), "must be per_principal (or left out) for oauth grant %s: each principal's token has a session of its own", s.GrantOf())
	}
}

// checkOAuthPublicURL adds a problem for each server that needs the
// gateway's public URL for its OAuth flow when there is none.
func (c *Config) checkOAuthPublicURL(add func(path, format string, args ...any)) {
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.GrantOf() == GrantAuthorizationCode && c.PublicURL == "" {
			add(serverPath(i, s.Name)+".oauth", "needs public_url: the user's browser comes back to <public_url>/oauth/callback")
		}
	}
}
