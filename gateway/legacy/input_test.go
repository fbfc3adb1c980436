package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Requests the fake server "a" sends through its "ask" tool.
const (
	elicitForm   = `{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`
	sampleParams = `{"messages":[{"role":"user","content":{"type":"text","text":"Say hi"}}],"maxTokens":10}`
	allCaps      = `{"elicitation":{},"sampling":{},"roots":{"listChanged":true}}`
)

// askCall returns a tools/call of the fake's "ask" tool: the server sends
// the client method with params (none when ""), plus the extra arguments
// (such as `"wait":true`).
func askCall(id, method, params string, extra ...string) string {
	args := `{"method":"` + method + `"`
	if params != "" {
		args += `,"params":` + params
	}
	for _, x := range extra {
		args += "," + x
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"mcp__a__ask","arguments":` + args + `}}}`
}

// describe renders an event for comparison: "priming", "request <id>
// <method> <params>", "<method> <params>" for a notification, "response
// <id> <text>" with the text of a tool result, or "error <id> <code>".
func describe(t *testing.T, ev sse.Event) string {
	t.Helper()
	if len(ev.Data) == 0 {
		return "priming"
	}
	m := decode(t, ev.Data)
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return strings.TrimSpace("request " + string(m.ID) + " " + m.Method + " " + string(m.Params))
	case m.Method != "":
		return strings.TrimSpace(m.Method + " " + string(m.Params))
	case m.Error != nil:
		return "error " + string(m.ID) + " " + m.Error.Message
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.Unmarshal(m.Result, &res)
	if len(res.Content) != 1 {
		return "response " + string(m.ID) + " " + string(m.Result)
	}
	return "response " + string(m.ID) + " " + res.Content[0].Text
}

// next reads the next event of a stream.
func next(t *testing.T, rd *sse.Reader) sse.Event {
	t.Helper()
	ev, err := rd.Next()
	if err != nil {
		t.Fatalf("reading the next event: %v", err)
	}
	return ev
}

// until reads events, described, up to and including the first that
// starts with prefix.
func until(t *testing.T, rd *sse.Reader, prefix string) []string {
	t.Helper()
	var out []string
	for {
		d := describe(t, next(t, rd))
		out = append(out, d)
		if strings.HasPrefix(d, prefix) {
			return out
		}
	}
}

// rest reads the remaining events of a stream, described, and checks that
// it then ends.
func rest(t *testing.T, rd *sse.Reader) []string {
	t.Helper()
	var out []string
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		out = append(out, describe(t, ev))
	}
}

// reply posts the client's response to input request id on session sid
// (member is `"result":…` or `"error":…`) and checks the 202.
func (e *env) reply(sid, id, member string, hdr ...string) {
	e.t.Helper()
	resp := e.post(sid, `{"jsonrpc":"2.0","id":`+id+`,`+member+`}`, hdr...)
	if body := readAll(e.t, resp); resp.StatusCode != http.StatusAccepted || body != "" {
		e.t.Fatalf("posting a response: status %d, body %q; want 202 and no body", resp.StatusCode, body)
	}
}

// pendingInputs returns how many input requests session sid waits on.
func (e *env) pendingInputs(sid string) int {
	s := e.session(sid)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inputs)
}

// TestInput checks the relay of a server's request to the client through
// the core's Input: the request goes on the call's own stream under an id
// of the gateway's, before the response; the client's POSTed answer (a
// result or the client's own error) reaches the server; the response then
// ends the stream.
func TestInput(t *testing.T) {
	tests := []struct {
		name    string
		version string
		method  string
		params  string
		batch   bool   // 2025-03-26: the call and the answer in batches
		answer  string // the client's response member
		want    string // what the server got
	}{
		{
			name: "elicitation accepted", version: V20251125,
			method: "elicitation/create", params: elicitForm,
			answer: `"result":{"action":"accept","content":{"name":"Ada <&>"}}`,
			want:   `{"action":"accept","content":{"name":"Ada <&>"}}`,
		},
		{
			name: "sampling refused by the user", version: V20250618,
			method: "sampling/createMessage", params: sampleParams,
			answer: `"error":{"code":-1,"message":"User rejected sampling","data":{"why":"no"}}`,
			want:   `error -1: User rejected sampling {"why":"no"}`,
		},
		{
			name: "roots", version: V20250326,
			method: "roots/list",
			answer: `"result":{"roots":[{"uri":"file:///home/ada","name":"home"}]}`,
			want:   `{"roots":[{"uri":"file:///home/ada","name":"home"}]}`,
		},
		{
			name: "roots in batches", version: V20250326, batch: true,
			method: "roots/list",
			answer: `"result":{"roots":[]}`,
			want:   `{"roots":[]}`,
		},
	}
	e := newEnv(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := e.initializeCaps(tt.version, allCaps)
			body := askCall(`"c"`, tt.method, tt.params)
			if tt.batch {
				body = "[" + body + "]"
			}
			resp := e.post(sid, body)
			rd := newReader(resp)
			var got []string
			var nums []uint64
			for {
				ev := next(t, rd)
				num, _, _ := parseEventID(ev.ID)
				nums = append(nums, num)
				got = append(got, describe(t, ev))
				if strings.HasPrefix(got[len(got)-1], "request") {
					break
				}
			}
			if tt.batch {
				r := e.post(sid, `[{"jsonrpc":"2.0","id":"mcpgw-1",`+tt.answer+`}]`)
				if r.StatusCode != http.StatusAccepted {
					t.Fatalf("batched answer: status %d", r.StatusCode)
				}
			} else {
				e.reply(sid, `"mcpgw-1"`, tt.answer)
			}
			for {
				ev, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				num, _, _ := parseEventID(ev.ID)
				nums = append(nums, num)
				got = append(got, describe(t, ev))
			}

			params := tt.params
			if params != "" {
				params = " " + params
			}
			want := []string{
				`request "mcpgw-1" ` + tt.method + params,
				`response "c" ` + tt.want,
			}
			if tt.version == V20251125 {
				want = append([]string{"priming"}, want...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, n := range nums {
				if n != nums[0] {
					t.Errorf("events on streams %v, want all on the call's stream", nums)
					break
				}
			}
			if got := <-e.fake.answered; got != tt.want {
				t.Errorf("the server got %s, want %s", got, tt.want)
			}
			if n := e.pendingInputs(sid); n != 0 {
				t.Errorf("%d input requests pending after the answer", n)
			}
		})
	}
}

// TestInputConcurrent checks two calls of one session asking at once: each
// request goes on its own call's stream under its own id, and each answer
// reaches its own call, whatever the order of the answers.
func TestInputConcurrent(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initializeCaps(V20251125, allCaps)
	one := newReader(e.post(sid, askCall("1", "elicitation/create", `{"message":"one","requestedSchema":{"type":"object","properties":{}}}`)))
	two := newReader(e.post(sid, askCall("2", "elicitation/create", `{"message":"two","requestedSchema":{"type":"object","properties":{}}}`)))
	idOf := func(rd *sse.Reader, message string) string {
		t.Helper()
		evs := until(t, rd, "request")
		req := evs[len(evs)-1]
		if !strings.Contains(req, `"message":"`+message+`"`) {
			t.Fatalf("stream of call %s got %s", message, req)
		}
		return strings.Fields(req)[1]
	}
	id1, id2 := idOf(one, "one"), idOf(two, "two")
	if id1 == id2 {
		t.Fatalf("both input requests have id %s", id1)
	}
	e.reply(sid, id2, `"result":{"action":"accept","content":{"n":2}}`)
	e.reply(sid, id1, `"result":{"action":"decline"}`)
	if diff := cmp.Diff([]string{`response 1 {"action":"decline"}`}, rest(t, one)); diff != "" {
		t.Errorf("call 1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`response 2 {"action":"accept","content":{"n":2}}`}, rest(t, two)); diff != "" {
		t.Errorf("call 2 (-want +got):\n%s", diff)
	}
}

// TestInputIsolation checks that only the session that was asked can
// answer, and only under the id it was given: answers from another
// session (the same principal's or another's), with ids the session was
// not given, or of another type, are accepted (202) and reach nothing.
func TestInputIsolation(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initializeCaps(V20251125, allCaps)
	same := e.initializeCaps(V20251125, allCaps)
	bob := e.initializeCaps(V20251125, allCaps, principalHeader, "bob")
	rd := newReader(e.post(sid, askCall("1", "elicitation/create", elicitForm)))
	until(t, rd, `request "mcpgw-1"`)

	forged := `"result":{"action":"accept","content":{"name":"Mallory"}}`
	e.reply(same, `"mcpgw-1"`, forged)
	e.reply(bob, `"mcpgw-1"`, forged, principalHeader, "bob")
	e.reply(sid, `"mcpgw-2"`, forged)
	e.reply(sid, `1`, forged)
	e.reply(sid, `"1"`, forged)
	if n := e.pendingInputs(sid); n != 1 {
		t.Fatalf("%d input requests pending, want the one still unanswered", n)
	}
	select {
	case got := <-e.fake.answered:
		t.Fatalf("the server got %s from a foreign answer", got)
	default:
	}

	// The id, re-encoded by the client, still matches.
	e.reply(sid, `"mcpgw\u002d1"`, `"result":{"action":"accept","content":{"name":"Ada"}}`)
	if diff := cmp.Diff([]string{`response 1 {"action":"accept","content":{"name":"Ada"}}`}, rest(t, rd)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A second answer to the same request reaches nothing either.
	e.reply(sid, `"mcpgw-1"`, forged)
}

// TestInputTimeout checks that a client that does not answer within the
// core's input timeout is told the request is cancelled, on the call's
// stream, and that its late answer is ignored.
func TestInputTimeout(t *testing.T) {
	e := newEnvCore(t, Options{}, gateway.Options{InputTimeout: 20 * time.Millisecond})
	sid := e.initializeCaps(V20250618, allCaps)
	rd := newReader(e.post(sid, askCall("1", "elicitation/create", elicitForm)))
	until(t, rd, `request "mcpgw-1"`)
	want := []string{
		`notifications/cancelled {"requestId":"mcpgw-1","reason":"timeout"}`,
		// The core answers the server for the client that did not.
		`response 1 {"action":"cancel"}`,
	}
	if diff := cmp.Diff(want, rest(t, rd)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	e.reply(sid, `"mcpgw-1"`, `"result":{"action":"accept","content":{"name":"late"}}`)
	if got := <-e.fake.answered; got != `{"action":"cancel"}` {
		t.Errorf("the server got %s", got)
	}
}

// TestInputOnResume checks that an input request sent while the call's
// connection is gone waits in the stream's buffer and is delivered when
// the client resumes with Last-Event-ID; the answer then completes the
// call on the resumed connection.
func TestInputOnResume(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initializeCaps(V20251125, allCaps)
	s := e.session(sid)
	ctx, drop := context.WithCancel(context.Background())
	resp := e.do(e.request(http.MethodPost, sid, askCall("1", "sampling/createMessage", sampleParams, `"wait":true`)).WithContext(ctx))
	<-e.fake.started
	primed := next(t, newReader(resp))
	num, _, _ := parseEventID(primed.ID)
	drop()
	waitFor(t, "the server to notice the drop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.streams[num].att == nil
	})

	e.fake.release <- struct{}{} // the server asks now
	waitFor(t, "the input request", func() bool { return e.pendingInputs(sid) == 1 })
	rd := newReader(e.do(e.request(http.MethodGet, sid, "", HeaderLastEventID, primed.ID)))
	if got, want := describe(t, next(t, rd)), `request "mcpgw-1" sampling/createMessage `+sampleParams; got != want {
		t.Fatalf("first resumed event %s, want %s", got, want)
	}
	answer := `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","stopReason":"endTurn"}`
	e.reply(sid, `"mcpgw-1"`, `"result":`+answer)
	if diff := cmp.Diff([]string{`response 1 ` + answer}, rest(t, rd)); diff != "" {
		t.Errorf("resumed events (-want +got):\n%s", diff)
	}
}

// TestDeleteFailsInput checks that ending a session fails its pending
// input requests: the server gets the core's answer for a client that
// cannot answer, the call's stream ends without a response, and nothing
// is left waiting.
func TestDeleteFailsInput(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initializeCaps(V20251125, allCaps)
	s := e.session(sid)
	rd := newReader(e.post(sid, askCall("1", "elicitation/create", elicitForm)))
	until(t, rd, `request "mcpgw-1"`)
	if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	if evs := rest(t, rd); len(evs) != 0 {
		t.Errorf("events after DELETE: %q, want none", evs)
	}
	if got := <-e.fake.answered; got != `{"action":"cancel"}` {
		t.Errorf("the server got %s, want the core's cancel", got)
	}
	s.mu.Lock()
	n := len(s.inputs)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d input requests left on the ended session", n)
	}
}

// TestSessionNotify checks what the core gives SessionNotify: log messages
// that belong to no call, for a session that set a level, and the
// completion of a URL elicitation. Both go on the session's GET stream,
// never on a call's stream.
func TestSessionNotify(t *testing.T) {
	e := newEnvCore(t, Options{}, gateway.Options{Servers: []config.Server{{Name: "a", SingleUser: true}}})
	sid := e.initializeCaps(V20251125, `{"elicitation":{"form":{},"url":{}}}`)
	if m := decode(t, []byte(readAll(t, e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`)))); m.Error != nil {
		t.Fatalf("logging/setLevel: %+v", m.Error)
	}
	get := newReader(e.do(e.request(http.MethodGet, sid, "")))
	if d := describe(t, next(t, get)); d != "priming" {
		t.Fatalf("GET stream starts with %s", d)
	}
	waitFor(t, "the GET stream to attach", func() bool { return e.h.Sessions()[0].Stream })

	e.mgr.Notify("a", jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"warning","data":"disk low"}`)))
	if got, want := describe(t, next(t, get)), `notifications/message {"level":"warning","data":"disk low","logger":"a"}`; got != want {
		t.Errorf("GET stream got %s, want %s", got, want)
	}

	rd := newReader(e.post(sid, askCall("2", "elicitation/create", `{"mode":"url","message":"Sign in","url":"https://example.com/login","elicitationId":"up-7"}`, `"complete":true`)))
	req := until(t, rd, "request")
	var p struct {
		ElicitationID string `json:"elicitationId"`
	}
	json.Unmarshal([]byte(req[len(req)-1][strings.Index(req[len(req)-1], "{"):]), &p)
	if p.ElicitationID == "" || p.ElicitationID == "up-7" {
		t.Fatalf("request %s: want an elicitationId of the gateway's", req[len(req)-1])
	}
	e.reply(sid, `"mcpgw-1"`, `"result":{"action":"accept"}`)
	if diff := cmp.Diff([]string{`response 2 {"action":"accept"}`}, rest(t, rd)); diff != "" {
		t.Errorf("call stream (-want +got):\n%s", diff)
	}
	if got, want := describe(t, next(t, get)), `notifications/elicitation/complete {"elicitationId":"`+p.ElicitationID+`"}`; got != want {
		t.Errorf("GET stream got %s, want %s", got, want)
	}
}

// TestAskOwnerEnded: an input request of a call whose context ends for
// any reason but the call answering is cancelled: the client is told on
// the stream, and the request returns the call's error. Only the call
// answering leaves it waiting for the client (TestInputOutlivesItsCall).
func TestAskOwnerEnded(t *testing.T) {
	tests := []struct {
		name   string
		cause  error
		reason string
	}{
		{"a cancel without a cause", nil, "cancelled"},
		{"the client cancelled", errClientCancelled, errClientCancelled.Error()},
		{"not resumed", errNotResumed, errNotResumed.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			sid := e.initializeCaps(V20251125, allCaps)
			s := e.session(sid)
			s.mu.Lock()
			st := s.newStreamLocked(1)
			s.mu.Unlock()
			owner, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := e.h.ask(context.Background(), s, owner, st, "roots/list", nil)
				done <- err
			}()
			waitFor(t, "the input request", func() bool { return e.pendingInputs(sid) == 1 })
			cancel(tt.cause)
			waitFor(t, "the input request to be cancelled", func() bool { return e.pendingInputs(sid) == 0 })
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("ask returned %v, want context.Canceled", err)
			}
			s.mu.Lock()
			last := string(st.events[len(st.events)-1].block)
			s.mu.Unlock()
			if want := `"method":"notifications/cancelled","params":{"requestId":"mcpgw-1","reason":"` + tt.reason + `"}`; !strings.Contains(last, want) {
				t.Errorf("the stream's last event %q, want the cancellation with reason %q", last, tt.reason)
			}
		})
	}
}
