package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// twoPostgres opens two stores on one new database, as two replicas.
func twoPostgres(t *testing.T) (a, b *Postgres) {
	t.Helper()
	dsn := pgtest.DSN(t)
	a, err := OpenPostgres(t.Context(), PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = OpenPostgres(t.Context(), PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// startWatch runs s.watch(w) until the end of the test, once it listens,
// and returns what stops it and what it returned.
func startWatch(t *testing.T, s *Postgres, w Watchers) (stop func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ch, finished := make(chan error, 1), make(chan struct{})
	listening := make(chan struct{})
	go func() {
		defer close(finished)
		ch <- s.watch(ctx, w, func() { close(listening) })
	}()
	t.Cleanup(func() {
		cancel()
		<-finished // its connection closed before the store is
	})
	select {
	case <-listening:
	case err := <-ch:
		t.Fatalf("watch ended before it listened: %v", err)
	}
	return cancel, ch
}

// receive returns the next value of ch, failing the test if none comes
// within a few seconds.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// TestWatchServers: a change of the server records by one process over a
// database reaches a watcher of another at once; the watch ends with its
// context.
func TestWatchServers(t *testing.T) {
	a, b := twoPostgres(t)
	changed := make(chan struct{}, 4)
	stop, done := startWatch(t, a, Watchers{Servers: func() { changed <- struct{}{} }})
	if _, err := b.PutServer(t.Context(), Server{Name: "web", Source: ServerSourceAPI, Entry: json.RawMessage(`{"name":"web"}`)}); err != nil {
		t.Fatal(err)
	}
	receive(t, changed, "notice of the put")
	if err := b.DeleteServer(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	receive(t, changed, "notice of the delete")
	stop()
	if err := receive(t, done, "end of the watch"); err == nil {
		t.Error("watch returned no error when its context ended")
	}
}

// TestWatch_Finds: one Watch carries both kinds of notice. An announced
// put of finds by one process reaches Finds in another with the
// principal; an unannounced one sends nothing, so the first notice after
// it is the next announced put's; a server change still reaches Servers.
func TestWatch_Finds(t *testing.T) {
	a, b := twoPostgres(t)
	ctx := t.Context()
	servers, found := make(chan struct{}, 4), make(chan string, 4)
	stop, done := startWatch(t, a, Watchers{
		Servers: func() { servers <- struct{}{} },
		Finds:   func(principal string) { found <- principal },
	})
	expires := time.Now().Add(time.Hour)

	if err := b.PutFinds(ctx, finds("alice@example.com", expires, "a"), true); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, found, "notice of alice's finds"); got != "alice@example.com" {
		t.Errorf("Finds(%q), want alice@example.com", got)
	}
	if err := b.PutFinds(ctx, finds("bob", expires, "b"), false); err != nil {
		t.Fatal(err)
	}
	if err := b.PutFinds(ctx, finds("é carol", expires, "c"), true); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, found, "notice of carol's finds"); got != "é carol" {
		t.Errorf("the first notice after an unannounced put is Finds(%q), want carol's", got)
	}
	if _, err := b.PutServer(ctx, apiServer("web", `{"name":"web"}`)); err != nil {
		t.Fatal(err)
	}
	receive(t, servers, "notice of the server")
	// Notices come in the order they were sent: none is pending.
	select {
	case p := <-found:
		t.Errorf("an extra Finds(%q)", p)
	default:
	}
	if len(servers) != 0 {
		t.Errorf("%d extra notices of the servers", len(servers))
	}

	// A put by the watching process itself is announced too.
	if err := a.PutFinds(ctx, finds("dave", expires, "d"), true); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, found, "notice of dave's finds"); got != "dave" {
		t.Errorf("Finds(%q), want dave", got)
	}
	stop()
	if err := receive(t, done, "end of the watch"); err == nil {
		t.Error("Watch returned no error when its context ended")
	}
}

// TestWatch_ServersOnly: a Watch without Finds (WatchServers) is not
// woken by finds, and still gets the server records' notices.
func TestWatch_ServersOnly(t *testing.T) {
	a, b := twoPostgres(t)
	ctx := t.Context()
	servers := make(chan struct{}, 4)
	startWatch(t, a, Watchers{Servers: func() { servers <- struct{}{} }})
	if err := b.PutFinds(ctx, finds("alice", time.Now().Add(time.Hour), "a"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutServer(ctx, apiServer("web", `{"name":"web"}`)); err != nil {
		t.Fatal(err)
	}
	receive(t, servers, "notice of the server")
	if len(servers) != 0 {
		t.Errorf("%d extra notices of the servers", len(servers))
	}
}

// TestWatch_CancelledContext: Watch and WatchServers return at once, with
// an error, when their context has ended.
func TestWatch_CancelledContext(t *testing.T) {
	s := openPostgresTest(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Watch(ctx, Watchers{Servers: func() {}, Finds: func(string) {}}); err == nil {
		t.Error("Watch returned no error")
	}
	if err := s.WatchServers(ctx, func() {}); err == nil {
		t.Error("WatchServers returned no error")
	}
}
