package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/admin"
	"github.com/mcpgw/mcpgw/gateway/legacy"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/upstream"
)

// serveCmd runs the gateway until ctx ends, then shuts it down within the
// configured grace.
func serveCmd(ctx context.Context, args []string, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	path, err := flags("serve", args, stderr)
	if err != nil {
		return err
	}
	cfg, problems, err := config.Load(path, lookupEnv)
	if err != nil {
		return err
	}
	if problems.Fatal() {
		return fmt.Errorf("%s is not usable:\n%s", path, problems.Error())
	}
	logger := newLogger(cfg.Log, stderr)
	for _, p := range problems {
		// Only server entries can be wrong without being fatal: that
		// entry is skipped and the others run.
		logger.Error("skipping a bad server entry", "server", p.Server, "problem", p.String())
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("creating data_dir: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	publicURL := fixPublicURL(cfg.PublicURL, cfg.Listen, ln.Addr().String())

	secret := []byte(cfg.Secret)
	if len(secret) == 0 {
		secret = seal.RandomSecret()
		logger.Info("no secret configured; sessions will not survive a restart")
	}

	// Upstreams: started in the background, so /mcp is up at once.
	info, _ := json.Marshal(map[string]string{"name": "mcpgw", "version": buildVersion()})
	mgr := upstream.NewManager(upstream.ManagerOptions{
		Servers:         cfg.Servers,
		StartTimeout:    time.Duration(cfg.StartTimeout),
		Logger:          logger,
		ClientInfo:      info,
		MaxMessageBytes: int64(cfg.MaxResponseBody),
	})
	mgr.Start()

	timeouts := make(map[string]time.Duration)
	for _, s := range cfg.Servers {
		if s.Timeout > 0 {
			timeouts[s.Name] = time.Duration(s.Timeout)
		}
	}
	core, err := gateway.New(gateway.Options{
		Upstreams:      mgr,
		Logger:         logger,
		Version:        buildVersion(),
		CallTimeout:    time.Duration(cfg.CallTimeout),
		ServerTimeouts: timeouts,
	})
	if err != nil {
		return err
	}
	defer core.Close()

	edge, err := legacy.New(legacy.Options{
		Core:                    core,
		Logger:                  logger,
		AllowHost:               func(h string) bool { return config.HostAllowed(cfg.AllowedHosts, h) },
		AllowOrigin:             func(o string) bool { return config.OriginAllowed(cfg.AllowedOrigins, o) },
		MaxRequestBody:          int64(cfg.MaxRequestBody),
		IdleTimeout:             time.Duration(cfg.Sessions.IdleTimeout),
		MaxSessions:             cfg.Sessions.Max,
		MaxSessionsPerPrincipal: cfg.Sessions.MaxPerPrincipal,
		Secret:                  secret,
	})
	if err != nil {
		return err
	}
	adm, err := admin.New(admin.Options{Core: core, Tokens: cfg.Admin.Tokens, Logger: logger})
	if err != nil {
		return err
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	edge.Register(e)
	adm.Register(e)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })

	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String(), "public_url", publicURL, "servers", len(cfg.Servers), "version", buildVersion())

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", time.Duration(cfg.ShutdownGrace).String())
	case err := <-serveErr:
		logger.Error("HTTP server stopped", "err", err)
	}

	// Shutdown, bounded by the grace: the edge first (no new requests,
	// in-flight calls drain, then are cancelled), then the listener, then
	// the upstreams (children stopped and reaped, HTTP sessions deleted).
	// Each step has its own budget, so a drain that used all of the grace
	// still lets the last answers flush and the children stop.
	grace := time.Duration(cfg.ShutdownGrace)
	var errs []error
	step := func(d time.Duration, f func(context.Context) error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		defer cancel()
		if err := f(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	step(grace, func(c context.Context) error {
		if err := edge.Close(c); err != nil {
			return fmt.Errorf("closing the MCP endpoint: %w", err)
		}
		return nil
	})
	step(httpFlush, func(c context.Context) error {
		if err := srv.Shutdown(c); err != nil {
			srv.Close()
			return fmt.Errorf("closing HTTP connections: %w", err)
		}
		return nil
	})
	step(upstreamStop, func(c context.Context) error {
		if err := mgr.Close(c); err != nil {
			return fmt.Errorf("stopping servers: %w", err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		logger.Warn("shutdown was not clean", "err", err)
	}
	logger.Info("stopped")
	return nil
}

// Shutdown budgets after the drain: for the HTTP server to flush and close
// its connections, and for the upstreams to stop (a stdio child gets 3s
// after stdin closes and 3s after SIGTERM before SIGKILL).
const (
	httpFlush    = 2 * time.Second
	upstreamStop = 10 * time.Second
)

// newLogger builds the process logger from the config: JSON or text on
// stderr at the configured level.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	switch c.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// fixPublicURL puts the bound port into a public URL that was derived from
// a listen address with port 0.
func fixPublicURL(publicURL, listen, bound string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port != "0" {
		return publicURL
	}
	_, boundPort, err := net.SplitHostPort(bound)
	if err != nil {
		return publicURL
	}
	if strings.HasSuffix(publicURL, ":0") {
		return strings.TrimSuffix(publicURL, ":0") + ":" + boundPort
	}
	return publicURL
}
