package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/upstream"
)

// Upstreams is what the core needs of the upstream manager;
// *upstream.Manager implements it.
type Upstreams interface {
	// Call sends a request to the named server and waits for its result.
	// A server that is not running gives an *upstream.UnavailableError; a
	// JSON-RPC error from the server is a *jsonrpc.Error.
	Call(ctx context.Context, server, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error)
	// Servers returns a snapshot of every server, sorted by name.
	Servers() []upstream.Status
	// Watch calls fn after a server's state or lists changed, until stop.
	Watch(fn func(server string)) (stop func())
}

var _ Upstreams = (*upstream.Manager)(nil)

// Options configures a Server.
type Options struct {
	// Upstreams are the servers behind the gateway. Required.
	Upstreams Upstreams
	// Logger receives the core's logs. Nil discards them.
	Logger *slog.Logger
	// Name and Version are the gateway's Implementation, sent to clients.
	// If empty, "mcpgw" and "dev".
	Name, Version string
	// CallTimeout bounds a forwarded call. If zero,
	// config.DefaultCallTimeout.
	CallTimeout time.Duration
	// ServerTimeouts override CallTimeout per server name.
	ServerTimeouts map[string]time.Duration
}

// Server is the gateway core. It is safe for concurrent use. Create it
// with New and stop it with Close.
type Server struct {
	opts   Options
	logger *slog.Logger
	info   Info

	cat       atomic.Pointer[catalog]
	rebuildMu sync.Mutex // serializes rebuilds so versions only grow
	stopWatch func()

	mu       sync.Mutex
	watchers map[int]func(Change)
	nextW    int
}

// Info is what the gateway says about itself: at initialize on the legacy
// edge, in server/discover on the modern one.
type Info struct {
	// ServerInfo is the gateway's Implementation object.
	ServerInfo json.RawMessage
	// Capabilities are the server capabilities the gateway offers.
	Capabilities json.RawMessage
}

// Change tells an edge that a merged list changed, so that it can send its
// clients the list_changed notification of its era.
type Change struct {
	// List is "tools" (prompts and resources follow with the catalog).
	List string
	// Version is the merged catalog's new version.
	Version uint64
}

// New returns a core over opts.Upstreams and starts following their
// changes.
func New(opts Options) (*Server, error) {
	if opts.Upstreams == nil {
		return nil, errors.New("gateway: Options.Upstreams is required")
	}
	if opts.Name == "" {
		opts.Name = "mcpgw"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = config.DefaultCallTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, logger: logger, watchers: make(map[int]func(Change))}
	serverInfo, _ := json.Marshal(map[string]string{"name": opts.Name, "version": opts.Version})
	s.info = Info{
		ServerInfo: serverInfo,
		// The legacy era fixes capabilities at initialize, so the gateway
		// offers what it serves for any configured server, started or not:
		// tools, whose list changes as servers come and go.
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`),
	}
	s.cat.Store(buildCatalog(opts.Upstreams.Servers(), 1, logger))
	s.stopWatch = opts.Upstreams.Watch(func(string) { s.rebuild() })
	return s, nil
}

// Close stops following upstream changes.
func (s *Server) Close() {
	s.stopWatch()
}

// Info returns what the gateway says about itself.
func (s *Server) Info() Info { return s.info }

// Watch calls fn after a merged list changed, until stop is called. fn runs
// on the goroutine that noticed the change and must not block for long.
func (s *Server) Watch(fn func(Change)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextW
	s.nextW++
	s.watchers[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers, id)
	}
}

// rebuild merges the upstreams' lists again and, when the exposed tools
// changed, publishes a new catalog and tells the watchers.
func (s *Server) rebuild() {
	s.rebuildMu.Lock()
	old := s.cat.Load()
	next := buildCatalog(s.opts.Upstreams.Servers(), old.version+1, s.logger)
	if bytes.Equal(next.listBody, old.listBody) {
		// Same exposed tools; keep routing data fresh anyway (it is
		// identical) and tell nobody.
		s.rebuildMu.Unlock()
		return
	}
	s.cat.Store(next)
	s.rebuildMu.Unlock()

	s.mu.Lock()
	fns := make([]func(Change), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(Change{List: "tools", Version: next.version})
	}
}

// Handle answers one request. The error, when not nil, is a *jsonrpc.Error
// ready for the client, or the context's error when ctx ended (the client
// went away or cancelled; nothing is to be written).
func (s *Server) Handle(ctx context.Context, req *Request) (*Result, error) {
	switch req.Method {
	case "ping":
		return complete(json.RawMessage(`{}`)), nil
	case "tools/list":
		return s.toolsList(req)
	case "tools/call":
		return s.toolsCall(ctx, req)
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not offered by this gateway", req.Method)
	}
}

// toolsList serves the merged tools as one full page. The gateway issues no
// cursors yet, so any cursor is one it never gave out.
func (s *Server) toolsList(req *Request) (*Result, error) {
	if c, ok := rawjson.String(req.Params, "cursor"); ok && c != "" {
		return nil, invalidParams("invalid cursor: this gateway returns the whole list in one page and issued no cursor; call tools/list without one")
	}
	return complete(s.cat.Load().listBody), nil
}

// toolsCall routes a call by the reverse name table to its server, under
// the server's own name for the tool.
func (s *Server) toolsCall(ctx context.Context, req *Request) (*Result, error) {
	if len(req.Params) == 0 {
		return nil, invalidParams("tools/call needs params with a tool name")
	}
	name, ok := rawjson.String(req.Params, "name")
	if !ok || name == "" {
		return nil, invalidParams("tools/call needs params.name, the tool's name as tools/list gives it")
	}
	ref, ok := s.cat.Load().names.Lookup(name)
	if !ok {
		return nil, invalidParams("unknown tool %q: it is not in this gateway's tools/list", name)
	}
	origName, _ := json.Marshal(ref.Name)
	params, err := rawjson.Set(req.Params, "name", origName)
	if err != nil {
		return nil, invalidParams("tools/call params must be a JSON object")
	}
	body, err := s.forward(ctx, req, ref, "tools/call", params)
	if err != nil {
		return nil, err
	}
	return complete(body), nil
}

// forward sends a request to ref's server under the call timeout and maps
// failures to the gateway's errors.
func (s *Server) forward(ctx context.Context, req *Request, ref naming.Ref, method string, params json.RawMessage) (json.RawMessage, error) {
	timeout := s.opts.CallTimeout
	if d, ok := s.opts.ServerTimeouts[ref.Server]; ok && d > 0 {
		timeout = d
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var hooks *upstream.CallHooks
	if req.Notify != nil {
		hooks = &upstream.CallHooks{Notify: func(m *jsonrpc.Message) { req.Notify(m.Method, m.Params) }}
	}
	body, err := s.opts.Upstreams.Call(cctx, ref.Server, method, params, hooks)
	if err == nil {
		return body, nil
	}
	var jerr *jsonrpc.Error
	var unavail *upstream.UnavailableError
	switch {
	case errors.As(err, &jerr):
		return nil, jerr // the server's own error, relayed as it is
	case errors.As(err, &unavail):
		return nil, unavailable(ref.Server, string(unavail.State), unavail.Err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		s.logger.Warn("upstream call timed out", "server", ref.Server, "method", method, "tool", ref.Name, "timeout", timeout)
		return nil, timedOut(ref.Server, method, timeout)
	default:
		s.logger.Warn("upstream call failed", "server", ref.Server, "method", method, "tool", ref.Name, "err", err)
		return nil, unavailable(ref.Server, string(upstream.StateRunning), fmt.Sprintf("the call failed: %v", err))
	}
}

// Servers returns a snapshot of every upstream server's status, sorted by
// name, for the admin API.
func (s *Server) Servers() []upstream.Status {
	return s.opts.Upstreams.Servers()
}
