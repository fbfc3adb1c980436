package admin

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var errNotConnected = errors.New("not connected")

// fakeAccounts keeps connected principals per server.
type fakeAccounts struct {
	mu        sync.Mutex
	connected map[string]map[string]bool
	forgotten []string
}

func (f *fakeAccounts) Count(_ context.Context, server string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.connected[server]), nil
}

func (f *fakeAccounts) Disconnect(_ context.Context, server, principal string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.connected[server][principal] {
		return errNotConnected
	}
	delete(f.connected[server], principal)
	return nil
}

func (f *fakeAccounts) NotConnected(err error) bool { return errors.Is(err, errNotConnected) }

func (f *fakeAccounts) Forget(_ context.Context, server string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, server)
	delete(f.connected, server)
	return nil
}

func TestAccounts(t *testing.T) {
	acc := &fakeAccounts{connected: map[string]map[string]bool{"tracker": {"alice": true, "jwt:https://idp.example#bob": true}}}
	ev := newEnv(t, envOptions{accounts: acc})
	const entry = `{"name":"tracker","transport":"http","url":"https://tracker.example/mcp","oauth":{}}`
	if status, body := ev.do(t, http.MethodPost, "/admin/servers", entry, token); status != http.StatusCreated {
		t.Fatalf("registering tracker: %d %s", status, body)
	}
	st := get[struct {
		Connected *int `json:"oauth_connected"`
	}](t, ev, "/admin/servers/tracker")
	if st.Connected == nil || *st.Connected != 2 {
		t.Fatalf("oauth_connected = %v, want 2", st.Connected)
	}
	// A server without oauth shows none.
	if w := get[map[string]any](t, ev, "/admin/servers/weather"); w["oauth_connected"] != nil {
		t.Fatalf("weather has oauth_connected %v", w["oauth_connected"])
	}

	tests := []struct {
		name, path string
		status     int
	}{
		{"a JWT principal, escaped", "/admin/servers/tracker/oauth/jwt:https:%2F%2Fidp.example%23bob", http.StatusNoContent},
		{"again: not connected", "/admin/servers/tracker/oauth/jwt:https:%2F%2Fidp.example%23bob", http.StatusNotFound},
		{"unknown server", "/admin/servers/nope/oauth/alice", http.StatusNotFound},
		{"a server without oauth", "/admin/servers/weather/oauth/alice", http.StatusNotFound},
		{"no token", "/admin/servers/tracker/oauth/alice", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := token
			if tt.status == http.StatusUnauthorized {
				tok = ""
			}
			if status, body := ev.do(t, http.MethodDelete, tt.path, "", tok); status != tt.status {
				t.Fatalf("DELETE %s = %d %s, want %d", tt.path, status, body, tt.status)
			}
		})
	}
	if n, _ := acc.Count(context.Background(), "tracker"); n != 1 {
		t.Fatalf("%d connected after the deletes, want 1 (alice)", n)
	}
	if status, body := ev.do(t, http.MethodDelete, "/admin/servers/tracker", "", token); status != http.StatusNoContent {
		t.Fatalf("deleting tracker: %d %s", status, body)
	}
	if diff := cmp.Diff([]string{"tracker"}, acc.forgotten); diff != "" {
		t.Errorf("forgotten (-want +got):\n%s", diff)
	}
}
