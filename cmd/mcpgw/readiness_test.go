package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/upstream"
)

type fakePinger struct{ err error }

func (f fakePinger) Ping(context.Context) error { return f.err }

// fakeServers is a server set: each server's status, and whether it is
// required. A name in gone has a status but no config (removed between
// the two calls).
type fakeServers struct {
	statuses []upstream.Status
	required map[string]bool
	gone     map[string]bool
}

func (f fakeServers) Servers() []upstream.Status { return f.statuses }

func (f fakeServers) ServerConfig(name string) (config.Server, bool) {
	if f.gone[name] {
		return config.Server{}, false
	}
	return config.Server{Name: name, Required: f.required[name]}, true
}

func TestReadyz(t *testing.T) {
	up := func(name string, st upstream.State) upstream.Status {
		// Error is what /admin shows; /readyz must not.
		return upstream.Status{Name: name, Enabled: st != upstream.StateDisabled, State: st, Error: "exit status 1: token=s3cret"}
	}
	tests := []struct {
		name     string
		draining bool
		dbErr    error
		servers  fakeServers
		wantCode int
		wantBody string
	}{
		{
			name:     "no servers",
			wantCode: http.StatusOK,
			wantBody: `{"status":"ready"}`,
		},
		{
			name: "required servers running, others down",
			servers: fakeServers{
				statuses: []upstream.Status{up("git", upstream.StateRunning), up("web", upstream.StateFailed), up("off", upstream.StateDisabled)},
				required: map[string]bool{"git": true},
			},
			wantCode: http.StatusOK,
			wantBody: `{"status":"ready"}`,
		},
		{
			name: "a disabled required server does not count",
			servers: fakeServers{
				statuses: []upstream.Status{up("git", upstream.StateDisabled)},
				required: map[string]bool{"git": true},
			},
			wantCode: http.StatusOK,
			wantBody: `{"status":"ready"}`,
		},
		{
			name: "a removed server does not count",
			servers: fakeServers{
				statuses: []upstream.Status{up("git", upstream.StateStopped)},
				required: map[string]bool{"git": true},
				gone:     map[string]bool{"git": true},
			},
			wantCode: http.StatusOK,
			wantBody: `{"status":"ready"}`,
		},
		{
			name: "required servers down",
			servers: fakeServers{
				statuses: []upstream.Status{
					up("a", upstream.StateStarting), up("git", upstream.StateRestarting),
					up("ok", upstream.StateRunning), up("z", upstream.StateFailed),
				},
				required: map[string]bool{"a": true, "git": true, "ok": true, "z": true},
			},
			wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unready","reasons":["server \"a\" is starting","server \"git\" is restarting","server \"z\" is failed"]}`,
		},
		{
			name:     "the database does not answer",
			dbErr:    errors.New("reading the database: sql: database is closed"),
			servers:  fakeServers{statuses: []upstream.Status{up("git", upstream.StateExited)}, required: map[string]bool{"git": true}},
			wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unready","reasons":["the database does not answer","server \"git\" is exited"]}`,
		},
		{
			name:     "draining wins over everything",
			draining: true,
			dbErr:    errors.New("closed"),
			servers:  fakeServers{statuses: []upstream.Status{up("git", upstream.StateStopped)}, required: map[string]bool{"git": true}},
			wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unready","reasons":["shutting down"]}`,
		},
		{
			name:     "draining with everything up",
			draining: true,
			servers:  fakeServers{statuses: []upstream.Status{up("git", upstream.StateRunning)}, required: map[string]bool{"git": true}},
			wantCode: http.StatusServiceUnavailable,
			wantBody: `{"status":"unready","reasons":["shutting down"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &readiness{db: fakePinger{tt.dbErr}, servers: tt.servers, logger: slog.New(slog.DiscardHandler)}
			if tt.draining {
				r.drain()
			}
			e := echo.New()
			e.GET("/readyz", r.serve)
			srv := httptest.NewServer(e)
			defer srv.Close()

			res, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.wantCode {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantBody+"\n", string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
		})
	}
}
