package upstream

import (
	"context"
	"maps"
	"net/http"

	"github.com/mcpgw/mcpgw/config"
)

// Credentials are what one client presents to its server: the bearer key
// and headers of the http and sse transports, the environment added to a
// stdio child's minimal one. They replace the server's configured api_key,
// headers and env for that client.
type Credentials struct {
	APIKey  string
	Headers map[string]string
	Env     map[string]string
	// Transport, if not nil, wraps the HTTP transport of the client's
	// requests (http and sse): an OAuth client adds the caller's token
	// there, and answers the server's 401 and 403 itself.
	Transport func(http.RoundTripper) http.RoundTripper
}

// CredentialProvider gives each upstream client its credentials (DESIGN
// decision 5): the Manager asks once per client it connects, with the
// principal the client is for ("" for the server's base client, used for
// its lists and for shared calls). Together with a server's session mode
// this lets credentials vary per principal.
//
// Credentials may be called concurrently, and is bounded by ctx (the
// server's start timeout). Its errors end up in logs and in the server's
// status, so they must not contain the secrets themselves.
type CredentialProvider interface {
	Credentials(ctx context.Context, srv config.Server, principal string) (Credentials, error)
}

// StaticCredentials is the CredentialProvider that gives every client the
// server's configured api_key, headers and env, whoever the principal.
type StaticCredentials struct{}

var _ CredentialProvider = StaticCredentials{}

// Credentials returns srv's configured credentials.
func (StaticCredentials) Credentials(_ context.Context, srv config.Server, _ string) (Credentials, error) {
	return Credentials{APIKey: srv.APIKey, Headers: maps.Clone(srv.Headers), Env: maps.Clone(srv.Env)}, nil
}

// withCredentials returns srv with cr in place of its configured
// credentials, which is what the transports read.
func withCredentials(srv config.Server, cr Credentials) config.Server {
	srv.APIKey, srv.Headers, srv.Env = cr.APIKey, cr.Headers, cr.Env
	return srv
}

// secrets returns the values of cr worth redacting from what a server
// writes to its log: the key and header values (as the HTTP transports
// redact them), and env values long enough not to be ordinary words.
func (cr Credentials) secrets() []string {
	var out []string
	add := func(s string, min int) {
		if len(s) >= min {
			out = append(out, s)
		}
	}
	add(cr.APIKey, 4)
	for _, v := range cr.Headers {
		add(v, 4)
	}
	for _, v := range cr.Env {
		add(v, 8)
	}
	return out
}
