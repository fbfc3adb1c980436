package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sessions tests: a gateway with a fixed secret serves the sessions
// it issued after a restart, whether it was stopped (SIGTERM) or killed
// (SIGKILL).

const (
	sessionsSecret         = "e2e-sessions-secret-not-a-real-one-0123456789"
	aliceKey, bobKey       = "e2e-sessions-alice-key", "e2e-sessions-bob-key"
	sessionsProtocolLatest = "2025-11-25"
)

// startSessionsGateway runs mcpgw with its config and data in dir,
// listening on listen (127.0.0.1:0 the first time, the same address
// after a restart, so that a client's endpoint stays valid).
func startSessionsGateway(t *testing.T, dir, listen string) *gateway {
	t.Helper()
	config := fmt.Sprintf(`listen: %s
data_dir: %s
secret: %q
admin:
  tokens: [%q]
log:
  level: debug
auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
    - {principal: bob, key_sha256: %q}
servers:
  - {name: demo, transport: stdio, command: %s}
  - {name: solo, transport: stdio, command: %s, session_mode: per_session}
`, listen, filepath.Join(dir, "data"), sessionsSecret, hashToken(adminToken), hashToken(aliceKey), hashToken(bobKey), bin("demo-server"), bin("demo-server"))
	path := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, baseEnv(), "mcpgw", "serve", "--config", path)
	addr := p.waitLine(t, "the gateway's listening line", func(l string) string {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
		return ""
	})
	g := &gateway{process: p, URL: "http://" + addr, Admin: adminToken, DataDir: filepath.Join(dir, "data")}
	g.waitState(t, "demo", "running")
	g.waitState(t, "solo", "running")
	return g
}

// mcpReq sends one HTTP request to /mcp as the holder of key, on session
// sid (if not ""), with extra headers in pairs.
func mcpReq(t *testing.T, g *gateway, method, key, sid, body string, hdr ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, g.URL+"/mcp", rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /mcp: %v", method, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// nextEvent reads the next event of an event stream (readSSE); ok is
// false at its end.
func nextEvent(t *testing.T, rd *bufio.Reader) (ev sseEvent, ok bool) {
	t.Helper()
	ev, err := readSSE(rd)
	switch {
	case err == nil:
		return ev, true
	case errors.Is(err, io.EOF):
		return ev, false
	}
	t.Fatalf("reading an event stream: %v", err)
	return ev, false
}

// rpcAnswer is the parts of a JSON-RPC response the tests read.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// answerOf reads the response of a POSTed request: the JSON body, or the
// last event of an event stream.
func answerOf(t *testing.T, resp *http.Response) rpcAnswer {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var data string
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		rd := bufio.NewReader(resp.Body)
		for {
			ev, ok := nextEvent(t, rd)
			if !ok {
				break
			}
			if ev.data != "" {
				data = ev.data
			}
		}
	} else {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		data = string(b)
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		t.Fatalf("answer %q: %v", data, err)
	}
	return a
}

// initializeAs starts a session of version for the holder of key.
func initializeAs(t *testing.T, g *gateway, key, version string) string {
	t.Helper()
	resp := mcpReq(t, g, http.MethodPost, key, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if a := answerOf(t, resp); a.Error != nil {
		t.Fatalf("initialize: %+v", a.Error)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	mcpReq(t, g, http.MethodPost, key, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// callAdd calls the demo server's add tool on session sid and returns its
// result.
func callAdd(t *testing.T, g *gateway, key, sid string) map[string]json.RawMessage {
	t.Helper()
	a := answerOf(t, mcpReq(t, g, http.MethodPost, key, sid, `{"jsonrpc":"2.0","id":"add","method":"tools/call","params":{"name":"mcp__demo__add","arguments":{"a":2,"b":3}}}`))
	if a.Error != nil {
		t.Fatalf("tools/call add: %+v", a.Error)
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(a.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSessions_SurviveRestart: with a fixed secret, a session issued
// before a restart is served after it, for SIGTERM and for SIGKILL: its
// version (a 2025-03-26 session still gets no structuredContent), only to
// its principal, with its per_session upstream started again; a GET that
// resumes a stream from before the restart gets a fresh stream; a deleted
// session stays 404; and the official Go SDK client's session goes on
// across the restart.
func TestSessions_SurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			g := startSessionsGateway(t, dir, "127.0.0.1:0")
			listen := strings.TrimPrefix(g.URL, "http://")

			old := initializeAs(t, g, aliceKey, "2025-03-26")
			if res := callAdd(t, g, aliceKey, old); res["structuredContent"] != nil || res["content"] == nil {
				t.Fatalf("add on a 2025-03-26 session before the restart: %v", res)
			}

			// A 2025-11-25 session with a GET stream (its priming event
			// names stream 0) and a call on the per_session server.
			cur := initializeAs(t, g, aliceKey, sessionsProtocolLatest)
			get := mcpReq(t, g, http.MethodGet, aliceKey, cur, "")
			primed, ok := nextEvent(t, bufio.NewReader(get.Body))
			if get.StatusCode != http.StatusOK || !ok || primed.id == "" {
				t.Fatalf("GET stream: status %d, first event %+v", get.StatusCode, primed)
			}
			get.Body.Close()
			if a := answerOf(t, mcpReq(t, g, http.MethodPost, aliceKey, cur, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__solo__echo","arguments":{"text":"before"}}}`)); a.Error != nil {
				t.Fatalf("per_session echo: %+v", a.Error)
			}
			if st := g.relayStatus(t, "solo"); st.Sessions != 1 {
				t.Fatalf("the per_session server holds %d sessions, want 1", st.Sessions)
			}

			deleted := initializeAs(t, g, aliceKey, sessionsProtocolLatest)
			if r := mcpReq(t, g, http.MethodDelete, aliceKey, deleted, ""); r.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: %d", r.StatusCode)
			}

			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-sessions", Version: "1"}, nil)
			// No standalone GET stream: the SDK gives a stream that breaks
			// a few seconds of retries, and a restart may take longer on a
			// busy machine; the raw GETs here resume one deterministically.
			cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: httpClientWith(aliceKey), DisableStandaloneSSE: true}, legacySession)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			if got, _ := callText(t, cs, "mcp__demo__echo", map[string]any{"text": "before"}); got != "before" {
				t.Fatalf("SDK echo before the restart: %q", got)
			}

			g.stopWith(t, tc.sig)
			g = startSessionsGateway(t, dir, listen)

			// The 2025-03-26 session: served, still 2025-03-26.
			res := callAdd(t, g, aliceKey, old)
			if res["structuredContent"] != nil || res["content"] == nil {
				t.Errorf("add on the 2025-03-26 session after the restart: %v; want content and no structuredContent", res)
			}
			// Only to its principal.
			if r := mcpReq(t, g, http.MethodPost, bobKey, old, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
				t.Errorf("bob presenting alice's session id: status %d, want 404", r.StatusCode)
			}
			// A deleted session stays gone.
			if r := mcpReq(t, g, http.MethodPost, aliceKey, deleted, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
				t.Errorf("the deleted session after the restart: status %d, want 404", r.StatusCode)
			}

			// Resuming the GET stream from before the restart opens a
			// fresh one; a POST stream from before it is an empty stream;
			// an id that does not parse is still 400.
			get = mcpReq(t, g, http.MethodGet, aliceKey, cur, "", "Last-Event-ID", primed.id)
			if get.StatusCode != http.StatusOK || get.Header.Get("Content-Type") != "text/event-stream" {
				b, _ := io.ReadAll(get.Body)
				t.Fatalf("GET resuming %q after the restart: status %d, type %q: %s", primed.id, get.StatusCode, get.Header.Get("Content-Type"), b)
			}
			fresh, ok := nextEvent(t, bufio.NewReader(get.Body))
			if !ok || fresh.id == "" || fresh.id == primed.id || fresh.data != "" {
				t.Errorf("the fresh GET stream's first event: %+v, want a new priming event", fresh)
			}
			get.Body.Close()
			post := mcpReq(t, g, http.MethodGet, aliceKey, cur, "", "Last-Event-ID", "4_1")
			body, _ := io.ReadAll(post.Body)
			if post.StatusCode != http.StatusOK || post.Header.Get("Content-Type") != "text/event-stream" || len(body) != 0 {
				t.Errorf("GET resuming a POST stream from before the restart: status %d, type %q, body %q; want an empty event stream", post.StatusCode, post.Header.Get("Content-Type"), body)
			}
			if r := mcpReq(t, g, http.MethodGet, aliceKey, cur, "", "Last-Event-ID", "not-an-id"); r.StatusCode != http.StatusBadRequest {
				t.Errorf("GET with a Last-Event-ID that does not parse: status %d, want 400", r.StatusCode)
			}

			// The per_session upstream starts again with the session's
			// first call on it.
			if st := g.relayStatus(t, "solo"); st.Sessions != 0 {
				t.Errorf("the per_session server holds %d sessions before any call, want 0", st.Sessions)
			}
			a := answerOf(t, mcpReq(t, g, http.MethodPost, aliceKey, cur, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__solo__echo","arguments":{"text":"after"}}}`))
			if a.Error != nil || !strings.Contains(string(a.Result), `"after"`) {
				t.Errorf("per_session echo after the restart: %s, %+v", a.Result, a.Error)
			}
			if st := g.relayStatus(t, "solo"); st.Sessions != 1 {
				t.Errorf("the per_session server holds %d sessions after the call, want 1", st.Sessions)
			}

			// The SDK client's session goes on.
			if got, _ := callText(t, cs, "mcp__demo__echo", map[string]any{"text": "after"}); got != "after" {
				t.Errorf("SDK echo after the restart: %q", got)
			}

			var list struct {
				Sessions []struct {
					Principal       string `json:"principal"`
					ProtocolVersion string `json:"protocol_version"`
				} `json:"sessions"`
			}
			g.adminGet(t, "/admin/sessions", &list)
			versions := map[string]int{}
			for _, s := range list.Sessions {
				if s.Principal != "alice" {
					t.Errorf("a session of %q after the restart", s.Principal)
				}
				versions[s.ProtocolVersion]++
			}
			if versions["2025-03-26"] != 1 || versions[sessionsProtocolLatest] != 2 {
				t.Errorf("sessions after the restart by version: %v; want one 2025-03-26 and two %s (the raw one and the SDK's)", versions, sessionsProtocolLatest)
			}
		})
	}
}

// TestSessions_EndStored: after a restart, the sessions the database
// holds and no client used yet are listed as stored; the admin API ends
// one by its id and a client DELETEs its own, neither restoring them, and
// both stay ended after another restart while the untouched one is served.
func TestSessions_EndStored(t *testing.T) {
	dir := t.TempDir()
	g := startSessionsGateway(t, dir, "127.0.0.1:0")
	listen := strings.TrimPrefix(g.URL, "http://")
	byAdmin := initializeAs(t, g, aliceKey, "2025-03-26")
	byClient := initializeAs(t, g, aliceKey, sessionsProtocolLatest)
	untouched := initializeAs(t, g, bobKey, sessionsProtocolLatest)
	g.stopWith(t, syscall.SIGTERM)
	g = startSessionsGateway(t, dir, listen)

	type listed struct {
		ID              string `json:"id"`
		Principal       string `json:"principal"`
		ProtocolVersion string `json:"protocol_version"`
		ClientName      string `json:"client_name"`
		State           string `json:"state"`
	}
	list := func() []listed {
		var body struct {
			Sessions []listed `json:"sessions"`
		}
		g.adminGet(t, "/admin/sessions", &body)
		return body.Sessions
	}
	var adminID string
	sessions := list()
	for _, s := range sessions {
		if s.State != "stored" || s.ClientName != "raw" {
			t.Errorf("after the restart: %+v, want a stored session of the raw client", s)
		}
		if s.Principal == "alice" && s.ProtocolVersion == "2025-03-26" {
			adminID = s.ID
		}
	}
	if len(sessions) != 3 || adminID == "" {
		t.Fatalf("after the restart: %+v, want the three sessions stored", sessions)
	}

	if status, body := g.adminDo(t, http.MethodDelete, "/admin/sessions/"+adminID, g.Admin, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE /admin/sessions/%s = %d %s", adminID, status, body)
	}
	if status, _ := g.adminDo(t, http.MethodDelete, "/admin/sessions/"+adminID, g.Admin, ""); status != http.StatusNotFound {
		t.Errorf("a second admin DELETE = %d, want 404", status)
	}
	if r := mcpReq(t, g, http.MethodDelete, bobKey, byClient, ""); r.StatusCode != http.StatusNotFound {
		t.Errorf("bob's DELETE of alice's stored session = %d, want 404", r.StatusCode)
	}
	if r := mcpReq(t, g, http.MethodDelete, aliceKey, byClient, ""); r.StatusCode != http.StatusOK {
		t.Errorf("alice's DELETE of her stored session = %d, want 200", r.StatusCode)
	}
	if sessions := list(); len(sessions) != 1 || sessions[0].Principal != "bob" || sessions[0].State != "stored" {
		t.Errorf("after the ends: %+v, want bob's stored session only", sessions)
	}
	for name, sid := range map[string]string{"admin": byAdmin, "client": byClient} {
		if r := mcpReq(t, g, http.MethodPost, aliceKey, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
			t.Errorf("the session ended by the %s: status %d, want 404", name, r.StatusCode)
		}
	}

	g.stopWith(t, syscall.SIGTERM)
	g = startSessionsGateway(t, dir, listen)
	for name, sid := range map[string]string{"admin": byAdmin, "client": byClient} {
		if r := mcpReq(t, g, http.MethodPost, aliceKey, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
			t.Errorf("after another restart, the session ended by the %s: status %d, want 404", name, r.StatusCode)
		}
	}
	if r := mcpReq(t, g, http.MethodPost, bobKey, untouched, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
		t.Errorf("the untouched session after another restart: status %d, want 200", r.StatusCode)
	}
	if sessions := list(); len(sessions) != 1 || sessions[0].State != "live" {
		t.Errorf("after bob's request: %+v, want his session live", sessions)
	}
}

// echoBatch returns a batch of n calls of the demo server's echo, with the
// ids 1 to n.
func echoBatch(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mcp__demo__echo","arguments":{"text":"t%d"}}}`, i, i)
	}
	b.WriteByte(']')
	return b.String()
}

// TestSessions_BatchCap: on the binary, a 2025-03-26 batch as large as a
// session may have in flight (64) gets exactly one answer per request on
// its event stream, and one larger is refused whole with one error.
func TestSessions_BatchCap(t *testing.T) {
	g := startGateway(t, baseEnv(), fmt.Sprintf(`auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
servers:
  - {name: demo, transport: stdio, command: %s}
`, hashToken(aliceKey), bin("demo-server")))
	g.waitState(t, "demo", "running")
	sid := initializeAs(t, g, aliceKey, "2025-03-26")

	const limit = 64
	resp := mcpReq(t, g, http.MethodPost, aliceKey, sid, echoBatch(limit))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("a batch of %d: status %d, type %q", limit, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	seen := map[string]int{}
	rd := bufio.NewReader(resp.Body)
	for {
		ev, ok := nextEvent(t, rd)
		if !ok {
			break
		}
		var a rpcAnswer
		if err := json.Unmarshal([]byte(ev.data), &a); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		if a.Error != nil {
			t.Errorf("request %s: error %+v", a.ID, a.Error)
			continue
		}
		if want := fmt.Sprintf(`"t%s"`, a.ID); !strings.Contains(string(a.Result), want) {
			t.Errorf("request %s answered %s", a.ID, a.Result)
		}
		seen[string(a.ID)]++
	}
	for i := 1; i <= limit; i++ {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("request %d answered %d times, want once", i, n)
		}
	}

	resp = mcpReq(t, g, http.MethodPost, aliceKey, sid, echoBatch(limit+1))
	body, _ := io.ReadAll(resp.Body)
	var a rpcAnswer
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &a) != nil || string(a.ID) != "null" ||
		a.Error == nil || a.Error.Code != -31003 || !strings.Contains(a.Error.Message, "64") || !strings.Contains(string(a.Error.Data), `"limit":64`) {
		t.Errorf("a batch of %d: status %d, body %s; want 400 and one -31003 error with id null and data.limit naming the cap", limit+1, resp.StatusCode, body)
	}
}
