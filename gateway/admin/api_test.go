package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/openapi"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// apiCase is one request to a fresh env (see newEnv) and what must come
// of it. After every case, the store and the manager must agree.
type apiCase struct {
	name   string
	opts   envOptions
	setup  func(t *testing.T, ev *env)
	method string
	path   string
	body   string
	// contentType replaces application/json; "-" sends none.
	contentType string
	status      int
	// message is part of the error's message; problems are the fields
	// its problems name, in order.
	message  string
	problems []string
	// calls are the manager's calls the request made.
	calls []string
	check func(t *testing.T, ev *env, rec *http.Response, body []byte)
}

func runCases(t *testing.T, cases []apiCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.opts)
			if tc.setup != nil {
				tc.setup(t, ev)
			}
			ev.m.recorded()
			req := newRequest(tc.method, tc.path, tc.body, token)
			switch tc.contentType {
			case "":
			case "-":
				req.Header.Del("Content-Type")
			default:
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := ev.send(t, req)
			if rec.Code != tc.status {
				t.Fatalf("%s %s = %d %s; want %d", tc.method, tc.path, rec.Code, rec.Body, tc.status)
			}
			if tc.message != "" || tc.problems != nil {
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
					t.Fatalf("the error %s: %v", rec.Body, err)
				}
				if !strings.Contains(e.Message, tc.message) {
					t.Errorf("message = %q; want it to contain %q", e.Message, tc.message)
				}
				var fields []string
				for _, p := range e.Problems {
					fields = append(fields, p.Field)
					if p.Message == "" {
						t.Errorf("problem %q has no message", p.Field)
					}
				}
				if diff := cmp.Diff(tc.problems, fields, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("the problems' fields (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.calls, ev.m.recorded(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the manager's calls (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, ev, rec.Result(), rec.Body.Bytes())
			}
			ev.agree(t)
		})
	}
}

// serverView is the part of a ServerStatus the tests look at.
type serverView struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Enabled   bool   `json:"enabled"`
	State     string `json:"state"`
	ToolCount int    `json:"tool_count"`
	Source    string `json:"source"`
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return v
}

// get GETs path, wants 200 and decodes the answer.
func get[T any](t *testing.T, ev *env, path string) T {
	t.Helper()
	status, body := ev.do(t, http.MethodGet, path, "", token)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, status, body)
	}
	return decode[T](t, body)
}

func servers(t *testing.T, ev *env) []serverView {
	t.Helper()
	return get[struct {
		Servers []serverView `json:"servers"`
	}](t, ev, "/admin/servers").Servers
}

// server returns the server's view in the list, and whether it is there.
func server(t *testing.T, ev *env, name string) (serverView, bool) {
	t.Helper()
	for _, s := range servers(t, ev) {
		if s.Name == name {
			return s, true
		}
	}
	return serverView{}, false
}

func tools(t *testing.T, ev *env, path string) []gateway.ToolInfo {
	t.Helper()
	return get[struct {
		Tools []gateway.ToolInfo `json:"tools"`
	}](t, ev, path).Tools
}

// toolDesc returns the description of the server's ping tool in the
// merged catalog: the definition it runs (see fakeServer).
func toolDesc(t *testing.T, ev *env, server string) (string, bool) {
	t.Helper()
	for _, ti := range tools(t, ev, "/admin/tools") {
		if ti.Server == server && ti.Original == "ping" {
			var tool struct {
				Description string `json:"description"`
			}
			json.Unmarshal(ti.Tool, &tool)
			return tool.Description, true
		}
	}
	return "", false
}

func record(t *testing.T, ev *env, name string) (store.Server, bool) {
	t.Helper()
	rec, err := ev.store.GetServer(context.Background(), name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Server{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec, true
}

// wantView checks the answer is the server's status, as the list has it.
func wantView(want serverView) func(t *testing.T, ev *env, _ *http.Response, body []byte) {
	return func(t *testing.T, ev *env, _ *http.Response, body []byte) {
		t.Helper()
		if diff := cmp.Diff(want, decode[serverView](t, body)); diff != "" {
			t.Errorf("the answer (-want +got):\n%s", diff)
		}
		got, _ := server(t, ev, want.Name)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the list's entry (-want +got):\n%s", diff)
		}
	}
}

// unchanged checks that weather runs and is stored as newEnv left it.
func unchanged(t *testing.T, ev *env, _ *http.Response, _ []byte) {
	t.Helper()
	if desc, _ := toolDesc(t, ev, "weather"); desc != "https://weather.example/mcp" {
		t.Errorf("weather runs %q, want its first definition", desc)
	}
	if rec, _ := record(t, ev, "weather"); string(rec.Entry) != weatherEntry || rec.Enabled != nil {
		t.Errorf("weather is stored as %s (enabled %v), want %s", rec.Entry, rec.Enabled, weatherEntry)
	}
	if _, ok := server(t, ev, "news"); ok {
		t.Error("news runs")
	}
	if _, ok := record(t, ev, "news"); ok {
		t.Error("news is stored")
	}
}

func TestListServers(t *testing.T) {
	runCases(t, []apiCase{{
		name: "every server with its source", method: "GET", path: "/admin/servers", status: 200,
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			got := decode[struct {
				Servers []serverView `json:"servers"`
			}](t, body).Servers
			want := []serverView{
				{Name: "files", Transport: "stdio", Enabled: true, State: "running", ToolCount: 2, Source: "config"},
				{Name: "git", Transport: "stdio", Enabled: false, State: "disabled", Source: "config"},
				{Name: "weather", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		},
	}})
}

func TestGetServer(t *testing.T) {
	runCases(t, []apiCase{{
		name: "registered", method: "GET", path: "/admin/servers/weather", status: 200,
		check: wantView(serverView{Name: "weather", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"}),
	}, {
		name: "of the config file", method: "GET", path: "/admin/servers/files", status: 200,
		check: wantView(serverView{Name: "files", Transport: "stdio", Enabled: true, State: "running", ToolCount: 2, Source: "config"}),
	}, {
		name: "unknown", method: "GET", path: "/admin/servers/nope", status: 404, message: `unknown server "nope"`,
	}, {
		// The era the manager found is shown, and the document allows it.
		name: "era", method: "GET", path: "/admin/servers/files", status: 200,
		setup: func(t *testing.T, ev *env) {
			ev.m.Manager.Set(&upstreamtest.Server{Name: "files", Transport: "stdio", Era: upstream.EraModern, ProtocolVersion: upstream.ModernProtocolVersion})
		},
		check: func(t *testing.T, _ *env, _ *http.Response, body []byte) {
			v := decode[struct {
				Era             string `json:"era"`
				ProtocolVersion string `json:"protocol_version"`
			}](t, body)
			if v.Era != "modern" || v.ProtocolVersion != "2026-07-28" {
				t.Errorf("era %q, protocol_version %q; want modern, 2026-07-28", v.Era, v.ProtocolVersion)
			}
			var doc struct {
				Components struct {
					Schemas struct {
						ServerStatus struct {
							Properties map[string]struct {
								Enum []string `json:"enum"`
							} `json:"properties"`
						} `json:"ServerStatus"`
					} `json:"schemas"`
				} `json:"components"`
			}
			if err := json.Unmarshal(openapi.Admin(), &doc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"modern", "legacy"}, doc.Components.Schemas.ServerStatus.Properties["era"].Enum); diff != "" {
				t.Errorf("the document's ServerStatus.era enum (-want +got):\n%s", diff)
			}
		},
	}})
}

const newsEntry = `{"name":"news","transport":"http","url":"https://news.example/mcp"}`

// entryCases are the bad entries POST and PUT both refuse, with the
// fields their problems name. A PUT case's path is the entry's name.
var entryCases = []struct {
	name     string
	body     string
	message  string
	problems []string
}{
	{"unknown key", `{"name":"news","transport":"http","url":"https://news.example/mcp","colour":"red"}`, "colour", []string{"colour"}},
	{"missing transport", `{"name":"news","url":"https://news.example/mcp"}`, "transport", []string{"transport"}},
	{"unknown transport", `{"name":"news","transport":"grpc","url":"https://news.example/mcp"}`, "transport", []string{"transport"}},
	{"missing url", `{"name":"news","transport":"http"}`, "url", []string{"url"}},
	{"bad url", `{"name":"news","transport":"sse","url":"ftp://news.example/mcp"}`, "url", []string{"url"}},
	// config reports the url's type, then that it is missing.
	{"url not a string", `{"name":"news","transport":"http","url":["https://news.example"]}`, "url", []string{"url", "url"}},
	{"command of an http server", `{"name":"news","transport":"http","url":"https://news.example/mcp","command":"sh"}`, "command", []string{"command"}},
	{"bad header name", `{"name":"news","transport":"http","url":"https://news.example/mcp","headers":{"X Key":"v"}}`, "headers", []string{`headers["X Key"]`}},
	{"unset variable with the prefix", `{"name":"news","transport":"http","url":"https://news.example/mcp","headers":{"X-Key":"${MCPGW_UPSTREAM_UNSET}"}}`, "MCPGW_UPSTREAM_UNSET", []string{"headers.X-Key"}},
	{"variable outside the prefix in a quoted header", `{"name":"news","transport":"http","url":"https://news.example/mcp","headers":{"X Home":"${HOME}","X-Key":"${MCPGW_UPSTREAM_UNSET}"}}`,
		"admin.env_prefix", []string{`headers["X Home"]`, "headers.X-Key"}},
	{"negative timeout", `{"name":"news","transport":"http","url":"https://news.example/mcp","timeout":"-1s"}`, "timeout", []string{"timeout"}},
	{"every problem", `{"name":"news","transport":"http","colour":"red","timeout":"-1s"}`, "colour", []string{"colour", "url", "timeout"}},
}

func TestRegisterServer(t *testing.T) {
	cases := []apiCase{{
		name: "new", method: "POST", path: "/admin/servers", body: newsEntry, status: 201,
		calls: []string{"Add news"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			if loc := res.Header.Get("Location"); loc != "/admin/servers/news" {
				t.Errorf("Location = %q", loc)
			}
			wantView(serverView{Name: "news", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"})(t, ev, res, body)
			var got []string
			for _, ti := range tools(t, ev, "/admin/tools") {
				got = append(got, ti.Server+" "+ti.Name+" "+ti.Original)
			}
			want := []string{
				"files mcp__files__ping ping", "files mcp__files__whoami whoami",
				"news mcp__news__ping ping", "news mcp__news__whoami whoami",
				"weather mcp__weather__ping ping", "weather mcp__weather__whoami whoami",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("/admin/tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ev.core.Tools("news"), tools(t, ev, "/admin/servers/news/tools")); diff != "" {
				t.Errorf("/admin/servers/news/tools (-core +api):\n%s", diff)
			}
			if rec, _ := record(t, ev, "news"); rec.Source != "api" || string(rec.Entry) != newsEntry || rec.Enabled != nil {
				t.Errorf("stored %+v", rec)
			}
		},
	}, {
		name: "stored compact", method: "POST", path: "/admin/servers", status: 201,
		body:  "{\n  \"name\": \"news\",\n  \"transport\": \"http\",\n  \"url\": \"https://news.example/mcp\"\n}\n",
		calls: []string{"Add news"},
		check: func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
			if rec, _ := record(t, ev, "news"); string(rec.Entry) != newsEntry {
				t.Errorf("stored %s, want %s", rec.Entry, newsEntry)
			}
		},
	}, {
		name: "sse, disabled", method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"sse","url":"https://news.example/sse","enabled":false}`,
		calls: []string{"Add news"},
		check: wantView(serverView{Name: "news", Transport: "sse", Enabled: false, State: "disabled", Source: "api"}),
	}, {
		name: "same name replaces", method: "POST", path: "/admin/servers", status: 200,
		body:  `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`,
		calls: []string{"Replace weather"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			if loc := res.Header.Get("Location"); loc != "" {
				t.Errorf("a replacement has Location %q", loc)
			}
			wantView(serverView{Name: "weather", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"})(t, ev, res, body)
			if desc, _ := toolDesc(t, ev, "weather"); desc != "https://weather2.example/mcp" {
				t.Errorf("weather runs %q", desc)
			}
		},
	}, {
		name: "a replacement keeps a PATCH's switch", method: "POST", path: "/admin/servers", status: 200,
		setup: func(t *testing.T, ev *env) {
			if status, body := ev.do(t, "PATCH", "/admin/servers/weather", `{"enabled":false}`, token); status != 200 {
				t.Fatalf("PATCH = %d %s", status, body)
			}
		},
		body:  `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`,
		calls: []string{"Replace weather"},
		check: wantView(serverView{Name: "weather", Transport: "http", Enabled: false, State: "disabled", Source: "api"}),
	}, {
		name: "variable with the prefix", method: "POST", path: "/admin/servers", status: 201,
		body:  `{"name":"news","transport":"http","url":"https://news.example/mcp","api_key":"${MCPGW_UPSTREAM_X}","headers":{"X-Empty":"${MCPGW_UPSTREAM_EM:-d}"}}`,
		calls: []string{"Add news"},
		check: func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
			sc, _ := ev.m.ServerConfig("news")
			if sc.APIKey != "x-upstream-secret" || sc.Headers["X-Empty"] != "d" {
				t.Errorf("the manager got api_key %q, headers %v", sc.APIKey, sc.Headers)
			}
			if rec, _ := record(t, ev, "news"); strings.Contains(string(rec.Entry), "x-upstream-secret") {
				t.Errorf("the store keeps the variable's value: %s", rec.Entry)
			}
		},
	}, {
		name: "variable outside the prefix in headers", method: "POST", path: "/admin/servers", status: 400,
		body:    `{"name":"news","transport":"http","url":"https://news.example/mcp","headers":{"X-Home":"${HOME}"}}`,
		message: "admin.env_prefix", problems: []string{"headers.X-Home"},
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			if e := decode[errorBody](t, body); !strings.Contains(e.Message, "MCPGW_UPSTREAM_") || !strings.Contains(e.Message, "${HOME}") {
				t.Errorf("message = %q; want it to name the prefix and the variable", e.Message)
			}
			if strings.Contains(string(body), "/root") {
				t.Errorf("the answer holds HOME's value: %s", body)
			}
			unchanged(t, ev, nil, nil)
		},
	}, {
		name: "variable outside the prefix in env", opts: envOptions{stdio: []string{"uvx"}}, method: "POST", path: "/admin/servers", status: 400,
		body:    `{"name":"news","transport":"stdio","command":"uvx","env":{"H":"${HOME}"}}`,
		message: "admin.env_prefix", problems: []string{"env.H"},
	}, {
		name: "variable outside the prefix with a default", method: "POST", path: "/admin/servers", status: 400,
		body:    `{"name":"news","transport":"http","url":"https://${HOME:-news.example}/mcp"}`,
		message: "admin.env_prefix", problems: []string{"url"},
	}, {
		name: "stdio without admin.stdio_commands", method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news"]}`,
		message: "admin.stdio_commands", problems: []string{"command"},
	}, {
		name: "stdio with a listed command", method: "POST", path: "/admin/servers", status: 201,
		opts:  envOptions{stdio: []string{"npx"}, patterns: []config.StdioCommand{{Command: "uvx", Args: []string{"mcp-*"}}}, env: []string{"K"}},
		body:  `{"name":"news","transport":"stdio","command":"uvx","args":["mcp-news"],"env":{"K":"${MCPGW_UPSTREAM_X}"}}`,
		calls: []string{"Add news"},
		check: wantView(serverView{Name: "news", Transport: "stdio", Enabled: true, State: "running", ToolCount: 2, Source: "api"}),
	}, {
		name: "stdio with another command", opts: envOptions{stdio: []string{"uvx"}}, method: "POST", path: "/admin/servers", status: 403,
		body:    `{"name":"news","transport":"stdio","command":"/bin/sh","args":["-c","id"]}`,
		message: `"/bin/sh" is not in admin.stdio_commands`, problems: []string{"command"},
	}, {
		name: "name of a config server", method: "POST", path: "/admin/servers", status: 409,
		body:    `{"name":"files","transport":"http","url":"https://files.example/mcp"}`,
		message: `server "files" is defined in the config file`,
	}, {
		name: "bad JSON", method: "POST", path: "/admin/servers", body: `{"name":`, status: 400, message: "not valid JSON",
	}, {
		name: "not an object", method: "POST", path: "/admin/servers", body: `["news"]`, status: 400, message: "JSON object",
	}, {
		name: "null", method: "POST", path: "/admin/servers", body: `null`, status: 400, message: "JSON object",
	}, {
		name: "empty body", method: "POST", path: "/admin/servers", contentType: "application/json", status: 400,
	}, {
		name: "text", method: "POST", path: "/admin/servers", body: newsEntry, contentType: "text/plain", status: 415, message: "Content-Type: application/json",
	}, {
		name: "no content type", method: "POST", path: "/admin/servers", body: newsEntry, contentType: "-", status: 415,
	}, {
		name: "a look-alike content type", method: "POST", path: "/admin/servers", body: newsEntry, contentType: "application/jsonl", status: 415,
	}, {
		name: "content type with charset", method: "POST", path: "/admin/servers", body: newsEntry, contentType: "application/json; charset=utf-8", status: 201,
		calls: []string{"Add news"},
	}, {
		name: "too large", method: "POST", path: "/admin/servers", status: 413, message: "larger than",
		body: `{"name":"news","transport":"http","url":"https://news.example/mcp","headers":{"X":"` + strings.Repeat("a", maxBody) + `"}}`,
	}, {
		name: "bad name", method: "POST", path: "/admin/servers", status: 400, problems: []string{"name"},
		body: `{"name":"News_1","transport":"http","url":"https://news.example/mcp"}`, message: "name",
	}, {
		name: "name too long", method: "POST", path: "/admin/servers", status: 400, problems: []string{"name"},
		body: `{"name":"` + strings.Repeat("n", 33) + `","transport":"http","url":"https://news.example/mcp"}`,
	}, {
		name: "name not a string", method: "POST", path: "/admin/servers", status: 400, problems: []string{"name"},
		body: `{"name":7,"transport":"http","url":"https://news.example/mcp"}`, message: "must be a string",
	}, {
		name: "missing name", method: "POST", path: "/admin/servers", status: 400, problems: []string{"name"},
		body: `{"transport":"http","url":"https://news.example/mcp"}`,
	}, {
		name: "the manager fails to add", method: "POST", path: "/admin/servers", body: newsEntry, status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"Add news"}, message: `adding server "news" failed`,
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			if !ev.log.contains(errSecret.Error()) {
				t.Errorf("the log lacks the error:\n%s", ev.log)
			}
		},
	}, {
		name: "the manager fails to replace", method: "POST", path: "/admin/servers", status: 500,
		body:  `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"Replace weather"}, check: unchanged,
	}, {
		name: "the store fails on a new server", method: "POST", path: "/admin/servers", body: newsEntry, status: 500,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("put") },
		calls: []string{"Add news", "Remove news"}, message: `storing server "news" failed`,
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			if _, ok := toolDesc(t, ev, "news"); ok {
				t.Error("news's tools are in the catalog")
			}
		},
	}, {
		name: "the store fails on a replacement", method: "POST", path: "/admin/servers", status: 500,
		body:  `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("put") },
		calls: []string{"Replace weather", "Replace weather"}, check: unchanged,
	}, {
		name: "the store fails to read the switch", method: "POST", path: "/admin/servers", status: 500,
		body:  `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("get") },
		check: unchanged,
	}}
	for _, c := range entryCases {
		cases = append(cases, apiCase{
			name: c.name, method: "POST", path: "/admin/servers", body: c.body,
			status: 400, message: c.message, problems: c.problems, check: unchanged,
		})
	}
	runCases(t, cases)
}

func TestReplaceServer(t *testing.T) {
	weather2 := `{"name":"weather","transport":"http","url":"https://weather2.example/mcp"}`
	replaced := func(t *testing.T, ev *env, res *http.Response, body []byte) {
		t.Helper()
		wantView(serverView{Name: "weather", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"})(t, ev, res, body)
		if desc, _ := toolDesc(t, ev, "weather"); desc != "https://weather2.example/mcp" {
			t.Errorf("weather runs %q", desc)
		}
	}
	cases := []apiCase{{
		name: "replace", method: "PUT", path: "/admin/servers/weather", body: weather2, status: 200,
		calls: []string{"Replace weather"}, check: replaced,
	}, {
		name: "without a name", method: "PUT", path: "/admin/servers/weather", status: 200,
		body:  `{"transport":"http","url":"https://weather2.example/mcp"}`,
		calls: []string{"Replace weather"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			replaced(t, ev, res, body)
			if rec, _ := record(t, ev, "weather"); string(rec.Entry) != `{"transport":"http","url":"https://weather2.example/mcp","name":"weather"}` {
				t.Errorf("stored %s", rec.Entry)
			}
		},
	}, {
		name: "another name", method: "PUT", path: "/admin/servers/weather", status: 400,
		body:    `{"name":"news","transport":"http","url":"https://news.example/mcp"}`,
		message: "cannot be renamed", problems: []string{"name"}, check: unchanged,
	}, {
		name: "a name that is not a string", method: "PUT", path: "/admin/servers/weather", status: 400,
		body: `{"name":7,"transport":"http","url":"https://weather2.example/mcp"}`, problems: []string{"name"}, check: unchanged,
	}, {
		name: "unknown", method: "PUT", path: "/admin/servers/news", body: newsEntry, status: 404,
		message: `unknown server "news"`, check: unchanged,
	}, {
		name: "of the config file", method: "PUT", path: "/admin/servers/files", status: 409,
		body: `{"transport":"stdio","command":"mcp-files"}`, message: "config file",
	}, {
		name: "text", method: "PUT", path: "/admin/servers/weather", body: weather2, contentType: "text/plain", status: 415,
	}, {
		name: "too large", method: "PUT", path: "/admin/servers/weather", status: 413,
		body: `{"transport":"http","url":"https://weather.example/mcp","headers":{"X":"` + strings.Repeat("a", maxBody) + `"}}`,
	}, {
		name: "bad JSON", method: "PUT", path: "/admin/servers/weather", body: `{`, status: 400, check: unchanged,
	}, {
		name: "not an object", method: "PUT", path: "/admin/servers/weather", body: `"weather"`, status: 400, check: unchanged,
	}, {
		name: "variable outside the prefix", method: "PUT", path: "/admin/servers/weather", status: 400,
		body:    `{"transport":"http","url":"https://weather.example/mcp","api_key":"${HOME}"}`,
		message: "admin.env_prefix", problems: []string{"api_key"}, check: unchanged,
	}, {
		name: "to stdio without admin.stdio_commands", method: "PUT", path: "/admin/servers/weather", status: 403,
		body: `{"transport":"stdio","command":"uvx"}`, message: "admin.stdio_commands", problems: []string{"command"}, check: unchanged,
	}, {
		name: "the manager fails", method: "PUT", path: "/admin/servers/weather", body: weather2, status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"Replace weather"}, check: unchanged,
	}, {
		name: "the store fails", method: "PUT", path: "/admin/servers/weather", body: weather2, status: 500,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("put") },
		calls: []string{"Replace weather", "Replace weather"}, check: unchanged,
	}}
	for _, c := range entryCases {
		if strings.Contains(c.body, `"name":"news"`) {
			cases = append(cases, apiCase{
				name: c.name, method: "PUT", path: "/admin/servers/news", body: strings.Replace(c.body, `"name":"news",`, "", 1),
				status: 400, message: c.message, problems: c.problems, check: unchanged,
			})
		}
	}
	runCases(t, cases)
}

func TestSwitchServer(t *testing.T) {
	patch := func(t *testing.T, ev *env, name string, enabled bool) serverView {
		t.Helper()
		status, body := ev.do(t, "PATCH", "/admin/servers/"+name, `{"enabled":`+map[bool]string{true: "true", false: "false"}[enabled]+`}`, token)
		if status != 200 {
			t.Fatalf("PATCH %s = %d %s", name, status, body)
		}
		return decode[serverView](t, body)
	}
	wantRecord := func(t *testing.T, ev *env, name, source string, entry bool, enabled bool) {
		t.Helper()
		rec, ok := record(t, ev, name)
		if !ok || rec.Source != source || (rec.Entry != nil) != entry || rec.Enabled == nil || *rec.Enabled != enabled {
			t.Errorf("stored %+v (found %t); want source %s, entry %t, enabled %t", rec, ok, source, entry, enabled)
		}
	}
	runCases(t, []apiCase{{
		name: "off and on", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false}`, status: 200,
		calls: []string{"SetEnabled weather false"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			wantView(serverView{Name: "weather", Transport: "http", Enabled: false, State: "disabled", Source: "api"})(t, ev, res, body)
			wantRecord(t, ev, "weather", "api", true, false)
			if _, ok := toolDesc(t, ev, "weather"); ok {
				t.Error("a disabled server's tools are in the catalog")
			}
			if got := patch(t, ev, "weather", true); !got.Enabled || got.State != "running" {
				t.Errorf("switched on: %+v", got)
			}
			wantRecord(t, ev, "weather", "api", true, true)
			if _, ok := toolDesc(t, ev, "weather"); !ok {
				t.Error("the server's tools did not come back")
			}
			if diff := cmp.Diff([]string{"SetEnabled weather true"}, ev.m.recorded()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		},
	}, {
		name: "a config server", method: "PATCH", path: "/admin/servers/files", body: `{"enabled":false}`, status: 200,
		calls: []string{"SetEnabled files false"},
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			wantView(serverView{Name: "files", Transport: "stdio", Enabled: false, State: "disabled", Source: "config"})(t, ev, res, body)
			wantRecord(t, ev, "files", "config", false, false)
			patch(t, ev, "files", true)
			wantRecord(t, ev, "files", "config", false, true)
		},
	}, {
		name: "a config server disabled in the file", method: "PATCH", path: "/admin/servers/git", body: `{"enabled":true}`, status: 200,
		calls: []string{"SetEnabled git true"},
		check: wantView(serverView{Name: "git", Transport: "stdio", Enabled: true, State: "running", ToolCount: 2, Source: "config"}),
	}, {
		name: "unknown", method: "PATCH", path: "/admin/servers/nope", body: `{"enabled":false}`, status: 404, message: `unknown server "nope"`,
	}, {
		name: "missing enabled", method: "PATCH", path: "/admin/servers/weather", body: `{}`, status: 400, problems: []string{"enabled"}, check: unchanged,
	}, {
		name: "not a bool", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":"false"}`, status: 400, problems: []string{"enabled"}, check: unchanged,
	}, {
		name: "null", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":null}`, status: 400, problems: []string{"enabled"}, check: unchanged,
	}, {
		name: "another field", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false,"url":"https://evil.example"}`, status: 400,
		message: "replace the server with PUT", problems: []string{"enabled"}, check: unchanged,
	}, {
		name: "not an object", method: "PATCH", path: "/admin/servers/weather", body: `false`, status: 400, check: unchanged,
	}, {
		name: "bad JSON", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":`, status: 400, check: unchanged,
	}, {
		name: "text", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false}`, contentType: "text/plain", status: 415, check: unchanged,
	}, {
		name: "too large", method: "PATCH", path: "/admin/servers/weather", status: 413, check: unchanged,
		body: `{"enabled":false,"x":"` + strings.Repeat("a", maxBody) + `"}`,
	}, {
		name: "the manager fails", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false}`, status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"SetEnabled weather false"}, check: unchanged,
	}, {
		name: "the manager fails on a config server", method: "PATCH", path: "/admin/servers/files", body: `{"enabled":false}`, status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"SetEnabled files false"},
		check: func(t *testing.T, ev *env, _ *http.Response, _ []byte) {
			if _, ok := record(t, ev, "files"); ok {
				t.Error("the store keeps a switch the manager did not make")
			}
		},
	}, {
		name: "the store fails", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false}`, status: 500,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("put") },
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			unchanged(t, ev, res, body)
			if s, _ := server(t, ev, "weather"); !s.Enabled {
				t.Error("weather was switched off")
			}
		},
	}, {
		name: "the store fails to read", method: "PATCH", path: "/admin/servers/weather", body: `{"enabled":false}`, status: 500,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("get") }, check: unchanged,
	}})
}

func TestDeleteServer(t *testing.T) {
	runCases(t, []apiCase{{
		name: "delete", method: "DELETE", path: "/admin/servers/weather", status: 204,
		calls: []string{"Remove weather"},
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			if len(body) != 0 {
				t.Errorf("a 204 with a body: %s", body)
			}
			if _, ok := record(t, ev, "weather"); ok {
				t.Error("the store keeps weather")
			}
			if _, ok := server(t, ev, "weather"); ok {
				t.Error("the list has weather")
			}
			if _, ok := toolDesc(t, ev, "weather"); ok {
				t.Error("the catalog has weather's tools")
			}
			for _, r := range []struct{ method, path, body string }{
				{"DELETE", "/admin/servers/weather", ""},
				{"GET", "/admin/servers/weather", ""},
				{"GET", "/admin/servers/weather/tools", ""},
				{"POST", "/admin/servers/weather/restart", ""},
				{"PATCH", "/admin/servers/weather", `{"enabled":true}`},
			} {
				if status, body := ev.do(t, r.method, r.path, r.body, token); status != 404 {
					t.Errorf("%s %s after the DELETE = %d %s; want 404", r.method, r.path, status, body)
				}
			}
			// The name is free again.
			if status, body := ev.do(t, "POST", "/admin/servers", weatherEntry, token); status != 201 {
				t.Errorf("registering weather again = %d %s", status, body)
			}
		},
	}, {
		name: "a switched server", method: "DELETE", path: "/admin/servers/weather", status: 204,
		setup: func(t *testing.T, ev *env) {
			if status, body := ev.do(t, "PATCH", "/admin/servers/weather", `{"enabled":false}`, token); status != 200 {
				t.Fatalf("PATCH = %d %s", status, body)
			}
		},
		calls: []string{"Remove weather"},
	}, {
		name: "of the config file", method: "DELETE", path: "/admin/servers/files", status: 409, message: "config file",
	}, {
		name: "unknown", method: "DELETE", path: "/admin/servers/nope", status: 404, message: `unknown server "nope"`,
	}, {
		name: "the manager fails", method: "DELETE", path: "/admin/servers/weather", status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"Remove weather"}, check: unchanged,
	}, {
		name: "the store fails", method: "DELETE", path: "/admin/servers/weather", status: 500,
		setup: func(t *testing.T, ev *env) { ev.store.failNext("delete") },
		check: unchanged,
	}})
}

func TestRestartServer(t *testing.T) {
	runCases(t, []apiCase{{
		name: "registered", method: "POST", path: "/admin/servers/weather/restart", status: 202,
		calls: []string{"Restart weather"},
		check: wantView(serverView{Name: "weather", Transport: "http", Enabled: true, State: "running", ToolCount: 2, Source: "api"}),
	}, {
		name: "of the config file", method: "POST", path: "/admin/servers/files/restart", status: 202,
		calls: []string{"Restart files"},
	}, {
		name: "disabled", method: "POST", path: "/admin/servers/git/restart", status: 409, message: "disabled",
	}, {
		name: "switched off", method: "POST", path: "/admin/servers/weather/restart", status: 409, message: "disabled",
		setup: func(t *testing.T, ev *env) {
			if status, body := ev.do(t, "PATCH", "/admin/servers/weather", `{"enabled":false}`, token); status != 200 {
				t.Fatalf("PATCH = %d %s", status, body)
			}
		},
	}, {
		name: "unknown", method: "POST", path: "/admin/servers/nope/restart", status: 404,
	}, {
		name: "the manager fails", method: "POST", path: "/admin/servers/weather/restart", status: 500,
		setup: func(t *testing.T, ev *env) { ev.m.failNext(errSecret) },
		calls: []string{"Restart weather"}, message: `restarting server "weather" failed`,
	}})
}

func TestTools(t *testing.T) {
	runCases(t, []apiCase{{
		name: "merged", method: "GET", path: "/admin/tools", status: 200,
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			got := decode[struct {
				Tools []gateway.ToolInfo `json:"tools"`
			}](t, body).Tools
			if diff := cmp.Diff(ev.core.Tools(""), got); diff != "" {
				t.Errorf("(-core +api):\n%s", diff)
			}
			if len(got) != 4 {
				t.Errorf("%d tools, want 4", len(got))
			}
		},
	}, {
		name: "of a server", method: "GET", path: "/admin/servers/weather/tools", status: 200,
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			got := decode[struct {
				Tools []gateway.ToolInfo `json:"tools"`
			}](t, body).Tools
			var names []string
			for _, ti := range got {
				names = append(names, ti.Server+" "+ti.Name+" "+ti.Original)
			}
			if diff := cmp.Diff([]string{"weather mcp__weather__ping ping", "weather mcp__weather__whoami whoami"}, names); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		},
	}, {
		name: "of a disabled server", method: "GET", path: "/admin/servers/git/tools", status: 200,
		check: func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			if string(body) != `{"tools":[]}`+"\n" {
				t.Errorf("got %s", body)
			}
		},
	}, {
		name: "of an unknown server", method: "GET", path: "/admin/servers/nope/tools", status: 404,
	}})
}

func TestServerLogs(t *testing.T) {
	withLog := func(content string) func(t *testing.T, ev *env) {
		return func(t *testing.T, ev *env) { ev.m.writeLog(t, "weather", content) }
	}
	lines := func(want ...string) func(t *testing.T, ev *env, _ *http.Response, body []byte) {
		return func(t *testing.T, ev *env, _ *http.Response, body []byte) {
			got := decode[struct {
				Server string   `json:"server"`
				Lines  []string `json:"lines"`
			}](t, body)
			if got.Lines == nil {
				t.Errorf("lines is null, not a list: %s", body)
			}
			if diff := cmp.Diff(want, got.Lines, cmpopts.EquateEmpty()); diff != "" || got.Server != "weather" {
				t.Errorf("server %q, lines (-want +got):\n%s", got.Server, diff)
			}
		}
	}
	three := "one\ntwo\nthree\n"
	runCases(t, []apiCase{
		{name: "tail=2", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=2", status: 200, check: lines("two", "three")},
		{name: "default", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs", status: 200, check: lines("one", "two", "three")},
		{name: "more than there are", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=10000", status: 200, check: lines("one", "two", "three")},
		{name: "no final newline", setup: withLog("one\ntwo"), method: "GET", path: "/admin/servers/weather/logs?tail=1", status: 200, check: lines("two")},
		{name: "empty lines kept", setup: withLog("one\n\ntwo\n"), method: "GET", path: "/admin/servers/weather/logs", status: 200, check: lines("one", "", "two")},
		{name: "empty file", setup: withLog(""), method: "GET", path: "/admin/servers/weather/logs", status: 200, check: lines()},
		{name: "no log file", method: "GET", path: "/admin/servers/weather/logs?tail=2", status: 200, check: lines()},
		{name: "log file not written yet", method: "GET", path: "/admin/servers/weather/logs", status: 200, check: lines(),
			setup: func(t *testing.T, ev *env) { ev.m.setLogPath("weather", ev.m.dir+"/missing.log") }},
		{name: "tail=0", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=0", status: 400, problems: []string{"tail"}},
		{name: "tail=-1", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=-1", status: 400, problems: []string{"tail"}},
		{name: "tail=abc", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=abc", status: 400, problems: []string{"tail"}},
		{name: "tail=10001", setup: withLog(three), method: "GET", path: "/admin/servers/weather/logs?tail=10001", status: 400, problems: []string{"tail"}, message: "10000"},
		{name: "unknown", method: "GET", path: "/admin/servers/nope/logs", status: 404},
		{name: "unreadable", method: "GET", path: "/admin/servers/weather/logs", status: 500,
			setup: func(t *testing.T, ev *env) { ev.m.setLogPath("weather", ev.m.dir) }}, // a directory
	})
}

func TestServerLogs_Long(t *testing.T) {
	// Of a file longer than the bound, only the end is read; a line it
	// cuts is left out, a whole line kept.
	line := strings.Repeat("x", 1023) + "\n"
	perWindow := maxTailBytes / len(line)
	for _, c := range []struct {
		name    string
		content string
		want    int // lines
		last    string
	}{
		{"the bound at a line's start", strings.Repeat(line, perWindow+10), perWindow, line[:1023]},
		{"the bound in a line", strings.Repeat(line, perWindow+10) + "last\n", perWindow, "last"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := newEnv(t, envOptions{})
			ev.m.writeLog(t, "weather", c.content)
			got := get[struct {
				Lines []string `json:"lines"`
			}](t, ev, "/admin/servers/weather/logs?tail=10000").Lines
			if len(got) != c.want || got[len(got)-1] != c.last {
				t.Fatalf("%d lines, the last %.10q; want %d, the last %.10q", len(got), got[len(got)-1], c.want, c.last)
			}
			for i, l := range got[:len(got)-1] {
				if l != line[:1023] {
					t.Fatalf("line %d is %d bytes long, a cut line", i, len(l))
				}
			}
		})
	}
}

func TestOpenAPIDocument(t *testing.T) {
	runCases(t, []apiCase{{
		name: "the document", method: "GET", path: "/admin/openapi.json", status: 200,
		check: func(t *testing.T, ev *env, res *http.Response, body []byte) {
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal(openapi.Admin(), &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-document +served):\n%s", diff)
			}
		},
	}})
}

// documented returns every operation of the document as "METHOD path",
// sorted.
func documented(t *testing.T) []string {
	t.Helper()
	doc, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

func TestRoutesDocumented(t *testing.T) {
	e := echo.New()
	ev := newEnv(t, envOptions{})
	ev.api.Register(e)
	var registered []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound || !strings.HasPrefix(r.Path, "/admin") {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		registered = append(registered, r.Method+" "+strings.Join(parts, "/"))
	}
	sort.Strings(registered)
	if diff := cmp.Diff(documented(t), registered); diff != "" {
		t.Errorf("routes (-documented +registered):\n%s", diff)
	}
}

// TestAuth sends every documented request without a token, with a wrong
// one, a malformed header, and to an API without tokens.
func TestAuth(t *testing.T) {
	on := newEnv(t, envOptions{})
	off := newEnv(t, envOptions{off: true})
	for _, op := range documented(t) {
		method, path, _ := strings.Cut(op, " ")
		path = strings.ReplaceAll(path, "{name}", "weather")
		body := ""
		switch method {
		case "POST", "PUT":
			if !strings.HasSuffix(path, "/restart") {
				body = weatherEntry
			}
		case "PATCH":
			body = `{"enabled":false}`
		}
		t.Run(op, func(t *testing.T) {
			for _, c := range []struct {
				name, auth string
				ev         *env
				status     int
				message    string
				challenge  string
			}{
				{"no token", "", on, 401, "missing admin bearer token", `Bearer realm="mcpgw admin"`},
				{"wrong token", "Bearer " + token + "x", on, 401, "invalid admin bearer token", `Bearer realm="mcpgw admin", error="invalid_token"`},
				{"empty token", "Bearer ", on, 401, "missing admin bearer token", `Bearer realm="mcpgw admin"`},
				{"basic", "Basic " + token, on, 401, "missing admin bearer token", `Bearer realm="mcpgw admin"`},
				{"off", "Bearer " + token, off, 403, "admin API is off", ""},
				{"off without a token", "", off, 403, "admin API is off", ""},
			} {
				req := newRequest(method, path, body, "")
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				rec := c.ev.send(t, req)
				if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.message) {
					t.Errorf("%s: %d %s; want %d with %q", c.name, rec.Code, rec.Body, c.status, c.message)
				}
				if got := rec.Header().Get("WWW-Authenticate"); got != c.challenge {
					t.Errorf("%s: WWW-Authenticate = %q; want %q", c.name, got, c.challenge)
				}
			}
			if calls := on.m.recorded(); len(calls) > 0 {
				t.Errorf("refused requests called the manager: %v", calls)
			}
		})
	}
	on.agree(t)
	// The scheme is case-insensitive (RFC 9110, section 11.1).
	req := newRequest("GET", "/admin/servers", "", "")
	req.Header.Set("Authorization", "bearer "+token)
	if rec := on.send(t, req); rec.Code != 200 {
		t.Errorf("lower-case scheme: %d %s", rec.Code, rec.Body)
	}
}

func TestNew(t *testing.T) {
	ev := newEnv(t, envOptions{})
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"no core", Options{Servers: ev.m, Store: ev.store}},
		{"no manager", Options{Core: ev.core, Store: ev.store}},
		{"no store", Options{Core: ev.core, Servers: ev.m}},
		{"a plain token", Options{Core: ev.core, Servers: ev.m, Store: ev.store, Tokens: []string{"plain"}}},
		{"a short hash", Options{Core: ev.core, Servers: ev.m, Store: ev.store, Tokens: []string{"sha256:abcd"}}},
		{"a hash without its prefix", Options{Core: ev.core, Servers: ev.m, Store: ev.store, Tokens: []string{strings.TrimPrefix(hashOf("x"), "sha256:")}}},
	} {
		if _, err := New(c.opts); err == nil {
			t.Errorf("%s: New accepted it", c.name)
		}
	}
}

// TestConfigServersReload checks that SetConfigServers changes which
// servers the API may change.
func TestConfigServersReload(t *testing.T) {
	ev := newEnv(t, envOptions{})
	ev.api.SetConfigServers([]string{"files", "git", "weather"})
	ev.fromConfig = []string{"files", "git", "weather"}
	if status, body := ev.do(t, "DELETE", "/admin/servers/weather", "", token); status != 409 {
		t.Errorf("DELETE of a server now in the file = %d %s", status, body)
	}
	if s, _ := server(t, ev, "weather"); s.Source != "config" {
		t.Errorf("source = %q, want config", s.Source)
	}
}

// TestConcurrentChanges changes servers from many goroutines; afterwards
// the store and the manager must agree.
func TestConcurrentChanges(t *testing.T) {
	ev := newEnv(t, envOptions{})
	names := []string{"weather", "news", "sport"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				name := names[(i+j)%len(names)]
				switch (i * j) % 5 {
				case 0:
					ev.do(t, "POST", "/admin/servers", `{"name":"`+name+`","transport":"http","url":"https://`+name+`.example/`+string(rune('a'+j))+`"}`, token)
				case 1:
					ev.do(t, "PATCH", "/admin/servers/"+name, `{"enabled":false}`, token)
				case 2:
					ev.do(t, "DELETE", "/admin/servers/"+name, "", token)
				case 3:
					ev.do(t, "POST", "/admin/servers/"+name+"/restart", "", token)
				case 4:
					ev.do(t, "GET", "/admin/servers", "", token)
					ev.do(t, "GET", "/admin/tools", "", token)
				}
			}
		})
	}
	wg.Wait()
	ev.agree(t)
	if slices.Contains(ev.m.configNames(), "") {
		t.Error("the manager runs a server without a name")
	}
}
