package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
)

// TestSync: a replica makes its servers what the shared store says, as
// another replica's admin API left it: a registration added, replaced when
// its entry changes and not when it does not, removed with its record; a
// file server switched; a record today's rules refuse skipped, said once.
func TestSync(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "mcpgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg, ps := config.Parse([]byte(`
servers:
  - {name: file, transport: http, url: "https://file.example/mcp"}
`), nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	mgr := upstream.NewManager(upstream.ManagerOptions{Servers: cfg.Servers})
	t.Cleanup(func() { mgr.Close(ctx) })
	var logs bytes.Buffer
	r := &reloader{mgr: mgr, db: db, cfg: cfg, logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	put := func(rec store.Server) {
		t.Helper()
		if _, err := db.PutServer(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	sync := func() string {
		t.Helper()
		logs.Reset()
		if err := r.syncLocked(ctx); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	off := false
	put(store.Server{Name: "web", Source: store.ServerSourceAPI, Entry: json.RawMessage(`{"name":"web","transport":"http","url":"https://web.example/mcp"}`)})
	put(store.Server{Name: "file", Source: store.ServerSourceConfig, Enabled: &off})
	put(store.Server{Name: "bad", Source: store.ServerSourceAPI, Entry: json.RawMessage(`{"name":"bad","transport":"stdio","command":"/bin/sh"}`)})

	out := sync()
	if sc, ok := mgr.ServerConfig("web"); !ok || sc.URL != "https://web.example/mcp" {
		t.Errorf("web after the first sync: %+v, %v", sc, ok)
	}
	if sc, _ := mgr.ServerConfig("file"); sc.IsEnabled() {
		t.Error("file is still enabled after the store switched it off")
	}
	if _, ok := mgr.ServerConfig("bad"); ok || !strings.Contains(out, `"server":"bad"`) {
		t.Errorf("bad runs (%v), or the log does not say why not:\n%s", ok, out)
	}

	// Nothing changed: nothing is done, and bad is not said again.
	if out := sync(); out != "" {
		t.Errorf("a sync with nothing new logged:\n%s", out)
	}

	put(store.Server{Name: "web", Source: store.ServerSourceAPI, Entry: json.RawMessage(`{"name":"web","transport":"http","url":"https://web2.example/mcp"}`)})
	if out := sync(); !strings.Contains(out, "server replaced") {
		t.Errorf("a changed entry was not replaced:\n%s", out)
	}
	if sc, _ := mgr.ServerConfig("web"); sc.URL != "https://web2.example/mcp" {
		t.Errorf("web's URL after the replacement: %q", sc.URL)
	}

	if err := db.DeleteServer(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if out := sync(); !strings.Contains(out, "server removed") {
		t.Errorf("a deleted record's server was not removed:\n%s", out)
	}
	if _, ok := mgr.ServerConfig("web"); ok {
		t.Error("web still runs after its record was deleted")
	}
	if _, ok := mgr.ServerConfig("file"); !ok {
		t.Error("the file's server was removed")
	}
}
