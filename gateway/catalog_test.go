package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// echoServer is a fake server whose calls answer with the server's name,
// the method and the params it received.
func echoServer(name string) func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
	return func(_ context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
		b, _ := json.Marshal(map[string]any{"server": name, "method": method, "params": params})
		return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, b)), nil
	}
}

// listNames returns the exposed names of a tools/list or prompts/list.
func listNames(t *testing.T, s *Server, method string) []string {
	t.Helper()
	res, err := s.Handle(context.Background(), &Request{Method: method, Principal: Anonymous})
	if err != nil {
		t.Fatal(err)
	}
	field := strings.TrimSuffix(method, "/list")
	var body map[string][]map[string]any
	json.Unmarshal(res.Body, &body)
	var names []string
	for _, it := range body[field] {
		names = append(names, it["name"].(string))
	}
	return names
}

// callEcho calls a tool and returns which server got it under which name.
func callEcho(t *testing.T, s *Server, exposed string) (server, name string) {
	t.Helper()
	res, err := s.Handle(context.Background(), &Request{Method: "tools/call", Principal: Anonymous,
		Params: json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":{}}`, exposed))})
	if err != nil {
		t.Fatalf("calling %q: %v", exposed, err)
	}
	var r struct {
		Content []struct{ Text string }
	}
	json.Unmarshal(res.Body, &r)
	var got struct {
		Server string
		Params struct{ Name string }
	}
	json.Unmarshal([]byte(r.Content[0].Text), &got)
	return got.Server, got.Params.Name
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestCatalog_PrefixModes(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5) // 100 characters
	servers := func() *upstreamtest.Manager {
		return upstreamtest.NewManager(
			&upstreamtest.Server{Name: "alpha", Handle: echoServer("alpha"), Tools: raws(`{"name":"search","inputSchema":{"type":"object"}}`, `{"name":"files.read","inputSchema":{"type":"object"}}`, `{"name":"`+long+`","inputSchema":{"type":"object"}}`)},
			&upstreamtest.Server{Name: "beta", Handle: echoServer("beta"), Tools: raws(`{"name":"search","inputSchema":{"type":"object"}}`, `{"name":"only_beta","inputSchema":{"type":"object"}}`)},
		)
	}
	tests := []struct {
		mode    string
		want    map[string][2]string // exposed -> server, original (for the names that are predictable)
		missing []string
	}{
		{config.PrefixAlways, map[string][2]string{
			"mcp__alpha__search":     {"alpha", "search"},
			"mcp__beta__search":      {"beta", "search"},
			"mcp__alpha__files_read": {"alpha", "files.read"},
			"mcp__beta__only_beta":   {"beta", "only_beta"},
		}, nil},
		{config.PrefixOnCollision, map[string][2]string{
			"mcp__alpha__search": {"alpha", "search"},
			"mcp__beta__search":  {"beta", "search"},
			"files_read":         {"alpha", "files.read"},
			"only_beta":          {"beta", "only_beta"},
		}, []string{"search"}},
		{config.PrefixNever, map[string][2]string{
			"search":     {"alpha", "search"}, // alpha's was seen first (sorted by name at the first build)
			"files_read": {"alpha", "files.read"},
			"only_beta":  {"beta", "only_beta"},
		}, []string{"mcp__beta__search"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			s := newCore(t, servers(), Options{Naming: config.Naming{PrefixMode: tt.mode}})
			names := listNames(t, s, "tools/list")
			seen := map[string]bool{}
			for _, n := range names {
				if !validName.MatchString(n) || seen[n] {
					t.Errorf("exposed name %q is invalid or repeated", n)
				}
				seen[n] = true
				server, orig := callEcho(t, s, n) // every listed tool is callable
				if w, ok := tt.want[n]; ok && (w[0] != server || w[1] != orig) {
					t.Errorf("%q reached %s/%s, want %s/%s", n, server, orig, w[0], w[1])
				}
			}
			for n := range tt.want {
				if !seen[n] {
					t.Errorf("%q missing from %v", n, names)
				}
			}
			for _, n := range tt.missing {
				if seen[n] {
					t.Errorf("%q listed, want it absent", n)
				}
			}
			if tt.mode == config.PrefixNever {
				var beta upstream.Status
				for _, st := range s.Servers() {
					if st.Name == "beta" {
						beta = st
					}
				}
				if len(beta.Problems) == 0 || !strings.Contains(strings.Join(beta.Problems, " "), "search") {
					t.Errorf("beta's status does not report the left-out tool: %v", beta.Problems)
				}
			}
		})
	}
}

func TestCatalog_ToolOptions(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Handle: echoServer("s"), Tools: raws(
		`{"name":"read_file","description":"old","inputSchema":{"type":"object"}}`,
		`{"name":"read_dir","inputSchema":{"type":"object"}}`,
		`{"name":"delete_file","inputSchema":{"type":"object"}}`,
		`{"name":"write_file","inputSchema":{"type":"object"}}`,
	)})
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "s", Tools: config.ToolOptions{
		Allow:    []string{"read_*", "delete_*"},
		Deny:     []string{"*dir"},
		Rename:   map[string]string{"read_file": "cat"},
		Describe: map[string]string{"read_file": "Prints a file."},
	}}}})
	if diff := cmp.Diff([]string{"cat", "mcp__s__delete_file"}, listNames(t, s, "tools/list")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	res, _ := s.Handle(context.Background(), &Request{Method: "tools/list"})
	if !strings.Contains(string(res.Body), `{"name":"cat","description":"Prints a file.","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`) {
		t.Errorf("rename/describe not applied: %s", res.Body)
	}
	if server, orig := callEcho(t, s, "cat"); server != "s" || orig != "read_file" {
		t.Errorf("cat reached %s/%s", server, orig)
	}
	for _, hidden := range []string{"mcp__s__read_dir", "mcp__s__write_file", "mcp__s__read_file"} {
		_, err := s.Handle(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"` + hidden + `"}`)})
		assertCode(t, err, jsonrpc.CodeInvalidParams, "unknown tool")
	}
}

func TestCatalog_Pagination(t *testing.T) {
	var tools []string
	for i := range 7 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i))
	}
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(tools...)})
	s := newCore(t, m, Options{PageSize: 3, Secret: []byte(strings.Repeat("k", 32))})
	var all []string
	cursor := ""
	pages := 0
	for {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := s.Handle(context.Background(), &Request{Method: "tools/list", Principal: Anonymous, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		var page struct {
			Tools      []struct{ Name string }
			NextCursor string
		}
		json.Unmarshal(res.Body, &page)
		for _, tl := range page.Tools {
			all = append(all, tl.Name)
		}
		if page.NextCursor == "" {
			break
		}
		if strings.Contains(page.NextCursor, "t") && strings.Contains(page.NextCursor, "mcp__") {
			t.Errorf("cursor %q is not opaque", page.NextCursor)
		}
		if pages == 1 {
			// The same cursor is refused for another list and another principal.
			_, err := s.Handle(context.Background(), &Request{Method: "prompts/list", Principal: Anonymous, Params: json.RawMessage(`{"cursor":"` + page.NextCursor + `"}`)})
			assertCode(t, err, jsonrpc.CodeInvalidParams, "it belongs to tools/list")
			_, err = s.Handle(context.Background(), &Request{Method: "tools/list", Principal: "someone-else", Params: json.RawMessage(`{"cursor":"` + page.NextCursor + `"}`)})
			assertCode(t, err, jsonrpc.CodeInvalidParams, "not issued to you")
		}
		cursor = page.NextCursor
	}
	if pages != 3 || len(all) != 7 {
		t.Errorf("got %d pages with %v", pages, all)
	}
	for _, bad := range []string{`"forged"`, `42`} {
		_, err := s.Handle(context.Background(), &Request{Method: "tools/list", Principal: Anonymous, Params: json.RawMessage(`{"cursor":` + bad + `}`)})
		assertCode(t, err, jsonrpc.CodeInvalidParams, "call tools/list without a cursor")
	}
}

func TestCatalog_PromptsAndCompletion(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	record := func(name string) func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
		return func(_ context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			mu.Lock()
			got[name+" "+method] = string(params)
			mu.Unlock()
			if method == "prompts/get" {
				return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"file:///x","text":"hi"}}},{"role":"user","content":{"type":"text","text":"t"}}]}`), nil
			}
			return json.RawMessage(`{"completion":{"values":["a"]}}`), nil
		}
	}
	m := upstreamtest.NewManager(
		&upstreamtest.Server{Name: "a", Handle: record("a"), Prompts: raws(`{"name":"greet","arguments":[{"name":"who"}]}`),
			Resources: raws(`{"uri":"file:///x","name":"x"}`), Templates: raws(`{"uriTemplate":"file:///{path}","name":"files"}`)},
		&upstreamtest.Server{Name: "b", Handle: record("b"), Prompts: raws(`{"name":"greet"}`),
			Resources: raws(`{"uri":"file:///y","name":"y"}`), Templates: raws(`{"uriTemplate":"db://{table}","name":"tables"}`)},
	)
	s := newCore(t, m, Options{})
	if diff := cmp.Diff([]string{"mcp__a__greet", "mcp__b__greet"}, listNames(t, s, "prompts/list")); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	res, err := s.Handle(context.Background(), &Request{Method: "prompts/get", Params: json.RawMessage(`{"name":"mcp__b__greet","arguments":{"who":"x"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got["b prompts/get"] != `{"name":"greet","arguments":{"who":"x"}}` {
		t.Errorf("b got %s", got["b prompts/get"])
	}
	// file: is used by both servers, so auto namespaces it, in results too.
	if !strings.Contains(string(res.Body), `"uri":"mcp+b+file:///x"`) {
		t.Errorf("prompts/get result URIs not exposed: %s", res.Body)
	}

	tests := []struct {
		ref, server, want string
	}{
		{`{"type":"ref/prompt","name":"mcp__a__greet"}`, "a", `{"type":"ref/prompt","name":"greet"}`},
		{`{"type":"ref/resource","uri":"mcp+a+file:///{path}"}`, "a", `{"type":"ref/resource","uri":"file:///{path}"}`},
		{`{"type":"ref/resource","uri":"db://{table}"}`, "b", `{"type":"ref/resource","uri":"db://{table}"}`},
	}
	for _, tt := range tests {
		_, err := s.Handle(context.Background(), &Request{Method: "completion/complete", Params: json.RawMessage(`{"ref":` + tt.ref + `,"argument":{"name":"x","value":"y"}}`)})
		if err != nil {
			t.Fatalf("completion with %s: %v", tt.ref, err)
		}
		want := `{"ref":` + tt.want + `,"argument":{"name":"x","value":"y"}}`
		if got[tt.server+" completion/complete"] != want {
			t.Errorf("%s got %s, want %s", tt.server, got[tt.server+" completion/complete"], want)
		}
	}
	_, err = s.Handle(context.Background(), &Request{Method: "completion/complete", Params: json.RawMessage(`{"ref":{"type":"ref/prompt","name":"nope"},"argument":{}}`)})
	assertCode(t, err, jsonrpc.CodeInvalidParams, `unknown prompt "nope"`)
}

func TestCatalog_ResourceRouting(t *testing.T) {
	read := func(name string) func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
		return func(_ context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			uri, _ := rawjson.String(params, "uri")
			switch method {
			case "resources/read":
				return json.RawMessage(fmt.Sprintf(`{"contents":[{"uri":%q,"text":%q}]}`, uri, name)), nil
			case "tools/call":
				return json.RawMessage(`{"content":[{"type":"resource_link","uri":"note://hidden/1","name":"n"}]}`), nil
			}
			return json.RawMessage(`{}`), nil
		}
	}
	servers := func() *upstreamtest.Manager {
		return upstreamtest.NewManager(
			&upstreamtest.Server{Name: "a", Handle: read("a"), Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`),
				Resources: raws(`{"uri":"demo://same","name":"same"}`, `{"uri":"a-only://r","name":"r"}`),
				Templates: raws(`{"uriTemplate":"tmpl://a/{id}","name":"t"}`)},
			&upstreamtest.Server{Name: "b", Handle: read("b"),
				Resources: raws(`{"uri":"demo://same","name":"same"}`)},
		)
	}
	config2 := []config.Server{{Name: "a"}, {Name: "b"}}
	tests := []struct {
		name      string
		namespace string
		uri       string
		server    string // "" when an error is wanted
		errSubstr string
		exposed   string // the URI of the contents the client gets
	}{
		{"auto: the later server in the config is namespaced", config.NamespaceAuto, "mcp+b+demo://same", "b", "", "mcp+b+demo://same"},
		{"auto: the first server in the config keeps its URIs bare", config.NamespaceAuto, "demo://same", "a", "", "demo://same"},
		{"auto: the namespaced form of a bare server routes too", config.NamespaceAuto, "mcp+a+demo://same", "a", "", "demo://same"},
		{"auto: unshared scheme", config.NamespaceAuto, "a-only://r", "a", "", "a-only://r"},
		{"never: ambiguous", config.NamespaceNever, "demo://same", "", `servers "a", "b"`, ""},
		{"never: namespaced form still routes", config.NamespaceNever, "mcp+a+demo://same", "a", "", "demo://same"},
		{"template", config.NamespaceAuto, "tmpl://a/42", "a", "", "tmpl://a/42"},
		{"unknown", config.NamespaceAuto, "zzz://nope", "", `unknown resource "zzz://nope"`, ""},
		{"unknown server in namespaced form", config.NamespaceAuto, "mcp+zz+demo://same", "", `no server named "zz"`, ""},
		{"namespaced form, prefix and server in any case", config.NamespaceAuto, "MCP+B+demo://same", "b", "", "mcp+b+demo://same"},
		{"namespaced form of a bare server, any case", config.NamespaceAuto, "Mcp+a+DEMO://same", "a", "", "demo://same"},
		{"namespaced form with an encoded scheme letter", config.NamespaceAuto, "mcp+b+demo://%73ame", "b", "", "mcp+b+demo://same"},
		{"unknown server in namespaced form, any case", config.NamespaceAuto, "MCP+ZZ+demo://same", "", `no server named "zz"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newCore(t, servers(), Options{Servers: config2, Resources: config.Resources{Namespace: tt.namespace}})
			res, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: Anonymous, Params: json.RawMessage(`{"uri":"` + tt.uri + `"}`)})
			if tt.server == "" {
				jerr := assertCode(t, err, jsonrpc.CodeInvalidParams, tt.errSubstr)
				_ = jerr
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`{"contents":[{"uri":%q,"text":%q}]}`, tt.exposed, tt.server)
			if string(res.Body) != want {
				t.Errorf("read = %s, want %s", res.Body, want)
			}
		})
	}

	// A URI seen in this principal's result routes to its server, and
	// only for that principal.
	s := newCore(t, servers(), Options{Servers: config2})
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Principal: "p1", Params: json.RawMessage(`{"name":"mcp__a__t"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: "p1", Params: json.RawMessage(`{"uri":"note://hidden/1"}`)}); err != nil {
		t.Errorf("reading a URI from the principal's own result: %v", err)
	}
	_, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: "p2", Params: json.RawMessage(`{"uri":"note://hidden/1"}`)})
	assertCode(t, err, jsonrpc.CodeInvalidParams, "unknown resource")

	// The resources list shows the namespaced and the bare forms.
	res, _ := s.Handle(context.Background(), &Request{Method: "resources/list"})
	for _, want := range []string{`"uri":"demo://same"`, `"uri":"mcp+b+demo://same"`, `"uri":"a-only://r"`} {
		if !strings.Contains(string(res.Body), want) {
			t.Errorf("resources/list lacks %s: %s", want, res.Body)
		}
	}
}

func TestCatalog_Subscriptions(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a", Resources: raws(`{"uri":"doc://1","name":"d"}`),
		Handle: func(_ context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			mu.Lock()
			calls = append(calls, method+" "+string(params))
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		}})
	s := newCore(t, m, Options{Resources: config.Resources{Namespace: config.NamespaceAlways}})
	type note struct{ session, method, params string }
	var notes []note
	sink := func(session string) func(string, json.RawMessage) {
		return func(method string, params json.RawMessage) {
			mu.Lock()
			notes = append(notes, note{session, method, string(params)})
			mu.Unlock()
		}
	}
	sub := func(session, method string) {
		t.Helper()
		if _, err := s.Handle(context.Background(), &Request{Method: method, Session: session, SessionNotify: sink(session), Params: json.RawMessage(`{"uri":"mcp+a+doc://1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	sub("s1", "resources/subscribe")
	sub("s2", "resources/subscribe") // the upstream is subscribed once
	m.Notify("a", jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"doc://1"}`)))
	sub("s1", "resources/unsubscribe")
	m.Notify("a", jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"doc://1"}`)))
	s.EndSession("s2") // the last subscriber: unsubscribed upstream
	s.subs.bg.Wait()
	m.Notify("a", jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"doc://1"}`)))

	mu.Lock()
	defer mu.Unlock()
	wantCalls := []string{`resources/subscribe {"uri":"doc://1"}`, `resources/unsubscribe {"uri":"doc://1"}`}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
	upd := `{"uri":"mcp+a+doc://1"}`
	wantNotes := []note{
		{"s1", "notifications/resources/updated", upd}, {"s2", "notifications/resources/updated", upd},
		{"s2", "notifications/resources/updated", upd},
	}
	// The first update reaches both sessions in either order.
	if len(notes) == 3 && notes[0].session == "s2" {
		notes[0], notes[1] = notes[1], notes[0]
	}
	if diff := cmp.Diff(wantNotes, notes, cmp.AllowUnexported(note{})); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

func TestCatalog_ListChangedDebounced(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s"})
	s := newCore(t, m, Options{ListChangedDebounce: 50 * time.Millisecond})
	changes := make(chan Change, 100)
	s.Watch(func(c Change) { changes <- c })
	// A burst of changes (a crash loop, many list_changed) is one notice per list.
	for i := range 20 {
		m.Set(&upstreamtest.Server{Name: "s", Tools: raws(fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i)),
			Resources: raws(fmt.Sprintf(`{"uri":"x://%d","name":"r"}`, i))})
	}
	got := map[string]int{}
	got[(<-changes).List]++
	got[(<-changes).List]++
	select {
	case c := <-changes:
		got[c.List]++
	case <-time.After(200 * time.Millisecond):
	}
	if diff := cmp.Diff(map[string]int{"tools": 1, "resources": 1}, got); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

func TestCatalog_DuplicateTool(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(`{"name":"t","description":"first"}`, `{"name":"t","description":"second"}`)})
	s := newCore(t, m, Options{})
	res, _ := s.Handle(context.Background(), &Request{Method: "tools/list"})
	if want := `{"tools":[{"name":"mcp__s__t","description":"first","execution":{"taskSupport":"optional"}}]}`; string(res.Body) != want {
		t.Errorf("tools/list = %s, want %s", res.Body, want)
	}
	if st := s.Servers()[0]; len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "listed twice") {
		t.Errorf("problems = %v", st.Problems)
	}
}

// With per_session upstreams, each session subscribes on its own upstream
// session, and an update goes only to the session whose upstream sent it.
func TestCatalog_SubscriptionsPerUpstreamSession(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "a", Resources: raws(`{"uri":"doc://1","name":"d"}`),
		Handle: func(ctx context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			mu.Lock()
			calls = append(calls, method+" "+upstreamtest.CallerFrom(ctx).Session)
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		}})
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "a", SessionMode: config.SessionPerSession}}})
	recs := map[string]*recorder{"s1": {}, "s2": {}}
	for _, id := range []string{"s1", "s2"} {
		if _, err := s.Handle(context.Background(), &Request{Method: "resources/subscribe", Principal: "p", Session: id, SessionNotify: recs[id].sink, Params: json.RawMessage(`{"uri":"doc://1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	m.NotifyFrom("a", upstream.Caller{Principal: "p", Session: "s2"}, jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"doc://1"}`)))
	if len(recs["s1"].got()) != 0 || len(recs["s2"].got()) != 1 {
		t.Errorf("s1 got %v, s2 got %v; want only s2", recs["s1"].got(), recs["s2"].got())
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"resources/subscribe s1", "resources/subscribe s2"}, calls); diff != "" {
		t.Errorf("each session subscribes on its own upstream session (-want +got):\n%s", diff)
	}
}

// uriServer is a fake server that lists resources and templates, each
// named "<server> <its URI or template>", and records the URI of every
// resources/read and completion/complete it gets: a read answers with
// the URI asked and the server's name, a completion with "<server>
// <ref.uri>".
type uriServer struct {
	mu  sync.Mutex
	got []string // "server method uri"
}

func (u *uriServer) recorded() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

func (u *uriServer) reset() {
	u.mu.Lock()
	u.got = nil
	u.mu.Unlock()
}

func (u *uriServer) server(name string, resources, templates []string) *upstreamtest.Server {
	var res, tmpls []json.RawMessage
	for _, r := range resources {
		res = append(res, json.RawMessage(fmt.Sprintf(`{"uri":%q,"name":%q}`, r, name+" "+r)))
	}
	for _, t := range templates {
		tmpls = append(tmpls, json.RawMessage(fmt.Sprintf(`{"uriTemplate":%q,"name":%q}`, t, name+" "+t)))
	}
	return &upstreamtest.Server{Name: name, Resources: res, Templates: tmpls,
		Handle: func(_ context.Context, method string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			var uri string
			switch method {
			case "resources/read", "resources/subscribe", "resources/unsubscribe":
				uri, _ = rawjson.String(params, "uri")
			case "completion/complete":
				ref, _, _ := rawjson.Get(params, "ref")
				uri, _ = rawjson.String(ref, "uri")
			}
			u.mu.Lock()
			u.got = append(u.got, name+" "+method+" "+uri)
			u.mu.Unlock()
			switch method {
			case "resources/read":
				return json.RawMessage(fmt.Sprintf(`{"contents":[{"uri":%q,"text":%q}]}`, uri, name)), nil
			case "completion/complete":
				return json.RawMessage(fmt.Sprintf(`{"completion":{"values":[%q]}}`, name+" "+uri)), nil
			}
			return json.RawMessage(`{}`), nil
		}}
}

// listURIs returns the URIs of resources/list and the URI templates of
// resources/templates/list.
func listURIs(t *testing.T, s *Server) (resources, templates []string) {
	t.Helper()
	res, tmpls := listItems(t, s)
	for _, it := range res {
		resources = append(resources, it.listed)
	}
	for _, it := range tmpls {
		templates = append(templates, it.listed)
	}
	return resources, templates
}

// listedItem is an item of a uriServer as listed: its exposed URI or
// template, the server that listed it and that server's own URI.
type listedItem struct{ listed, server, own string }

// listItems returns the items of resources/list and
// resources/templates/list of uriServers.
func listItems(t *testing.T, s *Server) (resources, templates []listedItem) {
	t.Helper()
	for _, l := range []struct {
		method, field, key string
		dst                *[]listedItem
	}{
		{"resources/list", "resources", "uri", &resources},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", &templates},
	} {
		res, err := s.Handle(context.Background(), &Request{Method: l.method, Principal: Anonymous})
		if err != nil {
			t.Fatalf("%s: %v", l.method, err)
		}
		var body map[string][]map[string]any
		if err := json.Unmarshal(res.Body, &body); err != nil {
			t.Fatal(err)
		}
		for _, it := range body[l.field] {
			server, own, _ := strings.Cut(it["name"].(string), " ")
			*l.dst = append(*l.dst, listedItem{listed: it[l.key].(string), server: server, own: own})
		}
	}
	return resources, templates
}

// Auto namespacing follows the config's order of the servers, never the
// order they come up in: whichever starts first, the first configured
// server keeps its URIs as they are and the others are namespaced, from
// the first list on (no URI already listed changes when another server
// comes up). A server that is not in the config (the admin API
// registered it) comes after the configured ones.
func TestCatalog_AutoNamespaceConfigOrder(t *testing.T) {
	var u uriServer
	zed := func() *upstreamtest.Server {
		return u.server("zed", []string{"demo://resource/static/1"}, []string{"demo://resource/dynamic/text/{resourceId}"})
	}
	alpha := func() *upstreamtest.Server {
		return u.server("alpha", []string{"demo://resource/static/1", "own://x"}, []string{"demo://resource/dynamic/text/{resourceId}"})
	}
	late := func() *upstreamtest.Server { return u.server("late", []string{"late://y"}, nil) }
	// Config order: zed before alpha, the reverse of name order.
	cfg := Options{Servers: []config.Server{{Name: "zed"}, {Name: "alpha"}}}
	wantZed := []string{"demo://resource/static/1"}
	wantAlpha := []string{"mcp+alpha+demo://resource/static/1", "mcp+alpha+own://x"}
	wantResources := append(append([]string(nil), wantZed...), wantAlpha...)
	wantTemplates := []string{"demo://resource/dynamic/text/{resourceId}", "mcp+alpha+demo://resource/dynamic/text/{resourceId}"}
	sorted := func(ss []string) []string { s := append([]string(nil), ss...); sort.Strings(s); return s }

	tests := []struct {
		name  string
		first func() *upstreamtest.Server // up when the gateway starts
		then  func() *upstreamtest.Server // comes up later; nil: none
		// wantFirst is resources/list before the later server is up.
		wantFirst []string
	}{
		{name: "both up at start", first: nil},
		{name: "config's first server up first", first: zed, then: alpha, wantFirst: wantZed},
		{name: "config's later server up first", first: alpha, then: zed, wantFirst: wantAlpha},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *upstreamtest.Manager
			if tt.first == nil {
				m = upstreamtest.NewManager(zed(), alpha())
			} else {
				m = upstreamtest.NewManager(tt.first())
			}
			s := newCore(t, m, cfg)
			if tt.then != nil {
				got, _ := listURIs(t, s)
				if diff := cmp.Diff(sorted(tt.wantFirst), sorted(got)); diff != "" {
					t.Errorf("resources/list with one server up (-want +got):\n%s", diff)
				}
				m.Set(tt.then())
			}
			res, tmpls := listURIs(t, s)
			if diff := cmp.Diff(sorted(wantResources), sorted(res)); diff != "" {
				t.Errorf("resources/list (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sorted(wantTemplates), sorted(tmpls)); diff != "" {
				t.Errorf("resources/templates/list (-want +got):\n%s", diff)
			}
			// A server the config does not name (one the admin API
			// added) comes after those it names: it is namespaced, and
			// changes no other's form.
			m.Set(late())
			res, _ = listURIs(t, s)
			want := append(append([]string(nil), wantResources...), "mcp+late+late://y")
			if diff := cmp.Diff(sorted(want), sorted(res)); diff != "" {
				t.Errorf("resources/list after a server outside the config came (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBareServer(t *testing.T) {
	modes := map[string]string{"al": config.NamespaceAlways, "nv": config.NamespaceNever}
	settings := func(server string) serverSettings {
		if m, ok := modes[server]; ok {
			return serverSettings{namespace: m}
		}
		return serverSettings{namespace: config.NamespaceAuto}
	}
	tests := []struct {
		order []string
		want  string
	}{
		{nil, ""},
		{[]string{"z", "a"}, "z"},
		{[]string{"al", "z", "a"}, "z"},
		{[]string{"al"}, ""},
		{[]string{"nv", "z"}, "nv"}, // never is bare itself: no auto server is
		{[]string{"al", "nv", "z"}, "nv"},
	}
	for _, tt := range tests {
		if got := bareServer(tt.order, settings); got != tt.want {
			t.Errorf("bareServer(%q) = %q, want %q", tt.order, got, tt.want)
		}
	}
}

// A bare URI that a result showed a principal is read on the server
// whose result it was, even when another server lists the same URI
// namespaced.
func TestCatalog_SeenBeforeNamespacedListing(t *testing.T) {
	var u uriServer
	a := u.server("a", nil, nil)
	a.Tools = raws(`{"name":"t","inputSchema":{"type":"object"}}`)
	handle := a.Handle
	a.Handle = func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
		if method == "tools/call" {
			return json.RawMessage(`{"content":[{"type":"resource_link","uri":"note://1","name":"n"}]}`), nil
		}
		return handle(ctx, method, params, hooks)
	}
	m := upstreamtest.NewManager(a, u.server("b", []string{"note://1"}, nil))
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "a"}, {Name: "b"}}})
	read := func(principal string) []string {
		t.Helper()
		u.reset()
		if _, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: principal, Params: json.RawMessage(`{"uri":"note://1"}`)}); err != nil {
			t.Fatalf("reading note://1 as %s: %v", principal, err)
		}
		return u.recorded()
	}
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Principal: "p1", Params: json.RawMessage(`{"name":"mcp__a__t"}`)}); err != nil {
		t.Fatal(err)
	}
	if got, want := read("p1"), []string{"a resources/read note://1"}; !cmp.Equal(want, got) {
		t.Errorf("p1, shown note://1 by a, reached %q, want %q", got, want)
	}
	// Another principal was shown nothing: the only server that lists
	// it, namespaced, has it.
	if got, want := read("p2"), []string{"b resources/read note://1"}; !cmp.Equal(want, got) {
		t.Errorf("p2 reached %q, want %q", got, want)
	}
}

// Every resource and resource template the gateway lists can be read
// (a template: an expansion of it) and completed in exactly the form it
// is listed in, and reaches the server that listed it under the server's
// own URI, when two servers share a scheme and even a template. A listed
// URI that reads as namespaced (the prefix and server in any case) names
// the server that listed it.
func TestCatalog_ListedFormsWork(t *testing.T) {
	const tmpl = "demo://resource/dynamic/text/{resourceId}"
	tests := []struct {
		name    string
		servers []config.Server
		global  string
	}{
		{name: "auto", global: config.NamespaceAuto, servers: []config.Server{{Name: "b"}, {Name: "a"}}},
		{name: "always", global: config.NamespaceAlways, servers: []config.Server{{Name: "a"}, {Name: "b"}}},
		{name: "one never, one auto", global: config.NamespaceAuto, servers: []config.Server{
			{Name: "a", Resources: config.ServerResources{Namespace: config.NamespaceNever}}, {Name: "b"}}},
		{name: "servers outside the config", global: config.NamespaceAuto},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u uriServer
			m := upstreamtest.NewManager(
				// mcp+b+demo://x and MCP+B+demo://y are a's own URIs,
				// whatever they look like.
				u.server("a", []string{"demo://resource/static/1", "demo://resource/static/a", "mcp+b+demo://x", "MCP+B+demo://y"}, []string{tmpl, "a-only://{x}", "Mcp+b+demo://{x}"}),
				u.server("b", []string{"demo://resource/static/1"}, []string{tmpl}),
			)
			s := newCore(t, m, Options{Servers: tt.servers, Resources: config.Resources{Namespace: tt.global}})
			resources, templates := listItems(t, s)
			for _, it := range append(append([]listedItem(nil), resources...), templates...) {
				if l := strings.ToLower(it.listed); strings.HasPrefix(l, "mcp+") && !strings.HasPrefix(l, "mcp+"+it.server+"+") {
					t.Errorf("%s of server %s is listed as %s, which reads as another server's", it.own, it.server, it.listed)
				}
			}
			seen := map[string]int{}
			for _, it := range resources {
				uri := it.listed
				seen[uri]++
				u.reset()
				res, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: Anonymous, Params: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri))})
				if err != nil {
					t.Errorf("reading listed %s: %v", uri, err)
					continue
				}
				if want := []string{it.server + " resources/read " + it.own}; !cmp.Equal(want, u.recorded()) {
					t.Errorf("reading listed %s reached %q, want %q", uri, u.recorded(), want)
				}
				if want := fmt.Sprintf(`{"contents":[{"uri":%q,"text":%q}]}`, uri, it.server); string(res.Body) != want {
					t.Errorf("reading listed %s = %s, want %s", uri, res.Body, want)
				}
			}
			for _, it := range templates {
				lt := it.listed
				seen[lt]++
				u.reset()
				_, err := s.Handle(context.Background(), &Request{Method: "completion/complete", Principal: Anonymous,
					Params: json.RawMessage(fmt.Sprintf(`{"ref":{"type":"ref/resource","uri":%q},"argument":{"name":"resourceId","value":"1"}}`, lt))})
				if err != nil {
					t.Errorf("completing listed template %s: %v", lt, err)
				} else if want := []string{it.server + " completion/complete " + it.own}; !cmp.Equal(want, u.recorded()) {
					t.Errorf("completing listed template %s reached %q, want %q", lt, u.recorded(), want)
				}
				expand := strings.NewReplacer("{resourceId}", "7", "{x}", "7")
				uri := expand.Replace(lt)
				u.reset()
				if _, err := s.Handle(context.Background(), &Request{Method: "resources/read", Principal: Anonymous, Params: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri))}); err != nil {
					t.Errorf("reading %s of listed template %s: %v", uri, lt, err)
				} else if want := []string{it.server + " resources/read " + normalizeURI(expand.Replace(it.own))}; !cmp.Equal(want, u.recorded()) {
					t.Errorf("reading %s of listed template %s reached %q, want %q", uri, lt, u.recorded(), want)
				}
			}
			for uri, n := range seen {
				if n > 1 {
					t.Errorf("%s is listed %d times", uri, n)
				}
			}
			if len(resources) != 5 || len(templates) != 4 {
				t.Errorf("listed %q and %q, want 5 resources and 4 templates", resources, templates)
			}
		})
	}
}

// A reload that reorders, removes or adds servers (SetServerOrder after
// the upstreams changed) lists what a core started on the new config
// lists: which server keeps its URIs bare follows the new order.
func TestCatalog_ServerOrderAfterReload(t *testing.T) {
	var u uriServer
	server := func(name string) *upstreamtest.Server {
		return u.server(name, []string{"demo://same", name + "://own"}, []string{"demo://t/{id}"})
	}
	configOf := func(order []string) []config.Server {
		var out []config.Server
		for _, name := range order {
			out = append(out, config.Server{Name: name})
		}
		return out
	}
	m := upstreamtest.NewManager(server("a"), server("b"))
	s := newCore(t, m, Options{Servers: configOf([]string{"a", "b"})})
	running := map[string]bool{"a": true, "b": true}
	for _, order := range [][]string{{"b", "a"}, {"a"}, {"c", "a"}, {"a", "c", "b"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			// What a reload does: the upstreams change, then the order.
			want := map[string]bool{}
			for _, name := range order {
				want[name] = true
				if !running[name] {
					m.Set(server(name))
				}
			}
			for name := range running {
				if !want[name] {
					m.Remove(name)
				}
			}
			running = want
			s.SetServerOrder(order)

			var ups []*upstreamtest.Server
			for _, name := range order {
				ups = append(ups, server(name))
			}
			fresh := newCore(t, upstreamtest.NewManager(ups...), Options{Servers: configOf(order)})
			wantRes, wantTmpls := listURIs(t, fresh)
			gotRes, gotTmpls := listURIs(t, s)
			if diff := cmp.Diff(wantRes, gotRes); diff != "" {
				t.Errorf("resources/list after the reload (-fresh start +reloaded):\n%s", diff)
			}
			if diff := cmp.Diff(wantTmpls, gotTmpls); diff != "" {
				t.Errorf("resources/templates/list after the reload (-fresh start +reloaded):\n%s", diff)
			}
			// The first of the order keeps its URIs bare.
			if bare := "demo://same"; !slices.Contains(gotRes, bare) || !slices.Contains(gotRes, order[0]+"://own") {
				t.Errorf("resources/list = %q, want %s's URIs bare", gotRes, order[0])
			}
		})
	}
}

// TestCatalog_NonObjectOutputSchemas: the catalog notices a tool whose
// outputSchema the session era cannot carry, and notices when it is gone.
func TestCatalog_NonObjectOutputSchemas(t *testing.T) {
	tests := []struct {
		name  string
		tools []string
		want  bool
	}{
		{"none", []string{`{"name":"a","inputSchema":{"type":"object"}}`}, false},
		{"object", []string{`{"name":"a","outputSchema":{"type":"object","properties":{}}}`}, false},
		{"array", []string{`{"name":"a"}`, `{"name":"b","outputSchema":{"type":"array"}}`}, true},
		{"no type", []string{`{"name":"a","outputSchema":{}}`}, true},
		{"boolean schema", []string{`{"name":"a","outputSchema":true}`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(tt.tools...)})
			s := newCore(t, m, Options{})
			if got := s.NonObjectOutputSchemas(); got != tt.want {
				t.Errorf("NonObjectOutputSchemas = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCatalog_ModernToolsWithoutTaskSupport: 2026-07-28 removed
// execution.taskSupport, so its clients get tools without it; session-era
// clients keep it.
func TestCatalog_ModernToolsWithoutTaskSupport(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(
		`{"name":"a","inputSchema":{"type":"object"}}`,
		`{"name":"b","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional","other":1}}`,
	)})
	s := newCore(t, m, Options{})
	list := func(version string) string {
		res, err := s.Handle(context.Background(), &Request{Method: "tools/list", Principal: Anonymous, Client: Client{ProtocolVersion: version}})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Body)
	}
	legacy, modern := list("2025-11-25"), list("2026-07-28")
	if !strings.Contains(legacy, `"taskSupport"`) {
		t.Errorf("2025-11-25 tools/list lost taskSupport: %s", legacy)
	}
	if strings.Contains(modern, `"taskSupport"`) {
		t.Errorf("2026-07-28 tools/list has taskSupport: %s", modern)
	}
	if !strings.Contains(modern, `"execution":{"other":1}`) {
		t.Errorf("2026-07-28 tools/list lost the rest of execution: %s", modern)
	}
	if again := list("2026-07-28"); again != modern {
		t.Errorf("a second modern list differs:\n%s\n%s", again, modern)
	}
}
