package legacy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/metric"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/telemetry"
)

// The HTTP headers of the streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-ID"
)

// Defaults for the Options fields that have no config counterpart.
const (
	DefaultKeepAlive       = 15 * time.Second
	DefaultResumeWindow    = 5 * time.Minute
	DefaultStreamAfter     = time.Second
	DefaultMaxStreamEvents = 256
	DefaultMaxStreamBytes  = 4 << 20
	DefaultMaxInFlight     = 64
	DefaultWriteTimeout    = 30 * time.Second
)

// maxFinishedStreams caps the finished, not fully written streams a
// session keeps for resumption; beyond it the oldest is dropped.
const maxFinishedStreams = 32

// maxEnded bounds Handler.ended.
const maxEnded = 10000

// Cluster is how a Handler reaches the replica that holds a session it
// does not (cluster.Cluster).
type Cluster interface {
	// Forward sends r, whose body was read into body (nil: none), to the
	// replica named, and copies its answer to w; false, with nothing
	// written, when that replica is gone.
	Forward(w http.ResponseWriter, r *http.Request, body []byte, replica string) bool
	// Forwarded reports whether r came from another replica.
	Forwarded(r *http.Request) bool
}

// Options configures a Handler.
type Options struct {
	// Core answers the requests. Required.
	Core *gateway.Server
	// Logger receives the edge's logs. Nil discards them.
	Logger *slog.Logger
	// MeterProvider makes the edge's metrics: the sessions open, their
	// durations, and the requests refused by auth and by rate and session
	// limits. If nil, the global provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// AllowHost reports whether a Host header value (host or host:port, as
	// the client sent it) may reach /mcp; others get 403 (DNS rebinding).
	// Nil allows every host.
	AllowHost func(host string) bool
	// AllowOrigin reports whether an Origin header value may reach /mcp;
	// others get 403. A request without Origin is always allowed. Nil
	// allows every origin.
	AllowOrigin func(origin string) bool
	// Auth names who sent a request, after the Host and Origin checks; a
	// request it refuses gets 401 with its WWW-Authenticate challenge and
	// a JSON-RPC error. Sessions belong to the principal it names. Nil
	// leaves Principal to decide.
	Auth *auth.Authenticator
	// Principal names who sent a request when Auth is nil (tests). Nil
	// gives gateway.Anonymous to everyone.
	Principal func(r *http.Request) string
	// MaxRequestBody caps a POST body; larger ones get 413. If zero,
	// config.DefaultMaxRequestBody.
	MaxRequestBody int64
	// IdleTimeout ends a session with no call in flight, no input request
	// waiting for the client and no connected stream for this long. If
	// zero, config.DefaultSessionIdle.
	IdleTimeout time.Duration
	// MaxSessions caps the sessions of this Handler (503 above it), and
	// MaxSessionsPerPrincipal those of one principal (429 above it). If
	// zero, config.DefaultMaxSessions and config.DefaultMaxPerPrincipal.
	MaxSessions, MaxSessionsPerPrincipal int
	// MaxInFlight caps the requests in flight on one session; more get a
	// JSON-RPC error with gateway.CodeRateLimited, and a batch with more
	// requests than this is refused whole. If zero, DefaultMaxInFlight.
	MaxInFlight int
	// Secret keys the sealed session ids; at least seal.MinSecretLen bytes.
	// Replicas that share it can open each other's ids. If nil, a random
	// secret is made, and ids die with the process.
	Secret []byte
	// Store keeps the sessions' records, so that a Handler with the same
	// Secret over the same store (the gateway after a restart) serves
	// them. Nil: sessions live only as long as this Handler.
	Store SessionStore
	// RateLimit bounds each principal's requests (429 with Retry-After
	// above it). Nil: no limit.
	RateLimit *auth.RateLimiter
	// TrustedProxies are the peers whose X-Forwarded-Proto and
	// X-Forwarded-Host say how the client reached the gateway (for its
	// media links). If empty, nobody's are believed.
	TrustedProxies []netip.Prefix
	// Replica names this replica inside the session ids it issues. Alone
	// (no Cluster), a Handler serves any session its Store holds, whatever
	// issued it. In a cluster it serves only its own: another replica's
	// go to that replica (Cluster), and are lost with it. If empty, the
	// host name.
	Replica string
	// Cluster reaches the other replicas of a gateway that shares its
	// Store with them. Nil: the gateway runs alone.
	Cluster Cluster
	// KeepAlive is the interval of SSE keep-alive comments on a stream
	// that has nothing else to send. If zero, DefaultKeepAlive.
	KeepAlive time.Duration
	// ResumeWindow is how long a finished stream that was not fully
	// written stays resumable, and how long a call's stream may go without
	// a connection before the call is cancelled (the client is then taken
	// to have gone). If zero, DefaultResumeWindow.
	ResumeWindow time.Duration
	// StreamAfter is how long a forwarded request may run before its
	// answer becomes an event stream: with a priming event on 2025-11-25
	// sessions, so that the client can resume it, and keep-alive comments.
	// One that ends sooner, with nothing but its response for the client,
	// is answered as JSON. If zero, DefaultStreamAfter.
	StreamAfter time.Duration
	// MaxStreamEvents and MaxStreamBytes bound one stream's event buffer;
	// the oldest events go first, never a response nor the last one. If
	// zero, DefaultMaxStreamEvents and DefaultMaxStreamBytes.
	MaxStreamEvents int
	MaxStreamBytes  int64
	// WriteTimeout bounds each write to a stream's connection; a client
	// that does not read for this long loses the connection (not the
	// stream: it can resume). If zero, DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Modern serves the POSTs that front.Classify finds of the 2026-07-28
	// era, after this Handler's checks (Host, Origin, auth, rate limit,
	// Accept, body size), parsed, with the principal in the request's
	// context. Nil: they get the legacy edge's errors.
	Modern ModernEdge
}

// ModernEdge is the edge of the 2026-07-28 era (gateway/modern).
type ModernEdge interface {
	Serve(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message)
}

// Handler serves /mcp for legacy-era clients. Create it with New, mount it
// with Register and stop it with Close. It is safe for concurrent use.
type Handler struct {
	opts      Options
	core      *gateway.Server
	logger    *slog.Logger
	sealer    *seal.Sealer
	principal func(*http.Request) string
	// epoch marks the event ids of the sessions this Handler restored.
	epoch  string
	meters meters
	site   auth.HostCheck // AllowHost and AllowOrigin; refusals by WriteRefusal

	mu           sync.Mutex
	state        state
	sessions     map[string]*session // by short id
	byToken      map[string]*session // by the Mcp-Session-Id issued
	perPrincipal map[string]int
	// ended are the short ids of the most recent sessions that ended for
	// good here, added with their removal from the table: a restore that
	// read a record before its session ended must not admit it again
	// (admit). Such a restore is at most storeTimeout behind.
	ended *lru.Cache[string, struct{}]

	// calls counts the core calls in flight; conns the HTTP
	// handlers in progress. Both are only added to under mu, in the
	// states that allow it, so Close's Wait never races an Add.
	calls sync.WaitGroup
	conns sync.WaitGroup
	// taken are the connections GET streams took over (takeover.go),
	// counted in conns until their pumps are done.
	taken map[net.Conn]struct{}

	stopJanitor chan struct{}
	janitorDone chan struct{}
	stopWatch   func()

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// state is where a Handler is in its life.
type state int

const (
	running  state = iota
	draining       // Close called: no new sessions, calls or GET streams
	stopped        // every session ended
)

// New returns a Handler for opts and starts its janitor and its watch of
// the core's list changes.
func New(opts Options) (*Handler, error) {
	if opts.Core == nil {
		return nil, errors.New("legacy: Options.Core is required")
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"MaxRequestBody", opts.MaxRequestBody < 0},
		{"IdleTimeout", opts.IdleTimeout < 0},
		{"MaxSessions", opts.MaxSessions < 0},
		{"MaxSessionsPerPrincipal", opts.MaxSessionsPerPrincipal < 0},
		{"MaxInFlight", opts.MaxInFlight < 0},
		{"KeepAlive", opts.KeepAlive < 0},
		{"ResumeWindow", opts.ResumeWindow < 0},
		{"StreamAfter", opts.StreamAfter < 0},
		{"MaxStreamEvents", opts.MaxStreamEvents < 0},
		{"MaxStreamBytes", opts.MaxStreamBytes < 0},
		{"WriteTimeout", opts.WriteTimeout < 0},
	} {
		if f.neg {
			return nil, fmt.Errorf("legacy: Options.%s must not be negative", f.name)
		}
	}
	setDefault(&opts.MaxRequestBody, config.DefaultMaxRequestBody)
	setDefault(&opts.IdleTimeout, config.DefaultSessionIdle)
	setDefault(&opts.MaxSessions, config.DefaultMaxSessions)
	setDefault(&opts.MaxSessionsPerPrincipal, config.DefaultMaxPerPrincipal)
	setDefault(&opts.MaxInFlight, DefaultMaxInFlight)
	setDefault(&opts.KeepAlive, DefaultKeepAlive)
	setDefault(&opts.ResumeWindow, DefaultResumeWindow)
	setDefault(&opts.StreamAfter, DefaultStreamAfter)
	setDefault(&opts.MaxStreamEvents, DefaultMaxStreamEvents)
	setDefault(&opts.MaxStreamBytes, DefaultMaxStreamBytes)
	setDefault(&opts.WriteTimeout, DefaultWriteTimeout)
	if opts.Secret == nil {
		opts.Secret = seal.RandomSecret()
	}
	sealer, err := seal.New(opts.Secret, "session")
	if err != nil {
		return nil, fmt.Errorf("legacy: Options.Secret: %w", err)
	}
	if opts.Replica == "" {
		opts.Replica, _ = os.Hostname()
		if opts.Replica == "" {
			opts.Replica = "mcpgw"
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	principal := opts.Principal
	switch {
	case opts.Auth != nil:
		principal = func(r *http.Request) string {
			p, _ := auth.FromContext(r.Context())
			return p.Name
		}
	case principal == nil:
		principal = func(*http.Request) string { return gateway.Anonymous }
	}
	ended, _ := lru.New[string, struct{}](maxEnded) // fails only for a size <= 0
	h := &Handler{
		opts:         opts,
		core:         opts.Core,
		logger:       logger.With("component", "legacy"),
		sealer:       sealer,
		principal:    principal,
		epoch:        newEpoch(),
		site:         auth.HostCheck{AllowHost: opts.AllowHost, AllowOrigin: opts.AllowOrigin, OnRefuse: WriteRefusal},
		sessions:     make(map[string]*session),
		byToken:      make(map[string]*session),
		taken:        make(map[net.Conn]struct{}),
		perPrincipal: make(map[string]int),
		ended:        ended,
		stopJanitor:  make(chan struct{}),
		janitorDone:  make(chan struct{}),
		closed:       make(chan struct{}),
	}
	if err := h.newMeters(opts.MeterProvider); err != nil {
		h.logger.Error("creating the edge's metrics failed; some are off", "err", err)
	}
	h.stopWatch = h.core.Watch(h.listChanged)
	go h.janitor()
	return h, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Register mounts POST, GET and DELETE /mcp on e. Other methods on /mcp
// get 405 with an Allow header.
func (h *Handler) Register(e *echo.Echo) {
	e.POST("/mcp", h.post, h.guard)
	e.GET("/mcp", h.get, h.guard)
	e.DELETE("/mcp", h.delete, h.guard)
	e.Match([]string{
		http.MethodConnect, http.MethodHead, http.MethodOptions, http.MethodPatch,
		http.MethodPut, http.MethodTrace, echo.PROPFIND, echo.REPORT,
	}, "/mcp", h.notAllowed, h.guard)
}

// guard runs before every /mcp handler: it counts the handler for Close and
// checks Host and Origin before anything else (MCP 2025-11-25,
// basic/transports, Security Warning: DNS rebinding), by the
// auth.HostCheck path the admin API's routes take too.
func (h *Handler) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, w := c.Request(), c.Response()
		if !h.site.Admit(w, r) {
			h.logger.Debug("refused a request for its host or origin", "host", r.Host, "origin", r.Header.Get("Origin"))
			return nil
		}
		h.mu.Lock()
		if h.state == stopped {
			h.mu.Unlock()
			writeShuttingDown(w, jsonrpc.ID{})
			return nil
		}
		h.conns.Add(1)
		h.mu.Unlock()
		defer h.conns.Done()
		if h.opts.Auth != nil {
			p, err := h.opts.Auth.Authenticate(r)
			if err != nil {
				status, reason := http.StatusUnauthorized, "unauthenticated"
				if e, ok := errors.AsType[*auth.Error](err); ok && e.Status != 0 {
					status = e.Status // 403 for a token without the needed scopes
				}
				if status == http.StatusForbidden {
					reason = "insufficient_scope"
				}
				h.meters.denied.Add(r.Context(), 1, metric.WithAttributes(telemetry.Reason.String(reason)))
				w.Header().Set("WWW-Authenticate", h.opts.Auth.Challenge(err))
				writeError(w, status, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, err.Error(), nil)
				return nil
			}
			c.SetRequest(r.WithContext(auth.NewContext(r.Context(), p)))
		}
		// A request another replica forwarded was counted there.
		if h.opts.RateLimit != nil && (h.opts.Cluster == nil || !h.opts.Cluster.Forwarded(r)) {
			if wait, ok := h.opts.RateLimit.Allow(c.Request()); !ok {
				h.rejected(r.Context(), "principal")
				secs := auth.RetryAfter(wait)
				w.Header().Set("Retry-After", secs)
				writeError(w, http.StatusTooManyRequests, jsonrpc.ID{}, gateway.CodeRateLimited,
					"too many requests from this caller; retry after "+secs+"s (rate_limits.per_principal)", map[string]string{"retryAfter": secs})
				return nil
			}
		}
		return next(c)
	}
}

// WriteRefusal writes a refusal of a request to /mcp made before it is
// read (a foreign Host or Origin, a body framed by Transfer-Encoding):
// a JSON-RPC error with a null id and status, which MCP clients read. Its
// signature is auth.HostCheck's OnRefuse.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	writeError(w, status, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, msg, nil)
}

func (h *Handler) notAllowed(c echo.Context) error {
	w := c.Response()
	w.Header().Set("Allow", "GET, POST, DELETE")
	writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("method %s is not allowed on /mcp: use POST for messages, GET for the event stream, DELETE to end a session", c.Request().Method), nil)
	return nil
}

// Close stops the Handler. New sessions, requests and GET streams get 503
// at once; calls in flight may finish until ctx ends, and are then
// cancelled (their clients get a JSON-RPC error saying so). Then every
// session ends and every stream closes, and Close waits for the stream
// writers until ctx ends. It stops the janitor and the watch of the core.
// Close is idempotent; it returns ctx.Err() when ctx ended before
// everything finished.
func (h *Handler) Close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		defer close(h.closed)
		h.mu.Lock()
		h.state = draining
		h.mu.Unlock()
		h.stopWatch()
		h.meters.unregister()
		close(h.stopJanitor)
		<-h.janitorDone

		var err error
		if !waitCtx(ctx, &h.calls) {
			err = ctx.Err()
			for _, s := range h.snapshot() {
				s.cancelCalls(errShutdown)
			}
			h.calls.Wait() // the core returns promptly once cancelled
		}

		h.mu.Lock()
		h.state = stopped
		h.mu.Unlock()
		// The sessions live on in the store, as last used now.
		ss := h.snapshot()
		h.persist(ss, time.Now())
		for _, s := range ss {
			h.end(s, errShutdown)
		}
		if !waitCtx(ctx, &h.conns) {
			if err == nil {
				err = ctx.Err()
			}
			h.closeTaken()
		}
		h.closeErr = err
	})
	select {
	case <-h.closed:
		return h.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitCtx waits for wg until ctx ends and reports whether wg finished.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// SessionInfo describes one session, for the admin API.
type SessionInfo struct {
	// ID is the session's short id (its random part in hex), the one in
	// logs; it is not the Mcp-Session-Id token, which is a credential.
	ID              string
	Principal       string
	ProtocolVersion string
	// ClientName and ClientVersion are from the client's initialize.
	ClientName    string
	ClientVersion string
	Created       time.Time
	LastActive    time.Time
	// InFlight counts the session's requests being answered.
	InFlight int
	// Stream reports whether a GET stream is connected.
	Stream bool
}

// Sessions returns the live sessions, oldest first.
func (h *Handler) Sessions() []SessionInfo {
	ss := h.snapshot()
	out := make([]SessionInfo, 0, len(ss))
	for _, s := range ss {
		s.mu.Lock()
		out = append(out, SessionInfo{
			ID:              s.key,
			Principal:       s.principal,
			ProtocolVersion: s.version,
			ClientName:      s.clientName,
			ClientVersion:   s.clientVersion,
			Created:         s.created,
			LastActive:      s.lastActive,
			InFlight:        len(s.calls),
			Stream:          s.standalone != nil && s.standalone.att != nil,
		})
		s.mu.Unlock()
	}
	sortInfos(out)
	return out
}

// writeError writes a JSON-RPC error response with an HTTP status.
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int, msg string, data any) {
	front.WriteJSON(w, status, errorMessage(id, jsonrpc.NewError(code, msg, data)))
}

// writeShuttingDown answers that the gateway takes no new work.
func writeShuttingDown(w http.ResponseWriter, id jsonrpc.ID) {
	refuseShutdown.send(w, id)
}

// checkVersionHeader checks MCP-Protocol-Version (MCP 2025-11-25,
// basic/transports): an unsupported value is 400, with id (a POST's
// request id, or zero) echoed. A missing header is
// taken as the session's version, since 2025-03-26 clients do not send
// it. It reports whether the request may go on.
func checkVersionHeader(w http.ResponseWriter, r *http.Request, id jsonrpc.ID) bool {
	v := r.Header.Get(HeaderProtocolVersion)
	if v == "" || supported(v) {
		// A supported version that differs from the session's is not an
		// error (the spec's 400 is for invalid or unsupported versions);
		// the session's answers stay encoded for the version it
		// negotiated.
		return true
	}
	writeError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("unsupported MCP-Protocol-Version %q: this endpoint speaks %s; initialize with one of them", v, strings.Join(Versions, ", ")),
		map[string]any{"supported": Versions, "requested": v})
	return false
}
