package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/store"
)

// Store keeps the principals' tokens and the gateway's registrations,
// sealed by the Client: the store never reads Data.
type Store interface {
	GetOAuthToken(ctx context.Context, server, principal string) (store.OAuthToken, error)
	PutOAuthToken(ctx context.Context, t store.OAuthToken) error
	DeleteOAuthToken(ctx context.Context, server, principal string) error
	DeleteOAuthTokens(ctx context.Context, server string) (int, error)
	CountOAuthTokens(ctx context.Context, server string) (int, error)
	ListOAuthPrincipals(ctx context.Context, server string) ([]string, error)
	GetOAuthClient(ctx context.Context, server, issuer string) (store.OAuthClient, error)
	PutOAuthClient(ctx context.Context, c store.OAuthClient) error
	DeleteOAuthClients(ctx context.Context, server string) error
}

// Defaults of Options.
const (
	DefaultLinkTTL    = 10 * time.Minute
	DefaultClientName = "mcpgw"
)

// Options configures a Client.
type Options struct {
	// PublicURL is where browsers reach the gateway: the start links,
	// the callback (<PublicURL>/oauth/callback) and the gateway's client
	// ID metadata document are under it. Required.
	PublicURL string
	// Secret keys the sealed links, states and stored tokens; at least
	// seal.MinSecretLen bytes. Every replica needs the same one, and
	// tokens stored under another secret read as not connected.
	Secret []byte
	// Store keeps tokens and registrations. Required.
	Store Store
	// Servers returns the current configuration of a server by name.
	// Required.
	Servers func(name string) (config.Server, bool)
	// HTTPClient makes the requests to authorization servers. If nil,
	// one with a 30 s timeout and this package's address checks (see
	// dialer).
	HTTPClient *http.Client
	// ClientName is the client_name the gateway registers under. If
	// empty, DefaultClientName.
	ClientName string
	// LinkTTL bounds a connect link and the sign-in it starts. If zero,
	// DefaultLinkTTL.
	LinkTTL time.Duration
	// OnConnected, if not nil, is called after a principal connected an
	// account at a server, with the elicitation id of the link they
	// followed ("" if none).
	OnConnected func(server, principal, elicitationID string)
	// Logger gets the flow's events, never a token. Nil discards.
	Logger *slog.Logger
}

// Client is the gateway's OAuth client of its upstream servers. It is safe
// for concurrent use.
type Client struct {
	opts   Options
	public *url.URL
	links  *seal.Sealer // connect links
	states *seal.Sealer // the state of an authorization request
	vault  *seal.Sealer // stored tokens and registrations
	logger *slog.Logger
	hc     *http.Client
	now    func() time.Time
	tokens *expirable.LRU[tokenKey, *tokenRecord] // opened from the store
	meta   *expirable.LRU[string, *serverMeta]    // discovery, by server and URL
	// refreshing serializes the refreshes of one token (by its key's
	// hash): a bounded set of locks, however many principals.
	refreshing [64]sync.Mutex

	catalogMu sync.Mutex
	catalog   map[string]string // server → the principal whose account lists it
}

// tokenKey names one principal's token at one server.
type tokenKey struct{ server, principal string }

// New returns a Client.
func New(opts Options) (*Client, error) {
	if opts.Store == nil || opts.Servers == nil {
		return nil, errors.New("oauthclient: Store and Servers are required")
	}
	pub, err := url.Parse(strings.TrimSuffix(opts.PublicURL, "/"))
	if err != nil || pub.Host == "" || (pub.Scheme != "http" && pub.Scheme != "https") {
		return nil, errors.New("oauthclient: PublicURL must be an absolute http or https URL")
	}
	c := &Client{opts: opts, public: pub, logger: opts.Logger, hc: opts.HTTPClient, now: time.Now, catalog: map[string]string{}}
	for _, s := range []struct {
		p       **seal.Sealer
		purpose string
	}{{&c.links, "oauth-link"}, {&c.states, "oauth-state"}, {&c.vault, "oauth-vault"}} {
		if *s.p, err = seal.New(opts.Secret, s.purpose); err != nil {
			return nil, fmt.Errorf("oauthclient: %w", err)
		}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient()
	}
	if c.opts.ClientName == "" {
		c.opts.ClientName = DefaultClientName
	}
	if c.opts.LinkTTL <= 0 {
		c.opts.LinkTTL = DefaultLinkTTL
	}
	c.tokens = expirable.NewLRU[tokenKey, *tokenRecord](10000, nil, 10*time.Minute)
	c.meta = expirable.NewLRU[string, *serverMeta](1000, nil, time.Hour)
	return c, nil
}

// RedirectURL is the gateway's redirect URI, where authorization servers
// send the browser back.
func (c *Client) RedirectURL() string { return c.public.String() + CallbackPath }

// MetadataDocumentURL is the URL of the client ID metadata document the
// gateway serves, or "" when PublicURL is not https (such a document must
// be fetched over https).
func (c *Client) MetadataDocumentURL() string {
	if c.public.Scheme != "https" {
		return ""
	}
	return c.public.String() + MetadataDocumentPath
}

// ConnectRequired is the error of a request for a principal that has no
// usable token at a per-user server: the principal must open URL (a
// connect link) in a browser. Its message holds the URL, for clients that
// show nothing else; it never holds a token.
type ConnectRequired struct {
	Server    string
	Principal string
	// URL is the connect link, valid for Options.LinkTTL.
	URL string
	// ElicitationID names this request to connect: OnConnected gets it
	// back.
	ElicitationID string
	// Reason says why, in words for the user ("no account is connected").
	Reason string
}

func (e *ConnectRequired) Error() string {
	return fmt.Sprintf("server %q needs you to connect your account (%s): open %s", e.Server, e.Reason, e.URL)
}

// Message is what a client shows the user beside the URL.
func (e *ConnectRequired) Message() string {
	return fmt.Sprintf("Connect your account at %s to continue (%s).", e.Server, e.Reason)
}

// Check makes sure principal has a token for server before a request of
// theirs goes there. For grant authorization_code it returns
// ConnectRequired when none is stored (a stored one may still be refused
// by the server, which Transport handles). For grant token_exchange it
// exchanges credential, the caller's own token from the identity provider
// the gateway and the server share, when no unexpired token is stored; an
// empty credential is an error (an API key is never exchanged). For other
// servers it returns nil.
func (c *Client) Check(ctx context.Context, server, principal, credential string) error {
	srv, ok := c.opts.Servers(server)
	if !ok {
		return nil
	}
	switch srv.GrantOf() {
	case config.GrantAuthorizationCode:
		rec, err := c.token(ctx, server, principal)
		if err != nil {
			return err
		}
		if rec == nil {
			return c.connectRequired(server, principal, nil, "no account is connected")
		}
	case config.GrantTokenExchange:
		rec, err := c.token(ctx, server, principal)
		if err != nil {
			return err
		}
		if rec != nil && !rec.expired(c.now()) {
			return nil
		}
		if credential == "" {
			return fmt.Errorf("%w: server %q exchanges the caller's token from the identity provider (auth.jwt) for one of its own; an API key cannot be exchanged", ErrNoCredential, server)
		}
		_, err = c.exchange(ctx, srv, principal, credential)
		return err
	}
	return nil
}

// ErrNoCredential is Check's error for a token_exchange server called
// without a token to exchange.
var ErrNoCredential = errors.New("no token to exchange")

// Connected reports whether principal has a token stored for server.
func (c *Client) Connected(ctx context.Context, server, principal string) (bool, error) {
	rec, err := c.token(ctx, server, principal)
	return rec != nil, err
}

// Count returns how many principals have an account connected at server.
func (c *Client) Count(ctx context.Context, server string) (int, error) {
	return c.opts.Store.CountOAuthTokens(ctx, server)
}

// ErrNotConnected is returned by Disconnect when the principal had no
// account connected at the server.
var ErrNotConnected = errors.New("no account is connected")

// Disconnect forgets principal's token for server, after revoking it at
// the authorization server where that server supports it (RFC 7009; a
// failed revocation is logged, not returned: the token is forgotten
// anyway).
func (c *Client) Disconnect(ctx context.Context, server, principal string) error {
	rec, err := c.token(ctx, server, principal)
	if err != nil {
		return err
	}
	if rec == nil {
		return ErrNotConnected
	}
	c.revoke(ctx, server, rec)
	c.tokens.Remove(tokenKey{server, principal})
	if err := c.opts.Store.DeleteOAuthToken(ctx, server, principal); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("disconnecting from server %q: %w", server, err)
	}
	c.logger.Info("account disconnected", "server", server, "principal", principal)
	return nil
}

// Forget drops everything kept for server: its tokens and its
// registrations (when the server is removed).
func (c *Client) Forget(ctx context.Context, server string) error {
	for _, k := range c.meta.Keys() {
		if strings.HasPrefix(k, server+" ") {
			c.meta.Remove(k)
		}
	}
	for _, k := range c.tokens.Keys() {
		if k.server == server {
			c.tokens.Remove(k)
		}
	}
	if _, err := c.opts.Store.DeleteOAuthTokens(ctx, server); err != nil {
		return err
	}
	return c.opts.Store.DeleteOAuthClients(ctx, server)
}

// NotConnected reports whether err is Disconnect's for a principal without
// an account at the server.
func (c *Client) NotConnected(err error) bool { return errors.Is(err, ErrNotConnected) }
