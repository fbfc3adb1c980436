package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestPrincipals_SourcesApart runs a gateway with both API keys and JWTs,
// where the API key of principal alice and a JWT whose sub is alice (from
// the configured issuer) are two different callers: the token's principal
// is "jwt:<issuer>#alice". It cannot use her session, see or touch her
// tasks, or read her media, and the access rules tell the two apart: a bare
// name is an API key's principal or group, a token's are named with the
// issuer.
func TestPrincipals_SourcesApart(t *testing.T) {
	const aliceKey = "e2e-principals-alice-key"
	is := newIssuer(t)
	iss := is.srv.URL
	tokenAlice, tokenStaff := "jwt:"+iss+"#alice", "jwt:"+iss+"#staff"
	g := startGateway(t, baseEnv(), fmt.Sprintf(`auth:
  api_keys:
    - {principal: alice, key_sha256: %q, groups: [red]}
  jwt:
    issuer: %s
    jwks_url: %s/jwks
acl:
  rules:
    - {effect: allow, principals: [alice], servers: [demo]}
    - {effect: allow, groups: [%q], servers: [demo]}
    - {effect: deny, groups: [red], tools: ["mcp__demo__sound"]}
    - {effect: deny, principals: [%q], tools: ["mcp__demo__document"]}
servers:
  - {name: demo, transport: stdio, command: %s}
`, hashToken(aliceKey), iss, iss, tokenStaff, tokenAlice, bin("demo-server")))
	g.waitState(t, "demo", "running")
	// A token whose subject and groups are those of the key: alice, red.
	token := is.token(t, "RS256", map[string]any{"aud": g.URL + "/mcp", "sub": "alice", "groups": []string{"red", "staff"}})
	defer func() {
		if strings.Contains(g.Stderr(), token) || strings.Contains(g.Stderr(), aliceKey) {
			t.Error("a token or key appears in the gateway's log")
		}
	}()
	alice := dialTasks(t, g, apiKeyHeader(aliceKey))
	other := dialTasks(t, g, apiKeyHeader(token))

	t.Run("admin sees two principals", func(t *testing.T) {
		var body struct {
			Sessions []struct {
				Principal string `json:"principal"`
			} `json:"sessions"`
		}
		g.adminGet(t, "/admin/sessions", &body)
		var got []string
		for _, s := range body.Sessions {
			got = append(got, s.Principal)
		}
		slices.Sort(got)
		if want := []string{"alice", tokenAlice}; !slices.Equal(got, want) {
			t.Errorf("the sessions' principals = %q, want %q", got, want)
		}
	})

	t.Run("access rules", func(t *testing.T) {
		names := func(c *taskClient) []string {
			var list struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			json.Unmarshal(c.call(t, "tools/list", nil), &list)
			var out []string
			for _, tl := range list.Tools {
				out = append(out, tl.Name)
			}
			return out
		}
		// The key's principal and group: bare names. The token's: named
		// with the issuer, so that the key's rules never cover it.
		for _, tc := range []struct {
			who       string
			c         *taskClient
			has, lack string
		}{
			{"the key", alice, "mcp__demo__document", "mcp__demo__sound"},
			{"the token", other, "mcp__demo__sound", "mcp__demo__document"},
		} {
			got := names(tc.c)
			if !slices.Contains(got, "mcp__demo__echo") || !slices.Contains(got, tc.has) || slices.Contains(got, tc.lack) {
				t.Errorf("%s's tools = %v, want echo and %s, not %s", tc.who, got, tc.has, tc.lack)
			}
		}
	})

	t.Run("her session", func(t *testing.T) {
		// A session of her own for this, so that the others do not hang on
		// it.
		mine := dialTasks(t, g, apiKeyHeader(aliceKey))
		sid := mine.SessionID()
		for _, tc := range []struct{ method, body, accept string }{
			{"POST", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "application/json, text/event-stream"},
			{"GET", "", "text/event-stream"},
			{"DELETE", "", ""},
		} {
			req, err := http.NewRequestWithContext(ctxT(t), tc.method, g.URL+"/mcp", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", mine.ProtocolVersion())
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s /mcp with her session id and the token = %d, want 404", tc.method, resp.StatusCode)
			}
		}
		// Her session outlived the attempts, DELETE included.
		mine.call(t, "tools/list", nil)
	})

	t.Run("her tasks", func(t *testing.T) {
		ref := noTaskShape(other.callErr(t, "tasks/get", map[string]string{"taskId": "forged-task-id-0123456789abcdef"}))
		if !strings.HasPrefix(ref, "-32602 ") {
			t.Fatalf("tasks/get of a forged id = %s, want -32602", ref)
		}
		tk := alice.create(t, "mcp__demo__slow", map[string]any{"seconds": 300}, 600000)
		var list struct {
			Tasks []taskObj `json:"tasks"`
		}
		json.Unmarshal(other.call(t, "tasks/list", nil), &list)
		for _, got := range list.Tasks {
			if got.TaskID == tk.TaskID {
				t.Errorf("the token's tasks/list shows her task")
			}
		}
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if got := noTaskShape(other.callErr(t, method, map[string]string{"taskId": tk.TaskID})); got != ref {
				t.Errorf("the token's %s of her task = %s, want the answer to a forged id, %s", method, got, ref)
			}
		}
		if got := alice.get(t, tk.TaskID); got.Status != "working" {
			t.Errorf("her task after the token's attempts = %+v, want working", got)
		}
		var got taskObj
		json.Unmarshal(alice.call(t, "tasks/cancel", map[string]string{"taskId": tk.TaskID}), &got)
		if got.Status != "cancelled" {
			t.Errorf("her tasks/cancel = %+v, want cancelled", got)
		}
	})

	t.Run("her media", func(t *testing.T) {
		link := func(c *taskClient) string {
			var res struct {
				Content []struct{ Type, URI string }
			}
			raw := c.call(t, "tools/call", map[string]any{"name": "mcp__demo__picture", "arguments": map[string]any{}})
			json.Unmarshal(raw, &res)
			if len(res.Content) != 1 || res.Content[0].Type != "resource_link" || !mediaURL.MatchString(res.Content[0].URI) {
				t.Fatalf("tools/call picture = %.300s, want a media link", raw)
			}
			return res.Content[0].URI
		}
		hers := link(alice)
		// Not callErr: a wrong answer holds the picture, too big to print.
		res, err := other.Call(ctxT(t), "resources/read", map[string]string{"uri": hers})
		if err == nil || !strings.Contains(err.Error(), "unknown or has expired") {
			t.Errorf("the token's resources/read of her media = %d bytes, %v; want not found", len(res), err)
		}
		// The media id is keyed on its owner: the same picture has another
		// link for the token.
		if theirs := link(other); theirs == hers {
			t.Errorf("the token got her media link %s for the same picture", hers)
		}
		var rr struct {
			Contents []struct{ Blob string }
		}
		json.Unmarshal(alice.call(t, "resources/read", map[string]string{"uri": hers}), &rr)
		if len(rr.Contents) != 1 || rr.Contents[0].Blob == "" {
			t.Errorf("her resources/read of her media gave %d contents", len(rr.Contents))
		}
	})
}
