// Package upstreamtest provides an in-memory stand-in for upstream.Manager,
// for tests of the gateway core and its edges that need servers with given
// tools, states and answers but no processes or sockets.
package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/upstream"
)

// Server is one fake server.
type Server struct {
	Name  string
	State upstream.State // StateRunning when empty
	Err   string
	// Capabilities are the server's, as it would answer initialize.
	Capabilities json.RawMessage
	// Transport is the server's transport ("" for none in particular).
	Transport string
	// Era and ProtocolVersion are how the server is spoken to, as the
	// status shows them ("" for none).
	Era, ProtocolVersion string
	// Tools, Prompts, Resources and Templates are the server's lists as
	// raw JSON objects.
	Tools, Prompts, Resources, Templates []json.RawMessage
	// LogPath is what Manager.LogPath returns for the server.
	LogPath string
	// Handle answers every call to the server. Nil answers with an empty
	// result. Who made the call is in CallerFrom(ctx).
	Handle func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error)
	// Roots are the server's configured roots, for AnswerForClient.
	Roots []config.Root
}

type callerKey struct{}

// CallerFrom returns the Caller of a call, inside Server.Handle.
func CallerFrom(ctx context.Context) upstream.Caller {
	c, _ := ctx.Value(callerKey{}).(upstream.Caller)
	return c
}

// Manager is a fake upstream.Manager. It is safe for concurrent use.
type Manager struct {
	// Ended and LogLevels record EndSession and SetLogLevel calls; read
	// them with Recorded.
	Ended, LogLevels []string

	mu       sync.Mutex
	servers  map[string]*Server
	watchers map[int]func(upstream.Event)
	next     int
	requests upstream.RequestFunc
	reqID    int
	answered []Answered
	notified []Notified
	sent     chan struct{} // closed at the next SendNotification
}

// Answered is one AnswerForClient call.
type Answered struct {
	Server string
	upstream.Answered
}

// Notified is one SendNotification call.
type Notified struct {
	Server string
	Who    upstream.Caller
	Method string
	Params json.RawMessage
}

// NewManager returns a Manager with servers.
func NewManager(servers ...*Server) *Manager {
	m := &Manager{servers: make(map[string]*Server), watchers: make(map[int]func(upstream.Event))}
	for _, s := range servers {
		m.servers[s.Name] = s
	}
	return m
}

// Set adds or replaces a server and tells the watchers.
func (m *Manager) Set(s *Server) {
	m.mu.Lock()
	m.servers[s.Name] = s
	m.mu.Unlock()
	m.emit(upstream.Event{Server: s.Name})
}

// Remove removes the server named name, if there is one, and tells the
// watchers.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	_, ok := m.servers[name]
	delete(m.servers, name)
	m.mu.Unlock()
	if ok {
		m.emit(upstream.Event{Server: name})
	}
}

// Notify delivers a notification from server n to the watchers, as a
// server's notification that belongs to no call.
func (m *Manager) Notify(server string, n *jsonrpc.Message) {
	m.emit(upstream.Event{Server: server, Notification: n})
}

// NotifyFrom delivers a notification as if the pooled upstream session of
// who (per_principal, per_session) sent it.
func (m *Manager) NotifyFrom(server string, who upstream.Caller, n *jsonrpc.Message) {
	m.emit(upstream.Event{Server: server, Who: who, Notification: n})
}

func (m *Manager) emit(ev upstream.Event) {
	m.mu.Lock()
	fns := make([]func(upstream.Event), 0, len(m.watchers))
	for _, fn := range m.watchers {
		fns = append(fns, fn)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// Call implements gateway.Upstreams. Server.Handle gets a copy of params,
// as a real server gets their encoding, so a handler may keep or return
// them.
func (m *Manager) Call(ctx context.Context, server string, who upstream.Caller, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
	m.mu.Lock()
	s, ok := m.servers[server]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", upstream.ErrUnknownServer, server)
	}
	if st := state(s); st != upstream.StateRunning {
		return nil, &upstream.UnavailableError{Server: server, State: st, Err: s.Err}
	}
	if s.Handle == nil {
		return json.RawMessage(`{}`), nil
	}
	return s.Handle(context.WithValue(ctx, callerKey{}, who), method, bytes.Clone(params), hooks)
}

// EndSession implements gateway.Upstreams; it records the session.
func (m *Manager) EndSession(session string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Ended = append(m.Ended, session)
}

// SetLogLevel implements gateway.Upstreams; it records the level.
func (m *Manager) SetLogLevel(level string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.LogLevels = append(m.LogLevels, level)
}

// Recorded returns the sessions EndSession got and the levels
// SetLogLevel got, in order.
func (m *Manager) Recorded() (ended, levels []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.Ended...), append([]string(nil), m.LogLevels...)
}

// LogPath returns the server's LogPath, as upstream.Manager.LogPath.
func (m *Manager) LogPath(server string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.servers[server]; ok {
		return s.LogPath
	}
	return ""
}

// Servers implements gateway.Upstreams.
func (m *Manager) Servers() []upstream.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]upstream.Status, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, upstream.Status{
			Name: s.Name, Enabled: true, State: state(s), Error: s.Err,
			Capabilities: s.Capabilities, Transport: s.Transport,
			Era: s.Era, ProtocolVersion: s.ProtocolVersion,
			Tools: s.Tools, ToolCount: len(s.Tools),
			Prompts: s.Prompts, PromptCount: len(s.Prompts),
			Resources: s.Resources, ResourceCount: len(s.Resources),
			Templates: s.Templates, TemplateCount: len(s.Templates),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Era implements gateway.ServerEras: the Server's Era.
func (m *Manager) Era(server string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.servers[server]; s != nil {
		return s.Era
	}
	return ""
}

// Watch implements gateway.Upstreams.
func (m *Manager) Watch(fn func(upstream.Event)) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.next
	m.next++
	m.watchers[id] = fn
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, id)
	}
}

func state(s *Server) upstream.State {
	if s.State == "" {
		return upstream.StateRunning
	}
	return s.State
}

// HandleRequests implements gateway.Upstreams: fn gets what Request sends.
func (m *Manager) HandleRequests(fn upstream.RequestFunc) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqID++
	id := m.reqID
	m.requests = fn
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.reqID == id {
			m.requests = nil
		}
	}
}

// Request sends a request as server's upstream session of who would
// outside any call, to the RequestFunc of HandleRequests, and returns its
// answer; without one, AnswerForClient's. Like upstream.Manager, it
// answers ping itself.
func (m *Manager) Request(ctx context.Context, server string, who upstream.Caller, r *jsonrpc.Message) (json.RawMessage, error) {
	if r.Method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	m.mu.Lock()
	fn := m.requests
	m.mu.Unlock()
	if fn == nil {
		return m.AnswerForClient(server, r.Method, "no client can take requests outside a call")
	}
	return fn(ctx, server, who, r)
}

// AnswerForClient implements gateway.Upstreams with upstream.DefaultAnswer
// and the server's Roots, and records the answer (see Answers).
func (m *Manager) AnswerForClient(server, method, reason string) (json.RawMessage, error) {
	m.mu.Lock()
	var roots []config.Root
	if s, ok := m.servers[server]; ok {
		roots = s.Roots
	}
	m.mu.Unlock()
	res, a, err := upstream.DefaultAnswer(method, roots, reason)
	m.mu.Lock()
	m.answered = append(m.answered, Answered{Server: server, Answered: a})
	m.mu.Unlock()
	return res, err
}

// Answers returns the answers AnswerForClient gave, in order.
func (m *Manager) Answers() []Answered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Answered(nil), m.answered...)
}

// SendNotification implements gateway.Upstreams; it records the
// notification (see Notifications).
func (m *Manager) SendNotification(_ context.Context, server string, who upstream.Caller, method string, params json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.servers[server]; !ok {
		return fmt.Errorf("%w %q", upstream.ErrUnknownServer, server)
	}
	m.notified = append(m.notified, Notified{Server: server, Who: who, Method: method, Params: params})
	if m.sent != nil {
		close(m.sent)
		m.sent = nil
	}
	return nil
}

// WaitNotifications returns what SendNotification sent, in order, once
// it has sent at least n, or what it sent when ctx ends.
func (m *Manager) WaitNotifications(ctx context.Context, n int) []Notified {
	for {
		m.mu.Lock()
		if len(m.notified) >= n {
			defer m.mu.Unlock()
			return append([]Notified(nil), m.notified...)
		}
		if m.sent == nil {
			m.sent = make(chan struct{})
		}
		sent := m.sent
		m.mu.Unlock()
		select {
		case <-sent:
		case <-ctx.Done():
			return m.Notifications()
		}
	}
}

// Notifications returns what SendNotification sent, in order.
func (m *Manager) Notifications() []Notified {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Notified(nil), m.notified...)
}
