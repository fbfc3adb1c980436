package config

import (
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateServer(t *testing.T) {
	stdio := func(name string) Server { return Server{Name: name, Transport: "stdio", Command: "mcp-x"} }
	tests := []struct {
		name   string
		server Server // given the defaults of pool and restart where zero, unless asIs
		asIs   bool
		path   string
		naming Naming // the gateway's
		want   Problems
	}{
		{name: "stdio", server: stdio("files")},
		{name: "stdio with everything", server: Server{
			Name: "a-1", Transport: "stdio", Command: "x", Args: []string{"-v"}, Env: map[string]string{"_A1": ""},
			Cwd: "/", Timeout: Duration(time.Second), Enabled: new(bool),
		}},
		{name: "http", server: Server{Name: "web", Transport: "http", URL: "https://x.example.com/mcp", APIKey: "k", Headers: map[string]string{"X-A": "b\tc"}}},
		{name: "sse on loopback", server: Server{Name: "web", Transport: "sse", URL: "http://127.255.0.1/sse"}},
		{name: "Authorization without api_key", server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", Headers: map[string]string{"authorization": "Basic eA=="}}},
		{name: "32 characters", server: stdio("abcdefghijklmnopqrstuvwxyz012345")},
		{
			name:   "no path prefix, for the admin API",
			server: Server{Transport: "http", URL: "http://example.com"},
			want: Problems{
				{Path: "name", Message: "missing; a name is 1 to 32 of a-z, 0-9 and -"},
				{Path: "url", Message: "must use https unless the host is loopback (localhost, 127.0.0.0/8, ::1), so the api_key and headers do not cross the network in the clear"},
			},
		},
		{
			name:   "33 characters",
			server: stdio("abcdefghijklmnopqrstuvwxyz0123456"),
			path:   "servers[0]",
			want: Problems{{
				Path:    "servers[0].name",
				Message: `"abcdefghijklmnopqrstuvwxyz0123456" is 33 characters long; the limit is 32`,
				Server:  "abcdefghijklmnopqrstuvwxyz0123456",
			}},
		},
		{
			name:   "every name rule",
			server: stdio("Tools__And_More-and-more-and-more"),
			path:   "servers[1]",
			want: Problems{
				{Path: "servers[1].name", Message: `"Tools__And_More-and-more-and-more" is 33 characters long; the limit is 32`, Server: "Tools__And_More-and-more-and-more"},
				{Path: "servers[1].name", Message: `"Tools__And_More-and-more-and-more" contains "__", which separates the server from the tool in exposed names`, Server: "Tools__And_More-and-more-and-more"},
				{Path: "servers[1].name", Message: `"Tools__And_More-and-more-and-more" contains 'T'; only a-z, 0-9 and - are allowed`, Server: "Tools__And_More-and-more-and-more"},
			},
		},
		{
			name:   "non-ASCII name",
			server: stdio("café"),
			want:   Problems{{Path: "name", Message: `"café" contains 'é'; only a-z, 0-9 and - are allowed`, Server: "café"}},
		},
		{
			name:   "control character in api_key",
			server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", APIKey: "k\r\n"},
			want:   Problems{{Path: "api_key", Message: "contains a control character, such as a newline", Server: "web"}},
		},
		{
			name:   "header names",
			server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", Headers: map[string]string{"": "x", "X:Y": "z", "X-Ok!": "v"}},
			want: Problems{
				{Path: `headers[""]`, Message: `"" is not a valid header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`, Server: "web"},
				{Path: `headers["X:Y"]`, Message: `"X:Y" is not a valid header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`, Server: "web"},
			},
		},
		{
			name:   "unknown transport still checks the url",
			server: Server{Name: "x", Transport: "HTTP", URL: "::"},
			want: Problems{
				{Path: "transport", Message: `"HTTP" is not one of stdio, http, sse`, Server: "x"},
				{Path: "url", Message: "is not a valid URL", Server: "x"},
			},
		},
		{
			name: "tool options, names and namespace",
			server: Server{
				Name: "web", Transport: "http", URL: "https://x.example.com",
				Naming:    ServerNaming{PrefixMode: PrefixNever},
				Resources: ServerResources{Namespace: NamespaceAlways},
				Tools: ToolOptions{
					Allow: []string{"read_*", "list_?", `a\*`, "[a-c]*", ""},
					Deny:  []string{"*delete*"},
					// A swap is fine: the new names differ.
					Rename:   map[string]string{"a": "b", "b": "a", "x.y": "x_y", "long": strings.Repeat("n", 64)},
					Describe: map[string]string{"search": "Search the public web."},
				},
			},
		},
		{
			name:   "rename within the configured max_length",
			server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", Tools: ToolOptions{Rename: map[string]string{"a": strings.Repeat("n", 100)}}},
			naming: Naming{MaxLength: 100},
		},
		{
			name:   "rename beyond the default max_length when none is given",
			server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", Tools: ToolOptions{Rename: map[string]string{"a": strings.Repeat("n", 65)}}},
			want: Problems{
				{Path: "tools.rename.a", Message: `"` + strings.Repeat("n", 65) + `" is 65 characters long; naming.max_length is 64`, Server: "web"},
			},
		},
		{
			name: "every rule of the new keys",
			server: Server{
				Name: "web", Transport: "http", URL: "https://x.example.com",
				Naming:    ServerNaming{PrefixMode: "sometimes"},
				Resources: ServerResources{Namespace: "yes"},
				Tools: ToolOptions{
					Allow: []string{"ok_*", "[a-"},
					Deny:  []string{`tail\`},
					Rename: map[string]string{
						"":       "empty_key",
						"dot":    "has.dot",
						"empty":  "",
						"long":   "a_name_over_twenty_chars",
						"search": "web_search",
						"seek":   "web_search",
					},
					Describe: map[string]string{"": "x", "blank": " \t", "empty": ""},
				},
			},
			path:   "servers[0]",
			naming: Naming{MaxLength: 20},
			want: Problems{
				{Path: "servers[0].naming.prefix_mode", Message: `"sometimes" is not one of always, on_collision, never (or leave it out for the gateway's naming.prefix_mode)`, Server: "web"},
				{Path: "servers[0].resources.namespace", Message: `"yes" is not one of auto, always, never (or leave it out for the gateway's resources.namespace)`, Server: "web"},
				{Path: "servers[0].tools.allow[1]", Message: `"[a-" is not a valid glob (path.Match syntax: *, ?, [a-z] and \ to escape)`, Server: "web"},
				{Path: "servers[0].tools.deny[0]", Message: `"tail\\" is not a valid glob (path.Match syntax: *, ?, [a-z] and \ to escape)`, Server: "web"},
				{Path: `servers[0].tools.rename[""]`, Message: "the original tool name must not be empty", Server: "web"},
				{Path: "servers[0].tools.rename.dot", Message: `"has.dot" is not a valid tool name: 1 or more of A-Z, a-z, 0-9, _ and -`, Server: "web"},
				{Path: "servers[0].tools.rename.empty", Message: `"" is not a valid tool name: 1 or more of A-Z, a-z, 0-9, _ and -`, Server: "web"},
				{Path: "servers[0].tools.rename.long", Message: `"a_name_over_twenty_chars" is 24 characters long; naming.max_length is 20`, Server: "web"},
				{Path: "servers[0].tools.rename.seek", Message: `"web_search" is already the new name of "search"; two tools cannot have one name`, Server: "web"},
				{Path: `servers[0].tools.describe[""]`, Message: "the original tool name must not be empty", Server: "web"},
				{Path: "servers[0].tools.describe.blank", Message: "must not be empty; leave the tool out to keep the server's own description", Server: "web"},
				{Path: "servers[0].tools.describe.empty", Message: "must not be empty; leave the tool out to keep the server's own description", Server: "web"},
			},
		},
		{
			name: "relay keys",
			server: Server{
				Name: "web", Transport: "http", URL: "https://x.example.com",
				SessionMode: SessionPerSession, Serialize: true, ForwardNotifications: true,
				Pool:    Pool{Max: 1, IdleTimeout: 1},
				Restart: Restart{MaxAttempts: -1, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Second)},
				Roots:   []Root{{URI: "file:///srv"}, {URI: "file://localhost/C:/Users/me", Name: "Me"}, {URI: "File:///x%20y"}},
			},
		},
		{
			// "" is shared and a max_attempts of 0 the default, as in the file.
			name:   "single_user with the zero session_mode; zero max_attempts",
			server: Server{Name: "web", Transport: "http", URL: "https://x.example.com", SingleUser: true, Restart: Restart{InitialBackoff: 1, MaxBackoff: 1}},
		},
		{
			name:   "zero pool and restart, without the defaults Parse fills in",
			server: Server{Name: "files", Transport: "stdio", Command: "x"},
			asIs:   true,
			want: Problems{
				{Path: "pool.max", Message: "must be from 1 to 10000", Server: "files"},
				{Path: "pool.idle_timeout", Message: "must be more than 0", Server: "files"},
				{Path: "restart.initial_backoff", Message: "must be more than 0", Server: "files"},
				{Path: "restart.max_backoff", Message: "must be more than 0", Server: "files"},
			},
		},
		{
			name: "every rule of the relay keys",
			server: Server{
				Name: "files", Transport: "stdio", Command: "x",
				SessionMode: SessionPerPrincipal, SingleUser: true,
				Pool:    Pool{Max: 10001, IdleTimeout: -1},
				Restart: Restart{MaxAttempts: -2, InitialBackoff: Duration(2 * time.Second), MaxBackoff: Duration(time.Second)},
				Roots:   []Root{{Name: "no uri"}, {URI: "file:x"}, {URI: "file://a b/"}, {URI: "file://host"}, {URI: "file:///x?"}},
			},
			path: "servers[3]",
			want: Problems{
				{Path: "servers[3].single_user", Message: "only goes with session_mode shared: a per_principal server never shares an upstream session between users", Server: "files"},
				{Path: "servers[3].pool.max", Message: "must be from 1 to 10000", Server: "files"},
				{Path: "servers[3].pool.idle_timeout", Message: "must be more than 0", Server: "files"},
				{Path: "servers[3].restart.max_attempts", Message: "must be at least -1 (-1 never restarts the server; 0 means the default, 20)", Server: "files"},
				{Path: "servers[3].restart.initial_backoff", Message: "must be at most restart.max_backoff (1s)", Server: "files"},
				{Path: "servers[3].roots[0].uri", Message: `missing; a root is a file:// URI, like "file:///srv/project"`, Server: "files"},
				{Path: "servers[3].roots[1].uri", Message: `"file:x" is not a file:// URI (MCP roots are file URIs), like "file:///srv/project"`, Server: "files"},
				{Path: "servers[3].roots[2].uri", Message: `"file://a b/" is not a valid URI`, Server: "files"},
				{Path: "servers[3].roots[3].uri", Message: `"file://host" has no path; a root names a directory, like "file:///srv/project"`, Server: "files"},
				{Path: "servers[3].roots[4].uri", Message: `"file:///x?" must not have a query or fragment`, Server: "files"},
			},
		},
		{
			name:   "an unknown session_mode hides the single_user rule",
			server: Server{Name: "files", Transport: "stdio", Command: "x", SessionMode: "exclusive", SingleUser: true},
			want:   Problems{{Path: "session_mode", Message: `"exclusive" is not one of shared, per_principal, per_session`, Server: "files"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.server
			if !tt.asIs {
				s = defaulted(s)
			}
			got := ValidateServer(&s, tt.path, tt.naming)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ValidateServer (-want +got):\n%s", diff)
			}
		})
	}
}

// A config that Parse accepted validates clean again.
func TestValidate_Parsed(t *testing.T) {
	for _, tt := range goodFixtures {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := parseFile(t, tt.name, tt.env)
			if ps := c.validate(); ps != nil {
				t.Errorf("validate:\n%v", ps)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	allowed := []string{"mcp.example.com:8443", "Other.Example.com", "127.0.0.1", "[::1]", "[fe80::1]:8080"}
	tests := []struct {
		name string
		host string
		want bool
	}{
		{name: "host and port", host: "mcp.example.com:8443", want: true},
		{name: "case-insensitive", host: "MCP.Example.COM:8443", want: true},
		{name: "other port", host: "mcp.example.com:443"},
		{name: "no port where the entry has one", host: "mcp.example.com"},
		{name: "entry without port, any port", host: "other.example.com:1234", want: true},
		{name: "entry without port, no port", host: "OTHER.example.com", want: true},
		{name: "ipv4", host: "127.0.0.1:8080", want: true},
		{name: "ipv6 with port", host: "[::1]:8080", want: true},
		{name: "ipv6 without port", host: "[::1]", want: true},
		{name: "bare ipv6", host: "::1", want: true},
		{name: "ipv6 entry with port", host: "[FE80::1]:8080", want: true},
		{name: "ipv6 entry, other port", host: "[fe80::1]:8081"},
		{name: "not listed", host: "evil.example.com"},
		{name: "suffix is not enough", host: "evil-mcp.example.com:8443"},
		{name: "empty", host: ""},
		{name: "bad port", host: "127.0.0.1:x"},
		{name: "userinfo", host: "x@127.0.0.1"},
		{name: "two colons", host: "127.0.0.1:80:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HostAllowed(allowed, tt.host); got != tt.want {
				t.Errorf("HostAllowed(%q) = %v; want %v", tt.host, got, tt.want)
			}
		})
	}
	if HostAllowed(nil, "localhost") {
		t.Error("HostAllowed(nil, localhost) = true; want false")
	}
}

func TestOriginAllowed(t *testing.T) {
	allowed := []string{"https://app.example.com", "http://localhost", "https://mcp.example.com:8443", "http://[::1]", "https://secure.example.com:443"}
	tests := []struct {
		name   string
		origin string
		want   bool
	}{
		{name: "no Origin header", origin: "", want: true},
		{name: "exact", origin: "https://app.example.com", want: true},
		{name: "entry without port, any port", origin: "https://app.example.com:9999", want: true},
		{name: "case-insensitive", origin: "HTTPS://App.Example.Com", want: true},
		{name: "other scheme", origin: "http://app.example.com"},
		{name: "loopback any port", origin: "http://localhost:5173", want: true},
		{name: "loopback other scheme", origin: "https://localhost:5173"},
		{name: "port", origin: "https://mcp.example.com:8443", want: true},
		{name: "other port", origin: "https://mcp.example.com:9443"},
		{name: "no port is the default port", origin: "https://mcp.example.com"},
		{name: "default port matches an entry with it", origin: "https://secure.example.com", want: true},
		{name: "explicit default port", origin: "https://secure.example.com:443", want: true},
		{name: "ipv6", origin: "http://[::1]:3000", want: true},
		{name: "null", origin: "null"},
		{name: "path", origin: "https://app.example.com/x"},
		{name: "not listed", origin: "https://evil.example.com"},
		{name: "lookalike", origin: "https://app.example.com.evil.example"},
		{name: "userinfo", origin: "https://app.example.com@evil.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OriginAllowed(allowed, tt.origin); got != tt.want {
				t.Errorf("OriginAllowed(%q) = %v; want %v", tt.origin, got, tt.want)
			}
		})
	}
}

// The default lists allow what DESIGN decision 12 says: the public URL's
// host and loopback.
func TestDefaults_HostsAndOrigins(t *testing.T) {
	c, ps := Parse([]byte("public_url: https://mcp.example.com"), nil)
	if ps != nil {
		t.Fatal(ps)
	}
	for _, h := range []string{"mcp.example.com", "mcp.example.com:443", "localhost:8080", "127.0.0.1", "[::1]:1"} {
		if !HostAllowed(c.AllowedHosts, h) {
			t.Errorf("HostAllowed(defaults, %q) = false", h)
		}
	}
	if HostAllowed(c.AllowedHosts, "example.com") {
		t.Error(`HostAllowed(defaults, "example.com") = true`)
	}
	for _, o := range []string{"https://mcp.example.com", "http://localhost:6274", "https://127.0.0.1:1", "http://[::1]:2"} {
		if !OriginAllowed(c.AllowedOrigins, o) {
			t.Errorf("OriginAllowed(defaults, %q) = false", o)
		}
	}
	if OriginAllowed(c.AllowedOrigins, "http://mcp.example.com") {
		t.Error(`OriginAllowed(defaults, "http://mcp.example.com") = true`)
	}
}

func TestProblems(t *testing.T) {
	ps := Problems{
		{Message: "invalid YAML: x", Line: 1, Column: 3, Fatal: false},
		{Path: "servers[0]", Message: "empty entry"},
		{Path: "listen", Message: "bad", Line: 2},
	}
	if got, want := ps.Error(), "line 1, column 3: invalid YAML: x\nservers[0]: empty entry\nline 2: listen: bad"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if ps.Fatal() {
		t.Error("Fatal() = true without a Fatal problem")
	}
	ps[1].Fatal = true
	if !ps.Fatal() {
		t.Error("Fatal() = false with a Fatal problem")
	}
	if got := Problems(nil).Error(); got != "" {
		t.Errorf("Problems(nil).Error() = %q", got)
	}
}

// TestValidateServer_NeverForwarded checks that forward_headers may name no
// header the HTTP client would drop: hop-by-hop ones (RFC 9110, section
// 7.6.1), the client's credentials, the transports' own, and the trace
// context, in any spelling.
func TestValidateServer_NeverForwarded(t *testing.T) {
	required := []string{
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Authenticate", "Proxy-Authorization",
		"Authorization", "Cookie",
		"Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Host", "Content-Length", "Content-Type", "Accept", "Accept-Encoding",
		"Traceparent", "Tracestate",
	}
	for _, name := range NeverForwardedHeaders() {
		if name != textproto.CanonicalMIMEHeaderKey(name) {
			t.Errorf("%q in the list is not in canonical form", name)
		}
	}
	for _, name := range append(required, NeverForwardedHeaders()...) {
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			s := defaulted(Server{Name: "web", Transport: "http", URL: "https://x.example.com/mcp", ForwardHeaders: []string{"X-Tenant", spelling}})
			ps := ValidateServer(&s, "", Naming{})
			if len(ps) != 1 || ps[0].Path != "forward_headers[1]" || !strings.Contains(ps[0].Message, "forwarded") {
				t.Errorf("forward_headers [X-Tenant, %s]: problems %v, want one at forward_headers[1] saying it is not forwarded", spelling, ps)
			}
		}
	}
	s := defaulted(Server{Name: "web", Transport: "http", URL: "https://x.example.com/mcp", ForwardHeaders: []string{"connection"}})
	want := Problems{{Path: "forward_headers[0]", Server: "web",
		Message: "Connection is never forwarded: a hop-by-hop header belongs to one connection (RFC 9110, section 7.6.1), not to the gateway's request upstream"}}
	if diff := cmp.Diff(want, ValidateServer(&s, "", Naming{})); diff != "" {
		t.Errorf("forward_headers [connection] (-want +got):\n%s", diff)
	}
}

// TestConfig_Warnings checks the warning about a stdio command that the
// gateway would not find: looked up in the gateway's PATH as exec does
// (not the server's env PATH), or a path to an executable file, relative
// to the server's cwd.
func TestConfig_Warnings(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	for name, mode := range map[string]os.FileMode{"mcp-ok": 0o755, "mcp-noexec": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(bin, "mcp-dir"), 0o755)
	stdio := func(command, cwd string, env map[string]string) Server {
		return Server{Name: "s", Transport: TransportStdio, Command: command, Cwd: cwd, Env: env}
	}
	path := map[string]string{"PATH": "/nonexistent" + string(os.PathListSeparator) + bin}
	tests := []struct {
		name   string
		server Server
		env    map[string]string // the gateway's
		want   string            // the warning, or ""
	}{
		{name: "on PATH", server: stdio("mcp-ok", "", nil), env: path},
		{name: "absolute path", server: stdio(filepath.Join(bin, "mcp-ok"), "", nil), env: path},
		{name: "relative to cwd", server: stdio("./mcp-ok", bin, nil), env: nil},
		{name: "relative with a directory", server: stdio("bin/mcp-ok", dir, nil), env: nil},
		{name: "http server", server: Server{Name: "s", Transport: TransportHTTP, URL: "https://x.example.com"}, env: nil},
		{name: "not on PATH", server: stdio("mcp-missing", "", nil), env: path,
			want: `warning: servers[0] (name "s").command: "mcp-missing" is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs`},
		{name: "not executable", server: stdio("mcp-noexec", "", nil), env: path,
			want: `warning: servers[0] (name "s").command: "mcp-noexec" is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs`},
		{name: "a directory", server: stdio("mcp-dir", "", nil), env: path,
			want: `warning: servers[0] (name "s").command: "mcp-dir" is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs`},
		{name: "PATH unset", server: stdio("mcp-ok", "", nil), env: nil,
			want: `warning: servers[0] (name "s").command: "mcp-ok" cannot be found: the gateway's PATH is not set`},
		{name: "only on the server's env PATH", server: stdio("mcp-ok", "", map[string]string{"PATH": bin}), env: map[string]string{"PATH": "/nonexistent"},
			want: `warning: servers[0] (name "s").command: "mcp-ok" is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs (a command is looked up in the gateway's PATH; the server's env PATH is for what the server runs)`},
		{name: "only in a relative PATH entry", server: stdio("mcp-ok", "", nil), env: map[string]string{"PATH": "."},
			want: `warning: servers[0] (name "s").command: "mcp-ok" is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs`},
		{name: "missing absolute path", server: stdio(filepath.Join(bin, "nope"), "", nil), env: path,
			want: `warning: servers[0] (name "s").command: "` + filepath.Join(bin, "nope") + `" is not an executable file`},
		{name: "relative, not executable", server: stdio("./mcp-noexec", bin, nil), env: path,
			want: `warning: servers[0] (name "s").command: "./mcp-noexec" is not an executable file (in the server's cwd)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "relative to cwd" || tt.name == "relative with a directory" {
				// Relative to the gateway's working directory without cwd.
				t.Chdir(t.TempDir())
			}
			c := &Config{Servers: []Server{tt.server}}
			var got []string
			for _, w := range c.Warnings(lookup(tt.env)) {
				if !w.Warning || w.Fatal || w.Server != "s" {
					t.Errorf("%+v is not a warning of server s", w)
				}
				got = append(got, w.String())
			}
			var want []string
			if tt.want != "" {
				want = []string{tt.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.8.9.10", true},
		{"::1", true},
		{"localhost.example.com", false},
		{"10.0.0.1", false},
		{"::", false},
		{"[::1]", false}, // a Hostname has no brackets
		{"", false},
	} {
		if got := IsLoopback(tc.host); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
