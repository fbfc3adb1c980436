package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/e2e/fixtures/oauthas"
)

// TestOAuth_ConnectAccounts runs mcpgw in front of an MCP server protected
// by a real OAuth 2.1 authorization server (fosite, on loopback): two
// principals connect their own accounts through the links mcpgw gives
// their Go SDK clients, and each call reaches the server with their own
// token; an expired token is refreshed; a callback brought by another
// principal's browser is refused; a revoked grant leads back to the link;
// the admin sees how many are connected and disconnects one; a principal
// disconnects themselves. No token is ever in the gateway's logs.
func TestOAuth_ConnectAccounts(t *testing.T) {
	as, err := oauthas.Start(oauthas.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	const aliceKey, bobKey = "e2e-oauth-alice-key", "e2e-oauth-bob-key"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`secret: e2e-oauth-secret-of-at-least-32-bytes
auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
    - {principal: bob, key_sha256: %q}
servers:
  - name: notes
    transport: http
    url: %s
    oauth: {}
`, hashToken(aliceKey), hashToken(bobKey), as.MCPURL()))
	defer func() {
		// No code, access or refresh token the AS issued may reach a
		// log of the gateway (its own, or a server's log file).
		logs := g.Stderr()
		filepath.WalkDir(g.DataDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
				b, _ := os.ReadFile(path)
				logs += string(b)
			}
			return nil
		})
		issued := as.Issued()
		if len(issued) < 6 {
			t.Errorf("the AS issued %d codes and tokens; the test expected more", len(issued))
		}
		for _, tok := range issued {
			if strings.Contains(logs, tok) {
				t.Errorf("a token the AS issued (%d bytes) is in the gateway's logs", len(tok))
			}
		}
	}()

	// Before any account is connected the server lists only its connect
	// tool.
	alice := dialOAuth(t, g, aliceKey, "2026-07-28", false, nil)
	waitOAuthTools(t, alice.cs, "mcp__notes__connect")
	if st := g.status(t, "notes"); st.State == "running" {
		t.Fatalf("the server runs before any account is connected: %+v", st)
	}

	// Alice's (2026-07-28) client declares no URL-mode elicitation: -31007
	// holds the link.
	link := alice.wantConnect(t, "mcp__notes__connect")
	visit(t, as.UserAgent("alice"), link, http.StatusOK)
	g.waitState(t, "notes", "running")
	waitOAuthTools(t, alice.cs, "mcp__notes__whoami")
	if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
		t.Fatalf("alice's call reached the server as %q", got)
	}

	// Bob's 2025-11-25 client declares URL-mode elicitation: -32042, then
	// notifications/elicitation/complete with the same id.
	bob := dialOAuth(t, g, bobKey, "2025-11-25", true, nil)
	link, id := bob.wantElicitation(t, "mcp__notes__whoami")
	visit(t, as.UserAgent("bob"), link, http.StatusOK)
	bob.waitComplete(t, id)
	if got := bob.call(t, "mcp__notes__whoami"); got != "bob" {
		t.Fatalf("bob's call reached the server as %q", got)
	}
	if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
		t.Fatalf("after bob connected, alice's call reached the server as %q", got)
	}
	if n := connectedCount(t, g); n != 2 {
		t.Fatalf("oauth_connected = %d, want 2", n)
	}

	t.Run("refresh after expiry", func(t *testing.T) {
		before := as.Stats().Refreshes
		as.ExpireAccessTokens()
		if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
			t.Fatalf("after expiry alice's call reached the server as %q", got)
		}
		if after := as.Stats().Refreshes; after <= before {
			t.Fatalf("refreshes %d → %d: the expired token was not refreshed", before, after)
		}
		if res := as.Stats().TokenResource; res != as.MCPURL() {
			t.Errorf("the last token request's resource = %q, want %q", res, as.MCPURL())
		}
	})

	t.Run("a callback in another principal's browser is refused", func(t *testing.T) {
		adminDelete(t, g, "/admin/servers/notes/oauth/bob", http.StatusNoContent)
		adminDelete(t, g, "/admin/servers/notes/oauth/bob", http.StatusNotFound)
		link, _ := bob.wantElicitation(t, "mcp__notes__whoami")
		// Bob's browser starts, and the AS sends it back with bob's state…
		bobBrowser := as.UserAgent("bob")
		callback := stopAtCallback(t, bobBrowser, link)
		// …which alice's browser brings to the gateway instead.
		visit(t, as.UserAgent("alice"), callback, http.StatusForbidden)
		if n := connectedCount(t, g); n != 1 {
			t.Fatalf("oauth_connected = %d after a refused callback, want 1 (alice)", n)
		}
		bob.wantElicitation(t, "mcp__notes__whoami")
		// Bob's own browser completes it.
		visit(t, bobBrowser, callback, http.StatusOK)
		if got := bob.call(t, "mcp__notes__whoami"); got != "bob" {
			t.Fatalf("bob's call reached the server as %q", got)
		}
	})

	t.Run("a revoked grant leads back to the link", func(t *testing.T) {
		as.Revoke("alice")
		link := alice.wantConnect(t, "mcp__notes__whoami")
		if link == "" {
			t.Fatal("no link")
		}
		// A 2026-07-28 client that declares URL-mode elicitation gets it
		// as input_required: its user opens the link, it retries, and the
		// call goes through in one CallTool.
		modern := dialOAuth(t, g, aliceKey, "2026-07-28", true, as.UserAgent("alice"))
		if got := modern.call(t, "mcp__notes__whoami"); got != "alice" {
			t.Fatalf("after reconnecting alice's call reached the server as %q", got)
		}
		if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
			t.Fatalf("alice's first client reached the server as %q", got)
		}
	})

	t.Run("a principal disconnects themselves", func(t *testing.T) {
		if got := ownConnections(t, g, bobKey); got != `[{"server":"notes","connected":true}]` {
			t.Fatalf("bob's GET /oauth/connections = %s, want notes connected", got)
		}
		before := as.Stats().Revocations
		req, _ := http.NewRequest(http.MethodDelete, g.URL+"/oauth/connections/notes", nil)
		req.Header.Set("Authorization", "Bearer "+bobKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE /oauth/connections/notes = %d", resp.StatusCode)
		}
		if as.Stats().Revocations <= before {
			t.Error("disconnecting revoked nothing at the authorization server")
		}
		bob.wantElicitation(t, "mcp__notes__whoami")
		if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
			t.Fatalf("bob's disconnect reached alice: %q", got)
		}
		if got := ownConnections(t, g, bobKey); got != `[{"server":"notes","connected":false}]` {
			t.Fatalf("bob's GET /oauth/connections after disconnecting = %s, want notes not connected", got)
		}
		if got := ownConnections(t, g, aliceKey); got != `[{"server":"notes","connected":true}]` {
			t.Fatalf("alice's GET /oauth/connections after bob disconnected = %s, want notes connected", got)
		}
		resp, err = http.Get(g.URL + "/oauth/connections")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /oauth/connections without a key = %d, want 401", resp.StatusCode)
		}
	})
}

// ownConnections returns the connections list of GET /oauth/connections
// for the principal of key, as compact JSON.
func ownConnections(t *testing.T, g *gateway, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/oauth/connections", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Connections json.RawMessage `json:"connections"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /oauth/connections = %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET /oauth/connections: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, body.Connections); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// oauthClient is a Go SDK client of the gateway with a principal's key.
type oauthClient struct {
	cs       *mcp.ClientSession
	complete chan string // elicitation ids of notifications/elicitation/complete
}

// dialOAuth connects a client with key. A 2025-11-25 client with
// urlElicitation declares URL-mode elicitation (and gets -32042); a
// 2026-07-28 one with a browser declares it too and, as its user would,
// opens each URL it is asked to in browser before it answers.
func dialOAuth(t *testing.T, g *gateway, key, version string, urlElicitation bool, browser *http.Client) *oauthClient {
	t.Helper()
	c := &oauthClient{complete: make(chan string, 8)}
	opts := &mcp.ClientOptions{
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			c.complete <- req.Params.ElicitationID
		},
	}
	if urlElicitation {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if browser == nil || req.Params.Mode != "url" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			resp, err := browser.Get(req.Params.URL)
			if err != nil {
				return nil, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth", Version: "1"}, opts)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

func (c *oauthClient) call(t *testing.T, tool string) string {
	t.Helper()
	res, err := c.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("calling %s: %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// wantConnect calls tool and wants -31007 with the link in its message and
// data.
func (c *oauthClient) wantConnect(t *testing.T, tool string) string {
	t.Helper()
	_, err := c.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31007 {
		t.Fatalf("calling %s: %v, want -31007", tool, err)
	}
	var data struct{ Server, URL string }
	if err := json.Unmarshal(werr.Data, &data); err != nil || data.Server != "notes" || !strings.Contains(werr.Message, data.URL) || !strings.Contains(data.URL, "/oauth/start/") {
		t.Fatalf("-31007 %q data %s: want the link in both", werr.Message, werr.Data)
	}
	return data.URL
}

// wantElicitation calls tool and wants -32042 with one URL-mode
// elicitation: its link and id.
func (c *oauthClient) wantElicitation(t *testing.T, tool string) (link, id string) {
	t.Helper()
	_, err := c.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32042 {
		t.Fatalf("calling %s: %v, want -32042", tool, err)
	}
	var data struct {
		Elicitations []struct{ Mode, URL, ElicitationID string }
	}
	if err := json.Unmarshal(werr.Data, &data); err != nil || len(data.Elicitations) != 1 || data.Elicitations[0].Mode != "url" || data.Elicitations[0].ElicitationID == "" {
		t.Fatalf("-32042 data %s", werr.Data)
	}
	return data.Elicitations[0].URL, data.Elicitations[0].ElicitationID
}

func (c *oauthClient) waitComplete(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-c.complete:
		if got != id {
			t.Fatalf("notifications/elicitation/complete for %q, want %q", got, id)
		}
	case <-ctxT(t).Done():
		t.Fatal("no notifications/elicitation/complete")
	}
}

// waitTools lists until the gateway lists tool (a server's tools are
// merged a moment after it runs), for at most a minute.
func waitOAuthTools(t *testing.T, cs *mcp.ClientSession, tool string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := toolsByName(t, cs)[tool]; ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway does not list %s after a minute", tool)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// visit opens link in browser, following redirects, and wants status at
// the end.
func visit(t *testing.T, browser *http.Client, link string, status int) {
	t.Helper()
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatalf("opening the link: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("the link ended with %d, want %d: %s", resp.StatusCode, status, body)
	}
}

// stopAtCallback follows link in browser up to the gateway's callback and
// returns the callback URL unvisited.
func stopAtCallback(t *testing.T, browser *http.Client, link string) string {
	t.Helper()
	b := *browser
	b.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.Contains(req.URL.Path, "/oauth/callback") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if !strings.Contains(loc, "/oauth/callback") {
		t.Fatalf("the AS sent the browser to %q, not the callback", loc)
	}
	return loc
}

func connectedCount(t *testing.T, g *gateway) int {
	t.Helper()
	var st struct {
		Connected *int `json:"oauth_connected"`
	}
	g.adminGet(t, "/admin/servers/notes", &st)
	if st.Connected == nil {
		t.Fatal("the server's status has no oauth_connected")
	}
	return *st.Connected
}

func adminDelete(t *testing.T, g *gateway, path string, status int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, g.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+g.Admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("DELETE %s = %d, want %d", path, resp.StatusCode, status)
	}
}

// TestOAuth_TokenExchange: where the gateway and a server trust the same
// identity provider, a principal authenticated by that provider's JWT
// reaches the server with a token the AS exchanged for theirs (RFC 8693),
// without connecting anything; an API key's principal cannot, since an API
// key never leaves the gateway.
func TestOAuth_TokenExchange(t *testing.T) {
	idp := newIssuer(t)
	as, err := oauthas.Start(oauthas.Options{Logf: t.Logf, SubjectTokens: func(tok string) (string, error) {
		return idp.verify(tok)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	const clientSecret = "e2e-exchange-client-secret"
	if err := as.RegisterExchangeClient("mcpgw", clientSecret); err != nil {
		t.Fatal(err)
	}
	const bobKey = "e2e-exchange-bob-key"
	g := startGateway(t, append(baseEnv(), "MCPGW_E2E_EXCHANGE_SECRET="+clientSecret), fmt.Sprintf(`secret: e2e-exchange-secret-of-at-least-32-bytes
auth:
  api_keys:
    - {principal: bob, key_sha256: %q}
  jwt:
    issuer: %s
    jwks_url: %s/jwks
servers:
  - name: notes
    transport: http
    url: %s
    oauth:
      grant: token_exchange
      client_id: mcpgw
      client_secret: ${MCPGW_E2E_EXCHANGE_SECRET}
`, hashToken(bobKey), idp.srv.URL, idp.srv.URL, as.MCPURL()))
	jwt := idp.token(t, "RS256", map[string]any{"aud": g.URL + "/mcp", "sub": "alice"})
	defer func() {
		logs := g.Stderr()
		for _, tok := range append(as.Issued(), jwt, clientSecret) {
			if strings.Contains(logs, tok) {
				t.Errorf("a token or secret (%d bytes) is in the gateway's log", len(tok))
			}
		}
	}()

	alice := dialOAuth(t, g, jwt, "2026-07-28", false, nil)
	waitOAuthTools(t, alice.cs, "mcp__notes__connect")
	// Calling connect exchanges alice's token; then the server is listed
	// with it and its tools replace connect.
	if got := alice.call(t, "mcp__notes__connect"); !strings.Contains(got, "is connected") {
		t.Fatalf("connect = %q", got)
	}
	g.waitState(t, "notes", "running")
	waitOAuthTools(t, alice.cs, "mcp__notes__whoami")
	if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
		t.Fatalf("alice's call reached the server as %q", got)
	}
	if n := as.Stats().Exchanges; n < 1 {
		t.Fatalf("exchanges = %d", n)
	}
	// An expired exchanged token is exchanged again.
	before := as.Stats().Exchanges
	as.ExpireAccessTokens()
	if got := alice.call(t, "mcp__notes__whoami"); got != "alice" {
		t.Fatalf("after expiry alice's call reached the server as %q", got)
	}
	if after := as.Stats().Exchanges; after <= before {
		t.Fatalf("exchanges %d → %d after expiry", before, after)
	}

	bob := dialOAuth(t, g, bobKey, "2026-07-28", false, nil)
	_, err = bob.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__notes__whoami", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -31004 || !strings.Contains(werr.Message, "API key") {
		t.Fatalf("bob (API key) calling a token_exchange server: %v, want -31004 naming the API key", err)
	}
}
