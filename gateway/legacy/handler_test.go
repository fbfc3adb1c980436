package legacy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

const (
	callEcho = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"hi"}}}`
	listReq  = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// TestStatus pins the HTTP status and JSON-RPC error code of every way a
// request can go wrong before, or instead of, reaching the core.
func TestStatus(t *testing.T) {
	e := newEnv(t, Options{
		MaxRequestBody: 1024,
		AllowHost:      func(h string) bool { return strings.HasPrefix(h, "127.0.0.1:") },
		AllowOrigin:    func(o string) bool { return o == "http://localhost:3000" },
	})
	// sessions names the session a case runs on.
	sessions := map[string]func() string{
		"":         func() string { return "" },
		"live":     func() string { return e.initialize(V20251125) },
		"live0326": func() string { return e.initialize(V20250326) },
		"garbage":  func() string { return "not-a-session" },
		"forged": func() string {
			other, _ := seal.New(bytes.Repeat([]byte{7}, 32), "session")
			return other.Seal(marshal(token{Replica: e.h.opts.Replica, Principal: gateway.Anonymous, Nonce: make([]byte, 16)}))
		},
		"unknown": func() string {
			return e.h.sealer.Seal(marshal(token{Replica: e.h.opts.Replica, Principal: gateway.Anonymous, Nonce: make([]byte, 16)}))
		},
		"deleted": func() string {
			sid := e.initialize(V20251125)
			if resp := e.do(e.request(http.MethodDelete, sid, "")); resp.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: %d", resp.StatusCode)
			}
			return sid
		},
		"other-principal": func() string { return e.initialize(V20251125, principalHeader, "bob") },
		"other-replica": func() string {
			sid := e.initialize(V20251125)
			payload, _ := e.h.sealer.Open(sid)
			var tok token
			json.Unmarshal(payload, &tok)
			tok.Replica = "elsewhere"
			return e.h.sealer.Seal(marshal(tok))
		},
	}
	initBody := func(v string) string {
		return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	}
	tests := []struct {
		name     string
		method   string
		session  string
		host     string
		hdr      []string
		body     string
		want     int
		wantCode int // the JSON-RPC error code in the body; 0: no error body
	}{
		{name: "foreign host", method: "POST", host: "evil.example.com", body: initBody(V20251125), want: 403, wantCode: -32600},
		{name: "foreign origin", method: "POST", hdr: []string{"Origin", "http://evil.example.com"}, body: initBody(V20251125), want: 403, wantCode: -32600},
		{name: "allowed origin", method: "POST", hdr: []string{"Origin", "http://localhost:3000"}, body: initBody(V20251125), want: 200},
		{name: "no origin", method: "POST", body: initBody(V20251125), want: 200},
		{name: "foreign origin on GET", method: "GET", session: "live", hdr: []string{"Origin", "null"}, want: 403, wantCode: -32600},
		{name: "accept json only", method: "POST", hdr: []string{"Accept", "application/json"}, body: initBody(V20251125), want: 406, wantCode: -32600},
		{name: "accept sse only", method: "POST", hdr: []string{"Accept", "text/event-stream"}, body: initBody(V20251125), want: 406, wantCode: -32600},
		{name: "no accept", method: "POST", hdr: []string{"Accept", ""}, body: initBody(V20251125), want: 406, wantCode: -32600},
		{name: "accept wildcard", method: "POST", hdr: []string{"Accept", "*/*"}, body: initBody(V20251125), want: 200},
		{name: "too large", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2000) + `"}}`, want: 413, wantCode: gateway.CodeRequestTooLarge},
		{name: "too large chunked", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2000) + `"}}`, want: 413, wantCode: gateway.CodeRequestTooLarge},
		{name: "invalid json", method: "POST", body: `{"jsonrpc":`, want: 400, wantCode: -32700},
		{name: "not json-rpc", method: "POST", body: `{"hello":1}`, want: 400, wantCode: -32600},
		{name: "unsupported version header", method: "POST", hdr: []string{HeaderProtocolVersion, "2024-11-05"}, body: initBody(V20251125), want: 400, wantCode: -32600},
		{name: "modern discover probe", method: "POST", hdr: []string{HeaderProtocolVersion, "2026-07-28"}, body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, want: 400, wantCode: -32600},
		// Another supported version than the session's is accepted (the
		// spec's 400 is for invalid or unsupported ones; the conformance
		// suite's server-sse-multiple-streams sends 2025-03-26 on a
		// 2025-11-25 session).
		{name: "version header differs from session", method: "POST", session: "live", hdr: []string{HeaderProtocolVersion, V20250618}, body: listReq, want: 200},
		{name: "version header matches session", method: "POST", session: "live", hdr: []string{HeaderProtocolVersion, V20251125}, body: listReq, want: 200},
		{name: "no version header on session", method: "POST", session: "live0326", body: listReq, want: 200},
		{name: "no session, not initialize", method: "POST", body: listReq, want: 400, wantCode: -32600},
		{name: "no session, notification", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: 400, wantCode: -32600},
		{name: "no session, batch", method: "POST", body: `[` + listReq + `]`, want: 400, wantCode: -32600},
		{name: "initialize as notification", method: "POST", body: `{"jsonrpc":"2.0","method":"initialize","params":{}}`, want: 400, wantCode: -32600},
		{name: "initialize with session header", method: "POST", session: "live", body: initBody(V20251125), want: 400, wantCode: -32600},
		{name: "initialize without params", method: "POST", body: `{"jsonrpc":"2.0","id":0,"method":"initialize"}`, want: 200, wantCode: -32602},
		{name: "garbage session", method: "POST", session: "garbage", body: listReq, want: 404, wantCode: -32600},
		{name: "forged session", method: "POST", session: "forged", body: listReq, want: 404, wantCode: -32600},
		{name: "unknown session", method: "POST", session: "unknown", body: listReq, want: 404, wantCode: -32600},
		{name: "deleted session", method: "POST", session: "deleted", body: listReq, want: 404, wantCode: -32600},
		{name: "other principal's session", method: "POST", session: "other-principal", body: listReq, want: 404, wantCode: -32600},
		{name: "other replica's session", method: "POST", session: "other-replica", body: listReq, want: 404, wantCode: -32600},
		{name: "notification", method: "POST", session: "live", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: 202},
		{name: "cancel of unknown id", method: "POST", session: "live", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, want: 202},
		{name: "client response", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":"s1","result":{}}`, want: 202},
		{name: "batch on 2025-11-25", method: "POST", session: "live", body: `[` + listReq + `]`, want: 400, wantCode: -32600},
		{name: "batch with initialize", method: "POST", session: "live0326", body: `[` + initBody(V20250326) + `]`, want: 400, wantCode: -32600},
		{name: "empty batch", method: "POST", session: "live0326", body: `[]`, want: 400, wantCode: -32600},
		{name: "unknown method", method: "POST", session: "live", body: `{"jsonrpc":"2.0","id":5,"method":"foo/bar"}`, want: 200},
		{name: "put", method: "PUT", body: listReq, want: 405, wantCode: -32600},
		{name: "patch", method: "PATCH", session: "live", want: 405, wantCode: -32600},
		{name: "get without accept", method: "GET", session: "live", hdr: []string{"Accept", "application/json"}, want: 406, wantCode: -32600},
		{name: "get without session", method: "GET", want: 400, wantCode: -32600},
		{name: "get unknown session", method: "GET", session: "unknown", want: 404, wantCode: -32600},
		{name: "get bad last-event-id", method: "GET", session: "live", hdr: []string{HeaderLastEventID, "x"}, want: 400, wantCode: -32600},
		{name: "get unknown stream", method: "GET", session: "live", hdr: []string{HeaderLastEventID, "9_1"}, want: 400, wantCode: -32600},
		{name: "get unsupported version header", method: "GET", session: "live", hdr: []string{HeaderProtocolVersion, "1999-01-01"}, want: 400, wantCode: -32600},
		{name: "delete without session", method: "DELETE", want: 400, wantCode: -32600},
		{name: "delete unknown session", method: "DELETE", session: "unknown", want: 404, wantCode: -32600},
		{name: "delete deleted session", method: "DELETE", session: "deleted", want: 404, wantCode: -32600},
		{name: "delete", method: "DELETE", session: "live", want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := e.request(tt.method, sessions[tt.session](), tt.body, tt.hdr...)
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.name == "too large chunked" {
				req.ContentLength = -1
			}
			resp := e.do(req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, readAll(t, resp))
			}
			if tt.want == http.StatusMethodNotAllowed {
				if got := resp.Header.Get("Allow"); got != "GET, POST, DELETE" {
					t.Errorf("Allow %q", got)
				}
			}
			if tt.wantCode == 0 {
				return
			}
			body := readAll(t, resp)
			m := decode(t, []byte(body))
			if m.Error == nil || m.Error.Code != tt.wantCode {
				t.Fatalf("body %s, want error code %d", body, tt.wantCode)
			}
			if m.Error.Message == "" {
				t.Error("error without a message")
			}
		})
	}
}

// TestInitialize checks version negotiation and the initialize result.
func TestInitialize(t *testing.T) {
	e := newEnv(t, Options{})
	tests := []struct{ requested, want string }{
		{V20251125, V20251125},
		{V20250618, V20250618},
		{V20250326, V20250326},
		{"2024-11-05", V20251125},
		{"2026-07-28", V20251125},
		{"", V20251125},
	}
	for _, tt := range tests {
		t.Run(tt.requested, func(t *testing.T) {
			resp := e.post("", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+tt.requested+`","capabilities":{"roots":{}},"clientInfo":{"name":"c","version":"9"}}}`)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			sid := resp.Header.Get(HeaderSessionID)
			for _, c := range sid {
				if c < 0x21 || c > 0x7e {
					t.Fatalf("session id %q has a character outside visible ASCII", sid)
				}
			}
			m := decode(t, []byte(readAll(t, resp)))
			want := `{"protocolVersion":"` + tt.want + `","capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"mcpgw","version":"dev"}}`
			if diff := cmp.Diff(want, string(m.Result)); diff != "" || string(m.ID) != `"init"` {
				t.Errorf("id %s, result (-want +got):\n%s", m.ID, diff)
			}
			s := e.session(sid)
			if s == nil {
				t.Fatal("no session")
			}
			if s.version != tt.want || string(s.caps) != `{"roots":{}}` || s.clientName != "c" || s.clientVersion != "9" {
				t.Errorf("session %+v", s)
			}
		})
	}
	infos := e.h.Sessions()
	if len(infos) != len(tests) {
		t.Fatalf("%d sessions, want %d", len(infos), len(tests))
	}
	if i := infos[0]; i.Principal != gateway.Anonymous || i.ClientName != "c" || i.ID == "" || i.InFlight != 0 || i.Stream {
		t.Errorf("SessionInfo %+v", i)
	}
}

// TestForwardedStream checks the SSE answer to a forwarded request per
// version: a priming event only on 2025-11-25, the call's notifications
// before its response, unique event ids naming the stream, the headers.
func TestForwardedStream(t *testing.T) {
	e := newEnv(t, Options{})
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			sid := e.initialize(v)
			resp := e.post(sid, `{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"mcp__a__notify","arguments":{},"_meta":{"progressToken":"t"}}}`)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			for k, want := range map[string]string{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			evs := events(t, resp)
			var got []string
			seen := map[string]bool{}
			for _, ev := range evs {
				if !ev.HasID || seen[ev.ID] {
					t.Errorf("event id %q missing or repeated", ev.ID)
				}
				seen[ev.ID] = true
				if _, _, ok := parseEventID(ev.ID); !ok {
					t.Errorf("event id %q does not parse", ev.ID)
				}
				if len(ev.Data) == 0 {
					got = append(got, "priming")
					continue
				}
				m := decode(t, ev.Data)
				if m.Method != "" {
					got = append(got, m.Method+" "+string(m.Params))
				} else {
					got = append(got, "response "+string(m.ID)+" "+string(m.Result))
				}
			}
			want := []string{
				`notifications/progress {"progressToken":"t","progress":1}`,
				`notifications/progress {"progressToken":"t","progress":2}`,
				`response "n" {"content":[]}`,
			}
			if v == V20251125 {
				want = append([]string{"priming"}, want...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalAnswers checks that what the gateway answers itself is JSON.
func TestLocalAnswers(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		listReq,
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`,
	} {
		resp := e.post(sid, body)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
			t.Fatalf("%s: status %d, type %q", body, resp.StatusCode, ct)
		}
		if m := decode(t, []byte(readAll(t, resp))); m.Error != nil || len(m.Result) == 0 {
			t.Errorf("%s: %+v", body, m)
		}
	}
	// An unknown method goes to the core, which answers -32601 (as JSON:
	// at once, with nothing else for the client).
	resp := e.post(sid, `{"jsonrpc":"2.0","id":5,"method":"foo/bar"}`)
	if m := lastMessage(t, resp); m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("unknown method: %+v", m)
	}
}

// TestVersionEncoding checks tools/list and tools/call as each version's
// clients get them over HTTP.
func TestVersionEncoding(t *testing.T) {
	e := newEnv(t, Options{})
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			sid := e.initialize(v)
			var list struct {
				Tools []map[string]json.RawMessage `json:"tools"`
			}
			m := decode(t, []byte(readAll(t, e.post(sid, listReq))))
			if err := json.Unmarshal(m.Result, &list); err != nil {
				t.Fatal(err)
			}
			var echo map[string]json.RawMessage
			for _, tool := range list.Tools {
				if string(tool["name"]) == `"mcp__a__echo"` {
					echo = tool
				}
			}
			var keys []string
			for k := range echo {
				keys = append(keys, k)
			}
			want := map[string][]string{
				V20251125: {"_meta", "annotations", "description", "execution", "icons", "inputSchema", "name", "outputSchema", "title"},
				V20250618: {"_meta", "annotations", "description", "inputSchema", "name", "outputSchema", "title"},
				V20250326: {"annotations", "description", "inputSchema", "name"},
			}[v]
			if diff := cmp.Diff(want, sortStrings(keys)); diff != "" {
				t.Errorf("echo tool members (-want +got):\n%s", diff)
			}
			wantSchema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false,"$defs":{"x":{"type":"number"}}}`
			if got := string(echo["inputSchema"]); got != wantSchema {
				t.Errorf("inputSchema %s", got)
			}

			got := string(lastMessage(t, e.post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__link","arguments":{}}}`)).Result)
			wantCall := `{"content":[{"type":"text","text":"see"},{"type":"resource_link","uri":"file:///r.txt","name":"r","title":"The R"}],"structuredContent":{"ok":true}}`
			if v == V20250326 {
				wantCall = `{"content":[{"type":"text","text":"see"},{"type":"text","text":"The R: file:///r.txt"}]}`
			}
			if diff := cmp.Diff(wantCall, got); diff != "" {
				t.Errorf("tools/call result (-want +got):\n%s", diff)
			}
		})
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestCancel checks that notifications/cancelled cancels the call's
// context (the core then cancels upstream) and that the stream ends with
// no response.
func TestCancel(t *testing.T) {
	e := newEnv(t, Options{MaxInFlight: 1})
	sid := e.initialize(V20251125)
	resp := e.post(sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	ctx := <-e.fake.started

	// The same id again while the first is in flight.
	dup := decode(t, []byte(readAll(t, e.post(sid, `{"jsonrpc":"2.0","id":7,"method":"ping"}`))))
	if dup.Error == nil || dup.Error.Code != jsonrpc.CodeInvalidRequest || string(dup.ID) != "7" {
		t.Errorf("duplicate id: %+v", dup)
	}
	// Another one is over the session's limit.
	limited := decode(t, []byte(readAll(t, e.post(sid, `{"jsonrpc":"2.0","id":8,"method":"ping"}`))))
	if limited.Error == nil || limited.Error.Code != gateway.CodeRateLimited {
		t.Errorf("over MaxInFlight: %+v", limited)
	}
	if got := e.h.Sessions()[0].InFlight; got != 1 {
		t.Errorf("InFlight %d, want 1", got)
	}

	if r := e.post(sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: status %d", r.StatusCode)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call's context was not cancelled")
	}
	evs := events(t, resp)
	if len(evs) != 1 || len(evs[0].Data) != 0 {
		t.Errorf("events after cancel: %+v, want only the priming event", evs)
	}
	waitFor(t, "the call to leave the session", func() bool { return e.h.Sessions()[0].InFlight == 0 })
}

// TestCallTimeoutIsAnswered checks that a call the core times out is
// answered with the timeout's error: the core ends the call's context,
// which is the edge's own (gateway.Request.Cancel), with a cause of its
// own, and the edge answers by what the core returns.
func TestCallTimeoutIsAnswered(t *testing.T) {
	e := newEnvCore(t, Options{}, gateway.Options{CallTimeout: 100 * time.Millisecond})
	sid := e.initialize(V20251125)
	resp := e.post(sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	ctx := <-e.fake.started
	m := lastMessage(t, resp)
	if string(m.ID) != "9" || m.Error == nil || m.Error.Code != gateway.CodeUpstreamTimeout {
		t.Fatalf("answer %s %+v, want id 9 and error %d", m.ID, m.Error, gateway.CodeUpstreamTimeout)
	}
	if err := context.Cause(ctx); err == nil || err.Error() != "timeout" {
		t.Errorf("the upstream call's context ended with %v, want the timeout", err)
	}
	waitFor(t, "the call to leave the session", func() bool { return e.h.Sessions()[0].InFlight == 0 })
}

// TestDropIsNotCancel checks that a dropped connection leaves the call
// running, and that GET with Last-Event-ID then resumes its stream: live
// while the call runs, replayed once it finished.
func TestDropIsNotCancel(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	s := e.session(sid)

	response := func(evs []sse.Event, id string) {
		t.Helper()
		if len(evs) != 1 {
			t.Fatalf("resumed events %+v, want the response alone", evs)
		}
		if m := decode(t, evs[0].Data); string(m.ID) != id || !strings.Contains(string(m.Result), "released") {
			t.Errorf("resumed response %+v", m)
		}
	}

	// Resumed while the call runs: the response comes live.
	primed := startAndDrop(t, e, sid, "8")
	resumed := e.do(e.request(http.MethodGet, sid, "", HeaderLastEventID, primed))
	waitFor(t, "the resumed stream to attach", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		num, _, _ := parseEventID(primed)
		return s.streams[num].att != nil
	})
	e.fake.release <- struct{}{}
	response(events(t, resumed), "8")

	// Resumed after the call finished: the response is replayed.
	primed = startAndDrop(t, e, sid, `"nine"`)
	e.fake.release <- struct{}{}
	waitFor(t, "the call to finish", func() bool { return e.h.Sessions()[0].InFlight == 0 })
	response(events(t, e.do(e.request(http.MethodGet, sid, "", HeaderLastEventID, primed))), `"nine"`)

	// The stream was fully written, so it is gone.
	if r := e.do(e.request(http.MethodGet, sid, "", HeaderLastEventID, primed)); r.StatusCode != http.StatusBadRequest {
		t.Errorf("second resume: status %d, want 400", r.StatusCode)
	}
}

// startAndDrop posts a blocking call with the JSON-RPC id id on the
// session sid, reads its priming event and drops the connection, as a
// client that goes away does; the call must go on. It returns the priming
// event's id.
func startAndDrop(t *testing.T, e *env, sid, id string) string {
	t.Helper()
	s := e.session(sid)
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request(http.MethodPost, sid, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`).WithContext(ctx)
	resp := e.do(req)
	callCtx := <-e.fake.started
	ev, err := newReader(resp).Next()
	if err != nil || !ev.HasID || len(ev.Data) != 0 {
		t.Fatalf("priming event: %+v, %v", ev, err)
	}
	cancel() // the client goes away
	num, _, _ := parseEventID(ev.ID)
	waitFor(t, "the server to notice the drop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.streams[num].att == nil
	})
	if callCtx.Err() != nil {
		t.Fatal("a dropped connection cancelled the call")
	}
	return ev.ID
}

// endSink is a sink that records what it was given, and whether the
// session still had the stream when pump ended the output.
type endSink struct {
	s       *session
	num     uint64
	written bytes.Buffer
	ended   bool
	kept    bool // the stream was still in the session at end
}

func (k *endSink) write(b []byte) bool { k.written.Write(b); return true }

func (k *endSink) end() {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	_, k.kept = k.s.streams[k.num]
	k.ended = true
}

// TestPump_DropsAFinishedStreamBeforeItsEnd checks that a finished stream
// written to its end is gone from the session before the client is told
// the stream ended: a resume sent as soon as the client sees the end must
// get 400, not an empty stream.
func TestPump_DropsAFinishedStreamBeforeItsEnd(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	s := e.session(sid)
	primed := startAndDrop(t, e, sid, "4")
	num, seq, _ := parseEventID(primed)
	e.fake.release <- struct{}{}
	waitFor(t, "the call to finish", func() bool { return e.h.Sessions()[0].InFlight == 0 })

	s.mu.Lock()
	st := s.streams[num]
	att := s.attachLocked(st)
	s.mu.Unlock()
	out := &endSink{s: s, num: num}
	e.h.pump(context.Background(), out, s, st, att, seq)
	if !out.ended || !strings.Contains(out.written.String(), "released") {
		t.Fatalf("pump wrote %q (ended %v), want the response and the end", out.written.String(), out.ended)
	}
	if out.kept {
		t.Error("the stream was still in the session when its end was written")
	}
}

// TestDeleteEndsCalls checks that DELETE cancels the session's calls and
// ends their streams without a response.
func TestDeleteEndsCalls(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20250618)
	resp := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	ctx := <-e.fake.started
	if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	if evs := events(t, resp); len(evs) != 0 {
		t.Errorf("events %+v, want none", evs)
	}
	<-ctx.Done()
	if n := len(e.h.Sessions()); n != 0 {
		t.Errorf("%d sessions", n)
	}
}

// TestKeepAlive checks the keep-alive comments of a waiting stream.
func TestKeepAlive(t *testing.T) {
	e := newEnv(t, Options{KeepAlive: 10 * time.Millisecond})
	sid := e.initialize(V20250618)
	resp := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	<-e.fake.started
	br := bufio.NewReader(resp.Body)
	for n := 0; n < 2; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": keep-alive\n" {
			n++
		}
	}
	e.fake.release <- struct{}{}
}

// TestListChanged checks that a change of the merged tools reaches the
// session's GET stream, and that a newer GET replaces the older one.
func TestListChanged(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	other := e.initialize(V20250618) // has no GET stream: misses it
	first := e.do(e.request(http.MethodGet, sid, ""))
	rd := newReader(first)
	if ev, err := rd.Next(); err != nil || len(ev.Data) != 0 {
		t.Fatalf("priming event: %+v, %v", ev, err)
	}
	s := e.session(sid)
	waitFor(t, "the stream to attach", func() bool { return e.h.Sessions()[0].Stream })

	e.mgr.Set(&upstreamtest.Server{Name: "b", Tools: []json.RawMessage{plainTool("new")}})
	ev, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, ev.Data); m.Method != "notifications/tools/list_changed" {
		t.Errorf("event %s", ev.Data)
	}

	// A newer GET replaces the first, which ends. (It would also get what
	// the first did not write; wait until the first counts its write.)
	waitFor(t, "the change to count as delivered", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.standalone.delivered == 2
	})
	second := e.do(e.request(http.MethodGet, sid, ""))
	rd2 := newReader(second)
	if ev, err := rd2.Next(); err != nil || len(ev.Data) != 0 {
		t.Fatalf("second priming event: %+v, %v", ev, err)
	}
	if _, err := rd.Next(); err == nil {
		t.Error("the older GET stream goes on")
	}
	e.mgr.Set(&upstreamtest.Server{Name: "c", Tools: []json.RawMessage{plainTool("newer")}})
	if ev, err := rd2.Next(); err != nil || decode(t, ev.Data).Method != "notifications/tools/list_changed" {
		t.Errorf("second stream: %+v, %v", ev, err)
	}
	if o := e.session(other); o.standalone != nil {
		t.Error("a session without a GET stream got one")
	}
	s.mu.Lock()
	n := len(s.standalone.events)
	s.mu.Unlock()
	if n != 4 { // priming, change, priming, change
		t.Errorf("%d events buffered on stream 0, want 4", n)
	}
}

// TestListChanged_NotNewsToALaterSession: a session that began after a
// change was merged (while the core was still gathering changes) is not
// told of it; one that began before is, and both are told of the next.
func TestListChanged_NotNewsToALaterSession(t *testing.T) {
	// A long gathering, so that the later session begins inside it; the
	// test waits for events, not for the time.
	e := newEnvCore(t, Options{}, gateway.Options{ListChangedDebounce: 2 * time.Second})
	openStream := func(sid string) *sse.Reader {
		t.Helper()
		rd := newReader(e.do(e.request(http.MethodGet, sid, "")))
		if ev, err := rd.Next(); err != nil || len(ev.Data) != 0 {
			t.Fatalf("priming event: %+v, %v", ev, err)
		}
		waitFor(t, "the stream to attach", func() bool {
			s := e.session(sid)
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.standalone != nil && s.standalone.att != nil
		})
		return rd
	}
	earlier := e.initialize(V20251125)
	rdEarlier := openStream(earlier)

	e.mgr.Set(&upstreamtest.Server{Name: "b", Tools: []json.RawMessage{plainTool("new")}})
	waitFor(t, "the change to be merged", func() bool { return e.core.CatalogVersion() > e.session(earlier).catalog })
	later := e.initialize(V20251125)
	rdLater := openStream(later)
	if got := e.session(later).catalog; got != e.core.CatalogVersion() {
		t.Fatalf("the later session began at catalog version %d, want %d", got, e.core.CatalogVersion())
	}

	if ev, err := rdEarlier.Next(); err != nil || decode(t, ev.Data).Method != "notifications/tools/list_changed" {
		t.Fatalf("the earlier session: %+v, %v", ev, err)
	}
	// The later session's stream has only its priming event.
	s := e.session(later)
	s.mu.Lock()
	n := len(s.standalone.events)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d events on the later session's stream, want only its priming event", n)
	}

	// The next change is news to both.
	e.mgr.Set(&upstreamtest.Server{Name: "c", Tools: []json.RawMessage{plainTool("newer")}})
	for name, rd := range map[string]*sse.Reader{"earlier": rdEarlier, "later": rdLater} {
		if ev, err := rd.Next(); err != nil || decode(t, ev.Data).Method != "notifications/tools/list_changed" {
			t.Errorf("the %s session, the next change: %+v, %v", name, ev, err)
		}
	}
}

// TestBatch checks batches on a 2025-03-26 session.
func TestBatch(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20250326)

	resp := e.post(sid, `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"r","result":{}}]`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications only: status %d", resp.StatusCode)
	}

	resp = e.post(sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},`+listReq+`,{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("local batch: status %d, type %q", resp.StatusCode, ct)
	}
	var arr []rpc
	if err := json.Unmarshal([]byte(readAll(t, resp)), &arr); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, m := range arr {
		ids[string(m.ID)]++
	}
	if len(arr) != 3 || ids["1"] != 2 || ids["2"] != 1 {
		t.Errorf("local batch answered %+v", arr)
	}

	resp = e.post(sid, `[`+callEcho+`,{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__a__link","arguments":{}}}]`)
	evs := events(t, resp)
	got := map[string]string{}
	for _, ev := range evs {
		if len(ev.Data) == 0 {
			t.Error("a priming event on a 2025-03-26 stream")
			continue
		}
		m := decode(t, ev.Data)
		got[string(m.ID)] = string(m.Result)
	}
	want := map[string]string{
		"1": `{"content":[{"type":"text","text":"hi"}]}`,
		"4": `{}`,
		"5": `{"content":[{"type":"text","text":"see"},{"type":"text","text":"The R: file:///r.txt"}]}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forwarded batch (-want +got):\n%s", diff)
	}
}

// TestSessionCaps checks the global (503) and per-principal (429) caps.
func TestSessionCaps(t *testing.T) {
	e := newEnv(t, Options{MaxSessions: 2, MaxSessionsPerPrincipal: 1})
	e.initialize(V20251125, principalHeader, "p1")
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if resp := e.post("", init, principalHeader, "p1"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second session of p1: status %d, want 429", resp.StatusCode)
	} else if m := decode(t, []byte(readAll(t, resp))); m.Error == nil || !strings.Contains(m.Error.Message, "per principal") {
		t.Errorf("429 body %+v", m)
	}
	sid := e.initialize(V20251125, principalHeader, "p2")
	resp := e.post("", init, principalHeader, "p3")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("third session: status %d, want 503", resp.StatusCode)
	} else if m := decode(t, []byte(readAll(t, resp))); m.Error == nil || !strings.Contains(m.Error.Message, "sessions.max") {
		t.Errorf("503 body %+v", m)
	}
	// Ending a session frees its place.
	e.do(e.request(http.MethodDelete, sid, "", principalHeader, "p2"))
	e.initialize(V20251125, principalHeader, "p3")
}

// TestClose checks the drain: new work gets 503, a call that outlives the
// deadline is cancelled upstream and its client told so, and Close waits.
func TestClose(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	resp := e.post(sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	callCtx := <-e.fake.started

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e.closed = true
	closed := make(chan error, 1)
	go func() { closed <- e.h.Close(ctx) }()
	waitFor(t, "the drain", func() bool {
		e.h.mu.Lock()
		defer e.h.mu.Unlock()
		return e.h.state != running
	})
	if r := e.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("initialize while draining: status %d, want 503", r.StatusCode)
	}
	if r := e.post(sid, `{"jsonrpc":"2.0","id":10,"method":"ping"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("request while draining: status %d, want 503", r.StatusCode)
	}
	evs := events(t, resp)
	last := decode(t, evs[len(evs)-1].Data)
	if last.Error == nil || last.Error.Code != jsonrpc.CodeInternalError || !strings.Contains(last.Error.Message, "shut down") {
		t.Errorf("last event %+v, want the shutdown error", last)
	}
	if callCtx.Err() == nil {
		t.Error("the upstream call was not cancelled")
	}
	if err := <-closed; err != context.DeadlineExceeded {
		t.Errorf("Close: %v, want the deadline", err)
	}
	if n := len(e.h.Sessions()); n != 0 {
		t.Errorf("%d sessions after Close", n)
	}
	if r := e.post(sid, listReq); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d, want 503", r.StatusCode)
	}
	if err := e.h.Close(context.Background()); err != context.DeadlineExceeded {
		t.Errorf("second Close: %v", err)
	}
}

// TestNewOptions checks New's validation.
func TestNewOptions(t *testing.T) {
	core, err := gateway.New(gateway.Options{Upstreams: upstreamtest.NewManager()})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	for _, opts := range []Options{
		{},
		{Core: core, Secret: []byte("short")},
		{Core: core, IdleTimeout: -1},
		{Core: core, MaxSessions: -1},
	} {
		if h, err := New(opts); err == nil {
			h.Close(context.Background())
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}
