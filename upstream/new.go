package upstream

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

const defaultStopGrace = 3 * time.Second

// New returns a Client for srv over the transport srv names. Call Connect to
// start it. srv must have passed config validation. The transports present
// srv's APIKey and Headers (http, sse) or Env (stdio); the Manager puts
// there what its CredentialProvider gives each client. The client speaks
// the era srv.Protocol names, unless opts.Protocol is set (see
// Client.Connect); an sse server is always legacy.
func New(srv config.Server, opts ClientOptions) (*Client, error) {
	if opts.Name == "" {
		opts.Name = srv.Name
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = config.DefaultMaxResponseBody
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = defaultStopGrace
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultHTTPClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Protocol == "" {
		opts.Protocol = srv.Protocol
	}
	if srv.Transport == config.TransportSSE {
		// The 2024-11-05 transport has no modern era.
		opts.Protocol = config.ProtocolLegacy
	}
	// Transports log with the server's name; newClient must not add it
	// twice, so it gets the logger before this.
	clientLogger := opts.Logger
	opts.Logger = opts.Logger.With("server", opts.Name)
	var t transport
	switch srv.Transport {
	case config.TransportStdio:
		t = newStdioTransport(srv, &opts)
	case config.TransportHTTP:
		t = newHTTPTransport(srv, &opts)
	case config.TransportSSE:
		t = newSSETransport(srv, &opts)
	default:
		return nil, fmt.Errorf("server %q: unknown transport %q", srv.Name, srv.Transport)
	}
	opts.Logger = clientLogger
	return newClient(opts, t), nil
}

// defaultHTTPClient keeps connections alive across calls and sets no overall
// timeout: event streams are long-lived, and each call is bounded by its
// context. Its transport is tuned as a reverse proxy's: many idle
// connections per upstream host (calls run concurrently), bounded dials
// and handshakes. Compression is off: the transport would otherwise ask
// every upstream for gzip, and the server would compress and the gateway
// inflate each answer before parsing it, CPU on both ends for little gain
// on loopback or a LAN, where upstreams usually are.
var defaultHTTPClient = &http.Client{
	Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		DisableCompression:    true,
	},
}

// processInfo is implemented by transports that run a child process.
type processInfo interface {
	pid() int
	lastStderr() string
}

// PID returns the process id of a stdio server's child, or 0.
func (c *Client) PID() int {
	if p, ok := c.t.(processInfo); ok {
		return p.pid()
	}
	return 0
}

// LastStderr returns the last line a stdio server wrote to stderr, or "".
func (c *Client) LastStderr() string {
	if p, ok := c.t.(processInfo); ok {
		return p.lastStderr()
	}
	return ""
}
