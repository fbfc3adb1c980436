package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// answerTo returns the client's response to the server's request id, as
// "result <json>" or "error <code> <message>", or "" when none was sent.
func answerTo(f *fakeTransport, id jsonrpc.ID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.sent {
		if m.Method != "" || m.ID.String() != id.String() {
			continue
		}
		if m.Error != nil {
			return fmt.Sprintf("error %d %s", m.Error.Code, m.Error.Message)
		}
		return "result " + string(m.Result)
	}
	return ""
}

// rootsCaps returns the roots capability a client declared in initialize.
func rootsCaps(t *testing.T, f *fakeTransport) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.sent {
		if m.Method == "initialize" {
			caps, _, _ := rawjson.Get(m.Params, "capabilities")
			roots, _, _ := rawjson.Get(caps, "roots")
			return string(roots)
		}
	}
	t.Fatal("no initialize sent")
	return ""
}

// TestManager_ServerRequests covers the requests servers send outside any
// call: ping is answered at once; the rest go to the RequestFunc of
// HandleRequests, naming the caller whose upstream session sent them (zero
// for a base client); without one, the Manager answers for the client and
// the server's status says so. Roots are declared with listChanged only
// to the upstream sessions one client owns, and SendNotification reaches
// an existing upstream session only.
func TestManager_ServerRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := map[string]*fakePeer{"sh": {}, "ps": {}, "su": {}}
		sh := fakeConfig("sh")
		sh.Roots = []config.Root{{URI: "file:///srv", Name: "srv"}}
		ps := fakeConfig("ps")
		ps.SessionMode = config.SessionPerSession
		su := fakeConfig("su")
		su.SingleUser = true
		m := newFakeManager(t, peers, []config.Server{sh, ps, su}, ManagerOptions{})
		synctest.Wait()
		alice := Caller{Principal: "alice", Session: "s1"}
		if _, err := m.Call(context.Background(), "ps", alice, "ping", nil, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		capsTests := []struct {
			name string
			conn *fakeConn
			want string
		}{
			{"shared", peers["sh"].conn(0), `{}`},
			{"per_session, the list reader", peers["ps"].conn(0), `{}`},
			{"per_session, alice's", peers["ps"].conn(1), `{"listChanged":true}`},
			{"single_user", peers["su"].conn(0), `{"listChanged":true}`},
		}
		for _, tt := range capsTests {
			if got := rootsCaps(t, tt.conn.t); got != tt.want {
				t.Errorf("%s: declared roots %s, want %s", tt.name, got, tt.want)
			}
		}

		var got []string
		stop := m.HandleRequests(func(_ context.Context, server string, who Caller, r *jsonrpc.Message) (json.RawMessage, error) {
			got = append(got, fmt.Sprintf("%s %s/%s %s", server, who.Principal, who.Session, r.Method))
			return json.RawMessage(`{"by":"fn"}`), nil
		})
		ask := func(c *fakeConn, id int64, method string) string {
			rid := jsonrpc.IntID(id)
			c.t.recv(jsonrpc.NewRequest(rid, method, nil), jsonrpc.ID{})
			synctest.Wait()
			return answerTo(c.t, rid)
		}
		requests := []struct {
			conn   *fakeConn
			method string
			want   string
		}{
			{peers["sh"].conn(0), "roots/list", `result {"by":"fn"}`},
			{peers["ps"].conn(0), "elicitation/create", `result {"by":"fn"}`},
			{peers["ps"].conn(1), "roots/list", `result {"by":"fn"}`},
			{peers["su"].conn(0), "ping", `result {}`},
		}
		for i, r := range requests {
			if a := ask(r.conn, int64(100+i), r.method); a != r.want {
				t.Errorf("%s: the server got %s, want %s", r.method, a, r.want)
			}
		}
		want := []string{"sh / roots/list", "ps / elicitation/create", "ps alice/s1 roots/list"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the RequestFunc got (-want +got):\n%s", diff)
		}

		// Without a RequestFunc the Manager answers for the client.
		stop()
		answers := []struct {
			conn   *fakeConn
			method string
			want   string
			last   Answered
		}{
			{peers["sh"].conn(0), "roots/list", `result {"roots":[{"uri":"file:///srv","name":"srv"}]}`, Answered{Method: "roots/list", Answer: "1 root from config"}},
			{peers["su"].conn(0), "roots/list", `result {"roots":[]}`, Answered{Method: "roots/list", Answer: "an empty list (no roots configured)"}},
			{peers["su"].conn(0), "elicitation/create", `result {"action":"cancel"}`, Answered{Method: "elicitation/create", Answer: "cancel"}},
			{peers["ps"].conn(1), "sampling/createMessage", `error -32603 mcpgw has no client to ask for sampling/createMessage: no client can take requests outside a call`, Answered{Method: "sampling/createMessage", Answer: "an error"}},
			{peers["ps"].conn(1), "tools/list", `error -32601 mcpgw does not offer tools/list to this server`, Answered{Method: "tools/list", Answer: "method not found"}},
		}
		for i, a := range answers {
			if got := ask(a.conn, int64(200+i), a.method); got != a.want {
				t.Errorf("%s: the server got %s, want %s", a.method, got, a.want)
			}
			server := a.conn.srv.Name
			last := state(t, m, server).LastAnswered
			if last == nil {
				t.Fatalf("%s: no LastAnswered in %s's status", a.method, server)
			}
			a.last.Reason, a.last.At = "no client can take requests outside a call", last.At
			if diff := cmp.Diff(a.last, *last); diff != "" {
				t.Errorf("%s: %s's LastAnswered (-want +got):\n%s", a.method, server, diff)
			}
		}
		if n := len(got); n != len(want) {
			t.Errorf("the RequestFunc was called after stop: %q", got)
		}

		// AnswerForClient, as the gateway calls it.
		res, err := m.AnswerForClient("sh", "roots/list", "the client did not declare roots")
		if err != nil || string(res) != `{"roots":[{"uri":"file:///srv","name":"srv"}]}` {
			t.Errorf("AnswerForClient = %s, %v", res, err)
		}
		if last := state(t, m, "sh").LastAnswered; last == nil || last.Reason != "the client did not declare roots" {
			t.Errorf("LastAnswered = %+v", last)
		}

		// SendNotification: to alice's upstream session, to the shared
		// one; none for a session that has no upstream session.
		ctx := context.Background()
		for _, n := range []struct {
			server string
			who    Caller
		}{{"ps", alice}, {"ps", Caller{Principal: "alice", Session: "s2"}}, {"sh", Caller{}}} {
			if err := m.SendNotification(ctx, n.server, n.who, "notifications/roots/list_changed", nil); err != nil {
				t.Errorf("SendNotification(%s, %v): %v", n.server, n.who, err)
			}
		}
		for _, c := range []struct {
			conn *fakeConn
			want []string
		}{
			{peers["ps"].conn(1), []string{"ping", "notifications/roots/list_changed"}},
			{peers["ps"].conn(0), nil},
			{peers["sh"].conn(0), []string{"notifications/roots/list_changed"}},
		} {
			if diff := cmp.Diff(c.want, c.conn.sent()); diff != "" {
				t.Errorf("%s sent (-want +got):\n%s", c.conn.srv.Name, diff)
			}
		}
		if n := peers["ps"].count(); n != 2 {
			t.Errorf("SendNotification made a client: %d clients of ps", n)
		}
		if err := m.SendNotification(ctx, "nope", Caller{}, "notifications/roots/list_changed", nil); !errors.Is(err, ErrUnknownServer) {
			t.Errorf("SendNotification to an unknown server: %v", err)
		}
	})
}

// TestDefaultAnswer pins the gateway's answers for a client that cannot
// be asked.
func TestDefaultAnswer(t *testing.T) {
	two := []config.Root{{URI: "file:///a", Name: "A"}, {URI: "file:///b"}}
	tests := []struct {
		method string
		roots  []config.Root
		want   string
		answer string
	}{
		{"elicitation/create", two, `{"action":"cancel"}`, "cancel"},
		{"roots/list", two, `{"roots":[{"uri":"file:///a","name":"A"},{"uri":"file:///b"}]}`, "2 roots from config"},
		{"roots/list", nil, `{"roots":[]}`, "an empty list (no roots configured)"},
		{"sampling/createMessage", two, "error -32603: mcpgw has no client to ask for sampling/createMessage: why", "an error"},
		{"resources/list", nil, "error -32601: mcpgw does not offer resources/list to this server", "method not found"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			res, a, err := DefaultAnswer(tt.method, tt.roots, "why")
			got := string(res)
			var jerr *jsonrpc.Error
			if errors.As(err, &jerr) {
				got = fmt.Sprintf("error %d: %s", jerr.Code, jerr.Message)
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || a.Answer != tt.answer || a.Method != tt.method || a.Reason != "why" || a.At.IsZero() {
				t.Errorf("DefaultAnswer = %s, %+v; want %s, answer %q", got, a, tt.want, tt.answer)
			}
		})
	}
}

// TestAnswerForClient_LogRate: the answers the gateway gives a server for
// its clients are logged at info once a minute per server, the rest at
// debug, and the next info line counts them: a server asking without end
// cannot flood the log.
func TestAnswerForClient_LogRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newLogRecorder()
		m := newFakeManager(t, map[string]*fakePeer{"s": {}}, []config.Server{fakeConfig("s")}, ManagerOptions{Logger: slog.New(logs)})
		synctest.Wait()
		for range 3 {
			m.AnswerForClient("s", "elicitation/create", "no one client owns the shared upstream session")
		}
		time.Sleep(answersLogEvery)
		m.AnswerForClient("s", "sampling/createMessage", "no one client owns the shared upstream session")
		var got []string
		for _, r := range logs.find("answering a server request for a client") {
			got = append(got, r.level.String()+" "+r.attrs["method"]+" "+r.attrs["answered_unlogged"])
		}
		want := []string{"INFO elicitation/create ", "DEBUG elicitation/create ", "DEBUG elicitation/create ", "INFO sampling/createMessage 2"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("log lines (-want +got):\n%s", diff)
		}
	})
}
