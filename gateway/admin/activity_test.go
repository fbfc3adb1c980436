package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestEvents(t *testing.T) {
	ev := newEnv(t, envOptions{})
	for i, n := range []struct{ server, method string }{
		{"files", "event/changed"}, {"weather", "event/alert"}, {"files", "event/alert"}, {"files", "event/changed"},
	} {
		ev.m.Notify(n.server, jsonrpc.NewNotification(n.method, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))))
	}
	type page struct {
		Events []struct {
			Seq    uint64
			Server string
			Method string
		}
		Next string `json:"next_cursor"`
	}
	get := func(query string) (int, page) {
		t.Helper()
		status, body := ev.do(t, http.MethodGet, "/admin/events"+query, "", token)
		var p page
		json.Unmarshal(body, &p)
		return status, p
	}
	if status, p := get(""); status != 200 || len(p.Events) != 4 || p.Next != "" {
		t.Errorf("all events: %d %+v", status, p)
	}
	status, p := get("?limit=3")
	if status != 200 || len(p.Events) != 3 || p.Next == "" {
		t.Fatalf("first page: %d %+v", status, p)
	}
	if status, p2 := get("?limit=3&cursor=" + p.Next); status != 200 || len(p2.Events) != 1 || p2.Events[0].Seq != 4 || p2.Next != "" {
		t.Errorf("second page: %d %+v", status, p2)
	}
	if _, p := get("?server=files&method=event/changed"); len(p.Events) != 2 || p.Events[0].Server != "files" || p.Events[1].Method != "event/changed" {
		t.Errorf("filtered: %+v", p)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?cursor=-1", "?cursor=abc"} {
		if status, body := ev.do(t, http.MethodGet, "/admin/events"+q, "", token); status != http.StatusBadRequest || !strings.Contains(string(body), `"field"`) {
			t.Errorf("GET /admin/events%s = %d %s, want 400 naming the field", q, status, body)
		}
	}
}

// fakeSessions is an edge's sessions; fail makes its methods fail as a
// session store that does not answer does.
type fakeSessions struct {
	mu   sync.Mutex
	list []gateway.SessionInfo
	fail error
}

func (f *fakeSessions) AdminSessions(context.Context) ([]gateway.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return append([]gateway.SessionInfo{}, f.list...), nil
}

func (f *fakeSessions) EndSession(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return false, f.fail
	}
	for i, s := range f.list {
		if s.ID == id {
			f.list = append(f.list[:i], f.list[i+1:]...)
			return true, nil
		}
	}
	return false, nil
}

func TestSessions(t *testing.T) {
	ev := newEnv(t, envOptions{})
	if status, body := ev.do(t, http.MethodGet, "/admin/sessions", "", token); status != 200 || string(body) != `{"sessions":[]}`+"\n" {
		t.Errorf("no edge: %d %s", status, body)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sessions := &fakeSessions{list: []gateway.SessionInfo{
		{ID: "a1", Principal: "alice", ProtocolVersion: "2025-11-25", ClientName: "claude", CreatedAt: now, LastActiveAt: now, InFlight: 1, Stream: true, State: gateway.SessionLive},
		{ID: "b2", Principal: "anonymous", ProtocolVersion: "2025-03-26", CreatedAt: now, LastActiveAt: now, State: gateway.SessionStored},
	}}
	ev.api.opts.Sessions = sessions
	status, body := ev.do(t, http.MethodGet, "/admin/sessions", "", token)
	if status != 200 || !strings.Contains(string(body), `"id":"a1","principal":"alice"`) || !strings.Contains(string(body), `"id":"b2"`) ||
		!strings.Contains(string(body), `"stream":false,"state":"stored"`) {
		t.Errorf("GET /admin/sessions = %d %s", status, body)
	}

	// A session store that fails: no listing, and nothing ended, with
	// 503 and nothing of the store's error.
	sessions.mu.Lock()
	sessions.fail = errors.New("disk on fire")
	sessions.mu.Unlock()
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		path := "/admin/sessions"
		if method == http.MethodDelete {
			path += "/a1"
		}
		if status, body := ev.do(t, method, path, "", token); status != http.StatusServiceUnavailable || strings.Contains(string(body), "disk") {
			t.Errorf("%s %s with a failing store = %d %s, want 503 without the store's error", method, path, status, body)
		}
	}
	sessions.mu.Lock()
	sessions.fail = nil
	sessions.mu.Unlock()
	if status, _ := ev.do(t, http.MethodDelete, "/admin/sessions/a1", "", token); status != http.StatusNoContent {
		t.Errorf("DELETE a1 = %d", status)
	}
	if status, body := ev.do(t, http.MethodDelete, "/admin/sessions/a1", "", token); status != http.StatusNotFound || !strings.Contains(string(body), `unknown session \"a1\"`) {
		t.Errorf("DELETE a1 again = %d %s", status, body)
	}
	if _, body := ev.do(t, http.MethodGet, "/admin/sessions", "", token); strings.Contains(string(body), `"a1"`) {
		t.Errorf("a1 still listed: %s", body)
	}
}

func TestReload(t *testing.T) {
	ev := newEnv(t, envOptions{})
	if status, body := ev.do(t, http.MethodPost, "/admin/reload", "", token); status != http.StatusConflict {
		t.Errorf("without a reloader: %d %s", status, body)
	}
	tests := []struct {
		name   string
		res    ReloadResult
		err    error
		status int
		says   string
	}{
		{"applied", ReloadResult{Added: []string{"new"}, Unchanged: []string{"files"}, RestartNeeded: []string{"listen"}}, nil, 200,
			`{"added":["new"],"removed":[],"replaced":[],"unchanged":["files"],"restart_needed":["listen"]}`},
		{"problems", ReloadResult{Problems: []string{`servers[0].url: missing`}}, errors.New("the config file has 1 problem(s); nothing was changed"), 400,
			`servers[0].url: missing`},
		{"failure", ReloadResult{}, errors.New("open /secret/path: permission denied"), 500, "reloading the config file failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev.api.SetReloader(func(context.Context) (ReloadResult, error) { return tt.res, tt.err })
			status, body := ev.do(t, http.MethodPost, "/admin/reload", "", token)
			if status != tt.status || !strings.Contains(string(body), tt.says) || strings.Contains(string(body), "/secret/path") {
				t.Errorf("POST /admin/reload = %d %s, want %d with %s", status, body, tt.status, tt.says)
			}
		})
	}
}
