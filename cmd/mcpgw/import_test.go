package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/mcpgw/mcpgw/config"
)

var updateImport = flag.Bool("update-import", false, "rewrite the golden files of testdata/import")

// importEnv is the environment the printed YAML is parsed with.
var importEnv = map[string]string{"HOME": "/home/test", "GITHUB_TOKEN": "tok"}

func importLookup(name string) (string, bool) {
	v, ok := importEnv[name]
	return v, ok
}

// TestImport_Files converts each testdata/import/NAME.json and compares
// stdout with NAME.yaml and stderr with NAME.stderr (-update-import
// rewrites them). Every printed YAML must be a config mcpgw accepts, with
// the servers printed.
func TestImport_Files(t *testing.T) {
	tests := []struct {
		name string
		code int
		// expanded are values of the parsed config: "server key" → value.
		expanded map[string]string
	}{
		{name: "claude", code: 0, expanded: map[string]string{
			"postgres env.PGPASSWORD":                 `pa$$word ${HOME} $x "quoted" # not a comment`,
			"postgres env.FLAG":                       "yes",
			"postgres env.PORT":                       "05432",
			"postgres args[2]":                        "postgresql://localhost/mydb?x=${HOME}",
			"github env.GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_exampleExampleExample0123",
			"weather enabled":                         "false",
			"weather args[1]":                         `C:\Users\me\weather`,
		}},
		{name: "cursor", code: 1, expanded: map[string]string{
			"remote headers.Authorization": "Bearer sk-live-remote-0123456789",
			"legacy transport":             "sse",
			"streamable transport":         "http",
			"windsurf url":                 "https://windsurf.example.com/mcp",
		}},
		{name: "vscode", code: 1, expanded: map[string]string{
			"github headers.Authorization": "Bearer tok",
			"fetch env.CACHE_DIR":          "/home/test/.cache",
			"fetch env.PRICE":              "5$",
			"fetch env.LITERAL":            "$HOME",
			"playwright transport":         "sse",
		}},
		{name: "jsonc", code: 0, expanded: map[string]string{
			"docs headers.X-Note":         "a // b /* c */ d",
			"memory env.MEMORY_FILE_PATH": `C:\data\"memory".json`,
			"memory args[1]":              "@modelcontextprotocol/server-memory",
		}},
		{name: "settings", code: 0},
		{name: "names", code: 0},
		{name: "duplicates", code: 0, expanded: map[string]string{
			"files command":   "two",
			"files-2 command": "four",
			"files-3 command": "one",
			"files-4 command": "three",
			"dup-2 command":   "six",
		}},
		{name: "invalid", code: 1},
		{name: "allskipped", code: 1},
		{name: "empty", code: 2},
		{name: "emptyfile", code: 2},
		{name: "notjson", code: 2},
		{name: "notobject", code: 2},
		{name: "noservers", code: 2},
		{name: "serverslist", code: 2},
		{name: "both", code: 2},
		{name: "syntax", code: 2},
		{name: "missing", code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := filepath.Join("testdata", "import", tt.name+".json")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"import", in}, &stdout, &stderr, importLookup)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout.String(), stderr.String())
			}
			golden(t, filepath.Join("testdata", "import", tt.name+".yaml"), stdout.String())
			golden(t, filepath.Join("testdata", "import", tt.name+".stderr"), stderr.String())
			// The files' secrets all look like these; no report shows one.
			for _, secret := range []string{"sk-", "ghp_"} {
				if strings.Contains(stderr.String(), secret) {
					t.Errorf("stderr shows a secret (%q):\n%s", secret, stderr.String())
				}
			}
			if code == 2 {
				if stdout.Len() > 0 {
					t.Errorf("stdout = %q, want nothing", stdout.String())
				}
				return
			}

			var printed struct{ Servers []importedServer }
			if err := yaml.Unmarshal(stdout.Bytes(), &printed); err != nil {
				t.Fatalf("stdout is not YAML: %v", err)
			}
			cfg, problems := config.Parse(stdout.Bytes(), importLookup)
			if len(problems) > 0 {
				t.Fatalf("config.Parse of the output: %v\n%s", problems, stdout.String())
			}
			var want, got []string
			for _, s := range printed.Servers {
				want = append(want, s.Name)
			}
			for _, s := range cfg.Servers {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("servers of the parsed config (-printed +parsed):\n%s", diff)
			}
			for key, wantValue := range tt.expanded {
				name, field, _ := strings.Cut(key, " ")
				if got := serverValue(cfg, name, field); got != wantValue {
					t.Errorf("%s = %q, want %q", key, got, wantValue)
				}
			}
		})
	}
}

// serverValue is one field of the server name of cfg, as a string.
func serverValue(cfg *config.Config, name, field string) string {
	i := slices.IndexFunc(cfg.Servers, func(s config.Server) bool { return s.Name == name })
	if i < 0 {
		return "<no server " + name + ">"
	}
	s := cfg.Servers[i]
	switch key, sub, _ := strings.Cut(field, "."); {
	case key == "env":
		return s.Env[sub]
	case key == "headers":
		return s.Headers[sub]
	case strings.HasPrefix(field, "args["):
		var n int
		for _, c := range field[len("args[") : len(field)-1] {
			n = n*10 + int(c-'0')
		}
		if n >= len(s.Args) {
			return "<no " + field + ">"
		}
		return s.Args[n]
	case field == "transport":
		return s.Transport
	case field == "command":
		return s.Command
	case field == "url":
		return s.URL
	case field == "enabled":
		if s.Enabled == nil {
			return "<nil>"
		}
		if *s.Enabled {
			return "true"
		}
		return "false"
	}
	return "<unknown field " + field + ">"
}

// golden compares got with the file at path, or writes it with
// -update-import. An absent file is empty.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *updateImport {
		if got == "" {
			os.Remove(path)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestImport_Keys holds the printed keys to mcpgw's: each is a yaml key of
// config.Server, and the JSON body uses the same names.
func TestImport_Keys(t *testing.T) {
	keys := map[string]bool{}
	st := reflect.TypeFor[config.Server]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("yaml"), ",")
		keys[name] = true
	}
	it := reflect.TypeFor[importedServer]()
	for i := range it.NumField() {
		f := it.Field(i)
		y, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		j, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !keys[y] {
			t.Errorf("field %s: yaml key %q is not a key of config.Server", f.Name, y)
		}
		if j != y {
			t.Errorf("field %s: json key %q differs from yaml key %q", f.Name, j, y)
		}
	}
}

func TestImport_Usage(t *testing.T) {
	claude := filepath.Join("testdata", "import", "claude.json")
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout string // a substring
		stderr string // a substring
	}{
		{"no file", []string{"import"}, nil, 2, "", "missing FILE"},
		{"two files", []string{"import", claude, "other.json"}, nil, 2, "", `unexpected argument "other.json"`},
		{"bad flag", []string{"import", "--nope", claude}, nil, 2, "", "flag provided but not defined: -nope"},
		{"help", []string{"import", "--help"}, nil, 0, "usage: mcpgw import", ""},
		{"listed in help", []string{"help"}, nil, 0, "\n  import [--admin-url URL", ""},
		{"bad admin url", []string{"import", "--admin-url", "localhost:8080", claude}, map[string]string{"MCPGW_ADMIN_TOKEN": "t"}, 2, "", "is not an http:// or https:// URL"},
		{"admin url with a password", []string{"import", "--admin-url", "http://u:sk-abc@127.0.0.1:1", claude}, map[string]string{"MCPGW_ADMIN_TOKEN": "t"}, 2, "", "must not hold a user or password"},
		{"token unset", []string{"import", "--admin-url", "http://127.0.0.1:1", claude}, nil, 2, "", "environment variable MCPGW_ADMIN_TOKEN is not set"},
		{"token env named", []string{"import", "--admin-url", "http://127.0.0.1:1", "--admin-token-env", "MY_TOKEN", claude}, map[string]string{"MCPGW_ADMIN_TOKEN": "t"}, 2, "", "environment variable MY_TOKEN is not set"},
		{"token with newline", []string{"import", "--admin-url", "http://127.0.0.1:1", claude}, map[string]string{"MCPGW_ADMIN_TOKEN": "sk-abc\ndef"}, 2, "", "contains a control character"},
		{"flags after the file", []string{"import", claude, "--admin-token-env", "X"}, nil, 0, "name: filesystem", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code := run(context.Background(), tt.args, &stdout, &stderr, lookup)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\nstderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr.String())
			}
			if strings.Contains(stdout.String()+stderr.String(), "sk-abc") {
				t.Errorf("the token is shown:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}

// TestImport_Register runs the registration against a fake admin API that
// checks each request and answers 201, 200 or 400 by server.
func TestImport_Register(t *testing.T) {
	const token = "tok-0123-SECRET"
	answers := map[string]struct {
		code int
		body string
	}{
		"files":    {http.StatusCreated, `{"name":"files","state":"starting"}`},
		"search":   {http.StatusOK, `{"name":"search","state":"running"}`},
		"bad-name": {http.StatusBadRequest, `{"message":"invalid server entry: url: must use https\nunless loopback","problems":[{"field":"url","message":"..."}]}`},
		"old":      {http.StatusForbidden, `{"error":"the admin API is off"}`},
		"proxy":    {http.StatusBadGateway, `<html>bad gateway</html>`},
	}
	var mu sync.Mutex
	bodies := map[string]map[string]any{}
	var order []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/prefix/admin/servers" {
			t.Errorf("request %s %s, want POST /prefix/admin/servers", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			t.Errorf("Authorization = %q, want the bearer token", got)
		}
		if got := r.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", got)
		}
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("body is not a JSON object: %v", err)
		}
		name, _ := body["name"].(string)
		mu.Lock()
		bodies[name] = body
		order = append(order, name)
		mu.Unlock()
		a, ok := answers[name]
		if !ok {
			a.code, a.body = http.StatusNotFound, `{"message":"unexpected"}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.code)
		io.WriteString(w, a.body)
	}))
	defer admin.Close()

	var stdout, stderr bytes.Buffer
	in := filepath.Join("testdata", "import", "register.json")
	lookup := func(k string) (string, bool) {
		if k == "ADMIN_TOKEN" {
			return token, true
		}
		return "", false
	}
	code := run(context.Background(), []string{"import", "--admin-url", admin.URL + "/prefix/", "--admin-token-env", "ADMIN_TOKEN", in}, &stdout, &stderr, lookup)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if diff := cmp.Diff("registered files\nupdated search\n", stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	wantStderr := `skipped "dotenv": envFile: mcpgw does not read env files; copy the variables into env
renamed "Bad Name" to "bad-name"
server "bad-name": 400 invalid server entry: url: must use https unless loopback
server "old": 403 the admin API is off
server "proxy": 502 Bad Gateway
mcpgw: 1 of 6 servers skipped, 3 not registered
`
	if diff := cmp.Diff(wantStderr, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if strings.Contains(stdout.String()+stderr.String(), token) || strings.Contains(stderr.String(), "sk-") {
		t.Errorf("a secret is shown:\n%s%s", stdout.String(), stderr.String())
	}

	if diff := cmp.Diff([]string{"files", "search", "bad-name", "old", "proxy"}, order); diff != "" {
		t.Errorf("registration order (-want +got):\n%s", diff)
	}
	wantBodies := map[string]map[string]any{
		"files": {
			"name": "files", "transport": "stdio", "command": "npx",
			"args": []any{"-y", "@modelcontextprotocol/server-filesystem", "/srv"},
			"env":  map[string]any{"API_KEY": "sk-files-$$1"},
		},
		"search": {
			"name": "search", "transport": "http", "url": "https://search.example.com/mcp",
			"headers": map[string]any{"Authorization": "Bearer sk-search"},
		},
		"bad-name": {"name": "bad-name", "transport": "sse", "url": "https://example.com/sse", "enabled": false},
		"old":      {"name": "old", "transport": "stdio", "command": "old"},
		"proxy":    {"name": "proxy", "transport": "stdio", "command": "proxy"},
	}
	if diff := cmp.Diff(wantBodies, bodies); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
	// Each body is an entry mcpgw's file takes, with the literal value kept.
	for _, name := range order {
		b, _ := json.Marshal(bodies[name])
		cfg, problems := config.Parse([]byte("servers:\n  - "+string(b)+"\n"), nil)
		if len(problems) > 0 {
			t.Errorf("body of %q is no valid entry: %v", name, problems)
		}
		if name == "files" && cfg.Servers[0].Env["API_KEY"] != "sk-files-$1" {
			t.Errorf("files env.API_KEY = %q, want the literal value", cfg.Servers[0].Env["API_KEY"])
		}
	}
}

// TestImport_RegisterUnreachable reports each server when the gateway
// cannot be reached.
func TestImport_RegisterUnreachable(t *testing.T) {
	admin := httptest.NewServer(http.NotFoundHandler())
	admin.Close()
	var stdout, stderr bytes.Buffer
	lookup := func(string) (string, bool) { return "tok-SECRET", true }
	in := filepath.Join("testdata", "import", "settings.json")
	code := run(context.Background(), []string{"import", "--admin-url", admin.URL, in}, &stdout, &stderr, lookup)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
	if !strings.Contains(stderr.String(), `server "time": Post "`+admin.URL+`/admin/servers"`) || !strings.Contains(stderr.String(), "1 of 1 servers not registered") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "tok-SECRET") {
		t.Errorf("the token is shown:\n%s", stderr.String())
	}
}

func TestImportServerName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"files", "files"},
		{"My Server", "my-server"},
		{"  spaced  out  ", "spaced-out"},
		{"GitHub.com/Tools", "github-com-tools"},
		{"a__b", "a-b"},
		{"___", "server"},
		{"", "server"},
		{"日本語", "server"},
		{"Überwachung", "berwachung"},
		{strings.Repeat("ab", 20), strings.Repeat("ab", 16)},
		{strings.Repeat("a", 31) + "-b", strings.Repeat("a", 31)},
	}
	for _, tt := range tests {
		got := importServerName(tt.in)
		if got != tt.want {
			t.Errorf("importServerName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !config.ValidServerName(got) {
			t.Errorf("importServerName(%q) = %q, which is not valid", tt.in, got)
		}
		// The rule is config's: a server with the name passes its check.
		s := config.DefaultServer()
		s.Name, s.Transport, s.Command = got, config.TransportStdio, "x"
		if ps := config.ValidateServer(&s, "", config.Naming{}); len(ps) > 0 {
			t.Errorf("config rejects %q: %v", got, ps)
		}
	}
}

func TestAssignImportNames(t *testing.T) {
	long := strings.Repeat("x", 40)
	tests := []struct {
		name    string
		in      []string
		want    []string
		renames [][2]string
	}{
		{"valid names stay", []string{"a", "b-2"}, []string{"a", "b-2"}, nil},
		{"valid names win", []string{"A", "a"}, []string{"a-2", "a"}, [][2]string{{"A", "a-2"}}},
		{"numbering skips used", []string{"A", "a", "a-2", "a "}, []string{"a-3", "a", "a-2", "a-4"}, [][2]string{{"A", "a-3"}, {"a ", "a-4"}}},
		{"same name twice", []string{"x", "x"}, []string{"x", "x-2"}, [][2]string{{"x", "x-2"}}},
		{"long names stay within 32", []string{long, long + "y"}, []string{strings.Repeat("x", 32), strings.Repeat("x", 30) + "-2"},
			[][2]string{{long, strings.Repeat("x", 32)}, {long + "y", strings.Repeat("x", 30) + "-2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := make([]importedServer, len(tt.in))
			for i, n := range tt.in {
				servers[i].Name = n
			}
			renames := assignImportNames(servers)
			var got []string
			for _, s := range servers {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.renames, renames); diff != "" {
				t.Errorf("renames (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStripJSONC(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{"{\"a\": 1 // one\n}", "{\"a\": 1       \n}"},
		{`{"a": /* x */ 1}`, `{"a":         1}`},
		{"/*\n*/[1]", "  \n  [1]"},
		{`[1, 2,]`, `[1, 2 ]`},
		{"{\"a\": [1,\n],\n}", "{\"a\": [1 \n] \n}"},
		{`{"a": "// not /* a */ comment,]"}`, `{"a": "// not /* a */ comment,]"}`},
		{`{"a\"//": "b\\", "c": 1,}`, `{"a\"//": "b\\", "c": 1 }`},
		{`[1, /* c */ ]`, `[1          ]`},
		{`[1 /* unterminated`, `[1                `},
		{`"unterminated // x`, `"unterminated // x`},
		{`/`, `/`},
	}
	for _, tt := range tests {
		if got := string(stripJSONC([]byte(tt.in))); got != tt.want {
			t.Errorf("stripJSONC(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzStripJSONC checks that stripJSONC never panics and keeps the length;
// that JSON comes out unchanged; and that the JSONC made of a JSON value,
// with comments between all its tokens and trailing commas, comes out as
// JSON of the same value.
func FuzzStripJSONC(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "import", "*.json"))
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{`{"a": [1, "//", {"b": null}], "c": "/*\"*/"}`, `[]`, `"x"`, `/* */`, "//\n1", `[1,]`, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := stripJSONC(data)
		if len(out) != len(data) {
			t.Fatalf("length %d, want %d", len(out), len(data))
		}
		if !json.Valid(data) {
			return
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("JSON changed:\n%q\n%q", data, out)
		}
		v, err := decodeJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		pick := func() byte {
			i++
			return data[i%len(data)] + byte(i)
		}
		var jsonc bytes.Buffer
		writeJSONC(&jsonc, v, pick)
		stripped := stripJSONC(jsonc.Bytes())
		got, err := decodeJSON(stripped)
		if err != nil {
			t.Fatalf("JSONC %q stripped to %q: %v", jsonc.Bytes(), stripped, err)
		}
		if diff := cmp.Diff(v, got); diff != "" {
			t.Fatalf("JSONC %q: value (-want +got):\n%s", jsonc.Bytes(), diff)
		}
	})
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// writeJSONC writes v as JSONC: comments (chosen by pick) around every
// token, and sometimes a trailing comma.
func writeJSONC(b *bytes.Buffer, v any, pick func() byte) {
	comment := func() {
		switch pick() % 7 {
		case 1:
			b.WriteString(` // a "line" comment /* ,] ` + "\n")
		case 2:
			b.WriteString(`/* a // block "comment" */`)
		case 3:
			b.WriteString("/**/")
		case 4:
			b.WriteString("/*\n * */\t")
		case 5:
			b.WriteString("\r\n //\n")
		case 6:
			b.WriteString(" ")
		}
	}
	list := func(open, close byte, n int, item func(int)) {
		b.WriteByte(open)
		comment()
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
				comment()
			}
			item(i)
			comment()
		}
		if n > 0 && pick()%2 == 0 {
			b.WriteByte(',')
			comment()
		}
		b.WriteByte(close)
	}
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		list('{', '}', len(keys), func(i int) {
			k, _ := json.Marshal(keys[i])
			b.Write(k)
			comment()
			b.WriteByte(':')
			comment()
			writeJSONC(b, v[keys[i]], pick)
		})
	case []any:
		list('[', ']', len(v), func(i int) { writeJSONC(b, v[i], pick) })
	default:
		s, _ := json.Marshal(v)
		b.Write(s)
	}
}

// FuzzImport checks that no client config makes the conversion panic, and
// that what it prints is always a file mcpgw accepts with every converted
// server (a url built of ${VAR}s can only be checked where mcpgw runs).
func FuzzImport(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "import", "*.json"))
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"mcpServers": {"a": {"command": "~", "args": ["null", "- x", "#c", "*a", "\u2028", "\ufeff", "\u0085", "\u0000", "yes", "<<", "${", "'"],
		"env": {"A": "\u2028x\u0085", "B": "${", "C": "$${X}", "E": "\ufeffbom"}, "cwd": "&anchor"},
		"b": {"url": "https://example.com/${x}?a=$$", "headers": {"X": "\u00a0 nbsp", "Y": "*ref"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseClientConfig(data)
		if err != nil {
			return
		}
		var servers []importedServer
		for _, e := range entries {
			if s, reasons := e.convert(); len(reasons) == 0 {
				s.Name = e.name
				servers = append(servers, s)
			}
		}
		assignImportNames(servers)
		var out bytes.Buffer
		if err := writeServersYAML(&out, servers); err != nil {
			t.Fatal(err)
		}
		var printed struct{ Servers []importedServer }
		if err := yaml.Unmarshal(out.Bytes(), &printed); err != nil {
			t.Fatalf("the output is not YAML: %v\n%s", err, out.Bytes())
		}
		if diff := cmp.Diff(servers, printed.Servers, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the YAML reads back differently (-converted +read):\n%s", diff)
		}
		cfg, problems := config.Parse(out.Bytes(), func(string) (string, bool) { return "x", true })
		for _, p := range problems {
			i := slices.IndexFunc(servers, func(s importedServer) bool { return s.Name == p.Server })
			if i >= 0 && strings.HasSuffix(p.Path, ".url") && strings.Contains(servers[i].URL, "${") {
				continue
			}
			t.Fatalf("config.Parse: %v\n%s", p, out.Bytes())
		}
		if len(problems) == 0 && len(cfg.Servers) != len(servers) {
			t.Fatalf("parsed %d servers, printed %d", len(cfg.Servers), len(servers))
		}
	})
}

func TestShowClientVariable(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"workspaceFolder", "${workspaceFolder}"},
		{"/", "${/}"},
		{"input:api-key", "${input:api-key}"},
		{"input:a b", "${input:...}"},
		{"config:editor.fontSize", "${config:...}"},
		{"workspaceFolder:proj", "${workspaceFolder:...}"},
		{"ssw0rd", "${...}"},
		{"sk-SECRET", "${...}"},
		{"", "${...}"},
	}
	for _, tt := range tests {
		if got := showClientVariable(tt.ref); got != tt.want {
			t.Errorf("showClientVariable(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}
