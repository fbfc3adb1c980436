package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Memory keeps the store's records in memory, with the same behaviour as
// SQLite but nothing survives the process. The gateway uses it when no
// database is configured (embedding, tests). It is safe for concurrent use.
type Memory struct {
	mu       sync.Mutex
	tasks    map[string]Task
	servers  map[string]Server
	sessions map[string]Session
	replicas map[string]Replica
	events   []Event // in Seq order
	eventSeq uint64  // the last Seq given, as SQLite's AUTOINCREMENT keeps it
	now      func() time.Time

	media map[string]Media // by ID; nil until the first PutMedia

	// nil until the first put of each
	oauthTokens  map[oauthKey]OAuthToken
	oauthClients map[oauthKey]OAuthClient
	finds        map[string]Finds // by principal
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{tasks: map[string]Task{}, servers: map[string]Server{}, sessions: map[string]Session{}, now: time.Now}
}

// normalize is what a round trip through SQLite does to a task: times in
// UTC, durations to the millisecond, empty JSON as nil, ExpiresAt filled
// from TTL.
func normalize(t Task) Task {
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	if t.TTL != nil {
		d := t.TTL.Truncate(time.Millisecond)
		t.TTL = &d
	}
	t.PollInterval = t.PollInterval.Truncate(time.Millisecond)
	if len(t.Result) == 0 {
		t.Result = nil
	} else {
		t.Result = append([]byte(nil), t.Result...)
	}
	if len(t.Error) == 0 {
		t.Error = nil
	} else {
		t.Error = append([]byte(nil), t.Error...)
	}
	if t.ExpiresAt.IsZero() && t.TTL != nil {
		t.ExpiresAt = t.CreatedAt.Add(*t.TTL)
	}
	if !t.ExpiresAt.IsZero() {
		t.ExpiresAt = t.ExpiresAt.UTC()
	}
	return t
}

func (m *Memory) expired(t Task) bool {
	return !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(m.now())
}

// PutTask stores t, replacing the task with the same ID if there is one.
func (m *Memory) PutTask(ctx context.Context, t Task) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	if err := checkTask(t); err != nil {
		return fmt.Errorf("putting a task: %w", err)
	}
	t = normalize(t)
	if !t.ExpiresAt.IsZero() {
		if err := checkTime("ExpiresAt", t.ExpiresAt); err != nil {
			return fmt.Errorf("putting a task: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks[t.ID] = t
	return nil
}

// GetTask returns the task with id, or ErrNotFound when it is absent or
// expired.
func (m *Memory) GetTask(ctx context.Context, id string) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, fmt.Errorf("getting a task: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[id]
	if !ok || m.expired(t) {
		return Task{}, fmt.Errorf("getting a task: %w", ErrNotFound)
	}
	return normalize(t), nil
}

// list returns the unexpired tasks for which keep is true, in ID order.
func (m *Memory) list(keep func(Task) bool) []Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Task
	for _, t := range m.tasks {
		if !m.expired(t) && keep(t) {
			out = append(out, normalize(t))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ListTasks returns owner's unexpired tasks after after, in ID order, at
// most limit (all if limit <= 0).
func (m *Memory) ListTasks(ctx context.Context, owner, after string, limit int) ([]Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	out := m.list(func(t Task) bool { return t.Owner == owner && t.ID > after })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// UnfinishedTasks returns every unexpired task in no terminal status.
func (m *Memory) UnfinishedTasks(ctx context.Context) ([]Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing unfinished tasks: %w", err)
	}
	return m.list(func(t Task) bool {
		return t.Status == statusWorking || t.Status == statusInputRequired
	}), nil
}

// DeleteExpiredTasks deletes the tasks that expired at or before now.
func (m *Memory) DeleteExpiredTasks(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("deleting expired tasks: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, t := range m.tasks {
		if !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(now) {
			delete(m.tasks, id)
			n++
		}
	}
	return n, nil
}

// normalizeServer is what a round trip through SQLite does to a server
// record: times in UTC, an empty Entry as nil. It also copies what srv
// shares with its caller (Entry, Enabled), so that neither side's later
// changes reach the other.
func normalizeServer(srv Server) Server {
	srv.CreatedAt, srv.UpdatedAt = srv.CreatedAt.UTC(), srv.UpdatedAt.UTC()
	if len(srv.Entry) == 0 {
		srv.Entry = nil
	} else {
		srv.Entry = append(json.RawMessage(nil), srv.Entry...)
	}
	if srv.Enabled != nil {
		e := *srv.Enabled
		srv.Enabled = &e
	}
	return srv
}

// PutServer stores srv, replacing the record with the same name, and
// reports whether it created a new record. It sets the times as
// (*SQLite).PutServer does.
func (m *Memory) PutServer(ctx context.Context, srv Server) (created bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	if err := checkServer(srv); err != nil {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	old, ok := m.servers[srv.Name]
	switch {
	case ok:
		srv.CreatedAt = old.CreatedAt
	case srv.CreatedAt.IsZero():
		srv.CreatedAt = now
	}
	srv.UpdatedAt = now
	m.servers[srv.Name] = normalizeServer(srv)
	return !ok, nil
}

// GetServer returns the server record with the given name, or ErrNotFound.
func (m *Memory) GetServer(ctx context.Context, name string) (Server, error) {
	if err := ctx.Err(); err != nil {
		return Server{}, fmt.Errorf("getting server %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	srv, ok := m.servers[name]
	if !ok {
		return Server{}, fmt.Errorf("getting server %q: %w", name, ErrNotFound)
	}
	return normalizeServer(srv), nil
}

// ListServers returns every server record, in name order (byte order).
func (m *Memory) ListServers(ctx context.Context) ([]Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Server
	for _, srv := range m.servers {
		out = append(out, normalizeServer(srv))
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteServer deletes the server record with the given name, or returns
// ErrNotFound if there is none.
func (m *Memory) DeleteServer(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting server %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.servers[name]; !ok {
		return fmt.Errorf("deleting server %q: %w", name, ErrNotFound)
	}
	delete(m.servers, name)
	return nil
}

// normalizeEvent is what a round trip through SQLite does to an event: its
// time in UTC (without a monotonic reading), empty Params as nil. It also
// copies Params, so that neither side's later changes reach the other.
func normalizeEvent(ev Event) Event {
	ev.Time = ev.Time.UTC()
	if len(ev.Params) == 0 {
		ev.Params = nil
	} else {
		ev.Params = append(json.RawMessage(nil), ev.Params...)
	}
	return ev
}

// AddEvent stores ev as the newest event and returns the Seq it gave it,
// as (*SQLite).AddEvent does, deleting the events MaxEvents or more below
// it.
func (m *Memory) AddEvent(ctx context.Context, ev Event) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	if err := checkEvent(ev); err != nil {
		return 0, fmt.Errorf("adding an event: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Time.IsZero() {
		ev.Time = m.now()
	}
	m.eventSeq++
	ev.Seq = m.eventSeq
	m.events = append(m.events, normalizeEvent(ev))
	if ev.Seq > maxEvents {
		bound := ev.Seq - maxEvents
		i, _ := slices.BinarySearchFunc(m.events, bound+1, func(e Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
		m.events = slices.Delete(m.events, 0, i)
	}
	return ev.Seq, nil
}

// AddRepeat counts one more repeat of the event seq, or returns ErrNotFound
// if the store no longer has it.
func (m *Memory) AddRepeat(ctx context.Context, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := slices.BinarySearchFunc(m.events, seq, func(e Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	if !ok {
		return fmt.Errorf("adding a repeat of event %d: %w", seq, ErrNotFound)
	}
	m.events[i].Repeats++
	return nil
}

// ListEvents returns the events whose Seq is above after, of server and of
// method when they are not "", in Seq order, at most limit of them (all if
// limit <= 0).
func (m *Memory) ListEvents(ctx context.Context, server, method string, after uint64, limit int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.events, after, func(e Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	var out []Event
	for _, ev := range m.events[i:] {
		if ev.Seq <= after || server != "" && ev.Server != server || method != "" && ev.Method != method {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, normalizeEvent(ev))
	}
	return out, nil
}

// oauthKey is the key of an OAuth record in Memory: a server and a
// principal (tokens) or an issuer (registrations).
type oauthKey struct{ server, sub string }

// GetOAuthToken is SQLite's GetOAuthToken in memory.
func (m *Memory) GetOAuthToken(ctx context.Context, server, principal string) (OAuthToken, error) {
	op := oauthOp("getting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.oauthTokens[oauthKey{server, principal}]
	if !ok {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	t.Data = slices.Clone(t.Data)
	return t, nil
}

// PutOAuthToken is SQLite's PutOAuthToken in memory.
func (m *Memory) PutOAuthToken(ctx context.Context, t OAuthToken) error {
	op := oauthOp("putting oauth token", t.Server)
	if err := checkOAuthToken(t); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.oauthTokens == nil {
		m.oauthTokens = map[oauthKey]OAuthToken{}
	}
	t.Data, t.UpdatedAt = slices.Clone(t.Data), m.now().UTC()
	m.oauthTokens[oauthKey{t.Server, t.Principal}] = t
	return nil
}

// DeleteOAuthToken is SQLite's DeleteOAuthToken in memory.
func (m *Memory) DeleteOAuthToken(ctx context.Context, server, principal string) error {
	op := oauthOp("deleting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := oauthKey{server, principal}
	if _, ok := m.oauthTokens[k]; !ok {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	delete(m.oauthTokens, k)
	return nil
}

// DeleteOAuthTokens is SQLite's DeleteOAuthTokens in memory.
func (m *Memory) DeleteOAuthTokens(ctx context.Context, server string) (int, error) {
	op := oauthOp("deleting oauth tokens", server)
	if err := checkOAuthServer(server); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.oauthTokens {
		if k.server == server {
			delete(m.oauthTokens, k)
			n++
		}
	}
	return n, nil
}

// CountOAuthTokens is SQLite's CountOAuthTokens in memory.
func (m *Memory) CountOAuthTokens(ctx context.Context, server string) (int, error) {
	ps, err := m.oauthPrincipals(ctx, "counting oauth tokens", server)
	return len(ps), err
}

// ListOAuthPrincipals is SQLite's ListOAuthPrincipals in memory.
func (m *Memory) ListOAuthPrincipals(ctx context.Context, server string) ([]string, error) {
	ps, err := m.oauthPrincipals(ctx, "listing oauth principals", server)
	if err != nil {
		return nil, err
	}
	slices.Sort(ps)
	return ps, nil
}

// oauthPrincipals returns the principals other than "" that hold a token
// for server, in no order; nil if none.
func (m *Memory) oauthPrincipals(ctx context.Context, op, server string) ([]string, error) {
	op = oauthOp(op, server)
	if err := checkOAuthServer(server); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []string
	for k := range m.oauthTokens {
		if k.server == server && k.sub != "" {
			ps = append(ps, k.sub)
		}
	}
	return ps, nil
}

// GetOAuthClient is SQLite's GetOAuthClient in memory.
func (m *Memory) GetOAuthClient(ctx context.Context, server, issuer string) (OAuthClient, error) {
	op := oauthOp("getting oauth client", server)
	if err := checkClientKey(server, issuer); err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.oauthClients[oauthKey{server, issuer}]
	if !ok {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	c.Data = slices.Clone(c.Data)
	return c, nil
}

// PutOAuthClient is SQLite's PutOAuthClient in memory.
func (m *Memory) PutOAuthClient(ctx context.Context, c OAuthClient) error {
	op := oauthOp("putting oauth client", c.Server)
	if err := checkOAuthClient(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.oauthClients == nil {
		m.oauthClients = map[oauthKey]OAuthClient{}
	}
	c.Data, c.UpdatedAt = slices.Clone(c.Data), m.now().UTC()
	m.oauthClients[oauthKey{c.Server, c.Issuer}] = c
	return nil
}

// DeleteOAuthClients is SQLite's DeleteOAuthClients in memory.
func (m *Memory) DeleteOAuthClients(ctx context.Context, server string) error {
	op := oauthOp("deleting oauth clients", server)
	if err := checkOAuthServer(server); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.oauthClients {
		if k.server == server {
			delete(m.oauthClients, k)
		}
	}
	return nil
}

// PutFinds is SQLite's PutFinds in memory; announce is for the other
// processes of a PostgreSQL database, and Memory has none.
func (m *Memory) PutFinds(ctx context.Context, f Finds, announce bool) error {
	if err := checkFinds(f); err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("putting search finds: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finds == nil {
		m.finds = map[string]Finds{}
	}
	f.Names, f.Expires = cloneNames(f.Names), f.Expires.UTC()
	m.finds[f.Principal] = f
	return nil
}

// GetFinds is SQLite's GetFinds in memory.
func (m *Memory) GetFinds(ctx context.Context, principal string) (Finds, error) {
	if err := checkFindsPrincipal(principal); err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Finds{}, fmt.Errorf("getting search finds: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.finds[principal]
	if !ok || !f.Expires.After(m.now()) {
		return Finds{}, fmt.Errorf("getting search finds: %w", ErrNotFound)
	}
	f.Names = cloneNames(f.Names)
	return f, nil
}

// DeleteExpiredFinds is SQLite's DeleteExpiredFinds in memory.
func (m *Memory) DeleteExpiredFinds(ctx context.Context, now time.Time) (int, error) {
	if err := checkTime("now", now); err != nil {
		return 0, fmt.Errorf("deleting expired search finds: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("deleting expired search finds: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for p, f := range m.finds {
		if !f.Expires.After(now) {
			delete(m.finds, p)
			n++
		}
	}
	return n, nil
}

// cloneNames is what a round trip through SQLite does to Names: a copy of
// its own, nil when empty.
func cloneNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	return slices.Clone(names)
}
