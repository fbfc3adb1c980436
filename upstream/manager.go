package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// State is where a server is in its life.
type State string

// The states of a server.
const (
	StateDisabled State = "disabled" // enabled: false in its config
	StateStarting State = "starting" // connecting and initializing
	StateRunning  State = "running"  // initialized; calls go through
	StateFailed   State = "failed"   // could not start (see Status.Error)
	StateExited   State = "exited"   // was running; the connection ended (see Status.Error)
	StateStopped  State = "stopped"  // stopped by the gateway
)

// Status is a snapshot of one server. Its lists are immutable: each is
// replaced, never changed, when the server's list changes, and they keep
// the last lists after the server goes down, so that the server's tools
// stay routable and their calls can name the server and its state (DESIGN
// decision 9).
type Status struct {
	Name            string          `json:"name"`
	Transport       string          `json:"transport"`
	Enabled         bool            `json:"enabled"`
	State           State           `json:"state"`
	Error           string          `json:"error,omitempty"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	ServerInfo      json.RawMessage `json:"server_info,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	Instructions    string          `json:"-"`
	// Tools, Prompts, Resources and Templates are the server's lists as
	// raw JSON objects, each replaced whole when it changes.
	Tools         []json.RawMessage `json:"-"`
	Prompts       []json.RawMessage `json:"-"`
	Resources     []json.RawMessage `json:"-"`
	Templates     []json.RawMessage `json:"-"`
	ToolCount     int               `json:"tool_count"`
	PromptCount   int               `json:"prompt_count"`
	ResourceCount int               `json:"resource_count"`
	TemplateCount int               `json:"resource_template_count"`
	// Problems are what the gateway noticed about the server's lists:
	// a list that could not be read, names that clashed.
	Problems   []string  `json:"problems,omitempty"`
	PID        int       `json:"pid,omitempty"`
	LastStderr string    `json:"last_stderr,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
}

// ManagerOptions configures a Manager.
type ManagerOptions struct {
	// Servers are the configured servers, already validated.
	Servers []config.Server
	// StartTimeout bounds connecting and initializing one server, and
	// listing its tools. If zero, config.DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives the manager's and the clients' logs. Nil discards.
	Logger *slog.Logger
	// ClientInfo is the Implementation the clients send in initialize.
	ClientInfo json.RawMessage
	// MaxMessageBytes caps one upstream message. If zero,
	// config.DefaultMaxResponseBody.
	MaxMessageBytes int64
	// HTTPClient sends the http and sse transports' requests. Nil uses a
	// shared keep-alive client.
	HTTPClient *http.Client
	// StopGrace is a stdio child's grace after stdin closes and after
	// SIGTERM. If zero, 3s.
	StopGrace time.Duration
}

// Manager starts every enabled server in the background, keeps each one's
// state and tools, routes calls to it, and stops them all on Close. A server
// that fails blocks nothing: it is recorded with its error.
type Manager struct {
	opts   ManagerOptions
	logger *slog.Logger

	ctx    context.Context // lifetime of background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	servers  map[string]*entry
	watchers map[int]func(Event)
	nextW    int
	closed   bool
}

// entry is one server's mutable record, guarded by Manager.mu.
type entry struct {
	cfg    config.Server
	status Status
	client *Client // nil unless starting or running
	// refreshing and dirty coalesce list refreshes per kind: a change
	// notice during a refresh makes one more refresh, not one per notice.
	refreshing map[listKind]bool
	dirty      map[listKind]bool
	listErrs   map[listKind]string
}

// listKind is one of the lists a server may offer.
type listKind string

const (
	kindTools     listKind = "tools"
	kindPrompts   listKind = "prompts"
	kindResources listKind = "resources" // resources and resource templates
)

// NewManager returns a Manager for opts.Servers. Nothing starts until Start.
func NewManager(opts ManagerOptions) *Manager {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = config.DefaultStartTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		opts:     opts,
		logger:   logger,
		ctx:      ctx,
		cancel:   cancel,
		servers:  make(map[string]*entry),
		watchers: make(map[int]func(Event)),
	}
	for _, s := range opts.Servers {
		st := Status{Name: s.Name, Transport: s.Transport, Enabled: s.IsEnabled(), State: StateStopped}
		if !s.IsEnabled() {
			st.State = StateDisabled
		}
		m.servers[s.Name] = &entry{cfg: s, status: st,
			refreshing: map[listKind]bool{}, dirty: map[listKind]bool{}, listErrs: map[listKind]string{}}
	}
	return m
}

// Start begins starting every enabled server in the background and returns
// at once.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.servers {
		if e.cfg.IsEnabled() {
			m.startLocked(e)
		}
	}
}

// startLocked starts e's server in a goroutine owned by the manager.
func (m *Manager) startLocked(e *entry) {
	if m.closed {
		return
	}
	c, err := New(e.cfg, ClientOptions{
		Name:            e.cfg.Name,
		Logger:          m.logger,
		ClientInfo:      m.opts.ClientInfo,
		MaxMessageBytes: m.opts.MaxMessageBytes,
		HTTPClient:      m.opts.HTTPClient,
		StopGrace:       m.opts.StopGrace,
		OnNotification:  func(n *jsonrpc.Message) { m.onNotification(e.cfg.Name, n) },
	})
	if err != nil {
		e.status.State = StateFailed
		e.status.Error = err.Error()
		return
	}
	e.client = c
	e.status.State = StateStarting
	e.status.Error = ""
	m.wg.Add(1)
	go m.run(e, c)
}

// run connects c, lists its tools, marks it running and waits for its end.
func (m *Manager) run(e *entry, c *Client) {
	defer m.wg.Done()
	name := e.cfg.Name
	logger := m.logger.With("server", name)
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.StartTimeout)
	err := c.Connect(ctx)
	var lists serverLists
	if err == nil {
		lists, err = readLists(ctx, c, allKinds)
		if err != nil {
			closeCtx, closeCancel := context.WithTimeout(context.Background(), m.stopBound())
			c.Close(closeCtx)
			closeCancel()
		}
	}
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && m.ctx.Err() == nil {
			err = fmt.Errorf("did not start within %s: %w", m.opts.StartTimeout, err)
		}
		m.mu.Lock()
		if e.client == c {
			e.status.State = StateFailed
			e.status.Error = err.Error()
			e.status.LastStderr = c.LastStderr()
			e.client = nil
		}
		m.mu.Unlock()
		if m.ctx.Err() == nil {
			logger.Error("server failed to start", "err", err)
		}
		m.changed(name)
		return
	}
	init := c.Initialized()
	m.mu.Lock()
	if e.client != c { // stopped while starting
		m.mu.Unlock()
		return
	}
	e.status.ProtocolVersion = init.ProtocolVersion
	e.status.ServerInfo = init.ServerInfo
	e.status.Capabilities = init.Capabilities
	e.status.Instructions = init.Instructions
	for k := range allKinds {
		lists.apply(e, k)
	}
	e.status.PID = c.PID()
	m.mu.Unlock()
	// Publish the tools first and the state after, so that whoever sees
	// "running" can also route to every tool: the watchers (the core's
	// merged catalog) are told before the state changes.
	m.changed(name)
	m.mu.Lock()
	if e.client != c {
		m.mu.Unlock()
		return
	}
	e.status.State = StateRunning
	e.status.StartedAt = time.Now()
	m.mu.Unlock()
	logger.Info("server running", "protocol_version", init.ProtocolVersion,
		"tools", len(lists.tools), "prompts", len(lists.prompts), "resources", len(lists.resources), "pid", c.PID())
	m.changed(name)

	<-c.Done()
	m.mu.Lock()
	if e.client != c { // stopped by the gateway
		m.mu.Unlock()
		return
	}
	e.client = nil
	e.status.State = StateExited
	e.status.LastStderr = c.LastStderr()
	if cerr := c.Err(); cerr != nil {
		e.status.Error = cerr.Error()
	} else {
		e.status.Error = "connection closed"
	}
	errText := e.status.Error
	m.mu.Unlock()
	logger.Error("server connection ended", "err", errText)
	m.changed(name)
}

func (m *Manager) stopBound() time.Duration {
	g := m.opts.StopGrace
	if g <= 0 {
		g = defaultStopGrace
	}
	return 3*g + time.Second
}

// onNotification handles a server's notifications that belong to no call:
// list changes refresh that list; the rest go to the watchers.
func (m *Manager) onNotification(server string, n *jsonrpc.Message) {
	var kind listKind
	switch n.Method {
	case "notifications/tools/list_changed":
		kind = kindTools
	case "notifications/prompts/list_changed":
		kind = kindPrompts
	case "notifications/resources/list_changed":
		kind = kindResources
	default:
		m.emit(Event{Server: server, Notification: n})
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.servers[server]
	if e == nil || m.closed {
		return
	}
	if e.refreshing[kind] {
		e.dirty[kind] = true
		return
	}
	e.refreshing[kind] = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.refresh(e, kind)
	}()
}

// refresh reads one of a running server's lists again and publishes it,
// once more for every change notice that came in meanwhile.
func (m *Manager) refresh(e *entry, kind listKind) {
	for {
		m.mu.Lock()
		e.dirty[kind] = false
		var c *Client
		if e.status.State == StateRunning {
			c = e.client
		}
		m.mu.Unlock()
		if c == nil {
			break
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.opts.StartTimeout)
		lists, err := readLists(ctx, c, map[listKind]bool{kind: true})
		cancel()
		m.mu.Lock()
		if e.client == c {
			if err != nil {
				e.listErrs[kind] = err.Error()
				m.logger.Warn("reading a list after list_changed failed", "server", e.cfg.Name, "list", string(kind), "err", err)
			} else {
				lists.apply(e, kind)
			}
			e.status.Problems = listProblems(e)
		}
		m.mu.Unlock()
		m.changed(e.cfg.Name)
		m.mu.Lock()
		again := e.dirty[kind] && m.ctx.Err() == nil
		m.mu.Unlock()
		if !again {
			break
		}
	}
	m.mu.Lock()
	e.refreshing[kind] = false
	m.mu.Unlock()
}

// allKinds are the lists read at start.
var allKinds = map[listKind]bool{kindTools: true, kindPrompts: true, kindResources: true}

// serverLists are lists read from a server; a nil list was not read.
type serverLists struct {
	read                                 map[listKind]bool
	errs                                 map[listKind]string
	tools, prompts, resources, templates []json.RawMessage
}

// readLists reads the lists of kinds that the server declared a capability
// for (a server without the tools capability has no tools). A tools list
// that cannot be read is an error; the other lists are optional features,
// so their errors only leave them empty (and are reported in
// Status.Problems).
func readLists(ctx context.Context, c *Client, kinds map[listKind]bool) (serverLists, error) {
	l := serverLists{read: map[listKind]bool{}, errs: map[listKind]string{}}
	init := c.Initialized()
	has := func(capability string) bool {
		if init == nil {
			return false
		}
		v, ok, _ := rawjson.Get(init.Capabilities, capability)
		return ok && string(v) != "null"
	}
	if kinds[kindTools] {
		l.read[kindTools] = true
		if has("tools") {
			tools, err := c.ListTools(ctx)
			if err != nil {
				return l, err
			}
			l.tools = tools
		}
	}
	if kinds[kindPrompts] {
		l.read[kindPrompts] = true
		if has("prompts") {
			var err error
			if l.prompts, err = c.ListPrompts(ctx); err != nil {
				l.errs[kindPrompts] = err.Error()
			}
		}
	}
	if kinds[kindResources] {
		l.read[kindResources] = true
		if has("resources") {
			var errs []error
			var err error
			if l.resources, err = c.ListResources(ctx); err != nil {
				errs = append(errs, err)
			}
			if l.templates, err = c.ListResourceTemplates(ctx); err != nil {
				errs = append(errs, err)
			}
			if len(errs) > 0 {
				l.errs[kindResources] = errors.Join(errs...).Error()
			}
		}
	}
	return l, nil
}

// apply stores the lists of kind into e's status (m.mu held).
func (l serverLists) apply(e *entry, kind listKind) {
	if !l.read[kind] {
		return
	}
	delete(e.listErrs, kind)
	if msg := l.errs[kind]; msg != "" {
		e.listErrs[kind] = msg
	}
	switch kind {
	case kindTools:
		e.status.Tools, e.status.ToolCount = l.tools, len(l.tools)
	case kindPrompts:
		e.status.Prompts, e.status.PromptCount = l.prompts, len(l.prompts)
	case kindResources:
		e.status.Resources, e.status.ResourceCount = l.resources, len(l.resources)
		e.status.Templates, e.status.TemplateCount = l.templates, len(l.templates)
	}
	e.status.Problems = listProblems(e)
}

func listProblems(e *entry) []string {
	var out []string
	for _, k := range []listKind{kindTools, kindPrompts, kindResources} {
		if msg := e.listErrs[k]; msg != "" {
			out = append(out, fmt.Sprintf("reading %s: %s", k, msg))
		}
	}
	return out
}

// Event tells a watcher what happened at one server.
type Event struct {
	// Server is the server's name.
	Server string
	// Notification, when not nil, is a notification from the server that
	// belongs to no call and that the manager does not handle itself (such
	// as notifications/resources/updated). When nil, the server's state or
	// one of its lists changed: read Servers again.
	Notification *jsonrpc.Message
}

// Watch registers fn to be called, from a manager goroutine, for every
// Event. fn must not block for long. The returned func unregisters it.
func (m *Manager) Watch(fn func(Event)) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextW
	m.nextW++
	m.watchers[id] = fn
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, id)
	}
}

// changed tells the watchers that server's state or lists changed.
func (m *Manager) changed(server string) { m.emit(Event{Server: server}) }

func (m *Manager) emit(ev Event) {
	m.mu.Lock()
	fns := make([]func(Event), 0, len(m.watchers))
	for _, fn := range m.watchers {
		fns = append(fns, fn)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// Servers returns a snapshot of every server, sorted by name.
func (m *Manager) Servers() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.servers))
	for _, e := range m.servers {
		out = append(out, m.statusLocked(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Server returns a snapshot of one server.
func (m *Manager) Server(name string) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.servers[name]
	if !ok {
		return Status{}, false
	}
	return m.statusLocked(e), true
}

func (m *Manager) statusLocked(e *entry) Status {
	st := e.status
	if e.client != nil {
		st.LastStderr = e.client.LastStderr()
	}
	return st
}

// Names returns the configured server names, sorted.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.servers))
	for n := range m.servers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// UnavailableError is returned by Call when the server is not running.
type UnavailableError struct {
	Server string
	State  State
	Err    string // the server's last error, if any
}

func (e *UnavailableError) Error() string {
	if e.Err != "" {
		return fmt.Sprintf("server %q is %s: %s", e.Server, e.State, e.Err)
	}
	return fmt.Sprintf("server %q is %s", e.Server, e.State)
}

// ErrUnknownServer is returned by Call for a name no server has.
var ErrUnknownServer = errors.New("unknown server")

// Call sends a request to the named server and waits for its result. A
// server that is not running gives an *UnavailableError; a JSON-RPC error
// from the server is a *jsonrpc.Error.
func (m *Manager) Call(ctx context.Context, server, method string, params json.RawMessage, hooks *CallHooks) (json.RawMessage, error) {
	m.mu.Lock()
	e, ok := m.servers[server]
	if !ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	c := e.client
	if c == nil || e.status.State != StateRunning {
		err := &UnavailableError{Server: server, State: e.status.State, Err: e.status.Error}
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Unlock()
	res, err := c.Call(ctx, method, params, hooks)
	var cerr *ConnectionError
	if errors.As(err, &cerr) || errors.Is(err, ErrClosed) {
		// The connection ended under the call: report the server's state
		// as the run loop records it.
		<-c.Done()
		m.mu.Lock()
		st, msg := e.status.State, e.status.Error
		if e.client == c { // the run loop has not caught up yet
			st, msg = StateExited, err.Error()
		}
		m.mu.Unlock()
		return nil, &UnavailableError{Server: server, State: st, Err: msg}
	}
	return res, err
}

// Close stops every server within ctx and waits for the manager's
// goroutines. It is idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var clients []*Client
	for _, e := range m.servers {
		if e.client != nil {
			clients = append(clients, e.client)
			e.client = nil
			if e.status.State != StateDisabled {
				e.status.State = StateStopped
			}
		}
	}
	m.mu.Unlock()
	m.cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Close(ctx)
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for server goroutines: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}
