package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/toolsearch"
)

// The search exposure. A client in search mode (config catalog.exposure,
// its endpoint URL's ?exposure=, or catalog.search_groups) gets in
// tools/list only the gateway's own two tools and the tools it found:
//
//	tools/list ─► search_tools, call_tool, + the tools this client found
//	search_tools {query, limit} ─► the best visible matches, in full ─► they
//	      join the client's list: list_changed (a session's stream, or a
//	      2026-07-28 principal's listen streams)
//	call_tool {name, arguments} ─► tools/call of name, as if called directly
//
// The index follows the merged catalog: a server whose listed tools
// changed is indexed again, one that left is dropped.

// The gateway's own tools' names, in its own namespace
// (<prefix><sep>mcpgw<sep><name>; the server name mcpgw is reserved).
const (
	searchToolsName = "search_tools"
	callToolName    = "call_tool"
)

// activationTTL is how long a client keeps the tools it found without
// searching again.
const activationTTL = time.Hour

// maxActivated bounds the tools one client may have found; the oldest go
// first.
const maxActivated = 200

type searchState struct {
	index toolsearch.Index

	mu sync.Mutex
	// sums are the hashes of the servers' listed tools as indexed.
	sums map[string]uint64
	// found are the exposed names a client found, oldest first, by owner:
	// "s:"+session for a session, "p:"+principal for a 2026-07-28 client;
	// bounded, and each expires activationTTL after its last search. With
	// a FindStore, a principal's are read from there (another replica may
	// have added some) and kept here only for when the store fails.
	found *lru.Cache[string, foundTools]
	// watchers hear that a principal's 2026-07-28 clients found tools.
	watchers map[int]func(principal string)
	nextW    int
}

// foundTools are the tools one client found.
type foundTools struct {
	names   []string
	expires time.Time
}

// maxFinders bounds the clients whose finds are kept.
const maxFinders = 10000

// FindStore is what the core needs of the store to share the finds of
// 2026-07-28 clients between replicas; *store.Postgres has it. A record's
// Principal is the owner key ("p:"+principal), so that anonymous clients
// share theirs too. PutFinds with announce tells the other replicas
// (FoundElsewhere), and this one as well.
type FindStore interface {
	PutFinds(ctx context.Context, f store.Finds, announce bool) error
	GetFinds(ctx context.Context, owner string) (store.Finds, error)
	DeleteExpiredFinds(ctx context.Context, now time.Time) (int, error)
}

var _ FindStore = (*store.Postgres)(nil)

// findsTimeout bounds a FindStore call on a request's path: a store that
// hangs costs the client the replicas' view, not its answer.
const findsTimeout = 2 * time.Second

func (ss *searchState) init() {
	ss.sums = map[string]uint64{}
	ss.found, _ = lru.New[string, foundTools](maxFinders)
	ss.watchers = map[int]func(string){}
}

// foundBy returns what owner found and has not expired, as this process
// knows it. Called with mu held.
func (ss *searchState) foundBy(owner string) []string {
	f, ok := ss.found.Get(owner)
	if !ok {
		return nil
	}
	if time.Now().After(f.expires) {
		ss.found.Remove(owner)
		return nil
	}
	return f.names
}

// shared reports whether owner's finds are kept in the FindStore: a
// 2026-07-28 client's, when there is one.
func (s *Server) shared(owner string) bool {
	return s.opts.Finds != nil && strings.HasPrefix(owner, "p:")
}

// foundFor returns what owner found: from the FindStore when it keeps
// owner's finds (and this process's copy follows it), else, or when the
// store fails, from this process's memory.
func (s *Server) foundFor(ctx context.Context, owner string) []string {
	if s.shared(owner) {
		ctx, cancel := context.WithTimeout(ctx, findsTimeout)
		f, err := s.opts.Finds.GetFinds(ctx, owner)
		cancel()
		switch {
		case err == nil:
			s.search.mu.Lock()
			s.search.found.Add(owner, foundTools{names: f.Names, expires: f.Expires})
			s.search.mu.Unlock()
			return f.Names
		case errors.Is(err, store.ErrNotFound):
			s.search.mu.Lock()
			s.search.found.Remove(owner)
			s.search.mu.Unlock()
			return nil
		default:
			s.logger.Warn("reading a client's found tools from the store failed; using this replica's", "err", err)
		}
	}
	s.search.mu.Lock()
	defer s.search.mu.Unlock()
	return slices.Clone(s.search.foundBy(owner))
}

// indexTools brings the index up to l, the merged tools list: only the
// servers whose tools changed are indexed again. Called with rebuildMu
// held.
func (s *Server) indexTools(l *list) {
	byServer := map[string][]toolsearch.Tool{}
	sums := map[string]uint64{}
	for _, it := range l.items {
		byServer[it.server] = append(byServer[it.server], toolsearch.Tool{Name: it.key, Server: it.server, Raw: it.raw})
	}
	for server, tools := range byServer {
		h := fnv.New64a()
		for _, t := range tools {
			h.Write(t.Raw)
			h.Write([]byte{0})
		}
		sums[server] = h.Sum64()
	}
	ss := &s.search
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// Every changed server in one step: a name that moves between
	// servers (a collision appearing) stays unique in the index.
	changed := map[string][]toolsearch.Tool{}
	for server := range ss.sums {
		if _, ok := sums[server]; !ok {
			changed[server] = nil
		}
	}
	for server, sum := range sums {
		if old, ok := ss.sums[server]; !ok || old != sum {
			changed[server] = byServer[server]
		}
	}
	if len(changed) == 0 {
		return
	}
	if err := ss.index.SetServers(changed); err != nil {
		// The index keeps its last state; the next change tries again.
		s.logger.Warn("indexing the tools for search failed", "err", err)
		return
	}
	for server := range changed {
		if sum, ok := sums[server]; ok {
			ss.sums[server] = sum
		} else {
			delete(ss.sums, server)
		}
	}
}

// exposure returns req's exposure, or an error for one its client asked
// for that does not exist.
func (s *Server) exposure(req *Request) (string, error) {
	if req.Exposure != "" {
		if why := config.ValidExposure(req.Exposure); why != "" {
			return "", invalidParams("%s: fix the ?exposure= of your MCP endpoint URL", why)
		}
	}
	return s.opts.Catalog.ExposureFor(req.Groups, req.Exposure), nil
}

// gatewayToolName is the exposed name of one of the gateway's own tools.
func (s *Server) gatewayToolName(name string) string {
	prefix, sep := s.opts.Naming.Prefix, s.opts.Naming.Separator
	if prefix == "" {
		prefix = config.DefaultPrefix
	}
	if sep == "" {
		sep = config.DefaultSeparator
	}
	return prefix + sep + config.ReservedServerName + sep + name
}

// searchOwner is who the tools req's client finds belong to: its session,
// or, for a 2026-07-28 client (no session), its principal.
func searchOwner(req *Request) string {
	if req.Session != "" && !modernClient(req) {
		return "s:" + req.Session
	}
	return "p:" + req.Principal
}

// gatewayTools returns the definitions of the gateway's own tools.
func (s *Server) gatewayTools() []json.RawMessage {
	limit := s.searchLimit()
	search, _ := json.Marshal(map[string]any{
		"name":  s.gatewayToolName(searchToolsName),
		"title": "Search the gateway's tools",
		"description": "Find the tools for a task among all the tools this gateway offers (from many servers). " +
			"Describe what you want to do in plain words. Returns the best matches with their full definitions; " +
			"they are added to your tool list, or call one at once with " + s.gatewayToolName(callToolName) + ".",
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What you want to do, e.g. \"open pull requests of a repository\"."},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": config.MaxSearchLimit, "description": fmt.Sprintf("How many tools to return (default %d).", limit)},
			},
			"required": []string{"query"},
		},
		"annotations": map[string]any{"readOnlyHint": true, "openWorldHint": false},
	})
	call, _ := json.Marshal(map[string]any{
		"name":  s.gatewayToolName(callToolName),
		"title": "Call a tool found by search",
		"description": "Call any tool of this gateway by the name " + s.gatewayToolName(searchToolsName) +
			" gave, with its arguments. Use it when your tool list does not show the tool yet.",
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":      map[string]any{"type": "string", "description": "The tool's name, as search_tools gave it."},
				"arguments": map[string]any{"type": "object", "description": "The tool's arguments, as its inputSchema describes them."},
			},
			"required": []string{"name"},
		},
	})
	return []json.RawMessage{search, call}
}

func (s *Server) searchLimit() int {
	if n := s.opts.Catalog.SearchLimit; n > 0 {
		return n
	}
	return config.DefaultSearchLimit
}

// searchList serves tools/list in search mode: the gateway's tools and
// those the client found (still listed, and still allowed to it).
func (s *Server) searchList(ctx context.Context, req *Request) (*Result, error) {
	if raw, ok, _ := rawjson.Get(req.Params, "cursor"); ok && string(raw) != "null" {
		return nil, invalidParams("invalid cursor: in search mode tools/list is one page and issued no cursor; call it without one")
	}
	l := s.cat.Load().tools
	if modernClient(req) {
		l = l.modern()
	}
	items := make([]item, 0, 8)
	for _, raw := range s.gatewayTools() {
		items = append(items, item{raw: raw})
	}
	for _, name := range s.foundFor(ctx, searchOwner(req)) {
		if it, ok := l.lookup(name); ok && s.acl.allows(req.Principal, req.Groups, kindTool, it.server, name) {
			items = append(items, it)
		}
	}
	return complete(encodePage("tools", items, "")), nil
}

// lookup returns the item named key (items are sorted by key).
func (l *list) lookup(key string) (item, bool) {
	i, ok := slices.BinarySearchFunc(l.items, key, func(it item, k string) int { return strings.Compare(it.key, k) })
	if !ok {
		return item{}, false
	}
	return l.items[i], true
}

// searchTools serves search_tools: the visible tools that best match the
// query, in full (structured content and text), which join the client's
// tool list.
func (s *Server) searchTools(ctx context.Context, req *Request, args json.RawMessage) (*Result, error) {
	var in struct {
		Query string `json:"query"`
		Limit *int   `json:"limit"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, invalidParams("%s needs arguments {query: string, limit: integer}", s.gatewayToolName(searchToolsName))
	}
	limit := s.searchLimit()
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > config.MaxSearchLimit {
			return nil, invalidParams("limit must be from 1 to %d", config.MaxSearchLimit)
		}
		limit = *in.Limit
	}
	l := s.cat.Load().tools
	if modernClient(req) {
		l = l.modern()
	}
	hits, err := s.search.index.Search(in.Query, limit, func(name string) bool {
		it, ok := l.lookup(name)
		return ok && s.acl.allows(req.Principal, req.Groups, kindTool, it.server, name)
	})
	if err != nil {
		return nil, invalidParams("%s: %v", s.gatewayToolName(searchToolsName), err)
	}
	var tools []json.RawMessage
	var names []string
	for _, h := range hits {
		if it, ok := l.lookup(h.Name); ok {
			tools = append(tools, it.raw)
			names = append(names, h.Name)
		}
	}
	if changed, announced := s.activate(ctx, req, names); changed && !announced {
		s.toolsChangedFor(req)
	}
	return complete(searchResult(tools, names)), nil
}

// searchResult is search_tools' result: the tools as structured content
// ({"tools":[...]}) and as text, a line per tool and the definitions.
func searchResult(tools []json.RawMessage, names []string) json.RawMessage {
	var text strings.Builder
	if len(tools) == 0 {
		text.WriteString("No tool matches. Try other words.")
	} else {
		fmt.Fprintf(&text, "%d tools found; they are now in your tool list (call them by name), or use call_tool:\n", len(tools))
		for _, n := range names {
			text.WriteString("- " + n + "\n")
		}
		text.WriteString("\nDefinitions:\n")
	}
	var arr bytes.Buffer
	arr.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.Write(t)
	}
	arr.WriteByte(']')
	if len(tools) > 0 {
		text.Write(arr.Bytes())
	}
	out := []byte(`{"content":[{"type":"text","text":`)
	out = rawjson.AppendString(out, text.String())
	out = append(out, `}],"structuredContent":{"tools":`...)
	out = append(out, arr.Bytes()...)
	return append(out, `}}`...)
}

// activate adds names to what req's client found. It reports whether
// that changed its list, and whether the FindStore announced the change
// (to every replica, this one included, whose FoundElsewhere tells the
// client).
func (s *Server) activate(ctx context.Context, req *Request, names []string) (changed, announced bool) {
	if len(names) == 0 {
		return false, false
	}
	owner := searchOwner(req)
	// Another replica may have added finds: start from the store's.
	found := s.foundFor(ctx, owner)
	have := make(map[string]bool, len(found))
	for _, n := range found {
		have[n] = true
	}
	next := append([]string(nil), found...)
	for _, n := range names {
		if !have[n] {
			next = append(next, n)
			have[n] = true
			changed = true
		}
	}
	if len(next) > maxActivated {
		next = next[len(next)-maxActivated:]
	}
	f := foundTools{names: next, expires: time.Now().Add(activationTTL)}
	s.search.mu.Lock()
	s.search.found.Add(owner, f)
	s.search.mu.Unlock()
	if !s.shared(owner) {
		return changed, false
	}
	// Written on every search, which extends the finds' life; announced
	// only when the list changed. Two replicas' searches of one principal
	// at the same moment may each miss the other's finds: the last write
	// wins, and the client searches again.
	ctx, cancel := context.WithTimeout(ctx, findsTimeout)
	defer cancel()
	if err := s.opts.Finds.PutFinds(ctx, store.Finds{Principal: owner, Names: next, Expires: f.expires}, changed); err != nil {
		s.logger.Warn("storing a client's found tools failed; only this replica lists them", "err", err)
		return changed, false
	}
	return changed, changed
}

// toolsChangedFor tells req's client that its tool list changed: a
// session on its stream, a 2026-07-28 client through its principal's
// listen streams (WatchFound).
func (s *Server) toolsChangedFor(req *Request) {
	if !modernClient(req) {
		if req.SessionNotify != nil {
			req.SessionNotify("notifications/tools/list_changed", nil)
		}
		return
	}
	s.foundChanged(req.Principal)
}

// foundChanged tells the watchers that principal's 2026-07-28 clients
// have a new tool list.
func (s *Server) foundChanged(principal string) {
	s.search.mu.Lock()
	ws := make([]func(string), 0, len(s.search.watchers))
	for _, w := range s.search.watchers {
		ws = append(ws, w)
	}
	s.search.mu.Unlock()
	for _, w := range ws {
		w(principal)
	}
}

// FoundElsewhere is the FindStore's announcement that a 2026-07-28
// client of owner (a FindStore record's Principal) found tools, through
// this replica or another: that principal's listen streams here get
// notifications/tools/list_changed.
func (s *Server) FoundElsewhere(owner string) {
	if principal, ok := strings.CutPrefix(owner, "p:"); ok {
		s.foundChanged(principal)
	}
}

// purgeFinds deletes the FindStore's expired finds, every purgeInterval
// until Close.
func (s *Server) purgeFinds() {
	defer s.bg.Done()
	s.everyPurge(func(ctx context.Context, now time.Time) {
		if n, err := s.opts.Finds.DeleteExpiredFinds(ctx, now); err != nil {
			s.logger.Warn("purging expired found tools failed", "err", err)
		} else if n > 0 {
			s.logger.Debug("purged expired found tools", "count", n)
		}
	})
}

// WatchFound calls fn when a principal's 2026-07-28 clients found tools
// in search mode (their tools/list changed), until stop is called. fn
// must not block for long.
func (s *Server) WatchFound(fn func(principal string)) (stop func()) {
	s.search.mu.Lock()
	defer s.search.mu.Unlock()
	id := s.search.nextW
	s.search.nextW++
	s.search.watchers[id] = fn
	return func() {
		s.search.mu.Lock()
		defer s.search.mu.Unlock()
		delete(s.search.watchers, id)
	}
}

// EndSearchSession forgets what a session found (it ended).
func (s *Server) endSearchSession(session string) {
	s.search.mu.Lock()
	s.search.found.Remove("s:" + session)
	s.search.mu.Unlock()
}

// gatewayToolCall serves a tools/call of one of the gateway's own tools;
// handled is false for any other tool.
func (s *Server) gatewayToolCall(ctx context.Context, req *Request, name string) (res *Result, err error, handled bool) {
	switch name {
	case s.gatewayToolName(searchToolsName):
		args, _, _ := rawjson.Get(req.Params, "arguments")
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		res, err := s.searchTools(ctx, req, args)
		return res, err, true
	case s.gatewayToolName(callToolName):
		res, err := s.callTool(ctx, req)
		return res, err, true
	}
	return nil, nil, false
}

// callTool serves call_tool: a tools/call of the named tool with the
// arguments, as if the client had called it directly (routing, access
// rules, tasks, media links and telemetry alike).
func (s *Server) callTool(ctx context.Context, req *Request) (*Result, error) {
	args, _, _ := rawjson.Get(req.Params, "arguments")
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(args) == 0 || json.Unmarshal(args, &in) != nil || in.Name == "" {
		return nil, invalidParams("%s needs arguments {name: string, arguments: object}", s.gatewayToolName(callToolName))
	}
	if in.Name == s.gatewayToolName(callToolName) || in.Name == s.gatewayToolName(searchToolsName) {
		return nil, invalidParams("%s calls the servers' tools, not the gateway's own", s.gatewayToolName(callToolName))
	}
	if len(in.Arguments) == 0 || string(in.Arguments) == "null" {
		in.Arguments = json.RawMessage(`{}`)
	} else if in.Arguments[0] != '{' {
		return nil, invalidParams("%s: arguments must be an object", s.gatewayToolName(callToolName))
	}
	params := []byte(`{"name":`)
	params = rawjson.AppendString(params, in.Name)
	params = append(params, `,"arguments":`...)
	params = append(params, in.Arguments...)
	// The call's own _meta (progress token, task) goes with it.
	if meta, ok, _ := rawjson.Get(req.Params, "_meta"); ok {
		params = append(params, `,"_meta":`...)
		params = append(params, meta...)
	}
	if task, ok, _ := rawjson.Get(req.Params, "task"); ok {
		params = append(params, `,"task":`...)
		params = append(params, task...)
	}
	params = append(params, '}')
	inner := *req
	inner.Params = params
	res, err := s.toolsCall(ctx, &inner)
	// The request's span, log line and metrics name the tool called and
	// its server, as a direct call's do.
	req.server, req.toolName = inner.server, inner.toolName
	return res, err
}
