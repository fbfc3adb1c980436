package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The catalog tests run the gateway in front of several catalog servers
// (e2e/fixtures/catalogserver) and check, through the Go SDK client, the
// merged lists: names under each prefix mode, tool filters,
// prompts, resources and templates with namespacing, list changes, paging.
// Every fixture answer is "<server>:<name>", so each test can tell which
// server and which of its items a gateway name reached.

// catalogUpstream is one catalog server behind a test gateway.
type catalogUpstream struct {
	name  string
	http  bool     // streamable HTTP; stdio otherwise
	flags []string // catalogserver flags other than -name and -http
	extra string   // YAML added to the server's entry, each line indented by four spaces
}

// startCatalogHTTP runs a catalog server over streamable HTTP and returns
// its MCP endpoint URL.
func startCatalogHTTP(t testing.TB, args ...string) string {
	t.Helper()
	p := start(t, baseEnv(), "catalogserver", append([]string{"-http", "127.0.0.1:0"}, args...)...)
	return p.waitLine(t, "the catalog server's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
}

// startCatalog starts the upstreams and a gateway with global (YAML of
// gateway settings) in front of them, and waits until every server runs.
func startCatalog(t testing.TB, global string, ups ...catalogUpstream) *gateway {
	t.Helper()
	var b strings.Builder
	b.WriteString(global)
	b.WriteString("servers:\n")
	for _, u := range ups {
		args := append([]string{"-name", u.name}, u.flags...)
		if u.http {
			fmt.Fprintf(&b, "  - name: %s\n    transport: http\n    url: %s\n", u.name, startCatalogHTTP(t, args...))
		} else {
			quoted, _ := json.Marshal(args) // a JSON array is a YAML flow sequence
			fmt.Fprintf(&b, "  - name: %s\n    transport: stdio\n    command: %s\n    args: %s\n", u.name, bin("catalogserver"), quoted)
		}
		b.WriteString(u.extra)
	}
	g := startGateway(t, baseEnv(), b.String())
	for _, u := range ups {
		g.waitState(t, u.name, "running")
	}
	return g
}

// problems returns the problems GET /admin/servers/{name} reports.
func (g *gateway) problems(t testing.TB, name string) []string {
	t.Helper()
	var st struct {
		Problems []string `json:"problems"`
	}
	g.adminGet(t, "/admin/servers/"+name, &st)
	return st.Problems
}

// allTools lists every tool, following nextCursor.
func allTools(t testing.TB, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	var out []*mcp.Tool
	for tool, err := range cs.Tools(ctxT(t), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		out = append(out, tool)
	}
	return out
}

// ref is an item of one server, as the server names it.
type ref struct{ server, name string }

func (r ref) String() string { return r.server + ":" + r.name }

// parseAnswer reads a fixture answer "<server>:<name>".
func parseAnswer(s string) (ref, bool) {
	server, name, ok := strings.Cut(s, ":")
	return ref{server, name}, ok && server != "" && name != ""
}

// callAll calls every tool and returns which server's tool each name
// reached; it fails the test for a call that does not answer like a
// fixture tool.
func callAll(t testing.TB, cs *mcp.ClientSession, tools []*mcp.Tool) map[string]ref {
	t.Helper()
	out := map[string]ref{}
	for _, tool := range tools {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool.Name})
		if err != nil {
			t.Errorf("calling %s: %v", tool.Name, err)
			continue
		}
		r, ok := parseAnswer(text(res))
		if !ok || res.IsError {
			t.Errorf("calling %s: answer %q (isError %v), want <server>:<tool>", tool.Name, text(res), res.IsError)
			continue
		}
		out[tool.Name] = r
	}
	return out
}

var (
	// validExposed is what every exposed tool and prompt name must be
	// ([A-Za-z0-9_-], at most naming.max_length, 64 by default).
	validExposed = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// hashSuffix follows "_" at the end of a cut or clashing name: 8 hex
	// digits, and -2, -3, … if that is still taken.
	hashSuffix = regexp.MustCompile(`^[0-9a-f]{8}(-[0-9]+)?$`)
)

// sanitize replaces what an exposed name may not hold with "_", as the
// gateway does for ASCII names.
func sanitize(s string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(s, "_")
}

// hasForm reports whether exposed is full as the gateway may expose it:
// full itself when it fits in 64 characters, or full cut to 55 followed by
// "_" and a hash suffix (a long name, or a name two entries share).
func hasForm(exposed, full string) bool {
	if exposed == full && len(full) <= 64 {
		return true
	}
	rest, ok := strings.CutPrefix(exposed, full[:min(len(full), 64-9)]+"_")
	return ok && hashSuffix.MatchString(rest)
}

// TestCatalog_ToolNaming runs three servers (stdio and HTTP) whose tools
// collide across servers, hold dots, sanitize to the same name and run
// past 80 characters, under each prefix mode. Every listed name must be
// valid and unique and reach, when called, the tool its form says; no tool
// may vanish except in never mode, where the left-out ones must be in the
// admin status problems.
func TestCatalog_ToolNaming(t *testing.T) {
	// Two long names that share their first 55 characters: cutting alone
	// would make them equal.
	long1 := "analyze_" + strings.Repeat("very_long_", 8) + "name_one"
	long2 := "analyze_" + strings.Repeat("very_long_", 8) + "name_two"
	if len(long1) <= 80 {
		t.Fatalf("long1 is %d characters", len(long1))
	}
	servers := map[string][]string{
		"alpha": {"search", "files.read", long1, "alpha.only"},
		"beta":  {"search", "files.read", "files_read", long1, long2, "beta_only"},
		"gamma": {"search", "files_read", long2, "gamma-only"},
	}
	var all []ref
	for server, tools := range servers {
		for _, tool := range tools {
			all = append(all, ref{server, tool})
		}
	}
	ups := func() []catalogUpstream {
		var out []catalogUpstream
		for _, name := range []string{"alpha", "beta", "gamma"} {
			out = append(out, catalogUpstream{name: name, http: name == "beta", flags: []string{"-tools", strings.Join(servers[name], ",")}})
		}
		return out
	}

	// fullName is the name an entry gets in mode before any cut or hash.
	fullName := func(mode string, r ref) string {
		prefixed := "mcp__" + r.server + "__" + sanitize(r.name)
		switch mode {
		case "always":
			return prefixed
		case "on_collision":
			for _, o := range all {
				if o.server != r.server && sanitize(o.name) == sanitize(r.name) {
					return prefixed
				}
			}
		}
		return sanitize(r.name)
	}

	for _, mode := range []string{"always", "on_collision", "never"} {
		t.Run(mode, func(t *testing.T) {
			g := startCatalog(t, fmt.Sprintf("naming:\n  prefix_mode: %s\n", mode), ups()...)
			cs := connect(t, g.URL+"/mcp", "")
			tools := allTools(t, cs)
			for _, tool := range tools {
				if !validExposed.MatchString(tool.Name) {
					t.Errorf("listed name %q (%d characters) is not [A-Za-z0-9_-]{1,64}", tool.Name, len(tool.Name))
				}
			}
			reached := callAll(t, cs, tools)
			if len(reached) != len(tools) {
				t.Fatalf("%d tools listed, %d callable", len(tools), len(reached))
			}
			byRef := map[ref]string{}
			for name, r := range reached {
				if prev, dup := byRef[r]; dup {
					t.Errorf("%s and %s both reach %s", prev, name, r)
				}
				byRef[r] = name
			}

			// groups are the entries that want the same full name.
			groups := map[string][]ref{}
			for _, r := range all {
				full := fullName(mode, r)
				groups[full] = append(groups[full], r)
			}
			for full, members := range groups {
				var exposed []ref
				for _, r := range members {
					name, ok := byRef[r]
					if !ok {
						continue
					}
					exposed = append(exposed, r)
					switch {
					case len(members) == 1 && len(full) <= 64:
						if name != full {
							t.Errorf("%s is listed as %q, want %q", r, name, full)
						}
					case len(members) == 1:
						if !hasForm(name, full) || len(name) != 64 {
							t.Errorf("%s is listed as %q, want %q cut to 64 characters with a hash suffix", r, name, full)
						}
					default:
						if !hasForm(name, full) {
							t.Errorf("%s is listed as %q, want %q or it with a hash suffix", r, name, full)
						}
					}
				}
				if mode == "never" && len(members) > 1 {
					// Of the entries that clash, one keeps the name and the
					// others are left out, each reported.
					if len(exposed) != 1 {
						t.Errorf("name %q: %v are listed, want exactly one of %v", full, exposed, members)
					}
					for _, r := range members {
						if slices.Contains(exposed, r) {
							continue
						}
						ps := strings.Join(g.problems(t, r.server), "\n")
						if !strings.Contains(ps, fmt.Sprintf("%q", r.name)) || !strings.Contains(ps, "left out") {
							t.Errorf("%s is left out but server %s's problems do not say so: %q", r, r.server, ps)
						}
					}
					continue
				}
				if len(exposed) != len(members) {
					t.Errorf("name %q: only %v of %v are listed", full, exposed, members)
				}
			}
			if t.Failed() {
				names := make([]string, 0, len(tools))
				for _, tool := range tools {
					names = append(names, tool.Name)
				}
				sort.Strings(names)
				t.Logf("listed: %q", names)
			}
		})
	}
}

// TestCatalog_PromptsAndResources runs two servers with prompts,
// resources (one URI on both) and templates, under each
// resources.namespace. Every prompt is got and every resource and
// template read through the names and URIs the lists show, and each
// reaches its own server; with never, the URI both servers list is an
// ambiguous read (-32602 naming both).
func TestCatalog_PromptsAndResources(t *testing.T) {
	const shared = "file:///shared.txt"
	type spec struct {
		prompts, resources []string
		template           string
	}
	servers := map[string]spec{
		"alpha": {[]string{"greet", "alpha.summary"}, []string{shared, "file:///alpha.txt", "alpha://status"}, "notes://alpha/{id}"},
		"beta":  {[]string{"greet", "beta_help"}, []string{shared, "file:///beta.txt"}, "notes://beta/{id}"},
	}
	ups := []catalogUpstream{}
	for _, name := range []string{"alpha", "beta"} {
		s := servers[name]
		ups = append(ups, catalogUpstream{name: name, http: name == "beta", flags: []string{
			"-prompts", strings.Join(s.prompts, ","),
			"-resources", strings.Join(s.resources, ","),
			"-templates", s.template,
		}})
	}
	var wantPrompts, wantResources, wantTemplates []string
	for server, s := range servers {
		for _, p := range s.prompts {
			wantPrompts = append(wantPrompts, server+":"+p)
		}
		for _, u := range s.resources {
			wantResources = append(wantResources, server+":"+u)
		}
		wantTemplates = append(wantTemplates, server+":"+strings.ReplaceAll(s.template, "{id}", "42"))
	}
	sort.Strings(wantPrompts)
	sort.Strings(wantResources)
	sort.Strings(wantTemplates)

	for _, mode := range []string{"auto", "always", "never"} {
		t.Run(mode, func(t *testing.T) {
			g := startCatalog(t, fmt.Sprintf("resources:\n  namespace: %s\n", mode), ups...)
			cs := connect(t, g.URL+"/mcp", "")

			var gotPrompts []string
			for p, err := range cs.Prompts(ctxT(t), nil) {
				if err != nil {
					t.Fatalf("listing prompts: %v", err)
				}
				if !validExposed.MatchString(p.Name) {
					t.Errorf("prompt name %q is not [A-Za-z0-9_-]{1,64}", p.Name)
				}
				res, err := cs.GetPrompt(ctxT(t), &mcp.GetPromptParams{Name: p.Name})
				if err != nil {
					t.Errorf("getting prompt %s: %v", p.Name, err)
					continue
				}
				var answer string
				if len(res.Messages) == 1 {
					if tc, ok := res.Messages[0].Content.(*mcp.TextContent); ok {
						answer = tc.Text
					}
				}
				r, ok := parseAnswer(answer)
				if !ok {
					t.Errorf("prompt %s answered %q", p.Name, answer)
					continue
				}
				// Prompts are named like tools: always, by default.
				if want := "mcp__" + r.server + "__" + sanitize(r.name); p.Name != want {
					t.Errorf("prompt %s is listed as %q, want %q", r, p.Name, want)
				}
				gotPrompts = append(gotPrompts, answer)
			}
			sort.Strings(gotPrompts)
			if diff := cmp.Diff(wantPrompts, gotPrompts); diff != "" {
				t.Errorf("prompts reached (-want +got):\n%s", diff)
			}

			// read reads uri and returns the answering server and URI; the
			// contents must carry the URI read.
			read := func(uri string) (ref, error) {
				res, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					return ref{}, err
				}
				if len(res.Contents) != 1 {
					t.Errorf("reading %s: %d contents", uri, len(res.Contents))
					return ref{}, nil
				}
				c := res.Contents[0]
				if c.URI != uri {
					t.Errorf("reading %s: contents uri %q, want the URI read", uri, c.URI)
				}
				r, ok := parseAnswer(c.Text)
				if !ok {
					t.Errorf("reading %s: text %q", uri, c.Text)
				}
				return r, nil
			}
			// bare records, per server and scheme, whether its URIs are
			// exposed as they are (true) or namespaced (false).
			bare := map[ref][]bool{}
			checkForm := func(exposed string, r ref) {
				scheme, _, _ := strings.Cut(r.name, ":")
				ns := "mcp+" + r.server + "+" + r.name
				switch {
				case exposed == r.name:
					bare[ref{r.server, scheme}] = append(bare[ref{r.server, scheme}], true)
				case exposed == ns:
					bare[ref{r.server, scheme}] = append(bare[ref{r.server, scheme}], false)
				default:
					t.Errorf("%s is listed as %q, want it bare or as %q", r, exposed, ns)
				}
				if mode == "always" && exposed != ns {
					t.Errorf("%s is listed as %q, want %q (namespace always)", r, exposed, ns)
				}
				if mode == "never" && exposed != r.name {
					t.Errorf("%s is listed as %q, want it bare (namespace never)", r, exposed)
				}
			}

			var listed []string
			for res, err := range cs.Resources(ctxT(t), nil) {
				if err != nil {
					t.Fatalf("listing resources: %v", err)
				}
				listed = append(listed, res.URI)
			}
			var gotResources []string
			for _, uri := range listed {
				if mode == "never" && uri == shared {
					continue // ambiguous, below
				}
				r, err := read(uri)
				if err != nil {
					t.Errorf("reading %s: %v", uri, err)
					continue
				}
				checkForm(uri, r)
				gotResources = append(gotResources, r.String())
			}
			want := wantResources
			if mode == "never" {
				want = slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.HasSuffix(s, ":"+shared) })
				if n := strings.Count(strings.Join(listed, " "), shared); n == 0 {
					t.Errorf("resources/list does not show %s: %q", shared, listed)
				}
			}
			sort.Strings(gotResources)
			if diff := cmp.Diff(want, gotResources); diff != "" {
				t.Errorf("resources reached (-want +got):\n%s\nlisted: %q", diff, listed)
			}

			var gotTemplates []string
			for tmpl, err := range cs.ResourceTemplates(ctxT(t), nil) {
				if err != nil {
					t.Fatalf("listing resource templates: %v", err)
				}
				uri := strings.ReplaceAll(tmpl.URITemplate, "{id}", "42")
				r, err := read(uri)
				if err != nil {
					t.Errorf("reading %s (template %s): %v", uri, tmpl.URITemplate, err)
					continue
				}
				checkForm(uri, r)
				gotTemplates = append(gotTemplates, r.String())
			}
			sort.Strings(gotTemplates)
			if diff := cmp.Diff(wantTemplates, gotTemplates); diff != "" {
				t.Errorf("templated reads reached (-want +got):\n%s", diff)
			}

			// A server's URIs of one scheme are all bare or all
			// namespaced. With auto, of the servers sharing a scheme
			// exactly one keeps it bare.
			schemes := map[string][]bool{}
			for k, forms := range bare {
				if slices.Contains(forms, true) && slices.Contains(forms, false) {
					t.Errorf("server %s exposes some %s: URIs bare and some namespaced", k.server, k.name)
				}
				schemes[k.name] = append(schemes[k.name], forms[0])
			}
			if mode == "auto" {
				for scheme, forms := range schemes {
					if n := len(slices.DeleteFunc(slices.Clone(forms), func(b bool) bool { return !b })); n != 1 {
						t.Errorf("scheme %s: %d of %d servers keep their URIs bare, want 1 (namespace auto)", scheme, n, len(forms))
					}
				}
			}

			if mode == "never" {
				_, err := read(shared)
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != -32602 {
					t.Fatalf("reading %s, which both servers list: err = %v, want -32602", shared, err)
				}
				for _, server := range []string{"alpha", "beta"} {
					if !strings.Contains(werr.Message, server) {
						t.Errorf("the ambiguity error %q does not name %s", werr.Message, server)
					}
				}
			}
		})
	}
}

// TestCatalog_ToolListChanged has a stdio and an HTTP server each add a
// tool at run time (add_tool, called through the gateway): the client must
// get notifications/tools/list_changed on its standalone stream, and then
// list and call the new tool.
func TestCatalog_ToolListChanged(t *testing.T) {
	g := startCatalog(t, "list_changed_debounce: 100ms\n",
		catalogUpstream{name: "dyn-stdio", flags: []string{"-tools", "base", "-add-tool"}},
		catalogUpstream{name: "dyn-http", http: true, flags: []string{"-tools", "base", "-add-tool"}},
	)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || !caps.Tools.ListChanged {
		t.Errorf("the gateway's tools capability %+v does not announce listChanged", caps.Tools)
	}

	// quiet waits until no notification came for a second, well over the
	// debounce, so that the next one is the answer to what the test does
	// (the servers' start may still be announced to a new session).
	quiet := func() {
		for {
			select {
			case <-changed:
			case <-time.After(time.Second):
				return
			}
		}
	}

	for _, server := range []string{"dyn-stdio", "dyn-http"} {
		exposed := "mcp__" + server + "__fresh_tool"
		if toolsByName(t, cs)[exposed] != nil {
			t.Fatalf("%s is listed before it is added", exposed)
		}
		quiet()
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + server + "__add_tool", Arguments: map[string]any{"name": "fresh.tool"}})
		if err != nil || res.IsError {
			t.Fatalf("add_tool on %s: %v, %v", server, text(res), err)
		}
		// Wait for a list_changed after which the list has the tool.
		deadline := time.After(30 * time.Second)
		for found := false; !found; {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("no notifications/tools/list_changed showing %s within 30s; listed: %v", exposed, keys(toolsByName(t, cs)))
			}
			found = toolsByName(t, cs)[exposed] != nil
		}
		res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: exposed})
		if err != nil || text(res) != server+":fresh.tool" {
			t.Errorf("calling %s: %v, %v", exposed, text(res), err)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCatalog_Paging runs servers that page their own tools/list (25 tools
// in pages of 10, 12 in pages of 5): the gateway reads every page, and
// lists them all in one page (page_size 0) or in pages of page_size that
// the SDK client follows.
func TestCatalog_Paging(t *testing.T) {
	toolNames := func(prefix string, n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%s%02d", prefix, i))
		}
		return strings.Join(names, ",")
	}
	ups := []catalogUpstream{
		{name: "many", flags: []string{"-tools", toolNames("t", 25), "-page-size", "10"}},
		{name: "more", http: true, flags: []string{"-tools", toolNames("u", 12), "-page-size", "5"}},
	}
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("mcp__many__t%02d", i))
	}
	for i := range 12 {
		want = append(want, fmt.Sprintf("mcp__more__u%02d", i))
	}

	for _, pageSize := range []int{0, 7} {
		t.Run(fmt.Sprintf("page_size=%d", pageSize), func(t *testing.T) {
			g := startCatalog(t, fmt.Sprintf("page_size: %d\n", pageSize), ups...)
			if st := g.status(t, "many"); st.ToolCount != 25 {
				t.Errorf("server many: tool_count %d, want 25", st.ToolCount)
			}
			cs := connect(t, g.URL+"/mcp", "")

			// Page by hand: each page is full but the last.
			var got []string
			var sizes []int
			params := &mcp.ListToolsParams{}
			for range 20 {
				res, err := cs.ListTools(ctxT(t), params)
				if err != nil {
					t.Fatalf("tools/list page %d: %v", len(sizes)+1, err)
				}
				sizes = append(sizes, len(res.Tools))
				for _, tool := range res.Tools {
					got = append(got, tool.Name)
				}
				if res.NextCursor == "" {
					break
				}
				params = &mcp.ListToolsParams{Cursor: res.NextCursor}
			}
			wantSizes := []int{len(want)}
			if pageSize > 0 {
				wantSizes = nil
				for n := len(want); n > 0; n -= pageSize {
					wantSizes = append(wantSizes, min(n, pageSize))
				}
			}
			if diff := cmp.Diff(wantSizes, sizes); diff != "" {
				t.Errorf("page sizes (-want +got):\n%s", diff)
			}
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tools over the pages (-want +got):\n%s", diff)
			}

			// The SDK's iterator follows nextCursor.
			got = got[:0]
			for _, tool := range allTools(t, cs) {
				got = append(got, tool.Name)
			}
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cs.Tools (-want +got):\n%s", diff)
			}
			for tool, answer := range map[string]string{"mcp__many__t24": "many:t24", "mcp__more__u11": "more:u11"} {
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool})
				if err != nil || text(res) != answer {
					t.Errorf("calling %s: %q, %v; want %q", tool, text(res), err, answer)
				}
			}

			_, err := cs.ListTools(ctxT(t), &mcp.ListToolsParams{Cursor: "not-a-cursor"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != -32602 {
				t.Errorf("tools/list with a made-up cursor: err = %v, want -32602", err)
			}
		})
	}
}

// TestCatalog_ToolFilters sets tools.allow, deny, rename and describe on
// one server and checks what the client lists and can call; a second
// server with the same tool names and no filters is untouched.
func TestCatalog_ToolFilters(t *testing.T) {
	g := startCatalog(t, "",
		catalogUpstream{name: "files", flags: []string{"-tools", "read_file,read_dir,write_file,delete_file,list_dir,search.files"}, extra: `    tools:
      allow: ["read_*", "list_*", "search.files", "write_file", "delete_*"]
      deny: ["*delete*", "read_dir"]
      rename:
        search.files: find_files
        list_dir: ls
      describe:
        read_file: "Reads one file."
`},
		catalogUpstream{name: "other", http: true, flags: []string{"-tools", "read_file,delete_file"}},
	)
	cs := connect(t, g.URL+"/mcp", "")
	tools := toolsByName(t, cs)
	want := map[string]string{ // exposed name → the answer of its tool
		"mcp__files__read_file":   "files:read_file",
		"mcp__files__write_file":  "files:write_file",
		"find_files":              "files:search.files",
		"ls":                      "files:list_dir",
		"mcp__other__read_file":   "other:read_file",
		"mcp__other__delete_file": "other:delete_file",
	}
	if diff := cmp.Diff(keys(want), keys(tools)); diff != "" {
		t.Errorf("listed tools (-want +got):\n%s", diff)
	}
	for name, answer := range want {
		if tools[name] == nil {
			continue
		}
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name})
		if err != nil || text(res) != answer {
			t.Errorf("calling %s: %q, %v; want %q", name, text(res), err, answer)
		}
	}
	if d := tools["mcp__files__read_file"]; d != nil && d.Description != "Reads one file." {
		t.Errorf("described tool: description %q, want the configured one", d.Description)
	}
	for _, name := range []string{"mcp__files__write_file", "find_files", "mcp__other__read_file"} {
		if d := tools[name]; d != nil && !strings.HasPrefix(d.Description, "Tool ") {
			t.Errorf("%s: description %q, want the server's own", name, d.Description)
		}
	}
	for _, name := range []string{"mcp__files__delete_file", "mcp__files__read_dir", "mcp__files__search_files", "mcp__files__list_dir"} {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -32602 {
			t.Errorf("calling hidden or renamed-away %s: err = %v, want -32602", name, err)
		}
	}
}
