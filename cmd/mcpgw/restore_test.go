package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
)

// TestRestoreServers_AdminRules: the registrations of an earlier run come
// back only if admin.stdio_commands, admin.stdio_cwd and admin.stdio_env
// still allow them, as the admin API would now; the others are skipped
// with an error in the log that names the server and why (never an env
// value or a cwd), and are kept.
func TestRestoreServers_AdminRules(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "mcpgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	records := map[string]string{
		"ok":    `{"name":"ok","transport":"stdio","command":"npx","args":["-y","@acme/mcp-fs"],"env":{"TOKEN":"t"}}`,
		"plain": `{"name":"plain","transport":"stdio","command":"mcp-git"}`,
		"web":   `{"name":"web","transport":"http","url":"https://web.example/mcp"}`,
		"hook":  `{"name":"hook","transport":"stdio","command":"npx","args":["-y","@acme/mcp-fs"],"env":{"NODE_OPTIONS":"--require=/tmp/secret-hook.js"}}`,
		"other": `{"name":"other","transport":"stdio","command":"npx","args":["-y","evil"]}`,
		"args":  `{"name":"args","transport":"stdio","command":"mcp-git","args":["--exec","sh"]}`,
		"cmd":   `{"name":"cmd","transport":"stdio","command":"/bin/sh","args":["-c","id"]}`,
		"env":   `{"name":"env","transport":"stdio","command":"mcp-git","env":{"LOG":"debug"}}`,
		"dir":   `{"name":"dir","transport":"stdio","command":"mcp-git","cwd":"/srv/mcp/"}`,
		"tmp":   `{"name":"tmp","transport":"stdio","command":"mcp-git","cwd":"/tmp/planted-dir"}`,
	}
	for name, entry := range records {
		if _, err := db.PutServer(ctx, store.Server{Name: name, Source: store.ServerSourceAPI, Entry: json.RawMessage(entry)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, ps := config.Parse([]byte(`
admin:
  stdio_commands:
    - {command: npx, args: [-y, "@acme/mcp-*"]}
    - mcp-git
  stdio_env: [TOKEN]
  stdio_cwd: [/srv/mcp]
`), nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	mgr := upstream.NewManager(upstream.ManagerOptions{})
	t.Cleanup(func() { mgr.Close(ctx) })
	var logs bytes.Buffer
	if err := restoreServers(ctx, cfg, db, mgr, slog.New(slog.NewJSONHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}

	var added []string
	for name := range records {
		if _, ok := mgr.ServerConfig(name); ok {
			added = append(added, name)
		}
	}
	slices.Sort(added)
	if diff := cmp.Diff([]string{"dir", "ok", "plain", "web"}, added); diff != "" {
		t.Errorf("the servers restored (-want +got):\n%s", diff)
	}
	skipped := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg, Server, Problem string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.Level == "ERROR" && strings.HasPrefix(rec.Msg, "skipping a server registered") && strings.Contains(rec.Problem, "no longer allow it") {
			skipped[rec.Server] = rec.Problem
		}
	}
	want := map[string]string{
		"hook":  "env.NODE_OPTIONS: is never passed",
		"other": `args: argument 2 does not match admin.stdio_commands[0] (npx: pattern 2 is "@acme/mcp-*")`,
		"args":  "args: argument 1 is not allowed: admin.stdio_commands[1] (mcp-git) allows no arguments",
		"cmd":   "command: is not in admin.stdio_commands",
		"env":   "env.LOG: is not in admin.stdio_env",
		"tmp":   "cwd: is not in admin.stdio_cwd",
	}
	for name, says := range want {
		if !strings.Contains(skipped[name], says) {
			t.Errorf("the log's error for %s: %q; want it to say %q", name, skipped[name], says)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v; want %d servers", skipped, len(want))
	}
	if strings.Contains(logs.String(), "secret-hook") || strings.Contains(logs.String(), "planted-dir") {
		t.Errorf("the log shows an env value:\n%s", logs.String())
	}
	recs, err := db.ListServers(ctx)
	if err != nil || len(recs) != len(records) {
		t.Errorf("the store keeps %d records (%v); want all %d", len(recs), err, len(records))
	}
}
