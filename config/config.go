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

import (
	"path"
	"path/filepath"
	"time"
)

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

	DefaultPrefix              = "mcp"
	DefaultSeparator           = "__"
	DefaultMaxNameLength       = 64 // what LLM APIs accept: ^[a-zA-Z0-9_-]{1,64}$
	DefaultListChangedDebounce = 500 * time.Millisecond
	DefaultInputTimeout        = 5 * time.Minute
	DefaultResumeWindow        = 5 * time.Minute
	DefaultStreamAfter         = time.Second
	DefaultRestartAttempts     = 20
	DefaultRestartBackoff      = 500 * time.Millisecond
	DefaultRestartMaxBackoff   = 30 * time.Second
	DefaultPoolMax             = 100
	DefaultPoolIdle            = 10 * time.Minute
	DefaultTaskTTL             = time.Hour
	DefaultTaskMaxTTL          = 24 * time.Hour
	DefaultTaskPollInterval    = time.Second
	DefaultTaskPromoteAfter    = 2 * time.Second
	DefaultMaxHostedTasks      = 16
	DefaultAdminEnvPrefix      = "MCPGW_UPSTREAM_"
	DefaultJWTLeeway           = 30 * time.Second
	DefaultMaxLimiters         = 10000
	DefaultMediaMinBytes       = 4 << 10
	DefaultMediaMaxBytes       = 1 << 30
	DefaultMediaMaxAge         = 24 * time.Hour
)

// Prefix modes of exposed tool and prompt names (Naming.PrefixMode,
// ServerNaming.PrefixMode; DESIGN decision 7).
const (
	// PrefixAlways exposes every name as <prefix><sep><server><sep><name>,
	// such as "mcp__files__read_file".
	PrefixAlways = "always"
	// PrefixOnCollision exposes a name as the server gives it, or in the
	// PrefixAlways form while another server exposes the same name.
	PrefixOnCollision = "on_collision"
	// PrefixNever exposes names as the server gives them. It is meant for a
	// single server, or servers known not to overlap: where another server
	// already has a name, this server's tool or prompt is left out (and
	// reported).
	PrefixNever = "never"
)

// Namespace modes of resource URIs (Resources.Namespace,
// ServerResources.Namespace). A namespaced URI starts with Naming.Prefix
// and names the server; the gateway rewrites it back wherever it appears.
const (
	// NamespaceAuto keeps the resource URIs of one server as they are and
	// namespaces those of every other server under auto, so that two
	// servers' URIs (two servers' file:// URIs, say) never clash. The one
	// is chosen by the configuration alone: the first server, in the
	// config file's order and then, for the servers registered through
	// the admin API, by name, whose namespace is not NamespaceAlways (if
	// that server's is NamespaceNever, no server under auto keeps its
	// URIs). So every URI has the same form in every run, whichever
	// server comes up first, and a server coming up never changes the
	// form of URIs already listed.
	NamespaceAuto = "auto"
	// NamespaceAlways namespaces every resource URI of the server.
	NamespaceAlways = "always"
	// NamespaceNever exposes the server's resource URIs as they are.
	NamespaceNever = "never"
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
	// AllowedHosts are the Host header values accepted on /mcp, /admin and
	// /media (host or host:port), matched by HostAllowed:
	// case-insensitively, and an entry without a port matches any port. If
	// empty: the host of PublicURL, with its port and without, plus
	// "localhost", "127.0.0.1" and "[::1]".
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the Origin header values accepted on /mcp and
	// /admin (scheme://host[:port]; a trailing "/" is dropped), matched by
	// OriginAllowed: case-insensitively, and an entry without a port matches
	// any port. If empty: the origin of PublicURL plus http:// and https://
	// "localhost", "127.0.0.1" and "[::1]". A request without Origin is
	// always allowed.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Sessions bounds the legacy edge's sessions.
	Sessions Sessions `yaml:"sessions"`
	// Naming shapes the exposed names of tools and prompts.
	Naming Naming `yaml:"naming"`
	// Catalog sets how the merged tools are shown: all of them, or a
	// search (see Catalog).
	Catalog Catalog `yaml:"catalog"`
	// PageSize is the number of items per page of tools/list, prompts/list,
	// resources/list and resources/templates/list, from 1 to 10000; each
	// page but the last carries an opaque nextCursor. If zero, the default,
	// every list is one full page without a nextCursor: many clients never
	// follow one (DESIGN decision 6).
	PageSize int `yaml:"page_size"`
	// ListChangedDebounce is how long the gateway gathers upstream list
	// changes (and restarts) before it tells its clients, once, that a list
	// changed; more than 0 and at most 1m. Default
	// DefaultListChangedDebounce.
	ListChangedDebounce Duration `yaml:"list_changed_debounce"`
	// Resources configures how the servers' resources are exposed.
	Resources Resources `yaml:"resources"`
	// InputTimeout bounds how long a client may take to answer a request
	// the gateway relays to it for a server (elicitation/create,
	// sampling/createMessage, roots/list). Then the server gets the
	// gateway's own answer (elicitation: cancel; sampling: an error;
	// roots: the server's configured roots, or none) and the client a
	// notifications/cancelled. While a call waits
	// for such an answer its own timeout is paused. Default
	// DefaultInputTimeout.
	InputTimeout Duration `yaml:"input_timeout"`
	// ResumeWindow is how long the SSE stream of a call whose client
	// connection dropped stays resumable with Last-Event-ID; a call whose
	// stream nobody resumed within it is cancelled upstream. Default
	// DefaultResumeWindow.
	ResumeWindow Duration `yaml:"resume_window"`
	// StreamAfter is how long a forwarded request may run before its
	// answer becomes an SSE stream (with a priming event on 2025-11-25,
	// so that the client can resume it, and keep-alive comments). A
	// request that ends sooner with nothing but its response is answered
	// as application/json; a notification or an input request for the
	// client turns the answer into a stream at once. Default
	// DefaultStreamAfter.
	StreamAfter Duration `yaml:"stream_after"`
	// Store is where the gateway keeps what must survive a restart: tasks,
	// the admin API's servers, events and sessions.
	Store Store `yaml:"store"`
	// Database is the old spelling of Store: database.path is store.path.
	Database Database `yaml:"database"`
	// Cluster makes the gateway one of several replicas sharing a store.
	Cluster Cluster `yaml:"cluster"`
	// Auth says who may use /mcp, and as which principal.
	Auth Auth `yaml:"auth"`
	// Tasks configures the 2025-11-25 tasks the gateway relays and hosts.
	Tasks Tasks `yaml:"tasks"`
	// Media configures the rewrite of image, audio and embedded blobs into
	// links to /media, which the gateway serves.
	Media Media `yaml:"media"`
	// ACL says who may use which servers, tools, prompts and resources.
	ACL ACL `yaml:"acl"`
	// RateLimits bounds how often each principal may call.
	RateLimits RateLimits `yaml:"rate_limits"`
	// TrustedProxies are the peers (IP addresses or CIDR ranges, such as
	// "10.0.0.0/8") whose X-Forwarded-Proto and X-Forwarded-Host are
	// believed: a request through one of them gets media URLs on the
	// forwarded scheme and host. Everybody else's are ignored, and media
	// URLs start with PublicURL. Default none.
	TrustedProxies []string `yaml:"trusted_proxies"`
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

// Naming shapes the names the gateway exposes for the servers' tools and
// prompts (DESIGN decision 7). Routing goes through a reverse table, never by
// splitting a name on the separator.
type Naming struct {
	// PrefixMode is PrefixAlways, PrefixOnCollision or PrefixNever. A
	// server's own Naming.PrefixMode overrides it. Default PrefixAlways; the
	// helpers treat "" as PrefixAlways.
	PrefixMode string `yaml:"prefix_mode"`
	// Prefix starts a prefixed name, and the scheme of a namespaced resource
	// URI, so it must be a valid start of a URI scheme: a lower-case letter,
	// then up to 15 of a-z and 0-9. Default DefaultPrefix.
	Prefix string `yaml:"prefix"`
	// Separator goes between the prefix, the server name and the name: 1 to
	// 4 of A-Z, a-z, 0-9, _ and -. Default DefaultSeparator.
	Separator string `yaml:"separator"`
	// MaxLength is the length of the longest exposed tool or prompt name,
	// from 16 to 128 (the spec's limit); a longer name is shortened and
	// given a short stable hash suffix. A server's tools.rename values must
	// fit it as they are. Default DefaultMaxNameLength; the helpers treat 0
	// as DefaultMaxNameLength.
	MaxLength int `yaml:"max_length"`
}

// Resources configures how the servers' resources are exposed.
type Resources struct {
	// Namespace is NamespaceAuto, NamespaceAlways or NamespaceNever: whether
	// the servers' resource URIs are rewritten into the gateway's namespace.
	// A server's own Resources.Namespace overrides it. Default NamespaceAuto;
	// the helpers treat "" as NamespaceAuto.
	Namespace string `yaml:"namespace"`
}

// The store drivers.
const (
	StoreSQLite   = "sqlite"   // one file, for one replica; the default
	StorePostgres = "postgres" // a PostgreSQL database, which replicas share
)

// Bounds of Store.MaxConns.
const (
	// DefaultStoreMaxConns is small: each replica has its own pool, all of
	// them share PostgreSQL's max_connections (100 by default), and the
	// store's statements are short.
	DefaultStoreMaxConns = 10
	MaxStoreMaxConns     = 1000
)

// Store is the gateway's store.
type Store struct {
	// Driver is StoreSQLite or StorePostgres. Default StoreSQLite.
	Driver string `yaml:"driver"`
	// DSN is PostgreSQL's connection string (postgres://user:pass@host/db,
	// or key=value pairs), required with StorePostgres and refused with
	// StoreSQLite. ${VAR} is expanded in it, so that the password stays out
	// of the file: dsn: ${MCPGW_DATABASE_URL}. It never appears in a
	// problem or a log.
	DSN string `yaml:"dsn"`
	// Path of the SQLite file, with StoreSQLite only. If empty,
	// "<data_dir>/mcpgw.db" (see Config.DatabasePath).
	Path string `yaml:"path"`
	// MaxConns is the size of PostgreSQL's connection pool, from 1 to
	// MaxStoreMaxConns, with StorePostgres only. Default
	// DefaultStoreMaxConns.
	MaxConns int `yaml:"max_conns"`
}

// Database is the old spelling of Store.
type Database struct {
	// Path is Store.Path.
	Path string `yaml:"path"`
}

// DatabasePath returns the SQLite file the gateway uses with StoreSQLite.
func (c *Config) DatabasePath() string {
	switch {
	case c.Store.Path != "":
		return c.Store.Path
	case c.Database.Path != "":
		return c.Database.Path
	}
	return filepath.Join(c.DataDir, "mcpgw.db")
}

// Auth says who may use /mcp. Each request is made by a principal: the one
// an API key names, the one a JWT names (JWT.Qualify: "jwt:<issuer>#<sub>"),
// or "anonymous" for a request without a token when Anonymous allows it.
// Sessions, tasks, media and rate limits belong to the principal that made
// them. A key's names never hold ":" and a token's always start "jwt:", so
// a token can never be a key's principal or in a key's group.
type Auth struct {
	// Anonymous allows requests without a token, as the principal
	// "anonymous". Default true when neither an API key nor a JWT issuer
	// is configured, false otherwise: with credentials, anonymous access
	// must be asked for.
	Anonymous *bool `yaml:"anonymous"`
	// APIKeys are the accepted bearer tokens, kept hashed.
	APIKeys []APIKey `yaml:"api_keys"`
	// JWT accepts OAuth 2.1 access tokens (the gateway as a resource
	// server): JWTs signed by the issuer's keys. Off when Issuer is "".
	JWT JWT `yaml:"jwt"`
}

// JWT configures OAuth 2.1 resource-server mode (MCP 2025-11-25,
// basic/authorization): bearer JWTs checked against the issuer's JWKS.
type JWT struct {
	// Issuer is the authorization server's issuer URL; a token's "iss"
	// must equal it. Setting it turns JWTs on.
	Issuer string `yaml:"issuer"`
	// JWKSURL is where the issuer's signing keys are. Default: the
	// jwks_uri of <issuer>/.well-known/oauth-authorization-server, else of
	// <issuer>/.well-known/openid-configuration.
	JWKSURL string `yaml:"jwks_url"`
	// Audience is what a token's "aud" must contain. Default: the
	// gateway's resource URL, <public_url>/mcp (RFC 8707).
	Audience string `yaml:"audience"`
	// Algorithms are the accepted signature algorithms. Default RS256 and
	// ES256; "none" and the HMAC ones are never accepted.
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp, nbf and iat. Default
	// DefaultJWTLeeway.
	Leeway Duration `yaml:"leeway"`
	// PrincipalClaim names the claim whose value, qualified by Qualify, is
	// the principal. Default "sub".
	PrincipalClaim string `yaml:"principal_claim"`
	// GroupsClaim names the claim (a string or a list of strings) that
	// gives the principal's groups, each qualified by Qualify. Default
	// "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// Scopes are the scopes a token must all have (its "scope", space
	// separated, or "scp"); also advertised as scopes_supported. Default
	// none.
	Scopes []string `yaml:"scopes"`
	// AuthorizationServers are advertised in the protected-resource
	// metadata (RFC 9728). Default: Issuer.
	AuthorizationServers []string `yaml:"authorization_servers"`
}

// Enabled reports whether JWTs are accepted.
func (j JWT) Enabled() bool { return j.Issuer != "" }

// JWTNamePrefix starts the name of every principal and group that comes
// from a JWT. The names of API keys never hold ":".
const JWTNamePrefix = "jwt:"

// Qualify returns the principal or group name that a token of j's issuer
// gets for the claim value v: "jwt:<issuer>#<v>". Everything a principal
// owns binds to this name, and access rules name a token's principal or
// group by it. Since an issuer holds no "#" (Validate), the first "#" ends
// it, and tokens of two issuers never get the same name.
func (j JWT) Qualify(v string) string { return JWTNamePrefix + j.Issuer + "#" + v }

// ACL says which principals may use which servers, tools, prompts and
// resources. With no rules everybody may use everything.
type ACL struct {
	// Default is the effect when no rule matches: "allow" or "deny".
	// Default "allow" without rules, "deny" with them.
	Default string `yaml:"default"`
	// Rules are checked all: a matching deny wins over a matching allow.
	Rules []ACLRule `yaml:"rules"`
}

// DefaultEffect returns the effect when no rule matches.
func (a ACL) DefaultEffect() string {
	if a.Default != "" {
		return a.Default
	}
	if len(a.Rules) == 0 {
		return ACLAllow
	}
	return ACLDeny
}

// ACL effects.
const (
	ACLAllow = "allow"
	ACLDeny  = "deny"
)

// ACLRule is one access rule. It applies to a caller named in Principals
// or in one of Groups (both empty: every caller, anonymous included), and
// to an item (a tool, prompt, resource or resource template) whose server
// matches Servers or whose exposed name matches Tools, Prompts or
// Resources. A resource's (or template's) pattern is matched against the
// server's own URI and its namespaced form (mcp+<server>+<uri>), both
// normalized (RFC 3986 §6.2.2: lowercase scheme and host, no dot
// segments, no needless percent-encoding); a deny rule also against both
// as the server spells them and with repeated and trailing slashes
// dropped.
// Patterns are globs (* ? [a-z]) in which * and ? also match "/", so that
// "*" is everything and "file:///secret/*" every URI under it; a pattern
// without glob characters is normalized before it is matched.
type ACLRule struct {
	Effect string `yaml:"effect"` // ACLAllow or ACLDeny
	// Principals and Groups name callers as Auth does: an API key's
	// principal or group by its bare name, "anonymous", and a token's by
	// JWT.Qualify ("jwt:<issuer>#<claim value>").
	Principals []string `yaml:"principals"`
	Groups     []string `yaml:"groups"`
	Servers    []string `yaml:"servers"`
	Tools      []string `yaml:"tools"`
	Prompts    []string `yaml:"prompts"`
	Resources  []string `yaml:"resources"`
}

// RateLimits bounds how often each principal may call the gateway.
type RateLimits struct {
	// PerPrincipal bounds each principal's requests on /mcp (429 with
	// Retry-After above it). Zero Rate: no limit.
	PerPrincipal Rate `yaml:"per_principal"`
	// MaxPrincipals bounds the principals whose limiters are kept (the
	// least recently used go first). Default DefaultMaxLimiters.
	MaxPrincipals int `yaml:"max_principals"`
}

// Rate is a token bucket: Rate requests per second on average, Burst at
// once.
type Rate struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// ServerLimit bounds the calls to one server.
type ServerLimit struct {
	// Rate and Burst bound the calls per second (zero Rate: none).
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// MaxConcurrent bounds the calls in flight at once (0: none).
	MaxConcurrent int `yaml:"max_concurrent"`
}

// APIKey is one accepted bearer token.
type APIKey struct {
	// Principal is the name the key stands for: [A-Za-z0-9._@-], 1 to 64
	// characters, not "anonymous".
	Principal string `yaml:"principal"`
	// KeySHA256 is the token's SHA-256, written "sha256:<64 hex digits>";
	// never the token itself.
	KeySHA256 string `yaml:"key_sha256"`
	// Groups the principal belongs to, for access rules: [A-Za-z0-9._@-],
	// 1 to 64 characters each.
	Groups []string `yaml:"groups"`
}

// AnonymousAllowed reports whether requests without a token are served.
func (a Auth) AnonymousAllowed() bool {
	if a.Anonymous != nil {
		return *a.Anonymous
	}
	return len(a.APIKeys) == 0 && !a.JWT.Enabled()
}

// Tasks configures 2025-11-25 tasks (task-augmented tools/call).
type Tasks struct {
	// Host makes the gateway run a task itself when a client asks for one
	// on a tool whose server has no task support, so every tool is listed
	// with taskSupport "optional". Default true; a server's own HostTasks
	// overrides it.
	Host *bool `yaml:"host"`
	// DefaultTTL is the lifetime of a hosted task whose client asked for
	// none, and the deadline of a task the gateway waits for on a client's
	// behalf (block and poll) when its server gave no ttl. Default
	// DefaultTaskTTL.
	DefaultTTL Duration `yaml:"default_ttl"`
	// MaxTTL caps the lifetime a client may ask for a hosted task. Default
	// DefaultTaskMaxTTL.
	MaxTTL Duration `yaml:"max_ttl"`
	// PollInterval is the pollInterval of hosted tasks. Default
	// DefaultTaskPollInterval.
	PollInterval Duration `yaml:"poll_interval"`
	// MaxHostedPerPrincipal caps the hosted tasks one principal may have
	// running at once. Default DefaultMaxHostedTasks.
	MaxHostedPerPrincipal int `yaml:"max_hosted_per_principal"`
	// PromoteAfter is how long a 2026-07-28 client's tools/call that
	// declared the tasks extension runs before the gateway answers it
	// with a hosted task instead of waiting for its result (on a server
	// it hosts tasks for). Zero makes every such call a task at once.
	// Default DefaultTaskPromoteAfter.
	PromoteAfter Duration `yaml:"promote_after"`
}

// Media modes: what the gateway does with a large image, audio or embedded
// blob in a result.
const (
	MediaLink         = "link"          // replace it with a resource_link to /media
	MediaLinkMarkdown = "link+markdown" // and add a Markdown text block, for clients that show only text
	MediaInline       = "inline"        // leave it in the result
)

// Media configures the media rewrite (DESIGN decision 8).
type Media struct {
	// Mode is MediaLink (the default), MediaLinkMarkdown or MediaInline
	// (off); a server's own Media.Mode overrides it.
	Mode string `yaml:"mode"`
	// MinBytes: a blob of at most this many bytes (decoded) stays in the
	// result. Default DefaultMediaMinBytes.
	MinBytes ByteSize `yaml:"min_bytes"`
	// MaxBytes bounds the bytes the media store keeps: on disk (under
	// <data_dir>/media) with SQLite, in the shared database for all
	// replicas with PostgreSQL; the least recently used go first. Default
	// DefaultMediaMaxBytes.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// MaxAge is how long a stored blob is served. Default DefaultMediaMaxAge.
	MaxAge Duration `yaml:"max_age"`
	// RewriteResources also rewrites the blobs of prompts/get messages and
	// resources/read contents. Default false: a client that reads a
	// resource gets its bytes.
	RewriteResources bool `yaml:"rewrite_resources"`
	// SignedURLs adds an expiry and a signature to every media URL, and
	// /media serves no URL without a valid one. Default false: the
	// unguessable id alone is the capability.
	SignedURLs bool `yaml:"signed_urls"`
	// URLTTL is how long a signed URL works. Zero: MaxAge (see SignTTL).
	URLTTL Duration `yaml:"url_ttl"`
}

// SignTTL returns how long a media URL works when signed, or 0 when URLs
// are not signed.
func (m Media) SignTTL() time.Duration {
	switch {
	case !m.SignedURLs:
		return 0
	case m.URLTTL > 0:
		return time.Duration(m.URLTTL)
	}
	return time.Duration(m.MaxAge)
}

// ModeFor returns the media mode for server s.
func (m Media) ModeFor(s *Server) string {
	if s != nil && s.Media.Mode != "" {
		return s.Media.Mode
	}
	return m.Mode
}

// ServerMedia overrides the media settings for one server.
type ServerMedia struct {
	// Mode overrides Media.Mode.
	Mode string `yaml:"mode"`
}

// HostsTasks reports whether the gateway hosts tasks for server s.
func (t Tasks) HostsTasks(s *Server) bool {
	if s != nil && s.HostTasks != nil {
		return *s.HostTasks
	}
	return t.Host == nil || *t.Host
}

// Admin configures the admin API under /admin.
type Admin struct {
	// Tokens are the SHA-256 hashes (hex) of the bearer tokens that may use
	// the admin API, written "sha256:<64 hex digits>"; the digits may be
	// upper or lower case. With none, /admin answers 403.
	Tokens []string `yaml:"tokens"`
	// Listen serves the admin API on its own address (such as
	// "127.0.0.1:9090") instead of beside /mcp. Default "": the main
	// listener.
	Listen string `yaml:"listen"`
	// EnvPrefix: a server registered through the admin API may expand
	// only environment variables whose names start with it, so that an
	// admin token cannot read the gateway's own secrets. Default
	// DefaultAdminEnvPrefix.
	EnvPrefix string `yaml:"env_prefix"`
	// StdioCommands are the commands a stdio server registered through the
	// admin API may run, each with the arguments it may be given (see
	// StdioCommand). Default none: the API registers no stdio server.
	StdioCommands []StdioCommand `yaml:"stdio_commands"`
	// StdioEnv names the variables a stdio server registered through the
	// admin API may set in its env, matched exactly; a name NeverPassed
	// refuses is a problem. Default none.
	StdioEnv []string `yaml:"stdio_env"`
	// StdioCwd are the working directories a stdio server registered
	// through the admin API may give as its cwd, absolute and matched
	// exactly after cleaning: npx, uv and python run and read code from
	// the directory they start in. Default none: such a server gives no
	// cwd and starts in the gateway's.
	StdioCwd []string `yaml:"stdio_cwd"`
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
	// Required marks a server the gateway is not ready without: /readyz
	// answers 503 while it is enabled and not running. Default
	// false: a server that is down degrades the gateway, not its readiness.
	Required bool `yaml:"required"`
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

	// Naming overrides the gateway's Naming for this server's names.
	Naming ServerNaming `yaml:"naming"`
	// Resources overrides the gateway's Resources for this server.
	Resources ServerResources `yaml:"resources"`
	// Tools filters, renames and redescribes this server's tools.
	Tools ToolOptions `yaml:"tools"`

	// Protocol is ProtocolAuto, ProtocolModern or ProtocolLegacy: the
	// era of MCP the gateway speaks to the server. auto asks the server
	// (server/discover) and falls back to initialize when it does not
	// answer as a 2026-07-28 server. Default ProtocolAuto (Parse and
	// DefaultServer fill it in); an sse server is always legacy.
	Protocol string `yaml:"protocol"`
	// SessionMode is SessionShared, SessionPerPrincipal or
	// SessionPerSession: whether all clients share one upstream session
	// (HTTP) or process (stdio), or each principal or each downstream
	// session gets its own (DESIGN decision 5). Default SessionShared.
	SessionMode string `yaml:"session_mode"`
	// SingleUser marks a shared server as used by one person, so that
	// URL-mode elicitation and -32042 errors, which the spec binds to the
	// user, are relayed from it. Default false.
	SingleUser bool `yaml:"single_user"`
	// Serialize runs this server's calls one at a time. Default false:
	// nothing is serialized.
	Serialize bool `yaml:"serialize"`
	// Pool bounds the upstream sessions or processes of a per_principal or
	// per_session server.
	Pool Pool `yaml:"pool"`
	// Restart sets how a server that failed or exited is started again.
	Restart Restart `yaml:"restart"`
	// Roots answer roots/list for this server when no client can: the
	// client did not declare roots, or no one client owns the upstream
	// session that asks (a shared one, say). If empty, such a roots/list
	// gets an empty list.
	Roots []Root `yaml:"roots"`
	// HostTasks overrides Tasks.Host for this server: whether the gateway
	// runs a task itself for a tool of this server that has no task
	// support of its own.
	HostTasks *bool `yaml:"host_tasks"`
	// Media overrides the media rewrite for this server's results.
	Media ServerMedia `yaml:"media"`
	// RateLimit bounds the calls to this server (-31003 above it).
	RateLimit ServerLimit `yaml:"rate_limit"`
	// ForwardHeaders are the client request headers passed on to this
	// server's HTTP requests (http and sse transports), by name. Default
	// none: a server gets only its own credentials and headers; a client's
	// Authorization and Cookie are never forwarded.
	ForwardHeaders []string `yaml:"forward_headers"`
	// ForwardNotifications sends the server's notifications that mcpgw
	// does not know (custom event/* pushes) to every session's GET stream.
	// Default false: they are only kept in the event store.
	ForwardNotifications bool `yaml:"forward_notifications"`
	// OAuth makes the gateway an OAuth client of this http or sse server
	// (see ServerOAuth). Default none: api_key and headers are its
	// credentials.
	OAuth *ServerOAuth `yaml:"oauth"`
}

// Protocol eras of a server (Server.Protocol).
const (
	ProtocolAuto   = "auto"
	ProtocolModern = "modern"
	ProtocolLegacy = "legacy"
)

// Session modes of a server (Server.SessionMode).
const (
	SessionShared       = "shared"
	SessionPerPrincipal = "per_principal"
	SessionPerSession   = "per_session"
)

// Pool bounds the upstream sessions (HTTP) or processes (stdio) of a
// per_principal or per_session server.
type Pool struct {
	// Max is the most at once; when reached, the least recently used idle
	// one is closed, or the call is refused when none is idle. Default
	// DefaultPoolMax.
	Max int `yaml:"max"`
	// IdleTimeout closes one nobody used for this long. Default
	// DefaultPoolIdle.
	IdleTimeout Duration `yaml:"idle_timeout"`
}

// Restart sets how a failed or exited server is started again: after
// InitialBackoff, doubling up to MaxBackoff, at most MaxAttempts times in
// a row (a start that reaches running resets the count).
type Restart struct {
	// MaxAttempts is the most restarts in a row; 0 means the default,
	// DefaultRestartAttempts, and -1 never restarts.
	MaxAttempts int `yaml:"max_attempts"`
	// InitialBackoff is the first wait. Default DefaultRestartBackoff.
	InitialBackoff Duration `yaml:"initial_backoff"`
	// MaxBackoff caps the wait. Default DefaultRestartMaxBackoff.
	MaxBackoff Duration `yaml:"max_backoff"`
}

// Root is one entry of a server's configured roots (MCP roots/list).
type Root struct {
	// URI is a file:// URI.
	URI string `yaml:"uri"`
	// Name is an optional display name.
	Name string `yaml:"name"`
}

// ServerNaming overrides the gateway's Naming for one server.
type ServerNaming struct {
	// PrefixMode is PrefixAlways, PrefixOnCollision or PrefixNever. If
	// empty, the gateway's Naming.PrefixMode is used (see Server.PrefixMode).
	PrefixMode string `yaml:"prefix_mode"`
}

// ServerResources overrides the gateway's Resources for one server.
type ServerResources struct {
	// Namespace is NamespaceAuto, NamespaceAlways or NamespaceNever. If
	// empty, the gateway's Resources.Namespace is used (see
	// Server.Namespace).
	Namespace string `yaml:"namespace"`
}

// ToolOptions filters, renames and redescribes the tools of one server. The
// keys and patterns are the server's original tool names, before any prefix
// or rename.
type ToolOptions struct {
	// Allow are the glob patterns (path.Match syntax: *, ?, [a-z], \ to
	// escape; * does not match "/") of the tools to expose. If empty, every
	// tool is allowed.
	Allow []string `yaml:"allow"`
	// Deny are glob patterns like Allow's. A tool matching any of them is
	// hidden even if Allow matches it. If empty, none is denied.
	Deny []string `yaml:"deny"`
	// Rename maps an original tool name to the name exposed for it, used
	// verbatim: not prefixed, whatever the prefix mode (a clash with another
	// server's name is settled as for any other name). A new name is 1 or
	// more of A-Z, a-z, 0-9, _ and -, at most Naming.MaxLength long, and no
	// two tools of the server get the same one. If empty, no tool is
	// renamed.
	Rename map[string]string `yaml:"rename"`
	// Describe maps an original tool name to the description exposed
	// instead of the server's (not empty). If empty, every tool keeps its
	// own.
	Describe map[string]string `yaml:"describe"`
}

// IsEnabled reports whether the server should run (Enabled unset means yes).
func (s *Server) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// PrefixMode returns the prefix mode of the server's exposed names: its own
// Naming.PrefixMode if set, else global's, else PrefixAlways.
func (s *Server) PrefixMode(global Naming) string {
	switch {
	case s.Naming.PrefixMode != "":
		return s.Naming.PrefixMode
	case global.PrefixMode != "":
		return global.PrefixMode
	}
	return PrefixAlways
}

// Namespace returns the namespace mode of the server's resource URIs: its
// own Resources.Namespace if set, else global's, else NamespaceAuto.
func (s *Server) Namespace(global Resources) string {
	switch {
	case s.Resources.Namespace != "":
		return s.Resources.Namespace
	case global.Namespace != "":
		return global.Namespace
	}
	return NamespaceAuto
}

// Visible reports whether the tool the server calls name is exposed: Allow
// is empty or one of its patterns matches name, and no pattern of Deny
// does. A malformed pattern matches nothing (validation rejects it).
func (t ToolOptions) Visible(name string) bool {
	return (len(t.Allow) == 0 || matchAny(t.Allow, name)) && !matchAny(t.Deny, name)
}

// matchAny reports whether one of the glob patterns matches name.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); ok && err == nil {
			return true
		}
	}
	return false
}

// Duration is a time.Duration written as a Go duration string ("90s", "2m").
type Duration time.Duration

// ByteSize is a size in bytes, written as an integer or with a unit
// ("512KiB", "4MiB", "1GiB"; also KB, MB, GB as powers of 1000).
type ByteSize int64
