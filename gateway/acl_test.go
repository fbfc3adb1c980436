package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func TestACL_Allows(t *testing.T) {
	type check struct {
		principal string
		groups    []string
		kind      itemKind
		server    string
		name      string
		want      bool
	}
	tool := func(p string, groups []string, server, name string, want bool) check {
		return check{p, groups, kindTool, server, name, want}
	}
	eng := []string{"ops", "eng"}
	tests := []struct {
		name   string
		acl    config.ACL
		checks []check
	}{
		{
			name: "no rules: everyone, everything",
			checks: []check{
				tool("", nil, "files", "mcp__files__write", true),
				tool("alice", eng, "files", "mcp__files__write", true),
				{"bob", nil, kindResource, "files", "file:///etc/passwd", true},
			},
		},
		{
			name: "default deny without rules: nothing",
			acl:  config.ACL{Default: config.ACLDeny},
			checks: []check{
				tool("alice", eng, "files", "mcp__files__read", false),
				{"alice", eng, kindPrompt, "files", "mcp__files__p", false},
			},
		},
		{
			name: "a principal's server, default deny with rules",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Principals: []string{"alice"}, Servers: []string{"files"}},
			}},
			checks: []check{
				tool("alice", nil, "files", "mcp__files__read", true),
				{"alice", nil, kindPrompt, "files", "mcp__files__p", true},
				{"alice", nil, kindResource, "files", "file:///a", true},
				tool("alice", nil, "web", "mcp__web__fetch", false),
				tool("bob", nil, "files", "mcp__files__read", false),
				tool("", nil, "files", "mcp__files__read", false),
			},
		},
		{
			name: "a group is not a principal",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Groups: []string{"eng"}, Tools: []string{"mcp__web__*"}},
			}},
			checks: []check{
				tool("alice", eng, "web", "mcp__web__fetch", true),
				tool("eng", nil, "web", "mcp__web__fetch", false),
				tool("bob", []string{"sales"}, "web", "mcp__web__fetch", false),
				// Tools patterns cover tools only.
				{"alice", eng, kindPrompt, "web", "mcp__web__fetch", false},
				{"alice", eng, kindResource, "web", "mcp__web__fetch", false},
			},
		},
		{
			name: "principals and groups: either",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Principals: []string{"carol"}, Groups: []string{"eng"}, Servers: []string{"*"}},
			}},
			checks: []check{
				tool("carol", nil, "web", "mcp__web__fetch", true),
				tool("alice", eng, "web", "mcp__web__fetch", true),
				tool("bob", nil, "web", "mcp__web__fetch", false),
			},
		},
		{
			name: "empty principals and groups: everyone, anonymous too",
			acl: config.ACL{Default: config.ACLDeny, Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Prompts: []string{"mcp__*__help"}},
			}},
			checks: []check{
				{"", nil, kindPrompt, "files", "mcp__files__help", true},
				{Anonymous, nil, kindPrompt, "files", "mcp__files__help", true},
				{"alice", eng, kindPrompt, "web", "mcp__web__help", true},
				{"alice", eng, kindPrompt, "web", "mcp__web__helper", false},
				tool("alice", eng, "web", "mcp__web__help", false),
			},
		},
		{
			name: "deny wins over allow, in either order",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLDeny, Tools: []string{"mcp__files__write"}},
				{Effect: config.ACLAllow, Servers: []string{"*"}},
				{Effect: config.ACLDeny, Groups: []string{"interns"}, Tools: []string{"mcp__files__read"}},
			}},
			checks: []check{
				tool("alice", eng, "files", "mcp__files__write", false),
				tool("alice", eng, "files", "mcp__files__read", true),
				tool("ivan", []string{"interns"}, "files", "mcp__files__read", false),
				tool("ivan", []string{"interns"}, "web", "mcp__web__fetch", true),
			},
		},
		{
			name: "default allow with deny rules",
			acl: config.ACL{Default: config.ACLAllow, Rules: []config.ACLRule{
				{Effect: config.ACLDeny, Principals: []string{Anonymous}, Servers: []string{"*"}},
				{Effect: config.ACLDeny, Servers: []string{"admin-*"}},
			}},
			checks: []check{
				tool("", nil, "files", "mcp__files__read", false),
				tool(Anonymous, nil, "files", "mcp__files__read", false),
				tool("alice", nil, "files", "mcp__files__read", true),
				tool("alice", nil, "admin-eu", "mcp__admin-eu__x", false),
				{"alice", nil, kindResource, "admin-eu", "mcp+admin-eu+file:///a", false},
			},
		},
		{
			name: "globs on tools, prompts and resources",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Tools: []string{"mcp__db__[rs]?ad", "mcp__db__query_*"}},
				{Effect: config.ACLAllow, Prompts: []string{"mcp__db__[^x]*"}},
				{Effect: config.ACLAllow, Resources: []string{"file:///docs/*", "mcp+db+*"}},
				{Effect: config.ACLDeny, Resources: []string{"*.key"}},
			}},
			checks: []check{
				tool("a", nil, "db", "mcp__db__read", true),
				tool("a", nil, "db", "mcp__db__shad", true),
				tool("a", nil, "db", "mcp__db__thad", false),
				tool("a", nil, "db", "mcp__db__write", false),
				tool("a", nil, "db", "mcp__db__query_all", true),
				{"a", nil, kindPrompt, "db", "mcp__db__explain", true},
				{"a", nil, kindPrompt, "db", "mcp__db__xplain", false},
				// * crosses slashes: the resources under file:///docs/.
				{"a", nil, kindResource, "files", "file:///docs/a/b.md", true},
				{"a", nil, kindResource, "files", "file:///docs/a/b.key", false},
				{"a", nil, kindResource, "files", "file:///etc/passwd", false},
				{"a", nil, kindResource, "db", "mcp+db+postgres://h/t", true},
				{"a", nil, kindResource, "db", "mcp+db+file:///docs/{name}", true},
			},
		},
		{
			// A resource's name here is the server's own URI, or its
			// namespaced form: rules hold for either, normalized, and a
			// deny also with repeated and trailing slashes dropped.
			name: "resource forms",
			acl: config.ACL{Rules: []config.ACLRule{
				{Effect: config.ACLAllow, Principals: []string{"bob"}, Servers: []string{"*"}},
				{Effect: config.ACLDeny, Principals: []string{"bob"}, Resources: []string{
					"file:///secret/key", "mcp+notes+memo://secret", "FILE:///Upper/./x", "file:///dir/",
				}},
				{Effect: config.ACLAllow, Principals: []string{"carol"}, Resources: []string{"file:///pub/*", "file:///a/b"}},
			}},
			checks: []check{
				{"bob", nil, kindResource, "files", "file:///secret/key", false},
				{"bob", nil, kindResource, "files", "mcp+files+file:///secret/key", false},
				{"bob", nil, kindResource, "files", "file:///secret/./key", false},
				{"bob", nil, kindResource, "files", "file:///x/../secret/key", false},
				{"bob", nil, kindResource, "files", "FILE:///secret/%6Bey", false},
				{"bob", nil, kindResource, "files", "file:///secret//key", false},
				{"bob", nil, kindResource, "files", "file:////secret/key", false},
				{"bob", nil, kindResource, "files", "file:///secret/key/", false},
				{"bob", nil, kindResource, "files", "file:///secret/keyring", true},
				{"bob", nil, kindResource, "files", "file:///docs/a", true},
				{"bob", nil, kindResource, "notes", "memo://secret", false},
				{"bob", nil, kindResource, "notes", "memo://SECRET/", false},
				{"bob", nil, kindResource, "other", "memo://secret", true},
				{"bob", nil, kindResource, "files", "file:///Upper/x", false},
				{"bob", nil, kindResource, "files", "file:///dir", false},
				{"bob", nil, kindResource, "files", "file:///dir//", false},
				{"alice", nil, kindResource, "files", "file:///secret/key", false},
				{"carol", nil, kindResource, "files", "file:///pub/a", true},
				{"carol", nil, kindResource, "files", "mcp+files+file:///pub/a", true},
				{"carol", nil, kindResource, "files", "file:///pub/../secret", false},
				{"carol", nil, kindResource, "files", "file:///pub/%2E%2E/secret", false},
				{"carol", nil, kindResource, "files", "file:///a/b", true},
				{"carol", nil, kindResource, "files", "FILE:///a/./b", true},
				// An allow sees only RFC 3986 equivalents: a server
				// may tell a//b from a/b.
				{"carol", nil, kindResource, "files", "file:///a//b", false},
				{"carol", nil, kindResource, "files", "file:///a/b/", false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := compileACL(tt.acl)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.checks {
				it := item{key: c.name, server: c.server}
				if c.kind == kindResource {
					// A resource's name is its exposed URI.
					it.uri = c.name
					if server, own, ok := parseNamespaced("mcp", c.name); ok && server == c.server {
						it.uri = own
					}
					it.key += "\x00" + c.server
					if got := a.allowsResource(c.principal, c.groups, c.server, formsOf("mcp", c.server, it.uri)); got != c.want {
						t.Errorf("allowsResource(%q, %q, %q, %q) = %t, want %t", c.principal, c.groups, c.server, c.name, got, c.want)
					}
				} else if got := a.allows(c.principal, c.groups, c.kind, c.server, c.name); got != c.want {
					t.Errorf("allows(%q, %q, %s, %q, %q) = %t, want %t", c.principal, c.groups, c.kind, c.server, c.name, got, c.want)
				}
				// A list decides the same, by the caller's rules and
				// the item's coverage.
				rules := a.forCaller(c.principal, c.groups)
				if got := rules == nil || rules.allowsCovered(a.coverage(newList("x", []item{it}), c.kind, "mcp").of(0)); got != c.want {
					t.Errorf("list of %s %q for (%q, %q): allowed = %t, want %t", c.kind, c.name, c.principal, c.groups, got, c.want)
				}
			}
		})
	}
}

func TestCompileACL(t *testing.T) {
	tests := []struct {
		name    string
		acl     config.ACL
		wantNil bool
		wantErr string
	}{
		{name: "zero", wantNil: true},
		{name: "explicit allow", acl: config.ACL{Default: config.ACLAllow}, wantNil: true},
		{name: "deny", acl: config.ACL{Default: config.ACLDeny}},
		{name: "bad default", acl: config.ACL{Default: "maybe"}, wantErr: `acl.default: "maybe" is not allow or deny`},
		{name: "bad effect", acl: config.ACL{Rules: []config.ACLRule{{Effect: "permit", Servers: []string{"*"}}}}, wantErr: `acl.rules[0].effect`},
		{name: "bad glob", acl: config.ACL{Rules: []config.ACLRule{{Effect: "allow", Tools: []string{"[a-"}}}}, wantErr: `acl.rules[0].tools: "[a-" is not a valid glob pattern`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := compileACL(tt.acl)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (a == nil) != tt.wantNil {
				t.Errorf("acl = %v, want nil: %t", a, tt.wantNil)
			}
		})
	}
	if _, err := New(Options{Upstreams: upstreamtest.NewManager(), ACL: config.ACL{Default: "maybe"}}); err == nil {
		t.Error("New accepted a bad ACL")
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"*", "", true},
		{"*", "file:///a/b", true},
		{"abc", "abc", true},
		{"abc", "abcd", false},
		{"ab*", "abc/d", true},
		{"ab*", "a", false},
		{"*c", "ab/c", true},
		{"a*b*c", "a/x/b/y/c", true},
		{"a*b*c", "a/x/b/y/d", false},
		{"a?c", "a/c", true},
		{"a?c", "aéc", true},
		{"a??c", "aéc", false},
		{"a[b-d]e", "ace", true},
		{"a[b-d]e", "aee", false},
		{"a[^b-d]e", "aee", true},
		{"a[^b-d]e", "ace", false},
		{"a[é]c", "aéc", true},
		{`a\*c`, "a*c", true},
		{`a\*c`, "abc", false},
		{`a[\]]c`, "a]c", true},
		{"*.key", "file:///secret/x.key", true},
		{"*x*", "ééxé", true},
		{"*?é", "aé", true},
		{"*??", "é", false},
	}
	for _, tt := range tests {
		g := compileGlob(tt.pat)
		if got := g.match(tt.s); got != tt.want {
			t.Errorf("glob %q match %q = %t, want %t", tt.pat, tt.s, got, tt.want)
		}
	}
}

// FuzzGlob checks the matcher against path.Match on names without a
// slash, where the two must agree (with one, only that it returns).
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"*", "abc"}, {"a*b?c", "axxbyc"}, {"[a-c]*", "b"}, {"[^a-c]x", "dx"},
		{`\[*`, "[x"}, {"*a*a*a", "aaaa"}, {"?é*", "xéy"}, {"[]a]", "a"}, {"a[", "a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		want, err := path.Match(pat, s)
		if err != nil || pat == "" {
			return // config refuses it
		}
		g := compileGlob(pat)
		if got := g.match(s); got != want && !strings.Contains(s, "/") {
			t.Errorf("glob %q match %q = %t, path.Match says %t", pat, s, got, want)
		}
	})
}

// manyRules returns an ACL of n rules of every shape, none of which
// applies to the benchmark's tool until the last.
func manyRules(n int) config.ACL {
	var rules []config.ACLRule
	for i := range n - 1 {
		switch i % 4 {
		case 0:
			rules = append(rules, config.ACLRule{Effect: config.ACLAllow, Principals: []string{fmt.Sprintf("user-%d", i)}, Servers: []string{"*"}})
		case 1:
			rules = append(rules, config.ACLRule{Effect: config.ACLAllow, Groups: []string{fmt.Sprintf("team-%d", i), "eng"}, Tools: []string{fmt.Sprintf("mcp__s%d__*", i)}})
		case 2:
			rules = append(rules, config.ACLRule{Effect: config.ACLDeny, Tools: []string{fmt.Sprintf("mcp__s*__[a-c]%d?", i)}})
		case 3:
			rules = append(rules, config.ACLRule{Effect: config.ACLDeny, Resources: []string{fmt.Sprintf("file:///%d/*", i)}, Servers: []string{fmt.Sprintf("srv-%d", i)}})
		}
	}
	rules = append(rules, config.ACLRule{Effect: config.ACLAllow, Groups: []string{"eng"}, Tools: []string{"mcp__files__*"}})
	return config.ACL{Rules: rules}
}

// BenchmarkACLAllowed checks one tools/call against 50 rules.
func BenchmarkACLAllowed(b *testing.B) {
	a, err := compileACL(manyRules(50))
	if err != nil {
		b.Fatal(err)
	}
	groups := []string{"ops", "eng"}
	if !a.allows("alice", groups, kindTool, "files", "mcp__files__write") {
		b.Fatal("not allowed")
	}
	b.ReportAllocs()
	for b.Loop() {
		a.allows("alice", groups, kindTool, "files", "mcp__files__write")
	}
}

func TestACL_AllowsAllocatesNothing(t *testing.T) {
	a, err := compileACL(manyRules(50))
	if err != nil {
		t.Fatal(err)
	}
	groups := []string{"ops", "eng"}
	if n := testing.AllocsPerRun(100, func() { a.allows("alice", groups, kindTool, "files", "mcp__files__write") }); n != 0 {
		t.Errorf("allows allocates %v times, want 0", n)
	}
}

// aclServers are three servers with several tools, prompts and resources;
// every call they get is recorded.
type aclServers struct {
	mu    sync.Mutex
	calls []string // "server method"
}

func (r *aclServers) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *aclServers) manager() *upstreamtest.Manager {
	handle := func(server string) func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
		return func(_ context.Context, method string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			r.mu.Lock()
			r.calls = append(r.calls, server+" "+method)
			r.mu.Unlock()
			switch method {
			case "tools/call":
				return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
			case "prompts/get":
				return json.RawMessage(`{"messages":[]}`), nil
			case "resources/read":
				return json.RawMessage(`{"contents":[]}`), nil
			case "completion/complete":
				return json.RawMessage(`{"completion":{"values":[]}}`), nil
			}
			return json.RawMessage(`{}`), nil
		}
	}
	tools := func(names ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, n := range names {
			out = append(out, json.RawMessage(`{"name":"`+n+`","inputSchema":{"type":"object"}}`))
		}
		return out
	}
	return upstreamtest.NewManager(
		&upstreamtest.Server{
			Name:      "files",
			Tools:     tools("delete", "list", "read", "stat", "write"),
			Prompts:   raws(`{"name":"review"}`, `{"name":"summarize"}`),
			Resources: raws(`{"uri":"file:///docs/a.md","name":"a"}`, `{"uri":"file:///docs/b.md","name":"b"}`, `{"uri":"file:///secret/key","name":"key"}`),
			Templates: raws(`{"uriTemplate":"file:///docs/{name}","name":"doc"}`, `{"uriTemplate":"file:///secret/{name}","name":"secret"}`),
			Handle:    handle("files"),
		},
		&upstreamtest.Server{
			// A tool that runs as a task only: without one, the
			// gateway blocks and polls.
			Name:         "jobs",
			Capabilities: json.RawMessage(`{"tasks":{"requests":{"tools":{"call":{}}}}}`),
			Tools:        raws(`{"name":"build","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`),
			Handle:       handle("jobs"),
		},
		&upstreamtest.Server{
			Name:      "web",
			Tools:     tools("fetch", "search"),
			Prompts:   raws(`{"name":"browse"}`),
			Resources: raws(`{"uri":"https://example.com/","name":"home"}`),
			Handle:    handle("web"),
		},
	)
}

// aclRules: eng may use everything but deleting, jobs and the secrets; bob the
// web tools and prompts; everyone the public web pages.
var aclRules = config.ACL{Rules: []config.ACLRule{
	{Effect: config.ACLAllow, Groups: []string{"eng"}, Servers: []string{"*"}},
	{Effect: config.ACLDeny, Groups: []string{"eng"}, Tools: []string{"mcp__files__delete", "mcp__jobs__*"}, Resources: []string{"file:///secret/*"}},
	{Effect: config.ACLAllow, Principals: []string{"bob"}, Tools: []string{"mcp__web__*"}, Prompts: []string{"mcp__web__*"}},
	{Effect: config.ACLAllow, Resources: []string{"https://*"}},
}}

var (
	alice = &Request{Principal: "alice", Groups: []string{"eng"}}
	bob   = &Request{Principal: "bob"}
	anon  = &Request{Principal: Anonymous}
)

// as returns a copy of caller's request for method with params.
func as(caller *Request, method, params string) *Request {
	req := *caller
	req.Method = method
	if params != "" {
		req.Params = json.RawMessage(params)
	}
	return &req
}

// listAll follows a list's pages to the end and returns the names (URIs)
// of its items and the sizes of its pages.
func listAll(t *testing.T, s *Server, caller *Request, method string) (names []string, pages []int) {
	t.Helper()
	params := ""
	for range 100 {
		res, err := s.Handle(context.Background(), as(caller, method, params))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(res.Body, &page); err != nil {
			t.Fatal(err)
		}
		var items []struct{ Name, URI, URITemplate string }
		for k, v := range page {
			if k != "nextCursor" {
				json.Unmarshal(v, &items)
			}
		}
		for _, it := range items {
			switch {
			case it.URI != "":
				names = append(names, it.URI)
			case it.URITemplate != "":
				names = append(names, it.URITemplate)
			default:
				names = append(names, it.Name)
			}
		}
		pages = append(pages, len(items))
		next, ok := page["nextCursor"]
		if !ok {
			return names, pages
		}
		params = `{"cursor":` + string(next) + `}`
	}
	t.Fatalf("%s: more than 100 pages", method)
	return nil, nil
}

func TestACL_Lists(t *testing.T) {
	type want struct {
		tools, prompts, resources, templates []string
	}
	everything := want{
		tools:     []string{"mcp__files__delete", "mcp__files__list", "mcp__files__read", "mcp__files__stat", "mcp__files__write", "mcp__jobs__build", "mcp__web__fetch", "mcp__web__search"},
		prompts:   []string{"mcp__files__review", "mcp__files__summarize", "mcp__web__browse"},
		resources: []string{"file:///docs/a.md", "file:///docs/b.md", "file:///secret/key", "https://example.com/"},
		templates: []string{"file:///docs/{name}", "file:///secret/{name}"},
	}
	tests := []struct {
		name   string
		acl    config.ACL
		caller *Request
		want   want
	}{
		{name: "no rules", caller: anon, want: everything},
		{name: "no rules, alice", caller: alice, want: everything},
		{
			name: "eng", acl: aclRules, caller: alice,
			want: want{
				tools:     []string{"mcp__files__list", "mcp__files__read", "mcp__files__stat", "mcp__files__write", "mcp__web__fetch", "mcp__web__search"},
				prompts:   everything.prompts,
				resources: []string{"file:///docs/a.md", "file:///docs/b.md", "https://example.com/"},
				templates: []string{"file:///docs/{name}"},
			},
		},
		{
			name: "bob", acl: aclRules, caller: bob,
			want: want{
				tools:     []string{"mcp__web__fetch", "mcp__web__search"},
				prompts:   []string{"mcp__web__browse"},
				resources: []string{"https://example.com/"},
			},
		},
		{
			name: "anonymous", acl: aclRules, caller: anon,
			want: want{resources: []string{"https://example.com/"}},
		},
		{name: "default deny", acl: config.ACL{Default: config.ACLDeny}, caller: alice},
	}
	for _, tt := range tests {
		for _, pageSize := range []int{0, 1, 2, 3} {
			t.Run(fmt.Sprintf("%s/page_size=%d", tt.name, pageSize), func(t *testing.T) {
				var srv aclServers
				// The servers' schemes do not overlap: their URIs are
				// listed as they are.
				s := newCore(t, srv.manager(), Options{ACL: tt.acl, PageSize: pageSize, Resources: config.Resources{Namespace: config.NamespaceNever}})
				var got want
				for _, l := range []struct {
					method string
					got    *[]string
				}{
					{"tools/list", &got.tools},
					{"prompts/list", &got.prompts},
					{"resources/list", &got.resources},
					{"resources/templates/list", &got.templates},
				} {
					names, pages := listAll(t, s, tt.caller, l.method)
					*l.got = names
					// Every page but the last is full; no page is empty
					// unless the whole list is.
					for i, n := range pages {
						if pageSize > 0 && i < len(pages)-1 && n != pageSize || n == 0 && len(pages) > 1 {
							t.Errorf("%s: page sizes %v with page_size %d", l.method, pages, pageSize)
							break
						}
					}
				}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
					t.Errorf("lists (-want +got):\n%s", diff)
				}
				if len(srv.recorded()) != 0 {
					t.Errorf("lists reached the upstreams: %q", srv.recorded())
				}
			})
		}
	}
}

// With no rules the lists are the precomputed ones, the very bytes.
func TestACL_NoRulesFastPath(t *testing.T) {
	var srv aclServers
	s := newCore(t, srv.manager(), Options{})
	if s.acl != nil {
		t.Fatal("an ACL without rules was compiled")
	}
	res, err := s.Handle(context.Background(), as(alice, "tools/list", ""))
	if err != nil {
		t.Fatal(err)
	}
	if full := s.cat.Load().tools.full; &res.Body[0] != &full[0] {
		t.Error("tools/list is not the precomputed list")
	}
	// Rules that allow a caller everything keep the fast path for it.
	s = newCore(t, srv.manager(), Options{ACL: config.ACL{Default: config.ACLAllow, Rules: []config.ACLRule{
		{Effect: config.ACLDeny, Principals: []string{"mallory"}, Servers: []string{"*"}},
	}}})
	res, err = s.Handle(context.Background(), as(alice, "tools/list", ""))
	if err != nil {
		t.Fatal(err)
	}
	if full := s.cat.Load().tools.full; &res.Body[0] != &full[0] {
		t.Error("tools/list for a caller no rule applies to is not the precomputed list")
	}
}

func TestACL_Calls(t *testing.T) {
	tests := []struct {
		name   string
		caller *Request
		method string
		params string
		// wantCode 0: allowed, and the call reaches wantServer.
		wantCode   int
		wantMsg    string
		wantServer string
	}{
		{name: "tool allowed", caller: alice, method: "tools/call", params: `{"name":"mcp__files__read","arguments":{}}`, wantServer: "files"},
		{name: "tool denied by a deny", caller: alice, method: "tools/call", params: `{"name":"mcp__files__delete","arguments":{}}`,
			wantCode: CodeForbidden, wantMsg: `tool "mcp__files__delete" is not allowed for this caller`, wantServer: "files"},
		{name: "tool denied by default", caller: bob, method: "tools/call", params: `{"name":"mcp__files__read","arguments":{}}`,
			wantCode: CodeForbidden, wantMsg: `tool "mcp__files__read" is not allowed for this caller`, wantServer: "files"},
		{name: "tool as a task", caller: alice, method: "tools/call", params: `{"name":"mcp__files__delete","arguments":{},"task":{"ttl":60000}}`,
			wantCode: CodeForbidden, wantMsg: `tool "mcp__files__delete" is not allowed`, wantServer: "files"},
		{name: "task-only tool, block and poll", caller: alice, method: "tools/call", params: `{"name":"mcp__jobs__build","arguments":{}}`,
			wantCode: CodeForbidden, wantMsg: `tool "mcp__jobs__build" is not allowed`, wantServer: "jobs"},
		{name: "task-only tool as a relayed task", caller: alice, method: "tools/call", params: `{"name":"mcp__jobs__build","arguments":{},"task":{}}`,
			wantCode: CodeForbidden, wantMsg: `tool "mcp__jobs__build" is not allowed`, wantServer: "jobs"},
		{name: "tool of bob", caller: bob, method: "tools/call", params: `{"name":"mcp__web__fetch","arguments":{}}`, wantServer: "web"},
		{name: "unknown tool stays invalid params", caller: bob, method: "tools/call", params: `{"name":"mcp__files__nope"}`,
			wantCode: jsonrpc.CodeInvalidParams, wantMsg: `unknown tool "mcp__files__nope"`},
		{name: "prompt allowed", caller: bob, method: "prompts/get", params: `{"name":"mcp__web__browse"}`, wantServer: "web"},
		{name: "prompt denied", caller: bob, method: "prompts/get", params: `{"name":"mcp__files__review"}`,
			wantCode: CodeForbidden, wantMsg: `prompt "mcp__files__review" is not allowed for this caller`, wantServer: "files"},
		{name: "resource allowed", caller: alice, method: "resources/read", params: `{"uri":"file:///docs/a.md"}`, wantServer: "files"},
		{name: "resource by template allowed", caller: alice, method: "resources/read", params: `{"uri":"file:///docs/c.md"}`, wantServer: "files"},
		{name: "resource denied", caller: alice, method: "resources/read", params: `{"uri":"file:///secret/key"}`,
			wantCode: CodeForbidden, wantMsg: `resource "file:///secret/key" is not allowed for this caller`, wantServer: "files"},
		{name: "resource by template denied", caller: alice, method: "resources/read", params: `{"uri":"file:///secret/other"}`,
			wantCode: CodeForbidden, wantMsg: `resource "file:///secret/other" is not allowed`, wantServer: "files"},
		{name: "public resource for anonymous", caller: anon, method: "resources/read", params: `{"uri":"https://example.com/"}`, wantServer: "web"},
		{name: "resource denied to anonymous", caller: anon, method: "resources/read", params: `{"uri":"file:///docs/a.md"}`,
			wantCode: CodeForbidden, wantMsg: `resource "file:///docs/a.md" is not allowed`, wantServer: "files"},
		{name: "subscribe denied", caller: alice, method: "resources/subscribe", params: `{"uri":"file:///secret/key"}`,
			wantCode: CodeForbidden, wantMsg: `resource "file:///secret/key" is not allowed`, wantServer: "files"},
		{name: "subscribe allowed", caller: alice, method: "resources/subscribe", params: `{"uri":"file:///docs/a.md"}`, wantServer: "files"},
		{name: "completion of a prompt denied", caller: bob, method: "completion/complete",
			params:   `{"ref":{"type":"ref/prompt","name":"mcp__files__review"},"argument":{"name":"a","value":""}}`,
			wantCode: CodeForbidden, wantMsg: `prompt "mcp__files__review" is not allowed`, wantServer: "files"},
		{name: "completion of a template denied", caller: alice, method: "completion/complete",
			params:   `{"ref":{"type":"ref/resource","uri":"file:///secret/{name}"},"argument":{"name":"name","value":""}}`,
			wantCode: CodeForbidden, wantMsg: `resource "file:///secret/{name}" is not allowed`, wantServer: "files"},
		{name: "completion of a template allowed", caller: alice, method: "completion/complete",
			params: `{"ref":{"type":"ref/resource","uri":"file:///docs/{name}"},"argument":{"name":"name","value":""}}`, wantServer: "files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv aclServers
			s := newCore(t, srv.manager(), Options{ACL: aclRules})
			req := as(tt.caller, tt.method, tt.params)
			req.Session = "sess"
			req.SessionNotify = func(string, json.RawMessage) {}
			_, err := s.Handle(context.Background(), req)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("%s: %v", tt.method, err)
				}
				if want := []string{tt.wantServer + " " + tt.method}; !slices.Equal(srv.recorded(), want) {
					t.Errorf("upstream calls %q, want %q", srv.recorded(), want)
				}
				return
			}
			jerr := assertCode(t, err, tt.wantCode, tt.wantMsg)
			if tt.wantCode == CodeForbidden {
				if strings.Contains(jerr.Message, "rule") {
					t.Errorf("message %q names a rule", jerr.Message)
				}
				if want := `{"server":"` + tt.wantServer + `"}`; string(jerr.Data) != want {
					t.Errorf("data = %s, want %s", jerr.Data, want)
				}
			}
			if calls := srv.recorded(); len(calls) != 0 {
				t.Errorf("a refused call reached the upstreams: %q", calls)
			}
		})
	}
}

// A namespaced resource is checked under its exposed (namespaced) URI, even
// when the client reads it by its bare one.
func TestACL_NamespacedResource(t *testing.T) {
	var srv aclServers
	s := newCore(t, srv.manager(), Options{
		Resources: config.Resources{Namespace: config.NamespaceAlways},
		ACL: config.ACL{Rules: []config.ACLRule{
			{Effect: config.ACLAllow, Resources: []string{"mcp+files+file:///docs/*"}},
		}},
	})
	names, _ := listAll(t, s, bob, "resources/list")
	if want := []string{"mcp+files+file:///docs/a.md", "mcp+files+file:///docs/b.md"}; !slices.Equal(names, want) {
		t.Errorf("resources/list = %q, want %q", names, want)
	}
	for uri, code := range map[string]int{
		"mcp+files+file:///docs/a.md":  0,
		"file:///docs/a.md":            0, // the bare form of a listed URI
		"mcp+files+file:///secret/key": CodeForbidden,
		"file:///secret/key":           CodeForbidden,
	} {
		_, err := s.Handle(context.Background(), as(bob, "resources/read", `{"uri":"`+uri+`"}`))
		if code == 0 && err != nil {
			t.Errorf("read %s: %v", uri, err)
		}
		if code != 0 {
			assertCode(t, err, code, "is not allowed")
		}
	}
}

// BenchmarkToolsListACL serves the tools/list of BenchmarkToolsList to a
// caller that 50 rules allow half the servers.
func BenchmarkToolsListACL(b *testing.B) {
	rules := manyRules(50)
	rules.Rules = append(rules.Rules, config.ACLRule{Effect: config.ACLAllow, Groups: []string{"eng"}, Servers: []string{"server-0[0-4]?"}})
	for _, pageSize := range []int{0, 100} {
		b.Run(fmt.Sprintf("page_size=%d", pageSize), func(b *testing.B) {
			s, err := New(Options{Upstreams: manyServers(100, 100), PageSize: pageSize, ACL: rules})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			req := &Request{Method: "tools/list", Principal: "alice", Groups: []string{"eng"}}
			res, err := s.Handle(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(res.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Handle(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A deny rule on a resource holds however the client spells the URI: in
// the namespaced or the server's own form (whichever form the rule is
// written in and whichever the server is listed under, the prefix and
// server in any case), with dot segments, repeated or trailing slashes,
// another case of scheme or host, or percent-encoded unreserved
// characters. A spelling that a server could decode into another path
// (an encoded "/" or "\", a "\", dot segments encoded twice) is refused
// as invalid params unless the server lists that very URI. What reaches
// the server is the normalized URI (its own listed spelling when it lists
// it), and a refused read reaches no server.
func TestACL_ResourceSpellings(t *testing.T) {
	var u uriServer
	m := upstreamtest.NewManager(
		// files serves any path (like a file server, it would resolve
		// dot segments and repeated slashes itself).
		// It lists one URI with an encoded slash of its own.
		u.server("files", []string{"file:///docs/a.md", "file:///secret/key", "file:///docs/x%2Fy"}, []string{"file:///{+path}"}),
		u.server("notes", []string{"file:///notes/n1", "memo://secret", "memo://public"}, []string{"memo://{id}"}),
	)
	s := newCore(t, m, Options{
		Servers: []config.Server{{Name: "files"}, {Name: "notes"}}, // files bare, notes namespaced
		ACL: config.ACL{Rules: []config.ACLRule{
			{Effect: config.ACLAllow, Servers: []string{"*"}},
			{Effect: config.ACLDeny, Principals: []string{"bob"}, Resources: []string{
				"file:///secret/key",      // the own form of a bare server's URI
				"mcp+notes+memo://secret", // the namespaced form
				"file:///notes/n1",        // the own form of a namespaced server's URI
				"memo://{id}",             // a template, in its own form
			}},
		}},
	})
	tests := []struct {
		uri string
		// forward is what the server gets; "" when bob is refused:
		// forbidden, or invalid params naming invalid.
		server, forward string
		invalid         string
	}{
		{uri: "file:///secret/key"},
		{uri: "file:///secret/./key"},
		{uri: "file:///docs/../secret/key"},
		{uri: "file:///secret//key"},
		{uri: "file:////secret/key"},
		{uri: "file:///secret/key/"},
		{uri: "file:///secret/key//"},
		{uri: "FILE:///secret/key"},
		{uri: "file:///secret/%6Bey"},
		{uri: "file:///secret/%6bey"},
		{uri: "file:///%73ecret/key"},
		{uri: "file:///secret/%2E/key"},
		{uri: "file:///secret/%2e%2e/secret/key"},
		{uri: "mcp+files+file:///secret/key"},
		{uri: "mcp+files+file:///secret/./key"},
		{uri: "mcp+files+file:///secret//key"},
		{uri: "mcp+files+file:///secret/key/"},
		{uri: "mcp+files+FILE:///secret/key"},
		{uri: "mcp+notes+memo://secret"},
		{uri: "mcp+notes+memo://secret/"},
		{uri: "mcp+notes+memo://SECRET"},
		{uri: "mcp+notes+MEMO://secret"},
		{uri: "mcp+notes+memo://secret/."},
		{uri: "memo://secret"}, // the own form of a namespaced URI
		{uri: "memo://Secret"},
		{uri: "mcp+notes+file:///notes/n1"},
		{uri: "mcp+notes+file:///notes//n1"},
		{uri: "mcp+notes+file:///notes/./n1/"},
		// The prefix and the server are part of the scheme: any case.
		{uri: "MCP+files+file:///secret/key"},
		{uri: "Mcp+Notes+memo://secret"},
		{uri: "MCP+NOTES+MEMO://SECRET"},
		{uri: "mcp+NOTES+file:///notes/n1"},
		// Spellings a server would decode into the denied path.
		{uri: "file:///secret%2Fkey", invalid: `encoded "/"`},
		{uri: "file:///secret%2fkey", invalid: `encoded "/"`},
		{uri: "file:///docs/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "file:///docs%2F..%2Fsecret/key", invalid: `encoded "/"`},
		{uri: "file:///docs/..%252Fsecret/key", invalid: `encoded "/"`},
		{uri: "file:///docs/%252E%252E/secret/key", invalid: "dot segment"},
		{uri: "file:///docs/%25252e%25252e/secret/key", invalid: "dot segment"},
		{uri: "file:///docs/..%5Csecret%5Ckey", invalid: `"\"`},
		{uri: "file:///docs/..\\secret\\key", invalid: `"\"`},
		{uri: "file:///secret\\key", invalid: `"\"`},
		{uri: "mcp+files+file:///docs/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "MCP+FILES+file:///docs/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "memo://..%2Fsecret", invalid: `encoded "/"`},
		{uri: "mcp+notes+memo://%252E%252E", invalid: "dot segment"},
		// Allowed, normalized on the way.
		{uri: "file:///docs/a.md", server: "files", forward: "file:///docs/a.md"},
		{uri: "file:///docs/./a.md", server: "files", forward: "file:///docs/a.md"},
		{uri: "FILE:///docs/%61.md", server: "files", forward: "file:///docs/a.md"},
		{uri: "mcp+files+file:///x/../docs/a.md", server: "files", forward: "file:///docs/a.md"},
		// Repeated slashes are not an RFC 3986 equivalence: a server may
		// tell them apart, so they are forwarded as they are.
		{uri: "file:///docs//a.md", server: "files", forward: "file:///docs//a.md"},
		{uri: "file:///docs/a.md/", server: "files", forward: "file:///docs/a.md/"},
		{uri: "mcp+notes+memo://public", server: "notes", forward: "memo://public"},
		{uri: "mcp+notes+memo://PUBLIC", server: "notes", forward: "memo://public"},
		{uri: "Mcp+Notes+memo://public", server: "notes", forward: "memo://public"},
		// A URI the server lists is its own, encoded slash and all; one
		// it does not list is refused.
		{uri: "file:///docs/x%2Fy", server: "files", forward: "file:///docs/x%2Fy"},
		{uri: "file:///docs/x%2fy", server: "files", forward: "file:///docs/x%2Fy"},
		{uri: "mcp+files+file:///docs/x%2Fy", server: "files", forward: "file:///docs/x%2Fy"},
		{uri: "file:///docs/x%2Fz", invalid: `encoded "/"`},
		// The query is the server's: it is not checked.
		{uri: "file:///docs/a.md?p=..%2Fsecret", server: "files", forward: "file:///docs/a.md?p=..%2Fsecret"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			u.reset()
			_, err := s.Handle(context.Background(), as(bob, "resources/read", fmt.Sprintf(`{"uri":%q}`, tt.uri)))
			if tt.invalid != "" {
				jerr := assertCode(t, err, jsonrpc.CodeInvalidParams, tt.invalid)
				if strings.Contains(jerr.Message, "secret") {
					t.Errorf("the refusal echoes the URI: %q", jerr.Message)
				}
			}
			if tt.server == "" {
				if tt.invalid == "" {
					assertCode(t, err, CodeForbidden, "is not allowed")
				}
				if got := u.recorded(); len(got) != 0 {
					t.Errorf("a refused read reached the servers: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if want := []string{tt.server + " resources/read " + tt.forward}; !slices.Equal(u.recorded(), want) {
				t.Errorf("the servers got %q, want %q", u.recorded(), want)
			}
		})
	}
	// Completion of the denied template, in either form.
	for _, ref := range []string{"memo://{id}", "mcp+notes+memo://{id}"} {
		u.reset()
		_, err := s.Handle(context.Background(), as(bob, "completion/complete", fmt.Sprintf(`{"ref":{"type":"ref/resource","uri":%q},"argument":{"name":"id","value":""}}`, ref)))
		assertCode(t, err, CodeForbidden, "is not allowed")
		if got := u.recorded(); len(got) != 0 {
			t.Errorf("a refused completion reached the servers: %q", got)
		}
	}
	// The lists agree with the reads: bob is shown none of the denied
	// URIs, in any form.
	names, _ := listAll(t, s, bob, "resources/list")
	if want := []string{"file:///docs/a.md", "file:///docs/x%2Fy", "mcp+notes+memo://public"}; !slices.Equal(names, want) {
		t.Errorf("bob's resources/list = %q, want %q", names, want)
	}
	names, _ = listAll(t, s, bob, "resources/templates/list")
	if want := []string{"file:///{+path}"}; !slices.Equal(names, want) {
		t.Errorf("bob's resources/templates/list = %q, want %q", names, want)
	}
}

// An allow rule holds for what the server reads: a URI under
// file:///public/ that a server would decode into a path outside it (an
// encoded "/" or "\", a "\", dot segments once decoded) is refused, in
// either form, before any rule or server sees it; the query is the
// server's own.
func TestACL_AllowRuleSpellings(t *testing.T) {
	var u uriServer
	m := upstreamtest.NewManager(u.server("files", []string{"file:///public/a", "file:///secret/key"}, []string{"file:///public/{name}{?v}"}))
	s := newCore(t, m, Options{ACL: config.ACL{Rules: []config.ACLRule{
		{Effect: config.ACLAllow, Principals: []string{"bob"}, Resources: []string{"file:///public/*"}},
	}}})
	tests := []struct {
		uri string
		// forward is what the server gets; "" when bob is refused:
		// forbidden, or invalid params naming invalid.
		forward, invalid string
	}{
		{uri: "file:///public/a", forward: "file:///public/a"},
		{uri: "file:///public/b", forward: "file:///public/b"},
		{uri: "mcp+files+file:///public/b", forward: "file:///public/b"},
		{uri: "file:///public/b?v=..%2Fx", forward: "file:///public/b?v=..%2Fx"},
		{uri: "file:///public/../secret/key"},
		{uri: "file:///secret/key"},
		{uri: "file:///public/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "file:///public/..%2fsecret%2fkey", invalid: `encoded "/"`},
		{uri: "file:///public/%2E%2E%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "file:///public/..%252Fsecret", invalid: `encoded "/"`},
		{uri: "file:///public/%252E%252E%252Fsecret", invalid: `encoded "/"`},
		{uri: "file:///public/..%5Csecret", invalid: `"\"`},
		{uri: "file:///public/..\\secret", invalid: `"\"`},
		{uri: "mcp+files+file:///public/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		{uri: "MCP+FILES+FILE:///public/..%2Fsecret%2Fkey", invalid: `encoded "/"`},
		// A name with a slash, encoded as RFC 6570 expands {name}: the
		// server would read file:///public/a/b. It is refused too.
		{uri: "file:///public/a%2Fb", invalid: `encoded "/"`},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			u.reset()
			_, err := s.Handle(context.Background(), as(bob, "resources/read", fmt.Sprintf(`{"uri":%q}`, tt.uri)))
			switch {
			case tt.invalid != "":
				assertCode(t, err, jsonrpc.CodeInvalidParams, tt.invalid)
			case tt.forward == "":
				assertCode(t, err, CodeForbidden, "is not allowed")
			case err != nil:
				t.Fatalf("read: %v", err)
			}
			var want []string
			if tt.forward != "" {
				want = []string{"files resources/read " + tt.forward}
			}
			if got := u.recorded(); !slices.Equal(got, want) {
				t.Errorf("the server got %q, want %q", got, want)
			}
		})
	}
	// The same refusal for a subscription and a completion ref.
	for _, req := range []*Request{
		as(bob, "resources/subscribe", `{"uri":"file:///public/..%2Fsecret%2Fkey"}`),
		as(bob, "completion/complete", `{"ref":{"type":"ref/resource","uri":"file:///public/..%2Fsecret%2F{x}"},"argument":{"name":"x","value":""}}`),
	} {
		u.reset()
		req.Session, req.SessionNotify = "sess", func(string, json.RawMessage) {}
		_, err := s.Handle(context.Background(), req)
		assertCode(t, err, jsonrpc.CodeInvalidParams, `encoded "/"`)
		if got := u.recorded(); len(got) != 0 {
			t.Errorf("%s: a refused request reached the server: %q", req.Method, got)
		}
	}
}

// An allow rule written for one server's namespaced URIs covers none of
// another server's own URIs that merely look like them, in any case; a
// deny rule covers them too.
func TestACL_NamespacedLookalike(t *testing.T) {
	var u uriServer
	servers := func() *upstreamtest.Manager {
		return upstreamtest.NewManager(
			u.server("files", []string{"mcp+notes+memo://secret", "MCP+Notes+memo://other", "MCP+Notes+memo://dir/", "file:///a"}, []string{"Mcp+notes+memo://{id}"}),
			u.server("notes", []string{"memo://public"}, nil),
		)
	}
	denied := newCore(t, servers(), Options{
		Servers: []config.Server{{Name: "files"}, {Name: "notes"}},
		ACL: config.ACL{Rules: []config.ACLRule{
			{Effect: config.ACLAllow, Servers: []string{"*"}},
			{Effect: config.ACLDeny, Principals: []string{"bob"}, Resources: []string{"mcp+notes+memo://secret", "mcp+notes+memo://other", "mcp+notes+memo://dir/*", "mcp+notes+memo://{id}"}},
		}},
	})
	if names, _ := listAll(t, denied, bob, "resources/list"); !slices.Equal(names, []string{"file:///a", "mcp+notes+memo://public"}) {
		t.Errorf("bob's resources/list under the deny rule = %q, want file:///a and mcp+notes+memo://public", names)
	}
	s := newCore(t, servers(), Options{
		Servers: []config.Server{{Name: "files"}, {Name: "notes"}}, // files bare, notes namespaced
		ACL: config.ACL{Rules: []config.ACLRule{
			{Effect: config.ACLAllow, Principals: []string{"bob"}, Resources: []string{"mcp+notes+*"}},
		}},
	})
	names, _ := listAll(t, s, bob, "resources/list")
	if want := []string{"mcp+notes+memo://public"}; !slices.Equal(names, want) {
		t.Errorf("bob's resources/list = %q, want %q", names, want)
	}
	names, _ = listAll(t, s, bob, "resources/templates/list")
	if len(names) != 0 {
		t.Errorf("bob's resources/templates/list = %q, want none", names)
	}
	for _, uri := range []string{"mcp+files+mcp+notes+memo://secret", "mcp+files+MCP+Notes+memo://other", "mcp+files+MCP+Notes+memo://dir/", "mcp+files+Mcp+notes+memo://x"} {
		u.reset()
		_, err := s.Handle(context.Background(), as(bob, "resources/read", fmt.Sprintf(`{"uri":%q}`, uri)))
		assertCode(t, err, CodeForbidden, "is not allowed")
		if got := u.recorded(); len(got) != 0 {
			t.Errorf("reading %s reached the servers: %q", uri, got)
		}
	}
}
