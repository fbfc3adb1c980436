package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The server-request tests run the gateway in front of the serverrequests
// fixture (e2e/fixtures/serverrequests), which sends its client requests
// that belong to no call: roots/list once initialized and again on
// notifications/roots/list_changed, and an elicitation/create from a
// goroutine of its own (over streamable HTTP, on its GET stream). Where
// one client owns the upstream session (session_mode per_session) the
// client is asked; where none does, the gateway answers for it (roots from
// the server's config, or none), and the server's status says what it
// answered.

// askerGateway starts the fixture (over HTTP, or as a stdio child of the
// gateway) as server "asker" with extra (YAML, each line indented by four
// spaces) in its entry, and a gateway in front of it, and waits until the
// server runs.
func askerGateway(t *testing.T, http bool, extra string) *gateway {
	t.Helper()
	var entry string
	if http {
		p := start(t, baseEnv(), "serverrequests", "-http", "127.0.0.1:0")
		url := p.waitLine(t, "the server's address", func(l string) string {
			if u, ok := strings.CutPrefix(l, "listening on "); ok {
				return strings.TrimSpace(u)
			}
			return ""
		})
		entry = fmt.Sprintf("  - name: asker\n    transport: http\n    url: %s\n", url)
	} else {
		entry = fmt.Sprintf("  - name: asker\n    transport: stdio\n    command: %s\n", bin("serverrequests"))
	}
	g := startGateway(t, baseEnv(), "servers:\n"+entry+extra)
	g.waitState(t, "asker", "running")
	return g
}

// lastAnswered is the part of a server's status that says what the
// gateway last answered for a client.
type lastAnswered struct {
	Method string `json:"method"`
	Answer string `json:"answer"`
	Reason string `json:"reason"`
}

func (g *gateway) lastAnswered(t *testing.T, server string) *lastAnswered {
	t.Helper()
	var st struct {
		LastAnswered *lastAnswered `json:"last_answered"`
	}
	g.adminGet(t, "/admin/servers/"+server, &st)
	return st.LastAnswered
}

// elicitingClient connects a client whose elicitation handler records each
// message and accepts with {"answer": answer}.
func elicitingClient(t *testing.T, g *gateway, seen *recorder, answer string) *mcp.ClientSession {
	t.Helper()
	return connectRelay(t, g, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen.add(req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}, nil
		},
	})
}

// elicitLater has the fixture ask the client outside any call, and returns
// what the fixture got.
func elicitLater(t *testing.T, cs *mcp.ClientSession, message string) string {
	t.Helper()
	if got, isErr := callText(t, cs, "mcp__asker__elicit_later", map[string]any{"message": message}); got != "scheduled" || isErr {
		t.Fatalf("elicit_later = %q (isError %v)", got, isErr)
	}
	got, isErr := callText(t, cs, "mcp__asker__elicit_result", nil)
	if isErr {
		t.Fatalf("elicit_result failed: %s", got)
	}
	return got
}

// TestServerRequests_ElicitationOutsideCall: a per_session server's
// elicitation/create that belongs to no call reaches the one client that
// owns the upstream session, and its answer reaches the server. A client
// that did not declare elicitation is not asked, and a shared server's
// request, which no one client owns, is answered cancel; the server's
// status says so.
func TestServerRequests_ElicitationOutsideCall(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			g := askerGateway(t, tr.http, "    session_mode: per_session\n")

			var seenA, seenB recorder
			a := elicitingClient(t, g, &seenA, "blue")
			b := elicitingClient(t, g, &seenB, "green")
			if got := elicitLater(t, a, "Favourite colour?"); got != `action=accept content={"answer":"blue"}` {
				t.Errorf("the server got %q, want client A's answer", got)
			}
			if got := elicitLater(t, b, "And yours?"); got != `action=accept content={"answer":"green"}` {
				t.Errorf("the server got %q, want client B's answer", got)
			}
			if diff := cmp.Diff([]string{"Favourite colour?"}, seenA.all()); diff != "" {
				t.Errorf("client A was asked (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"And yours?"}, seenB.all()); diff != "" {
				t.Errorf("client B was asked (-want +got):\n%s", diff)
			}

			mute := connectRelay(t, g, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
			// Its upstream session asks roots/list at start: answered
			// before the elicitation, so that the status shows the
			// elicitation last.
			rootsSeen(t, mute, "initial", 0)
			if tr.http {
				// Over HTTP its calls run on an upstream session that
				// declared what it did (nothing): the server knows not
				// to ask it.
				if got := elicitLater(t, mute, "Anyone?"); !strings.Contains(got, "does not support elicitation") {
					t.Errorf("for a client without elicitation the server got %q, want its own refusal", got)
				}
			} else {
				if got := elicitLater(t, mute, "Anyone?"); got != "action=cancel content=null" {
					t.Errorf("for a client without elicitation the server got %q, want cancel", got)
				}
				want := &lastAnswered{Method: "elicitation/create", Answer: "cancel", Reason: "the client did not declare elicitation"}
				if diff := cmp.Diff(want, g.lastAnswered(t, "asker")); diff != "" {
					t.Errorf("last answered (-want +got):\n%s", diff)
				}
			}
			noUserData(t, g, "Favourite colour?", "blue", "green", "And yours?")
		})
	}

	// Over HTTP a shared server's request on its GET stream belongs to no
	// call, and the upstream session to every client: nobody is asked.
	t.Run("shared", func(t *testing.T) {
		g := askerGateway(t, true, "")
		var seenA, seenB recorder
		a := elicitingClient(t, g, &seenA, "blue")
		elicitingClient(t, g, &seenB, "green")
		// The clients declare no sampling, so their calls get an
		// upstream session mirroring that, which asks roots/list at
		// start: answered before the elicitation, so that the status
		// shows the elicitation last.
		rootsSeen(t, a, "initial", 0)
		if got := elicitLater(t, a, "Whose?"); got != "action=cancel content=null" {
			t.Errorf("the server got %q, want cancel", got)
		}
		if n := len(seenA.all()) + len(seenB.all()); n > 0 {
			t.Errorf("clients were asked: A %q, B %q", seenA.all(), seenB.all())
		}
		want := &lastAnswered{Method: "elicitation/create", Answer: "cancel", Reason: "no one client owns the shared upstream session"}
		if diff := cmp.Diff(want, g.lastAnswered(t, "asker")); diff != "" {
			t.Errorf("last answered (-want +got):\n%s", diff)
		}
	})
}

// noUserData fails the test if the gateway's log holds any of words: what
// a server asks and what a user answers are never logged.
func noUserData(t *testing.T, g *gateway, words ...string) {
	t.Helper()
	log := g.Stderr()
	for _, w := range words {
		if strings.Contains(log, w) {
			t.Errorf("the gateway's log holds %q", w)
		}
	}
}

// root is a root as the fixture reports it.
type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// rootsSeen waits for the answer to a roots/list the fixture asked outside
// any call: at start (which "initial") or on the count-th list_changed.
func rootsSeen(t *testing.T, cs *mcp.ClientSession, which string, count int) []root {
	t.Helper()
	got, isErr := callText(t, cs, "mcp__asker__roots_seen", map[string]any{"which": which, "count": count})
	list, ok := strings.CutPrefix(got, "roots: ")
	if isErr || !ok {
		t.Fatalf("the server's %s roots/list got %q (isError %v), want roots", which, got, isErr)
	}
	var roots []root
	if err := json.Unmarshal([]byte(list), &roots); err != nil {
		t.Fatalf("roots %q: %v", list, err)
	}
	return roots
}

// TestServerRequests_Roots: a server that asks roots/list at start (as
// server-filesystem does) gets the roots configured for it, or an empty
// list, not an error; from a per_session server the request reaches the
// client that owns it when it declared roots, and so does the roots/list
// the server asks after the client's notifications/roots/list_changed,
// which the gateway passes on. Answering roots for a client is normal and
// logged at debug only.
func TestServerRequests_Roots(t *testing.T) {
	configured := "    roots:\n      - uri: file:///srv/a\n        name: A\n      - uri: file:///srv/b\n"
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			t.Run("shared, configured", func(t *testing.T) {
				g := askerGateway(t, tr.http, configured)
				cs := connectRelay(t, g, nil, &mcp.Root{URI: "file:///client/one"})
				want := []root{{URI: "file:///srv/a", Name: "A"}, {URI: "file:///srv/b"}}
				if diff := cmp.Diff(want, rootsSeen(t, cs, "initial", 0)); diff != "" {
					t.Errorf("the server's roots at start (-want +got):\n%s", diff)
				}
				wantLast := &lastAnswered{Method: "roots/list", Answer: "2 roots from config", Reason: "no one client owns the shared upstream session"}
				if diff := cmp.Diff(wantLast, g.lastAnswered(t, "asker")); diff != "" {
					t.Errorf("last answered (-want +got):\n%s", diff)
				}
				rootsAtDebug(t, g)
			})

			t.Run("shared, none configured", func(t *testing.T) {
				g := askerGateway(t, tr.http, "")
				cs := connectRelay(t, g, nil)
				if diff := cmp.Diff([]root{}, rootsSeen(t, cs, "initial", 0)); diff != "" {
					t.Errorf("the server's roots at start (-want +got):\n%s", diff)
				}
				wantLast := &lastAnswered{Method: "roots/list", Answer: "an empty list (no roots configured)", Reason: "no one client owns the shared upstream session"}
				if diff := cmp.Diff(wantLast, g.lastAnswered(t, "asker")); diff != "" {
					t.Errorf("last answered (-want +got):\n%s", diff)
				}
				rootsAtDebug(t, g)
			})

			t.Run("per session, the client's roots", func(t *testing.T) {
				g := askerGateway(t, tr.http, "    session_mode: per_session\n"+configured)
				client := mcp.NewClient(&mcp.Implementation{Name: "e2e-roots", Version: "1"}, nil)
				client.AddRoots(&mcp.Root{URI: "file:///client/one", Name: "one"})
				cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, legacySession)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				if diff := cmp.Diff([]root{{URI: "file:///client/one", Name: "one"}}, rootsSeen(t, cs, "initial", 0)); diff != "" {
					t.Errorf("the server's roots at start (-want +got):\n%s", diff)
				}
				// The SDK sends notifications/roots/list_changed.
				client.AddRoots(&mcp.Root{URI: "file:///client/two"})
				want := []root{{URI: "file:///client/one", Name: "one"}, {URI: "file:///client/two"}}
				if diff := cmp.Diff(want, rootsSeen(t, cs, "changed", 1)); diff != "" {
					t.Errorf("the server's roots after list_changed (-want +got):\n%s", diff)
				}
			})

			t.Run("per session, a client without roots", func(t *testing.T) {
				g := askerGateway(t, tr.http, "    session_mode: per_session\n"+configured)
				cs := connectRelay(t, g, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
				want := []root{{URI: "file:///srv/a", Name: "A"}, {URI: "file:///srv/b"}}
				if diff := cmp.Diff(want, rootsSeen(t, cs, "initial", 0)); diff != "" {
					t.Errorf("the server's roots at start (-want +got):\n%s", diff)
				}
				wantLast := &lastAnswered{Method: "roots/list", Answer: "2 roots from config", Reason: "the client did not declare roots"}
				if diff := cmp.Diff(wantLast, g.lastAnswered(t, "asker")); diff != "" {
					t.Errorf("last answered (-want +got):\n%s", diff)
				}
				rootsAtDebug(t, g)
			})
		})
	}
}

// rootsAtDebug fails the test if the gateway logged a roots/list it
// answered for a client above debug: server-filesystem asks at every
// start, and the answer is the normal one.
func rootsAtDebug(t *testing.T, g *gateway) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(g.Stderr()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Level  string `json:"level"`
			Msg    string `json:"msg"`
			Method string `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Method == "roots/list" && rec.Level != "DEBUG" {
			t.Errorf("the gateway logged at %s: %s", rec.Level, sc.Text())
		}
	}
}
