package auth

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
)

func TestMetadataHandler(t *testing.T) {
	jwt := config.JWT{Issuer: "https://issuer.example", Scopes: []string{"mcp:tools", "mcp:admin"}}
	const body = `{"resource":"https://gw.example/mcp","authorization_servers":["https://issuer.example"],"scopes_supported":["mcp:tools","mcp:admin"],"bearer_methods_supported":["header"]}`
	tests := []struct {
		name   string
		jwt    config.JWT
		method string
		path   string
		status int
		body   string
		header map[string]string
	}{
		{"root form", jwt, "GET", "/.well-known/oauth-protected-resource", 200, body,
			map[string]string{"Content-Type": "application/json", "Access-Control-Allow-Origin": "*"}},
		{"path form", jwt, "GET", "/.well-known/oauth-protected-resource/mcp", 200, body, nil},
		{"HEAD", jwt, "HEAD", "/.well-known/oauth-protected-resource/mcp", 200, "", map[string]string{"Content-Type": "application/json"}},
		{"preflight", jwt, "OPTIONS", "/.well-known/oauth-protected-resource", 204, "",
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "MCP-Protocol-Version"}},
		{"POST", jwt, "POST", "/.well-known/oauth-protected-resource", 405, "method not allowed: GET the protected-resource metadata\n",
			map[string]string{"Allow": "GET, HEAD, OPTIONS"}},
		{"another resource", jwt, "GET", "/.well-known/oauth-protected-resource/other", 404, "404 page not found\n", nil},
		{"no scopes, other servers", config.JWT{Issuer: "https://issuer.example", AuthorizationServers: []string{"https://as1.example", "https://as2.example"}},
			"GET", "/.well-known/oauth-protected-resource", 200,
			`{"resource":"https://gw.example/mcp","authorization_servers":["https://as1.example","https://as2.example"],"bearer_methods_supported":["header"]}`, nil},
		{"JWTs off", config.JWT{}, "GET", "/.well-known/oauth-protected-resource", 404, "404 page not found\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Options{JWT: tt.jwt, Resource: testResource})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			a.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(tt.method, "https://gw.example"+tt.path, nil))
			if rec.Code != tt.status || rec.Body.String() != tt.body {
				t.Errorf("%s %s = %d %s; want %d %s", tt.method, tt.path, rec.Code, rec.Body, tt.status, tt.body)
			}
			for k, v := range tt.header {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	a, err := New(Options{JWT: config.JWT{Issuer: "https://issuer.example", Scopes: []string{"s"}}, Resource: testResource})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := a.Metadata()
	want := ResourceMetadata{Resource: testResource, AuthorizationServers: []string{"https://issuer.example"}, ScopesSupported: []string{"s"}, BearerMethodsSupported: []string{"header"}}
	if diff := cmp.Diff(want, m); !ok || diff != "" {
		t.Errorf("Metadata() %v (-want +got):\n%s", ok, diff)
	}
	if diff := cmp.Diff([]string{MetadataPath, MetadataPath + "/mcp"}, a.MetadataPaths()); diff != "" {
		t.Errorf("MetadataPaths (-want +got):\n%s", diff)
	}
	m.AuthorizationServers[0] = "changed"
	if again, _ := a.Metadata(); again.AuthorizationServers[0] != "https://issuer.example" {
		t.Error("Metadata returned the Authenticator's own slice")
	}

	root, err := New(Options{JWT: config.JWT{Issuer: "https://issuer.example"}, Resource: "https://gw.example"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{MetadataPath}, root.MetadataPaths()); diff != "" {
		t.Errorf("MetadataPaths of a root resource (-want +got):\n%s", diff)
	}
	off, _ := New(Options{})
	if _, ok := off.Metadata(); ok || off.MetadataPaths() != nil {
		t.Error("metadata with JWTs off")
	}
}
