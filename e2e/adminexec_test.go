package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The admin API must not become a way to run code: these tests try, with
// the admin token, what a stolen one would (a loader or interpreter hook
// in a stdio server's env, arguments that make an allowed command run code
// of their own), against the real binary, and check the refusals and that
// nothing ran.

// startExecGateway runs mcpgw on dir's data with admin, the lines of the
// admin section after its tokens (each indented by two spaces).
func startExecGateway(t *testing.T, dir, admin string) *gateway {
	t.Helper()
	full := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nadmin:\n  tokens: [%q]\n%slog:\n  level: debug\nservers: []\n",
		filepath.Join(dir, "data"), hashToken(adminToken), admin)
	path := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, baseEnv(), "mcpgw", "serve", "--config", path)
	addr := p.waitLine(t, "the gateway's listening line", func(l string) string {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
		return ""
	})
	return &gateway{process: p, URL: "http://" + addr, Admin: adminToken, DataDir: filepath.Join(dir, "data")}
}

// execCase is one registration the admin API must refuse with 403, its
// message saying says and its body never showing hidden (an env value, an
// argument, a directory).
type execCase struct {
	name, method, path, body string
	says                     []string
	hidden                   string
}

func (g *gateway) wantRefused(t *testing.T, cases []execCase) {
	t.Helper()
	for _, tc := range cases {
		status, body := g.adminDo(t, tc.method, tc.path, g.Admin, tc.body)
		if status != http.StatusForbidden {
			t.Errorf("%s: %s %s = %d %s; want 403", tc.name, tc.method, tc.path, status, body)
			continue
		}
		var e struct {
			Message  string `json:"message"`
			Problems []struct{ Field, Message string }
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("%s: the 403's body %s: %v", tc.name, body, err)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(e.Message, s) {
				t.Errorf("%s: message %q; want it to say %q", tc.name, e.Message, s)
			}
		}
		if tc.hidden != "" && strings.Contains(string(body), tc.hidden) {
			t.Errorf("%s: the answer shows %q: %s", tc.name, tc.hidden, body)
		}
	}
}

// TestAdminExec_PlainCommands: with admin.stdio_commands in its old form
// (plain commands), a registration may set no loader or interpreter hook
// and pass no arguments; one that does neither still runs.
func TestAdminExec_PlainCommands(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	demo := bin("demo-server")
	g := startExecGateway(t, dir, fmt.Sprintf("  stdio_commands: [node, %q]\n", demo))

	js := fmt.Sprintf("import('node:fs').then(fs => fs.writeFileSync(%q, 'admin token ran code'))", marker)
	hook := "--import=data:text/javascript;base64," + base64.StdEncoding.EncodeToString([]byte(js))
	entry := func(name, command string, args []string, env map[string]string) string {
		b, _ := json.Marshal(map[string]any{"name": name, "transport": "stdio", "command": command, "args": args, "env": env})
		return string(b)
	}
	g.wantRefused(t, []execCase{{
		name: "NODE_OPTIONS", method: "POST", path: "/admin/servers",
		body: entry("hook", "node", nil, map[string]string{"NODE_OPTIONS": hook}),
		says: []string{"env NODE_OPTIONS is never passed"}, hidden: "base64",
	}, {
		name: "LD_PRELOAD", method: "POST", path: "/admin/servers",
		body: entry("preload", demo, nil, map[string]string{"LD_PRELOAD": "/nonexistent/evil.so"}),
		says: []string{"env LD_PRELOAD is never passed"}, hidden: "evil.so",
	}, {
		name: "node -e", method: "POST", path: "/admin/servers",
		body: entry("inline", "node", []string{"-e", js}, nil),
		says: []string{"argument 1 is not allowed: admin.stdio_commands[0] (node) allows no arguments"}, hidden: "writeFileSync",
	}, {
		name: "arguments to a plain command", method: "POST", path: "/admin/servers",
		body: entry("named", demo, []string{"-name", "x"}, nil),
		says: []string{"argument 1 is not allowed: admin.stdio_commands[1]"}, hidden: `"-name"`,
	}, {
		name: "a variable not in admin.stdio_env", method: "POST", path: "/admin/servers",
		body: entry("other", demo, nil, map[string]string{"DEMO_SETTING": "hidden-value"}),
		says: []string{"env DEMO_SETTING is not in admin.stdio_env"}, hidden: "hidden-value",
	}})
	for _, name := range []string{"hook", "preload", "inline", "named", "other"} {
		if status, body := g.adminDo(t, "GET", "/admin/servers/"+name, g.Admin, ""); status != http.StatusNotFound {
			t.Errorf("GET /admin/servers/%s = %d %s; want 404 (refused, not registered)", name, status, body)
		}
	}

	// Backwards compatible: a plain command with nothing else still runs.
	if status, body := g.adminDo(t, "POST", "/admin/servers", g.Admin, entry("plain", demo, nil, nil)); status != http.StatusCreated {
		t.Fatalf("POST a plain demo-server = %d %s; want 201", status, body)
	}
	g.waitState(t, "plain", "running")

	// Every refusal came before anything started: no code ran.
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the refused registrations ran code: %s exists (%v)", marker, err)
	}
}

// TestAdminExec_Patterns: an entry with argument patterns lets through the
// arguments that match it element by element, and the variables of
// admin.stdio_env reach the server; the same rules hold for a replacement
// and for the registrations restored at the next start.
func TestAdminExec_Patterns(t *testing.T) {
	dir := t.TempDir()
	demo := bin("demo-server")
	withPattern := fmt.Sprintf("  stdio_commands:\n    - node\n    - {command: %q, args: [-name, \"demo-*\"]}\n  stdio_env: [DEMO_SETTING]\n", demo)
	g := startExecGateway(t, dir, withPattern)

	ok := fmt.Sprintf(`{"name":"pat","transport":"stdio","command":%q,"args":["-name","demo-ok"],"env":{"DEMO_SETTING":"1"}}`, demo)
	if status, body := g.adminDo(t, "POST", "/admin/servers", g.Admin, ok); status != http.StatusCreated {
		t.Fatalf("POST a matching registration = %d %s; want 201", status, body)
	}
	g.waitState(t, "pat", "running")
	cs := connect(t, g.URL+"/mcp", "")
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__pat__env", Arguments: map[string]any{"name": "DEMO_SETTING"}})
	if err != nil || text(res) != "set" {
		t.Fatalf("the server's DEMO_SETTING: %v %v; want set (allowed by admin.stdio_env)", res, err)
	}

	entry := fmt.Sprintf("admin.stdio_commands[1] (%s -name demo-*)", demo)
	withKey := fmt.Sprintf(`{"name":"key","transport":"stdio","command":%q,"args":["-name","demo-x","--api-key=sk-live-5ecret"]}`, demo)
	g.wantRefused(t, []execCase{{
		name: "another flag", method: "POST", path: "/admin/servers",
		body: fmt.Sprintf(`{"name":"http","transport":"stdio","command":%q,"args":["-http","127.0.0.1:0"]}`, demo),
		says: []string{fmt.Sprintf(`argument 1 does not match admin.stdio_commands[1] (%s: pattern 1 is "-name")`, demo)}, hidden: "127.0.0.1:0",
	}, {
		name: "one argument more, holding a key", method: "POST", path: "/admin/servers", body: withKey,
		says: []string{"argument 3 is not allowed: " + entry + " takes 2 arguments"}, hidden: "5ecret",
	}, {
		name: "a replacement with NODE_OPTIONS", method: "PUT", path: "/admin/servers/pat",
		body: fmt.Sprintf(`{"transport":"stdio","command":%q,"args":["-name","demo-ok"],"env":{"NODE_OPTIONS":"--require=/tmp/x.js"}}`, demo),
		says: []string{"env NODE_OPTIONS is never passed"}, hidden: "x.js",
	}, {
		name: "a replacement with node -e", method: "PUT", path: "/admin/servers/pat",
		body: `{"transport":"stdio","command":"node","args":["-e","process.exit(3)"]}`,
		says: []string{"argument 1 is not allowed: admin.stdio_commands[0] (node) allows no arguments"}, hidden: "process.exit",
	}})
	if st := g.status(t, "pat"); st.State != "running" {
		t.Errorf("pat after the refused replacements is %s (%s); want running, unchanged", st.State, st.Error)
	}

	// The next start restores only what the rules still allow: without
	// the pattern, the stored registration is skipped, and kept.
	g.stopWith(t, syscall.SIGTERM)
	g = startExecGateway(t, dir, fmt.Sprintf("  stdio_commands: [%q]\n  stdio_env: [DEMO_SETTING]\n", demo))
	if status, body := g.adminDo(t, "GET", "/admin/servers/pat", g.Admin, ""); status != http.StatusNotFound {
		t.Errorf("GET /admin/servers/pat without its pattern = %d %s; want 404 (not restored)", status, body)
	}
	skipped := false
	for _, l := range strings.Split(g.Stderr(), "\n") {
		var rec struct{ Level, Msg, Server, Problem string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "ERROR" && rec.Server == "pat" &&
			strings.HasPrefix(rec.Msg, "skipping a server registered through the admin API") &&
			strings.Contains(rec.Problem, "args: argument 1 is not allowed: admin.stdio_commands[0]") {
			skipped = true
		}
	}
	if !skipped {
		t.Errorf("no error in the log names the skipped server pat and why:\n%s", g.Stderr())
	}
	g.stopWith(t, syscall.SIGTERM)
	g = startExecGateway(t, dir, withPattern)
	g.waitState(t, "pat", "running")
}

// TestAdminExec_Cwd: a registration may start its server only in a
// directory of admin.stdio_cwd (or the gateway's own): a directory a
// stolen token can write to, where npx would run a planted
// node_modules/.bin and read a planted .npmrc, is refused by POST and PUT
// and skipped when restored at the next start.
func TestAdminExec_Cwd(t *testing.T) {
	dir := t.TempDir()
	demo := bin("demo-server")
	allowed, planted := filepath.Join(dir, "srv"), filepath.Join(dir, "planted")
	for _, d := range []string{allowed, planted} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	rules := fmt.Sprintf("  stdio_commands: [%q]\n  stdio_cwd: [%q]\n", demo, allowed)
	g := startExecGateway(t, dir, rules)
	entry := func(name, cwd string) string {
		b, _ := json.Marshal(map[string]any{"name": name, "transport": "stdio", "command": demo, "cwd": cwd})
		return string(b)
	}
	g.wantRefused(t, []execCase{{
		name: "a directory not listed", method: "POST", path: "/admin/servers", body: entry("planted", planted),
		says: []string{"cwd is not in admin.stdio_cwd"}, hidden: planted,
	}, {
		name: "a subdirectory of a listed one", method: "POST", path: "/admin/servers", body: entry("sub", filepath.Join(allowed, "node_modules")),
		says: []string{"cwd is not in admin.stdio_cwd"}, hidden: "node_modules",
	}, {
		name: "out of a listed one by ..", method: "POST", path: "/admin/servers", body: entry("up", allowed+"/../planted"),
		says: []string{"cwd is not in admin.stdio_cwd"}, hidden: "planted",
	}})
	if status, body := g.adminDo(t, "POST", "/admin/servers", g.Admin, entry("srv", allowed+"/")); status != http.StatusCreated {
		t.Fatalf("POST a registration in a listed cwd = %d %s; want 201", status, body)
	}
	g.waitState(t, "srv", "running")
	g.wantRefused(t, []execCase{{
		name: "a replacement in a directory not listed", method: "PUT", path: "/admin/servers/srv", body: entry("srv", planted),
		says: []string{"cwd is not in admin.stdio_cwd"}, hidden: planted,
	}})
	for _, name := range []string{"planted", "sub", "up"} {
		if status, body := g.adminDo(t, "GET", "/admin/servers/"+name, g.Admin, ""); status != http.StatusNotFound {
			t.Errorf("GET /admin/servers/%s = %d %s; want 404 (refused, not registered)", name, status, body)
		}
	}

	// Without the directory in admin.stdio_cwd, the next start skips the
	// stored registration, and keeps it.
	g.stopWith(t, syscall.SIGTERM)
	g = startExecGateway(t, dir, fmt.Sprintf("  stdio_commands: [%q]\n", demo))
	if status, body := g.adminDo(t, "GET", "/admin/servers/srv", g.Admin, ""); status != http.StatusNotFound {
		t.Errorf("GET /admin/servers/srv without its cwd listed = %d %s; want 404 (not restored)", status, body)
	}
	skipped := false
	for _, l := range strings.Split(g.Stderr(), "\n") {
		var rec struct{ Level, Msg, Server, Problem string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "ERROR" && rec.Server == "srv" &&
			strings.HasPrefix(rec.Msg, "skipping a server registered through the admin API") &&
			strings.Contains(rec.Problem, "cwd: is not in admin.stdio_cwd") {
			skipped = true
		}
	}
	if !skipped {
		t.Errorf("no error in the log names the skipped server srv and why:\n%s", g.Stderr())
	}
	g.stopWith(t, syscall.SIGTERM)
	g = startExecGateway(t, dir, rules)
	g.waitState(t, "srv", "running")
}
