package config

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzSecret is the value of every variable FuzzParse sets; no problem may
// show it.
const fuzzSecret = "zq7-fuzz-secret-9f2"

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("servers: [{name: a, transport: stdio, command: x, env: {A: '${X}'}}]"))
	f.Add([]byte("sessions: &a {<<: *a, max: 5}"))
	f.Add([]byte("store: {driver: postgres, dsn: 'postgres://u:${PGPASS}@h/db', max_conns: 5}"))
	f.Add([]byte("store: {driver: sqlite, path: a.db, dsn: '${UNSET_X}'}\ndatabase: {path: b.db}"))
	f.Add([]byte("servers:\n - &s {name: a, transport: http, url: 'https://${X}'}\n - {<<: *s, name: b}\n"))
	f.Add([]byte("naming: {prefix: gw, separator: '-', max_length: 16}\npage_size: 5\nservers: [{name: a, transport: stdio, command: x, naming: {prefix_mode: never}, tools: {allow: ['r*', '[a-'], rename: {x: y, z: y}, describe: {x: ''}}}]"))
	f.Add([]byte("admin: {stdio_commands: [npx, {command: /bin/x, args: ['-y', '@a/s-*', '**']}, {command: ./x}, [y], {args: ['[a-']}], stdio_env: [K, NODE_OPTIONS, path]}"))
	f.Add([]byte("input_timeout: 1h\nresume_window: 1ns\nservers: [{name: a, transport: stdio, command: x, session_mode: per_session, protocol: modern, single_user: true, pool: {max: 1, idle_timeout: 1s}, restart: {max_attempts: -1, initial_backoff: 2s, max_backoff: 1s}, roots: [{uri: 'file:///a'}, {uri: 'file://h'}, {name: x}]}]"))

	lookupEnv := func(name string) (string, bool) {
		if strings.HasPrefix(name, "UNSET") {
			return "", false
		}
		return fuzzSecret, true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ps := Parse(data, lookupEnv)
		if c == nil {
			t.Fatal("Parse returned a nil Config")
		}
		if !strings.Contains(string(data), fuzzSecret) {
			for _, p := range ps {
				if strings.Contains(p.String(), fuzzSecret) {
					t.Errorf("problem shows a variable's value: %v", p)
				}
			}
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, p := range ps {
			if p.Line < 0 || p.Line > lines+1 || p.Column < 0 || p.Line == 0 && p.Column != 0 {
				t.Errorf("problem at line %d, column %d of a file of %d lines: %v", p.Line, p.Column, lines, p)
			}
		}
		if len(ps) > 0 {
			return
		}
		if again := c.validate(); again != nil {
			t.Errorf("Parse found no problem, but validate finds:\n%v", again)
		}
		for _, sc := range c.Admin.StdioCommands {
			if strings.TrimSpace(sc.Command) == "" || !path.IsAbs(sc.Command) && strings.Contains(sc.Command, "/") {
				t.Errorf("Parse accepted the stdio command %q", sc.Command)
			}
			for i, p := range sc.Args {
				if _, err := path.Match(p, ""); err != nil || p == "**" && i < len(sc.Args)-1 {
					t.Errorf("Parse accepted the argument patterns %q", sc.Args)
				}
			}
		}
		for _, name := range c.Admin.StdioEnv {
			if _, never := NeverPassed(name); never || !ValidVarName(name) {
				t.Errorf("Parse accepted %q in admin.stdio_env", name)
			}
		}
		for _, dir := range c.Admin.StdioCwd {
			if !filepath.IsAbs(dir) {
				t.Errorf("Parse accepted %q in admin.stdio_cwd", dir)
			}
		}
		if n := c.Naming; !prefixRE.MatchString(n.Prefix) || !separatorRE.MatchString(n.Separator) || n.MaxLength < 16 || n.MaxLength > 128 {
			t.Errorf("Parse accepted naming %+v", n)
		}
		if c.PageSize < 0 || c.PageSize > 10000 || c.ListChangedDebounce <= 0 || c.ListChangedDebounce > Duration(time.Minute) {
			t.Errorf("Parse accepted page_size %d, list_changed_debounce %v", c.PageSize, c.ListChangedDebounce)
		}
		for _, d := range []Duration{c.InputTimeout, c.ResumeWindow, c.StreamAfter} {
			if d <= 0 || d > Duration(time.Hour) {
				t.Errorf("Parse accepted input_timeout %v, resume_window %v, stream_after %v", c.InputTimeout, c.ResumeWindow, c.StreamAfter)
			}
		}
		for _, s := range c.Servers {
			if !validName(s.Name) {
				t.Errorf("Parse accepted the server name %q", s.Name)
			}
			for _, p := range append(s.Tools.Allow, s.Tools.Deny...) {
				if _, err := path.Match(p, ""); err != nil {
					t.Errorf("Parse accepted the glob %q", p)
				}
				s.Tools.Visible(p)
			}
			exposed := map[string]bool{}
			for k, v := range s.Tools.Rename {
				if k == "" || !toolNameRE.MatchString(v) || len(v) > c.Naming.MaxLength || exposed[v] {
					t.Errorf("Parse accepted the rename %q: %q", k, v)
				}
				exposed[v] = true
			}
			// Parse fills the defaults: no zero session_mode or max_attempts.
			switch s.SessionMode {
			case "shared":
			case "per_principal", "per_session":
				if s.SingleUser {
					t.Errorf("Parse accepted single_user with session_mode %q", s.SessionMode)
				}
			default:
				t.Errorf("Parse accepted the session_mode %q", s.SessionMode)
			}
			switch s.Protocol {
			case "auto", "legacy":
			case "modern":
				if s.Transport == "sse" {
					t.Errorf("Parse accepted protocol modern over sse")
				}
			default:
				t.Errorf("Parse accepted the protocol %q", s.Protocol)
			}
			if p := s.Pool; p.Max < 1 || p.Max > 10000 || p.IdleTimeout <= 0 {
				t.Errorf("Parse accepted the pool %+v", p)
			}
			if r := s.Restart; r.MaxAttempts < -1 || r.MaxAttempts == 0 || r.InitialBackoff <= 0 || r.InitialBackoff > r.MaxBackoff {
				t.Errorf("Parse accepted the restart %+v", r)
			}
			for _, r := range s.Roots {
				if u, err := url.Parse(r.URI); err != nil || !strings.EqualFold(u.Scheme, "file") || !strings.HasPrefix(strings.ToLower(r.URI), "file://") || u.Path == "" {
					t.Errorf("Parse accepted the root %q", r.URI)
				}
			}
		}
	})
}

// The rules of the naming keys, written independently of validate.go.
var (
	prefixRE    = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)
	separatorRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,4}$`)
	toolNameRE  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// validName is the name rule, written independently of ValidateServer.
func validName(name string) bool {
	if name == "" || len(name) > 32 || strings.Contains(name, "__") {
		return false
	}
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "plain", "${A}", "${A:-b}", "$$", "${", "${1X}", "$", "a$b${C}d", "${UNSET:-x}${UNSET}", "${A:-${B}}"} {
		f.Add(s)
	}
	lookupEnv := func(name string) (string, bool) {
		if strings.HasPrefix(name, "UNSET") {
			return "", false
		}
		return "<" + name + ">", true
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Expand(s, lookupEnv)
		if err != nil && got != "" {
			t.Errorf("Expand(%q) = %q with an error; want \"\"", s, got)
		}
		if !strings.Contains(s, "$") && (got != s || err != nil) {
			t.Errorf("Expand(%q) = %q, %v; want it unchanged", s, got, err)
		}
		// Escaping every "$" makes any string expand to itself.
		escaped := strings.ReplaceAll(s, "$", "$$")
		if got, err := Expand(escaped, lookupEnv); got != s || err != nil {
			t.Errorf("Expand(%q) = %q, %v; want %q", escaped, got, err, s)
		}
		// A reference to a set variable is replaced by its value.
		if got, err := Expand(escaped+"${V}", lookupEnv); got != s+"<V>" || err != nil {
			t.Errorf("Expand(%q) = %q, %v; want %q", escaped+"${V}", got, err, s+"<V>")
		}
	})
}

// fuzzArg is an argument FuzzCheckRegistration adds; no message may show
// it.
const fuzzArg = "zq7-fuzz-arg-41c"

func FuzzCheckRegistration(f *testing.F) {
	f.Add("-y\x00@scope/server-*", "-y\x00@scope/server-x", "NODE_OPTIONS", "")
	f.Add("**", "a\x00b", "K", "/srv/mcp")
	f.Add("", "", "", "/srv/mcp/")
	f.Add("[a-\x00**\x00*", "x", "ld_preload", "/srv/mcp/..")
	f.Add("\\*\x00?", "*\x00/", "GOFLAGS", "srv/mcp")
	f.Fuzz(func(t *testing.T, patterns, args, name, cwd string) {
		sc := StdioCommand{Command: "cmd", Args: strings.Split(patterns, "\x00")}
		if patterns == "" {
			sc.Args = nil
		}
		argv := strings.Split(args, "\x00")
		const allowedCwd = "/srv/mcp"
		a := Admin{StdioCommands: []StdioCommand{sc}, StdioEnv: []string{name}, StdioCwd: []string{allowedCwd}}
		srv := Server{Transport: TransportStdio, Command: "cmd", Args: append(argv, fuzzArg), Env: map[string]string{name: fuzzSecret}, Cwd: cwd}
		ps := a.CheckRegistration(&srv)
		// The working directory is one the operator listed, or none.
		if refused := slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == "cwd" }); refused != (cwd != "" && filepath.Clean(cwd) != allowedCwd) {
			t.Errorf("cwd %q: CheckRegistration's problems are %v", cwd, ps)
		}
		if strings.Contains(patterns, fuzzArg) || strings.Contains(patterns, fuzzSecret) || strings.Contains(name, fuzzSecret) || strings.Contains(name, fuzzArg) {
			return
		}
		for _, p := range ps {
			if strings.Contains(p.String(), fuzzSecret) || strings.Contains(p.String(), fuzzArg) {
				t.Errorf("problem shows an argument or a value: %v", p)
			}
		}
		allowed := sc.Allows(srv.Args)
		if refused := slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == "args" }); refused == allowed {
			t.Errorf("Allows(%q) = %t, but CheckRegistration's problems are %v", srv.Args, allowed, ps)
		}
		if _, never := NeverPassed(name); never != slices.ContainsFunc(ps, func(p Problem) bool { return strings.Contains(p.Message, "is never passed") }) {
			t.Errorf("NeverPassed(%q) = %t, but CheckRegistration's problems are %v", name, never, ps)
		}
		// Without a last "**", one argument more never matches; with one,
		// it matches whenever the arguments before it did.
		rest := len(sc.Args) > 0 && sc.Args[len(sc.Args)-1] == "**"
		if more := sc.Allows(append(slices.Clip(srv.Args), "x")); allowed && more != rest {
			t.Errorf("Allows(%q) = true and with one argument more %t; want %t (rest pattern %t)", srv.Args, more, rest, rest)
		}
	})
}

// FuzzParentPath checks that parentPath undoes join for any keys, which
// come from the file.
func FuzzParentPath(f *testing.F) {
	for _, k := range [][2]string{{"a", "b"}, {"env", "odd key"}, {`x"][0`, "]"}, {"a.b", `["c"]`}, {"", "[1]"}} {
		f.Add(k[0], k[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		pa := join("", a)
		if got := parentPath(pa); got != "" {
			t.Errorf("parentPath(%q) = %q, want \"\"", pa, got)
		}
		if got := parentPath(join(pa, b)); got != pa {
			t.Errorf("parentPath(%q) = %q, want %q", join(pa, b), got, pa)
		}
		if got := parentPath(pa + "[3]"); got != pa {
			t.Errorf("parentPath(%q) = %q, want %q", pa+"[3]", got, pa)
		}
	})
}
