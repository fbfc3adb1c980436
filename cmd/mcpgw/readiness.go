package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/upstream"
)

// pingTimeout bounds the store's ping in one /readyz.
const pingTimeout = 2 * time.Second

// pinger is the store as readiness sees it (store.SQLite, store.Postgres).
type pinger interface {
	// Ping reports whether the store answers; it is safe for concurrent use.
	Ping(ctx context.Context) error
}

// serverSet is the upstreams as readiness sees them (upstream.Manager). Both
// methods are snapshots, safe for concurrent use; a server removed between
// the two calls is skipped.
type serverSet interface {
	Servers() []upstream.Status
	ServerConfig(name string) (config.Server, bool)
}

// notReady returns why the gateway should get no traffic, or nil when it
// is ready: it is draining after SIGTERM, the store does not
// answer, or a server marked required is enabled and not running. The
// config is loaded by the time anything asks. The reasons are shown to
// anyone who can reach /readyz, so they name servers and states only: a
// server's error, which may quote what it said, stays behind /admin.
func notReady(ctx context.Context, draining bool, db pinger, servers serverSet) (reasons []string, dbErr error) {
	if draining {
		// Nothing else matters: the load balancer should stop at once.
		return []string{"shutting down"}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.Ping(pctx); err != nil {
		reasons = append(reasons, "the database does not answer")
		dbErr = err
	}
	for _, st := range servers.Servers() {
		cfg, ok := servers.ServerConfig(st.Name)
		if !ok || !cfg.Required || !st.Enabled || st.State == upstream.StateRunning {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("server %q is %s", st.Name, st.State))
	}
	return reasons, dbErr
}

// readiness serves /readyz. Its zero value is not usable: db and servers
// must be set.
type readiness struct {
	db       pinger
	servers  serverSet
	logger   *slog.Logger
	draining atomic.Bool
}

// drain makes /readyz unready from now on, so that load balancers stop
// sending while the gateway drains. It may be called more than once.
func (r *readiness) drain() { r.draining.Store(true) }

// readyzBody is /readyz's answer.
type readyzBody struct {
	Status  string   `json:"status"` // "ready" or "unready"
	Reasons []string `json:"reasons,omitempty"`
}

// serve answers 200 {"status":"ready"}, or 503 with the reasons.
func (r *readiness) serve(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	reasons, err := notReady(c.Request().Context(), r.draining.Load(), r.db, r.servers)
	if err != nil {
		r.logger.Warn("readiness: the database does not answer", "err", err)
	}
	if len(reasons) > 0 {
		return c.JSON(http.StatusServiceUnavailable, readyzBody{Status: "unready", Reasons: reasons})
	}
	return c.JSON(http.StatusOK, readyzBody{Status: "ready"})
}
