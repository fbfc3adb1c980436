package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// State is where a server is in its life.
type State string

// The states of a server.
const (
	StateDisabled   State = "disabled"   // enabled: false in its config
	StateStarting   State = "starting"   // connecting and initializing
	StateRunning    State = "running"    // initialized; calls go through
	StateRestarting State = "restarting" // down, waiting to start again (see Status.NextRestart)
	StateFailed     State = "failed"     // could not start, and no restart is left (see Status.Error)
	StateExited     State = "exited"     // was running; the connection ended and no restart is left
	StateStopped    State = "stopped"    // stopped by the gateway
)

// Status is a snapshot of one server. Its lists are immutable: each is
// replaced, never changed, when the server's list changes, and they keep
// the last lists after the server goes down, so that the server's tools
// stay routable and their calls can name the server and its state (DESIGN
// decision 9).
type Status struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Enabled   bool   `json:"enabled"`
	State     State  `json:"state"`
	Error     string `json:"error,omitempty"`
	// Era is EraModern or EraLegacy: how the gateway last spoke to the
	// server (config's protocol, or what auto found); "" before the
	// first start. ProtocolVersion is the revision in use.
	Era             string          `json:"era,omitempty"`
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
	// Restarts counts the restarts since the gateway started (DESIGN
	// decision 9); NextRestart is when the next one begins, while the
	// state is StateRestarting.
	Restarts    int       `json:"restarts"`
	NextRestart time.Time `json:"next_restart,omitzero"`
	// Sessions is the number of upstream sessions or processes a
	// per_principal or per_session server holds for its callers, besides
	// the one that reads its lists.
	Sessions int `json:"sessions"`
	// MirroredSessions is the number of upstream sessions a legacy HTTP
	// or SSE server holds for calls whose clients declared fewer
	// capabilities than the gateway's own session (see mirror.go).
	MirroredSessions int `json:"mirrored_sessions"`
	// LastAnswered is the last request of the server that the gateway
	// answered itself for a client (see AnswerForClient); nil before the
	// first.
	LastAnswered *Answered `json:"last_answered,omitempty"`
}

// DefaultCapabilities are the client capabilities a Manager's clients
// declare when ManagerOptions.Capabilities is nil: the gateway relays
// elicitation (form and URL), sampling (with tools) and roots to whichever
// of its own clients declared them, and answers the server itself
// otherwise (PROTOCOL.md point 2). Roots are declared with listChanged
// only to the upstream sessions one client owns (pooled ones, and a
// single_user server's), whose client's notifications/roots/list_changed
// the gateway passes on; the others get roots from config, which do not
// change while the session lasts.
const DefaultCapabilities = `{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{"listChanged":true}}`

// ManagerOptions configures a Manager.
type ManagerOptions struct {
	// Servers are the configured servers, already validated: the
	// servers at Start (Add, Replace and Remove change them later).
	Servers []config.Server
	// StartTimeout bounds connecting and initializing one client, and
	// listing its server's tools. If zero, config.DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives the manager's and the clients' logs. Nil discards.
	Logger *slog.Logger
	// ClientInfo is the Implementation the clients send in initialize.
	ClientInfo json.RawMessage
	// Capabilities are the client capabilities every client declares in
	// initialize. If nil, DefaultCapabilities.
	Capabilities json.RawMessage
	// MaxMessageBytes caps one upstream message. If zero,
	// config.DefaultMaxResponseBody.
	MaxMessageBytes int64
	// HTTPClient sends the http and sse transports' requests. Nil uses a
	// shared keep-alive client.
	HTTPClient *http.Client
	// StopGrace is a stdio child's grace after stdin closes and after
	// SIGTERM. If zero, 3s.
	StopGrace time.Duration
	// LogDir is the directory of the servers' own log files,
	// <LogDir>/<name>.log (see LogPath), created when first written. If
	// "", no log files are written.
	LogDir string
	// Credentials gives each client its credentials. If nil,
	// StaticCredentials: the server's configured api_key, headers and env.
	Credentials CredentialProvider
	// TracerProvider makes the client span of each call (see Call). If
	// nil, the global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics of the calls and of the servers'
	// states and restarts. If nil, the global provider
	// (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider

	// newClient makes a client; tests replace New with in-memory peers.
	newClient func(srv config.Server, opts ClientOptions) (*Client, error)
	// logRotateBytes is the size at which log files rotate; if zero,
	// defaultLogRotateBytes.
	logRotateBytes int64
}

// Manager starts every enabled server in the background, keeps each one's
// state and lists, routes calls to it, restarts it when it fails, and stops
// them all on Close. A server that fails blocks nothing: it is recorded
// with its error, and started again with backoff. The servers may change
// while it runs: see Add, Replace, Remove, SetEnabled and Restart.
//
// # Clients of a server
//
//	entry ── base client: started by Start, restarted with backoff; reads
//	   │     the lists, serves shared calls (session_mode: shared)
//	   ├─ pool (per_principal, per_session): one client per principal or
//	   │     per downstream session, connected at its first call, closed
//	   │     when idle, least recently used first when full, or at
//	   │     EndSession
//	   └─ mirrors (legacy http, sse): one client per caller and set of
//	         capabilities a client lacked, for the calls that run server
//	         code (mirror.go); they come and go as the pool's
//
// Every client gets its credentials from the CredentialProvider, writes to
// the server's log file, and hands the server's requests that no call can
// take to the RequestFunc of HandleRequests, or has the gateway answer
// them (see AnswerForClient).
type Manager struct {
	opts   ManagerOptions
	logger *slog.Logger
	creds  CredentialProvider
	ins    instruments

	ctx    context.Context // lifetime of background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// ops serializes Start and the changes of the server set (Add,
	// Replace, Remove, SetEnabled, Restart), each of which finishes
	// stopping a server before the next one begins, so that two
	// processes of one server never overlap. It is never taken with mu
	// held.
	ops sync.Mutex

	mu       sync.Mutex
	servers  map[string]*entry
	watchers map[int]func(Event)
	nextW    int
	started  bool
	closed   bool
	level    string // the level of SetLogLevel, "" for none
	// requests answers the servers' requests outside any call (see
	// HandleRequests); requestsID tells its registration from a later
	// one.
	requests            RequestFunc
	requestsID, nextReq int
	// staticCaps are opts.Capabilities with roots declared without
	// listChanged, for the upstream sessions no one client owns.
	staticCaps json.RawMessage
	// reapEvery is the reaper's interval, 0 while no reaper runs;
	// reapNudge hands it a shorter one (see reapLocked).
	reapEvery time.Duration
	reapNudge chan time.Duration
}

// entry is one server's mutable record, guarded by Manager.mu.
//
// An entry serves one configuration of a server for as long as it is in
// service. Replace, Remove, SetEnabled and Restart take it out of service
// (stopLocked) and, but for Remove, put a new entry in its place under the
// same name; the old one's goroutines end, and whatever of it is still
// under way (a start, a refresh, a notification) finds it stopped and
// touches neither the new entry nor the watchers. The entry pointer is
// the server's identity: everything that works for a server holds its
// *entry, never looks it up again by name.
type entry struct {
	cfg    config.Server
	log    *serverLog    // nil without LogDir
	sem    chan struct{} // one slot when cfg.Serialize, else nil
	limits *limits       // cfg.RateLimit; nil when it sets none
	pool   *pool         // nil for shared servers
	// mirrors are the sessions mirroring a client's capabilities
	// (mirror.go); nil for a server that is never mirrored.
	mirrors *pool
	status  Status
	client  *Client // the base client; nil unless starting or running
	// refreshing and dirty coalesce list refreshes per kind: a change
	// notice during a refresh makes one more refresh, not one per notice.
	refreshing map[listKind]bool
	dirty      map[listKind]bool
	listErrs   map[listKind]string
	// errsSeen are the error texts already logged at error level, oldest
	// first, so that a crash loop logs each distinct error once.
	errsSeen []string
	// failures counts the restarts in a row since the server last ran.
	failures int
	// answersLogged is when an answer for a client was last logged at
	// info, and answersQuiet how many were answered since without a log
	// line: a server that asks without end logs once a minute.
	answersLogged time.Time
	answersQuiet  int
	// seed is the last base client that connected: the next one restores
	// its subscriptions and log level, across a successor entry too.
	seed *Client
	// probe remembers for the entry's clients that the server's child
	// exited when asked server/discover.
	probe ProbeMemory

	// ctx is the lifetime of the entry's background work, cancelled by
	// stopLocked or by Close.
	ctx    context.Context
	cancel context.CancelFunc
	// stopped is set once the entry is out of service (see stopLocked).
	stopped bool
	// work counts the entry's goroutines (goEntry) and the deliveries of
	// its events to the watchers under way (emitFor); a stop waits for
	// it. Add is called with Manager.mu held, before the entry is
	// stopped or in the step that stops it, so never after the Wait.
	work sync.WaitGroup
}

// maxErrsSeen bounds entry.errsSeen.
const maxErrsSeen = 32

// NewManager returns a Manager for opts.Servers. Nothing starts until Start.
func NewManager(opts ManagerOptions) *Manager {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = config.DefaultStartTimeout
	}
	if opts.Capabilities == nil {
		opts.Capabilities = json.RawMessage(DefaultCapabilities)
	}
	if opts.newClient == nil {
		opts.newClient = New
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	creds := opts.Credentials
	if creds == nil {
		creds = StaticCredentials{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		opts:      opts,
		logger:    logger,
		creds:     creds,
		ctx:       ctx,
		cancel:    cancel,
		servers:   make(map[string]*entry),
		watchers:  make(map[int]func(Event)),
		reapNudge: make(chan time.Duration, 1),
	}
	m.staticCaps = withoutRootsListChanged(opts.Capabilities)
	for _, s := range opts.Servers {
		m.servers[s.Name] = m.newEntry(s, m.newLog(s.Name))
	}
	m.ins = m.newInstruments()
	return m
}

// newEntry returns a new entry of srv, writing to log, not yet started.
func (m *Manager) newEntry(srv config.Server, log *serverLog) *entry {
	st := Status{Name: srv.Name, Transport: srv.Transport, Enabled: srv.IsEnabled(), State: StateStopped}
	if !srv.IsEnabled() {
		st.State = StateDisabled
	}
	e := &entry{cfg: srv, log: log, status: st, pool: newPool(srv), mirrors: newMirrors(srv), limits: newLimits(srv.RateLimit),
		refreshing: map[listKind]bool{}, dirty: map[listKind]bool{}, listErrs: map[listKind]string{}}
	if srv.Serialize {
		e.sem = make(chan struct{}, 1)
	}
	e.ctx, e.cancel = context.WithCancel(m.ctx)
	return e
}

// newLog returns the log of server name, nil without LogDir.
func (m *Manager) newLog(name string) *serverLog {
	return newServerLog(m.opts.LogDir, name, m.opts.logRotateBytes, func(err error) {
		m.logger.Warn("writing the server's log file failed", "server", name, "err", err)
	})
}

// Start begins starting every enabled server in the background and returns
// at once.
func (m *Manager) Start() {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.started {
		return
	}
	m.started = true
	for _, e := range m.servers {
		if e.cfg.IsEnabled() {
			m.startLocked(e)
		}
	}
}

// startLocked starts e's supervisor, and the reaper for its pool. m.mu is
// held, m has started and is not closed, and e is enabled and in service.
func (m *Manager) startLocked(e *entry) {
	e.status.State = StateStarting
	m.goEntry(e, func() { m.supervise(e) })
	for _, pl := range e.pools() {
		m.reapLocked(pl.idle)
	}
}

// goEntry runs f in a goroutine of e, which Close and e's stop wait for.
// m.mu is held and m is not closed; e is in service, or being stopped in
// this same critical section.
func (m *Manager) goEntry(e *entry, f func()) {
	m.wg.Add(1)
	e.work.Add(1)
	go func() {
		defer m.wg.Done()
		defer e.work.Done()
		f()
	}()
}

// goneLocked reports whether e's background work should end: Close ran,
// or e is out of service. m.mu is held.
func (m *Manager) goneLocked(e *entry) bool { return m.closed || e.stopped }

// LogPath returns the path of server's log file, or "" when there is none
// (no LogDir, or no such server). The file may not exist yet.
func (m *Manager) LogPath(server string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.servers[server]
	if e == nil || e.log == nil {
		return ""
	}
	return e.log.path
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
	// Who is the caller whose pooled upstream session (per_principal,
	// per_session) sent Notification; zero for the shared one.
	Who Caller
}

// Watch registers fn to be called, from a manager goroutine, for every
// Event. fn must not block for long, and must not call the methods that
// change the servers (Add, Replace, Remove, SetEnabled, Restart): they
// wait for the events of the server they stop that are being delivered.
// The returned func unregisters it.
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
func (m *Manager) changed(server string) {
	m.mu.Lock()
	fns := m.watchersLocked()
	m.mu.Unlock()
	for _, fn := range fns {
		fn(Event{Server: server})
	}
}

// changedEntry tells the watchers that e's state or lists changed, unless
// e is out of service.
func (m *Manager) changedEntry(e *entry) { m.emitFor(e, Event{Server: e.cfg.Name}) }

// emitFor tells the watchers of ev, an event of e, unless e is out of
// service: a stopped entry's late events never reach them, and its stop
// waits for the deliveries already under way, so that none comes after
// the Event of the change that stopped it.
func (m *Manager) emitFor(e *entry, ev Event) {
	m.mu.Lock()
	if e.stopped {
		m.mu.Unlock()
		return
	}
	e.work.Add(1)
	defer e.work.Done()
	fns := m.watchersLocked()
	m.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

func (m *Manager) watchersLocked() []func(Event) {
	fns := make([]func(Event), 0, len(m.watchers))
	for _, fn := range m.watchers {
		fns = append(fns, fn)
	}
	return fns
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

// Era returns the era server is spoken to in now, EraModern or EraLegacy,
// or "" when it is not connected.
func (m *Manager) Era(server string) string {
	m.mu.Lock()
	e, ok := m.servers[server]
	var c *Client
	if ok {
		c = e.client
	}
	m.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.Era()
}

func (m *Manager) statusLocked(e *entry) Status {
	st := e.status
	if e.client != nil {
		st.LastStderr = e.client.LastStderr()
	}
	if e.pool != nil {
		st.Sessions = len(e.pool.clients)
	}
	if e.mirrors != nil {
		st.MirroredSessions = len(e.mirrors.clients)
	}
	return st
}

// UnavailableError is returned by Call when the server is not running, or
// when the connection a call was using ended under it.
type UnavailableError struct {
	Server string
	State  State
	Err    string // the server's last error, if any
	// Cause is the error behind Err when the caller's own upstream
	// session failed to connect (a pooled one), for errors.As.
	Cause error
}

func (e *UnavailableError) Unwrap() error { return e.Cause }

func (e *UnavailableError) Error() string {
	if e.Err != "" {
		return fmt.Sprintf("server %q is %s: %s", e.Server, e.State, e.Err)
	}
	return fmt.Sprintf("server %q is %s", e.Server, e.State)
}

// PoolFullError is returned by Call when a per_principal or per_session
// server needs a new upstream session for the caller but already holds
// Max, all of them busy with calls.
type PoolFullError struct {
	Server string
	Max    int
}

func (e *PoolFullError) Error() string {
	return fmt.Sprintf("server %q already has %d upstream sessions in use (pool.max); try again later", e.Server, e.Max)
}

// Caller says on whose behalf a call is made: the principal and the
// downstream session. A server's session mode picks the upstream session
// or process by it (shared: one for all; per_principal: one per
// Principal; per_session: one per Session, or per Principal for a caller
// without a session, such as a modern-era request).
type Caller struct {
	Principal string
	Session   string
}

// ErrUnknownServer is returned by Call, and the methods that change a
// server, for a name no server has (any more).
var ErrUnknownServer = errors.New("unknown server")

// Call sends a request to the named server on behalf of who and waits for
// its result. The server's session mode picks the client: the base client
// (shared), or the caller's own, connected at its first call within the
// start timeout (per_principal, per_session). A server that is not running
// gives an *UnavailableError, and so does a call whose connection ends
// under it, at once; a call over the server's rate_limit gives a
// *RateLimitedError at once, before anything is sent (every Call counts,
// see limits); a full pool gives a *PoolFullError; a JSON-RPC error from
// the server is a *jsonrpc.Error. With serialize set, the server's calls
// wait for each other (bounded by ctx).
//
// A call that gets through to the server has a client span, child of the
// span ctx carries, whose context reaches the server (see telemetry.go),
// and counts in the call metrics; a call refused before has neither.
func (m *Manager) Call(ctx context.Context, server string, who Caller, method string, params json.RawMessage, hooks *CallHooks) (json.RawMessage, error) {
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

	// Before the pool, which may connect (initialize) a new session.
	done, err := e.limits.acquire(server, time.Now())
	if err != nil {
		return nil, err
	}
	defer done()
	var p *pooled
	switch caps := m.mirrorOf(e, c, who, method, params, hooks); {
	case caps != nil:
		p, err = m.acquire(ctx, e, e.mirrors, who, caps)
	case e.pool != nil:
		p, err = m.acquire(ctx, e, e.pool, who, nil)
	}
	if err != nil {
		return nil, err
	}
	if p != nil {
		defer m.release(p)
		c = p.client
	}
	if e.sem != nil {
		select {
		case e.sem <- struct{}{}:
			defer func() { <-e.sem }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	target, progress := callMembers(method, params)
	cctx, uc := m.startCall(ctx, e, c, method, target)
	res, err := c.call(cctx, method, params, progress, hooks)
	uc.end(cctx, res, err)
	var cerr *ConnectionError
	if !errors.As(err, &cerr) && !errors.Is(err, ErrClosed) {
		return res, err
	}
	// The connection ended under the call.
	if p != nil {
		m.dropPooled(e, p, err)
		if uerr := m.stoppedErr(e); uerr != nil {
			return nil, uerr
		}
		return nil, &UnavailableError{Server: server, State: StateExited, Err: err.Error()}
	}
	// Report the server's state as the supervisor records it, once it
	// has (the client is done by now, or closing).
	select {
	case <-c.Done():
	case <-ctx.Done():
	}
	m.mu.Lock()
	st, msg := e.status.State, e.status.Error
	if !e.stopped && (e.client == c || st == StateRunning) { // not caught up, or already restarted
		st, msg = StateExited, err.Error()
	}
	m.mu.Unlock()
	return nil, &UnavailableError{Server: server, State: st, Err: msg}
}

// stoppedErr returns the error of a call that e, out of service, can no
// longer serve, or nil while e is in service: the state and reason its
// stop recorded (say, stopped: removed).
func (m *Manager) stoppedErr(e *entry) *UnavailableError {
	m.mu.Lock()
	defer m.mu.Unlock()
	return stoppedErrLocked(e)
}

// stoppedErrLocked is stoppedErr with m.mu held.
func stoppedErrLocked(e *entry) *UnavailableError {
	if !e.stopped {
		return nil
	}
	return &UnavailableError{Server: e.cfg.Name, State: e.status.State, Err: e.status.Error}
}

// setLevelTimeout bounds one logging/setLevel sent by SetLogLevel.
const setLevelTimeout = 30 * time.Second

// SetLogLevel sets the level (logging/setLevel) of every live client of
// every server that declared logging, in the background, and of every
// client connected or restarted from now on; "" does nothing (the servers
// keep their own default). Failures are logged.
func (m *Manager) SetLogLevel(level string) {
	if level == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.level = level
	for _, e := range m.servers {
		if e.client != nil && e.status.State == StateRunning {
			m.setLevelLocked(e, e.client, level)
		}
		for _, pl := range e.pools() {
			for _, p := range pl.clients {
				if p.client != nil {
					m.setLevelLocked(e, p.client, level)
				}
			}
		}
	}
}

// setLevelLocked makes c's server log at level, when it declared logging.
// One sender per client sends the levels in order and always ends on the
// latest (two setLevel requests in flight could be applied in either
// order). m.mu is held and m is not closed.
func (m *Manager) setLevelLocked(e *entry, c *Client, level string) {
	if !hasCapability(c, "logging") || !c.wantLevel(level) {
		return
	}
	name := e.cfg.Name
	m.goEntry(e, func() {
		for {
			level, ok := c.nextLevel()
			if !ok {
				return
			}
			params, _ := json.Marshal(map[string]string{"level": level})
			ctx, cancel := context.WithTimeout(e.ctx, setLevelTimeout)
			_, err := c.Call(ctx, "logging/setLevel", params, nil)
			cancel()
			if err != nil && e.ctx.Err() == nil {
				m.logger.Warn("setting the server's log level failed", "server", name, "level", level, "err", err)
			}
			c.levelSent(level)
		}
	})
}

// EndSession releases what the manager holds for a downstream session that
// ended: the upstream sessions and processes of per_session servers, and
// their sessions mirroring its capabilities, closed in the background
// (each within the stop bound).
func (m *Manager) EndSession(session string) {
	if session == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, e := range m.servers {
		if e.pool == nil || e.pool.mode != config.SessionPerSession {
			continue
		}
		if p := e.pool.clients[sessionKey(session)]; p != nil {
			m.retireLocked(e, p, "the downstream session ended")
		}
		if e.mirrors == nil {
			continue
		}
		for _, p := range e.mirrors.clients {
			if p.callerKey == sessionKey(session) {
				m.retireLocked(e, p, "the downstream session ended")
			}
		}
	}
}

// Close stops every server within ctx and waits for the manager's
// goroutines, then closes the log files. It is idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	started := m.started
	type stopping struct {
		p *pooled // nil for the base client
		c *Client
	}
	var clients []stopping
	for _, e := range m.servers {
		if e.client != nil {
			clients = append(clients, stopping{c: e.client})
			e.client = nil
		}
		if e.status.State != StateDisabled {
			e.status.State = StateStopped
			e.status.NextRestart = time.Time{}
		}
		for _, pl := range e.pools() {
			for key, p := range pl.clients {
				delete(pl.clients, key)
				if p.client != nil {
					clients = append(clients, stopping{p: p, c: p.client})
				}
			}
		}
	}
	m.mu.Unlock()
	// Not under m.mu, which the metrics callback takes while the meter
	// holds its own lock.
	m.ins.unregister()
	m.cancel()
	const stopped = "stopped: the gateway is shutting down"
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, s := range clients {
		wg.Go(func() {
			errs[i] = s.c.Close(ctx)
			if s.p != nil {
				s.p.log.lifecycle(stopped)
			}
		})
	}
	wg.Wait()
	if started {
		for _, e := range m.servers {
			if e.cfg.IsEnabled() {
				e.log.write(TagLifecycle, stopped)
			}
		}
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for server goroutines: %w", ctx.Err()))
	}
	for _, e := range m.servers {
		if err := e.log.close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the log of server %q: %w", e.cfg.Name, err))
		}
	}
	return errors.Join(errs...)
}

// stopBound bounds stopping one client in the background.
func (m *Manager) stopBound() time.Duration {
	g := m.opts.StopGrace
	if g <= 0 {
		g = defaultStopGrace
	}
	return 3*g + time.Second
}

// closeLater closes c in the background within the stop bound, then writes
// line to the server's log through cl. m.mu is held and m is not closed
// (so that the goroutine is one Close waits for), and e is in service or
// being stopped (so that its stop waits for it too).
func (m *Manager) closeLater(e *entry, c *Client, cl *clientLog, line string) {
	m.goEntry(e, func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.stopBound())
		defer cancel()
		if err := c.Close(ctx); err != nil {
			m.logger.Warn("closing an upstream client failed", "server", e.cfg.Name, "err", err)
		}
		cl.lifecycle("%s", line)
	})
}

// labelled prefixes text with the label of a pooled client.
func labelled(label, text string) string {
	if label == "" {
		return text
	}
	return label + ": " + text
}
