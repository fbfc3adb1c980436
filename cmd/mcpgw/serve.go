package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/telemetry"
)

// telemetryFlush bounds the export of the last spans at exit.
const telemetryFlush = 5 * time.Second

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
	for _, w := range cfg.Warnings(lookupEnv) {
		logger.Warn("a server entry may not start", "server", w.Server, "problem", w.String())
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

	var adminLn net.Listener
	if cfg.Admin.Listen != "" {
		if adminLn, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
			return fmt.Errorf("listening on %s (admin.listen): %w", cfg.Admin.Listen, err)
		}
		defer adminLn.Close()
	}

	if cfg.Secret == "" {
		logger.Info("no secret configured; sessions will not survive a restart")
	}
	bound := *cfg
	bound.PublicURL = publicURL // with the port it got, when it was 0
	if cfg.Cluster.Enabled {
		bound.Cluster.SelfURL = cfg.Cluster.URL(ln.Addr())
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceVersion: buildVersion(), LookupEnv: lookupEnv, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		// Spans of the drain are exported before the process ends.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlush)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("flushing telemetry failed", "err", err)
		}
	}()
	if tel.Exporting {
		logger.Info("exporting traces over OTLP")
	}
	p, err := newParts(&bound, logger, tel)
	if err != nil {
		return err
	}

	r := &reloader{path: path, lookup: lookupEnv, mgr: p.mgr, db: p.db, adm: p.adm, core: p.core, logger: logger, cfg: cfg}
	p.adm.SetReloader(r.reload)
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followed := make(chan struct{})
	if cfg.Cluster.Enabled {
		// The other replicas' admin changes reach this one through the
		// store, until the shutdown begins.
		go func() { r.follow(followCtx); close(followed) }()
	} else {
		close(followed)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if _, err := r.reload(ctx); err != nil {
					logger.Error("reloading the config on SIGHUP failed; nothing was changed", "err", err)
				}
			}
		}
	}()

	srv := &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 2) // the main and the admin listener
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String(), "public_url", publicURL, "servers", len(cfg.Servers), "version", buildVersion())
	var adminSrv *http.Server
	if adminLn != nil {
		adminSrv = &http.Server{
			Handler:           p.adminHandler,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		}
		go func() { serveErr <- adminSrv.Serve(adminLn) }()
		logger.Info("admin API listening", "addr", adminLn.Addr().String())
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", time.Duration(cfg.ShutdownGrace).String())
	case err := <-serveErr:
		logger.Error("HTTP server stopped", "err", err)
	}

	// No admin change of another replica is applied while this one stops.
	stopFollowing()
	<-followed

	// Load balancers learn from /readyz to stop sending before anything
	// stops; the main listener serves it until the drain is over.
	p.ready.drain()
	if adminSrv != nil {
		// The admin API stops first: no server changes during the drain.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpFlush)
		if err := adminSrv.Shutdown(actx); err != nil {
			adminSrv.Close()
		}
		cancel()
	}
	if err := p.shutdown(ctx, time.Duration(cfg.ShutdownGrace), srv); err != nil {
		logger.Warn("shutdown was not clean", "err", err)
	}
	logger.Info("stopped")
	return nil
}

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
