package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/oauthclient"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// fakeAccounts connects the principals in connected; the others get a
// ConnectRequired with a link naming them.
type fakeAccounts struct {
	mu        sync.Mutex
	connected map[string]bool
}

func (f *fakeAccounts) Check(_ context.Context, server, principal, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connected[principal] {
		return nil
	}
	return &oauthclient.ConnectRequired{Server: server, Principal: principal, URL: "https://gw.example/oauth/start/" + principal,
		ElicitationID: "link-" + principal, Reason: "no account is connected"}
}

func (f *fakeAccounts) connect(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected[p] = true
}

func TestAccounts_ConnectRequired(t *testing.T) {
	notes := &upstreamtest.Server{Name: "notes", Tools: raws(`{"name":"whoami","inputSchema":{"type":"object"}}`),
		Handle: func(_ context.Context, _ string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`), nil
		}}
	acc := &fakeAccounts{connected: map[string]bool{"carol": true}}
	s := newCore(t, upstreamtest.NewManager(notes), Options{
		Accounts: acc,
		Servers:  []config.Server{{Name: "notes", SessionMode: config.SessionPerPrincipal, OAuth: &config.ServerOAuth{}}},
	})
	ctx := context.Background()
	call := func(principal, caps, version string, sink func(string, json.RawMessage)) (*Result, error) {
		return s.Handle(ctx, &Request{Method: "tools/call", Principal: principal, Session: "sess-" + principal, SessionNotify: sink,
			Params: json.RawMessage(`{"name":"mcp__notes__whoami","arguments":{}}`),
			Client: Client{ProtocolVersion: version, Capabilities: json.RawMessage(caps)}})
	}

	t.Run("URL-mode elicitation client: -32042, then the completion", func(t *testing.T) {
		rec := &recorder{}
		_, err := call("alice", `{"elicitation":{"url":{}}}`, "2025-11-25", rec.sink)
		jerr := assertCode(t, err, CodeURLElicitationRequired, "Connect your account at notes")
		els, _, _ := rawjson.Get(jerr.Data, "elicitations")
		var got []map[string]string
		if err := json.Unmarshal(els, &got); err != nil || len(got) != 1 {
			t.Fatalf("data %s", jerr.Data)
		}
		if got[0]["url"] != "https://gw.example/oauth/start/alice" || got[0]["mode"] != "url" || !strings.HasPrefix(got[0]["elicitationId"], "mcpgw-e-") {
			t.Fatalf("elicitation %v: want the link, URL mode and an id of the gateway's", got[0])
		}
		s.AccountConnected("notes", "link-alice")
		want := `notifications/elicitation/complete {"elicitationId":"` + got[0]["elicitationId"] + `"}`
		if notes := rec.got(); len(notes) != 1 || notes[0] != want {
			t.Fatalf("notifications %v, want %s", notes, want)
		}
	})
	t.Run("any other 2025 client: -31007 with the link", func(t *testing.T) {
		_, err := call("bob", `{"elicitation":{"form":{}}}`, "2025-11-25", nil)
		jerr := assertCode(t, err, CodeConnectRequired, "open https://gw.example/oauth/start/bob")
		if !strings.Contains(string(jerr.Data), `"url":"https://gw.example/oauth/start/bob"`) || !strings.Contains(string(jerr.Data), `"server":"notes"`) {
			t.Errorf("data %s", jerr.Data)
		}
	})
	t.Run("2026-07-28 client: input_required with the link if it declared URL mode", func(t *testing.T) {
		_, err := call("bob", `{}`, "2026-07-28", nil)
		assertCode(t, err, CodeConnectRequired, "https://gw.example/oauth/start/bob")
		res, err := call("bob", `{"elicitation":{"url":{}}}`, "2026-07-28", nil)
		wantInputRequired(t, res, err)
		if !strings.Contains(string(res.Body), `"url":"https://gw.example/oauth/start/bob"`) || strings.Contains(string(res.Body), "elicitationId") {
			t.Errorf("input_required %s", res.Body)
		}
	})
	t.Run("anonymous: forbidden", func(t *testing.T) {
		_, err := call(auth.Anonymous, `{}`, "2025-11-25", nil)
		assertCode(t, err, CodeForbidden, "acts for each user's own account")
	})
	t.Run("a connected principal reaches the server", func(t *testing.T) {
		res, err := call("carol", `{}`, "2025-11-25", nil)
		if err != nil || !strings.Contains(string(res.Body), "hi") {
			t.Fatalf("call: %v %v", res, err)
		}
	})
}

func TestAccounts_ConnectTool(t *testing.T) {
	// The server could not be listed: no account to list it with.
	notes := &upstreamtest.Server{Name: "notes", State: upstream.StateRestarting, Err: "no principal has connected an account yet"}
	acc := &fakeAccounts{connected: map[string]bool{}}
	s := newCore(t, upstreamtest.NewManager(notes), Options{
		Accounts: acc,
		Servers:  []config.Server{{Name: "notes", SessionMode: config.SessionPerPrincipal, OAuth: &config.ServerOAuth{}}},
	})
	ctx := context.Background()
	res, err := s.Handle(ctx, &Request{Method: "tools/list", Principal: "alice"})
	if err != nil || !strings.Contains(string(res.Body), `"name":"mcp__notes__connect"`) {
		t.Fatalf("tools/list = %v, %v; want the connect tool", res, err)
	}
	connect := func() (*Result, error) {
		return s.Handle(ctx, &Request{Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"mcp__notes__connect","arguments":{}}`),
			Client: Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{}`)}})
	}
	_, err = connect()
	assertCode(t, err, CodeConnectRequired, "https://gw.example/oauth/start/alice")
	acc.connect("alice")
	res, err = connect()
	if err != nil || !strings.Contains(string(res.Body), "is connected") {
		t.Fatalf("connect when connected = %v, %v", res, err)
	}
	// A server with accounts that runs lists its own tools, not connect.
	other := newCore(t, upstreamtest.NewManager(&upstreamtest.Server{Name: "notes", Tools: raws(`{"name":"whoami","inputSchema":{"type":"object"}}`)}), Options{
		Accounts: acc,
		Servers:  []config.Server{{Name: "notes", SessionMode: config.SessionPerPrincipal, OAuth: &config.ServerOAuth{}}},
	})
	res, err = other.Handle(ctx, &Request{Method: "tools/list", Principal: "alice"})
	if err != nil || strings.Contains(string(res.Body), "connect") || !strings.Contains(string(res.Body), "whoami") {
		t.Fatalf("tools/list of a running server = %v, %v", res, err)
	}
}
