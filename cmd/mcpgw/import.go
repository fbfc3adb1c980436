package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/mcpgw/mcpgw/config"
)

// importedServer is one converted entry: the keys of a servers[] entry of
// mcpgw's file (config.Server's yaml tags), and of the body the admin API
// takes to register a server.
type importedServer struct {
	Name      string            `yaml:"name" json:"name"`
	Transport string            `yaml:"transport" json:"transport"`
	Enabled   *bool             `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	Command   string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args      []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env       map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Cwd       string            `yaml:"cwd,omitempty" json:"cwd,omitempty"`
	URL       string            `yaml:"url,omitempty" json:"url,omitempty"`
	Headers   map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
}

// importFlags defines the flags of import.
func importFlags(fs *flag.FlagSet) (adminURL, tokenEnv *string) {
	adminURL = fs.String("admin-url", "", "register the servers with the gateway whose admin API is at `URL` (http://host:port) instead of printing them")
	tokenEnv = fs.String("admin-token-env", "MCPGW_ADMIN_TOKEN", "the environment variable `VAR` holding the admin bearer token (with --admin-url)")
	return adminURL, tokenEnv
}

// importCmd converts the client config named in args and prints it, or
// registers its servers through the admin API. It returns the exit code.
func importCmd(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := newFlagSet("import", stderr)
	adminURL, tokenEnv := importFlags(fs)
	parsed := func(args []string) (code int, ok bool) {
		switch err := parse(fs, "import", args, stderr); {
		case errors.Is(err, flag.ErrHelp):
			commandHelp(stdout, "import")
			return 0, false
		case err != nil:
			return 2, false
		}
		return 0, true
	}
	if code, ok := parsed(args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "mcpgw import: missing FILE, the client config to read")
		commandHelp(stderr, "import")
		return 2
	}
	path := fs.Arg(0)
	// Flags may also follow FILE.
	if code, ok := parsed(fs.Args()[1:]); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw import: unexpected argument %q\n", fs.Arg(0))
		return 2
	}

	var endpoint, token string
	if *adminURL != "" {
		u, err := url.Parse(*adminURL)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			fmt.Fprintf(stderr, "mcpgw import: --admin-url %q is not an http:// or https:// URL of the gateway, such as http://127.0.0.1:8080\n", *adminURL)
			return 2
		}
		if u.User != nil {
			fmt.Fprintln(stderr, "mcpgw import: --admin-url must not hold a user or password; the admin token comes from --admin-token-env")
			return 2
		}
		endpoint = strings.TrimSuffix(u.String(), "/") + "/admin/servers"
		t, ok := lookupEnv(*tokenEnv)
		switch {
		case !ok || t == "":
			fmt.Fprintf(stderr, "mcpgw import: environment variable %s is not set; it must hold the admin token (--admin-token-env names another variable)\n", *tokenEnv)
			return 2
		case strings.ContainsFunc(t, unicode.IsControl):
			fmt.Fprintf(stderr, "mcpgw import: the admin token in %s contains a control character, such as a newline\n", *tokenEnv)
			return 2
		}
		token = t
	}

	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw:", err)
		return 2
	}
	entries, err := parseClientConfig(data)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgw: %s: %v\n", path, err)
		return 2
	}

	var servers []importedServer
	skipped := 0
	for _, e := range entries {
		s, reasons := e.convert()
		if len(reasons) > 0 {
			fmt.Fprintf(stderr, "skipped %q: %s\n", e.name, strings.Join(reasons, "; "))
			skipped++
			continue
		}
		s.Name = e.name
		servers = append(servers, s)
	}
	for _, r := range assignImportNames(servers) {
		fmt.Fprintf(stderr, "renamed %q to %q\n", r[0], r[1])
	}

	failed := 0
	if endpoint == "" {
		if err := writeServersYAML(stdout, servers); err != nil {
			fmt.Fprintln(stderr, "mcpgw:", err)
			return 1
		}
	} else {
		client := &http.Client{Timeout: 30 * time.Second}
		for _, s := range servers {
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "mcpgw: interrupted")
				return 1
			}
			if err := registerServer(ctx, client, endpoint, token, s, stdout); err != nil {
				fmt.Fprintln(stderr, err)
				failed++
			}
		}
	}
	switch {
	case skipped > 0 && failed > 0:
		fmt.Fprintf(stderr, "mcpgw: %d of %d servers skipped, %d not registered\n", skipped, len(entries), failed)
	case skipped > 0:
		fmt.Fprintf(stderr, "mcpgw: %d of %d servers skipped\n", skipped, len(entries))
	case failed > 0:
		fmt.Fprintf(stderr, "mcpgw: %d of %d servers not registered\n", failed, len(entries))
	default:
		return 0
	}
	return 1
}

// writeServersYAML prints servers as the "servers:" list of mcpgw's file.
func writeServersYAML(w io.Writer, servers []importedServer) error {
	if servers == nil {
		servers = []importedServer{} // "servers: []", still a valid file
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		Servers []importedServer `yaml:"servers"`
	}{servers}); err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// registerServer sends s to the admin API at endpoint and prints what became of
// it. Its error is the line to report; it never holds the token or the
// entry's values.
func registerServer(ctx context.Context, client *http.Client, endpoint, token string, s importedServer, stdout io.Writer) error {
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("server %q: %w", s.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("server %q: %w", s.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("server %q: %w", s.Name, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusCreated:
		fmt.Fprintln(stdout, "registered", s.Name)
		return nil
	case http.StatusOK:
		fmt.Fprintln(stdout, "updated", s.Name)
		return nil
	}
	return fmt.Errorf("server %q: %d %s", s.Name, resp.StatusCode, adminErrorMessage(resp.StatusCode, msg))
}

// adminErrorMessage is the message of an admin API error body, {"message": ...}
// (or {"error": ...}), made safe for a terminal; else the status text.
func adminErrorMessage(code int, body []byte) string {
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := e.Message
	if msg == "" {
		msg = e.Error
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	if len(msg) > 500 {
		msg = strings.ToValidUTF8(msg[:500], "") + "…"
	}
	if strings.TrimSpace(msg) == "" {
		return http.StatusText(code)
	}
	return msg
}

// clientEntry is one named server of a client config, not yet converted.
type clientEntry struct {
	name   string
	raw    json.RawMessage
	vscode bool // VS Code's format: ${...} are its variables
}

// parseClientConfig finds the servers of a Claude Desktop, Cursor or VS
// Code config, in the order of the file. VS Code's JSONC (comments,
// trailing commas) is accepted in every format.
func parseClientConfig(data []byte) ([]clientEntry, error) {
	data = stripJSONC(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, errors.New("the file is empty")
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := jsonPosition(data, se.Offset)
			return nil, fmt.Errorf("not JSON: line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
		}
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON object with \"mcpServers\" (Claude Desktop, Cursor) or \"servers\" (VS Code), not %s", jsonKind(v))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	var key string
	var section json.RawMessage
	vscode := false
	switch _, claude := top["mcpServers"]; {
	case claude && top["servers"] != nil:
		return nil, errors.New(`has both "mcpServers" (Claude Desktop, Cursor) and "servers" (VS Code); import one file of one format`)
	case claude:
		key, section = "mcpServers", raw["mcpServers"]
	case top["servers"] != nil:
		key, section, vscode = "servers", raw["servers"], true
	default:
		// VS Code's user settings.json keeps them under "mcp".
		mcp, _ := top["mcp"].(map[string]any)
		if mcp == nil || mcp["servers"] == nil {
			return nil, errors.New(`has no "mcpServers" (Claude Desktop, Cursor) or "servers" (VS Code) object`)
		}
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(raw["mcp"], &inner); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		key, section, vscode = "mcp.servers", inner["servers"], true
	}

	dec := json.NewDecoder(bytes.NewReader(section))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	if tok == nil { // null
		return nil, fmt.Errorf("no servers: %s is null", key)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		var v any
		_ = json.Unmarshal(section, &v)
		return nil, fmt.Errorf("%s must be an object of servers by name, not %s", key, jsonKind(v))
	}
	var entries []clientEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		entries = append(entries, clientEntry{name: name, raw: v, vscode: vscode})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("no servers: %s is empty", key)
	}
	return entries, nil
}

// jsonPosition is the 1-based line and column (in bytes) of offset in data,
// which encoding/json counts past the offending byte.
func jsonPosition(data []byte, offset int64) (line, col int) {
	off := min(max(int(offset)-1, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	col = off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// jsonKind names the kind of a decoded JSON value, for errors.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "a value"
}

// convert maps the entry onto mcpgw's keys, or says why it cannot. The
// reasons name keys, never values: env and headers hold secrets. The
// result has no name yet (assignImportNames).
func (e clientEntry) convert() (importedServer, []string) {
	var s importedServer
	var reasons []string
	fail := func(format string, args ...any) { reasons = append(reasons, fmt.Sprintf(format, args...)) }

	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(e.raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		var v any
		_ = json.Unmarshal(e.raw, &v)
		return s, []string{"is " + jsonKind(v) + ", not an object"}
	}
	str := func(key string) string {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return ""
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			fail("%s is not a string", key)
		}
		return v
	}
	typ := str("type")
	command := str("command")
	u := str("url")
	if u == "" && !e.vscode {
		u = str("serverUrl") // Windsurf's name for it
	}
	if _, ok := m["envFile"]; ok {
		fail("envFile: mcpgw does not read env files; copy the variables into env")
	}
	if len(reasons) > 0 {
		return s, reasons
	}

	switch typ {
	case "", "stdio", "http", "streamable-http", "sse":
	default:
		return s, []string{fmt.Sprintf("unknown type %q (want stdio, http, streamable-http or sse)", typ)}
	}
	switch {
	case command != "" && u != "":
		fail("has both command and url; an entry is either a command to run or a URL")
	case command == "" && u == "":
		fail("has neither command nor url")
	case command != "":
		if typ != "" && typ != "stdio" {
			fail("type %q needs a url, not a command", typ)
		}
		s.Transport = config.TransportStdio
	default:
		switch typ {
		case "stdio":
			fail(`type "stdio" needs a command, not a url`)
		case "sse":
			s.Transport = config.TransportSSE
		default:
			s.Transport = config.TransportHTTP
		}
	}

	vars := clientVariables{vscode: e.vscode, fail: fail}
	args := importStringList(m["args"], "args", fail)
	env := importStringMap(m["env"], "env", fail)
	headers := importStringMap(m["headers"], "headers", fail)
	cwd := str("cwd")
	if s.Transport == config.TransportStdio {
		if len(headers) > 0 {
			fail("headers are only for url servers")
		}
		s.Command = vars.value("command", command, false)
		for i, a := range args {
			s.Args = append(s.Args, vars.value(fmt.Sprintf("args[%d]", i), a, false))
		}
		s.Env = vars.values("env", env)
		s.Cwd = vars.value("cwd", cwd, false)
	} else if s.Transport != "" {
		for _, f := range []struct {
			key string
			set bool
		}{{"args", len(args) > 0}, {"env", len(env) > 0}, {"cwd", cwd != ""}} {
			if f.set {
				fail("%s is only for command servers, not url servers", f.key)
			}
		}
		s.URL = vars.value("url", u, true)
		s.Headers = vars.values("headers", headers)
	}
	if d, ok := m["disabled"]; ok && string(d) == "true" { // Cline, Windsurf
		off := false
		s.Enabled = &off
	}
	if len(reasons) > 0 {
		return s, reasons
	}
	for _, p := range checkImported(s) {
		fail("%s", p)
	}
	return s, reasons
}

// importStringList decodes raw as a list of strings; null or absent is none.
func importStringList(raw json.RawMessage, key string, fail func(string, ...any)) []string {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		fail("%s is not a list of strings", key)
		return nil
	}
	out := make([]string, len(list))
	for i, r := range list {
		if json.Unmarshal(r, &out[i]) != nil || string(r) == "null" {
			fail("%s[%d] is not a string", key, i)
		}
	}
	return out
}

// importStringMap decodes raw as an object of strings; null or absent is none.
func importStringMap(raw json.RawMessage, key string, fail func(string, ...any)) map[string]string {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil {
		fail("%s is not an object of strings", key)
		return nil
	}
	out := make(map[string]string, len(obj))
	for _, k := range importSortedKeys(obj) {
		var v string
		if json.Unmarshal(obj[k], &v) != nil || string(obj[k]) == "null" {
			fail("%s.%s is not a string", key, k)
		}
		out[k] = v
	}
	return out
}

// clientVariables rewrites a client's values for mcpgw, which expands ${VAR}
// (and $$ into $) in url, env and header values only.
type clientVariables struct {
	vscode bool
	fail   func(string, ...any)
}

// values rewrites every value of m, whose keys are key.<name>.
func (v clientVariables) values(key string, m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range importSortedKeys(m) {
		out[k] = v.value(key+"."+k, m[k], true)
	}
	return out
}

// value rewrites s, the value at key. A Claude Desktop or Cursor value is
// literal: where mcpgw expands (expands), each $ is written $$. In a VS Code
// value, ${env:NAME} becomes ${NAME} where mcpgw expands; any other ${...}
// is one of VS Code's variables, which mcpgw does not have.
func (v clientVariables) value(key, s string, expands bool) string {
	if !v.vscode {
		return escapeDollars(s, expands)
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		j := strings.IndexByte(s[max(i, 0):], '}')
		if i < 0 || j < 0 {
			break
		}
		b.WriteString(escapeDollars(s[:i], expands))
		ref := s[i+2 : i+j]
		s = s[i+j+1:]
		name, isEnv := strings.CutPrefix(ref, "env:")
		switch {
		case strings.HasPrefix(ref, "input:"):
			v.fail("%s: %s is a VS Code input, which mcpgw cannot prompt for; write the value, or ${VAR} to take it from mcpgw's environment", key, showClientVariable(ref))
		case isEnv && !config.ValidVarName(name):
			v.fail("%s: ${env:...} names no valid environment variable (letters, digits and _)", key)
		case isEnv && !expands:
			v.fail("%s: mcpgw expands ${VAR} only in url, env and headers, not in %s; write the value", key, strings.SplitN(key, "[", 2)[0])
		case isEnv:
			b.WriteString("${" + name + "}")
		default:
			v.fail("%s: the VS Code variable %s is not supported by mcpgw; write the value", key, showClientVariable(ref))
		}
	}
	b.WriteString(escapeDollars(s, expands))
	return b.String()
}

// escapeDollars writes each $ of a literal as $$ where mcpgw expands.
func escapeDollars(s string, expands bool) string {
	if expands {
		return strings.ReplaceAll(s, "$", "$$")
	}
	return s
}

// vscodeVariables are VS Code's predefined variables, which a report may
// name.
var vscodeVariables = map[string]bool{
	"workspaceFolder": true, "workspaceFolderBasename": true, "userHome": true,
	"cwd": true, "file": true, "fileWorkspaceFolder": true, "relativeFile": true,
	"relativeFileDirname": true, "fileBasename": true, "fileBasenameNoExtension": true,
	"fileExtname": true, "fileDirname": true, "fileDirnameBasename": true,
	"lineNumber": true, "selectedText": true, "execPath": true,
	"defaultBuildTask": true, "pathSeparator": true, "/": true,
	"extensionInstallFolder": true,
}

// showClientVariable names the VS Code variable ref (the text inside
// ${...}) for a report: in full for a predefined one and an input's id,
// by its prefix for config:..., command:... and workspaceFolder:..., and
// not at all otherwise, since the value it sits in may be a secret.
func showClientVariable(ref string) string {
	prefix, rest, colon := strings.Cut(ref, ":")
	switch {
	case !colon && vscodeVariables[ref]:
		return "${" + ref + "}"
	case prefix == "input" && rest != "" && len(rest) <= 64 && !strings.ContainsFunc(rest, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_-.", r))
	}):
		return "${" + ref + "}"
	case colon && (prefix == "config" || prefix == "command" || prefix == "workspaceFolder" || prefix == "input"):
		return "${" + prefix + ":...}"
	}
	return "${...}"
}

// checkImported holds s to the rules mcpgw applies to a file's entry
// (config.ValidateServer), apart from the name, which assignImportNames makes
// valid. The ${VAR} references are checked for form and stand in as
// "x", so that the check does not depend on this machine's environment;
// a url made of variables is not checked. The problems name keys only.
func checkImported(s importedServer) []string {
	var out []string
	placeholder := func(string) (string, bool) { return "x", true }
	expand := func(key, v string) string {
		x, err := config.Expand(v, placeholder)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", key, err))
		}
		return x
	}
	c := config.DefaultServer()
	c.Name = "x"
	c.Transport = s.Transport
	c.Command, c.Args, c.Cwd = s.Command, s.Args, s.Cwd
	c.Env = map[string]string{}
	for _, k := range importSortedKeys(s.Env) {
		c.Env[k] = expand("env."+k, s.Env[k])
	}
	c.Headers = map[string]string{}
	for _, k := range importSortedKeys(s.Headers) {
		c.Headers[k] = expand("headers."+k, s.Headers[k])
	}
	if c.URL = expand("url", s.URL); c.URL != strings.ReplaceAll(s.URL, "$$", "$") {
		c.URL = "https://example.com/" // built from variables: known only where mcpgw runs
	}
	for _, p := range config.ValidateServer(&c, "", config.Naming{}) {
		out = append(out, p.String())
	}
	return out
}

// maxImportName is the longest server name mcpgw takes.
const maxImportName = config.MaxServerNameLen

// importServerName makes a valid mcpgw server name of name: lower-cased, every
// run of other characters one "-", no "-" at either end, at most
// maxImportName long; "server" if nothing is left.
func importServerName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > maxImportName {
		out = strings.TrimRight(out[:maxImportName], "-")
	}
	if out == "" {
		return "server"
	}
	return out
}

// assignImportNames gives every server a valid, unique name, in place, and
// returns the renames as {from, to} in the order of servers. Names that
// are valid keep them (the first of each, if a name repeats); the others
// are converted by importServerName and numbered "-2", "-3", ... on collision.
func assignImportNames(servers []importedServer) [][2]string {
	used := map[string]bool{}
	keep := make([]bool, len(servers))
	for i, s := range servers {
		if config.ValidServerName(s.Name) && !used[s.Name] {
			used[s.Name], keep[i] = true, true
		}
	}
	var renames [][2]string
	for i := range servers {
		if keep[i] {
			continue
		}
		from := servers[i].Name
		base := importServerName(from)
		to := base
		for n := 2; used[to]; n++ {
			suffix := fmt.Sprintf("-%d", n)
			to = strings.TrimRight(base[:min(len(base), maxImportName-len(suffix))], "-") + suffix
		}
		used[to] = true
		servers[i].Name = to
		renames = append(renames, [2]string{from, to})
	}
	return renames
}

// stripJSONC turns JSONC, the JSON with comments of VS Code's files, into
// JSON: each // and /* */ comment outside strings and each comma that
// only white space separates from a closing } or ] becomes spaces
// (newlines stay, so lines and offsets do not move). JSON without them is
// returned unchanged. An unterminated block comment runs to the end.
func stripJSONC(src []byte) []byte {
	out := bytes.Clone(src)
	for i := 0; i < len(out); {
		switch {
		case out[i] == '"':
			i = skipJSONString(out, i)
		case out[i] == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case out[i] == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i += 2
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		default:
			i++
		}
	}
	for i := 0; i < len(out); {
		switch out[i] {
		case '"':
			i = skipJSONString(out, i)
		case ',':
			j := i + 1
			for j < len(out) && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// skipJSONString returns the index just past the JSON string that starts at
// b[i] (a '"'), or len(b) if it does not end.
func skipJSONString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// importSortedKeys returns m's keys in order, for stable reports.
func importSortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
