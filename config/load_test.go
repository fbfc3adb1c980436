package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v4"
)

// lookup returns a lookupEnv func over env.
func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// fatal and skipped build the expected problems of the fixture tables.
func fatal(path, msg string) Problem { return Problem{Path: path, Message: msg, Fatal: true} }

func skipped(server, path, msg string) Problem {
	return Problem{Path: path, Message: msg, Server: server}
}

// at puts p at line and column.
func at(line, column int, p Problem) Problem {
	p.Line, p.Column = line, column
	return p
}

func ptr[T any](v T) *T { return &v }

// The bad fixtures: each maps to its exact problems (STYLE.md, Tests).
var badFixtures = []struct {
	name        string // file in testdata
	env         map[string]string
	want        Problems
	wantServers []string // names of the servers that passed
}{
	{
		name: "syntax.bad.yaml",
		want: Problems{at(6, 4, fatal("", "invalid YAML: did not find expected '-' indicator"))},
	},
	{
		name: "indentation.bad.yaml",
		want: Problems{at(5, 4, fatal("", "invalid YAML: did not find expected '-' indicator"))},
	},
	{
		name: "not_mapping.bad.yaml",
		want: Problems{fatal("", `the file must be a mapping of settings, like "listen: ..." and "servers: ...", not a list`)},
	},
	{
		name: "two_documents.bad.yaml",
		want: Problems{at(2, 1, fatal("", "a second YAML document; the file must hold one"))},
	},
	{
		name: "servers_not_list.bad.yaml",
		want: Problems{fatal("servers", "must be a list of server entries, not a mapping")},
	},
	{
		name: "unknown_keys.bad.yaml",
		want: Problems{
			fatal("listne", `unknown key (did you mean "listen"?)`),
			fatal("Data_Dir", `unknown key (did you mean "data_dir"?)`),
			fatal("sessions.idle_timout", `unknown key (did you mean "idle_timeout"?)`),
			fatal("sessions.maxPerPrincipal", `unknown key (did you mean "max_per_principal"?)`),
			fatal("log.colour", "unknown key"),
			fatal("page-size", `unknown key (did you mean "page_size"?)`),
			fatal("naming.prefx", `unknown key (did you mean "prefix"?)`),
			fatal("resources.namespaces", `unknown key (did you mean "namespace"?)`),
			fatal("input_timout", `unknown key (did you mean "input_timeout"?)`),
			fatal("resume-window", `unknown key (did you mean "resume_window"?)`),
			skipped("files", `servers[0] (name "files").comand`, `unknown key (did you mean "command"?)`),
			skipped("files", `servers[0] (name "files").tools.alow`, `unknown key (did you mean "allow"?)`),
			skipped("files", `servers[0] (name "files").command`, "missing; a stdio server needs the command to run"),
			skipped("search", `servers[1] (name "search").apiKey`, `unknown key (did you mean "api_key"?)`),
			skipped("search", `servers[1] (name "search").tls`, "unknown key"),
			skipped("search", `servers[1] (name "search").tools.descibe`, `unknown key (did you mean "describe"?)`),
			skipped("relay", `servers[2] (name "relay").sesion_mode`, `unknown key (did you mean "session_mode"?)`),
			skipped("relay", `servers[2] (name "relay").singleUser`, `unknown key (did you mean "single_user"?)`),
			skipped("relay", `servers[2] (name "relay").pool.maxx`, `unknown key (did you mean "max"?)`),
			skipped("relay", `servers[2] (name "relay").restart.max_attempt`, `unknown key (did you mean "max_attempts"?)`),
			skipped("relay", `servers[2] (name "relay").restart.backoff`, "unknown key"),
			skipped("relay", `servers[2] (name "relay").roots[0].url`, `unknown key (did you mean "uri"?)`),
			skipped("relay", `servers[2] (name "relay").forward_notification`, `unknown key (did you mean "forward_notifications"?)`),
		},
		wantServers: []string{"ok"},
	},
	{
		name: "duplicate_keys.bad.yaml",
		want: Problems{
			fatal("listen", "key given twice (lines 1 and 2)"),
			skipped("files", `servers[0] (name "files").command`, "key given twice (lines 6 and 7)"),
			skipped("web", `servers[1] (name "web").headers.X-A`, "key given twice (line 11, columns 15 and 25)"),
		},
		wantServers: []string{"ok"},
	},
	{
		name: "wrong_types.bad.yaml",
		want: Problems{
			fatal("listen", "must be a string, not a list"),
			fatal("allowed_hosts", "must be a list, not a string"),
			fatal("sessions.max", "must be a whole number, not a string"),
			fatal("admin", "must be a mapping of keys to values, not a list"),
			fatal("log.level", "must be a string, not a mapping"),
			fatal("naming", "must be a mapping of keys to values, not a list"),
			fatal("page_size", "must be a whole number, not a string"),
			skipped("files", `servers[0] (name "files").args`, "must be a list, not a string"),
			skipped("files", `servers[0] (name "files").enabled`, "must be true or false, not a string"),
			skipped("", "servers[1]", "must be a mapping (a server entry), not a string"),
			skipped("", "servers[2]", "empty entry; a server needs at least a name and a transport"),
			skipped("web", `servers[3] (name "web").headers`, "must be a mapping of names to values, not a list"),
			skipped("web", `servers[3] (name "web").tools.allow`, "must be a list, not a string"),
			skipped("web", `servers[3] (name "web").tools.rename`, "must be a mapping of names to values, not a list"),
			skipped("relay", `servers[4] (name "relay").session_mode`, "must be a string, not a list"),
			skipped("relay", `servers[4] (name "relay").single_user`, "must be true or false, not a string"),
			skipped("relay", `servers[4] (name "relay").serialize`, "must be true or false, not a number"),
			skipped("relay", `servers[4] (name "relay").pool`, "must be a mapping of keys to values, not a number"),
			skipped("relay", `servers[4] (name "relay").restart.max_attempts`, "must be a whole number, not a string"),
			skipped("relay", `servers[4] (name "relay").roots`, "must be a list, not a mapping"),
			skipped("relay", `servers[4] (name "relay").forward_notifications`, "must be true or false, not a string"),
		},
		wantServers: []string{"ok"},
	},
	{
		name: "gateway_values.bad.yaml",
		want: Problems{
			fatal("listen", `"localhost" is not host:port, like "127.0.0.1:8080" or ":8080"`),
			fatal("public_url", `must not have a path: it is the gateway's origin, like "https://mcp.example.com"`),
			fatal("data_dir", "must not be empty"),
			fatal("secret", "must be at least 32 bytes long, or empty for a random key at each start"),
			fatal("call_timeout", "must be more than 0"),
			fatal("start_timeout", "must be more than 0"),
			fatal("max_request_body", "must be at most 1GiB"),
			fatal("max_response_body", "must be more than 0"),
			fatal("allowed_hosts[1]", `"https://mcp.example.com/" is not a host or host:port, like "mcp.example.com" or "localhost:8080"`),
			fatal("allowed_origins[0]", `"mcp.example.com" is not an origin scheme://host[:port] without a path, like "https://app.example.com"`),
			fatal("sessions.idle_timeout", "must be more than 0"),
			fatal("sessions.max_per_principal", "must be at most sessions.max (10)"),
			fatal("admin.tokens[0]", `must be "sha256:" and the 64 hex digits of the token's SHA-256, such as printf %s "$TOKEN" | sha256sum prints; never the token itself`),
			fatal("log.level", `"verbose" is not one of debug, info, warn, error`),
			fatal("log.format", `"yaml" is not one of json, text`),
		},
	},
	{
		name: "catalog.bad.yaml",
		want: Problems{
			fatal("naming.prefix_mode", `"sometimes" is not one of always, on_collision, never`),
			fatal("naming.prefix", `"MCP" is not a valid prefix: a lower-case letter, then up to 15 of a-z and 0-9 (it also starts the scheme of namespaced resource URIs)`),
			fatal("naming.separator", `"." is not a valid separator: 1 to 4 of A-Z, a-z, 0-9, _ and -`),
			fatal("naming.max_length", "must be from 16 to 128"),
			fatal("page_size", "must be 0 (every list in one full page) or from 1 to 10000"),
			fatal("list_changed_debounce", "must be more than 0"),
			fatal("resources.namespace", `"prefix" is not one of auto, always, never`),
		},
	},
	{
		name: "catalog_limits.bad.yaml",
		want: Problems{
			fatal("naming.prefix_mode", `"" is not one of always, on_collision, never`),
			fatal("naming.prefix", `"abcdefghijklmnopq" is not a valid prefix: a lower-case letter, then up to 15 of a-z and 0-9 (it also starts the scheme of namespaced resource URIs)`),
			fatal("naming.separator", `"_____" is not a valid separator: 1 to 4 of A-Z, a-z, 0-9, _ and -`),
			fatal("naming.max_length", "must be from 16 to 128"),
			fatal("page_size", "must be 0 (every list in one full page) or from 1 to 10000"),
			fatal("list_changed_debounce", "must be at most 1m0s"),
			fatal("resources.namespace", `"" is not one of auto, always, never`),
		},
	},
	{
		name: "tools.bad.yaml",
		want: Problems{
			skipped("modes", `servers[0] (name "modes").naming.prefix_mode`, `"Always" is not one of always, on_collision, never (or leave it out for the gateway's naming.prefix_mode)`),
			skipped("modes", `servers[0] (name "modes").resources.namespace`, `"sometimes" is not one of auto, always, never (or leave it out for the gateway's resources.namespace)`),
			skipped("globs", `servers[1] (name "globs").tools.allow[1]`, `"[a-" is not a valid glob (path.Match syntax: *, ?, [a-z] and \ to escape)`),
			skipped("globs", `servers[1] (name "globs").tools.deny[1]`, `"x\\" is not a valid glob (path.Match syntax: *, ?, [a-z] and \ to escape)`),
			skipped("renames", `servers[2] (name "renames").tools.rename[""]`, "the original tool name must not be empty"),
			skipped("renames", `servers[2] (name "renames").tools.rename.blank`, `"" is not a valid tool name: 1 or more of A-Z, a-z, 0-9, _ and -`),
			skipped("renames", `servers[2] (name "renames").tools.rename.dotted`, `"has.dot" is not a valid tool name: 1 or more of A-Z, a-z, 0-9, _ and -`),
			skipped("renames", `servers[2] (name "renames").tools.rename.long`, `"a_name_longer_than_20" is 21 characters long; naming.max_length is 20`),
			skipped("renames", `servers[2] (name "renames").tools.rename.seek`, `"web_search" is already the new name of "search"; two tools cannot have one name`),
			skipped("describes", `servers[3] (name "describes").tools.describe[""]`, "the original tool name must not be empty"),
			skipped("describes", `servers[3] (name "describes").tools.describe.find`, "must not be empty; leave the tool out to keep the server's own description"),
			skipped("describes", `servers[3] (name "describes").tools.describe.search`, "must not be empty; leave the tool out to keep the server's own description"),
		},
		wantServers: []string{"ok"},
	},
	{
		name: "auth_tasks.bad.yaml",
		want: Problems{
			fatal("tasks.poll_interval", "must be more than 0"),
			fatal("tasks.default_ttl", "must be at most tasks.max_ttl (24h0m0s)"),
			fatal("tasks.max_hosted_per_principal", "must be from 1 to 10000"),
			fatal("tasks.promote_after", "must be from 0s to 1h0m0s"),
			fatal("auth.api_keys[0].principal", `"anonymous" is not a valid principal: 1 to 64 of A-Z, a-z, 0-9, ".", "_", "@" and "-", and not "anonymous"`),
			fatal("auth.api_keys[1].key_sha256", `must be "sha256:" and the 64 hex digits of the key's SHA-256, such as printf %s "$KEY" | sha256sum prints; never the key itself`),
			fatal("auth.api_keys[2].key_sha256", "is the same key as auth.api_keys[0]"),
			fatal("auth.api_keys[2].groups[0]", `"ops team" is not a valid group name: 1 to 64 of A-Z, a-z, 0-9, ".", "_", "@" and "-"`),
		},
	},
	{
		name: "access.bad.yaml",
		want: Problems{
			fatal("auth.jwt.issuer", `"http://auth.example.com" must be https (or http on a loopback host)`),
			fatal("auth.jwt.jwks_url", `"ftp://keys" must be https (or http on a loopback host)`),
			fatal("auth.jwt.algorithms[1]", `"HS256" is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (none and the HMAC algorithms are never accepted)`),
			fatal("auth.jwt.algorithms[2]", `"none" is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (none and the HMAC algorithms are never accepted)`),
			fatal("auth.jwt.leeway", "must be from 0s to 5m"),
			fatal("acl.default", `"maybe" is not allow or deny`),
			fatal("acl.rules[0].effect", `"permit" is not allow or deny`),
			fatal("acl.rules[1]", `matches nothing: give servers, tools, prompts or resources ("*" for everything)`),
			fatal("acl.rules[2].tools[0]", `"[a-" is not a valid glob pattern`),
			fatal("rate_limits.per_principal", "needs rate > 0 and burst >= 1 (or rate 0 for no limit)"),
			{Path: `servers[0] (name "a").rate_limit`, Message: "needs rate > 0 and burst >= 1 (or rate 0 for none), and max_concurrent >= 0", Server: "a"},
			{Path: `servers[0] (name "a").forward_headers[1]`, Message: "Authorization is never forwarded: a client's credentials and the gateway's protocol headers stay at the gateway", Server: "a"},
			{Path: `servers[0] (name "a").forward_headers[2]`, Message: `"bad header" is not a header name`, Server: "a"},
			{Path: `servers[0] (name "a").forward_headers[3]`, Message: "Traceparent is not forwarded: the gateway sends its own, whose parent is the client's, so the trace continues through it", Server: "a"},
		},
	},
	{
		name: "principals.bad.yaml",
		want: Problems{
			fatal("acl.rules[0].principals[4]", `"carol" is no API key's principal (auth.api_keys); a token's principal is written "jwt:https://auth.example.com/tenant#carol"`),
			fatal("acl.rules[0].principals[5]", "is empty"),
			fatal("acl.rules[0].principals[6]", `"jwt:https://auth.example.com#carol" is not of auth.jwt.issuer: a token's principal is written "jwt:https://auth.example.com/tenant#" and the claim's value`),
			fatal("acl.rules[0].principals[7]", `"jwt:https://auth.example.com/tenant#" names no principal after the issuer`),
			fatal("acl.rules[0].groups[2]", `"ops" is no API key's group (auth.api_keys); a token's group is written "jwt:https://auth.example.com/tenant#ops"`),
			fatal("acl.rules[0].groups[3]", "is empty"),
		},
	},
	{
		name: "principals_nojwt.bad.yaml",
		want: Problems{
			fatal("acl.rules[0].principals[2]", `"jwt:https://auth.example.com#carol" names a token's principal, but auth.jwt is off`),
			fatal("acl.rules[0].groups[1]", `"jwt:https://auth.example.com#ops" names a token's group, but auth.jwt is off`),
		},
	},
	{
		name: "issuer.bad.yaml",
		want: Problems{
			fatal("auth.jwt.issuer", `"https://auth.example.com/#" has a "#": an issuer has no fragment (RFC 8414, section 2), and "#" ends the issuer in the names of its tokens' principals`),
		},
	},
	{
		name: "admin.bad.yaml",
		want: Problems{
			fatal("admin.stdio_commands[1].args[1]", `"[a-" is not a valid pattern (path.Match syntax: *, ?, [a-z] and \ to escape)`),
			fatal("admin.stdio_commands[2].args[0]", `"**" must be the last pattern: it matches all the arguments that are left`),
			fatal("admin.stdio_commands[3].command", `"./server" is a relative path, which would run from the cwd a registration chooses; give a name looked up on PATH (npx) or an absolute path`),
			fatal("admin.stdio_commands[4]", "has no command"),
			fatal("admin.stdio_commands[5].command", `"bin/mcp" is a relative path, which would run from the cwd a registration chooses; give a name looked up on PATH (npx) or an absolute path`),
			fatal("admin.stdio_env[1]", "NODE_OPTIONS is never passed to a stdio server registered through the admin API: Node.js, npm, npx and the other JavaScript runtimes and package managers load code or packages it names"),
			fatal("admin.stdio_env[2]", "ld_preload is never passed to a stdio server registered through the admin API: the dynamic loader and the C library load code or data from the files it names"),
			fatal("admin.stdio_env[3]", `"1X" is not a valid variable name (letters, digits and _, not starting with a digit)`),
			fatal("admin.stdio_env[4]", "GOFLAGS is never passed to a stdio server registered through the admin API: toolchains that build and run a server (go run, cargo run) run the programs and fetch the code it names"),
			fatal("admin.stdio_env[5]", "PATH is never passed to a stdio server registered through the admin API: it chooses which program runs, or where programs find their configuration; the gateway sets PATH, HOME and TMPDIR itself"),
			fatal("admin.stdio_cwd[1]", `"srv/mcp" is not an absolute path; give the directory from / (such as /srv/mcp)`),
			fatal("admin.stdio_cwd[2]", `"" is not an absolute path; give the directory from / (such as /srv/mcp)`),
			fatal("admin.stdio_cwd[3]", `"./data" is not an absolute path; give the directory from / (such as /srv/mcp)`),
			fatal("admin.stdio_cwd[4]", `"~/mcp" is not an absolute path; give the directory from / (such as /srv/mcp)`),
		},
	},
	{
		name: "admin_decode.bad.yaml",
		want: Problems{
			fatal("admin.stdio_commands[1].argz", `unknown key (did you mean "args"?)`),
			fatal("admin.stdio_commands[2]", "must be a command, or a mapping with command and args, not a list"),
			fatal("admin.stdio_commands[3].args", "must be a list, not a string"),
		},
	},
	{
		name: "media.bad.yaml",
		want: Problems{
			fatal("admin.listen", `"nope" is not a host:port address to listen on, such as 127.0.0.1:9090`),
			fatal("admin.env_prefix", "must not be empty: servers registered through the admin API would read every environment variable of the gateway"),
			fatal("admin.stdio_commands[0]", "has no command"),
			fatal("media.mode", `"links" is not one of link, link+markdown, inline`),
			fatal("media.min_bytes", "must be 0 or more"),
			fatal("media.max_bytes", "must be more than 0"),
			fatal("media.max_age", "must be more than 0"),
			fatal("trusted_proxies[1]", `"10.0.0.0/33" is not an IP address or CIDR range (such as 10.0.0.0/8)`),
			fatal("trusted_proxies[2]", `"proxy.internal" is not an IP address or CIDR range (such as 10.0.0.0/8)`),
			{Path: `servers[0] (name "a").media.mode`, Message: `"off" is not one of link, link+markdown, inline (or leave it out for the gateway's media.mode)`, Server: "a"},
		},
	},
	{
		name: "relay.bad.yaml",
		want: Problems{
			fatal("input_timeout", "must be more than 0"),
			fatal("resume_window", "must be at most 1h0m0s"),
			fatal("stream_after", "must be more than 0"),
			skipped("mode-typo", `servers[0] (name "mode-typo").session_mode`, `"per_user" is not one of shared, per_principal, per_session`),
			skipped("mode-case", `servers[1] (name "mode-case").session_mode`, `"Shared" is not one of shared, per_principal, per_session`),
			skipped("single-per-principal", `servers[2] (name "single-per-principal").single_user`, "only goes with session_mode shared: a per_principal server never shares an upstream session between users"),
			skipped("single-per-session", `servers[3] (name "single-per-session").single_user`, "only goes with session_mode shared: a per_session server never shares an upstream session between users"),
			skipped("pool-low", `servers[4] (name "pool-low").pool.max`, "must be from 1 to 10000"),
			skipped("pool-low", `servers[4] (name "pool-low").pool.idle_timeout`, "must be more than 0"),
			skipped("pool-high", `servers[5] (name "pool-high").pool.max`, "must be from 1 to 10000"),
			skipped("pool-high", `servers[5] (name "pool-high").pool.idle_timeout`, "must be more than 0"),
			skipped("restart-values", `servers[6] (name "restart-values").restart.max_attempts`, "must be at least -1 (-1 never restarts the server; 0 means the default, 20)"),
			skipped("restart-values", `servers[6] (name "restart-values").restart.initial_backoff`, "must be more than 0"),
			skipped("restart-values", `servers[6] (name "restart-values").restart.max_backoff`, "must be more than 0"),
			skipped("restart-order", `servers[7] (name "restart-order").restart.initial_backoff`, "must be at most restart.max_backoff (30s)"),
			skipped("roots", `servers[8] (name "roots").roots[0].uri`, `missing; a root is a file:// URI, like "file:///srv/project"`),
			skipped("roots", `servers[8] (name "roots").roots[1].uri`, `"/srv/project" is not a file:// URI (MCP roots are file URIs), like "file:///srv/project"`),
			skipped("roots", `servers[8] (name "roots").roots[2].uri`, `"https://example.com/project" is not a file:// URI (MCP roots are file URIs), like "file:///srv/project"`),
			skipped("roots", `servers[8] (name "roots").roots[3].uri`, `"file:srv/project" is not a file:// URI (MCP roots are file URIs), like "file:///srv/project"`),
			skipped("roots", `servers[8] (name "roots").roots[4].uri`, `"file://%zz/project" is not a valid URI`),
			skipped("roots", `servers[8] (name "roots").roots[5].uri`, `"file://fileserver" has no path; a root names a directory, like "file:///srv/project"`),
			skipped("roots", `servers[8] (name "roots").roots[6].uri`, `"file:///srv/project?recursive=1" must not have a query or fragment`),
			skipped("roots", `servers[8] (name "roots").roots[7].uri`, `"file:///srv/project#top" must not have a query or fragment`),
		},
		wantServers: []string{"ok", "ok-shared"},
	},
	{
		name: "protocol.bad.yaml",
		want: Problems{
			at(6, 5, skipped("typo", `servers[0] (name "typo").protocol`, `"moderne" is not one of auto, modern, legacy`)),
			at(10, 5, skipped("case", `servers[1] (name "case").protocol`, `"Legacy" is not one of auto, modern, legacy`)),
			at(14, 5, skipped("sse-modern", `servers[2] (name "sse-modern").protocol`, "modern needs transport stdio or http: the sse transport (2024-11-05) is legacy only")),
		},
		wantServers: []string{"ok-auto", "ok-modern", "ok-legacy", "ok-default"},
	},
	{
		name: "public_url.bad.yaml",
		want: Problems{fatal("public_url", "must start with http:// or https://")},
	},
	{
		name: "units.bad.yaml",
		want: Problems{
			fatal("call_timeout", `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			fatal("start_timeout", `"2 minutes" is not a duration; write one with a unit, like "90s" or "2m"`),
			fatal("shutdown_grace", `must be a duration like "90s" or "2m", not a list`),
			fatal("max_request_body", `"4mb" has an unknown unit "mb"; units are case-sensitive: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)`),
			fatal("max_response_body", `"1.5MiB" is not a whole number; use a smaller unit, like "1536KiB" for 1.5MiB`),
			fatal("sessions.idle_timeout", `must be a duration like "90s" or "2m", not true or false`),
			fatal("list_changed_debounce", `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			fatal("input_timeout", `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			fatal("resume_window", `"five minutes" is not a duration; write one with a unit, like "90s" or "2m"`),
			skipped("slow", `servers[0] (name "slow").timeout`, `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			skipped("slow", `servers[0] (name "slow").pool.idle_timeout`, `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			skipped("slow", `servers[0] (name "slow").restart.initial_backoff`, `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`),
			skipped("slow", `servers[0] (name "slow").restart.max_backoff`, `"30 s" is not a duration; write one with a unit, like "90s" or "2m"`),
		},
	},
	{
		name: "names.bad.yaml",
		want: Problems{
			skipped("", "servers[0].name", "missing; a name is 1 to 32 of a-z, 0-9 and -"),
			skipped("Files", `servers[1] (name "Files").name`, `"Files" contains 'F'; only a-z, 0-9 and - are allowed`),
			skipped("my__files", `servers[2] (name "my__files").name`, `"my__files" contains "__", which separates the server from the tool in exposed names`),
			skipped("my_files", `servers[3] (name "my_files").name`, `"my_files" contains '_'; only a-z, 0-9 and - are allowed`),
			skipped("a-name-that-is-far-too-long-for-tools", `servers[4] (name "a-name-that-is-far-too-long-for-tools").name`, `"a-name-that-is-far-too-long-for-tools" is 37 characters long; the limit is 32`),
			skipped("files", "servers[6]", `name "files" is already used by servers[5]`),
		},
		wantServers: []string{"files"},
	},
	{
		name: "transports.bad.yaml",
		want: Problems{
			skipped("none", `servers[0] (name "none").transport`, "missing; one of stdio, http, sse"),
			skipped("grpc", `servers[1] (name "grpc").transport`, `"grpc" is not one of stdio, http, sse`),
			skipped("stdio-no-command", `servers[2] (name "stdio-no-command").command`, "missing; a stdio server needs the command to run"),
			skipped("stdio-with-http-keys", `servers[3] (name "stdio-with-http-keys").url`, "not used by stdio servers (url, api_key, headers and forward_headers are for http and sse)"),
			skipped("stdio-with-http-keys", `servers[3] (name "stdio-with-http-keys").api_key`, "not used by stdio servers (url, api_key, headers and forward_headers are for http and sse)"),
			skipped("stdio-with-http-keys", `servers[3] (name "stdio-with-http-keys").headers`, "not used by stdio servers (url, api_key, headers and forward_headers are for http and sse)"),
			skipped("http-no-url", `servers[4] (name "http-no-url").url`, "missing; an http server needs its URL"),
			skipped("http-with-stdio-keys", `servers[5] (name "http-with-stdio-keys").command`, "not used by http servers (command, args, env and cwd are for stdio)"),
			skipped("http-with-stdio-keys", `servers[5] (name "http-with-stdio-keys").args`, "not used by http servers (command, args, env and cwd are for stdio)"),
			skipped("http-with-stdio-keys", `servers[5] (name "http-with-stdio-keys").env`, "not used by http servers (command, args, env and cwd are for stdio)"),
			skipped("http-with-stdio-keys", `servers[5] (name "http-with-stdio-keys").cwd`, "not used by http servers (command, args, env and cwd are for stdio)"),
			skipped("negative-timeout", `servers[6] (name "negative-timeout").timeout`, "must not be negative (0 means the gateway's call_timeout)"),
		},
		wantServers: []string{"ok"},
	},
	{
		name: "urls.bad.yaml",
		want: Problems{
			skipped("plain-http", `servers[0] (name "plain-http").url`, "must use https unless the host is loopback (localhost, 127.0.0.0/8, ::1), so the api_key and headers do not cross the network in the clear"),
			skipped("ftp", `servers[1] (name "ftp").url`, "must start with http:// or https://"),
			skipped("no-host", `servers[2] (name "no-host").url`, "has no host"),
			skipped("bad-port", `servers[3] (name "bad-port").url`, "is not a valid URL"),
			skipped("relative", `servers[4] (name "relative").url`, "must start with http:// or https://"),
		},
		wantServers: []string{"loopback-v4", "loopback-v6", "loopback-name"},
	},
	{
		name: "headers_env.bad.yaml",
		want: Problems{
			skipped("headers", `servers[0] (name "headers").headers.Authorization`, `conflicts with api_key, which is sent as "Authorization: Bearer <key>"; use api_key alone`),
			skipped("headers", `servers[0] (name "headers").headers["Bad Header"]`, `"Bad Header" is not a valid header name (letters, digits and !#$%&'*+-.^_`+"`"+`|~)`),
			skipped("headers", `servers[0] (name "headers").headers.Mcp-Session-Id`, "is set by the gateway for each session; it cannot be configured"),
			skipped("headers", `servers[0] (name "headers").headers.X-Newline`, "value contains a control character, such as a newline"),
			skipped("headers", `servers[0] (name "headers").headers.mcp-protocol-version`, "is set by the gateway for each session; it cannot be configured"),
			skipped("headers", `servers[0] (name "headers").headers.x-team`, `is the same header as "X-Team" (header names are case-insensitive)`),
			skipped("env", `servers[2] (name "env").env.1BAD`, `"1BAD" is not a valid variable name (letters, digits and _, not starting with a digit)`),
			skipped("env", `servers[2] (name "env").env.NUL`, "value contains a NUL byte"),
			skipped("env", `servers[2] (name "env").env["WITH SPACE"]`, `"WITH SPACE" is not a valid variable name (letters, digits and _, not starting with a digit)`),
		},
		wantServers: []string{"authorization-alone"},
	},
	{
		name: "expand.bad.yaml",
		env:  map[string]string{"HOST": "h.example.com"},
		want: Problems{
			skipped("search", `servers[0] (name "search").api_key`, "environment variable SEARCH_TOKEN is not set (use ${SEARCH_TOKEN:-default} for a default)"),
			skipped("malformed", `servers[1] (name "malformed").url`, "unterminated ${ at byte 8 (write $$ for a literal $)"),
			skipped("malformed", `servers[1] (name "malformed").headers.X-Empty`, "malformed ${...} at byte 0: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)"),
			skipped("malformed", `servers[1] (name "malformed").headers.X-Key`, "malformed ${...} at byte 0: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)"),
			skipped("two-unset", `servers[2] (name "two-unset").env.D`, "environment variable MISSING is not set (use ${MISSING:-default} for a default)"),
			skipped("two-unset", `servers[2] (name "two-unset").env.D`, "environment variable ALSO_MISSING is not set (use ${ALSO_MISSING:-default} for a default)"),
		},
		// command, args and cwd are not expanded.
		wantServers: []string{"not-expanded"},
	},
}

// TestParse_BadFixtures checks each bad fixture's problems; their lines
// and columns are checked by TestParse_Positions, except where a fixture
// gives them.
func TestParse_BadFixtures(t *testing.T) {
	for _, tt := range badFixtures {
		t.Run(tt.name, func(t *testing.T) {
			c, got := parseFile(t, tt.name, tt.env)
			for i := range got {
				if i < len(tt.want) && tt.want[i].Line == 0 {
					got[i].Line, got[i].Column = 0, 0
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantServers, serverNames(c)); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParse_Positions checks where problems are said to be: at the key
// they are about, or at the nearest enclosing key written in the file
// (a missing key), or nowhere when the file has none (a missing setting).
func TestParse_Positions(t *testing.T) {
	type pos struct {
		Path         string
		Line, Column int
	}
	tests := []struct {
		name string // file in testdata
		want []pos  // of every problem, in order
	}{
		{"syntax.bad.yaml", []pos{{"", 6, 4}}},
		{"indentation.bad.yaml", []pos{{"", 5, 4}}},
		{"two_documents.bad.yaml", []pos{{"", 2, 1}}},
		{"unknown_keys.bad.yaml", []pos{
			{"listne", 1, 1},
			{"Data_Dir", 2, 1},
			{"sessions.idle_timout", 4, 3},
			{"sessions.maxPerPrincipal", 5, 3},
			{"log.colour", 7, 3},
			{"page-size", 8, 1},
			{"naming.prefx", 10, 3},
			{"resources.namespaces", 12, 3},
			{"input_timout", 13, 1},
			{"resume-window", 14, 1},
			{`servers[0] (name "files").comand`, 18, 5},
			{`servers[0] (name "files").tools.alow`, 20, 7},
			{`servers[0] (name "files").command`, 16, 5}, // missing: the entry
			{`servers[1] (name "search").apiKey`, 24, 5},
			{`servers[1] (name "search").tls`, 25, 5},
			{`servers[1] (name "search").tools.descibe`, 28, 7},
			{`servers[2] (name "relay").sesion_mode`, 32, 5},
			{`servers[2] (name "relay").singleUser`, 33, 5},
			{`servers[2] (name "relay").pool.maxx`, 34, 12},
			{`servers[2] (name "relay").restart.max_attempt`, 35, 15},
			{`servers[2] (name "relay").restart.backoff`, 35, 31},
			{`servers[2] (name "relay").roots[0].url`, 36, 14},
			{`servers[2] (name "relay").forward_notification`, 37, 5},
		}},
		{"duplicate_keys.bad.yaml", []pos{
			{"listen", 2, 1}, // the second one
			{`servers[0] (name "files").command`, 7, 5},
			{`servers[1] (name "web").headers.X-A`, 11, 25},
		}},
		{"gateway_values.bad.yaml", nil}, // filled below: every problem has a line
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseFile(t, tt.name, nil)
			var got []pos
			for _, p := range ps {
				got = append(got, pos{p.Path, p.Line, p.Column})
			}
			if tt.want == nil {
				for _, p := range ps {
					if p.Line == 0 {
						t.Errorf("%s: no line", p)
					}
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("positions (-want +got):\n%s", diff)
			}
		})
	}
}

func parseFile(t *testing.T, name string, env map[string]string) (*Config, Problems) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	c, ps := Parse(data, lookup(env))
	if c == nil {
		t.Fatal("Parse returned a nil Config")
	}
	return c, ps
}

func serverNames(c *Config) []string {
	var names []string
	for _, s := range c.Servers {
		names = append(names, s.Name)
	}
	return names
}

// fullEnv is the environment testdata/full.yaml expects.
var fullEnv = map[string]string{"GITHUB_TOKEN": "ghp-test", "SEARCH_API_KEY": "search-key"}

// The good fixtures parse without problems to exactly this.
var goodFixtures = []struct {
	name string
	env  map[string]string
	want *Config
}{
	{
		name: "full.yaml",
		env:  fullEnv,
		want: &Config{
			Listen:              "127.0.0.1:8080",
			PublicURL:           "https://mcp.example.com",
			DataDir:             "./data",
			CallTimeout:         Duration(2 * time.Minute),
			StartTimeout:        Duration(2 * time.Minute),
			ShutdownGrace:       Duration(10 * time.Second),
			MaxRequestBody:      4 << 20,
			MaxResponseBody:     64 << 20,
			AllowedHosts:        []string{"mcp.example.com", "localhost", "127.0.0.1", "[::1]"},
			AllowedOrigins:      []string{"https://mcp.example.com", "http://localhost", "https://localhost"},
			Sessions:            Sessions{IdleTimeout: Duration(30 * time.Minute), Max: 10000, MaxPerPrincipal: 1000},
			Naming:              Naming{PrefixMode: "always", Prefix: "mcp", Separator: "__", MaxLength: 64},
			PageSize:            0,
			ListChangedDebounce: Duration(500 * time.Millisecond),
			Resources:           Resources{Namespace: "auto"},
			InputTimeout:        Duration(5 * time.Minute),
			ResumeWindow:        Duration(5 * time.Minute),
			StreamAfter:         Duration(time.Second),
			Store:               Store{Driver: StoreSQLite},
			Database:            Database{Path: "./data/mcpgw.db"},
			Auth: Auth{Anonymous: ptr(false), APIKeys: []APIKey{{
				Principal: "alice",
				KeySHA256: "sha256:2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90",
				Groups:    []string{"platform"},
			}}, JWT: JWT{
				Issuer: "https://auth.example.com", JWKSURL: "https://auth.example.com/.well-known/jwks.json",
				Audience: "https://mcp.example.com/mcp", Algorithms: []string{"RS256", "ES256"}, Leeway: Duration(30 * time.Second),
				PrincipalClaim: "sub", GroupsClaim: "groups", Scopes: []string{"mcp"}, AuthorizationServers: []string{"https://auth.example.com"},
			}},
			ACL: ACL{Default: "deny", Rules: []ACLRule{
				{Effect: "allow", Groups: []string{"platform", "jwt:https://auth.example.com#platform"}, Servers: []string{"*"}},
				{Effect: "deny", Principals: []string{"alice", "jwt:https://auth.example.com#alice"}, Tools: []string{"mcp__files__write_*"}},
			}},
			RateLimits: RateLimits{PerPrincipal: Rate{Rate: 20, Burst: 40}, MaxPrincipals: 10000},
			Tasks: Tasks{Host: ptr(true), DefaultTTL: Duration(time.Hour), MaxTTL: Duration(24 * time.Hour),
				PollInterval: Duration(time.Second), MaxHostedPerPrincipal: 16, PromoteAfter: Duration(5 * time.Second)},
			Media: Media{Mode: "link", MinBytes: 4 << 10, MaxBytes: 1 << 30, MaxAge: Duration(24 * time.Hour),
				URLTTL: Duration(24 * time.Hour)},
			TrustedProxies: []string{"10.0.0.0/8", "192.168.1.10"},
			Admin: Admin{Tokens: []string{}, EnvPrefix: "MCPGW_UPSTREAM_",
				StdioCommands: []StdioCommand{
					{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/shared/*"}},
					{Command: "/usr/local/bin/mcp-git"},
				},
				StdioEnv: []string{"GITHUB_TOKEN"},
				StdioCwd: []string{"/srv/mcp"}},
			Log: Log{Level: "info", Format: "json"},
			Servers: []Server{
				{
					Name:      "files",
					Transport: "stdio",
					Enabled:   ptr(true),
					Required:  true,
					Timeout:   Duration(30 * time.Second),
					Command:   "npx",
					Args:      []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"},
					Env:       map[string]string{"LOG_LEVEL": "warn", "GITHUB_TOKEN": "ghp-test"},
					Cwd:       "/srv",
					Tools: ToolOptions{
						Allow:    []string{"read_*", "list_*", "search_files"},
						Deny:     []string{"*delete*"},
						Rename:   map[string]string{"search_files": "find_files"},
						Describe: map[string]string{"search_files": "Find files under /srv/shared by name."},
					},
					Protocol:    "auto",
					SessionMode: "per_principal",
					Pool:        Pool{Max: 20, IdleTimeout: Duration(10 * time.Minute)},
					Serialize:   true,
					Restart:     Restart{MaxAttempts: 20, InitialBackoff: Duration(500 * time.Millisecond), MaxBackoff: Duration(30 * time.Second)},
					Roots:       []Root{{URI: "file:///srv/shared", Name: "Shared files"}},
				},
				{
					Name:                 "search",
					Transport:            "http",
					URL:                  "https://search.example.com/mcp",
					APIKey:               "search-key",
					Headers:              map[string]string{"X-Team": "platform"},
					Naming:               ServerNaming{PrefixMode: "on_collision"},
					Resources:            ServerResources{Namespace: "always"},
					Protocol:             "auto",
					SessionMode:          "shared",
					SingleUser:           true,
					ForwardNotifications: true,
					Media:                ServerMedia{Mode: "link+markdown"},
					RateLimit:            ServerLimit{Rate: 10, Burst: 20, MaxConcurrent: 8},
					ForwardHeaders:       []string{"X-Request-Id"},
					Pool:                 Pool{Max: 100, IdleTimeout: Duration(10 * time.Minute)},
					Restart:              Restart{MaxAttempts: 20, InitialBackoff: Duration(500 * time.Millisecond), MaxBackoff: Duration(30 * time.Second)},
				},
				{
					Name:        "legacy-notes",
					Transport:   "sse",
					URL:         "http://127.0.0.1:3001/sse",
					Enabled:     ptr(false),
					Protocol:    "auto",
					SessionMode: "shared",
					Pool:        Pool{Max: 100, IdleTimeout: Duration(10 * time.Minute)},
					Restart:     Restart{MaxAttempts: 20, InitialBackoff: Duration(500 * time.Millisecond), MaxBackoff: Duration(30 * time.Second)},
				},
			},
		},
	},
	{
		name: "anchors.good.yaml",
		want: withServers(defaultsFor("http://127.0.0.1:8080"),
			Server{Name: "files", Transport: "stdio", Command: "mcp-files", Env: map[string]string{"LOG_LEVEL": "warn", "REGION": "eu"}},
			Server{Name: "files2", Transport: "stdio", Command: "mcp-files", Args: []string{"--root", "/srv"}, Env: map[string]string{"LOG_LEVEL": "warn", "REGION": "us"}},
			Server{Name: "web", Transport: "http", URL: "https://web.example.com/mcp", Headers: map[string]string{"X-Team": "platform"}},
			Server{Name: "web2", Transport: "http", URL: "https://web2.example.com/mcp", Headers: map[string]string{"X-Team": "platform"}},
		),
	},
	{
		name: "expand.good.yaml",
		env: map[string]string{
			"SEARCH_URL":   "https://search.example.com/mcp",
			"SEARCH_TOKEN": "s3cret",
			"EMPTY":        "",
			"A":            "a",
			"B":            "b",
		},
		want: withServers(defaultsFor("http://127.0.0.1:8080"),
			Server{
				Name:      "search",
				Transport: "http",
				URL:       "https://search.example.com/mcp",
				APIKey:    "s3cret",
				Headers:   map[string]string{"X-Team": "platform", "X-Price": "$5 and $ alone"},
			},
			Server{
				Name:      "files",
				Transport: "stdio",
				Command:   "mcp-files",
				Env: map[string]string{
					"EMPTY_DEFAULT":        "",
					"SET_BUT_EMPTY":        "fallback",
					"SET_EMPTY_NO_DEFAULT": "",
					"LITERAL":              "${NOT_A_VARIABLE}",
					"TWO":                  "ab",
				},
			},
		),
	},
}

func TestParse_GoodFixtures(t *testing.T) {
	for _, tt := range goodFixtures {
		t.Run(tt.name, func(t *testing.T) {
			got, ps := parseFile(t, tt.name, tt.env)
			if ps != nil {
				t.Fatalf("problems:\n%v", ps)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// Every fixture is in one of the tables, so none is forgotten.
func TestFixtures_AllInTables(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]bool{}
	for _, tt := range badFixtures {
		bad[tt.name] = true
	}
	good := map[string]bool{}
	for _, tt := range goodFixtures {
		good[tt.name] = true
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, ".bad.yaml") != bad[name] || !bad[name] && !good[name] {
			t.Errorf("testdata/%s: want *.bad.yaml in badFixtures and the others in goodFixtures", name)
		}
	}
}

// defaultsFor is the Config of an empty file whose public URL is publicURL
// (with its defaults for listen).
func defaultsFor(publicURL string) *Config {
	c := defaultConfig()
	c.PublicURL = publicURL
	c.AllowedHosts = []string{"127.0.0.1:8080", "127.0.0.1", "localhost", "[::1]"}
	c.AllowedOrigins = []string{"http://127.0.0.1:8080", "http://localhost", "https://localhost", "http://127.0.0.1", "https://127.0.0.1", "http://[::1]", "https://[::1]"}
	return c
}

// withServers returns c with the servers ss, each given the defaults of
// the keys it leaves out (see defaulted).
func withServers(c *Config, ss ...Server) *Config {
	for _, s := range ss {
		c.Servers = append(c.Servers, defaulted(s))
	}
	return c
}

// defaulted returns s with the defaults Parse gives a server entry where
// session_mode, pool or restart is left out.
func defaulted(s Server) Server {
	d := DefaultServer()
	if s.Protocol == "" {
		s.Protocol = d.Protocol
	}
	if s.SessionMode == "" {
		s.SessionMode = d.SessionMode
	}
	if s.Pool == (Pool{}) {
		s.Pool = d.Pool
	}
	if s.Restart == (Restart{}) {
		s.Restart = d.Restart
	}
	return s
}

func TestParse_Defaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *Config
	}{
		{
			// The new keys' defaults, written out rather than taken from
			// defaultConfig, so that a changed default shows here.
			name: "empty file",
			yaml: "",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Naming = Naming{PrefixMode: "always", Prefix: "mcp", Separator: "__", MaxLength: 64}
				c.PageSize = 0
				c.ListChangedDebounce = Duration(500 * time.Millisecond)
				c.Resources = Resources{Namespace: "auto"}
				c.InputTimeout = Duration(5 * time.Minute)
				c.ResumeWindow = Duration(5 * time.Minute)
				c.StreamAfter = Duration(time.Second)
				return c
			}(),
		},
		{
			name: "comments only",
			yaml: "# nothing yet\n",
			want: defaultsFor("http://127.0.0.1:8080"),
		},
		{
			name: "keys without values take the defaults",
			yaml: "listen:\ncall_timeout:\nsessions:\n  max:\nservers:\n",
			want: defaultsFor("http://127.0.0.1:8080"),
		},
		{
			name: "listen on all interfaces is reached on localhost",
			yaml: `listen: ":9090"`,
			want: func() *Config {
				c := defaultConfig()
				c.Listen = ":9090"
				c.PublicURL = "http://localhost:9090"
				c.AllowedHosts = []string{"localhost:9090", "localhost", "127.0.0.1", "[::1]"}
				c.AllowedOrigins = []string{"http://localhost:9090", "http://localhost", "https://localhost", "http://127.0.0.1", "https://127.0.0.1", "http://[::1]", "https://[::1]"}
				return c
			}(),
		},
		{
			name: "port 0 stays for the caller to fix; the defaults match any port",
			yaml: `listen: "[::1]:0"`,
			want: func() *Config {
				c := defaultConfig()
				c.Listen = "[::1]:0"
				c.PublicURL = "http://[::1]:0"
				c.AllowedHosts = []string{"[::1]", "localhost", "127.0.0.1"}
				c.AllowedOrigins = []string{"http://[::1]", "http://localhost", "https://localhost", "http://127.0.0.1", "https://127.0.0.1", "https://[::1]"}
				return c
			}(),
		},
		{
			name: "public_url loses its trailing slash and gives the defaults",
			yaml: "public_url: HTTPS://MCP.Example.com/",
			want: func() *Config {
				c := defaultConfig()
				c.PublicURL = "HTTPS://MCP.Example.com"
				c.AllowedHosts = []string{"mcp.example.com", "localhost", "127.0.0.1", "[::1]"}
				c.AllowedOrigins = []string{"https://mcp.example.com", "http://localhost", "https://localhost", "http://127.0.0.1", "https://127.0.0.1", "http://[::1]", "https://[::1]"}
				return c
			}(),
		},
		{
			name: "explicit allowed lists replace the defaults; origins lose a trailing slash",
			yaml: "public_url: https://mcp.example.com:8443\nallowed_hosts: [mcp.example.com:8443]\nallowed_origins: [\"https://app.example.com/\"]\n",
			want: func() *Config {
				c := defaultConfig()
				c.PublicURL = "https://mcp.example.com:8443"
				c.AllowedHosts = []string{"mcp.example.com:8443"}
				c.AllowedOrigins = []string{"https://app.example.com"}
				return c
			}(),
		},
		{
			name: "sizes and durations",
			yaml: "max_request_body: 1GiB\nmax_response_body: 512 KiB\ncall_timeout: 1h30m\nsecret: 0123456789abcdef0123456789abcdef\nadmin: {tokens: [\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF\"]}\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.MaxRequestBody = 1 << 30
				c.MaxResponseBody = 512 << 10
				c.CallTimeout = Duration(90 * time.Minute)
				c.Secret = "0123456789abcdef0123456789abcdef"
				c.Admin.Tokens = []string{"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF"}
				return c
			}(),
		},
		{
			name: "a partial naming keeps the other defaults",
			yaml: "naming: {separator: _}\nresources:\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Naming = Naming{PrefixMode: "always", Prefix: "mcp", Separator: "_", MaxLength: 64}
				return c
			}(),
		},
		{
			name: "names, paging and list changes at their upper bounds",
			yaml: "naming: {prefix_mode: on_collision, prefix: gw0123456789abcd, separator: a-_Z, max_length: 128}\npage_size: 10000\nlist_changed_debounce: 1m\nresources: {namespace: never}\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Naming = Naming{PrefixMode: "on_collision", Prefix: "gw0123456789abcd", Separator: "a-_Z", MaxLength: 128}
				c.PageSize = 10000
				c.ListChangedDebounce = Duration(time.Minute)
				c.Resources = Resources{Namespace: "never"}
				return c
			}(),
		},
		{
			name: "names, paging and list changes at their lower bounds",
			yaml: "naming: {prefix_mode: never, prefix: x, separator: '-', max_length: 16}\npage_size: 1\nlist_changed_debounce: 1ns\nresources: {namespace: always}\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Naming = Naming{PrefixMode: "never", Prefix: "x", Separator: "-", MaxLength: 16}
				c.PageSize = 1
				c.ListChangedDebounce = Duration(time.Nanosecond)
				c.Resources = Resources{Namespace: "always"}
				return c
			}(),
		},
		{
			name: "server overrides and tool options",
			yaml: "naming: {max_length: 20}\nservers:\n  - name: web\n    transport: http\n    url: https://web.example.com/mcp\n    naming: {prefix_mode: never}\n    resources: {namespace: never}\n    tools:\n      allow: []\n      rename: {search: web_search_exactly20}\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Naming.MaxLength = 20
				c.Servers = []Server{defaulted(Server{
					Name: "web", Transport: "http", URL: "https://web.example.com/mcp",
					Naming:    ServerNaming{PrefixMode: "never"},
					Resources: ServerResources{Namespace: "never"},
					Tools:     ToolOptions{Allow: []string{}, Rename: map[string]string{"search": "web_search_exactly20"}},
				})}
				return c
			}(),
		},
		{
			// Written out rather than taken from defaultServer, so that a
			// changed default shows here.
			name: "a server's defaults",
			yaml: "servers:\n  - {name: files, transport: stdio, command: mcp-files}\n",
			want: func() *Config {
				c := defaultsFor("http://127.0.0.1:8080")
				c.Servers = []Server{{
					Name: "files", Transport: "stdio", Command: "mcp-files",
					Protocol:    "auto",
					SessionMode: "shared",
					Pool:        Pool{Max: 100, IdleTimeout: Duration(10 * time.Minute)},
					Restart:     Restart{MaxAttempts: 20, InitialBackoff: Duration(500 * time.Millisecond), MaxBackoff: Duration(30 * time.Second)},
				}}
				return c
			}(),
		},
		{
			name: `protocol "", session_mode "", restart.max_attempts 0 and empty keys take the defaults`,
			yaml: "servers:\n  - name: files\n    transport: stdio\n    command: mcp-files\n    protocol: ''\n    session_mode: ''\n    pool:\n    restart: {max_attempts: 0, max_backoff: }\n    roots:\n",
			want: withServers(defaultsFor("http://127.0.0.1:8080"), Server{Name: "files", Transport: "stdio", Command: "mcp-files"}),
		},
		{
			name: "a partial pool and restart keep the other defaults",
			yaml: "servers:\n  - {name: files, transport: stdio, command: mcp-files, pool: {max: 5}, restart: {max_backoff: 1m}}\n",
			want: withServers(defaultsFor("http://127.0.0.1:8080"), Server{
				Name: "files", Transport: "stdio", Command: "mcp-files",
				Pool:    Pool{Max: 5, IdleTimeout: Duration(DefaultPoolIdle)},
				Restart: Restart{MaxAttempts: DefaultRestartAttempts, InitialBackoff: Duration(DefaultRestartBackoff), MaxBackoff: Duration(time.Minute)},
			}),
		},
		{
			name: "relay keys at their upper bounds",
			yaml: "input_timeout: 1h\nresume_window: 1h\nservers:\n  - {name: files, transport: stdio, command: mcp-files, session_mode: per_session, pool: {max: 10000, idle_timeout: 24h}, restart: {max_attempts: 1000000, initial_backoff: 1h, max_backoff: 1h}}\n",
			want: func() *Config {
				c := withServers(defaultsFor("http://127.0.0.1:8080"), Server{
					Name: "files", Transport: "stdio", Command: "mcp-files",
					SessionMode: "per_session",
					Pool:        Pool{Max: 10000, IdleTimeout: Duration(24 * time.Hour)},
					Restart:     Restart{MaxAttempts: 1000000, InitialBackoff: Duration(time.Hour), MaxBackoff: Duration(time.Hour)},
				})
				c.InputTimeout = Duration(time.Hour)
				c.ResumeWindow = Duration(time.Hour)
				return c
			}(),
		},
		{
			name: "relay keys at their lower bounds",
			yaml: "input_timeout: 1ns\nresume_window: 1ns\nservers:\n  - {name: files, transport: stdio, command: mcp-files, session_mode: per_principal, pool: {max: 1, idle_timeout: 1ns}, restart: {max_attempts: -1, initial_backoff: 1ns, max_backoff: 1ns}}\n",
			want: func() *Config {
				c := withServers(defaultsFor("http://127.0.0.1:8080"), Server{
					Name: "files", Transport: "stdio", Command: "mcp-files",
					SessionMode: "per_principal",
					Pool:        Pool{Max: 1, IdleTimeout: 1},
					Restart:     Restart{MaxAttempts: -1, InitialBackoff: 1, MaxBackoff: 1},
				})
				c.InputTimeout = 1
				c.ResumeWindow = 1
				return c
			}(),
		},
		{
			name: "single_user, serialize, roots and forward_notifications",
			yaml: "servers:\n  - name: web\n    transport: http\n    url: https://web.example.com/mcp\n    single_user: true\n    serialize: true\n    forward_notifications: true\n    roots:\n      - uri: file:///\n      - {uri: \"FILE://localhost/C:/Users/me%20too\", name: Me}\n",
			want: withServers(defaultsFor("http://127.0.0.1:8080"), Server{
				Name: "web", Transport: "http", URL: "https://web.example.com/mcp",
				SingleUser: true, Serialize: true, ForwardNotifications: true,
				Roots: []Root{{URI: "file:///"}, {URI: "FILE://localhost/C:/Users/me%20too", Name: "Me"}},
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ps := Parse([]byte(tt.yaml), nil)
			if ps != nil {
				t.Fatalf("problems:\n%v", ps)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// A parsed Config written back as YAML parses to the same Config.
func TestParse_RoundTrip(t *testing.T) {
	c, ps := parseFile(t, "full.yaml", fullEnv)
	if ps != nil {
		t.Fatalf("problems:\n%v", ps)
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, ps := Parse(data, nil)
	if ps != nil {
		t.Fatalf("problems parsing\n%s:\n%v", data, ps)
	}
	if diff := cmp.Diff(c, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	c, ps, err := Load(filepath.Join("testdata", "full.yaml"), lookup(fullEnv))
	if err != nil || ps != nil {
		t.Fatalf("Load(full.yaml) = _, %v, %v; want no problems", ps, err)
	}
	if diff := cmp.Diff([]string{"files", "search", "legacy-notes"}, serverNames(c)); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}

	c, ps, err = Load(filepath.Join("testdata", "no-such-file.yaml"), nil)
	if !errors.Is(err, fs.ErrNotExist) || c != nil || ps != nil {
		t.Errorf("Load(missing file) = %v, %v, %v; want nil, nil, ErrNotExist", c, ps, err)
	}

	_, ps, err = Load(filepath.Join("testdata", "syntax.bad.yaml"), nil)
	if err != nil || !ps.Fatal() {
		t.Errorf("Load(syntax.bad.yaml) = _, %v, %v; want a Fatal problem and no error", ps, err)
	}
}

// No problem shows the value of a variable, a url, an api_key, a header or
// env value, the secret or an admin token.
func TestParse_NoSecretsInProblems(t *testing.T) {
	const secret = "hunter2-do-not-show"
	env := map[string]string{"TOKEN": secret + "\n", "URL": "http://" + secret + "/mcp", "BADURL": "https://" + secret + ":x/"}
	yaml := `
secret: ` + secret + `
admin:
  tokens: [` + secret + `]
servers:
  - name: a
    transport: http
    url: ${URL}
    api_key: ${TOKEN}
    headers: {X-Key: "${TOKEN}", Authorization: "${TOKEN}"}
  - name: b
    transport: sse
    url: ${BADURL}
  - name: c
    transport: sse
    url: ftp://` + secret + `/
  - name: d
    transport: stdio
    command: x
    url: https://` + secret + `/
    env: {A: "${TOKEN}\u0000", B: "${` + secret + `}", C: "${UNSET_` + "X" + `}"}
`
	_, ps := Parse([]byte(yaml), lookup(env))
	if len(ps) < 10 {
		t.Fatalf("got %d problems, want at least 10:\n%v", len(ps), ps)
	}
	for _, p := range ps {
		if strings.Contains(p.String(), secret) {
			t.Errorf("problem shows a secret: %v", p)
		}
	}
}

// Aliases cannot make Parse run for ever: a thousand aliases of a server
// with a thousand arguments are a million values.
func TestParse_AliasBomb(t *testing.T) {
	args := strings.Repeat("a,", 1000)
	servers := strings.Repeat("*s,", 1000)
	data := "x-args: &args [" + args + "]\n" +
		"x-server: &s {name: files, transport: stdio, command: c, args: *args}\n" +
		"servers: [" + servers + "]\n"
	_, ps := Parse([]byte(data), nil)
	want := fatal("", "the file has more than 1000000 values once its aliases are expanded")
	if len(ps) == 0 || ps[len(ps)-1] != want {
		t.Errorf("Parse(alias bomb) ends with %v; want %v", ps[max(0, len(ps)-2):], want)
	}
}

func TestExpand(t *testing.T) {
	env := lookup(map[string]string{"HOME": "/home/me", "EMPTY": "", "A_1": "x", "DOLLAR": "$"})
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "empty", in: "", want: ""},
		{name: "variable", in: "${HOME}/bin", want: "/home/me/bin"},
		{name: "variables", in: "${A_1}${A_1}-${HOME}", want: "xx-/home/me"},
		{name: "set and empty", in: "[${EMPTY}]", want: "[]"},
		{name: "default when unset", in: "${NOPE:-fall back}", want: "fall back"},
		{name: "default when empty", in: "${EMPTY:-fallback}", want: "fallback"},
		{name: "default not used when set", in: "${HOME:-x}", want: "/home/me"},
		{name: "empty default", in: "[${NOPE:-}]", want: "[]"},
		{name: "default holds colons and slashes", in: "${NOPE:-http://127.0.0.1:3000/mcp}", want: "http://127.0.0.1:3000/mcp"},
		{name: "default is not expanded", in: "${NOPE:-$$}", want: "$$"},
		{name: "value is not expanded again", in: "${DOLLAR}{HOME}", want: "${HOME}"},
		{name: "escaped dollar", in: "$$5 and $${HOME}", want: "$5 and ${HOME}"},
		{name: "lone dollar kept", in: "a$b $ c$", want: "a$b $ c$"},
		{name: "unset", in: "${SEARCH_TOKEN}", wantErr: "environment variable SEARCH_TOKEN is not set (use ${SEARCH_TOKEN:-default} for a default)"},
		{
			name:    "every unset one",
			in:      "${A}${B}",
			wantErr: "environment variable A is not set (use ${A:-default} for a default)\nenvironment variable B is not set (use ${B:-default} for a default)",
		},
		{name: "unterminated", in: "abc${HOME", wantErr: "unterminated ${ at byte 3 (write $$ for a literal $)"},
		{name: "just ${", in: "${", wantErr: "unterminated ${ at byte 0 (write $$ for a literal $)"},
		{name: "empty name", in: "${}", wantErr: "malformed ${...} at byte 0: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)"},
		{name: "digit first", in: "x${1X}", wantErr: "malformed ${...} at byte 1: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)"},
		{name: "shell's unset-only form", in: "${A-b}", wantErr: "malformed ${...} at byte 0: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)"},
		{name: "nested", in: "${A:-${B}}", want: "${B}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.in, env)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("Expand(%q) error (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Expand(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParse_SecretFromEnvironment(t *testing.T) {
	key := strings.Repeat("k", 40)
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		want    string
		problem string
	}{
		{"expanded", "secret: ${MCPGW_SECRET}\n", map[string]string{"MCPGW_SECRET": key}, key, ""},
		{"default", "secret: ${MCPGW_SECRET:-" + key + "}\n", nil, key, ""},
		{"literal", "secret: " + key + "\n", nil, key, ""},
		{"unset", "secret: ${MCPGW_SECRET}\n", nil, "", "line 1, column 1: secret: environment variable MCPGW_SECRET is not set"},
		{"too short", "secret: ${MCPGW_SECRET}\n", map[string]string{"MCPGW_SECRET": "short"}, "", "line 1, column 1: secret: must be at least 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ps := Parse([]byte(tt.yaml), lookup(tt.env))
			if tt.problem != "" {
				if len(ps) != 1 || !ps.Fatal() || !strings.HasPrefix(ps[0].String(), tt.problem) {
					t.Fatalf("problems = %v, want one fatal starting %q", ps, tt.problem)
				}
				if strings.Contains(ps.Error(), "short") {
					t.Errorf("a problem shows the secret: %v", ps)
				}
				return
			}
			if len(ps) != 0 || c.Secret != tt.want {
				t.Fatalf("Secret = %q, problems %v", c.Secret, ps)
			}
		})
	}
}
