package config

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestStdioCommand_Allows(t *testing.T) {
	npx := StdioCommand{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-*"}}
	fs := StdioCommand{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "**"}}
	tests := []struct {
		name string
		sc   StdioCommand
		args []string
		want bool
	}{
		{"plain, none", StdioCommand{Command: "node"}, nil, true},
		{"plain, empty list", StdioCommand{Command: "node"}, []string{}, true},
		{"plain, one", StdioCommand{Command: "node"}, []string{"server.js"}, false},
		{"plain, node -e", StdioCommand{Command: "node"}, []string{"-e", "1"}, false},
		{"pattern, match", npx, []string{"-y", "@modelcontextprotocol/server-memory"}, true},
		{"pattern, other package", npx, []string{"-y", "evil-package"}, false},
		{"pattern, * does not cross /", npx, []string{"-y", "@modelcontextprotocol/server-x/../../evil"}, false},
		{"pattern, one fewer", npx, []string{"-y"}, false},
		{"pattern, one more", npx, []string{"-y", "@modelcontextprotocol/server-memory", "-c"}, false},
		{"pattern, swapped", npx, []string{"@modelcontextprotocol/server-memory", "-y"}, false},
		{"pattern, none", npx, nil, false},
		{"literal is exact", StdioCommand{Command: "x", Args: []string{"-y"}}, []string{"-yes"}, false},
		{"escaped *", StdioCommand{Command: "x", Args: []string{`\*`}}, []string{"*"}, true},
		{"escaped * is not a wildcard", StdioCommand{Command: "x", Args: []string{`\*`}}, []string{"a"}, false},
		{"empty pattern, empty argument", StdioCommand{Command: "x", Args: []string{""}}, []string{""}, true},
		{"empty pattern, an argument", StdioCommand{Command: "x", Args: []string{""}}, []string{"a"}, false},
		{"class", StdioCommand{Command: "x", Args: []string{"--level=[0-9]"}}, []string{"--level=3"}, true},
		{"rest, none left", fs, []string{"-y", "@modelcontextprotocol/server-filesystem"}, true},
		{"rest, some left", fs, []string{"-y", "@modelcontextprotocol/server-filesystem", "/a", "/b/c"}, true},
		{"rest, the fixed part differs", fs, []string{"-y", "@modelcontextprotocol/server-everything", "/a"}, false},
		{"rest, too few", fs, []string{"-y"}, false},
		{"rest alone", StdioCommand{Command: "x", Args: []string{"**"}}, []string{"anything", "--at=all"}, true},
		{"a bad pattern matches nothing", StdioCommand{Command: "x", Args: []string{"[a-"}}, []string{"[a-"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sc.Allows(tt.args); got != tt.want {
				t.Errorf("%v.Allows(%q) = %t, want %t", tt.sc, tt.args, got, tt.want)
			}
		})
	}
}

func TestNeverPassed(t *testing.T) {
	never := []string{
		// The dynamic loader (glibc, musl, macOS) and the C library.
		"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "GLIBC_TUNABLES",
		"LOCPATH", "NLSPATH", "MALLOC_TRACE", "HOSTALIASES", "RES_OPTIONS",
		// Which program runs, where configuration is read.
		"PATH", "HOME", "TMPDIR", "XDG_CONFIG_HOME", "SHELL", "EDITOR", "BROWSER", "SSH_ASKPASS",
		// Shells.
		"BASH_ENV", "ENV", "BASH_FUNC_ls%%", "SHELLOPTS", "PS4", "IFS", "ZDOTDIR",
		// Node.js and its package managers; npm reads npm_config_* in any case.
		"NODE_OPTIONS", "NODE_PATH", "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED", "npm_config_script_shell",
		"NPM_CONFIG_REGISTRY", "Npm_Config_Node_Options", "YARN_RC_FILENAME", "COREPACK_NPM_REGISTRY", "BUN_CONFIG_REGISTRY", "DENO_DIR",
		// Python and its installers.
		"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONUSERBASE", "PIP_INDEX_URL", "UV_INDEX_URL", "PIPX_HOME", "VIRTUAL_ENV",
		// Perl, Ruby, Lua, PHP.
		"PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "GEM_PATH", "BUNDLE_GEMFILE", "LUA_INIT", "PHPRC",
		// JVM and .NET.
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_HOME", "CLASSPATH", "DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH", "COMPlus_EnableDiagnostics",
		// Toolchains.
		"GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "CGO_LDFLAGS", "CC", "RUSTC_WRAPPER", "CARGO_HOME",
		// git, OpenSSL, docker.
		"GIT_SSH_COMMAND", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_EXEC_PATH", "OPENSSL_CONF", "DOCKER_CONFIG",
	}
	for _, name := range never {
		if why, ok := NeverPassed(name); !ok || why == "" {
			t.Errorf("NeverPassed(%q) = %q, %t; want a reason, true", name, why, ok)
		}
	}
	passed := []string{
		"GITHUB_TOKEN", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS_JSON", "BRAVE_API_KEY", "API_KEY", "LOG_LEVEL",
		"ENVIRONMENT", "HOMEPAGE_URL", "PATHS_ALLOWED", "NODEJS_NAME", "LANG", "LC_ALL", "TZ", "MALLOC_ARENA_MAX",
		"GO", "CCX", "OPENAI_API_KEY", "SLACK_BOT_TOKEN", "DATABASE_URL",
	}
	for _, name := range passed {
		if why, ok := NeverPassed(name); ok {
			t.Errorf("NeverPassed(%q) = %q, true; want false", name, why)
		}
	}
}

// TestNeverPassed_README: the README lists every name of the list.
func TestNeverPassed_README(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range neverPassed {
		for _, r := range f.rules {
			if !strings.Contains(string(b), "`"+r.show+"`") {
				t.Errorf("the README does not list `%s` (%s)", r.show, f.why)
			}
		}
	}
}

func TestAdmin_CheckRegistration(t *testing.T) {
	rules := Admin{
		StdioCommands: []StdioCommand{
			{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-*"}},
			{Command: "node"},
			{Command: "npx", Args: []string{"-y", "@acme/mcp", "**"}},
		},
		StdioEnv: []string{"GITHUB_TOKEN", "NODE_OPTIONS"}, // Validate refuses the second; this must too
	}
	stdio := func(cmd string, args []string, env map[string]string) Server {
		return Server{Name: "x", Transport: TransportStdio, Command: cmd, Args: args, Env: env}
	}
	withCwd := func(s Server, cwd string) Server { s.Cwd = cwd; return s }
	cwdRules := rules
	cwdRules.StdioCwd = []string{"/srv/mcp", "/srv/data/"}
	const notInCwd = "is not in admin.stdio_cwd, the working directories a stdio server registered through the admin API may use"
	tests := []struct {
		name  string
		rules Admin
		srv   Server
		want  Problems
	}{{
		name: "http", rules: Admin{}, srv: Server{Name: "x", Transport: TransportHTTP, URL: "https://x.example/mcp"},
	}, {
		name: "no commands", rules: Admin{}, srv: stdio("npx", nil, nil),
		want: Problems{{Path: "command", Message: "is not in admin.stdio_commands, which lists none: the admin API registers no stdio server"}},
	}, {
		name: "another command", rules: rules, srv: stdio("/bin/sh", []string{"-c", "id"}, map[string]string{"LD_PRELOAD": "x"}),
		want: Problems{
			{Path: "command", Message: "is not in admin.stdio_commands, the commands a stdio server registered through the admin API may run"},
			{Path: "env.LD_PRELOAD", Message: "is never passed to a stdio server registered through the admin API: the dynamic loader and the C library load code or data from the files it names"},
		},
	}, {
		name: "a match", rules: rules, srv: stdio("npx", []string{"-y", "@modelcontextprotocol/server-memory"}, map[string]string{"GITHUB_TOKEN": "t"}),
	}, {
		name: "a match of the second entry", rules: rules, srv: stdio("npx", []string{"-y", "@acme/mcp", "--root", "/srv"}, nil),
	}, {
		name: "a plain command", rules: rules, srv: stdio("node", nil, nil),
	}, {
		name: "no match", rules: rules, srv: stdio("npx", []string{"-y", "evil"}, nil),
		want: Problems{{Path: "args", Message: `argument 2 does not match admin.stdio_commands[0] (npx: pattern 2 is "@modelcontextprotocol/server-*"); ` +
			`argument 2 does not match admin.stdio_commands[2] (npx: pattern 2 is "@acme/mcp")`}},
	}, {
		name: "a secret in the failing argument", rules: rules, srv: stdio("npx", []string{"--api-key=sk-live-5ecret", "@modelcontextprotocol/server-memory"}, nil),
		want: Problems{{Path: "args", Message: `argument 1 does not match admin.stdio_commands[0] (npx: pattern 1 is "-y"); ` +
			`argument 1 does not match admin.stdio_commands[2] (npx: pattern 1 is "-y")`}},
	}, {
		name: "a secret in an argument too many", rules: rules, srv: stdio("npx", []string{"-y", "@modelcontextprotocol/server-memory", "--api-key=sk-live-5ecret"}, nil),
		want: Problems{{Path: "args", Message: `argument 3 is not allowed: admin.stdio_commands[0] (npx -y @modelcontextprotocol/server-*) takes 2 arguments; ` +
			`argument 2 does not match admin.stdio_commands[2] (npx: pattern 2 is "@acme/mcp")`}},
	}, {
		name: "too few", rules: rules, srv: stdio("npx", []string{"-y"}, nil),
		want: Problems{{Path: "args", Message: `argument 2 is missing: admin.stdio_commands[0] (npx -y @modelcontextprotocol/server-*) takes 2 arguments; ` +
			`argument 2 is missing: admin.stdio_commands[2] (npx -y @acme/mcp **) takes at least 2 arguments`}},
	}, {
		name: "one argument too many", rules: Admin{StdioCommands: []StdioCommand{{Command: "uvx", Args: []string{"mcp-*"}}}},
		srv:  stdio("uvx", []string{"mcp-news", "--verbose"}, nil),
		want: Problems{{Path: "args", Message: "argument 2 is not allowed: admin.stdio_commands[0] (uvx mcp-*) takes 1 argument"}},
	}, {
		name: "node -e", rules: rules, srv: stdio("node", []string{"-e", "1"}, nil),
		want: Problems{{Path: "args", Message: "argument 1 is not allowed: admin.stdio_commands[1] (node) allows no arguments"}},
	}, {
		name: "env", rules: rules, srv: stdio("node", nil, map[string]string{"NODE_OPTIONS": "--require=/x.js", "K": "v", "GITHUB_TOKEN": "t"}),
		want: Problems{
			{Path: "env.K", Message: "is not in admin.stdio_env, the variables a stdio server registered through the admin API may be given"},
			{Path: "env.NODE_OPTIONS", Message: "is never passed to a stdio server registered through the admin API: Node.js, npm, npx and the other JavaScript runtimes and package managers load code or packages it names"},
		},
	}, {
		name: "env, none allowed", rules: Admin{StdioCommands: []StdioCommand{{Command: "node"}}}, srv: stdio("node", nil, map[string]string{"K": "v"}),
		want: Problems{{Path: "env.K", Message: "is not in admin.stdio_env, which lists none: a stdio server registered through the admin API is given no variables"}},
	}, {
		name: "cwd, none allowed", rules: rules, srv: withCwd(stdio("node", nil, nil), "/tmp"),
		want: Problems{{Path: "cwd", Message: "is not in admin.stdio_cwd, which lists none: a stdio server registered through the admin API cannot choose its working directory"}},
	}, {
		name: "cwd, another directory", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "/tmp"),
		want: Problems{{Path: "cwd", Message: notInCwd}},
	}, {
		name: "cwd, a subdirectory of an allowed one", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "/srv/mcp/node_modules"),
		want: Problems{{Path: "cwd", Message: notInCwd}},
	}, {
		name: "cwd, out of an allowed one by ..", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "/srv/mcp/.."),
		want: Problems{{Path: "cwd", Message: notInCwd}},
	}, {
		name: "cwd, relative", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "srv/mcp"),
		want: Problems{{Path: "cwd", Message: notInCwd}},
	}, {
		name: "cwd, relative in rules that were not validated", rules: Admin{StdioCommands: rules.StdioCommands, StdioCwd: []string{"data"}},
		srv:  withCwd(stdio("node", nil, nil), "data"),
		want: Problems{{Path: "cwd", Message: "is not in admin.stdio_cwd, the working directories a stdio server registered through the admin API may use"}},
	}, {
		name: "cwd, allowed", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "/srv/mcp"),
	}, {
		name: "cwd, allowed after cleaning", rules: cwdRules, srv: withCwd(stdio("node", nil, nil), "/srv//data/./"),
	}, {
		name: "cwd, none", rules: rules, srv: stdio("node", nil, nil),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rules.CheckRegistration(&tt.srv)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("CheckRegistration (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmin_CheckRegistration_ManyEntries(t *testing.T) {
	var a Admin
	for range 10 {
		a.StdioCommands = append(a.StdioCommands, StdioCommand{Command: "npx", Args: []string{"-y", "pkg"}})
	}
	srv := Server{Transport: TransportStdio, Command: "npx", Args: []string{"other"}}
	ps := a.CheckRegistration(&srv)
	if len(ps) != 1 || !strings.HasSuffix(ps[0].Message, `admin.stdio_commands[3] (npx: pattern 1 is "-y"); and 6 more entries of npx`) {
		t.Errorf("CheckRegistration = %v; want four entries named and 6 more counted", ps)
	}
}
