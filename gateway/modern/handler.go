package modern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Version is the protocol version this edge serves.
const Version = "2026-07-28"

// The JSON-RPC error codes of the modern era.
const (
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022
	// codeResourceNotFound is the legacy era's resource-not-found code,
	// which the modern era replaced by -32602.
	codeResourceNotFound = -32002
)

// Defaults for the Options fields left zero.
const (
	DefaultKeepAlive    = 15 * time.Second
	DefaultStreamAfter  = time.Second
	DefaultWriteTimeout = 30 * time.Second
	DefaultMaxListens   = 4096
	// DefaultMaxPerPrincipal bounds one principal's requests in flight
	// at once, listen streams included: with no session to cap, a
	// client could otherwise hold the gateway's goroutines and upstream
	// slots without end.
	DefaultMaxPerPrincipal = 256
	// DefaultMaxListensPerPrincipal bounds one principal's open listen
	// streams.
	DefaultMaxListensPerPrincipal = 16
)

// Options configures a Handler.
type Options struct {
	// Core answers the requests. Required.
	Core *gateway.Server
	// Logger receives the edge's logs. Nil discards them.
	Logger *slog.Logger
	// LegacyVersions are the versions the legacy edge on the same endpoint
	// negotiates, newest first; server/discover lists them after Version.
	LegacyVersions []string
	// TrustedProxies are the peers whose X-Forwarded-Proto and
	// X-Forwarded-Host say how the client reached the gateway (for its
	// media links). If empty, nobody's are believed.
	TrustedProxies []netip.Prefix
	// KeepAlive is the interval of SSE comments on a stream with nothing
	// else to send. If zero, DefaultKeepAlive.
	KeepAlive time.Duration
	// StreamAfter is how long a request may run before its answer becomes
	// an event stream (with keep-alive comments); one answered sooner with
	// no notification is plain JSON. If zero, DefaultStreamAfter.
	StreamAfter time.Duration
	// WriteTimeout bounds each write to a client; one that does not read
	// for this long loses the connection, which cancels its request. If
	// zero, DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxListens caps the subscriptions/listen streams open at once; more
	// get a JSON-RPC error with gateway.CodeRateLimited. If zero,
	// DefaultMaxListens.
	MaxListens int
	// MaxPerPrincipal caps one principal's requests in flight, and
	// MaxListensPerPrincipal its open listen streams; more get a JSON-RPC
	// error with gateway.CodeRateLimited. If zero, DefaultMaxPerPrincipal
	// and DefaultMaxListensPerPrincipal.
	MaxPerPrincipal        int
	MaxListensPerPrincipal int
	// Cluster reaches the other replicas: a follow-up of a call another
	// replica holds is sent there. Nil: the gateway runs alone.
	Cluster Cluster
}

// Cluster is how the edge reaches another replica (cluster.Cluster).
type Cluster interface {
	// Forward sends r, with body, to the replica named and copies its
	// answer to w; false, with nothing written, when it is gone.
	Forward(w http.ResponseWriter, r *http.Request, body []byte, replica string) bool
	// Forwarded reports whether r came from another replica.
	Forwarded(r *http.Request) bool
}

// Handler serves the modern era's requests. Create it with New, hand it
// the POSTs classified as modern with Serve, and stop it with Close. It is
// safe for concurrent use.
type Handler struct {
	opts     Options
	core     *gateway.Server
	logger   *slog.Logger
	versions []string // every version served, for discover and -32022

	mu      sync.Mutex
	closing bool
	listens map[*listen]struct{}
	// calls cancels the core calls in flight, for Close.
	calls map[*response]context.CancelCauseFunc
	// busy counts each principal's requests in flight, and listening its
	// open listen streams.
	busy      map[string]int
	listening map[string]int
	// work counts the requests being answered, listens included; Close
	// waits for them.
	work      sync.WaitGroup
	stopWatch func()
	stopFound func()
	closed    chan struct{} // closed by Close: listens end
	closeOnce sync.Once
}

// New returns a Handler for opts and starts its watch of the core's list
// changes, for the listen streams.
func New(opts Options) (*Handler, error) {
	if opts.Core == nil {
		return nil, errors.New("modern: Options.Core is required")
	}
	if opts.KeepAlive < 0 || opts.StreamAfter < 0 || opts.WriteTimeout < 0 || opts.MaxListens < 0 || opts.MaxPerPrincipal < 0 || opts.MaxListensPerPrincipal < 0 {
		return nil, errors.New("modern: Options.KeepAlive, StreamAfter, WriteTimeout, MaxListens, MaxPerPrincipal and MaxListensPerPrincipal must not be negative")
	}
	if opts.MaxPerPrincipal == 0 {
		opts.MaxPerPrincipal = DefaultMaxPerPrincipal
	}
	if opts.MaxListensPerPrincipal == 0 {
		opts.MaxListensPerPrincipal = DefaultMaxListensPerPrincipal
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.StreamAfter == 0 {
		opts.StreamAfter = DefaultStreamAfter
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxListens == 0 {
		opts.MaxListens = DefaultMaxListens
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{
		opts:      opts,
		core:      opts.Core,
		logger:    logger.With("component", "modern"),
		versions:  append([]string{Version}, opts.LegacyVersions...),
		listens:   make(map[*listen]struct{}),
		calls:     make(map[*response]context.CancelCauseFunc),
		busy:      make(map[string]int),
		listening: make(map[string]int),
		closed:    make(chan struct{}),
	}
	h.stopWatch = h.core.Watch(h.listChanged)
	h.stopFound = h.core.WatchFound(h.foundTools)
	return h, nil
}

// Close stops the Handler: new requests get an error saying the gateway is
// shutting down, listen streams end with their result, and the calls in
// flight may finish until ctx ends; then they are cancelled upstream, and
// their clients get an error saying so, and Close returns ctx.Err() once
// they are answered.
func (h *Handler) Close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closing = true
		h.mu.Unlock()
		h.stopWatch()
		h.stopFound()
		close(h.closed)
	})
	done := make(chan struct{})
	go func() { h.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	for _, cancel := range h.calls {
		cancel(errShutdown)
	}
	h.mu.Unlock()
	<-done // the core returns promptly once cancelled
	return ctx.Err()
}

// begin counts a request for Close, or reports that the Handler is
// closing.
func (h *Handler) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.work.Add(1)
	return true
}

// hold counts a request of principal in flight, or reports that it has
// as many as it may.
func (h *Handler) hold(principal string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy[principal] >= h.opts.MaxPerPrincipal {
		return false
	}
	h.busy[principal]++
	return true
}

// drop ends what hold counted.
func (h *Handler) drop(principal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy[principal]--; h.busy[principal] <= 0 {
		delete(h.busy, principal)
	}
}

// request is one modern request, its _meta checked.
type request struct {
	id        jsonrpc.ID
	method    string
	params    json.RawMessage // without the reserved _meta keys
	version   string
	caps      json.RawMessage
	info      json.RawMessage
	logLevel  string
	principal string
	groups    []string
}

// Serve answers m, a POST's one message that front.Classify found modern.
// The caller has checked the request's Host, Origin, credentials, rate and
// Accept header, and put its principal in the context (auth.NewContext).
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
	switch {
	case m.IsNotification():
		// No client-to-server notification is defined for HTTP in this
		// era: accepted and dropped.
		w.WriteHeader(http.StatusAccepted)
		return
	case !m.IsRequest():
		writeError(w, http.StatusBadRequest, m.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"a 2026-07-28 client sends requests and notifications only, never a response", nil))
		return
	}
	if !h.begin() {
		writeError(w, http.StatusServiceUnavailable, m.ID, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the gateway is shutting down and takes no new requests; retry on another replica or later", nil))
		return
	}
	defer h.work.Done()
	req, status, jerr := h.check(r, m)
	if jerr != nil {
		if jerr.Code == jsonrpc.CodeInvalidParams && removed(m.Method) {
			// A 2025 habit (logging/setLevel without _meta, say): the
			// method's absence is the news.
			jerr, status = removedError(m.Method), http.StatusNotFound
		}
		writeError(w, status, m.ID, jerr)
		return
	}
	if !h.hold(req.principal) {
		writeError(w, http.StatusOK, m.ID, jsonrpc.NewError(gateway.CodeRateLimited,
			fmt.Sprintf("you have %d requests in flight, the limit for one caller; wait for some to finish", h.opts.MaxPerPrincipal),
			map[string]int{"limit": h.opts.MaxPerPrincipal}))
		return
	}
	defer h.drop(req.principal)
	switch {
	case m.Method == "subscriptions/listen":
		h.listen(w, r, req)
	case relayed(m.Method):
		h.call(w, r, req, m)
	default:
		// What this edge answers alone is observed like what the core
		// answers: spans, metrics and the debug line.
		res, err := h.core.Observe(r.Context(), h.coreRequest(r, req), func(context.Context) (*gateway.Result, error) {
			switch {
			case m.Method == "server/discover":
				return h.discover(req), nil
			case removed(m.Method):
				return nil, removedError(m.Method)
			default:
				return nil, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
					fmt.Sprintf("method %q is not offered by this gateway", m.Method), nil)
			}
		})
		if jerr, ok := errors.AsType[*jsonrpc.Error](err); ok {
			writeError(w, statusOf(jerr), m.ID, jerr)
			return
		}
		front.WriteJSON(w, http.StatusOK, resultResponse(m.ID, res.Body))
	}
}

// coreRequest returns the core's envelope of req.
func (h *Handler) coreRequest(r *http.Request, req *request) *gateway.Request {
	return &gateway.Request{
		Method:     req.method,
		ID:         front.PlainID(req.id),
		Params:     req.params,
		Principal:  req.principal,
		Groups:     req.groups,
		Client:     gateway.Client{ProtocolVersion: req.version, Capabilities: req.caps, Info: req.info},
		LogLevel:   req.logLevel,
		BaseURL:    front.ForwardedBaseURL(r, h.opts.TrustedProxies),
		Header:     front.Forwardable(r.Header),
		Credential: gateway.CredentialOf(r.Header, req.principal),
		Exposure:   r.URL.Query().Get("exposure"),
	}
}

// removed reports whether method is one the 2026-07-28 revision removed
// or one this edge does not serve in it: the session era's lifecycle,
// subscriptions and the task methods the tasks extension dropped, and the
// requests only a server sends.
func removed(method string) bool {
	switch method {
	case "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
		"tasks/result", "tasks/list",
		"sampling/createMessage", "elicitation/create", "roots/list":
		return true
	}
	return strings.HasPrefix(method, "notifications/")
}

// removedError is the -32601 for a method removed or not served in this
// era, saying what replaces it.
func removedError(method string) *jsonrpc.Error {
	hint := ""
	switch method {
	case "initialize":
		hint = ": there is no handshake; send server/discover, or any request with the version and client capabilities in params._meta"
	case "ping":
		hint = ": any request shows that the server answers"
	case "logging/setLevel":
		hint = fmt.Sprintf(": set %q in each request's params._meta", front.MetaLogLevel)
	case "resources/subscribe", "resources/unsubscribe":
		hint = ": use subscriptions/listen with notifications.resourceSubscriptions"
	case "tasks/result", "tasks/list":
		hint = fmt.Sprintf(": the %s extension has neither tasks/result nor tasks/list; tasks/get inlines a finished task's result", gateway.ExtTasks)
	}
	return jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
		fmt.Sprintf("method %q does not exist in protocol version %s%s", method, Version, hint), nil)
}

// relayed reports whether the core answers method for this edge.
func relayed(method string) bool {
	switch method {
	case "tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read", "completion/complete",
		"tasks/get", "tasks/update", "tasks/cancel":
		return true
	}
	return false
}

// principalOf returns who sent r, as the auth layer named them.
func principalOf(r *http.Request) (string, []string) {
	if p, ok := auth.FromContext(r.Context()); ok && p.Name != "" {
		return p.Name, p.Groups
	}
	return gateway.Anonymous, nil
}

// check reads m's _meta and checks it and the routing headers against the
// body (MCP 2026-07-28, basic/index § _meta, basic/transports
// streamable-http § Request Metadata). On refusal it returns the error and
// the HTTP status to send it in.
func (h *Handler) check(r *http.Request, m *jsonrpc.Message) (*request, int, *jsonrpc.Error) {
	bad := func(format string, args ...any) (*request, int, *jsonrpc.Error) {
		return nil, http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, format, args...)
	}
	mismatch := func(format string, args ...any) (*request, int, *jsonrpc.Error) {
		return nil, http.StatusBadRequest, jsonrpc.Errorf(CodeHeaderMismatch, format, args...)
	}
	params := m.Params
	if len(params) == 0 || params[0] != '{' {
		return bad("params._meta is required in protocol version %s: send %q and %q in it", Version, front.MetaProtocolVersion, front.MetaClientCapabilities)
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if err != nil || !ok || len(meta) == 0 || meta[0] != '{' {
		return bad("params._meta is required in protocol version %s and must be an object with %q and %q", Version, front.MetaProtocolVersion, front.MetaClientCapabilities)
	}
	var vals [4]json.RawMessage
	keys := []string{front.MetaProtocolVersion, front.MetaClientCapabilities, front.MetaClientInfo, front.MetaLogLevel}
	if err := rawjson.GetMany(meta, keys, vals[:]); err != nil {
		return bad("params._meta is not a valid object: %v", err)
	}
	version, err := rawjson.Unquote(vals[0])
	if vals[0] == nil || err != nil || version == "" {
		return bad("params._meta[%q] is required and must be a protocol version string such as %q", front.MetaProtocolVersion, Version)
	}
	if len(vals[1]) == 0 || vals[1][0] != '{' {
		return bad("params._meta[%q] is required and must be an object ({} declares none)", front.MetaClientCapabilities)
	}
	if vals[2] != nil && vals[2][0] != '{' {
		return bad("params._meta[%q] must be an Implementation object", front.MetaClientInfo)
	}
	var level string
	if vals[3] != nil {
		level, err = rawjson.Unquote(vals[3])
		if err != nil || levelRank(level) < 0 {
			return bad("params._meta[%q] must be one of %s", front.MetaLogLevel, strings.Join(levels, ", "))
		}
	}
	if hv := r.Header.Get(front.HeaderProtocolVersion); strings.TrimSpace(hv) != version {
		if hv == "" {
			return mismatch("the MCP-Protocol-Version header is missing; it must equal params._meta[%q] (%q)", front.MetaProtocolVersion, version)
		}
		return mismatch("the MCP-Protocol-Version header (%q) does not match params._meta[%q] (%q)", hv, front.MetaProtocolVersion, version)
	}
	if version != Version {
		return nil, http.StatusBadRequest, jsonrpc.NewError(CodeUnsupportedProtocolVersion,
			fmt.Sprintf("protocol version %q is not supported; this gateway serves %s", version, strings.Join(h.versions, ", ")),
			map[string]any{"supported": h.versions, "requested": version})
	}
	if hv, ok := r.Header[front.HeaderMethod]; !ok || strings.TrimSpace(hv[0]) != m.Method {
		if !ok {
			return mismatch("the Mcp-Method header is missing; it must equal the request's method (%q)", m.Method)
		}
		return mismatch("the Mcp-Method header (%q) does not match the request's method (%q)", hv[0], m.Method)
	}
	if member := nameMember(m.Method); member != "" {
		want, _ := rawjson.String(params, member)
		hv, ok := r.Header[front.HeaderName]
		if !ok {
			return mismatch("the Mcp-Name header is missing; for %s it must equal params.%s", m.Method, member)
		}
		got, err := front.DecodeHeader(hv[0])
		if err != nil {
			return mismatch("the Mcp-Name header is not valid: %v", err)
		}
		if got != want {
			return mismatch("the Mcp-Name header does not match params.%s of the %s request", member, m.Method)
		}
	}
	if m.Method == "tools/call" {
		if jerr := h.checkParamHeaders(r, params); jerr != nil {
			return nil, http.StatusBadRequest, jerr
		}
		// params.task asks for a task of the session era; in this era
		// the server decides, and the tasks extension has servers ignore
		// the param.
		if _, ok, _ := rawjson.Get(params, "task"); ok {
			if params, err = rawjson.Delete(params, "task"); err != nil {
				return bad("params are not a valid object: %v", err)
			}
		}
	}
	params, err = front.StripReserved(params)
	if err != nil {
		return bad("params are not a valid object: %v", err)
	}
	principal, groups := principalOf(r)
	return &request{
		id: m.ID, method: m.Method, params: params,
		version: version, caps: vals[1], info: vals[2], logLevel: level,
		principal: principal, groups: groups,
	}, 0, nil
}

// nameMember returns the params member that the Mcp-Name header mirrors
// for method, or "".
func nameMember(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The tasks extension: intermediaries route a task's requests
		// to the instance that holds it.
		return "taskId"
	}
	return ""
}

// levels are the log levels, lowest first.
var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// levelRank returns a log level's place in levels, or -1.
func levelRank(level string) int {
	for i, l := range levels {
		if l == level {
			return i
		}
	}
	return -1
}
