package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

// tokenOutput matches what mcpgw token prints: the token, then the hash.
var tokenOutput = regexp.MustCompile(`(?m)^token: ([A-Za-z0-9_-]+)\nhash:  (sha256:[0-9a-f]{64})\n`)

// runToken runs mcpgw token and returns the token and the hash it printed.
func runToken(t *testing.T) (token, hash string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"token"}, &stdout, &stderr, noEnv); code != 0 {
		t.Fatalf("mcpgw token: exit code %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	m := tokenOutput.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("mcpgw token printed no token and hash:\n%s", stdout.String())
	}
	for _, want := range []string{"admin:\n    tokens: [\"" + m[2] + "\"]", "key_sha256: \"" + m[2] + "\""} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("mcpgw token's output lacks %q:\n%s", want, stdout.String())
		}
	}
	return m[1], m[2]
}

func noEnv(string) (string, bool) { return "", false }

// TestTokenCmd checks that mcpgw token prints a new random token of 32
// bytes and a hash that the gateway's own checks accept for it: as an
// admin token and as an API key, with the config as the output says to
// write it, while another token is refused.
func TestTokenCmd(t *testing.T) {
	token, hash := runToken(t)
	if b, err := base64.RawURLEncoding.DecodeString(token); err != nil || len(b) != 32 {
		t.Errorf("token %q is not 32 bytes in unpadded base64url: %d bytes, %v", token, len(b), err)
	}
	if other, _ := runToken(t); other == token {
		t.Errorf("two runs printed the same token")
	}

	yaml := fmt.Sprintf("data_dir: %q\nadmin:\n  tokens: [%q]\nauth:\n  api_keys:\n    - {principal: alice, key_sha256: %q}\n", t.TempDir(), hash, hash)
	cfg, ps := config.Parse([]byte(yaml), nil)
	if len(ps) > 0 {
		t.Fatalf("the config with the printed hash: %v", ps)
	}
	p, err := newParts(cfg, slog.New(slog.DiscardHandler), testTelemetry(t))
	if err != nil {
		t.Fatalf("newParts: %v", err)
	}
	srv := httptest.NewServer(p.handler)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.shutdown(ctx, 5*time.Second, nil); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		token  string
		want   int
	}{
		{"admin API with the token", http.MethodGet, "/admin/servers", "", token, http.StatusOK},
		{"admin API with another token", http.MethodGet, "/admin/servers", "", token + "x", http.StatusUnauthorized},
		{"MCP endpoint with the token as API key", http.MethodPost, "/mcp", initialize, token, http.StatusOK},
		{"MCP endpoint with another token", http.MethodPost, "/mcp", initialize, strings.ToUpper(token), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %d %s, want %d", tt.method, tt.path, resp.StatusCode, body, tt.want)
			}
		})
	}
}
