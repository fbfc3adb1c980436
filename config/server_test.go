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
		{"reserved name", `{"name":"mcpgw","transport":"http","url":"https://e/mcp"}`, nil, []string{`name: "mcpgw" is reserved`}},
		{"unset variable", `{"name":"web","transport":"http","url":"https://e/mcp","api_key":"${NOPE}"}`, nil, []string{"api_key: "}},
		{"wrong type", `{"name":"web","transport":"http","url":"https://e/mcp","timeout":true}`, nil, []string{"timeout: "}},
		{"not an object", `["a"]`, nil, []string{": must be a mapping"}},
		{"empty", ``, nil, []string{": empty entry"}},
		{"syntax", `{"name":`, nil, []string{": "}},
		{"oauth, empty: discover everything, per principal", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{}}`,
			func(s *Server) bool {
				return s.OAuth != nil && s.GrantOf() == GrantAuthorizationCode && s.PerUser() && s.SessionMode == SessionPerPrincipal
			}, nil},
		{"oauth, client credentials, secret expanded", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"grant":"client_credentials","client_id":"c","client_secret":"${MCPGW_UPSTREAM_TOKEN}","scopes":["a","b"]}}`,
			func(s *Server) bool {
				return s.OAuth.ClientSecret == "tok" && !s.PerUser() && s.SessionMode == SessionShared && len(s.OAuth.Scopes) == 2
			}, nil},
		{"no oauth", `{"name":"gh","transport":"http","url":"https://e/mcp"}`,
			func(s *Server) bool { return s.OAuth == nil && s.GrantOf() == "" && !s.PerUser() }, nil},
		{"oauth on stdio", `{"name":"gh","transport":"stdio","command":"x","oauth":{}}`, nil, []string{"oauth: is for http and sse servers"}},
		{"oauth and api_key", `{"name":"gh","transport":"http","url":"https://e/mcp","api_key":"k","oauth":{}}`, nil, []string{"api_key: conflicts with oauth"}},
		{"oauth and an Authorization header", `{"name":"gh","transport":"http","url":"https://e/mcp","headers":{"authorization":"x"},"oauth":{}}`, nil, []string{"headers.authorization: conflicts with oauth"}},
		{"oauth, bad grant", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"grant":"password"}}`, nil, []string{`oauth.grant: "password" is not one of`}},
		{"oauth, secret without id", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"client_secret":"s"}}`, nil, []string{"oauth.client_secret: needs client_id"}},
		{"oauth, client credentials without id", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"grant":"client_credentials"}}`, nil, []string{"oauth.client_id: missing"}},
		{"oauth, metadata URL over http", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"client_metadata_url":"http://e.com/c.json"}}`, nil, []string{"oauth.client_metadata_url: must be an https URL"}},
		{"oauth, metadata URL without path", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"client_metadata_url":"https://e.com"}}`, nil, []string{"oauth.client_metadata_url: needs a path"}},
		{"oauth, bad scope", `{"name":"gh","transport":"http","url":"https://e/mcp","oauth":{"scopes":["a b"]}}`, nil, []string{`oauth.scopes[0]: "a b" is not a scope`}},
		{"oauth, shared session", `{"name":"gh","transport":"http","url":"https://e/mcp","session_mode":"shared","oauth":{}}`, nil, []string{"session_mode: must be per_principal"}},
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
