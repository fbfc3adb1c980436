package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func hashOf(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestAPI(t *testing.T) {
	m := upstreamtest.NewManager(
		&upstreamtest.Server{Name: "a", Tools: []json.RawMessage{json.RawMessage(`{"name":"t"}`)}},
		&upstreamtest.Server{Name: "b", State: upstream.StateExited, Err: "signal: killed"},
	)
	core, err := gateway.New(gateway.Options{Upstreams: m})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()

	tests := []struct {
		name     string
		tokens   []string
		path     string
		auth     string
		status   int
		contains string
	}{
		{"off without tokens", nil, "/admin/servers", "Bearer x", 403, "admin API is off"},
		{"missing token", []string{hashOf("secret-token")}, "/admin/servers", "", 401, "missing admin bearer token"},
		{"wrong token", []string{hashOf("secret-token")}, "/admin/servers", "Bearer nope", 401, "invalid admin bearer token"},
		{"list", []string{hashOf("other"), hashOf("secret-token")}, "/admin/servers", "Bearer secret-token", 200, `"name":"b","transport":"","enabled":true,"state":"exited","error":"signal: killed"`},
		{"one", []string{hashOf("secret-token")}, "/admin/servers/a", "Bearer secret-token", 200, `"state":"running"`},
		{"unknown", []string{hashOf("secret-token")}, "/admin/servers/zz", "Bearer secret-token", 404, `unknown server \"zz\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, err := New(Options{Core: core, Tokens: tt.tokens})
			if err != nil {
				t.Fatal(err)
			}
			e := echo.New()
			api.Register(e)
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("GET %s = %d %s; want %d containing %s", tt.path, rec.Code, rec.Body, tt.status, tt.contains)
			}
			if strings.Contains(rec.Body.String(), "secret-token") {
				t.Error("the token leaked into a response")
			}
		})
	}
	if _, err := New(Options{Core: core, Tokens: []string{"plain"}}); err == nil {
		t.Error("New accepted a token that is not a hash")
	}
}
