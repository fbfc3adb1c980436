package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/oauthclient"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
)

// Upstreams is what the core needs of the upstream manager;
// *upstream.Manager implements it.
type Upstreams interface {
	// Call sends a request to the named server on behalf of who and waits
	// for its result. A server that is not running gives an
	// *upstream.UnavailableError; a JSON-RPC error from the server is a
	// *jsonrpc.Error. Call keeps nothing of params once it returns, and
	// its result does not share params' memory: the core reuses the
	// buffer of the params it edited for the next call.
	Call(ctx context.Context, server string, who upstream.Caller, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error)
	// Servers returns a snapshot of every server, sorted by name.
	Servers() []upstream.Status
	// Watch calls fn for every change of a server's state or lists and for
	// every notification of a server that belongs to no call, until stop.
	Watch(fn func(upstream.Event)) (stop func())
	// EndSession releases what the upstreams hold for a downstream session
	// (per_session upstream sessions and processes).
	EndSession(session string)
	// SetLogLevel sets the servers' log level (logging/setLevel), kept
	// across reconnects and restarts; "" leaves them at their default.
	SetLogLevel(level string)
	// HandleRequests has fn answer the requests servers send outside any
	// call, naming the caller whose upstream session each came on, until
	// stop.
	HandleRequests(fn upstream.RequestFunc) (stop func())
	// AnswerForClient answers a server's request for a client that
	// cannot be asked, for reason (client-safe words, no user data), and
	// shows the answer in the server's status.
	AnswerForClient(server, method, reason string) (json.RawMessage, error)
	// SendNotification sends a notification to the upstream session of
	// who at server, if one is connected; it never starts one.
	SendNotification(ctx context.Context, server string, who upstream.Caller, method string, params json.RawMessage) error
}

var _ Upstreams = (*upstream.Manager)(nil)

// Options configures a Server.
type Options struct {
	// Upstreams are the servers behind the gateway. Required.
	Upstreams Upstreams
	// Replica names this process in what it hands out that only it can
	// serve (a parked call's requestState): in a cluster, the replica's
	// name, so that another replica knows where to send the follow-up.
	// If empty, a random name of this process.
	Replica string
	// Accounts, if not nil, are the accounts principals connect at
	// per-user servers (oauth grant authorization_code): a request of a
	// principal without one there gets the URL to connect instead.
	Accounts Accounts
	// Catalog sets how tools/list shows the merged tools: all of them, or
	// the gateway's search tools and what each client found (see
	// search.go).
	Catalog config.Catalog
	// Logger receives the core's logs. Nil discards them.
	Logger *slog.Logger
	// Name and Version are the gateway's Implementation, sent to clients.
	// If empty, "mcpgw" and "dev".
	Name, Version string
	// CallTimeout bounds a forwarded call. If zero,
	// config.DefaultCallTimeout; a server's Timeout overrides it.
	CallTimeout time.Duration
	// Servers are the configured servers, for their per-server options:
	// prefix mode, resource namespace, tool options and timeout. A server
	// the upstreams report that is not here gets the gateway's settings.
	// Their order, then the names of the other servers, is the order
	// that resource namespace auto follows (config.NamespaceAuto), until
	// SetServerOrder replaces it.
	Servers []config.Server
	// Naming sets how tool and prompt names are exposed. Zero fields take
	// the config defaults (prefix mode always, "mcp", "__", 64).
	Naming config.Naming
	// Resources sets how resource URIs are exposed. If Namespace is "",
	// config.NamespaceAuto.
	Resources config.Resources
	// PageSize is the number of items per page of a list; zero serves
	// every list as one full page.
	PageSize int
	// ListChangedDebounce is how long the core gathers list changes before
	// it tells the edges once. If zero, config.DefaultListChangedDebounce.
	ListChangedDebounce time.Duration
	// Secret keys the cursors the core issues (at least 32 bytes). If nil,
	// a random key: cursors then die with the process.
	Secret []byte
	// InputTimeout bounds how long a client may take to answer a request
	// relayed to it (elicitation, sampling, roots). If zero,
	// config.DefaultInputTimeout.
	InputTimeout time.Duration
	// Tasks keeps task records. If nil, they are kept in memory and do not
	// survive a restart.
	Tasks TaskStore
	// TaskConfig sets the hosting of tasks and their lifetimes; zero
	// fields take the config defaults, but for PromoteAfter: zero makes
	// every call a task that may be one (taskext.go).
	TaskConfig config.Tasks
	// Media stores the media blobs of results, which become links. If nil,
	// results keep their blobs.
	Media MediaStore
	// MediaConfig sets the media rewrite (mode, threshold, signed URLs).
	MediaConfig config.Media
	// PublicURL is the gateway's URL for clients (scheme and host), the
	// start of media links when the edge sets no Request.BaseURL.
	PublicURL string
	// Events keeps the server notifications of the admin API (EventsPage)
	// beyond the process; the dedup window stays in memory. If nil, the
	// last 1000 are kept in memory only, numbered from 1 in each process.
	Events EventStore
	// Finds keeps what 2026-07-28 clients found in search mode, per
	// principal, for every replica (a cluster's shared store): their
	// tools/list is then the same whichever replica answers. The store
	// must announce each changed record to every replica, this one too,
	// whose FoundElsewhere tells the principal's listen streams. If nil,
	// each process keeps its own in memory.
	Finds FindStore
	// ACL says which callers (Request.Principal and Request.Groups) may use
	// which tools, prompts and resources: the lists show a caller only
	// what it may use, and a tools/call (a task too), prompts/get,
	// resources/read, resources/subscribe or completion/complete of
	// anything else is a CodeForbidden error naming the item. The zero
	// value (no rules, default allow) lets everybody use everything and
	// costs nothing.
	ACL config.ACL
	// TracerProvider makes the server span of each request (see Observe).
	// If nil, the global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the core's metrics (see Observe). If nil, the
	// global provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
}

// Server is the gateway core. It is safe for concurrent use. Create it
// with New and stop it with Close.
type Server struct {
	search   searchState
	opts     Options
	logger   *slog.Logger
	info     Info
	anonInfo Info
	settings map[string]serverSettings
	defaults serverSettings
	naming   naming.Options
	cursors  *seal.Sealer
	acl      *acl // nil: everybody may use everything
	ins      instruments
	// taskSealer seals task ids, which name their owner.
	taskSealer *seal.Sealer
	// states seals the requestState of the input_required results the
	// core relays (mrtr.go).
	states *seal.Sealer
	tasks  tasks

	// parked are the parked calls a follow-up may find (parked.go), by
	// id; parkedBy counts them per principal. replica names this process
	// in their sealed states.
	parkMu   sync.Mutex
	parked   map[string]*parkedCall
	parkedBy map[string]int
	replica  string

	cat       atomic.Pointer[catalog]
	rebuildMu sync.Mutex // serializes rebuilds; guards the fields below
	seqs      map[string]map[naming.Ref]uint64
	nextSeq   uint64
	order     []string        // the config file's servers, in its order (SetServerOrder)
	reported  map[string]bool // problems already logged
	stopWatch func()

	// seen remembers, per principal, which server a bare URI in a result
	// came from (by its normalized form), so that a later resources/read
	// of it finds its server.
	seen *lru.Cache[seenKey, seenURI]

	subs   subscriptions
	relay  relay
	logs   logLevels
	events *eventStore
	// life bounds the core's own background calls (unsubscribing after a
	// session ended); Close cancels it and waits for them.
	life     context.Context
	stopLife context.CancelFunc

	// sessions are the live sessions that sent a request, for what goes
	// to every session (forwarded server notifications) and for the
	// requests of the upstream sessions one of them owns.
	sessionsMu sync.RWMutex
	sessions   map[string]*liveSession
	// ended are the sessions EndSession ended, most recent last: a
	// request of one that was under way is not taken for a new session.
	ended *lru.Cache[string, struct{}]
	// bg tracks the core's background work for clients (passing on a
	// client's notifications); Close waits for it.
	bg       sync.WaitGroup
	stopReqs func()

	mu       sync.Mutex
	watchers map[int]func(Change)
	nextW    int
	pending  map[string]bool // list kinds changed since the last notice
	timer    *time.Timer
	closed   bool
}

type seenKey struct{ principal, uri string }

// maxSeenURIs bounds the remembered result URIs over all principals.
const maxSeenURIs = 10000

// maxEndedSessions bounds the ended sessions the core remembers: a
// request still under way when its session ended is one of the most
// recent.
const maxEndedSessions = 10000

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
	// List is "tools", "prompts" or "resources" (resources and templates).
	List string
	// Version is the merged catalog's version.
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
	if opts.Tasks == nil {
		opts.Tasks = store.NewMemory()
	}
	if opts.TaskConfig.DefaultTTL <= 0 {
		opts.TaskConfig.DefaultTTL = config.Duration(config.DefaultTaskTTL)
	}
	if opts.TaskConfig.MaxTTL <= 0 {
		opts.TaskConfig.MaxTTL = config.Duration(config.DefaultTaskMaxTTL)
	}
	opts.Tasks = keptAtMost{opts.Tasks, time.Duration(opts.TaskConfig.MaxTTL)}
	if opts.TaskConfig.PollInterval <= 0 {
		opts.TaskConfig.PollInterval = config.Duration(config.DefaultTaskPollInterval)
	}
	if opts.TaskConfig.MaxHostedPerPrincipal <= 0 {
		opts.TaskConfig.MaxHostedPerPrincipal = config.DefaultMaxHostedTasks
	}
	if opts.InputTimeout <= 0 {
		opts.InputTimeout = config.DefaultInputTimeout
	}
	if opts.ListChangedDebounce <= 0 {
		opts.ListChangedDebounce = config.DefaultListChangedDebounce
	}
	if opts.Naming.PrefixMode == "" {
		opts.Naming.PrefixMode = config.PrefixAlways
	}
	if opts.Naming.Prefix == "" {
		opts.Naming.Prefix = config.DefaultPrefix
	}
	if opts.Naming.Separator == "" {
		opts.Naming.Separator = config.DefaultSeparator
	}
	if opts.Naming.MaxLength <= 0 {
		opts.Naming.MaxLength = config.DefaultMaxNameLength
	}
	if opts.Resources.Namespace == "" {
		opts.Resources.Namespace = config.NamespaceAuto
	}
	secret := opts.Secret
	if secret == nil {
		secret = seal.RandomSecret()
	}
	cursors, err := seal.New(secret, "cursor")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	taskSealer, err := seal.New(secret, "task")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	states, err := seal.New(secret, "request-state")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	rules, err := compileACL(opts.ACL)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	seen, _ := lru.New[seenKey, seenURI](maxSeenURIs)
	ended, _ := lru.New[string, struct{}](maxEndedSessions)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ins, err := newInstruments(opts.TracerProvider, opts.MeterProvider)
	if err != nil {
		logger.Error("creating the core's metrics failed; they are off", "err", err)
	}
	s := &Server{
		opts:       opts,
		logger:     logger,
		cursors:    cursors,
		acl:        rules,
		ins:        ins,
		taskSealer: taskSealer,
		states:     states,
		seen:       seen,
		settings:   map[string]serverSettings{},
		defaults:   serverSettings{mode: naming.Mode(opts.Naming.PrefixMode), namespace: opts.Resources.Namespace},
		naming: naming.Options{
			Prefix:    opts.Naming.Prefix,
			Separator: opts.Naming.Separator,
			MaxLength: opts.Naming.MaxLength,
		},
		seqs:     map[string]map[naming.Ref]uint64{},
		reported: map[string]bool{},
		watchers: map[int]func(Change){},
		sessions: map[string]*liveSession{},
		ended:    ended,
		pending:  map[string]bool{},
		parked:   map[string]*parkedCall{},
		parkedBy: map[string]int{},
		replica:  cmp.Or(opts.Replica, newReplicaID()),
	}
	s.subs.init()
	s.search.init()
	s.tasks.init()
	s.relay.init()
	s.logs.init()
	s.life, s.stopLife = context.WithCancel(context.Background())
	s.events = newEventStore(maxEvents, eventDedupWindow)
	if opts.Events != nil {
		s.events.persist(opts.Events, s.life, logger)
	}
	for _, sc := range opts.Servers {
		s.settings[sc.Name] = s.settingsFor(sc)
		s.order = append(s.order, sc.Name)
	}
	serverInfo, _ := json.Marshal(map[string]string{"name": opts.Name, "version": opts.Version})
	s.anonInfo = Info{
		ServerInfo: serverInfo,
		// Tasks of the anonymous principal are bound to their session, so
		// there is no list of them across sessions to offer.
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`),
	}
	s.info = Info{
		ServerInfo: serverInfo,
		// The legacy era fixes capabilities at initialize, so the gateway
		// offers what it serves for any configured server, started or not
		// (DESIGN decision 11): the merged lists, which change as servers
		// come and go, resource subscriptions and completions, which it
		// routes to the server that owns them, logging, which it fans
		// out, and tasks, which it relays or hosts for any tool.
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`),
	}
	s.rebuildMu.Lock()
	first := s.buildLocked(1)
	s.indexTools(first.tools)
	s.cat.Store(first)
	s.rebuildMu.Unlock()
	s.stopWatch = opts.Upstreams.Watch(s.onEvent)
	s.stopReqs = opts.Upstreams.HandleRequests(s.serverRequest)
	rctx, cancel := context.WithTimeout(s.life, time.Minute)
	s.recoverTasks(rctx)
	cancel()
	s.tasks.bg.Add(1)
	go s.purgeTasks()
	if opts.Finds != nil {
		s.bg.Add(1)
		go s.purgeFinds()
	}
	return s, nil
}

// Close stops following upstream changes, drops pending notices, makes a
// last attempt to write the events Options.Events lacks, and cancels and
// waits for the core's background calls.
func (s *Server) Close() {
	s.stopWatch()
	s.stopReqs()
	s.ins.inFlight.Unregister()
	s.ins.requests.Unregister()
	s.events.close()
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.stopLife()
	s.subs.bg.Wait()
	s.bg.Wait()
	s.tasks.mu.Lock()
	s.tasks.closing = true
	s.tasks.mu.Unlock()
	s.tasks.bg.Wait()
}

// Info returns what the gateway says about itself to a principal that is
// not anonymous.
func (s *Server) Info() Info { return s.info }

// InfoFor returns what the gateway says about itself to principal: the
// anonymous principal is offered no tasks/list, since its tasks belong to
// one session.
func (s *Server) InfoFor(principal string) Info {
	if principal == "" || principal == Anonymous {
		return s.anonInfo
	}
	return s.info
}

// ListsVaryByPrincipal reports whether access rules shape what each caller
// sees in the merged lists, so that a list may not be cached for anyone
// but its caller.
func (s *Server) ListsVaryByPrincipal() bool { return s.acl != nil }

// Instructions returns the instructions of the servers that gave any,
// each under a heading with the server's name, by name, for
// server/discover. With access rules it returns "": instructions are per
// server, and would tell every caller of servers they may not use.
func (s *Server) Instructions() string {
	if s.acl != nil {
		return ""
	}
	var b strings.Builder
	for _, st := range s.opts.Upstreams.Servers() {
		if st.Instructions == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "## %s\n\n%s", st.Name, strings.TrimSpace(st.Instructions))
	}
	return b.String()
}

// Servers returns a snapshot of every upstream server's status, sorted by
// name, for the admin API, with the problems the catalog noticed (names
// that clashed, tools left out) added to each.
func (s *Server) Servers() []upstream.Status {
	cat := s.cat.Load()
	out := s.opts.Upstreams.Servers()
	for i := range out {
		if ps := cat.problems[out[i].Name]; len(ps) > 0 {
			out[i].Problems = append(append([]string(nil), out[i].Problems...), ps...)
		}
	}
	return out
}

// CatalogVersion returns the merged catalog's version. A Change whose
// Version is not above it tells of lists merged before: a session that
// began at this version has seen them.
func (s *Server) CatalogVersion() uint64 { return s.cat.Load().version }

// Watch calls fn after a merged list changed, at most once per list every
// ListChangedDebounce, until stop is called. fn must not block for long.
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

// registerSession remembers a session, at its first request, for what
// goes to every session and for the requests its upstream sessions send
// outside its calls.
func (s *Server) registerSession(req *Request) {
	if req.Session == "" || (req.SessionNotify == nil && req.SessionInput == nil) {
		return
	}
	s.sessionsMu.RLock()
	_, ok := s.sessions[req.Session]
	s.sessionsMu.RUnlock()
	if ok {
		return
	}
	ls := &liveSession{principal: req.Principal, caps: req.Client.Capabilities, notify: req.SessionNotify, input: req.SessionInput}
	s.sessionsMu.Lock()
	if _, ok := s.sessions[req.Session]; !ok && !s.ended.Contains(req.Session) {
		s.sessions[req.Session] = ls
	}
	s.sessionsMu.Unlock()
}

// sessionSinks returns every live session's sink.
func (s *Server) sessionSinks() []func(string, json.RawMessage) {
	s.sessionsMu.RLock()
	defer s.sessionsMu.RUnlock()
	out := make([]func(string, json.RawMessage), 0, len(s.sessions))
	for _, ls := range s.sessions {
		if ls.notify != nil {
			out = append(out, ls.notify)
		}
	}
	return out
}

// settingsOf returns the options of a server.
func (s *Server) settingsOf(server string) serverSettings {
	if u, ok := s.opts.Upstreams.(ServerConfigs); ok {
		if sc, ok := u.ServerConfig(server); ok {
			return s.settingsFor(sc)
		}
	}
	if set, ok := s.settings[server]; ok {
		return set
	}
	return s.defaults
}

// settingsFor returns the catalog options of a server's config.
func (s *Server) settingsFor(sc config.Server) serverSettings {
	return serverSettings{
		mode:      naming.Mode(sc.PrefixMode(s.opts.Naming)),
		namespace: sc.Namespace(s.opts.Resources),
		tools:     sc.Tools,
	}
}

// onEvent handles an upstream event: a changed server rebuilds the
// catalog; a notification is relayed to whom it concerns.
func (s *Server) onEvent(ev upstream.Event) {
	if ev.Notification != nil {
		s.onNotification(ev.Server, ev.Who, ev.Notification)
		return
	}
	s.rebuild()
}

// SetServerOrder replaces the names of the config file's servers, in the
// file's order, which resource namespace auto follows (Options.Servers),
// and merges the lists again under it. A reload of the file calls it, so
// that which server keeps its URIs bare is what a start on that file
// would give.
func (s *Server) SetServerOrder(names []string) {
	s.rebuildMu.Lock()
	s.order = slices.Clone(names)
	s.rebuildMu.Unlock()
	s.rebuild()
}

// rebuild merges the upstreams' lists again and, for each list whose
// merged view really changed, schedules one notice to the watchers.
func (s *Server) rebuild() {
	s.rebuildMu.Lock()
	old := s.cat.Load()
	next := s.buildLocked(old.version + 1)
	var changed []string
	if !jsonEqualBytes(next.tools.full, old.tools.full) {
		changed = append(changed, "tools")
	}
	if !jsonEqualBytes(next.prompts.full, old.prompts.full) {
		changed = append(changed, "prompts")
	}
	if !jsonEqualBytes(next.resources.full, old.resources.full) || !jsonEqualBytes(next.templates.full, old.templates.full) {
		changed = append(changed, "resources")
	}
	if len(changed) == 0 {
		next.version = old.version
	}
	if slices.Contains(changed, "tools") {
		s.indexTools(next.tools)
	}
	s.cat.Store(next)
	s.rebuildMu.Unlock()
	if len(changed) > 0 {
		s.schedule(changed)
	}
}

func jsonEqualBytes(a, b []byte) bool { return string(a) == string(b) }

// buildLocked builds a catalog from the upstreams' current lists
// (rebuildMu held).
func (s *Server) buildLocked(version uint64) *catalog {
	servers := s.opts.Upstreams.Servers()
	// The config's order: the configured servers, then the others (which
	// the admin API registered) by name. Servers lists every registered
	// server, running or not, so the order does not depend on which
	// runs first.
	order := make([]string, 0, len(s.order)+len(servers))
	configured := make(map[string]bool, len(s.order))
	for _, name := range s.order {
		order = append(order, name)
		configured[name] = true
	}
	for _, st := range servers {
		if !configured[st.Name] {
			order = append(order, st.Name)
		}
	}
	// A server of the tasks extension runs any tool as a task for a 2025
	// client that asks (taskext_bridge.go).
	offersTasks := map[string]bool{}
	for _, st := range servers {
		offersTasks[st.Name] = st.Era == upstream.EraModern && declaresTasks(st.Capabilities)
	}
	cat := buildCatalog(servers, version, catalogInput{
		settings:   s.settingsOf,
		naming:     s.naming,
		prefix:     s.opts.Naming.Prefix,
		seq:        s.seqLocked,
		bareServer: bareServer(order, s.settingsOf),
		hostsTasks: func(server string) bool {
			sc := s.serverConfig(server)
			return s.opts.TaskConfig.HostsTasks(&sc) || offersTasks[server]
		},
		waitsForAccount: s.waitsForAccount,
	}, s.logger)
	for server, ps := range cat.problems {
		for _, p := range ps {
			if key := server + "\x00" + p; !s.reported[key] {
				s.reported[key] = true
				s.logger.Warn("catalog problem", "server", server, "problem", p)
			}
		}
	}
	return cat
}

// seqLocked returns the first-seen order of (kind, ref) (rebuildMu held).
func (s *Server) seqLocked(kind string, r naming.Ref) uint64 {
	m := s.seqs[kind]
	if m == nil {
		m = map[naming.Ref]uint64{}
		s.seqs[kind] = m
	}
	if n, ok := m[r]; ok {
		return n
	}
	s.nextSeq++
	m[r] = s.nextSeq
	return s.nextSeq
}

// schedule records changed lists and arms the debounce timer: clients get
// one notice per list per ListChangedDebounce, however many upstream
// changes (a crash loop, a burst of list_changed) came in.
func (s *Server) schedule(lists []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, l := range lists {
		s.pending[l] = true
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.opts.ListChangedDebounce, s.flush)
	}
}

// flush tells the watchers about the lists that changed.
func (s *Server) flush() {
	s.mu.Lock()
	s.timer = nil
	if s.closed {
		s.mu.Unlock()
		return
	}
	var lists []string
	for _, l := range []string{"tools", "prompts", "resources"} {
		if s.pending[l] {
			lists = append(lists, l)
		}
	}
	clear(s.pending)
	fns := make([]func(Change), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	version := s.cat.Load().version
	for _, l := range lists {
		for _, fn := range fns {
			fn(Change{List: l, Version: version})
		}
	}
}

// Handle answers one request. The error, when not nil, is a *jsonrpc.Error
// ready for the client, or the context's error when ctx ended (the client
// went away or cancelled; nothing is to be written).
func (s *Server) Handle(ctx context.Context, req *Request) (*Result, error) {
	return s.Observe(ctx, req, func(ctx context.Context) (*Result, error) { return s.handle(ctx, req) })
}

// handle is Handle under the request's span.
func (s *Server) handle(ctx context.Context, req *Request) (*Result, error) {
	s.registerSession(req)
	switch req.Method {
	case "ping":
		return complete(json.RawMessage(`{}`)), nil
	case "tools/list":
		exposure, err := s.exposure(req)
		if err != nil {
			return nil, err
		}
		if exposure == config.ExposureSearch {
			return s.searchList(ctx, req)
		}
		return s.serveList(req, "tools/list", s.cat.Load().tools)
	case "prompts/list":
		return s.serveList(req, "prompts/list", s.cat.Load().prompts)
	case "resources/list":
		return s.serveList(req, "resources/list", s.cat.Load().resources)
	case "resources/templates/list":
		return s.serveList(req, "resources/templates/list", s.cat.Load().templates)
	case "tools/call":
		return s.toolsCall(ctx, req)
	case "prompts/get":
		return s.promptsGet(ctx, req)
	case "resources/read":
		return s.resourcesRead(ctx, req)
	case "resources/subscribe":
		return s.subscribe(ctx, req)
	case "resources/unsubscribe":
		return s.unsubscribe(ctx, req)
	case "completion/complete":
		return s.complete(ctx, req)
	case "logging/setLevel":
		return s.setLevel(req)
	case "tasks/get":
		return s.tasksGet(ctx, req)
	case "tasks/result":
		return s.tasksResult(ctx, req)
	case "tasks/cancel":
		return s.tasksCancel(ctx, req)
	case "tasks/update":
		return s.extTasksUpdate(ctx, req)
	case "tasks/list":
		return s.tasksList(ctx, req)
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not offered by this gateway", req.Method)
	}
}

// timeout returns the call timeout of a server.
func (s *Server) timeout(server string) time.Duration {
	if sc := s.serverConfig(server); sc.Timeout > 0 {
		return time.Duration(sc.Timeout)
	}
	return s.opts.CallTimeout
}

// forward sends a request to server under the call timeout and maps
// failures to the gateway's errors. The client's progress token is
// replaced by one of ours, and the server's requests during the call
// (elicitation, sampling, roots) go to the client through req.Input, with
// the call's timeout paused while the client answers.
func (s *Server) forward(ctx context.Context, req *Request, server, method string, params json.RawMessage, rename *rawjson.Edit, mode forwardMode) (json.RawMessage, error) {
	notify := req.Notify
	var parked *parkedCall
	if modernClient(req) {
		if _, err := checkInputResponses(params); err != nil {
			return nil, err
		}
		opened, st, err := s.openRequestState(req, server, method, params)
		if err != nil {
			return nil, err
		}
		if st != nil && st.Parked != "" {
			return s.resumeParked(ctx, req, st, params)
		}
		params = opened
		if s.parks(server) {
			parked = s.newParked(req)
			notify = parked.notifyAttached
		}
	}
	meta, _ := req.member(params, "_meta")
	params, forget, err := s.relay.withProgress(params, meta, notify, rename)
	if err != nil {
		return nil, err
	}
	who := upstream.Caller{Principal: req.Principal, Session: req.Session}
	if parked != nil {
		body, err := s.runParked(ctx, req, parked, server, who, method, params, forget)
		return s.urlInputRequired(req, server, method, body, err)
	}
	defer forget()
	body, err := s.forwardAs(ctx, req, server, who, method, params, 0, mode)
	if modernClient(req) {
		return s.urlInputRequired(req, server, method, body, err)
	}
	if err != nil || !isInputRequired(body) {
		return body, err
	}
	return s.driveInput(ctx, req, server, method, who, params, body, mode)
}

// forwardMode says how forwardAs makes a call.
type forwardMode uint8

const (
	// onlyCall says the call is the only one its request makes upstream:
	// its timeout may then end the request's own context, through
	// Request.Cancel where the edge gives one (see newCallTimer).
	onlyCall forwardMode = 1 << iota
)

// forwardAs is forward to the upstream session of who, with params whose
// progress token is already the gateway's, bounded by timeout instead of
// the call timeout when timeout is positive.
func (s *Server) forwardAs(ctx context.Context, req *Request, server string, who upstream.Caller, method string, params json.RawMessage, timeout time.Duration, mode forwardMode) (json.RawMessage, error) {
	sc := s.serverConfig(server)
	if err := s.checkAccount(ctx, req, sc); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = s.timeout(server)
	}
	if sc.SingleUser && req.Session != "" {
		s.usedSingleUser(req.Session, server)
	}
	var shared context.CancelCauseFunc
	if mode&onlyCall != 0 {
		shared = req.Cancel
	}
	timer := newCallTimer(ctx, shared, timeout)
	defer timer.stop()
	hooks := &upstream.CallHooks{
		Notify:  func(m *jsonrpc.Message) { s.callNotification(req, server, who, m) },
		Request: s.inputHandler(req, server, who, timer),
		Header:  req.Header,
		// What the client declared: a modern server is told on each
		// request what the gateway may serve on the client's behalf.
		Capabilities: req.Client.Capabilities,
		LogLevel:     req.LogLevel,
		// A modern client gets input_required as it is; for one of the
		// session era the core asks it and calls again (driveInput).
		TakesInput: modernClient(req) || req.Input != nil,
		TakesTasks: req.takesTasks,
	}
	body, err := s.opts.Upstreams.Call(timer.ctx, server, who, method, params, hooks)
	if errors.Is(err, oauthclient.ErrExchangedTokenRefused) {
		// The server refused it before running anything: exchange the
		// caller's token again and send the request once more.
		if err := s.checkAccount(ctx, req, sc); err != nil {
			return nil, err
		}
		body, err = s.opts.Upstreams.Call(timer.ctx, server, who, method, params, hooks)
	}
	if err == nil {
		return body, nil
	}
	var jerr *jsonrpc.Error
	var unavail *upstream.UnavailableError
	var full *upstream.PoolFullError
	var needConnect *oauthclient.ConnectRequired
	var limited *upstream.RateLimitedError
	cause := context.Cause(timer.ctx)
	switch {
	case errors.As(err, &limited) && limited.Reason == upstream.ReasonConcurrency:
		s.rejected(ctx, "server_concurrency")
		return nil, jsonrpc.NewError(CodeRateLimited,
			fmt.Sprintf("server %q already has as many calls in flight as its rate_limit.max_concurrent allows; try again later", server),
			errorData{Server: server})
	case errors.As(err, &limited):
		s.rejected(ctx, "server")
		return nil, jsonrpc.NewError(CodeRateLimited,
			fmt.Sprintf("server %q is over its rate limit (rate_limit); retry after %s", server, max(limited.RetryAfter.Round(time.Second), time.Second)),
			errorData{Server: server})
	case errors.As(err, &needConnect):
		return nil, s.connectError(req, server, needConnect)
	case errors.As(err, &jerr) && jerr.Code == CodeURLElicitationRequired:
		return nil, s.urlElicitationRequired(req, server, jerr)
	case errors.As(err, &jerr):
		return nil, jerr // the server's own error, relayed as it is
	case errors.As(err, &unavail):
		return nil, unavailable(server, string(unavail.State), unavail.Err)
	case errors.As(err, &full):
		s.rejected(ctx, "server_pool")
		return nil, jsonrpc.NewError(CodeRateLimited,
			fmt.Sprintf("server %q has as many upstream sessions as its pool allows (%d) and all are busy; try again later", server, full.Max),
			errorData{Server: server})
	// The timer's causes before ctx's end: when the timer shares the
	// request's context, its end is ctx's too.
	case errors.Is(cause, errURLElicitation):
		return nil, refusedURLElicitation(server)
	case errors.Is(cause, errCallTimeout):
		s.logger.Warn("upstream call timed out", "server", server, "method", method, "timeout", timeout)
		return nil, timedOut(server, method, timeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		s.logger.Warn("upstream call failed", "server", server, "method", method, "err", err)
		return nil, unavailable(server, string(upstream.StateRunning), fmt.Sprintf("the call failed: %v", err))
	}
}

// callNotification relays a server's notification that belongs to req's
// call: progress under the client's token, log messages when the session's
// level admits them, the rest as they are.
func (s *Server) callNotification(req *Request, server string, who upstream.Caller, m *jsonrpc.Message) {
	if m.Method != "notifications/tasks/status" {
		// A copy: the message is the upstream client's.
		m = &jsonrpc.Message{JSONRPC: m.JSONRPC, Method: m.Method, Params: s.retagTask(server, who, m.Params)}
	}
	switch m.Method {
	case "notifications/tasks/status":
		s.taskStatus(server, who, m.Params)
	case "notifications/progress":
		if !s.relay.deliverProgress(m.Params) {
			s.logger.Debug("dropping progress with a token of no call", "server", server)
		}
	case "notifications/message":
		s.logToCall(req, server, m.Params)
	case "notifications/elicitation/complete":
		s.elicitationComplete(server, m.Params)
	default:
		if req.Notify != nil {
			req.Notify(m.Method, m.Params)
		}
	}
}
