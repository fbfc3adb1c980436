package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/telemetry"
)

// Protocol versions of the legacy era, newest first. LatestProtocolVersion is
// what a Client asks for in initialize.
const (
	LatestProtocolVersion = "2025-11-25"
	protocol20250618      = "2025-06-18"
	protocol20250326      = "2025-03-26"
	protocol20241105      = "2024-11-05"
)

// supportedVersions are the versions a Client accepts from a server.
var supportedVersions = []string{LatestProtocolVersion, protocol20250618, protocol20250326, protocol20241105}

// Limits of tools/list pagination (PROTOCOL.md point 3).
const maxListPages = 50

// closeTimeout bounds the cancellation notice sent when a call's context
// ends, which must outlive that context.
const closeTimeout = 5 * time.Second

// related identifies the request of ours that a server message belongs to,
// when the transport knows it (the message came on that request's POST
// stream). The zero value means "not related to any request we know".
type related = jsonrpc.ID

// transport moves JSON-RPC messages between a Client and one server.
//
// The Client calls start once, then send from any number of goroutines, then
// close. Implementations serialize their own writes.
type transport interface {
	// start connects (spawns the process, opens the event stream) and from
	// then on passes every message the server sends to recv, which must not
	// block for long. rel is the id of our request whose stream carried the
	// message, or the zero ID. start returns when the transport can send.
	start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error
	// send delivers m. A transport whose answers travel on a channel tied to
	// the message (streamable HTTP) reads that channel to its end, passing
	// each message to recv with rel = m.ID, before it returns; for such a
	// transport a request whose channel ends without its response is an
	// error. It returns errSessionExpired when the server no longer knows
	// the session, so that the Client initializes again.
	send(ctx context.Context, m *jsonrpc.Message) error
	// negotiated tells the transport the protocol version initialize
	// settled on, so that it sends MCP-Protocol-Version from now on,
	// starting with notifications/initialized. It does no I/O.
	negotiated(version string)
	// ready tells the transport that the handshake finished (initialized
	// was sent), so that it opens what it opens then: the streamable-HTTP
	// GET stream.
	ready(ctx context.Context)
	// close stops the transport within ctx and waits for what it started.
	// It may be called more than once and concurrently with send.
	close(ctx context.Context) error
	// done is closed when the transport ended by itself or by close; err
	// then reports why (nil after a clean close).
	done() <-chan struct{}
	err() error
}

// errSessionExpired is returned by a transport's send when the server
// answered that the session is gone (404, or a TypeScript SDK's 400 "No valid
// session ID").
var errSessionExpired = errors.New("upstream session expired")

// CallHooks receive what a server sends that belongs to one call: over
// streamable HTTP, the messages on that call's POST stream; over stdio and
// legacy SSE, a progress notification with the call's progress token, and
// any other request or call-scoped notification while this is the only
// call in flight with hooks (see Client.hooksFor). A caller that cannot
// relay anything should leave Notify and Request nil (or pass nil hooks),
// so as not to make other calls' messages ambiguous; hooks with only a
// Header relay nothing and claim no message.
type CallHooks struct {
	// Notify receives notifications tied to the call (progress, log
	// messages). Nil drops them.
	Notify func(m *jsonrpc.Message)
	// Request answers a server-to-client request tied to the call
	// (elicitation, sampling, roots). Nil leaves it to the Client's
	// OnRequest.
	Request RequestHandler
	// Header holds the headers of the client's request that the call
	// serves, as the edge received it. The http and sse transports copy
	// onto the POST that carries the call those the server's
	// forward_headers name (config.Server.ForwardHeaders; names match
	// case-insensitively, all values are copied), except credentials
	// (Authorization, Cookie, Proxy-Authorization), the transports' own
	// headers (traceparent and tracestate among them: the POST carries
	// the call span's own, whose parent is the client's) and the server's
	// configured ones, which always win. Nothing else of the call carries
	// them: not its cancellation, not a resumed stream's GET, not an
	// initialize after the session expired. Over stdio, and for a server
	// without forward_headers, it is ignored. It is read, never changed.
	// Nil forwards nothing.
	Header http.Header
	// Capabilities are the client capabilities the call's client declared
	// (raw JSON; nil when unknown). A server of the modern era is told,
	// on each request, those of them the gateway can serve on the call's
	// behalf; a legacy server ignores them (it learnt the gateway's own at
	// initialize).
	Capabilities json.RawMessage
	// LogLevel is the lowest level of the log messages the call's client
	// asked for with this request ("" for none), which a modern server is
	// told on the request. A legacy server ignores it.
	LogLevel string
	// TakesInput says the call's client takes an input_required result
	// (it speaks 2026-07-28): a modern server is then told the input
	// capabilities the client declared (elicitation, sampling, roots) and
	// may answer input_required, which Call returns with its resultType.
	// Otherwise the server is told of none, and such an answer is an
	// error.
	TakesInput bool
	// TakesTasks says the call's client declared the tasks extension
	// (io.modelcontextprotocol/tasks) and takes a task result: a modern
	// server is then told the extension (and no other of the client's)
	// and may answer resultType "task", which Call returns with its
	// resultType. Otherwise such an answer is an error.
	TakesTasks bool
}

// relays reports whether h takes any of the server's messages.
func (h *CallHooks) relays() bool { return h != nil && (h.Notify != nil || h.Request != nil) }

// RequestHandler answers a request from the server. It returns a result, or
// a *jsonrpc.Error to send back as the error response.
type RequestHandler func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error)

// ClientOptions configures a Client.
type ClientOptions struct {
	// Name is the server's configured name, for logs and errors.
	Name string
	// Logger receives the client's logs. Nil discards them.
	Logger *slog.Logger
	// ClientInfo is the Implementation sent in initialize. If nil,
	// {"name":"mcpgw","version":"dev"} is sent.
	ClientInfo json.RawMessage
	// Capabilities are the client capabilities declared in initialize. If
	// nil, {} (none) is declared, so the server sends no requests the
	// gateway cannot relay.
	Capabilities json.RawMessage
	// OnNotification receives the server's notifications that belong to no
	// call (list_changed, log lines without a request). Nil drops them.
	OnNotification func(m *jsonrpc.Message)
	// OnRequest answers server requests that belong to no call, or to a call
	// without CallHooks.Request. Nil answers ping with {} and anything else
	// with method-not-found.
	OnRequest RequestHandler
	// MaxMessageBytes caps one message from the server: a stdio line, an SSE
	// event or a JSON body. If zero, config.DefaultMaxResponseBody is used.
	MaxMessageBytes int64
	// HTTPClient sends the requests of the http and sse transports. If nil,
	// a client with keep-alive connections and no overall timeout (streams
	// are long-lived; calls are bounded by their contexts) is used.
	HTTPClient *http.Client
	// StopGrace is how long a stdio child gets after its stdin closes, and
	// again after SIGTERM, before it is killed. If zero, 3s.
	StopGrace time.Duration
	// OnLog receives the lines of the server's own log (the Manager writes
	// them to the server's log file): each stderr line of a stdio server
	// (tag "stderr"), every notifications/message the server sends, to a
	// call or not (tag: its level), and the client's lifecycle (tag
	// "lifecycle": initialized, session expired). It is called from the
	// transport's reading goroutines and must not block for long. Nil
	// drops them.
	OnLog func(tag, text string)
	// Protocol is config.ProtocolAuto, ProtocolModern or ProtocolLegacy:
	// the era Connect speaks (see Connect). New takes it from the
	// server's config; empty means legacy, for clients made without one.
	Protocol string
	// ModernCapabilities names the client capabilities (members of
	// CallHooks.Capabilities) the gateway can serve on a call's behalf
	// for a modern server; only those are declared to it. Nil declares
	// none ({}).
	ModernCapabilities []string
	// Probe remembers, across the clients of one server, that its stdio
	// child exited while asked server/discover, so that the next start
	// goes straight to initialize. Nil remembers nothing.
	Probe *ProbeMemory
	// ProbeTimeout bounds the server/discover of protocol auto: a server
	// that does not answer within it is taken as legacy. If zero, 5s.
	ProbeTimeout time.Duration
	// StreamIdleTimeout is how long the streamable-HTTP GET stream may stay
	// silent (no event) before it is opened again: a proxy may have cut it
	// without telling either end. If zero, 5m; negative never re-opens a
	// silent stream.
	StreamIdleTimeout time.Duration
}

// Tags of ClientOptions.OnLog that are not a log level.
const (
	TagStderr    = "stderr"
	TagLifecycle = "lifecycle"
)

// Client is a JSON-RPC client of one upstream server. It is safe for
// concurrent use. Create it with NewStdio, NewHTTP or NewSSE, then Connect.
type Client struct {
	opts   ClientOptions
	logger *slog.Logger
	t      transport

	nextID atomic.Int64
	// answers counts the goroutines answering server requests; Close
	// waits for them.
	answers sync.WaitGroup
	// answering cancels the answers in progress, by the server's request
	// id, when the server cancels its own request.
	answeringMu   sync.Mutex
	answering     map[string]context.CancelFunc
	answersActive atomic.Int64
	// refusedLogged is when a refusal over maxAnswering was last logged
	// (unix nanoseconds), and refusedQuiet how many were refused since.
	refusedLogged atomic.Int64
	refusedQuiet  atomic.Int64
	levels        levelSender

	mu       sync.Mutex
	pending  map[string]*call // by our request id
	hooked   int              // pending calls with hooks
	init     *InitializeResult
	initGen  int // handshake generation, to re-initialize only once per expiry
	initMu   sync.Mutex
	closed   bool
	closeErr error
	// subs and level are what the session holds on the server: the URIs
	// subscribed and the last level set through this client, replayed
	// after the client initializes again (PROTOCOL.md point 11).
	subs  map[string]bool
	level string
	// era is EraModern or EraLegacy once connected. The rest is the
	// modern era's: the x-mcp-header bindings of the tools last listed,
	// and the listen streams (see listen.go).
	era         string
	toolHeaders map[string][]paramBinding
	listens     map[string]*listenRun // by our request id
	// closing are listen requests of ours we cancelled, by id: the
	// channel is closed when the server's answer to one still comes
	// (see closeListenAndWait).
	closing     map[string]chan struct{}
	subsChanged chan struct{} // buffered 1
	stopListen  context.CancelFunc
	listenDone  chan struct{} // closed when the listen loop ended; nil if none
}

// call is one request of ours waiting for its response.
type call struct {
	hooks    *CallHooks
	progress string                // raw params._meta.progressToken, "" if none
	resp     chan *jsonrpc.Message // buffered 1
}

// InitializeResult is what the server answered to initialize, kept raw where
// the gateway relays it.
type InitializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}

func newClient(opts ClientOptions, t transport) *Client {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name != "" {
		logger = logger.With("server", opts.Name)
	}
	return &Client{opts: opts, logger: logger, t: t, pending: make(map[string]*call), subs: make(map[string]bool),
		listens: make(map[string]*listenRun), closing: make(map[string]chan struct{}), subsChanged: make(chan struct{}, 1)}
}

// lifecycle writes a line of the client's lifecycle to OnLog.
func (c *Client) lifecycle(format string, args ...any) {
	if c.opts.OnLog != nil {
		c.opts.OnLog(TagLifecycle, fmt.Sprintf(format, args...))
	}
}

// requestStreams reports whether the transport ties what the server sends
// about a request to that request (streamable HTTP: the POST's stream).
// Over stdio and legacy SSE everything arrives on one channel, so the
// Client attributes by other means (see receive).
func (c *Client) requestStreams() bool {
	rs, ok := c.t.(interface{ requestStreams() bool })
	return ok && rs.requestStreams()
}

// Connect starts the transport and finds out the server's era, bounded by
// ctx (see handshake). On error the client is closed.
func (c *Client) Connect(ctx context.Context) error {
	if err := c.t.start(ctx, c.receive); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		c.t.close(cctx)
		return err
	}
	if err := c.handshake(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		c.Close(cctx)
		return err
	}
	return nil
}

// initialize runs the handshake: initialize, check the version, then
// notifications/initialized.
func (c *Client) initialize(ctx context.Context) error {
	info := c.opts.ClientInfo
	if info == nil {
		info = json.RawMessage(`{"name":"mcpgw","version":"dev"}`)
	}
	caps := c.opts.Capabilities
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	params, err := json.Marshal(map[string]any{
		"protocolVersion": LatestProtocolVersion,
		"capabilities":    caps,
		"clientInfo":      info,
	})
	if err != nil {
		return err
	}
	raw, err := c.roundTrip(ctx, "initialize", params, "", nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var res InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("initialize: malformed result: %w", err)
	}
	if !slices.Contains(supportedVersions, res.ProtocolVersion) {
		return fmt.Errorf("initialize: server chose protocol version %q, which mcpgw does not speak (it speaks %v)", res.ProtocolVersion, supportedVersions)
	}
	if res.ProtocolVersion != LatestProtocolVersion {
		c.logger.Warn("upstream negotiated an older protocol version", "protocol_version", res.ProtocolVersion, "requested", LatestProtocolVersion)
	}
	c.t.negotiated(res.ProtocolVersion)
	if err := c.t.send(ctx, jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	c.t.ready(ctx)
	c.mu.Lock()
	c.init = &res
	c.initGen++
	c.era = EraLegacy
	c.mu.Unlock()
	c.lifecycle("initialized (protocol %s)", res.ProtocolVersion)
	return nil
}

// Initialized returns the server's answer to initialize, or nil before the
// handshake finished.
func (c *Client) Initialized() *InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.init
}

// Done is closed when the connection ended (process exit, stream lost, Close).
func (c *Client) Done() <-chan struct{} { return c.t.done() }

// Err reports why the connection ended, once Done is closed.
func (c *Client) Err() error { return c.t.err() }

// Call sends a request and waits for its result. A JSON-RPC error from the
// server is returned as a *jsonrpc.Error. When ctx ends first, the server is
// sent notifications/cancelled with the request's id (reason "timeout" for a
// deadline) and the late response is dropped.
//
// A successful resources/subscribe or resources/unsubscribe, and
// logging/setLevel, are remembered, so that they are sent again when the
// client has to initialize a new session (see Subscriptions and LogLevel).
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage, hooks *CallHooks) (json.RawMessage, error) {
	return c.call(ctx, method, params, progressToken(params), hooks)
}

// call is Call with the progress token of params already read.
func (c *Client) call(ctx context.Context, method string, params json.RawMessage, progress string, hooks *CallHooks) (json.RawMessage, error) {
	if c.Era() == EraModern {
		return c.modernCall(ctx, method, params, progress, hooks)
	}
	c.mu.Lock()
	gen := c.initGen
	c.mu.Unlock()
	raw, err := c.roundTrip(ctx, method, params, progress, hooks)
	if errors.Is(err, errSessionExpired) {
		c.logger.Info("upstream session expired; initializing again")
		if err := c.reinitialize(ctx, gen); err != nil {
			return nil, err
		}
		raw, err = c.roundTrip(ctx, method, params, progress, hooks)
	}
	if err == nil {
		c.remember(method, params)
	}
	return raw, err
}

// remember records what a successful request changed in the session.
func (c *Client) remember(method string, params json.RawMessage) {
	switch method {
	case "resources/subscribe", "resources/unsubscribe":
		uri, ok := rawjson.String(params, "uri")
		if !ok {
			return
		}
		c.mu.Lock()
		if method == "resources/subscribe" {
			c.subs[uri] = true
		} else {
			delete(c.subs, uri)
		}
		c.mu.Unlock()
	case "logging/setLevel":
		if level, ok := rawjson.String(params, "level"); ok {
			c.mu.Lock()
			c.level = level
			c.mu.Unlock()
		}
	}
}

// levelSender is the state of the one sender of logging/setLevel per
// client (see Manager.setLevelLocked).
type levelSender struct {
	mu         sync.Mutex
	want, sent string
	busy       bool
}

// wantLevel records the level the server should log at and reports whether
// a sender must start (none is running).
func (c *Client) wantLevel(level string) (start bool) {
	c.levels.mu.Lock()
	defer c.levels.mu.Unlock()
	c.levels.want = level
	if c.levels.busy {
		return false
	}
	c.levels.busy = true
	return true
}

// nextLevel returns the level to send next, or false (and the sender
// stops) when the last one sent is the one wanted.
func (c *Client) nextLevel() (string, bool) {
	c.levels.mu.Lock()
	defer c.levels.mu.Unlock()
	if c.levels.want == c.levels.sent {
		c.levels.busy = false
		return "", false
	}
	return c.levels.want, true
}

// levelSent records that level was sent (answered or not).
func (c *Client) levelSent(level string) {
	c.levels.mu.Lock()
	defer c.levels.mu.Unlock()
	c.levels.sent = level
}

// Subscriptions returns the URIs subscribed through the client and not
// unsubscribed since, sorted.
func (c *Client) Subscriptions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.subs))
	for uri := range c.subs {
		out = append(out, uri)
	}
	slices.Sort(out)
	return out
}

// LogLevel returns the last level set through the client
// (logging/setLevel), or "".
func (c *Client) LogLevel() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.level
}

// Restore sends resources/subscribe for each of subs and, when level is
// not empty, logging/setLevel: what the session of an earlier client of
// the same server held, for a client that replaces it (a restart). It
// tries them all and returns what failed.
func (c *Client) Restore(ctx context.Context, subs []string, level string) error {
	var errs []error
	for _, uri := range subs {
		params, _ := json.Marshal(map[string]string{"uri": uri})
		if _, err := c.Call(ctx, "resources/subscribe", params, nil); err != nil {
			errs = append(errs, fmt.Errorf("resources/subscribe: %w", err))
		}
	}
	if level != "" {
		params, _ := json.Marshal(map[string]string{"level": level})
		if _, err := c.Call(ctx, "logging/setLevel", params, nil); err != nil {
			errs = append(errs, fmt.Errorf("logging/setLevel: %w", err))
		}
	}
	return errors.Join(errs...)
}

// reinitialize runs the handshake again unless another caller already did
// since generation gen, then replays the session's subscriptions and log
// level.
func (c *Client) reinitialize(ctx context.Context, gen int) error {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	c.mu.Lock()
	cur := c.initGen
	c.mu.Unlock()
	if cur != gen {
		return nil
	}
	c.lifecycle("session expired; initializing again")
	if err := c.initialize(ctx); err != nil {
		c.lifecycle("initializing again failed: %v", err)
		return fmt.Errorf("initializing again after the session expired: %w", err)
	}
	c.replay(ctx)
	return nil
}

// replay sends the remembered subscriptions and level to a new session.
// Failures are logged: the call that found the session expired goes on.
func (c *Client) replay(ctx context.Context) {
	c.mu.Lock()
	level := c.level
	c.mu.Unlock()
	subs := c.Subscriptions()
	if len(subs) == 0 && level == "" {
		return
	}
	var errs []error
	for _, uri := range subs {
		params, _ := json.Marshal(map[string]string{"uri": uri})
		if _, err := c.roundTrip(ctx, "resources/subscribe", params, "", nil); err != nil {
			errs = append(errs, fmt.Errorf("resources/subscribe: %w", err))
		}
	}
	if level != "" {
		params, _ := json.Marshal(map[string]string{"level": level})
		if _, err := c.roundTrip(ctx, "logging/setLevel", params, "", nil); err != nil {
			errs = append(errs, fmt.Errorf("logging/setLevel: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.logger.Warn("restoring the session's subscriptions and log level failed", "err", err)
		c.lifecycle("restoring %d subscriptions and log level %q failed: %v", len(subs), level, err)
		return
	}
	c.lifecycle("restored %d subscriptions and log level %q", len(subs), level)
}

// roundTrip sends one request under a fresh id and waits for its response.
func (c *Client) roundTrip(ctx context.Context, method string, params json.RawMessage, progress string, hooks *CallHooks) (json.RawMessage, error) {
	return c.roundTripID(ctx, jsonrpc.IntID(c.nextID.Add(1)), method, params, progress, hooks, nil)
}

// roundTripID is roundTrip under id, with extra headers on the HTTP
// request of a modern streamable-HTTP server (Mcp-Param-*).
func (c *Client) roundTripID(ctx context.Context, id jsonrpc.ID, method string, params json.RawMessage, progress string, hooks *CallHooks, extra http.Header) (json.RawMessage, error) {
	params = c.traceParams(ctx, method, params)
	pc := &call{hooks: hooks, progress: progress, resp: make(chan *jsonrpc.Message, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.pending[id.String()] = pc
	if hooks.relays() {
		c.hooked++
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id.String())
		if hooks.relays() {
			c.hooked--
		}
		c.mu.Unlock()
	}()

	if err := c.sendRequest(ctx, jsonrpc.NewRequest(id, method, params), hooks, extra); err != nil {
		// The answer may have been read before the error (a stream that
		// broke after the response).
		select {
		case m := <-pc.resp:
			return result(m)
		default:
		}
		if ctx.Err() != nil {
			c.cancel(ctx, id, method)
			return nil, ctx.Err()
		}
		select {
		case <-c.t.done():
			// The connection is gone: say so in one way for every
			// transport, so that callers can tell a dead server.
			var cerr *ConnectionError
			if !errors.As(err, &cerr) {
				err = &ConnectionError{Server: c.opts.Name, Err: err}
			}
		default:
		}
		return nil, err
	}
	select {
	case m := <-pc.resp:
		return result(m)
	case <-ctx.Done():
		c.cancel(ctx, id, method)
		return nil, ctx.Err()
	case <-c.t.done():
		// A response may have raced with the end of the transport.
		select {
		case m := <-pc.resp:
			return result(m)
		default:
		}
		return nil, &ConnectionError{Server: c.opts.Name, Err: c.t.err()}
	}
}

// traceParams returns the params of a request of method with the trace
// context of ctx in params._meta, where the negotiated revision defines
// it or the caller already put a traceparent there (see withTraceMeta),
// and params unchanged otherwise. initialize carries none: no revision
// defines it there.
func (c *Client) traceParams(ctx context.Context, method string, params json.RawMessage) json.RawMessage {
	if method == "initialize" {
		return params
	}
	tc := telemetry.InjectMeta(ctx)
	if tc == nil {
		return params
	}
	version := ""
	if init := c.Initialized(); init != nil {
		version = init.ProtocolVersion
	}
	return withTraceMeta(params, tc, metaTraceContext(version))
}

// sessionID returns the session id (Mcp-Session-Id) the server assigned
// over streamable HTTP, or "" (no session, another transport).
func (c *Client) sessionID() string {
	if s, ok := c.t.(interface{ session() string }); ok {
		return s.session()
	}
	return ""
}

// headerForwarder is implemented by the transports that carry each
// message in an HTTP request of its own (http, sse).
type headerForwarder interface {
	// sendForwarding is send, adding to m's HTTP request the headers of
	// h that the server's forward_headers name (see CallHooks.Header).
	sendForwarding(ctx context.Context, m *jsonrpc.Message, h http.Header) error
}

// sendRequest sends m, with the client headers of hooks when the
// transport forwards them, and extra when it is a modern HTTP one.
func (c *Client) sendRequest(ctx context.Context, m *jsonrpc.Message, hooks *CallHooks, extra http.Header) error {
	if len(extra) > 0 {
		if ms, ok := c.t.(modernSender); ok {
			var client http.Header
			if hooks != nil {
				client = hooks.Header
			}
			return ms.sendModern(ctx, m, client, extra)
		}
	}
	if hooks != nil && len(hooks.Header) > 0 {
		if hf, ok := c.t.(headerForwarder); ok {
			return hf.sendForwarding(ctx, m, hooks.Header)
		}
	}
	return c.t.send(ctx, m)
}

func result(m *jsonrpc.Message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	return m.Result, nil
}

// cancel tells the server that request id is no longer wanted (the spec's
// notifications/cancelled; never for initialize, which must not be
// cancelled).
func (c *Client) cancel(ctx context.Context, id jsonrpc.ID, method string) {
	// Nor for the probe, which a legacy server may not know; nor over
	// modern streamable HTTP, where closing the request's stream (done
	// by now) is the cancellation.
	if method == "initialize" || method == "server/discover" || c.Era() == EraModern && c.requestStreams() {
		return
	}
	reason := "cancelled by the client"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "timeout"
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		reason = cause.Error()
	}
	params, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := c.t.send(sctx, jsonrpc.NewNotification("notifications/cancelled", params)); err != nil {
		c.logger.Debug("sending notifications/cancelled failed", "err", err)
	}
}

// Notify sends a notification to the server. A modern server is sent
// none: the era defines no client notification but cancellation, which
// the Client sends itself; the rest (roots/list_changed) are dropped.
func (c *Client) Notify(ctx context.Context, method string, params json.RawMessage) error {
	if c.Era() == EraModern {
		c.logger.Debug("not sending a notification to a 2026-07-28 server", "method", method)
		return nil
	}
	return c.t.send(ctx, jsonrpc.NewNotification(method, params))
}

// ListTools returns every tool the server lists, following nextCursor over at
// most 50 pages. A repeated cursor is an error (a server that loops), as is
// a page cap reached with more to come.
func (c *Client) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	return c.listAll(ctx, "tools/list", "tools")
}

// ListPrompts returns every prompt the server lists, with the same paging
// rules as ListTools.
func (c *Client) ListPrompts(ctx context.Context) ([]json.RawMessage, error) {
	return c.listAll(ctx, "prompts/list", "prompts")
}

// ListResources returns every resource the server lists.
func (c *Client) ListResources(ctx context.Context) ([]json.RawMessage, error) {
	return c.listAll(ctx, "resources/list", "resources")
}

// ListResourceTemplates returns every resource template the server lists.
func (c *Client) ListResourceTemplates(ctx context.Context) ([]json.RawMessage, error) {
	return c.listAll(ctx, "resources/templates/list", "resourceTemplates")
}

func (c *Client) listAll(ctx context.Context, method, field string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("%s: more than %d pages; giving up", method, maxListPages)
		}
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.Call(ctx, method, params, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var res struct {
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("%s: malformed result: %w", method, err)
		}
		items, ok, err := rawjson.Get(raw, field)
		if err != nil {
			return nil, fmt.Errorf("%s: malformed result: %w", method, err)
		}
		if ok && string(items) != "null" {
			var list []json.RawMessage
			if err := json.Unmarshal(items, &list); err != nil {
				return nil, fmt.Errorf("%s: %q is not an array: %w", method, field, err)
			}
			all = append(all, list...)
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			return all, nil
		}
		cursor = *res.NextCursor
		if seen[cursor] {
			return nil, fmt.Errorf("%s: server repeated cursor %q; stopping", method, cursor)
		}
		seen[cursor] = true
	}
}

// receive is the transport's recv: it routes one message from the server.
func (c *Client) receive(m *jsonrpc.Message, rel related) {
	switch {
	case m.IsResponse():
		c.mu.Lock()
		pc := c.pending[m.ID.String()]
		c.mu.Unlock()
		if pc == nil {
			c.mu.Lock()
			ch := c.closing[m.ID.String()]
			delete(c.closing, m.ID.String())
			c.mu.Unlock()
			if ch != nil {
				close(ch) // a cancelled listen the server has now ended
				return
			}
			c.logger.Debug("dropping response to no pending request", "id", m.ID.String())
			return
		}
		select {
		case pc.resp <- m:
		default: // a duplicate response; the first one stands
		}
	case m.IsNotification():
		if c.Era() == EraModern && c.listenNotification(m, rel) {
			return
		}
		if m.Method == "notifications/message" {
			c.tapLog(m)
		}
		if m.Method == "notifications/cancelled" {
			// The server gave up a request it sent us (MCP 2025-11-25,
			// basic/utilities/cancellation): stop answering it.
			c.cancelAnswer(m.Params)
		}
		if callScoped(m.Method) {
			if hooks := c.hooksFor(rel, m); hooks != nil && hooks.Notify != nil {
				hooks.Notify(m)
				return
			}
		}
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(m)
		}
	case m.IsRequest():
		h := c.opts.OnRequest
		if hooks := c.hooksFor(rel, m); hooks != nil && hooks.Request != nil {
			h = hooks.Request
		}
		if h == nil {
			h = defaultRequestHandler
		}
		if !c.startAnswer() {
			c.refuseAnswer(m)
			return
		}
		// Answer off the reader's goroutine: a handler may wait for a
		// person (elicitation).
		// Registered before the answer starts, so that a cancellation
		// right behind the request finds it.
		ctx, cancel := context.WithCancelCause(context.Background())
		id := m.ID.String()
		c.answeringMu.Lock()
		if c.answering == nil {
			c.answering = map[string]context.CancelFunc{}
		}
		c.answering[id] = func() { cancel(errServerCancelled) }
		c.answeringMu.Unlock()
		c.answers.Add(1)
		go func() {
			defer c.answers.Done()
			defer c.answersActive.Add(-1)
			defer func() {
				c.answeringMu.Lock()
				delete(c.answering, id)
				c.answeringMu.Unlock()
			}()
			c.answer(ctx, cancel, m, h)
		}()
	}
}

// callScoped reports whether a notification can belong to one call. The
// list and resource changes a server may send on a call's stream are about
// the server, not the call: they go to OnNotification wherever they arrive,
// so that the gateway refreshes its catalog instead of handing them to one
// client.
func callScoped(method string) bool {
	switch method {
	case "notifications/tools/list_changed",
		"notifications/prompts/list_changed",
		"notifications/resources/list_changed",
		"notifications/resources/updated":
		return false
	}
	return true
}

// hooksFor returns the hooks of the call that m belongs to, or nil (DESIGN
// decision 5):
//
//   - rel names our request whose stream carried m (streamable HTTP): that
//     call. A message on the HTTP GET stream belongs to no call.
//   - Over stdio and legacy SSE nothing carries a relation: a progress
//     notification belongs to the one call that sent its progressToken;
//     anything else (a server request, a log message) to the only call in
//     flight with hooks, when there is exactly one. With two or more the
//     message is ambiguous and belongs to none: its request is answered by
//     OnRequest, its notification goes to OnNotification.
func (c *Client) hooksFor(rel related, m *jsonrpc.Message) *CallHooks {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rel.IsValid() {
		if pc := c.pending[rel.String()]; pc != nil {
			return pc.hooks
		}
		return nil
	}
	if c.hooked == 0 || c.requestStreams() {
		return nil
	}
	if m.Method == "notifications/progress" {
		if tok := progressToken(m.Params); tok != "" {
			var found *call
			for _, pc := range c.pending {
				if pc.progress == tok {
					if found != nil {
						found = nil // two calls sent the same token
						break
					}
					found = pc
				}
			}
			if found != nil {
				return found.hooks
			}
		}
	}
	if c.hooked != 1 {
		return nil
	}
	for _, pc := range c.pending {
		if pc.hooks.relays() {
			return pc.hooks
		}
	}
	return nil
}

// callMembers reads, in one pass over a call's params, the name of the
// tool or prompt of a tools/call or prompts/get ("" otherwise, or when
// it is not a string) and the progress token (see progressToken).
func callMembers(method string, params json.RawMessage) (target, progress string) {
	if len(params) == 0 {
		return "", ""
	}
	var vals [3]json.RawMessage // name, progressToken, _meta
	rawjson.GetMany(params, []string{"name", "progressToken", "_meta"}, vals[:])
	if method == "tools/call" || method == "prompts/get" {
		if name := vals[0]; len(name) > 0 && name[0] == '"' {
			target, _ = rawjson.Unquote(name)
		}
	}
	tok, meta := vals[1], vals[2]
	if tok == nil && meta != nil {
		tok, _, _ = rawjson.Get(meta, "progressToken")
	}
	return target, string(tok)
}

// progressToken returns the raw progress token of a request's params
// (params._meta.progressToken) or of a progress notification's params
// (params.progressToken), or "". It looks at params' members once: a
// tool call's arguments can be megabytes.
func progressToken(params json.RawMessage) string {
	if len(params) == 0 {
		return ""
	}
	var vals [2]json.RawMessage // progressToken, _meta
	rawjson.GetMany(params, []string{"progressToken", "_meta"}, vals[:])
	tok, meta := vals[0], vals[1]
	if tok == nil && meta != nil {
		tok, _, _ = rawjson.Get(meta, "progressToken")
	}
	return string(tok)
}

// logLevels are the levels of notifications/message (RFC 5424, as MCP
// names them); a line with another level is tagged "log".
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// tapLog copies a notifications/message to OnLog: its data (the string, or
// compact JSON) after its logger when it names one.
func (c *Client) tapLog(m *jsonrpc.Message) {
	if c.opts.OnLog == nil {
		return
	}
	var p struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return
	}
	tag := p.Level
	if !slices.Contains(logLevels, tag) {
		tag = "log"
	}
	var text string
	if err := json.Unmarshal(p.Data, &text); err != nil {
		var buf bytes.Buffer
		if json.Compact(&buf, p.Data) == nil {
			text = buf.String()
		} else {
			text = string(p.Data)
		}
	}
	if p.Logger != "" {
		text = p.Logger + ": " + text
	}
	c.opts.OnLog(tag, text)
}

// answer runs h for the server's request m and sends the response, bounded
// by the lifetime of the connection.
func (c *Client) answer(ctx context.Context, cancel context.CancelCauseFunc, m *jsonrpc.Message, h RequestHandler) {
	defer cancel(nil)
	go func() {
		select {
		case <-c.t.done():
			cancel(ErrClosed)
		case <-ctx.Done():
		}
	}()
	res, err := h(ctx, m)
	if errors.Is(context.Cause(ctx), errServerCancelled) {
		return // the server wants no answer any more
	}
	var resp *jsonrpc.Message
	if err != nil {
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) {
			jerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp = jsonrpc.NewErrorResponse(m.ID, jerr)
	} else {
		resp = jsonrpc.NewResult(m.ID, res)
	}
	sctx, scancel := context.WithTimeout(ctx, closeTimeout)
	defer scancel()
	if err := c.t.send(sctx, resp); err != nil {
		c.logger.Debug("answering a server request failed", "method", m.Method, "err", err)
	}
}

// maxAnswering bounds the server requests a Client answers at once: each
// may wait for a person for as long as the input timeout, so a server
// sending requests without end would otherwise hold a goroutine for each.
const maxAnswering = 64

// startAnswer counts one more answer in progress, unless maxAnswering are.
func (c *Client) startAnswer() bool {
	for {
		n := c.answersActive.Load()
		if n >= maxAnswering {
			return false
		}
		if c.answersActive.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// refuseAnswer answers a server request over maxAnswering with an error,
// on the reader's goroutine: bounded by closeTimeout, and a server that
// does not read its answers holds up only its own messages.
func (c *Client) refuseAnswer(m *jsonrpc.Message) {
	now, last := time.Now().UnixNano(), c.refusedLogged.Load()
	if now-last >= int64(answersLogEvery) && c.refusedLogged.CompareAndSwap(last, now) {
		c.logger.Warn("a server sent more requests than the gateway answers at once; the rest are refused", "method", m.Method, "limit", maxAnswering, "refused_unlogged", c.refusedQuiet.Swap(0))
	} else {
		c.refusedQuiet.Add(1)
	}
	resp := jsonrpc.NewErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError,
		"mcpgw is already answering %d requests of this server; send fewer at once", maxAnswering))
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := c.t.send(ctx, resp); err != nil {
		c.logger.Debug("answering a server request failed", "method", m.Method, "err", err)
	}
}

// errServerCancelled is the cause of an answer the server cancelled.
var errServerCancelled = errors.New("the server cancelled its request")

// cancelAnswer cancels the answer to the server request that a
// notifications/cancelled names.
func (c *Client) cancelAnswer(params json.RawMessage) {
	raw, ok, _ := rawjson.Get(params, "requestId")
	var id jsonrpc.ID
	if !ok || id.UnmarshalJSON(raw) != nil || !id.IsValid() {
		return
	}
	c.answeringMu.Lock()
	cancel := c.answering[id.String()]
	c.answeringMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// defaultRequestHandler answers what a client that declared no capabilities
// is asked: ping.
func defaultRequestHandler(_ context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
	if m.Method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw does not offer %s to this server", m.Method)
}

// Close ends the connection within ctx: pending calls fail, the transport
// stops (a stdio child is stopped and reaped; an HTTP session is deleted).
// It is idempotent.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		select {
		case <-c.t.done():
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closeErr
	}
	c.closed = true
	stop, listenDone := c.stopListen, c.listenDone
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	err := c.t.close(ctx)
	if listenDone != nil {
		select {
		case <-listenDone:
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("waiting for the listen stream to end: %w", ctx.Err()))
		}
	}
	// The transport has stopped delivering, so no new answer starts; the
	// running ones see the transport done and end.
	if c.answersActive.Load() > 0 {
		answered := make(chan struct{})
		go func() { c.answers.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("waiting for answers to server requests: %w", ctx.Err()))
		}
	}
	c.mu.Lock()
	c.closeErr = err
	c.mu.Unlock()
	return err
}

// ErrClosed is returned by calls on a closed Client, and by the Manager's
// methods that change its servers once the Manager is closed.
var ErrClosed = errors.New("upstream closed")

// ConnectionError reports that the connection to a server ended while a
// call was waiting.
type ConnectionError struct {
	Server string
	Err    error
}

func (e *ConnectionError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("connection to server %q closed", e.Server)
	}
	return fmt.Sprintf("connection to server %q lost: %v", e.Server, e.Err)
}

func (e *ConnectionError) Unwrap() error { return e.Err }
