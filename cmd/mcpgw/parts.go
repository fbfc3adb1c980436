package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/cluster"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/admin"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/gateway/legacy"
	"github.com/mcpgw/mcpgw/gateway/modern"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/mediastore"
	"github.com/mcpgw/mcpgw/oauthclient"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/telemetry"
	"github.com/mcpgw/mcpgw/upstream"
)

// parts are the running pieces of a gateway built from one config, and the
// HTTP handler that serves them.
type parts struct {
	mgr   *upstream.Manager
	db    database
	media *mediastore.Store
	// unobserve stops the media metrics reading media.
	unobserve func()
	core      *gateway.Server
	edge      *legacy.Handler
	modern    *modern.Handler
	adm       *admin.API
	ready     *readiness
	handler   http.Handler
	// adminHandler serves /admin on its own listener (admin.listen), or
	// is nil when handler serves it.
	adminHandler http.Handler
	// leave stops this replica's heartbeats and takes it out of the
	// cluster's registry (a no-op when it runs alone).
	leave func()
}

// newParts builds the gateway from cfg and starts its upstreams in the
// background, so that /mcp is up at once. Spans and metrics go to tel's
// providers, and tel.MetricsHandler serves /metrics.
func newParts(cfg *config.Config, logger *slog.Logger, tel *telemetry.Telemetry) (*parts, error) {
	secret := []byte(cfg.Secret)
	if len(secret) == 0 {
		secret = seal.RandomSecret()
	}
	info, _ := json.Marshal(map[string]string{"name": "mcpgw", "version": buildVersion()})
	creds := &accountCredentials{}
	mgr := upstream.NewManager(upstream.ManagerOptions{
		Credentials:     creds,
		Servers:         cfg.Servers,
		StartTimeout:    time.Duration(cfg.StartTimeout),
		Logger:          logger,
		ClientInfo:      info,
		MaxMessageBytes: int64(cfg.MaxResponseBody),
		LogDir:          filepath.Join(cfg.DataDir, "logs", "mcp"),
		TracerProvider:  tel.TracerProvider,
		MeterProvider:   tel.MeterProvider,
	})

	// On a failure below, what was built is closed again, newest first.
	var undo []func()
	fail := func(err error) (*parts, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return nil, err
	}
	undo = append(undo, func() { mgr.Close(context.Background()) })

	octx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	db, err := openStore(octx, cfg)
	cancel()
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { db.Close() })
	if err := restoreServers(context.Background(), cfg, db, mgr, logger); err != nil {
		return fail(err)
	}
	// The accounts principals connect at servers with oauth. core is
	// set below, before any callback can come.
	var core *gateway.Server
	accounts, err := oauthclient.New(oauthclient.Options{
		PublicURL: cfg.PublicURL,
		Secret:    secret,
		Store:     db,
		Servers:   mgr.ServerConfig,
		Logger:    logger.With("component", "oauth"),
		OnConnected: func(server, principal, elicitationID string) {
			// The first account lets the gateway list the server.
			if st, ok := mgr.Server(server); ok && st.Enabled && st.State != upstream.StateRunning && st.State != upstream.StateStarting {
				if err := mgr.Restart(server); err != nil {
					logger.Warn("restarting a server after an account was connected failed", "server", server, "err", err)
				}
			}
			if core != nil {
				core.AccountConnected(server, elicitationID)
			}
		},
	})
	if err != nil {
		return fail(fmt.Errorf("starting the OAuth client: %w", err))
	}
	creds.oc.Store(accounts)
	mopts := mediastore.Options{
		MaxBytes:     int64(cfg.Media.MaxBytes),
		MaxBlobBytes: int64(cfg.MaxResponseBody), // a decoded blob is smaller than the message it came in
		MaxAge:       time.Duration(cfg.Media.MaxAge),
		Secret:       secret,
		Logger:       logger.With("component", "media"),
	}
	// Replicas on PostgreSQL share the blobs there; one replica on SQLite
	// keeps them in files.
	if pg, ok := db.(*store.Postgres); ok {
		mopts.Blobs = mediaBlobs{pg}
	} else {
		mopts.Dir = filepath.Join(cfg.DataDir, "media")
	}
	media, err := mediastore.New(mopts)
	if err != nil {
		return fail(fmt.Errorf("opening the media store: %w", err))
	}
	undo = append(undo, func() { media.Close() })
	unobserve, err := observeMedia(tel.MeterProvider, media)
	if err != nil {
		return fail(fmt.Errorf("registering the media metrics: %w", err))
	}
	undo = append(undo, unobserve)
	// In a cluster, this replica says it is alive in the shared store, and
	// a session issued by another goes to that one.
	var replicas *cluster.Cluster
	leave := func() {}
	if cfg.Cluster.Enabled {
		id := cfg.Cluster.ReplicaID
		if id == "" {
			if id, err = os.Hostname(); err != nil || id == "" {
				return fail(fmt.Errorf("cluster.replica_id is not set and the host name is unknown: %v", err))
			}
		}
		replicas, err = cluster.New(cluster.Options{ID: id, URL: cfg.Cluster.SelfURL, Secret: secret, Registry: db, Logger: logger.With("component", "cluster"),
			Status: func() json.RawMessage { return serverStates(mgr) }})
		if err != nil {
			return fail(err)
		}
		jctx, cancel := context.WithTimeout(context.Background(), 3*cluster.DefaultLapse)
		err = replicas.Join(jctx)
		cancel()
		if err != nil {
			return fail(err)
		}
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { replicas.Run(rctx); close(done) }()
		leave = sync.OnceFunc(func() { stop(); <-done })
		undo = append(undo, leave)
		logger.Info("joined the cluster", "replica", id, "self_url", cfg.Cluster.SelfURL)
	}
	var finds gateway.FindStore
	if _, announces := db.(serverWatcher); cfg.Cluster.Enabled && announces {
		// Any replica may answer a 2026-07-28 client's tools/list, and
		// the store tells every replica of a principal's new finds.
		finds = db
	}
	core, err = gateway.New(gateway.Options{
		Accounts:            &reviving{oc: accounts, mgr: mgr, last: map[string]time.Time{}},
		Replica:             replicaName(replicas),
		Media:               media,
		MediaConfig:         cfg.Media,
		PublicURL:           cfg.PublicURL,
		Tasks:               db,
		Events:              db,
		Finds:               finds,
		ACL:                 cfg.ACL,
		TaskConfig:          cfg.Tasks,
		Upstreams:           mgr,
		Logger:              logger,
		Version:             buildVersion(),
		CallTimeout:         time.Duration(cfg.CallTimeout),
		Servers:             cfg.Servers,
		Naming:              cfg.Naming,
		Catalog:             cfg.Catalog,
		Resources:           cfg.Resources,
		PageSize:            cfg.PageSize,
		ListChangedDebounce: time.Duration(cfg.ListChangedDebounce),
		Secret:              secret,
		InputTimeout:        time.Duration(cfg.InputTimeout),
		TracerProvider:      tel.TracerProvider,
		MeterProvider:       tel.MeterProvider,
	})
	if err != nil {
		return fail(err)
	}
	undo = append(undo, core.Close)
	authn, err := auth.New(auth.Options{
		Keys:      cfg.Auth.APIKeys,
		Anonymous: cfg.Auth.AnonymousAllowed(),
		JWT:       cfg.Auth.JWT,
		Resource:  cfg.PublicURL + "/mcp",
		Logger:    logger.With("component", "auth"),
	})
	if err != nil {
		return fail(err)
	}
	var proxies []netip.Prefix
	for _, p := range cfg.TrustedProxies {
		pr, err := config.ParseProxy(p)
		if err != nil { // validated with the config; cannot happen
			return fail(err)
		}
		proxies = append(proxies, pr)
	}
	limiter, err := auth.NewRateLimiter(auth.RateLimiterOptions{
		Rate:     cfg.RateLimits.PerPrincipal,
		MaxKeys:  cfg.RateLimits.MaxPrincipals,
		ClientIP: func(r *http.Request) string { return front.ClientIP(r, proxies) },
	})
	if err != nil {
		return fail(err)
	}
	if !limiter.Enabled() {
		limiter = nil
	}
	// With a configured secret, sessions are kept in the database and
	// outlive the process; with a random one their ids die with it, so
	// there is nothing to keep.
	var sessions legacy.SessionStore
	if cfg.Secret != "" {
		sessions = sessionStore{db}
	}
	allowHost := func(h string) bool { return config.HostAllowed(cfg.AllowedHosts, h) }
	allowOrigin := func(o string) bool { return config.OriginAllowed(cfg.AllowedOrigins, o) }
	var modernCluster modern.Cluster
	if replicas != nil {
		modernCluster = replicas
	}
	modernEdge, err := modern.New(modern.Options{
		Cluster:        modernCluster,
		Core:           core,
		Logger:         logger,
		LegacyVersions: legacy.Versions,
		TrustedProxies: proxies,
		StreamAfter:    time.Duration(cfg.StreamAfter),
	})
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { modernEdge.Close(context.Background()) })
	var edgeCluster legacy.Cluster
	if replicas != nil {
		edgeCluster = replicas
	}
	edge, err := legacy.New(legacy.Options{
		Modern:                  modernEdge,
		RateLimit:               limiter,
		TrustedProxies:          proxies,
		Auth:                    authn,
		Core:                    core,
		Logger:                  logger,
		MeterProvider:           tel.MeterProvider,
		AllowHost:               allowHost,
		AllowOrigin:             allowOrigin,
		MaxRequestBody:          int64(cfg.MaxRequestBody),
		IdleTimeout:             time.Duration(cfg.Sessions.IdleTimeout),
		MaxSessions:             cfg.Sessions.Max,
		MaxSessionsPerPrincipal: cfg.Sessions.MaxPerPrincipal,
		Secret:                  secret,
		Store:                   sessions,
		ResumeWindow:            time.Duration(cfg.ResumeWindow),
		StreamAfter:             time.Duration(cfg.StreamAfter),
		Cluster:                 edgeCluster,
		Replica:                 replicaName(replicas),
	})
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { edge.Close(context.Background()) })
	var fromFile []string
	for _, sc := range cfg.Servers {
		fromFile = append(fromFile, sc.Name)
	}
	adm, err := admin.New(admin.Options{
		Accounts:      accounts,
		Core:          core,
		Servers:       mgr,
		Store:         db,
		ConfigServers: fromFile,
		Tokens:        cfg.Admin.Tokens,
		Naming:        cfg.Naming,
		EnvPrefix:     cfg.Admin.EnvPrefix,
		StdioCommands: cfg.Admin.StdioCommands,
		StdioEnv:      cfg.Admin.StdioEnv,
		StdioCwd:      cfg.Admin.StdioCwd,
		LookupEnv:     os.LookupEnv,
		Sessions:      edge,
		Replicas:      replicaList(replicas),
		Logger:        logger.With("component", "admin"),
	})
	if err != nil {
		return fail(err)
	}

	// Host and Origin are checked as on /mcp (DESIGN decision 12; the
	// edge checks its own with the same auth.HostCheck) on /admin, and
	// Host alone on /media, which hosts and Markdown renderers fetch from
	// pages of any origin. /healthz, /readyz and /metrics are not checked:
	// probes and scrapers reach them by addresses no config names (a pod's
	// IP), and they change nothing.
	adminAPI := echo.New()
	adminAPI.HideBanner, adminAPI.HidePort = true, true
	adm.Register(adminAPI)

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	edge.Register(e)
	var adminHandler http.Handler
	if cfg.Admin.Listen != "" {
		ae := echo.New()
		ae.HideBanner, ae.HidePort = true, true
		hosts, origins := adminListenerAllows(cfg)
		mountAdmin(ae, &auth.HostCheck{
			AllowHost:   func(h string) bool { return config.HostAllowed(hosts, h) },
			AllowOrigin: func(o string) bool { return config.OriginAllowed(origins, o) },
			OnRefuse:    writeRefusal,
		}, adminAPI)
		// Metrics are for operators: with a private admin listener, they
		// are served there only.
		ae.GET("/metrics", echo.WrapHandler(tel.MetricsHandler))
		adminHandler = auth.RequireContentLength(writeRefusal)(ae)
	} else {
		mountAdmin(e, &auth.HostCheck{AllowHost: allowHost, AllowOrigin: allowOrigin, OnRefuse: writeRefusal}, adminAPI)
		e.GET("/metrics", echo.WrapHandler(tel.MetricsHandler))
	}
	// /healthz: the process serves. /readyz: it should get traffic (the
	// store answers, every required server runs, it is not draining).
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	ready := &readiness{db: db, servers: mgr, logger: logger.With("component", "readiness")}
	e.GET("/readyz", ready.serve)
	// RFC 9728: where clients learn how to get a token (JWTs only).
	meta := echo.WrapHandler(authn.MetadataHandler())
	for _, path := range authn.MetadataPaths() {
		e.Match([]string{http.MethodGet, http.MethodHead, http.MethodOptions}, path, meta)
	}
	// The connect links and the callback are followed by browsers, which
	// carry no credentials: the sealed link and state are the capability.
	oh := echo.WrapHandler((&auth.HostCheck{AllowHost: allowHost, OnRefuse: writeRefusal}).Middleware(accounts.Handler()))
	e.GET("/oauth/*", oh)
	ch := echo.WrapHandler((&auth.HostCheck{AllowHost: allowHost, AllowOrigin: allowOrigin, OnRefuse: writeRefusal}).Middleware(authn.Middleware(connections(accounts, mgr))))
	e.Match([]string{http.MethodGet, http.MethodDelete}, "/oauth/connections", ch)
	e.Match([]string{http.MethodGet, http.MethodDelete}, "/oauth/connections/:server", ch)
	// The media URL is its own capability: no Authorization on /media.
	mediaHosts := &auth.HostCheck{AllowHost: allowHost, OnRefuse: writeRefusal}
	mh := echo.WrapHandler(mediaHosts.Middleware(media.Handler(mediastore.HandlerOptions{RequireSignature: cfg.Media.SignedURLs})))
	e.Any("/media/:name", mh)
	// Every route of both listeners: no body framed by Transfer-Encoding
	// (auth.RequireContentLength says why).
	var handler http.Handler = e
	if replicas != nil {
		// A forwarding token that does not come from a replica of this
		// cluster is refused before any route sees it.
		handler = replicas.Middleware(handler)
	}
	handler = auth.RequireContentLength(writeRefusal)(handler)

	mgr.Start()
	return &parts{mgr: mgr, db: db, media: media, unobserve: unobserve, core: core, edge: edge, modern: modernEdge, adm: adm, ready: ready, handler: handler, adminHandler: adminHandler, leave: leave}, nil
}

// serverStates is this replica's view of its servers for the others:
// name → state.
func serverStates(mgr *upstream.Manager) json.RawMessage {
	states := map[string]string{}
	for _, st := range mgr.Servers() {
		states[st.Name] = string(st.State)
	}
	b, _ := json.Marshal(states)
	return b
}

// replicaList is what the admin API shows of the cluster's replicas, or
// nil when the gateway runs alone.
func replicaList(c *cluster.Cluster) func() []store.Replica {
	if c == nil {
		return nil
	}
	return c.Replicas
}

// replicaName is the name session ids carry: the cluster's, or "" (the
// edge's default) when the gateway runs alone.
func replicaName(c *cluster.Cluster) string {
	if c == nil {
		return ""
	}
	return c.ID()
}

// mountAdmin serves the admin API (its own echo router, api) under /admin
// on e, behind check.
func mountAdmin(e *echo.Echo, check *auth.HostCheck, api *echo.Echo) {
	h := echo.WrapHandler(check.Middleware(api))
	e.Any("/admin", h)
	e.Any("/admin/*", h)
}

// adminListenerAllows returns the Host and Origin values the admin
// listener (admin.listen) accepts: those of /mcp, its own address, and
// the loopback names, so that an operator reaches it by the address it
// listens on even when allowed_hosts names only the public one. None of
// these is a name a DNS-rebinding page can take.
func adminListenerAllows(cfg *config.Config) (hosts, origins []string) {
	hosts = append(hosts, cfg.AllowedHosts...)
	origins = append(origins, cfg.AllowedOrigins...)
	own := []string{"localhost", "127.0.0.1", "[::1]"}
	if host, _, err := net.SplitHostPort(cfg.Admin.Listen); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			if ip != nil && ip.To4() == nil {
				host = "[" + host + "]"
			}
			own = append(own, host)
		}
	}
	for _, h := range own {
		// Without a port: any port, so that admin.listen's port 0 works.
		hosts = append(hosts, h)
		origins = append(origins, "http://"+h, "https://"+h)
	}
	return hosts, origins
}

// writeRefusal writes a refusal before dispatch (auth's middleware) in
// the shape of its route, on either listener: on /mcp the edge's JSON-RPC
// error, which MCP clients read; everywhere else (/admin, /media,
// /healthz, /metrics) the admin API's {"message"}, which is plain JSON
// and no JSON-RPC answer to a request that was none.
func writeRefusal(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if r.URL.Path == "/mcp" {
		legacy.WriteRefusal(w, r, status, msg)
		return
	}
	admin.WriteRefusal(w, r, status, msg)
}

// database is the store as the parts use it: *store.SQLite or
// *store.Postgres, which behave alike (the store's contract tests).
type database interface {
	gateway.TaskStore
	gateway.EventStore
	admin.ServerStore
	PutSession(context.Context, store.Session) error
	GetSession(context.Context, string) (store.Session, error)
	ListSessions(context.Context, time.Time, int) ([]store.Session, error)
	TouchSessions(context.Context, []store.SessionTouch) error
	DeleteSessions(context.Context, ...string) error
	DeleteIdleSessions(context.Context, time.Time) (int, error)
	cluster.Registry
	oauthclient.Store
	gateway.FindStore
	Ping(context.Context) error
	Close() error
}

var (
	_ database = (*store.SQLite)(nil)
	_ database = (*store.Postgres)(nil)
)

// storeOpenTimeout bounds opening the store at start: connecting (each
// attempt is bounded on its own too), waiting for another replica's
// migrations, and applying ours.
const storeOpenTimeout = 2 * time.Minute

// openStore opens the store cfg names.
func openStore(ctx context.Context, cfg *config.Config) (database, error) {
	switch cfg.Store.Driver {
	case config.StorePostgres:
		return store.OpenPostgres(ctx, store.PostgresOptions{DSN: cfg.Store.DSN, MaxConns: cfg.Store.MaxConns})
	case config.StoreSQLite, "":
		return store.Open(ctx, cfg.DatabasePath())
	}
	// Validated with the config; cannot happen.
	return nil, fmt.Errorf("store.driver %q is not one of sqlite, postgres", cfg.Store.Driver)
}

// mediaBlobs is the media store's Blobs on PostgreSQL. store.Media and
// mediastore.Blob have the same fields, so each converts to the other.
type mediaBlobs struct{ db *store.Postgres }

var _ mediastore.Blobs = mediaBlobs{}

func (b mediaBlobs) PutBlob(ctx context.Context, bl mediastore.Blob) (bool, mediastore.Totals, error) {
	created, t, err := b.db.PutMedia(ctx, store.Media(bl))
	return created, mediastore.Totals(t), err
}

func (b mediaBlobs) TouchBlob(ctx context.Context, id, mimeType string, at time.Time) (bool, error) {
	return b.db.TouchMedia(ctx, id, mimeType, at)
}

func (b mediaBlobs) UseBlob(ctx context.Context, id string, at time.Time) error {
	return b.db.UseMedia(ctx, id, at)
}

func (b mediaBlobs) GetBlob(ctx context.Context, id string) (mediastore.Blob, error) {
	m, err := b.db.GetMedia(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return mediastore.Blob{}, mediastore.ErrNotFound
	}
	return mediastore.Blob(m), err
}

func (b mediaBlobs) DeleteBlob(ctx context.Context, id string) (mediastore.Totals, error) {
	t, err := b.db.DeleteMedia(ctx, id)
	return mediastore.Totals(t), err
}

func (b mediaBlobs) DeleteExpiredBlobs(ctx context.Context, storedBy time.Time) (int, mediastore.Totals, error) {
	n, t, err := b.db.DeleteExpiredMedia(ctx, storedBy)
	return n, mediastore.Totals(t), err
}

func (b mediaBlobs) TrimBlobs(ctx context.Context, maxBytes int64) ([]string, mediastore.Totals, error) {
	ids, t, err := b.db.TrimMedia(ctx, maxBytes)
	return ids, mediastore.Totals(t), err
}

// sessionStore is the legacy edge's SessionStore on the database.
type sessionStore struct{ db database }

var _ legacy.SessionStore = sessionStore{}

// The store takes whatever the edge keeps of a client.
var _ [store.MaxSessionJSON - legacy.MaxClientJSON]struct{}

func (s sessionStore) PutSession(ctx context.Context, rec legacy.SessionRecord) error {
	return s.db.PutSession(ctx, store.Session{
		ID: rec.ID, Principal: rec.Principal, Version: rec.Version,
		Capabilities: rec.Capabilities, ClientInfo: rec.ClientInfo,
		CreatedAt: rec.Created, LastActiveAt: rec.LastActive,
	})
}

func (s sessionStore) GetSession(ctx context.Context, id string) (legacy.SessionRecord, bool, error) {
	sess, err := s.db.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return legacy.SessionRecord{}, false, nil
	}
	if err != nil {
		return legacy.SessionRecord{}, false, err
	}
	return sessionRecord(sess), true, nil
}

func (s sessionStore) ListSessions(ctx context.Context, since time.Time, limit int) ([]legacy.SessionRecord, error) {
	list, err := s.db.ListSessions(ctx, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]legacy.SessionRecord, len(list))
	for i, sess := range list {
		out[i] = sessionRecord(sess)
	}
	return out, nil
}

func sessionRecord(sess store.Session) legacy.SessionRecord {
	return legacy.SessionRecord{
		ID: sess.ID, Principal: sess.Principal, Version: sess.Version,
		Capabilities: sess.Capabilities, ClientInfo: sess.ClientInfo,
		Created: sess.CreatedAt, LastActive: sess.LastActiveAt,
	}
}

func (s sessionStore) TouchSessions(ctx context.Context, lastActive map[string]time.Time) error {
	touches := make([]store.SessionTouch, 0, len(lastActive))
	for id, at := range lastActive {
		touches = append(touches, store.SessionTouch{ID: id, LastActiveAt: at})
	}
	return s.db.TouchSessions(ctx, touches)
}

func (s sessionStore) DeleteSessions(ctx context.Context, ids ...string) error {
	return s.db.DeleteSessions(ctx, ids...)
}

func (s sessionStore) DeleteIdleSessions(ctx context.Context, before time.Time) error {
	_, err := s.db.DeleteIdleSessions(ctx, before)
	return err
}

// Shutdown budgets after the drain: for the HTTP server to flush and close
// its connections, and for the upstreams to stop (a stdio child gets 3s
// after stdin closes and 3s after SIGTERM before SIGKILL).
const (
	httpFlush    = 2 * time.Second
	upstreamStop = 10 * time.Second
)

// shutdown stops the parts in order: /readyz turns unready at once, then
// the edge (no new requests; in-flight calls drain within grace, then are
// cancelled), then srv's connections (if srv is not nil), then the
// upstreams (children stopped and reaped, HTTP sessions deleted). Each
// step has its own budget, so a drain that used all of the grace still
// lets the last answers flush and the children stop.
func (p *parts) shutdown(ctx context.Context, grace time.Duration, srv *http.Server) error {
	p.ready.drain()
	// The other replicas stop sending this one's sessions here: they
	// end with it.
	p.leave()
	var errs []error
	step := func(d time.Duration, f func(context.Context) error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		defer cancel()
		if err := f(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	step(grace, func(c context.Context) error {
		// Both eras' edges stop taking work at once, then drain together.
		modernDone := make(chan error, 1)
		go func() { modernDone <- p.modern.Close(c) }()
		err := p.edge.Close(c)
		if merr := <-modernDone; err == nil {
			err = merr
		}
		if err != nil {
			return fmt.Errorf("closing the MCP endpoint: %w", err)
		}
		return nil
	})
	if srv != nil {
		step(httpFlush, func(c context.Context) error {
			if err := srv.Shutdown(c); err != nil {
				srv.Close()
				return fmt.Errorf("closing HTTP connections: %w", err)
			}
			return nil
		})
	}
	p.core.Close()
	step(upstreamStop, func(c context.Context) error {
		if err := p.mgr.Close(c); err != nil {
			return fmt.Errorf("stopping servers: %w", err)
		}
		return nil
	})
	if err := p.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the database: %w", err))
	}
	p.unobserve()
	if err := p.media.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the media store: %w", err))
	}
	return errors.Join(errs...)
}

// restoreServers adds to mgr, before it starts, the servers registered
// through the admin API in an earlier run, and applies the admin API's
// enabled switches to the config file's servers. A record that no longer
// validates (the rules or the environment changed) is skipped with an
// error in the log and kept, so that nothing is lost; one whose name the
// config file now uses yields to the file.
func restoreServers(ctx context.Context, cfg *config.Config, db admin.ServerStore, mgr *upstream.Manager, logger *slog.Logger) error {
	recs, err := db.ListServers(ctx)
	if err != nil {
		return fmt.Errorf("reading the registered servers: %w", err)
	}
	inFile := map[string]bool{}
	for _, sc := range cfg.Servers {
		inFile[sc.Name] = true
	}
	for _, rec := range recs {
		switch {
		case inFile[rec.Name]:
			if rec.Source == store.ServerSourceAPI {
				logger.Warn("a server registered through the admin API has the name of a server in the config file; the file's is used", "server", rec.Name)
			}
			if rec.Enabled != nil {
				if err := mgr.SetEnabled(rec.Name, *rec.Enabled); err != nil {
					return fmt.Errorf("switching server %q: %w", rec.Name, err)
				}
			}
		case rec.Source == store.ServerSourceAPI:
			// The admin API's own rules: a record they no longer allow
			// (or allowed before they were as strict) runs nothing.
			srv, err := registered(cfg, rec)
			if err != nil {
				logger.Error("skipping a server registered through the admin API", "server", rec.Name, "problem", err.Error())
				continue
			}
			if err := mgr.Add(srv); err != nil {
				return fmt.Errorf("adding server %q: %w", rec.Name, err)
			}
		default:
			// The admin API's switch for a config server that left the
			// file: nothing to apply.
		}
	}
	return nil
}
