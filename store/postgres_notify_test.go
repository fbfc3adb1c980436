package store

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// TestWatchServers: a change of the server records by one process over a
// database reaches a watcher of another at once; the watch ends with its
// context.
func TestWatchServers(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, err := OpenPostgres(t.Context(), PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := OpenPostgres(t.Context(), PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	changed := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	listening := make(chan struct{})
	go func() {
		done <- a.watchServers(ctx, func() { changed <- struct{}{} }, func() { close(listening) })
	}()
	<-listening
	if _, err := b.PutServer(t.Context(), Server{Name: "web", Source: ServerSourceAPI, Entry: json.RawMessage(`{"name":"web"}`)}); err != nil {
		t.Fatal(err)
	}
	<-changed
	if err := b.DeleteServer(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	<-changed
	cancel()
	if err := <-done; err == nil {
		t.Error("WatchServers returned no error when its context ended")
	}
}
