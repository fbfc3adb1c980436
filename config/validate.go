package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Problem is one thing wrong with the configuration, at a key path such as
// "sessions.idle_timeout", "servers[2].url" or, once the entry's name is
// known, `servers[2] (name "files").url`. Its Message never holds the value
// of an environment variable, an api_key, a header value, a url, the secret
// or an admin token.
type Problem struct {
	// Path is the key path, or "" for the file as a whole (a YAML syntax
	// error).
	Path string
	// Message says what is wrong, in words a user can act on.
	Message string
	// Server is the name of the server entry the problem is in, or "" for a
	// gateway setting or an entry without a name.
	Server string
	// Fatal is true for a problem with the gateway settings or the file as
	// a whole: the gateway must not start. A problem in a server entry is
	// not Fatal; that entry is skipped.
	Fatal bool
	// Warning is true for what Config.Warnings finds: the file is valid,
	// but something may fail when the gateway runs. A warning is never
	// Fatal.
	Warning bool
	// Line and Column are where in the file the problem is, counted from 1:
	// the YAML syntax error, the key the problem is about or, for a key
	// that is missing, the nearest enclosing key written. 0 when unknown
	// (a setting the file does not write).
	Line, Column int
}

// String returns "<path>: <message>", or the message alone if the path is
// empty, after "warning: " for a warning, and after "line L, column C: "
// where the position is known.
func (p Problem) String() string {
	s := p.Message
	if p.Path != "" {
		s = p.Path + ": " + s
	}
	if p.Warning {
		s = "warning: " + s
	}
	switch {
	case p.Line > 0 && p.Column > 0:
		s = fmt.Sprintf("line %d, column %d: %s", p.Line, p.Column, s)
	case p.Line > 0:
		s = fmt.Sprintf("line %d: %s", p.Line, s)
	}
	return s
}

// Problems are all the problems of one configuration, in a stable order:
// the gateway settings first, then the servers in the order of the file.
// Parse returns nil when there are none; like any slice type, only a
// non-empty Problems should be returned as an error.
type Problems []Problem

// Error returns the problems one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Fatal reports whether any problem is Fatal.
func (ps Problems) Fatal() bool {
	for _, p := range ps {
		if p.Fatal {
			return true
		}
	}
	return false
}

// Limits the gateway settings must respect.
const (
	maxRequestBodyLimit = 1 << 30 // 1 GiB
	minSecretLen        = 32
	maxNameLen          = 32

	maxPrefixLen           = 16
	maxSeparatorLen        = 4
	minMaxNameLength       = 16
	maxMaxNameLength       = 128 // the spec's limit on a tool name
	maxPageSize            = 10000
	maxListChangedDebounce = time.Minute
	maxClientWait          = time.Hour // input_timeout, resume_window
	maxPoolMax             = 10000
)

// The accepted values of Log.Level, Log.Format, the prefix modes, the
// namespace modes and the session modes.
var (
	logLevels    = []string{"debug", "info", "warn", "error"}
	logFormats   = []string{"json", "text"}
	prefixModes  = []string{PrefixAlways, PrefixOnCollision, PrefixNever}
	namespaces   = []string{NamespaceAuto, NamespaceAlways, NamespaceNever}
	sessionModes = []string{SessionShared, SessionPerPrincipal, SessionPerSession}
	protocols    = []string{ProtocolAuto, ProtocolModern, ProtocolLegacy}
)

// Warnings returns what may fail when the gateway runs although the file
// is valid: a stdio server's command that the gateway would not find.
// lookupEnv is the gateway's environment (PATH), usually os.LookupEnv.
//
// Like exec, which starts a stdio server, a command without a "/" is
// looked up in the gateway's PATH (the server's env PATH is for what the
// server runs), in absolute directories only; a command with one is a path,
// relative to the server's cwd. These are warnings, not problems: the
// gateway may run where PATH or the files differ (a container).
func (c *Config) Warnings(lookupEnv func(string) (string, bool)) Problems {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	var ws Problems
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.Transport != TransportStdio || s.Command == "" {
			continue
		}
		if msg := commandMissing(s, lookupEnv); msg != "" {
			ws = append(ws, Problem{Path: join(serverPath(i, s.Name), "command"), Message: msg, Server: s.Name, Warning: true})
		}
	}
	return ws
}

// commandMissing returns why the gateway would not find s's command, or "".
func commandMissing(s *Server, lookupEnv func(string) (string, bool)) string {
	if strings.Contains(s.Command, "/") {
		p, where := s.Command, ""
		if !filepath.IsAbs(p) {
			if s.Cwd != "" {
				p, where = filepath.Join(s.Cwd, p), " (in the server's cwd)"
			} else {
				where = " (in the gateway's working directory)"
			}
		}
		if !executable(p) {
			return fmt.Sprintf("%q is not an executable file%s", s.Command, where)
		}
		return ""
	}
	path, ok := lookupEnv("PATH")
	if !ok || path == "" {
		return fmt.Sprintf("%q cannot be found: the gateway's PATH is not set", s.Command)
	}
	for _, dir := range filepath.SplitList(path) {
		// exec refuses what only a relative entry ("." or "") finds.
		if filepath.IsAbs(dir) && executable(filepath.Join(dir, s.Command)) {
			return ""
		}
	}
	msg := fmt.Sprintf("%q is not found in any directory of the gateway's PATH; the server will not start unless it is there when the gateway runs", s.Command)
	if _, ok := s.Env["PATH"]; ok {
		msg += " (a command is looked up in the gateway's PATH; the server's env PATH is for what the server runs)"
	}
	return msg
}

// executable reports whether p is a regular file that someone may execute.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// validate checks a whole Config as Parse leaves it: the gateway settings
// and every server, including that names are unique.
func (c *Config) validate() Problems {
	ps := c.validateGateway()
	used := map[string]int{}
	for i := range c.Servers {
		s := &c.Servers[i]
		ps = append(ps, ValidateServer(s, serverPath(i, s.Name), c.Naming)...)
		if first, ok := used[s.Name]; ok {
			ps = append(ps, nameUsed(i, s.Name, first))
		}
		used[s.Name] = i
	}
	return ps
}

// serverPath is the path of the i'th server entry: "servers[2]", or
// `servers[2] (name "files")` when it has a name; "" for an entry parsed
// on its own (i < 0, see ParseServer).
func serverPath(i int, name string) string {
	if i < 0 {
		return ""
	}
	if name == "" {
		return "servers[" + strconv.Itoa(i) + "]"
	}
	return fmt.Sprintf("servers[%d] (name %q)", i, name)
}

// nameUsed is the problem of the i'th server entry, whose name the entry
// first already has. It names both entries by index.
func nameUsed(i int, name string, first int) Problem {
	return Problem{
		Path:    "servers[" + strconv.Itoa(i) + "]",
		Message: fmt.Sprintf("name %q is already used by servers[%d]", name, first),
		Server:  name,
	}
}

// validateGateway checks the gateway settings, after setDefaults. Every
// problem is Fatal.
func (c *Config) validateGateway() Problems {
	var ps Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...), Fatal: true})
	}

	listenOK := validListen(c.Listen)
	if !listenOK {
		add("listen", `%q is not host:port, like "127.0.0.1:8080" or ":8080"`, c.Listen)
	}
	c.validateCluster(add)
	c.checkOAuthPublicURL(add)
	c.validateCatalog(add)
	if c.PublicURL != "" || listenOK { // else public_url has no default and listen's problem says why
		if msg := checkPublicURL(c.PublicURL); msg != "" {
			add("public_url", "%s", msg)
		}
	}
	if c.DataDir == "" {
		add("data_dir", "must not be empty")
	}
	ps = append(ps, c.Store.validate(c.Database)...)
	if c.Secret != "" && len(c.Secret) < minSecretLen {
		add("secret", "must be at least %d bytes long, or empty for a random key at each start", minSecretLen)
	}
	for _, d := range []struct {
		path string
		d    Duration
	}{
		{"call_timeout", c.CallTimeout},
		{"start_timeout", c.StartTimeout},
		{"shutdown_grace", c.ShutdownGrace},
	} {
		if d.d <= 0 {
			add(d.path, "must be more than 0")
		}
	}
	switch {
	case c.MaxRequestBody <= 0:
		add("max_request_body", "must be more than 0")
	case c.MaxRequestBody > maxRequestBodyLimit:
		add("max_request_body", "must be at most %s", ByteSize(maxRequestBodyLimit))
	}
	if c.MaxResponseBody <= 0 {
		add("max_response_body", "must be more than 0")
	}
	for i, h := range c.AllowedHosts {
		if !validHost(h) {
			add(fmt.Sprintf("allowed_hosts[%d]", i), `%q is not a host or host:port, like "mcp.example.com" or "localhost:8080"`, h)
		}
	}
	for i, o := range c.AllowedOrigins {
		if _, _, _, ok := splitOrigin(o); !ok {
			add(fmt.Sprintf("allowed_origins[%d]", i), `%q is not an origin scheme://host[:port] without a path, like "https://app.example.com"`, o)
		}
	}
	if c.Sessions.IdleTimeout <= 0 {
		add("sessions.idle_timeout", "must be more than 0")
	}
	if c.Sessions.Max < 1 {
		add("sessions.max", "must be at least 1")
	}
	if c.Sessions.MaxPerPrincipal < 1 {
		add("sessions.max_per_principal", "must be at least 1")
	} else if c.Sessions.Max >= 1 && c.Sessions.MaxPerPrincipal > c.Sessions.Max {
		add("sessions.max_per_principal", "must be at most sessions.max (%d)", c.Sessions.Max)
	}
	if !slices.Contains(prefixModes, c.Naming.PrefixMode) {
		add("naming.prefix_mode", "%q is not one of %s", c.Naming.PrefixMode, strings.Join(prefixModes, ", "))
	}
	if !validPrefix(c.Naming.Prefix) {
		add("naming.prefix", "%q is not a valid prefix: a lower-case letter, then up to %d of a-z and 0-9 (it also starts the scheme of namespaced resource URIs)", c.Naming.Prefix, maxPrefixLen-1)
	}
	if !validSeparator(c.Naming.Separator) {
		add("naming.separator", "%q is not a valid separator: 1 to %d of A-Z, a-z, 0-9, _ and -", c.Naming.Separator, maxSeparatorLen)
	}
	if n := c.Naming.MaxLength; n < minMaxNameLength || n > maxMaxNameLength {
		add("naming.max_length", "must be from %d to %d", minMaxNameLength, maxMaxNameLength)
	}
	if c.PageSize < 0 || c.PageSize > maxPageSize {
		add("page_size", "must be 0 (every list in one full page) or from 1 to %d", maxPageSize)
	}
	switch {
	case c.ListChangedDebounce <= 0:
		add("list_changed_debounce", "must be more than 0")
	case c.ListChangedDebounce > Duration(maxListChangedDebounce):
		add("list_changed_debounce", "must be at most %s", Duration(maxListChangedDebounce))
	}
	if !slices.Contains(namespaces, c.Resources.Namespace) {
		add("resources.namespace", "%q is not one of %s", c.Resources.Namespace, strings.Join(namespaces, ", "))
	}
	for _, d := range []struct {
		path string
		d    Duration
	}{
		{"input_timeout", c.InputTimeout},
		{"resume_window", c.ResumeWindow},
		{"stream_after", c.StreamAfter},
	} {
		switch {
		case d.d <= 0:
			add(d.path, "must be more than 0")
		case d.d > Duration(maxClientWait):
			add(d.path, "must be at most %s", Duration(maxClientWait))
		}
	}
	for _, d := range []struct {
		path string
		d    Duration
	}{
		{"tasks.default_ttl", c.Tasks.DefaultTTL},
		{"tasks.max_ttl", c.Tasks.MaxTTL},
		{"tasks.poll_interval", c.Tasks.PollInterval},
	} {
		if d.d <= 0 {
			add(d.path, "must be more than 0")
		}
	}
	if c.Tasks.DefaultTTL > 0 && c.Tasks.MaxTTL > 0 && c.Tasks.DefaultTTL > c.Tasks.MaxTTL {
		add("tasks.default_ttl", "must be at most tasks.max_ttl (%s)", c.Tasks.MaxTTL)
	}
	if n := c.Tasks.MaxHostedPerPrincipal; n < 1 || n > 10000 {
		add("tasks.max_hosted_per_principal", "must be from 1 to 10000")
	}
	if d := c.Tasks.PromoteAfter; d < 0 || d > Duration(maxClientWait) {
		add("tasks.promote_after", "must be from 0s to %s", Duration(maxClientWait))
	}
	if c.Admin.Listen != "" && !validListen(c.Admin.Listen) {
		add("admin.listen", "%q is not a host:port address to listen on, such as 127.0.0.1:9090", c.Admin.Listen)
	}
	if c.Admin.Listen != "" && c.Admin.Listen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
		add("admin.listen", "is the same address as listen; leave it out to serve /admin beside /mcp")
	}
	if c.Admin.EnvPrefix == "" {
		add("admin.env_prefix", "must not be empty: servers registered through the admin API would read every environment variable of the gateway")
	}
	for i, sc := range c.Admin.StdioCommands {
		at := fmt.Sprintf("admin.stdio_commands[%d]", i)
		switch cmd := sc.Command; {
		case strings.TrimSpace(cmd) == "":
			add(at, "has no command")
		case !pathpkg.IsAbs(cmd) && strings.Contains(cmd, "/"):
			// exec runs a relative path from the server's cwd, which a
			// registration chooses.
			add(join(at, "command"), "%q is a relative path, which would run from the cwd a registration chooses; give a name looked up on PATH (npx) or an absolute path", cmd)
		}
		for j, p := range sc.Args {
			if msg := checkArgPattern(p, j == len(sc.Args)-1); msg != "" {
				add(fmt.Sprintf("%s.args[%d]", at, j), "%s", msg)
			}
		}
	}
	for i, name := range c.Admin.StdioEnv {
		at := fmt.Sprintf("admin.stdio_env[%d]", i)
		if !ValidVarName(name) {
			add(at, "%q is not a valid variable name (letters, digits and _, not starting with a digit)", name)
		} else if why, never := NeverPassed(name); never {
			add(at, "%s is never passed to a stdio server registered through the admin API: %s", name, why)
		}
	}
	for i, dir := range c.Admin.StdioCwd {
		if !filepath.IsAbs(dir) {
			add(fmt.Sprintf("admin.stdio_cwd[%d]", i), "%q is not an absolute path; give the directory from / (such as /srv/mcp)", dir)
		}
	}
	if !slices.Contains(mediaModes, c.Media.Mode) {
		add("media.mode", "%q is not one of %s", c.Media.Mode, strings.Join(mediaModes, ", "))
	}
	if c.Media.MinBytes < 0 {
		add("media.min_bytes", "must be 0 or more")
	}
	if c.Media.MaxBytes <= 0 {
		add("media.max_bytes", "must be more than 0")
	}
	if c.Media.MaxAge <= 0 {
		add("media.max_age", "must be more than 0")
	}
	if c.Media.URLTTL < 0 {
		add("media.url_ttl", "must be more than 0")
	}
	for i, p := range c.TrustedProxies {
		if _, err := ParseProxy(p); err != nil {
			add(fmt.Sprintf("trusted_proxies[%d]", i), "%v", err)
		}
	}
	seenKeys := map[string]int{}
	for i, k := range c.Auth.APIKeys {
		path := fmt.Sprintf("auth.api_keys[%d]", i)
		if !validPrincipal(k.Principal) {
			add(path+".principal", `%q is not a valid principal: 1 to 64 of A-Z, a-z, 0-9, ".", "_", "@" and "-", and not "anonymous"`, k.Principal)
		}
		if _, ok := ParseTokenHash(k.KeySHA256); !ok {
			// Never show the value: it may be the key itself, pasted by mistake.
			add(path+".key_sha256", `must be "sha256:" and the 64 hex digits of the key's SHA-256, such as printf %%s "$KEY" | sha256sum prints; never the key itself`)
		} else if j, dup := seenKeys[strings.ToLower(k.KeySHA256)]; dup {
			add(path+".key_sha256", "is the same key as auth.api_keys[%d]", j)
		} else {
			seenKeys[strings.ToLower(k.KeySHA256)] = i
		}
		for g, group := range k.Groups {
			if !validPrincipal(group) {
				add(fmt.Sprintf("%s.groups[%d]", path, g), "%q is not a valid group name: 1 to 64 of A-Z, a-z, 0-9, \".\", \"_\", \"@\" and \"-\"", group)
			}
		}
	}
	if j := c.Auth.JWT; j.Enabled() || j.JWKSURL != "" || j.Audience != "" || len(j.Scopes) > 0 {
		if !j.Enabled() {
			add("auth.jwt.issuer", "missing: the other auth.jwt settings need the issuer's URL")
		} else if msg := checkHTTPSURL(j.Issuer); msg != "" {
			add("auth.jwt.issuer", "%s", msg)
		} else if strings.Contains(j.Issuer, "#") {
			// auth's newVerifier refuses it again on purpose, in depth.
			add("auth.jwt.issuer", `%q has a "#": an issuer has no fragment (RFC 8414, section 2), and "#" ends the issuer in the names of its tokens' principals`, j.Issuer)
		}
		if j.JWKSURL != "" {
			if msg := checkHTTPSURL(j.JWKSURL); msg != "" {
				add("auth.jwt.jwks_url", "%s", msg)
			}
		}
		for i, a := range j.Algorithms {
			if !slices.Contains(jwtAlgorithms, a) {
				add(fmt.Sprintf("auth.jwt.algorithms[%d]", i), "%q is not one of %s (none and the HMAC algorithms are never accepted)", a, strings.Join(jwtAlgorithms, ", "))
			}
		}
		if j.Leeway < 0 || j.Leeway > Duration(5*time.Minute) {
			add("auth.jwt.leeway", "must be from 0s to 5m")
		}
		for i, u := range j.AuthorizationServers {
			if msg := checkHTTPSURL(u); msg != "" {
				add(fmt.Sprintf("auth.jwt.authorization_servers[%d]", i), "%s", msg)
			}
		}
	}
	keyNames, keyGroups := map[string]bool{"anonymous": true}, map[string]bool{}
	for _, k := range c.Auth.APIKeys {
		keyNames[k.Principal] = true
		for _, g := range k.Groups {
			keyGroups[g] = true
		}
	}
	switch c.ACL.Default {
	case "", ACLAllow, ACLDeny:
	default:
		add("acl.default", "%q is not allow or deny", c.ACL.Default)
	}
	for i, r := range c.ACL.Rules {
		rpath := fmt.Sprintf("acl.rules[%d]", i)
		if r.Effect != ACLAllow && r.Effect != ACLDeny {
			add(rpath+".effect", "%q is not allow or deny", r.Effect)
		}
		if len(r.Servers)+len(r.Tools)+len(r.Prompts)+len(r.Resources) == 0 {
			add(rpath, "matches nothing: give servers, tools, prompts or resources (\"*\" for everything)")
		}
		for key, pats := range map[string][]string{"servers": r.Servers, "tools": r.Tools, "prompts": r.Prompts, "resources": r.Resources} {
			for j, p := range pats {
				if _, err := pathpkg.Match(p, ""); err != nil || p == "" {
					add(fmt.Sprintf("%s.%s[%d]", rpath, key, j), "%q is not a valid glob pattern", p)
				}
			}
		}
		for j, p := range r.Principals {
			checkCaller(fmt.Sprintf("%s.principals[%d]", rpath, j), "principal", p, keyNames, c.Auth.JWT, add)
		}
		for j, g := range r.Groups {
			checkCaller(fmt.Sprintf("%s.groups[%d]", rpath, j), "group", g, keyGroups, c.Auth.JWT, add)
		}
	}
	if r := c.RateLimits.PerPrincipal; r.Rate < 0 || r.Burst < 0 || r.Rate > 0 && r.Burst < 1 {
		add("rate_limits.per_principal", "needs rate > 0 and burst >= 1 (or rate 0 for no limit)")
	}
	if c.RateLimits.MaxPrincipals < 0 {
		add("rate_limits.max_principals", "must be 0 (the default) or more")
	}
	for i, t := range c.Admin.Tokens {
		if _, ok := ParseTokenHash(t); !ok {
			// Never show t: it may be the token itself, pasted by mistake.
			add(fmt.Sprintf("admin.tokens[%d]", i), `must be "sha256:" and the 64 hex digits of the token's SHA-256, such as printf %%s "$TOKEN" | sha256sum prints; never the token itself`)
		}
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		add("log.level", "%q is not one of %s", c.Log.Level, strings.Join(logLevels, ", "))
	}
	if !slices.Contains(logFormats, c.Log.Format) {
		add("log.format", "%q is not one of %s", c.Log.Format, strings.Join(logFormats, ", "))
	}
	return ps
}

// checkCaller checks name, a principal or group (kind) that an access rule
// at path names. A token's name ("jwt:…") must be of the issuer of jwt.
// With JWTs on, a bare name must be one of known (the API keys' names): a
// bare name never matches a token, so a rule that names a token's subject
// or group bare would cover no one; it is refused instead.
func checkCaller(path, kind, name string, known map[string]bool, jwt JWT, add func(path, format string, args ...any)) {
	prefix := jwt.Qualify("")
	switch {
	case name == "":
		add(path, "is empty")
	case strings.HasPrefix(name, JWTNamePrefix):
		switch {
		case !jwt.Enabled():
			add(path, "%q names a token's %s, but auth.jwt is off", name, kind)
		case !strings.HasPrefix(name, prefix):
			add(path, "%q is not of auth.jwt.issuer: a token's %s is written %q and the claim's value", name, kind, prefix)
		case name == prefix:
			add(path, "%q names no %s after the issuer", name, kind)
		}
	case jwt.Enabled() && !known[name]:
		add(path, "%q is no API key's %s (auth.api_keys); a token's %s is written %q", name, kind, kind, jwt.Qualify(name))
	}
}

// validPrincipal reports whether s is a principal or group name. It has
// no ":", so that no API key's name is ever a token's ("jwt:", see
// JWT.Qualify); auth.New checks that again on purpose, in depth.
func validPrincipal(s string) bool {
	if s == "" || len(s) > 64 || s == "anonymous" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._@-", c) >= 0) {
			return false
		}
	}
	return true
}

// ValidateServer checks one server entry, after expansion, with the rules of
// the file; path is the prefix of the problems' paths ("servers[2]", or ""
// for none). global is the gateway's Naming: a tools.rename value may be at
// most global.MaxLength long (DefaultMaxNameLength if zero). It does not
// check that the name is unused, nor that a new name of a tool is unused by
// other servers. Its problems are not Fatal.
//
// s is an entry as Parse leaves it, with the defaults filled in: a zero
// pool.max or backoff is a problem, while session_mode "" (shared) and
// restart.max_attempts 0 (the default) are not.
func ValidateServer(s *Server, path string, global Naming) Problems {
	var ps Problems
	addAt := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...), Server: s.Name})
	}
	add := func(key, format string, args ...any) { addAt(join(path, key), format, args...) }

	// The name goes into exposed tool names, mcp__<server>__<tool>, so it
	// may not hold the separator (DESIGN decision 7).
	switch {
	case s.Name == "":
		add("name", "missing; a name is 1 to %d of a-z, 0-9 and -", maxNameLen)
	default:
		if n := utf8.RuneCountInString(s.Name); n > maxNameLen {
			add("name", "%q is %d characters long; the limit is %d", s.Name, n, maxNameLen)
		}
		if s.Name == ReservedServerName {
			add("name", "%q is reserved for the gateway's own tools (mcp__%s__search_tools)", s.Name, ReservedServerName)
		}
		double := strings.Contains(s.Name, "__")
		if double {
			add("name", `%q contains "__", which separates the server from the tool in exposed names`, s.Name)
		}
		for _, r := range s.Name {
			if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' && double) {
				add("name", "%q contains %q; only a-z, 0-9 and - are allowed", s.Name, r)
				break
			}
		}
	}

	stdio := s.Transport == TransportStdio
	switch s.Transport {
	case "":
		add("transport", "missing; one of stdio, http, sse")
	case TransportStdio:
		if s.Command == "" {
			add("command", "missing; a stdio server needs the command to run")
		}
		for _, f := range []struct {
			key string
			set bool
		}{{"url", s.URL != ""}, {"api_key", s.APIKey != ""}, {"headers", len(s.Headers) > 0}, {"forward_headers", len(s.ForwardHeaders) > 0}} {
			if f.set {
				add(f.key, "not used by stdio servers (url, api_key, headers and forward_headers are for http and sse)")
			}
		}
	case TransportHTTP, TransportSSE:
		if s.URL == "" {
			add("url", "missing; an %s server needs its URL", s.Transport)
		}
		for _, f := range []struct {
			key string
			set bool
		}{{"command", s.Command != ""}, {"args", len(s.Args) > 0}, {"env", len(s.Env) > 0}, {"cwd", s.Cwd != ""}} {
			if f.set {
				add(f.key, "not used by %s servers (command, args, env and cwd are for stdio)", s.Transport)
			}
		}
	default:
		add("transport", "%q is not one of stdio, http, sse", s.Transport)
	}
	if s.Timeout < 0 {
		add("timeout", "must not be negative (0 means the gateway's call_timeout)")
	}

	// The messages below never show the url, api_key or a header or env
	// value: they are expanded from the environment and may hold secrets.
	if s.URL != "" && !stdio {
		if msg := checkServerURL(s.URL); msg != "" {
			add("url", "%s", msg)
		}
	}
	if hasControl(s.APIKey) {
		add("api_key", "contains a control character, such as a newline")
	}
	seen := map[string]string{} // lower-case name → name
	for _, k := range sortedKeys(s.Headers) {
		key := join(join(path, "headers"), k)
		lower := strings.ToLower(k)
		switch {
		case !validToken(k):
			addAt(key, "%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)", k)
		case lower == "authorization" && s.APIKey != "":
			addAt(key, `conflicts with api_key, which is sent as "Authorization: Bearer <key>"; use api_key alone`)
		case lower == "mcp-session-id" || lower == "mcp-protocol-version":
			addAt(key, "is set by the gateway for each session; it cannot be configured")
		}
		if first, ok := seen[lower]; ok {
			addAt(key, "is the same header as %q (header names are case-insensitive)", first)
		} else {
			seen[lower] = k
		}
		if hasControl(s.Headers[k]) {
			addAt(key, "value contains a control character, such as a newline")
		}
	}
	for _, k := range sortedKeys(s.Env) {
		key := join(join(path, "env"), k)
		if !ValidVarName(k) {
			addAt(key, "%q is not a valid variable name (letters, digits and _, not starting with a digit)", k)
		}
		if strings.IndexByte(s.Env[k], 0) >= 0 {
			addAt(key, "value contains a NUL byte")
		}
	}

	if m := s.Naming.PrefixMode; m != "" && !slices.Contains(prefixModes, m) {
		addAt(join(join(path, "naming"), "prefix_mode"), "%q is not one of %s (or leave it out for the gateway's naming.prefix_mode)", m, strings.Join(prefixModes, ", "))
	}
	if m := s.Resources.Namespace; m != "" && !slices.Contains(namespaces, m) {
		addAt(join(join(path, "resources"), "namespace"), "%q is not one of %s (or leave it out for the gateway's resources.namespace)", m, strings.Join(namespaces, ", "))
	}
	ps = append(ps, validateTools(s.Tools, join(path, "tools"), global, s.Name)...)

	if r := s.RateLimit; r.Rate < 0 || r.Burst < 0 || r.Rate > 0 && r.Burst < 1 || r.MaxConcurrent < 0 {
		addAt(join(path, "rate_limit"), "needs rate > 0 and burst >= 1 (or rate 0 for none), and max_concurrent >= 0")
	}
	for i, h := range s.ForwardHeaders {
		switch k := textproto.CanonicalMIMEHeaderKey(h); {
		case !validToken(h):
			addAt(fmt.Sprintf("%s[%d]", join(path, "forward_headers"), i), "%q is not a header name", h)
		default:
			if why, never := NeverForwarded(k); never {
				addAt(fmt.Sprintf("%s[%d]", join(path, "forward_headers"), i), "%s %s", k, why)
			}
		}
	}
	if m := s.Media.Mode; m != "" && !slices.Contains(mediaModes, m) {
		addAt(join(join(path, "media"), "mode"), "%q is not one of %s (or leave it out for the gateway's media.mode)", m, strings.Join(mediaModes, ", "))
	}
	switch p := s.Protocol; {
	case p != "" && !slices.Contains(protocols, p):
		add("protocol", "%q is not one of %s", p, strings.Join(protocols, ", "))
	case p == ProtocolModern && s.Transport == TransportSSE:
		add("protocol", "modern needs transport stdio or http: the sse transport (2024-11-05) is legacy only")
	}
	switch m := s.SessionMode; {
	case m != "" && !slices.Contains(sessionModes, m):
		add("session_mode", "%q is not one of %s", m, strings.Join(sessionModes, ", "))
	case m != "" && m != SessionShared && s.SingleUser:
		// A per_principal or per_session upstream session is only ever
		// used by one principal: there is no sharing to declare.
		add("single_user", "only goes with session_mode %s: a %s server never shares an upstream session between users", SessionShared, m)
	}
	validateOAuth(s, path, addAt)
	pool := join(path, "pool")
	if s.Pool.Max < 1 || s.Pool.Max > maxPoolMax {
		addAt(join(pool, "max"), "must be from 1 to %d", maxPoolMax)
	}
	if s.Pool.IdleTimeout <= 0 {
		addAt(join(pool, "idle_timeout"), "must be more than 0")
	}
	restart := join(path, "restart")
	if s.Restart.MaxAttempts < -1 {
		addAt(join(restart, "max_attempts"), "must be at least -1 (-1 never restarts the server; 0 means the default, %d)", DefaultRestartAttempts)
	}
	if s.Restart.InitialBackoff <= 0 {
		addAt(join(restart, "initial_backoff"), "must be more than 0")
	}
	if s.Restart.MaxBackoff <= 0 {
		addAt(join(restart, "max_backoff"), "must be more than 0")
	} else if s.Restart.InitialBackoff > s.Restart.MaxBackoff {
		addAt(join(restart, "initial_backoff"), "must be at most restart.max_backoff (%s)", s.Restart.MaxBackoff)
	}
	for i, r := range s.Roots {
		if msg := checkRootURI(r.URI); msg != "" {
			addAt(fmt.Sprintf("%s[%d].uri", join(path, "roots"), i), "%s", msg)
		}
	}
	return ps
}

// checkRootURI returns what is wrong with the uri of a configured root, or
// "". MCP roots are file:// URIs (spec, client/roots).
func checkRootURI(s string) string {
	const example = `like "file:///srv/project"`
	if s == "" {
		return "missing; a root is a file:// URI, " + example
	}
	if len(s) < len("file://") || !strings.EqualFold(s[:len("file://")], "file://") {
		return fmt.Sprintf("%q is not a file:// URI (MCP roots are file URIs), %s", s, example)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a valid URI", s)
	case strings.ContainsAny(s, "?#"):
		return fmt.Sprintf("%q must not have a query or fragment", s)
	case u.Path == "":
		return fmt.Sprintf("%q has no path; a root names a directory, %s", s, example)
	}
	return ""
}

// validateTools checks a server's tools options; at is their key path and
// server the server's name, for the problems.
func validateTools(t ToolOptions, at string, global Naming, server string) Problems {
	var ps Problems
	add := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...), Server: server})
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allow", t.Allow}, {"deny", t.Deny}} {
		for i, p := range list.patterns {
			if _, err := pathpkg.Match(p, ""); err != nil {
				add(fmt.Sprintf("%s[%d]", join(at, list.key), i), `%q is not a valid glob (path.Match syntax: *, ?, [a-z] and \ to escape)`, p)
			}
		}
	}

	maxLen := global.MaxLength
	if maxLen <= 0 {
		maxLen = DefaultMaxNameLength
	}
	renamed := map[string]string{} // new name → original
	for _, k := range sortedKeys(t.Rename) {
		key, v := join(join(at, "rename"), k), t.Rename[k]
		if k == "" {
			add(key, "the original tool name must not be empty")
		}
		if !validToolName(v) {
			add(key, "%q is not a valid tool name: 1 or more of A-Z, a-z, 0-9, _ and -", v)
		}
		if n := utf8.RuneCountInString(v); n > maxLen {
			add(key, "%q is %d characters long; naming.max_length is %d", v, n, maxLen)
		}
		if first, ok := renamed[v]; ok && v != "" {
			add(key, "%q is already the new name of %q; two tools cannot have one name", v, first)
		} else {
			renamed[v] = k
		}
	}
	for _, k := range sortedKeys(t.Describe) {
		key := join(join(at, "describe"), k)
		if k == "" {
			add(key, "the original tool name must not be empty")
		}
		if strings.TrimSpace(t.Describe[k]) == "" {
			add(key, "must not be empty; leave the tool out to keep the server's own description")
		}
	}
	return ps
}

// validPrefix reports whether s is a valid Naming.Prefix: a lower-case
// letter, then up to maxPrefixLen-1 of a-z and 0-9, so that it can start a
// URI scheme (RFC 3986, 3.1).
func validPrefix(s string) bool {
	if s == "" || len(s) > maxPrefixLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
}

// validSeparator reports whether s is a valid Naming.Separator: 1 to
// maxSeparatorLen of A-Z, a-z, 0-9, _ and -.
func validSeparator(s string) bool {
	return len(s) <= maxSeparatorLen && validToolName(s)
}

// validToolName reports whether s is a name LLM APIs accept as a tool
// name, leaving the length aside: 1 or more of A-Z, a-z, 0-9, _ and -.
func validToolName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validListen reports whether s is host:port with a numeric port, where
// the host is empty (all interfaces), a name or an IP address.
func validListen(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || !validPort(port) {
		return false
	}
	if strings.Contains(host, ":") {
		return net.ParseIP(host) != nil
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// checkPublicURL returns what is wrong with the public URL, or "".
func checkPublicURL(s string) string {
	if s == "" {
		return "missing"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must start with http:// or https://"
	case u.Hostname() == "":
		return "has no host"
	case !validHost(u.Host):
		return "has an invalid host or port"
	case u.User != nil:
		return "must not contain a user name or password"
	case u.Path != "" && u.Path != "/" || u.Opaque != "":
		return `must not have a path: it is the gateway's origin, like "https://mcp.example.com"`
	case strings.ContainsAny(s, "?#"):
		return "must not have a query or fragment"
	}
	return ""
}

// checkServerURL returns what is wrong with a server's URL, or "". It must
// not show the URL: it may hold an expanded secret.
func checkServerURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must start with http:// or https://"
	case u.Hostname() == "":
		return "has no host"
	case u.Scheme == "http" && !IsLoopback(u.Hostname()):
		return "must use https unless the host is loopback (localhost, 127.0.0.0/8, ::1), so the api_key and headers do not cross the network in the clear"
	}
	return ""
}

// IsLoopback reports whether host (a URL's Hostname: no port, no
// brackets) is localhost or a loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostAllowed reports whether a request's Host header value (host or
// host:port) matches an entry of allowed. Names compare case-insensitively.
// An entry without a port matches the host on any port; an entry with a
// port matches only that port. An IPv6 address may be written with or
// without brackets when it has no port ("[::1]" or "::1").
func HostAllowed(allowed []string, host string) bool {
	h, p, ok := splitHost(host)
	if !ok {
		return false
	}
	for _, a := range allowed {
		ah, ap, ok := splitHost(a)
		if ok && ah == h && (ap == "" || ap == p) {
			return true
		}
	}
	return false
}

// OriginAllowed reports whether a request's Origin header value
// (scheme://host[:port]) matches an entry of allowed. An empty origin, a
// request that sent none, is allowed (DESIGN decision 12). Scheme and host
// compare case-insensitively. An entry without a port matches the host on
// any port; an entry with a port matches only that port, where an origin
// without one has its scheme's default (80 for http, 443 for https).
func OriginAllowed(allowed []string, origin string) bool {
	if origin == "" {
		return true
	}
	s, h, p, ok := splitOrigin(origin)
	if !ok {
		return false
	}
	if p == "" {
		p = defaultPort(s)
	}
	for _, a := range allowed {
		as, ah, ap, ok := splitOrigin(a)
		if ok && as == s && ah == h && (ap == "" || ap == p) {
			return true
		}
	}
	return false
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// splitHost splits "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6
// address into its lower-case host, without brackets, and its port ("" if
// none).
func splitHost(s string) (host, port string, ok bool) {
	if rest, found := strings.CutPrefix(s, "["); found {
		h, after, found := strings.Cut(rest, "]")
		if !found || net.ParseIP(h) == nil {
			return "", "", false
		}
		if after != "" {
			if port, found = strings.CutPrefix(after, ":"); !found || !validPort(port) {
				return "", "", false
			}
		}
		return strings.ToLower(h), port, true
	}
	switch strings.Count(s, ":") {
	case 0:
		host = s
	case 1:
		host, port, _ = strings.Cut(s, ":")
		if !validPort(port) {
			return "", "", false
		}
	default:
		if net.ParseIP(s) == nil {
			return "", "", false
		}
		host = s
	}
	if host == "" {
		return "", "", false
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return "", "", false
		}
	}
	return strings.ToLower(host), port, true
}

// validHost reports whether s is a host or host:port that HostAllowed
// understands.
func validHost(s string) bool {
	_, _, ok := splitHost(s)
	return ok
}

// splitOrigin splits scheme://host[:port] into its lower-case scheme and
// host and its port ("" if none).
func splitOrigin(s string) (scheme, host, port string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" {
		return "", "", "", false
	}
	for i, c := range []byte(scheme) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", "", false
		}
	}
	host, port, ok = splitHost(rest)
	return strings.ToLower(scheme), host, port, ok
}

// validPort reports whether s is a port number, 0 to 65535.
func validPort(s string) bool {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n <= 65535
}

// validToken reports whether s is an HTTP token (RFC 9110, 5.6.2), as a
// header name must be.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// HashToken returns a bearer token as the config holds it, in
// admin.tokens and auth.api_keys[].key_sha256: "sha256:" and the 64
// lower-case hex digits of the token's SHA-256.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseTokenHash reads a token hash as HashToken writes it ("sha256:"
// and 64 hex digits of either case) into the digest it names.
func ParseTokenHash(s string) (sum [sha256.Size]byte, ok bool) {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 2*sha256.Size {
		return sum, false
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, false
	}
	return sum, true
}

// hasControl reports whether s holds a control character other than tab,
// which may not appear in a header value.
func hasControl(s string) bool {
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}

var mediaModes = []string{MediaLink, MediaLinkMarkdown, MediaInline}

// ParseProxy parses a trusted_proxies entry: an IP address or a CIDR range.
func ParseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range (such as 10.0.0.0/8)", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range (such as 10.0.0.0/8)", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// jwtAlgorithms are the JWT signature algorithms auth.jwt.algorithms may
// name: asymmetric ones only.
var jwtAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Why a header is never forwarded, said after its name.
const (
	whyHop        = "is never forwarded: a hop-by-hop header belongs to one connection (RFC 9110, section 7.6.1), not to the gateway's request upstream"
	whyCredential = "is never forwarded: a client's credentials and the gateway's protocol headers stay at the gateway"
	whyTransport  = "is never forwarded: the gateway's HTTP client sets it for each request upstream"
	whyTrace      = "is not forwarded: the gateway sends its own, whose parent is the client's, so the trace continues through it"
)

// neverForwarded are the client headers that no forward_headers entry
// passes on, in canonical form, each with why: validation refuses them and
// the HTTP client drops them (NeverForwarded), from this one list.
var neverForwarded = []struct{ name, why string }{
	{"Connection", whyHop},
	{"Keep-Alive", whyHop},
	{"Proxy-Connection", whyHop},
	{"Te", whyHop},
	{"Trailer", whyHop},
	{"Transfer-Encoding", whyHop},
	{"Upgrade", whyHop},
	{"Proxy-Authenticate", whyHop},
	{"Proxy-Authorization", whyCredential},
	{"Authorization", whyCredential},
	{"Cookie", whyCredential},
	{"Mcp-Session-Id", whyCredential},
	{"Mcp-Protocol-Version", whyCredential},
	{"Last-Event-Id", whyCredential},
	{"Host", whyTransport},
	{"Content-Length", whyTransport},
	{"Content-Type", whyTransport},
	{"Accept", whyTransport},
	{"Accept-Encoding", whyTransport},
	{"Traceparent", whyTrace},
	{"Tracestate", whyTrace},
}

// NeverForwarded reports whether no forward_headers entry passes on the
// client header name (any spelling), and if so why, as a clause that
// follows the header's name: "is never forwarded: ...".
func NeverForwarded(name string) (why string, never bool) {
	k := textproto.CanonicalMIMEHeaderKey(name)
	for _, h := range neverForwarded {
		if h.name == k {
			return h.why, true
		}
	}
	return "", false
}

// NeverForwardedHeaders returns the names NeverForwarded refuses, in
// canonical form.
func NeverForwardedHeaders() []string {
	names := make([]string, len(neverForwarded))
	for i, h := range neverForwarded {
		names[i] = h.name
	}
	return names
}

// checkHTTPSURL returns what is wrong with the URL of an authorization
// server, or "": https, or http on a loopback host (tests, development).
func checkHTTPSURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Sprintf("%q is not an absolute URL", s)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
	default:
		return fmt.Sprintf("%q must be https (or http on a loopback host)", s)
	}
	return ""
}

// MaxServerNameLen is the longest server name.
const MaxServerNameLen = maxNameLen

// ValidServerName reports whether name is a valid server name: 1 to
// MaxServerNameLen of a-z, 0-9 and "-", without "__" (ValidateServer says
// why not).
func ValidServerName(name string) bool {
	if name == "" || len(name) > maxNameLen || strings.Contains(name, "__") {
		return false
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// validate reports what is wrong with the store section, and with old,
// its old spelling. No problem shows the DSN: it holds a password.
func (s Store) validate(old Database) Problems {
	var ps Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...), Fatal: true})
	}
	if s.Path != "" && old.Path != "" {
		add("store.path", "and database.path are both set: database.path is the old spelling of store.path; keep one")
	}
	switch s.Driver {
	case StoreSQLite:
		if s.DSN != "" {
			add("store.dsn", "is for driver postgres; driver sqlite keeps its file at store.path")
		}
		if s.MaxConns != 0 {
			add("store.max_conns", "is for driver postgres; driver sqlite has no pool to size")
		}
	case StorePostgres:
		if s.DSN == "" {
			add("store.dsn", "is required with driver postgres: a connection string such as ${MCPGW_DATABASE_URL}")
		}
		for _, f := range []struct{ path, v string }{{"store.path", s.Path}, {"database.path", old.Path}} {
			if f.v != "" {
				add(f.path, "is a SQLite file; driver postgres connects to store.dsn")
			}
		}
		if s.MaxConns < 1 || s.MaxConns > MaxStoreMaxConns {
			add("store.max_conns", "%d is not from 1 to %d", s.MaxConns, MaxStoreMaxConns)
		}
	default:
		add("store.driver", "%q is not one of sqlite, postgres", s.Driver)
	}
	return ps
}
