package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseServer(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "MCPGW_UPSTREAM_TOKEN" {
			return "tok", true
		}
		return "", false
	}
	tests := []struct {
		name     string
		in       string
		want     func(*Server) bool
		problems []string // "path: message" prefixes
	}{
		{"http entry", `{"name":"web","transport":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer ${MCPGW_UPSTREAM_TOKEN}"}}`,
			func(s *Server) bool {
				return s.Name == "web" && s.URL == "https://mcp.example.com/mcp" && s.Headers["Authorization"] == "Bearer tok" && s.SessionMode == SessionShared && s.IsEnabled()
			}, nil},
		{"stdio entry, YAML", "name: files\ntransport: stdio\ncommand: /bin/cat\nargs: [a]\nenabled: false\n",
			func(s *Server) bool { return s.Command == "/bin/cat" && len(s.Args) == 1 && !s.IsEnabled() }, nil},
		{"unknown key", `{"name":"web","transport":"http","url":"https://e/mcp","urll":"x"}`, nil, []string{`urll: unknown key`}},
		{"no transport", `{"name":"web","url":"https://e/mcp"}`, nil, []string{"transport: missing"}},
		{"bad url", `{"name":"web","transport":"http","url":"ftp://e"}`, nil, []string{"url: "}},
		{"bad name", `{"name":"Web Server","transport":"http","url":"https://e/mcp"}`, nil, []string{"name: "}},
		{"unset variable", `{"name":"web","transport":"http","url":"https://e/mcp","api_key":"${NOPE}"}`, nil, []string{"api_key: "}},
		{"wrong type", `{"name":"web","transport":"http","url":"https://e/mcp","timeout":true}`, nil, []string{"timeout: "}},
		{"not an object", `["a"]`, nil, []string{": must be a mapping"}},
		{"empty", ``, nil, []string{": empty entry"}},
		{"syntax", `{"name":`, nil, []string{": "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ps := ParseServer([]byte(tt.in), Naming{MaxLength: DefaultMaxNameLength, Separator: DefaultSeparator, Prefix: DefaultPrefix, PrefixMode: PrefixAlways}, env)
			if tt.problems == nil {
				if len(ps) != 0 {
					t.Fatalf("problems: %v", ps)
				}
				if !tt.want(&s) {
					t.Errorf("server = %+v", s)
				}
				return
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Path+": "+p.Message)
			}
			ok := len(got) == len(tt.problems)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tt.problems[i])
			}
			if !ok {
				t.Errorf("problems %s", cmp.Diff(tt.problems, got))
			}
		})
	}
}

func TestAdminListen(t *testing.T) {
	tests := []struct {
		yaml, problem string
	}{
		{"listen: 127.0.0.1:8080\nadmin:\n  listen: 127.0.0.1:9090\n", ""},
		{"listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\n", ""}, // two free ports
		{"listen: 127.0.0.1:8080\nadmin:\n  listen: 127.0.0.1:8080\n", "admin.listen: is the same address as listen"},
		{"admin:\n  listen: 9090\n", `admin.listen: "9090" is not a host:port address`},
	}
	for _, tt := range tests {
		_, ps := Parse([]byte(tt.yaml), nil)
		got := ""
		if len(ps) > 0 {
			got = ps[0].Path + ": " + ps[0].Message
		}
		if tt.problem == "" && got != "" || !strings.HasPrefix(got, tt.problem) {
			t.Errorf("%q: problems %v, want %q", tt.yaml, ps, tt.problem)
		}
	}
}
