package legacy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// TestIdleExpiry checks, on a fake clock, that the janitor ends a session
// nobody used for IdleTimeout, that its id then gets 404, and that a
// connected GET stream keeps a session alive.
func TestIdleExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := gateway.New(gateway.Options{Upstreams: upstreamtest.NewManager(newFake().server())})
		if err != nil {
			t.Fatal(err)
		}
		defer core.Close()
		h, err := New(Options{Core: core, IdleTimeout: time.Minute, KeepAlive: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		e := echo.New()
		h.Register(e)
		serve := func(method, sid, body string, hdr ...string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sid != "" {
				req.Header.Set(HeaderSessionID, sid)
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			return rec
		}
		initialize := func() string {
			rec := serve("POST", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if rec.Code != 200 {
				t.Fatalf("initialize: %d", rec.Code)
			}
			return rec.Header().Get(HeaderSessionID)
		}
		idle, streaming := initialize(), initialize()

		// streaming holds a GET stream open.
		ctx, cancel := context.WithCancel(context.Background())
		getDone := make(chan struct{})
		go func() {
			defer close(getDone)
			req := httptest.NewRequestWithContext(ctx, "GET", "/mcp", nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set(HeaderSessionID, streaming)
			e.ServeHTTP(httptest.NewRecorder(), req)
		}()

		time.Sleep(30 * time.Second)
		if rec := serve("POST", idle, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); rec.Code != 200 {
			t.Fatalf("ping before the timeout: %d", rec.Code)
		}
		time.Sleep(59 * time.Second) // activity moved the deadline
		synctest.Wait()
		if n := len(h.Sessions()); n != 2 {
			t.Fatalf("%d sessions before the timeout, want 2", n)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		infos := h.Sessions()
		if len(infos) != 1 || !infos[0].Stream {
			t.Fatalf("sessions after the timeout: %+v, want the streaming one", infos)
		}
		if rec := serve("POST", idle, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); rec.Code != http.StatusNotFound {
			t.Errorf("expired session: %d, want 404", rec.Code)
		}

		// Once its stream goes, the other one expires too.
		cancel()
		<-getDone
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := len(h.Sessions()); n != 0 {
			t.Errorf("%d sessions, want 0", n)
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestIdleLocked pins what keeps a session from being idle.
func TestIdleLocked(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		s    *session
		want bool
	}{
		{name: "unused", s: &session{lastActive: now.Add(-time.Hour)}, want: true},
		{name: "recently active", s: &session{lastActive: now.Add(-time.Second)}},
		{name: "call in flight", s: &session{lastActive: now.Add(-time.Hour), calls: map[string]*call{"1": {}}}},
		{name: "input pending", s: &session{lastActive: now.Add(-time.Hour), inputs: map[string]*input{"mcpgw-1": {}}}},
		{name: "stream connected", s: &session{lastActive: now.Add(-time.Hour), conns: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.idleLocked(now, time.Minute); got != tt.want {
				t.Errorf("idle %v, want %v", got, tt.want)
			}
		})
	}
}
