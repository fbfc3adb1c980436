package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/config"
)

// TestRefusalShape: a refusal made before any handler runs (a foreign
// Host or Origin, a body framed by Transfer-Encoding) has the shape of its
// route, on both listeners: a JSON-RPC error with a null id on /mcp, which
// MCP clients read, and the admin API's {"message"} everywhere else
// (/admin, /media, /healthz, and /metrics on the admin listener), never a
// JSON-RPC error there.
func TestRefusalShape(t *testing.T) {
	build := func(t *testing.T, adminListen string) *parts {
		t.Helper()
		yaml := "data_dir: " + t.TempDir() + "\npublic_url: https://gw.example.com\n"
		if adminListen != "" {
			yaml += "admin:\n  listen: " + adminListen + "\n"
		}
		cfg, ps := config.Parse([]byte(yaml), nil)
		if len(ps) > 0 {
			t.Fatalf("config: %v", ps)
		}
		p, err := newParts(cfg, slog.New(slog.DiscardHandler), testTelemetry(t))
		if err != nil {
			t.Fatalf("newParts: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.shutdown(ctx, 5*time.Second, nil); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		return p
	}
	beside, apart := build(t, ""), build(t, "127.0.0.1:0")

	const (
		foreignHost = "evil.example.com"
		chunked     = "chunked"
	)
	tests := []struct {
		name    string
		handler http.Handler
		method  string
		path    string
		host    string // a foreign Host, or "" for the gateway's
		framing string // chunked: framed by Transfer-Encoding
		status  int
		jsonrpc bool   // a JSON-RPC error, else {"message"}
		says    string // in the message
	}{
		{"/mcp, a foreign host", beside.handler, "POST", "/mcp", foreignHost, "", 403, true, "allowed_hosts"},
		{"/mcp, chunked", beside.handler, "POST", "/mcp", "", chunked, 400, true, "Transfer-Encoding"},
		{"/admin, a foreign host", beside.handler, "GET", "/admin/servers", foreignHost, "", 403, false, "allowed_hosts"},
		{"/admin, chunked", beside.handler, "POST", "/admin/reload", "", chunked, 400, false, "Transfer-Encoding"},
		{"/media, a foreign host", beside.handler, "GET", "/media/none.png", foreignHost, "", 403, false, "allowed_hosts"},
		{"/media, chunked", beside.handler, "GET", "/media/none.png", "", chunked, 400, false, "Transfer-Encoding"},
		{"/healthz, chunked", beside.handler, "GET", "/healthz", "", chunked, 400, false, "Transfer-Encoding"},
		{"/metrics, chunked", beside.handler, "GET", "/metrics", "", chunked, 400, false, "Transfer-Encoding"},
		{"admin listener: /admin, a foreign host", apart.adminHandler, "GET", "/admin/servers", foreignHost, "", 403, false, "allowed_hosts"},
		{"admin listener: /admin, chunked", apart.adminHandler, "POST", "/admin/reload", "", chunked, 400, false, "Transfer-Encoding"},
		{"admin listener: /metrics, chunked", apart.adminHandler, "GET", "/metrics", "", chunked, 400, false, "Transfer-Encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader("0\r\n\r\n"))
			req.Host = "gw.example.com"
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.framing == chunked {
				req.TransferEncoding = []string{chunked}
			}
			rec := httptest.NewRecorder()
			tt.handler.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tt.status || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s = %d (%s) %s; want %d application/json", tt.method, tt.path, rec.Code, rec.Header().Get("Content-Type"), body, tt.status)
			}
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
				Message *string `json:"message"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("the body %q: %v", body, err)
			}
			switch {
			case tt.jsonrpc:
				if got.JSONRPC != "2.0" || string(got.ID) != "null" || got.Error == nil || got.Error.Code != -32600 ||
					!strings.Contains(got.Error.Message, tt.says) || got.Message != nil {
					t.Errorf("the body %s; want a JSON-RPC error -32600 with a null id saying %q", body, tt.says)
				}
			default:
				if got.JSONRPC != "" || got.Error != nil || got.Message == nil || !strings.Contains(*got.Message, tt.says) {
					t.Errorf(`the body %s; want {"message"} saying %q, no JSON-RPC error`, body, tt.says)
				}
			}
		})
	}
}
