// Package oauthclient makes mcpgw an OAuth 2.1 client of remote MCP
// servers, as the MCP authorization spec (2025-11-25) describes, so that
// each principal reaches a server with a token of their own account, and
// never with another's.
//
// A principal connects an account once, through the MCP client they
// already use: a call to a server they have not connected yet brings a URL
// of the gateway's own (ConnectRequired), which they open in a browser:
//
//	client ──call──► gateway ── no token for (server, principal) ──► ConnectRequired{URL}
//	browser ─GET /oauth/start/<sealed link>──► 302 to the server's authorization
//	         endpoint (PKCE S256, resource, scopes, sealed state), a cookie binds the browser
//	browser ─GET /oauth/callback?code&state&iss──► state and cookie checked, iss checked
//	         (RFC 9207), code exchanged, tokens sealed into the store ─► OnConnected
//
// Discovery follows the spec: the server's 401 and WWW-Authenticate, its
// protected resource metadata (RFC 9728, from the challenge, then the
// well-known paths), its authorization server's metadata (RFC 8414, then
// OpenID discovery), and for older servers the 2025-03-26 fallbacks. The
// gateway is a pre-registered client where config names one, else a client
// ID metadata document, else registers dynamically (RFC 7591); a
// registration is kept in the store per server and issuer.
//
// Every upstream HTTP request of such a server goes through the RoundTripper
// of Transport: it adds the caller's token (refreshed, and rotated, when it
// has expired), only for the server's own origin; a 401 refreshes once and
// otherwise forgets the token; a 403 insufficient_scope asks the principal
// to connect again with the wider scopes (step-up). Tokens are sealed with a
// key derived from the gateway's secret, and never logged.
//
// The discovery and registration calls are the official Go SDK's (oauthex);
// the flow is the gateway's own, because it spans two HTTP requests of a
// browser that may reach any replica: everything the callback needs is in
// the sealed state or the store.
package oauthclient
