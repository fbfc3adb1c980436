package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/pgtest"
	"github.com/mcpgw/mcpgw/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestServe_StoreUnreachable: a PostgreSQL that does not answer fails the
// start with an error naming the driver and the host, never the password,
// and a non-zero exit.
func TestServe_StoreUnreachable(t *testing.T) {
	const password = "hunter2-db-password"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "mcpgw.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %q\nstore:\n  driver: postgres\n  dsn: ${MCPGW_DATABASE_URL}\n", dir)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"PATH":               dir,
		"MCPGW_DATABASE_URL": "postgres://mcpgw:" + password + "@" + closed + "/mcpgw?sslmode=disable",
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--config", file}, &stdout, &stderr, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if code == 0 {
		t.Fatalf("serve exited 0 with an unreachable database\nstderr: %s", stderr.String())
	}
	for _, want := range []string{`postgres database "mcpgw" on ` + closed, "connecting"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String()+stdout.String(), password) {
		t.Errorf("the output shows the password:\n%s%s", stdout.String(), stderr.String())
	}
}

// TestParts_OnPostgres: with store.driver postgres the gateway keeps its
// records there: a server registered in one run is restored by the next,
// and /readyz asks PostgreSQL.
func TestParts_OnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg, ps := config.Parse([]byte(fmt.Sprintf("data_dir: %q\nstore:\n  driver: postgres\n  dsn: ${DB}\n  max_conns: 3\n", t.TempDir())),
		func(k string) (string, bool) { return dsn, k == "DB" })
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	start := func() *parts {
		p, err := newParts(cfg, slog.New(slog.DiscardHandler), testTelemetry(t))
		if err != nil {
			t.Fatalf("newParts: %v", err)
		}
		return p
	}
	stop := func(p *parts) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.shutdown(ctx, 5*time.Second, nil); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}

	p := start()
	if _, ok := p.db.(*store.Postgres); !ok {
		stop(p)
		t.Fatalf("the parts' store is %T, want *store.Postgres", p.db)
	}
	srv := httptest.NewServer(p.handler)
	res, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	srv.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d, want 200", res.StatusCode)
	}
	entry := json.RawMessage(`{"name":"web","transport":"http","url":"http://127.0.0.1:1/mcp"}`)
	if _, err := p.db.PutServer(t.Context(), store.Server{Name: "web", Source: store.ServerSourceAPI, Entry: entry}); err != nil {
		t.Fatal(err)
	}
	stop(p)

	p = start()
	defer stop(p)
	if _, ok := p.mgr.ServerConfig("web"); !ok {
		t.Error("the server registered in the first run was not restored from PostgreSQL")
	}
}

// TestParts_MediaWhereTheStoreIs: on PostgreSQL the media blobs live in
// the database, so a link minted by one replica is served by another and
// no data_dir/media is made; on SQLite they stay in files.
func TestParts_MediaWhereTheStoreIs(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	png := bytes.Repeat([]byte("\x89PNG"), 100)
	newPart := func(t *testing.T, yaml string, getenv func(string) (string, bool)) *parts {
		t.Helper()
		cfg, ps := config.Parse([]byte(yaml), getenv)
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		p, err := newParts(cfg, slog.New(slog.DiscardHandler), testTelemetry(t))
		if err != nil {
			t.Fatalf("newParts: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.shutdown(ctx, 5*time.Second, nil); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		return p
	}
	fetch := func(t *testing.T, p *parts, name string) (int, []byte) {
		t.Helper()
		srv := httptest.NewServer(p.handler)
		defer srv.Close()
		res, err := http.Get(srv.URL + "/media/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body bytes.Buffer
		if _, err := body.ReadFrom(res.Body); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body.Bytes()
	}

	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		getenv := func(k string) (string, bool) { return dsn, k == "DB" }
		var ps [2]*parts
		dirs := [2]string{t.TempDir(), t.TempDir()}
		for i := range ps {
			ps[i] = newPart(t, fmt.Sprintf("data_dir: %q\nsecret: %s\nstore:\n  driver: postgres\n  dsn: ${DB}\n  max_conns: 3\n", dirs[i], secret), getenv)
		}
		e, err := ps[0].media.Put("principal:alice", "image/png", png)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := fetch(t, ps[1], e.Name()); code != http.StatusOK || !bytes.Equal(body, png) {
			t.Errorf("the other replica answered %d with %d bytes; want 200 and the blob", code, len(body))
		}
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "media")); !os.IsNotExist(err) {
				t.Errorf("%s/media: %v; want no media directory on postgres", d, err)
			}
		}
		if st := ps[0].media.Stats(); st.Files != 1 || st.Bytes != int64(len(png)) {
			t.Errorf("Stats = %+v; want the table's one blob", st)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		p := newPart(t, fmt.Sprintf("data_dir: %q\nsecret: %s\n", dir, secret), nil)
		e, err := p.media.Put("principal:alice", "image/png", png)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "media", e.Name())); err != nil {
			t.Errorf("the blob's file: %v", err)
		}
		if code, body := fetch(t, p, e.Name()); code != http.StatusOK || !bytes.Equal(body, png) {
			t.Errorf("/media answered %d with %d bytes; want 200 and the blob", code, len(body))
		}
	})
}
