package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func searchServers() (*upstreamtest.Manager, *[]string) {
	var called []string
	handle := func(_ context.Context, _ string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
		called = append(called, string(params))
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	}
	return upstreamtest.NewManager(
		&upstreamtest.Server{Name: "github", Handle: handle, Tools: raws(
			`{"name":"list_pull_requests","description":"List the pull requests of a repository, open or closed.","inputSchema":{"type":"object","properties":{"repo":{"type":"string","description":"owner/name"}}}}`,
			`{"name":"create_issue","description":"Open a new issue in a repository.","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}}`,
		)},
		&upstreamtest.Server{Name: "weather", Handle: handle, Tools: raws(
			`{"name":"forecast","description":"The weather forecast for a city for the next days.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}}`,
		)},
		&upstreamtest.Server{Name: "payroll", Handle: handle, Tools: raws(
			`{"name":"salaries","description":"Salaries of every employee, for the weather of the payroll.","inputSchema":{"type":"object"}}`,
		)},
	), &called
}

func toolNamesOf(t *testing.T, body json.RawMessage) []string {
	t.Helper()
	var l struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("tools/list %s: %v", body, err)
	}
	var out []string
	for _, tl := range l.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func TestSearch_Exposure(t *testing.T) {
	m, called := searchServers()
	s := newCore(t, m, Options{
		Catalog: config.Catalog{SearchGroups: []string{"small"}},
		ACL: config.ACL{Default: config.ACLAllow, Rules: []config.ACLRule{
			{Effect: config.ACLDeny, Principals: []string{"alice"}, Servers: []string{"payroll"}},
		}},
	})
	ctx := context.Background()
	rec := &recorder{}
	req := func(method, params, exposure string) *Request {
		return &Request{Method: method, Principal: "alice", Session: "s1", SessionNotify: rec.sink, Exposure: exposure,
			Params: json.RawMessage(params), Client: Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{}`)}}
	}
	list := func(exposure string) []string {
		t.Helper()
		res, err := s.Handle(ctx, req("tools/list", `{}`, exposure))
		if err != nil {
			t.Fatal(err)
		}
		return toolNamesOf(t, res.Body)
	}
	gw := []string{"mcp__mcpgw__search_tools", "mcp__mcpgw__call_tool"}

	if got := list(""); len(got) != 3 || slices.Contains(got, gw[0]) {
		t.Fatalf("all mode lists %v, want the three allowed tools", got)
	}
	if diff := cmp.Diff(gw, list("search")); diff != "" {
		t.Fatalf("search mode before a search (-want +got):\n%s", diff)
	}
	if _, err := s.Handle(ctx, req("tools/list", `{}`, "some")); err == nil || !strings.Contains(err.Error(), `exposure "some"`) {
		t.Fatalf("a bad exposure: %v", err)
	}

	t.Run("search finds, activates, and list_changed tells", func(t *testing.T) {
		res, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"open pull requests of my repo","limit":2}}`, "search"))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Structured struct {
				Tools []map[string]any `json:"tools"`
			} `json:"structuredContent"`
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(res.Body, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Structured.Tools) == 0 || out.Structured.Tools[0]["name"] != "mcp__github__list_pull_requests" || out.Structured.Tools[0]["inputSchema"] == nil {
			t.Fatalf("search result %s", res.Body)
		}
		if !strings.Contains(out.Content[0].Text, "mcp__github__list_pull_requests") {
			t.Errorf("text %q does not name the tool", out.Content[0].Text)
		}
		if notes := rec.got(); len(notes) != 1 || !strings.HasPrefix(notes[0], "notifications/tools/list_changed") {
			t.Fatalf("notifications %v, want one tools list_changed", notes)
		}
		if got := list("search"); !slices.Contains(got, "mcp__github__list_pull_requests") || !slices.Contains(got, gw[0]) {
			t.Fatalf("search mode after the search lists %v", got)
		}
		// Another session has found nothing.
		other := req("tools/list", `{}`, "search")
		other.Session = "s2"
		res, _ = s.Handle(ctx, other)
		if diff := cmp.Diff(gw, toolNamesOf(t, res.Body)); diff != "" {
			t.Errorf("another session's list (-want +got):\n%s", diff)
		}
	})
	t.Run("a hidden tool is never found or callable", func(t *testing.T) {
		res, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"salaries payroll employees"}}`, "search"))
		if err != nil || strings.Contains(string(res.Body), "payroll") {
			t.Fatalf("search found a hidden tool: %v %s", err, res.Body)
		}
		_, err = s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__call_tool","arguments":{"name":"mcp__payroll__salaries","arguments":{}}}`, "search"))
		assertCode(t, err, CodeForbidden, "mcp__payroll__salaries")
	})
	t.Run("call_tool calls the tool as a direct call", func(t *testing.T) {
		res, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__call_tool","arguments":{"name":"mcp__weather__forecast","arguments":{"city":"Oslo"}}}`, "search"))
		if err != nil || !strings.Contains(string(res.Body), "done") {
			t.Fatalf("call_tool: %v %v", res, err)
		}
		if last := (*called)[len(*called)-1]; !strings.Contains(last, `"name":"forecast"`) || !strings.Contains(last, `"city":"Oslo"`) {
			t.Errorf("the server got %s", last)
		}
		for _, bad := range []string{`{}`, `{"name":"mcp__mcpgw__call_tool"}`, `{"name":"mcp__weather__forecast","arguments":[1]}`} {
			_, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__call_tool","arguments":`+bad+`}`, "search"))
			assertCode(t, err, -32602, "call_tool")
		}
		_, err = s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__call_tool","arguments":{"name":"mcp__nope__x"}}`, "search"))
		assertCode(t, err, -32602, "unknown tool")
	})
	t.Run("a server that goes away drops out", func(t *testing.T) {
		m.Remove("github")
		res, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"pull requests repository"}}`, "search"))
		if err != nil || strings.Contains(string(res.Body), "github") {
			t.Fatalf("search after github left: %v %s", err, res.Body)
		}
		if got := list("search"); slices.Contains(got, "mcp__github__list_pull_requests") {
			t.Fatalf("a found tool of a server that left is still listed: %v", got)
		}
	})
	t.Run("a search group always searches", func(t *testing.T) {
		r := req("tools/list", `{}`, "all")
		r.Groups = []string{"small"}
		res, err := s.Handle(ctx, r)
		if err != nil || !slices.Contains(toolNamesOf(t, res.Body), gw[0]) {
			t.Fatalf("a small-group caller asking for all got %v %v", res, err)
		}
	})
	t.Run("bad search arguments", func(t *testing.T) {
		for _, args := range []string{`{"query":""}`, `{"query":"x","limit":0}`, `{"query":"x","limit":51}`, `{"query":7}`} {
			_, err := s.Handle(ctx, req("tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":`+args+`}`, "search"))
			assertCode(t, err, -32602, "")
		}
	})
}

func TestSearch_ModernFound(t *testing.T) {
	m, _ := searchServers()
	s := newCore(t, m, Options{Catalog: config.Catalog{Exposure: config.ExposureSearch}})
	var heard []string
	stop := s.WatchFound(func(p string) { heard = append(heard, p) })
	defer stop()
	res, err := modernCall(s, context.Background(), "bob", "tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"weather forecast city"}}`)
	if err != nil || !strings.Contains(string(res.Body), "mcp__weather__forecast") {
		t.Fatalf("search: %v %v", res, err)
	}
	if diff := cmp.Diff([]string{"bob"}, heard); diff != "" {
		t.Errorf("found watchers heard (-want +got):\n%s", diff)
	}
	res, err = modernCall(s, context.Background(), "bob", "tools/list", `{}`)
	if err != nil || !slices.Contains(toolNamesOf(t, res.Body), "mcp__weather__forecast") {
		t.Fatalf("bob's 2026 list after the search: %v %v", res, err)
	}
	res, _ = modernCall(s, context.Background(), "carol", "tools/list", `{}`)
	if slices.Contains(toolNamesOf(t, res.Body), "mcp__weather__forecast") {
		t.Errorf("carol's list has bob's find")
	}
}

// sharedFinds is a FindStore over store.Memory that, like PostgreSQL,
// announces a changed record to every replica, the writer too; fail
// makes it refuse every call.
type sharedFinds struct {
	*store.Memory
	mu       sync.Mutex
	replicas []*Server
	fail     bool
	puts     int
}

func (f *sharedFinds) failing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail
}

func (f *sharedFinds) PutFinds(ctx context.Context, fs store.Finds, announce bool) error {
	if f.failing() {
		return errors.New("the store is down")
	}
	if err := f.Memory.PutFinds(ctx, fs, announce); err != nil {
		return err
	}
	f.mu.Lock()
	f.puts++
	rs := slices.Clone(f.replicas)
	f.mu.Unlock()
	if announce {
		for _, r := range rs {
			r.FoundElsewhere(fs.Principal)
		}
	}
	return nil
}

func (f *sharedFinds) GetFinds(ctx context.Context, owner string) (store.Finds, error) {
	if f.failing() {
		return store.Finds{}, errors.New("the store is down")
	}
	return f.Memory.GetFinds(ctx, owner)
}

// TestSearch_SharedFinds: with a FindStore, what a 2026-07-28 principal
// found through one replica is in its tools/list on another, whose
// watchers hear of it once, as the searching replica's do; a search that
// finds nothing new is stored (its life extended) but not announced; a
// session's finds stay in its replica; and when the store fails, each
// replica falls back to its own memory.
func TestSearch_SharedFinds(t *testing.T) {
	finds := &sharedFinds{Memory: store.NewMemory()}
	opts := Options{Catalog: config.Catalog{Exposure: config.ExposureSearch}, Finds: finds}
	m1, _ := searchServers()
	m2, _ := searchServers()
	r1, r2 := newCore(t, m1, opts), newCore(t, m2, opts)
	finds.replicas = []*Server{r1, r2}
	var mu sync.Mutex
	heard := map[string][]string{}
	for name, r := range map[string]*Server{"r1": r1, "r2": r2} {
		stop := r.WatchFound(func(p string) {
			mu.Lock()
			heard[name] = append(heard[name], p)
			mu.Unlock()
		})
		defer stop()
	}
	ctx := context.Background()
	list := func(r *Server, principal string) []string {
		t.Helper()
		res, err := modernCall(r, ctx, principal, "tools/list", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return toolNamesOf(t, res.Body)
	}

	if _, err := modernCall(r1, ctx, "bob", "tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"weather forecast city","limit":1}}`); err != nil {
		t.Fatal(err)
	}
	if got := list(r2, "bob"); !slices.Contains(got, "mcp__weather__forecast") {
		t.Fatalf("bob's list on r2 = %v, want the find made through r1", got)
	}
	if got := list(r2, "carol"); slices.Contains(got, "mcp__weather__forecast") {
		t.Fatalf("carol's list on r2 has bob's find: %v", got)
	}
	mu.Lock()
	if d := cmp.Diff(map[string][]string{"r1": {"bob"}, "r2": {"bob"}}, heard); d != "" {
		t.Errorf("watchers heard (-want +got):\n%s", d)
	}
	mu.Unlock()

	// The same search again: stored, not announced.
	if _, err := modernCall(r2, ctx, "bob", "tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"weather forecast city","limit":1}}`); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if n := len(heard["r1"]) + len(heard["r2"]); n != 2 {
		t.Errorf("a search that found nothing new was announced: %v", heard)
	}
	mu.Unlock()
	if finds.puts != 2 {
		t.Errorf("%d puts, want 2 (each search extends the finds' life)", finds.puts)
	}

	// A session's finds stay in the replica that holds it.
	if _, err := r1.Handle(ctx, &Request{Method: "tools/call", Principal: "bob", Session: "sess-1", Client: Client{ProtocolVersion: "2025-11-25"},
		Params: json.RawMessage(`{"name":"mcp__mcpgw__search_tools","arguments":{"query":"open a new issue","limit":1}}`)}); err != nil {
		t.Fatal(err)
	}
	if finds.puts != 2 {
		t.Errorf("a session's search wrote to the store")
	}

	// The store fails: r1 keeps what it knew and what is found through it.
	finds.mu.Lock()
	finds.fail = true
	finds.mu.Unlock()
	if _, err := modernCall(r1, ctx, "bob", "tools/call", `{"name":"mcp__mcpgw__search_tools","arguments":{"query":"pull requests of a repository","limit":1}}`); err != nil {
		t.Fatal(err)
	}
	got := list(r1, "bob")
	for _, want := range []string{"mcp__weather__forecast", "mcp__github__list_pull_requests"} {
		if !slices.Contains(got, want) {
			t.Errorf("bob's list on r1 with the store down = %v, want %s", got, want)
		}
	}
	mu.Lock()
	if d := cmp.Diff([]string{"bob", "bob"}, heard["r1"]); d != "" {
		t.Errorf("r1's watchers with the store down (-want +got):\n%s", d)
	}
	mu.Unlock()
}
