package config

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// What a stdio server registered through the admin API may run and be
// given. An admin token must not become a way to run a program of its
// own: it may start only a command the operator listed, with arguments
// the command's entry allows, in a working directory the operator listed
// (or the gateway's), and set only variables the operator listed that are
// not one of the hooks below, which make a program load code that it
// names. Servers of the config file are the operator's and are not
// limited.

// StdioCommand is one entry of admin.stdio_commands: a command a stdio
// server registered through the admin API may run, and the arguments it
// may be given. A file writes it as the command alone ("npx"), which
// allows no arguments, or as {command, args}.
type StdioCommand struct {
	// Command is the command, matched exactly: a name looked up on the
	// gateway's PATH or an absolute path.
	Command string `yaml:"command"`
	// Args are patterns, one per argument, in path.Match syntax (*, ?,
	// [a-z], \ to escape; * and ? do not match "/"). A registration's
	// arguments match when there are as many and each matches its
	// pattern; a last pattern "**" matches all the arguments that are
	// left, any number, none included. Empty: no arguments.
	Args []string `yaml:"args"`
}

// setScalar reads the short form of an entry: the command alone.
func (sc *StdioCommand) setScalar(s string) { *sc = StdioCommand{Command: s} }

func (*StdioCommand) forms() string { return "a command, or a mapping with command and args" }

// restPattern, as the last of StdioCommand.Args, matches the arguments
// that are left.
const restPattern = "**"

// Allows reports whether a registration may run sc's command with args.
func (sc StdioCommand) Allows(args []string) bool {
	pats := sc.Args
	rest := len(pats) > 0 && pats[len(pats)-1] == restPattern
	if rest {
		pats = pats[:len(pats)-1]
	}
	if len(args) < len(pats) || !rest && len(args) > len(pats) {
		return false
	}
	for i, p := range pats {
		if ok, err := path.Match(p, args[i]); !ok || err != nil {
			return false
		}
	}
	return true
}

// String returns the entry as a command line: "npx -y @scope/server-*".
func (sc StdioCommand) String() string {
	return strings.Join(append([]string{sc.Command}, sc.Args...), " ")
}

// checkArgPattern returns what is wrong with the argument pattern p, the
// last of its entry's if last, or "".
func checkArgPattern(p string, last bool) string {
	if p == restPattern && !last {
		return `"**" must be the last pattern: it matches all the arguments that are left`
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Sprintf(`%q is not a valid pattern (path.Match syntax: *, ?, [a-z] and \ to escape)`, p)
	}
	return ""
}

// envRule is a name, or a family of names, of NeverPassed's list.
type envRule struct {
	show  string                  // as the README lists it
	match func(upper string) bool // on the name in upper case
}

func exact(name string) envRule {
	return envRule{name, func(u string) bool { return u == name }}
}

// prefix matches the names that start with p ("LD_" for LD_*).
func prefix(p string) envRule {
	return envRule{p + "*", func(u string) bool { return strings.HasPrefix(u, p) }}
}

// neverPassed is the list of NeverPassed, by family, each with why. Names
// are compared in upper case: npm reads npm_config_* in any case, and no
// server needs a lower-case twin of a hook.
var neverPassed = []struct {
	why   string
	rules []envRule
}{{
	why: "the dynamic loader and the C library load code or data from the files it names",
	rules: []envRule{prefix("LD_"), prefix("DYLD_"), exact("GCONV_PATH"), exact("GETCONF_DIR"), exact("GLIBC_TUNABLES"),
		exact("HOSTALIASES"), exact("LOCALDOMAIN"), exact("LOCPATH"), exact("MALLOC_TRACE"), exact("NIS_PATH"), exact("NLSPATH"),
		exact("RESOLV_HOST_CONF"), exact("RES_OPTIONS"), exact("TZDIR")},
}, {
	why: "it chooses which program runs, or where programs find their configuration; the gateway sets PATH, HOME and TMPDIR itself",
	rules: []envRule{exact("PATH"), exact("HOME"), exact("TMPDIR"), prefix("XDG_"), exact("SHELL"), exact("EDITOR"),
		exact("VISUAL"), exact("PAGER"), exact("BROWSER"), exact("SSH_ASKPASS"), exact("SUDO_ASKPASS")},
}, {
	why: "a shell runs code from it, or from the file it names",
	rules: []envRule{exact("BASH_ENV"), exact("ENV"), prefix("BASH_FUNC_"), exact("SHELLOPTS"), exact("BASHOPTS"), exact("PS4"),
		exact("IFS"), exact("CDPATH"), exact("GLOBIGNORE"), exact("ZDOTDIR")},
}, {
	why:   "Node.js, npm, npx and the other JavaScript runtimes and package managers load code or packages it names",
	rules: []envRule{prefix("NODE_"), prefix("NPM_CONFIG_"), prefix("YARN_"), prefix("COREPACK_"), prefix("BUN_"), prefix("DENO_")},
}, {
	why:   "Python, pip, pipx, uv and uvx load code or packages it names",
	rules: []envRule{prefix("PYTHON"), prefix("PIP_"), prefix("PIPX_"), prefix("UV_"), exact("VIRTUAL_ENV")},
}, {
	why: "Perl, Ruby, Lua and PHP load code it names",
	rules: []envRule{prefix("PERL"), prefix("RUBY"), prefix("GEM_"), prefix("BUNDLE_"), prefix("LUA_"), exact("PHPRC"),
		exact("PHP_INI_SCAN_DIR")},
}, {
	why: "the JVM and .NET load agents, classes or assemblies it names",
	rules: []envRule{prefix("JAVA_"), exact("_JAVA_OPTIONS"), exact("JDK_JAVA_OPTIONS"), exact("CLASSPATH"), exact("MAVEN_OPTS"),
		exact("GRADLE_OPTS"), prefix("DOTNET_"), prefix("CORECLR_"), prefix("COMPLUS_")},
}, {
	why: "toolchains that build and run a server (go run, cargo run) run the programs and fetch the code it names",
	rules: []envRule{
		// GOFLAGS, GOPROXY, GOTOOLCHAIN... but not GOOGLE_API_KEY.
		{"GO* without _", func(u string) bool { return len(u) > 2 && strings.HasPrefix(u, "GO") && !strings.Contains(u, "_") }},
		prefix("CGO_"), exact("CC"), exact("CXX"), prefix("CARGO_"), prefix("RUSTC"), prefix("RUSTUP_")},
}, {
	why:   "git runs the programs and hooks it names",
	rules: []envRule{prefix("GIT_")},
}, {
	why:   "OpenSSL loads the engines and providers its configuration names",
	rules: []envRule{prefix("OPENSSL_")},
}, {
	why:   "the docker CLI runs the credential helpers and plugins its configuration names",
	rules: []envRule{prefix("DOCKER_")},
}}

// NeverPassed reports whether the variable name is one a stdio server
// registered through the admin API is never given, even when
// admin.stdio_env lists it, and why: a hook of the dynamic loader, a
// shell, an interpreter or a package manager that makes the program load
// code it names, or a variable that chooses which program runs.
func NeverPassed(name string) (why string, never bool) {
	u := strings.ToUpper(name)
	for _, f := range neverPassed {
		for _, r := range f.rules {
			if r.match(u) {
				return f.why, true
			}
		}
	}
	return "", false
}

// CheckRegistration returns why the admin API may not register s (nil if
// it may): a stdio server must run a command of a.StdioCommands with
// arguments one of that command's entries allows, may set only variables
// of a.StdioEnv that NeverPassed does not refuse, and may give as its cwd
// only a directory of a.StdioCwd. Servers of other transports pass. The
// problems' paths are the entry's own keys ("command", "args", "cwd",
// "env.NODE_OPTIONS"); their messages read after the key, but that of
// "args", which names the argument by its position, and show neither the
// arguments, the cwd nor a variable's value.
func (a *Admin) CheckRegistration(s *Server) Problems {
	if s.Transport != TransportStdio {
		return nil
	}
	var ps Problems
	var entries []int
	for i, sc := range a.StdioCommands {
		if sc.Command == s.Command {
			entries = append(entries, i)
		}
	}
	switch {
	case len(a.StdioCommands) == 0:
		ps = append(ps, Problem{Path: "command", Message: "is not in admin.stdio_commands, which lists none: the admin API registers no stdio server"})
	case len(entries) == 0:
		ps = append(ps, Problem{Path: "command", Message: "is not in admin.stdio_commands, the commands a stdio server registered through the admin API may run"})
	case !slices.ContainsFunc(entries, func(i int) bool { return a.StdioCommands[i].Allows(s.Args) }):
		ps = append(ps, Problem{Path: "args", Message: whyNotAllowed(a.StdioCommands, entries, s.Args)})
	}
	if s.Cwd != "" && !a.allowsCwd(s.Cwd) {
		msg := "is not in admin.stdio_cwd, the working directories a stdio server registered through the admin API may use"
		if len(a.StdioCwd) == 0 {
			msg = "is not in admin.stdio_cwd, which lists none: a stdio server registered through the admin API cannot choose its working directory"
		}
		ps = append(ps, Problem{Path: "cwd", Message: msg})
	}
	for _, k := range sortedKeys(s.Env) {
		if why, never := NeverPassed(k); never {
			ps = append(ps, Problem{Path: join("env", k), Message: "is never passed to a stdio server registered through the admin API: " + why})
		} else if !slices.Contains(a.StdioEnv, k) {
			msg := "is not in admin.stdio_env, the variables a stdio server registered through the admin API may be given"
			if len(a.StdioEnv) == 0 {
				msg = "is not in admin.stdio_env, which lists none: a stdio server registered through the admin API is given no variables"
			}
			ps = append(ps, Problem{Path: join("env", k), Message: msg})
		}
	}
	return ps
}

// allowsCwd reports whether a registration may start in dir: an absolute
// path that is, cleaned, a directory of a.StdioCwd, cleaned. A directory a
// registration could write to or point into (a subdirectory, "..") would
// let it plant what npx, uv or python run from their working directory.
func (a *Admin) allowsCwd(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	dir = filepath.Clean(dir)
	return slices.ContainsFunc(a.StdioCwd, func(d string) bool { return filepath.Clean(d) == dir })
}

// maxEntriesShown bounds the entries a refusal of arguments names.
const maxEntriesShown = 4

// whyNotAllowed says why none of the entries at idx of cmds allows args:
// for each, the position of the first argument that fails and the
// entry's pattern there, or the count the entry takes. It names
// positions only: arguments often hold keys (--api-key=...), and the
// operator's patterns are no secret.
func whyNotAllowed(cmds []StdioCommand, idx []int, args []string) string {
	var parts []string
	for _, i := range idx[:min(len(idx), maxEntriesShown)] {
		parts = append(parts, cmds[i].mismatch(fmt.Sprintf("admin.stdio_commands[%d]", i), args))
	}
	out := strings.Join(parts, "; ")
	if n := len(idx) - maxEntriesShown; n > 0 {
		out += fmt.Sprintf("; and %d more entries of %s", n, cmds[idx[0]].Command)
	}
	return out
}

// mismatch says why sc, the entry called name, does not allow args: the
// first argument that does not match its pattern, else the one that is
// missing or too many (Allows is false).
func (sc StdioCommand) mismatch(name string, args []string) string {
	pats := sc.Args
	rest := len(pats) > 0 && pats[len(pats)-1] == restPattern
	if rest {
		pats = pats[:len(pats)-1]
	}
	for j := range min(len(pats), len(args)) {
		if ok, err := path.Match(pats[j], args[j]); !ok || err != nil {
			return fmt.Sprintf("argument %d does not match %s (%s: pattern %d is %q)", j+1, name, sc.Command, j+1, pats[j])
		}
	}
	takes := "takes "
	if rest {
		takes += "at least "
	}
	takes += fmt.Sprintf("%d argument", len(pats))
	if len(pats) != 1 {
		takes += "s"
	}
	switch {
	case len(args) < len(pats):
		return fmt.Sprintf("argument %d is missing: %s (%s) %s", len(args)+1, name, sc, takes)
	case len(sc.Args) == 0:
		return fmt.Sprintf("argument 1 is not allowed: %s (%s) allows no arguments", name, sc)
	default:
		return fmt.Sprintf("argument %d is not allowed: %s (%s) %s", len(pats)+1, name, sc, takes)
	}
}
