// Package config is mcpgw's configuration: the YAML schema, strict decoding,
// documented defaults, ${VAR} expansion and one validation pass that reports
// every problem with its key path.
//
// It is data only (STYLE.md): the other packages take the types below and
// nothing here starts, dials or logs. Startup settings (listen address, limits,
// sessions) stay apart from the server set, which later changes live through
// the admin API; ValidateServer applies the file's rules to one server entry
// so an entry registered over HTTP is held to the same rules.
package config

import "time"

// Defaults for the gateway settings, used where the file leaves a key out.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultDataDir         = "./data"
	DefaultCallTimeout     = 120 * time.Second
	DefaultStartTimeout    = 120 * time.Second
	DefaultMaxRequestBody  = 4 << 20  // 4 MiB: a client's POST body
	DefaultMaxResponseBody = 64 << 20 // 64 MiB: one upstream message (line, event or body)
	DefaultSessionIdle     = 30 * time.Minute
	DefaultMaxSessions     = 10000
	DefaultMaxPerPrincipal = 1000
	DefaultShutdownGrace   = 10 * time.Second
)

// Transports of an upstream server.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // streamable HTTP (2025-03-26 and later)
	TransportSSE   = "sse"  // the 2024-11-05 HTTP+SSE transport
)

// Config is the whole file after defaults, expansion and validation. It is
// read-only once loaded.
type Config struct {
	// Listen is the address of the HTTP listener. Default DefaultListen.
	Listen string `yaml:"listen"`
	// PublicURL is the URL clients use to reach the gateway (scheme, host,
	// port, no path; a trailing "/" is dropped). Default "http://" + Listen,
	// with "localhost" for an empty or unspecified host (":8080",
	// "0.0.0.0:8080"). When Listen's port is 0 the default keeps port 0:
	// the caller sets the real one after binding.
	PublicURL string `yaml:"public_url"`
	// DataDir holds everything the gateway writes. Default DefaultDataDir.
	DataDir string `yaml:"data_dir"`
	// Secret keys the sealed tokens the gateway hands out (session ids;
	// later cursors and task ids). Any string of at least 32 bytes; when
	// empty, a random key is made at start and sealed tokens do not survive
	// a restart. ${VAR} is expanded in it, so it can stay out of the file:
	// secret: ${MCPGW_SECRET}.
	Secret string `yaml:"secret"`
	// CallTimeout bounds one forwarded call. Default DefaultCallTimeout;
	// a server's Timeout overrides it.
	CallTimeout Duration `yaml:"call_timeout"`
	// StartTimeout bounds starting and initializing one server. Default
	// DefaultStartTimeout.
	StartTimeout Duration `yaml:"start_timeout"`
	// ShutdownGrace bounds the drain on shutdown. Default DefaultShutdownGrace.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// MaxRequestBody caps a client's POST body (413 above it). Default
	// DefaultMaxRequestBody.
	MaxRequestBody ByteSize `yaml:"max_request_body"`
	// MaxResponseBody caps one message from an upstream: a stdio line, an
	// SSE event or a JSON body. Default DefaultMaxResponseBody.
	MaxResponseBody ByteSize `yaml:"max_response_body"`
	// AllowedHosts are the Host header values accepted on /mcp (host or
	// host:port), matched by HostAllowed: case-insensitively, and an entry
	// without a port matches any port. If empty: the host of PublicURL, with
	// its port and without, plus "localhost", "127.0.0.1" and "[::1]".
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the Origin header values accepted
	// (scheme://host[:port]; a trailing "/" is dropped), matched by
	// OriginAllowed: case-insensitively, and an entry without a port matches
	// any port. If empty: the origin of PublicURL plus http:// and https://
	// "localhost", "127.0.0.1" and "[::1]". A request without Origin is
	// always allowed.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Sessions bounds the legacy edge's sessions.
	Sessions Sessions `yaml:"sessions"`
	// Admin configures the admin API.
	Admin Admin `yaml:"admin"`
	// Log configures the gateway's own log.
	Log Log `yaml:"log"`
	// Servers are the upstream servers. Entries that failed validation are
	// not here; Parse reports them.
	Servers []Server `yaml:"servers"`
}

// Sessions bounds the downstream (legacy edge) sessions (DESIGN decision 12).
type Sessions struct {
	// IdleTimeout ends a session nobody used for this long. Default
	// DefaultSessionIdle.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Max caps the sessions of the whole gateway. Default DefaultMaxSessions.
	Max int `yaml:"max"`
	// MaxPerPrincipal caps the sessions of one principal. Default
	// DefaultMaxPerPrincipal.
	MaxPerPrincipal int `yaml:"max_per_principal"`
}

// Admin configures the admin API under /admin.
type Admin struct {
	// Tokens are the SHA-256 hashes (hex) of the bearer tokens that may use
	// the admin API, written "sha256:<64 hex digits>"; the digits may be
	// upper or lower case. With none, /admin answers 403.
	Tokens []string `yaml:"tokens"`
}

// Log configures the gateway's log on stderr.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json or text. Default json.
	Format string `yaml:"format"`
}

// Server is one upstream MCP server.
type Server struct {
	// Name is the server's name in exposed tool names and in the admin API:
	// [a-z0-9-], 1 to 32 characters, no "__".
	Name string `yaml:"name"`
	// Transport is stdio, http or sse.
	Transport string `yaml:"transport"`
	// Enabled is false to keep the entry without starting it. Default true.
	Enabled *bool `yaml:"enabled"`
	// Timeout overrides the gateway's CallTimeout for this server. If zero,
	// CallTimeout is used; it may not be negative.
	Timeout Duration `yaml:"timeout"`

	// Command, Args, Env and Cwd start a stdio server. Env is added to a
	// minimal environment (PATH, HOME, TMPDIR, LANG); the gateway's own
	// variables are never passed on.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Cwd     string            `yaml:"cwd"`

	// URL, APIKey and Headers reach an http or sse server. APIKey is sent as
	// "Authorization: Bearer <key>". URL must be https unless its host is
	// loopback. URL, APIKey and the values of Headers and Env are the only
	// fields where Parse expands ${VAR} (see Expand).
	URL     string            `yaml:"url"`
	APIKey  string            `yaml:"api_key"`
	Headers map[string]string `yaml:"headers"`
}

// IsEnabled reports whether the server should run (Enabled unset means yes).
func (s *Server) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// Duration is a time.Duration written as a Go duration string ("90s", "2m").
type Duration time.Duration

// ByteSize is a size in bytes, written as an integer or with a unit
// ("512KiB", "4MiB", "1GiB"; also KB, MB, GB as powers of 1000).
type ByteSize int64
