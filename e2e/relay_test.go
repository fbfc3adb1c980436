package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay tests run the gateway in front of relay servers
// (e2e/fixtures/relayserver) and check, through the Go SDK client, what
// the gateway relays beyond a call's bytes: cancellation and timeouts under
// the upstream's own request id, progress under each client's own token,
// the requests a server sends during a call (elicitation, sampling,
// roots) and who answers them, logging by level, resource subscriptions,
// restarts, and resuming a dropped SSE stream. The last test does the
// same against npm's @modelcontextprotocol/server-everything where Node is
// there.
//
// The relay server notes on stderr each notifications/cancelled it gets
// and each slow call it sees cancelled, with the request id as it came on
// the wire; a stdio server's stderr reaches the gateway's log file of the
// server as [stderr] lines, an HTTP server's is the test's own pipe.

// relayTransports are the two kinds of upstream most tests run over.
var relayTransports = []struct {
	name string
	http bool
}{
	{"stdio", false},
	{"http", true},
}

// relayUpstream is one relay server behind a test gateway.
type relayUpstream struct {
	name  string
	http  bool   // streamable HTTP; stdio otherwise
	extra string // YAML added to the server's entry, each line indented by four spaces
}

// relayGateway is a gateway in front of relay servers.
type relayGateway struct {
	*gateway
	http map[string]*process // the HTTP relay servers by name; stdio ones run under the gateway
}

// startRelay starts the upstreams and a gateway with global (YAML of
// gateway settings) in front of them, and waits until every server runs.
func startRelay(t testing.TB, global string, ups ...relayUpstream) *relayGateway {
	t.Helper()
	rg := &relayGateway{http: map[string]*process{}}
	var b strings.Builder
	b.WriteString(global)
	b.WriteString("servers:\n")
	for _, u := range ups {
		if u.http {
			p := start(t, baseEnv(), "relayserver", "-http", "127.0.0.1:0", "-name", u.name)
			url := p.waitLine(t, "the relay server's address", func(l string) string {
				if u, ok := strings.CutPrefix(l, "listening on "); ok {
					return strings.TrimSpace(u)
				}
				return ""
			})
			rg.http[u.name] = p
			fmt.Fprintf(&b, "  - name: %s\n    transport: http\n    url: %s\n", u.name, url)
		} else {
			fmt.Fprintf(&b, "  - name: %s\n    transport: stdio\n    command: %s\n    args: [\"-name\", %q]\n", u.name, bin("relayserver"), u.name)
		}
		b.WriteString(u.extra)
	}
	rg.gateway = startGateway(t, baseEnv(), b.String())
	for _, u := range ups {
		rg.waitState(t, u.name, "running")
	}
	return rg
}

// logPath is the gateway's log file of a server.
func (g *gateway) logPath(server string) string {
	return filepath.Join(g.DataDir, "logs", "mcp", server+".log")
}

// serverLog returns the gateway's log file of a server, or "" before it
// exists.
func (g *gateway) serverLog(t testing.TB, server string) string {
	t.Helper()
	b, err := os.ReadFile(g.logPath(server))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// stderrTag matches the tag of a stderr line in a server's log file.
var stderrTag = regexp.MustCompile(`^\S+ \[stderr\]\s+`)

// upstreamStderr returns what a relay server wrote on stderr so far: an
// HTTP server's own pipe, or the [stderr] lines of a stdio server's log
// file.
func (rg *relayGateway) upstreamStderr(t testing.TB, server string) string {
	t.Helper()
	if p := rg.http[server]; p != nil {
		return p.Stderr()
	}
	var b strings.Builder
	for _, l := range strings.Split(rg.serverLog(t, server), "\n") {
		if loc := stderrTag.FindStringIndex(l); loc != nil {
			b.WriteString(l[loc[1]:] + "\n")
		}
	}
	return b.String()
}

// waitStderr polls a relay server's stderr until a line matches re, and
// returns the submatches of the first that does.
func (rg *relayGateway) waitStderr(t testing.TB, server, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(`(?m)` + re)
	deadline := time.Now().Add(time.Minute)
	for {
		if m := rx.FindStringSubmatch(rg.upstreamStderr(t, server)); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stderr line of %s matches %s within a minute; stderr:\n%s", server, re, rg.upstreamStderr(t, server))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// relayStatus is the part of GET /admin/servers/{name} the relay tests read.
type relayStatus struct {
	State    string `json:"state"`
	Error    string `json:"error"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	Sessions int    `json:"sessions"`
	// MirroredSessions are the sessions that mirror a client's
	// capabilities (HTTP servers).
	MirroredSessions int `json:"mirrored_sessions"`
}

func (g *gateway) relayStatus(t testing.TB, name string) relayStatus {
	t.Helper()
	var st relayStatus
	g.adminGet(t, "/admin/servers/"+name, &st)
	return st
}

// recorder collects what a client's handlers saw, for the test goroutine
// to wait on.
type recorder struct {
	mu    sync.Mutex
	items []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.items = append(r.items, s)
	r.mu.Unlock()
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

func (r *recorder) has(s string) bool { return slices.Contains(r.all(), s) }

// wait polls until an item satisfies match and returns it.
func (r *recorder) wait(t testing.TB, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, s := range r.all() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute; got %q", what, r.all())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitItem waits for the item s.
func (r *recorder) waitItem(t testing.TB, s string) {
	t.Helper()
	r.wait(t, fmt.Sprintf("%q", s), func(v string) bool { return v == s })
}

// connectRelay connects a client with opts (nil: the SDK's defaults) to the
// gateway in a 2025-11-25 session, with the standalone GET stream that
// unrelated messages take: the session era's relay of input requests and
// log levels is what these tests pin.
func connectRelay(t testing.TB, g *gateway, opts *mcp.ClientOptions, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-relay", Version: "1"}, opts)
	client.AddRoots(roots...)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, legacySession)
	if err != nil {
		t.Fatalf("connecting to the gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// progressRecorder returns client options that record each progress
// notification as "<token>|<message>".
func progressRecorder(r *recorder) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.add(fmt.Sprintf("%v|%s", req.Params.ProgressToken, req.Params.Message))
		},
	}
}

// callResult is what a CallTool in a goroutine returned.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

// goCall calls a tool in a goroutine; read the channel to wait for it.
func goCall(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		ch <- callResult{res, err}
	}()
	return ch
}

// callText calls a tool and returns its text; a JSON-RPC error fails the test.
func callText(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return text(res), res.IsError
}

// wantGatewayError checks that err is the gateway's JSON-RPC error code
// naming server in data.server, and returns its data.
func wantGatewayError(t testing.TB, err error, code int64, server string) map[string]any {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != code {
		t.Fatalf("err = %v, want JSON-RPC error %d", err, code)
	}
	var data map[string]any
	if err := json.Unmarshal(werr.Data, &data); err != nil || data["server"] != server {
		t.Fatalf("error %d data = %s, want data.server %q", code, werr.Data, server)
	}
	if !strings.Contains(werr.Message, server) {
		t.Errorf("error %d message %q does not name the server %q", code, werr.Message, server)
	}
	return data
}

// TestRelay_Cancel cancels a slow call from the client (the SDK sends
// notifications/cancelled when the call's context ends): the upstream
// sees the cancel under the id it knows the call by, while another
// session's call on the same server runs to its end.
func TestRelay_Cancel(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http})
			var aProgress, bProgress recorder
			a := connectRelay(t, rg.gateway, progressRecorder(&aProgress))
			b := connectRelay(t, rg.gateway, progressRecorder(&bProgress))

			bDone := goCall(ctxT(t), b, &mcp.CallToolParams{
				Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 3, "tag": "B"},
				Meta: mcp.Meta{"progressToken": "b"},
			})
			bProgress.waitItem(t, "b|B step 1") // B's call runs upstream

			actx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			aDone := goCall(actx, a, &mcp.CallToolParams{
				Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 60, "tag": "A"},
				Meta: mcp.Meta{"progressToken": "a"},
			})
			aProgress.waitItem(t, "a|A step 1") // A's call runs upstream
			cancel()
			if r := <-aDone; r.err == nil {
				t.Errorf("the cancelled call returned %q, want an error", text(r.res))
			}

			m := rg.waitStderr(t, "relay", `^slow: cancelled id=(\S+) tag="A"`)
			rg.waitStderr(t, "relay", `^cancelled: requestId=`+regexp.QuoteMeta(m[1])+` reason=`)

			r := <-bDone
			if r.err != nil {
				t.Fatalf("the other session's call: %v", r.err)
			}
			if got := text(r.res); got != "slow: done tag=B steps=15" {
				t.Errorf("the other session's call = %q, want it done", got)
			}
			if strings.Contains(rg.upstreamStderr(t, "relay"), `tag="B"`) {
				t.Errorf("the other session's call was cancelled upstream:\n%s", rg.upstreamStderr(t, "relay"))
			}
		})
	}
}

// TestRelay_Timeout lets a call run past its server's timeout: the client
// gets -31002 naming the server, and the upstream is cancelled with the
// reason "timeout" under its own id.
func TestRelay_Timeout(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http, extra: "    timeout: 1s\n"})
			cs := connectRelay(t, rg.gateway, nil)
			_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 5, "tag": "T"}})
			wantGatewayError(t, err, -31002, "relay")

			m := rg.waitStderr(t, "relay", `^cancelled: requestId=(\S+) reason="timeout"`)
			rg.waitStderr(t, "relay", `^slow: cancelled id=`+regexp.QuoteMeta(m[1])+` tag="T"`)
		})
	}
}

// TestRelay_ProgressTokens has two sessions call the same server at once
// with the same progress token: each gets only its own call's progress,
// under the token it sent.
func TestRelay_ProgressTokens(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http})
			progress := map[string]*recorder{"A": {}, "B": {}}
			done := map[string]<-chan callResult{}
			for _, tag := range []string{"A", "B"} {
				cs := connectRelay(t, rg.gateway, progressRecorder(progress[tag]))
				done[tag] = goCall(ctxT(t), cs, &mcp.CallToolParams{
					Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 1, "tag": tag},
					Meta: mcp.Meta{"progressToken": "same"},
				})
			}
			for _, tag := range []string{"A", "B"} {
				r := <-done[tag]
				if r.err != nil || text(r.res) != "slow: done tag="+tag+" steps=5" {
					t.Fatalf("call %s: %v, %v", tag, r.res, r.err)
				}
				// The last step's progress precedes the result on the
				// call's stream; the client handles it on its own goroutine.
				progress[tag].waitItem(t, "same|"+tag+" step 5")
				for _, p := range progress[tag].all() {
					if !strings.HasPrefix(p, "same|"+tag+" step ") {
						t.Errorf("session %s got progress %q, not of its own call", tag, p)
					}
				}
			}
		})
	}
}

// inputClient is a client that answers every input request and records
// each as "<kind>|<detail>", and each progress notification as
// "progress|<token>|<message>".
func inputClient(t testing.TB, g *gateway, seen *recorder, answer string) *mcp.ClientSession {
	t.Helper()
	return connectRelay(t, g, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen.add("elicit|" + req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var prompt string
			if len(req.Params.Messages) == 1 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			seen.add("sample|" + prompt)
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: answer + " on " + prompt}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			seen.add(fmt.Sprintf("progress|%v|%s", req.Params.ProgressToken, req.Params.Message))
		},
	}, &mcp.Root{URI: "file:///e2e/" + answer, Name: answer})
}

// TestRelay_InputRequests has a server ask its client during a call: for
// a client that declared elicitation, sampling and roots the requests
// reach it and its answers reach the server; for a client that declared
// none the gateway answers (elicitation cancel, sampling an error, roots
// from the server's config).
func TestRelay_InputRequests(t *testing.T) {
	roots := "    roots:\n      - uri: file:///srv/configured\n        name: configured\n"
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http, extra: roots})

			t.Run("capable client", func(t *testing.T) {
				var seen recorder
				cs := inputClient(t, rg.gateway, &seen, "forty-two")
				tests := []struct {
					name, tool string
					args       map[string]any
					want, seen string
				}{
					{"elicitation", "mcp__relay__ask", map[string]any{"message": "What is the answer?"}, `action=accept content={"answer":"forty-two"}`, "elicit|What is the answer?"},
					{"sampling", "mcp__relay__sample", map[string]any{"prompt": "hello"}, "model=e2e-model text=forty-two on hello", "sample|hello"},
					{"roots", "mcp__relay__roots", nil, "roots: file:///e2e/forty-two", ""},
				}
				for _, tt := range tests {
					got, isErr := callText(t, cs, tt.tool, tt.args)
					if got != tt.want || isErr {
						t.Errorf("%s: %s = %q (isError %v), want %q", tt.name, tt.tool, got, isErr, tt.want)
					}
					if tt.seen != "" && !seen.has(tt.seen) {
						t.Errorf("%s: the client's handler saw %q, want %q", tt.name, seen.all(), tt.seen)
					}
				}
			})

			t.Run("client without capabilities", func(t *testing.T) {
				cs := connectRelay(t, rg.gateway, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
				wantAsk, wantErr := "action=cancel content=null", false
				if tr.http {
					// The call's upstream session mirrors the client's
					// capabilities: the server sees no elicitation.
					wantAsk, wantErr = "ask: client does not support elicitation", true
				}
				if got, isErr := callText(t, cs, "mcp__relay__ask", map[string]any{"message": "anyone?"}); got != wantAsk || isErr != wantErr {
					t.Errorf("ask = %q (isError %v); want %q (isError %v)", got, isErr, wantAsk, wantErr)
				}
				if got, isErr := callText(t, cs, "mcp__relay__sample", map[string]any{"prompt": "hello"}); !isErr || !strings.HasPrefix(got, "sample: ") {
					t.Errorf("sample = %q (isError %v); want the upstream to get an error", got, isErr)
				}
				if got, isErr := callText(t, cs, "mcp__relay__roots", nil); got != "roots: file:///srv/configured" || isErr {
					t.Errorf("roots = %q (isError %v); want the configured roots", got, isErr)
				}
			})
		})
	}
}

// TestRelay_ElicitationAttribution has two clients that both answer
// elicitation on one shared server. With only one call in flight the
// request reaches the client that made it. With a second call in flight,
// over stdio nothing tells whose the request is, so the gateway answers
// cancel and asks nobody; over HTTP the request's stream tells.
func TestRelay_ElicitationAttribution(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http})
			var seenA, seenB recorder
			a := inputClient(t, rg.gateway, &seenA, "A")
			b := inputClient(t, rg.gateway, &seenB, "B")

			if got, _ := callText(t, a, "mcp__relay__ask", map[string]any{"message": "alone"}); got != `action=accept content={"answer":"A"}` {
				t.Errorf("the only call in flight: ask = %q, want A's answer", got)
			}

			bctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			bDone := goCall(bctx, b, &mcp.CallToolParams{
				Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 60, "tag": "hold"},
				Meta: mcp.Meta{"progressToken": "hold"},
			})
			seenB.waitItem(t, "progress|hold|hold step 1") // B's call runs upstream

			got, _ := callText(t, a, "mcp__relay__ask", map[string]any{"message": "two in flight"})
			want := `action=cancel content=null`
			if tr.http {
				want = `action=accept content={"answer":"A"}`
			}
			if got != want {
				t.Errorf("with two calls in flight: ask = %q, want %q", got, want)
			}
			if !tr.http && seenA.has("elicit|two in flight") {
				t.Errorf("client A was asked although two calls were in flight on the stdio server")
			}
			for _, s := range seenB.all() {
				if strings.HasPrefix(s, "elicit|") {
					t.Errorf("client B, which asked for no input, was asked %q", s)
				}
			}
			cancel()
			<-bDone
		})
	}
}

// TestRelay_URLElicitation has servers ask for URL-mode elicitation: from
// a shared server the gateway refuses it (the spec binds it to one user)
// and the client's call fails with -31006; from a per_principal server it
// reaches the client under an elicitation id of the gateway's own.
func TestRelay_URLElicitation(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "",
				relayUpstream{name: "shared", http: tr.http},
				relayUpstream{name: "mine", http: tr.http, extra: "    session_mode: per_principal\n"})
			var seen recorder
			cs := connectRelay(t, rg.gateway, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
					Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{},
				}},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					seen.add(fmt.Sprintf("%s|%s|%s", req.Params.Mode, req.Params.URL, req.Params.ElicitationID))
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})

			_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__shared__ask_url", Arguments: map[string]any{"url": "https://example.com/shared"}})
			wantGatewayError(t, err, -31006, "shared")
			if got := seen.all(); len(got) != 0 {
				t.Errorf("the client was asked %q by a shared server", got)
			}

			got, isErr := callText(t, cs, "mcp__mine__ask_url", map[string]any{"url": "https://example.com/mine"})
			if got != "action=accept elicitationId=relay-el-1" || isErr {
				t.Errorf("ask_url on the per_principal server = %q (isError %v), want the client's accept", got, isErr)
			}
			asked := seen.all()
			if len(asked) != 1 {
				t.Fatalf("the client was asked %q, want once", asked)
			}
			parts := strings.Split(asked[0], "|")
			if parts[0] != "url" || parts[1] != "https://example.com/mine" || parts[2] == "" || parts[2] == "relay-el-1" {
				t.Errorf("the client was asked mode|url|elicitationId = %q, want url mode, the server's URL and an id of the gateway's own", asked[0])
			}
			// The per_principal server keeps an upstream session for the
			// one principal there is (anonymous) besides the one that reads
			// its lists; the shared server has none.
			// Over HTTP the session mirrors the client's capabilities
			// (elicitation only), and is counted as such.
			if st := rg.relayStatus(t, "mine"); st.Sessions+st.MirroredSessions != 1 {
				t.Errorf("the per_principal server holds %d sessions and %d mirrored ones, want 1 in all", st.Sessions, st.MirroredSessions)
			}
			if st := rg.relayStatus(t, "shared"); st.Sessions != 0 {
				t.Errorf("the shared server holds %d sessions, want 0", st.Sessions)
			}
		})
	}
}

// logRecorder returns client options that record each log message as
// "<level>|<logger>|<data>".
func logRecorder(r *recorder) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.add(fmt.Sprintf("%s|%s|%v", req.Params.Level, req.Params.Logger, req.Params.Data))
		},
	}
}

// TestRelay_Logging sets session A to warning and B to debug. The server's
// log messages of a call reach only that call's session, filtered by its
// level, with the server's name in logger; messages that belong to no call
// reach every session whose level admits them. Every message is in the
// server's log file.
func TestRelay_Logging(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tr.http})
			var logsA, logsB recorder
			a := connectRelay(t, rg.gateway, logRecorder(&logsA))
			b := connectRelay(t, rg.gateway, logRecorder(&logsB))
			if err := a.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
				t.Fatal(err)
			}
			if err := b.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			logCall := func(cs *mcp.ClientSession, args map[string]any) {
				t.Helper()
				if got, isErr := callText(t, cs, "mcp__relay__log", args); isErr || !strings.HasPrefix(got, "log: ") {
					t.Fatalf("log %v = %q", args, got)
				}
			}
			// The server gets the lowest level asked (debug) in the
			// background; until then it drops debug messages itself.
			deadline := time.Now().Add(time.Minute)
			for i := 0; ; i++ {
				probe := fmt.Sprintf("probe-%d", i)
				logCall(b, map[string]any{"level": "debug", "text": probe})
				if slices.ContainsFunc(logsB.all(), func(s string) bool { return strings.HasSuffix(s, "|"+probe) }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server never sent a debug message to B: %q; the server's stderr:\n%s\nits log file:\n%s", logsB.all(), rg.upstreamStderr(t, "relay"), rg.serverLog(t, "relay"))
				}
				time.Sleep(50 * time.Millisecond)
			}

			// One call at a time, so that over stdio each message belongs
			// to the only call in flight.
			logCall(a, map[string]any{"level": "info", "text": "A-info"})
			logCall(a, map[string]any{"level": "error", "text": "A-error", "logger": "db"})
			logCall(b, map[string]any{"level": "info", "text": "B-info"})
			logCall(b, map[string]any{"level": "error", "text": "B-error", "logger": "db"})
			logsA.waitItem(t, "error|relay/db|A-error")
			logsB.waitItem(t, "info|relay|B-info")
			logsB.waitItem(t, "error|relay/db|B-error")

			// Messages of no call: the error reaches both, the info only B.
			// Each is sent 200ms after its call answers; the next call
			// starts only once it arrived, so none is in flight then.
			logCall(b, map[string]any{"level": "error", "text": "later-error", "later": true})
			logsA.waitItem(t, "error|relay|later-error")
			logsB.waitItem(t, "error|relay|later-error")
			logCall(b, map[string]any{"level": "info", "text": "later-info", "later": true})
			logsB.waitItem(t, "info|relay|later-info")
			// A sentinel on the same stream as later-info would be for A.
			logCall(b, map[string]any{"level": "error", "text": "later-sentinel", "later": true})
			logsA.waitItem(t, "error|relay|later-sentinel")
			logsB.waitItem(t, "error|relay|later-sentinel")

			for _, s := range logsA.all() {
				level, _, _ := strings.Cut(s, "|")
				if level == "info" || level == "debug" {
					t.Errorf("session A (warning) got %q", s)
				}
				if strings.Contains(s, "|B-") || strings.Contains(s, "|probe-") {
					t.Errorf("session A got %q from B's call", s)
				}
			}
			for _, s := range logsB.all() {
				if strings.Contains(s, "|A-") {
					t.Errorf("session B got %q from A's call", s)
				}
			}

			deadline = time.Now().Add(time.Minute)
			for {
				file := rg.serverLog(t, "relay")
				var missing []string
				for _, want := range []string{
					// A session that mirrors its client's capabilities
					// labels its lines.
					`\[info\]\s+(?:mirroring \S+: )?A-info$`, `\[error\]\s+(?:mirroring \S+: )?db: A-error$`,
					`\[info\]\s+(?:mirroring \S+: )?B-info$`, `\[error\]\s+(?:mirroring \S+: )?db: B-error$`,
					`\[error\]\s+(?:mirroring \S+: )?later-error$`, `\[info\]\s+(?:mirroring \S+: )?later-info$`,
				} {
					if !regexp.MustCompile(`(?m)` + want).MatchString(file) {
						missing = append(missing, want)
					}
				}
				if len(missing) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server's log file %s has no line matching %q:\n%s", rg.logPath("relay"), missing, file)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestRelay_Subscribe subscribes to a server's resource through the
// gateway: when the server says it changed, the subscribed session hears
// of it under the URI the gateway exposes (namespaced or not), and another
// session does not.
func TestRelay_Subscribe(t *testing.T) {
	tests := []struct {
		name    string
		http    bool
		extra   string
		exposed string
	}{
		{"stdio", false, "", "relay://doc/1"},
		{"http namespaced", true, "    resources:\n      namespace: always\n", "mcp+relay+relay://doc/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := startRelay(t, "", relayUpstream{name: "relay", http: tt.http, extra: tt.extra})
			updated := func(r *recorder) *mcp.ClientOptions {
				return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					r.add(req.Params.URI)
				}}
			}
			var mine, other recorder
			cs := connectRelay(t, rg.gateway, updated(&mine))
			connectRelay(t, rg.gateway, updated(&other))

			res, err := cs.ListResources(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Resources) != 1 || res.Resources[0].URI != tt.exposed {
				t.Fatalf("resources/list = %v, want one resource %s", res.Resources, tt.exposed)
			}
			if err := cs.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: tt.exposed}); err != nil {
				t.Fatalf("subscribing to %s: %v", tt.exposed, err)
			}
			rg.waitStderr(t, "relay", `^subscribe: relay://doc/1$`)

			callText(t, cs, "mcp__relay__touch", map[string]any{"uri": "relay://doc/1"})
			mine.waitItem(t, tt.exposed)
			if got := other.all(); len(got) != 0 {
				t.Errorf("a session that did not subscribe heard of %q", got)
			}

			if err := cs.Unsubscribe(ctxT(t), &mcp.UnsubscribeParams{URI: tt.exposed}); err != nil {
				t.Fatalf("unsubscribing from %s: %v", tt.exposed, err)
			}
			rg.waitStderr(t, "relay", `^unsubscribe: relay://doc/1$`)
		})
	}
}

// TestRelay_Restart stops a stdio server mid-call, by kill -9 or by its
// own exit: the call fails with -31001 naming the server; while the server
// waits to restart its tools leave tools/list (clients get list_changed)
// and calling one gives -31001 with the server's state; then it is
// restarted (a new pid, restarts counted), its tools come back and the
// next call works.
func TestRelay_Restart(t *testing.T) {
	tests := []struct {
		name string
		kill bool
	}{
		{"kill -9", true},
		{"exit", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The backoff leaves time to look at the server while it is
			// down; the test waits for each state, never for a duration.
			rg := startRelay(t, "list_changed_debounce: 50ms\n", relayUpstream{name: "relay",
				extra: "    restart:\n      initial_backoff: 4s\n      max_backoff: 4s\n"})
			var changed recorder
			var progress recorder
			opts := progressRecorder(&progress)
			opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed.add("tools") }
			cs := connectRelay(t, rg.gateway, opts)
			before := rg.relayStatus(t, "relay")
			if before.PID == 0 {
				t.Fatal("no pid for the stdio server")
			}

			var err error
			if tt.kill {
				done := goCall(ctxT(t), cs, &mcp.CallToolParams{
					Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 60, "tag": "K"},
					Meta: mcp.Meta{"progressToken": "k"},
				})
				progress.waitItem(t, "k|K step 1") // the call runs upstream
				if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				err = (<-done).err // never hangs: the call fails when the process dies
			} else {
				_, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__relay__exit"})
			}
			wantGatewayError(t, err, -31001, "relay")

			// Down, waiting to restart.
			deadline := time.Now().Add(time.Minute)
			for st := rg.relayStatus(t, "relay"); st.State != "restarting"; st = rg.relayStatus(t, "relay") {
				if time.Now().After(deadline) {
					t.Fatalf("the server is %s (%s), not restarting", st.State, st.Error)
				}
				time.Sleep(20 * time.Millisecond)
			}
			_, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__relay__slow", Arguments: map[string]any{"seconds": 0}})
			if data := wantGatewayError(t, err, -31001, "relay"); data["state"] == "" || data["state"] == "running" {
				t.Errorf("calling a tool of the server while it is down: data.state = %v, want the state it is in", data["state"])
			}
			changed.waitItem(t, "tools")
			if tools := toolsByName(t, cs); tools["mcp__relay__slow"] != nil {
				t.Errorf("tools/list still has mcp__relay__slow while the server is down")
			}

			// Restarted.
			deadline = time.Now().Add(time.Minute)
			var after relayStatus
			for after = rg.relayStatus(t, "relay"); after.State != "running" || after.PID == before.PID; after = rg.relayStatus(t, "relay") {
				if time.Now().After(deadline) {
					t.Fatalf("the server was not restarted: %+v", after)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if after.Restarts < 1 {
				t.Errorf("restarts = %d after a restart", after.Restarts)
			}
			// The tools come back, and a list_changed tells of it. The
			// count of notices alone does not say that the latest is the
			// restart's (a client that connected before the gateway
			// merged the server's lists at its start was told of that
			// too), so each notice is followed by a look at tools/list
			// until a list has the tool; when none comes, changed.wait
			// fails the test. Then there have been two at least: the
			// server going down, and its return.
			for n := len(changed.all()) + 1; ; n++ {
				if tools := toolsByName(t, cs); tools["mcp__relay__slow"] != nil {
					break
				}
				changed.wait(t, fmt.Sprintf("list_changed number %d, with mcp__relay__slow back in tools/list", n),
					func(string) bool { return len(changed.all()) >= n })
			}
			changed.wait(t, "a list_changed for the return", func(string) bool { return len(changed.all()) >= 2 })
			if got, isErr := callText(t, cs, "mcp__relay__slow", map[string]any{"seconds": 0.2, "tag": "back"}); got != "slow: done tag=back steps=1" || isErr {
				t.Errorf("after the restart: slow = %q (isError %v)", got, isErr)
			}
			if file := rg.serverLog(t, "relay"); !strings.Contains(file, "[lifecycle]") {
				t.Errorf("the server's log file has no [lifecycle] line:\n%s", file)
			}
		})
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, data string }

// readSSE reads the next event that has an id or data, skipping comments
// (keep-alives) and retry fields.
func readSSE(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if seen {
				ev.data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id, seen = value, true
		case "data":
			data, seen = append(data, value), true
		}
	}
}

// rawSession initializes a 2025-11-25 session with raw HTTP and returns
// the headers its later requests carry.
func rawSession(t *testing.T, mcpURL string) map[string]string {
	t.Helper()
	resp, body := rawPost(t, mcpURL, initBody, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize = %d %s", resp.StatusCode, body)
	}
	session := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	if resp, body := rawPost(t, mcpURL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); resp.StatusCode != 202 {
		t.Fatalf("notifications/initialized = %d %s", resp.StatusCode, body)
	}
	return session
}

// postAndDrop POSTs a request whose answer is an SSE stream, reads the
// stream's priming event, closes the connection and returns the event's id.
func postAndDrop(t *testing.T, mcpURL string, session map[string]string, body string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", mcpURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range session {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("POST %s = %d %s, want an SSE stream", body, resp.StatusCode, ct)
	}
	priming, err := readSSE(bufio.NewReader(resp.Body))
	resp.Body.Close() // drops the connection mid-call
	if err != nil {
		t.Fatalf("reading the priming event: %v", err)
	}
	if priming.id == "" || priming.data != "" {
		t.Fatalf("first event = %+v, want a priming event (an id, empty data)", priming)
	}
	return priming.id
}

// TestRelay_ResumeSSE drops the connection of a call's SSE stream right
// after its priming event. Resumed with GET and Last-Event-ID, the call
// was not cancelled and its result arrives on the resumed stream; not
// resumed within resume_window, the call is cancelled upstream.
func TestRelay_ResumeSSE(t *testing.T) {
	for _, tr := range relayTransports {
		t.Run(tr.name, func(t *testing.T) {
			rg := startRelay(t, "resume_window: 2s\n", relayUpstream{name: "relay", http: tr.http})
			mcpURL := rg.URL + "/mcp"

			t.Run("resumed", func(t *testing.T) {
				session := rawSession(t, mcpURL)
				lastID := postAndDrop(t, mcpURL, session,
					`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__relay__slow","arguments":{"seconds":2,"tag":"resume"}}}`)
				get, _ := http.NewRequestWithContext(ctxT(t), "GET", mcpURL, nil)
				get.Header.Set("Accept", "text/event-stream")
				get.Header.Set("Last-Event-ID", lastID)
				for k, v := range session {
					get.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(get)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("GET with Last-Event-ID %s = %d %s", lastID, resp.StatusCode, b)
				}
				br := bufio.NewReader(resp.Body)
				for {
					ev, err := readSSE(br)
					if err != nil {
						t.Fatalf("the resumed stream ended without the call's response: %v", err)
					}
					var msg struct {
						ID     json.RawMessage `json:"id"`
						Result struct {
							Content []struct{ Text string } `json:"content"`
						} `json:"result"`
						Error json.RawMessage `json:"error"`
					}
					if ev.data == "" || json.Unmarshal([]byte(ev.data), &msg) != nil || string(msg.ID) != "7" {
						continue
					}
					if msg.Error != nil || len(msg.Result.Content) != 1 || msg.Result.Content[0].Text != "slow: done tag=resume steps=10" {
						t.Fatalf("the call's response on the resumed stream = %s", ev.data)
					}
					break
				}
				if stderr := rg.upstreamStderr(t, "relay"); strings.Contains(stderr, `tag="resume"`) {
					t.Errorf("the dropped connection cancelled the call upstream:\n%s", stderr)
				}
			})

			t.Run("not resumed", func(t *testing.T) {
				session := rawSession(t, mcpURL)
				postAndDrop(t, mcpURL, session,
					`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mcp__relay__slow","arguments":{"seconds":60,"tag":"gone"}}}`)
				m := rg.waitStderr(t, "relay", `^slow: cancelled id=(\S+) tag="gone"`)
				rg.waitStderr(t, "relay", `^cancelled: requestId=`+regexp.QuoteMeta(m[1])+` reason=`)
			})
		})
	}
}

// serverEverythingVersion is the npm @modelcontextprotocol/server-everything
// the tests run.
const serverEverythingVersion = "2026.8.31"

// everythingInstall installs server-everything once per test binary.
var everythingInstall struct {
	once sync.Once
	dir  string
	err  error
}

// serverEverything returns node and the server's script, installing the
// package into the user's cache directory unless MCPGW_SERVER_EVERYTHING_DIR
// names a folder that has it. Without node (or, to install, npm) the test
// is skipped: the project runs npm's server-everything where Node is there.
func serverEverything(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node is needed for npm's server-everything: node is not on PATH")
	}
	const rel = "node_modules/@modelcontextprotocol/server-everything"
	dir := os.Getenv("MCPGW_SERVER_EVERYTHING_DIR")
	if dir == "" {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("Node is needed for npm's server-everything: npm is not on PATH to install it (or set MCPGW_SERVER_EVERYTHING_DIR)")
		}
		everythingInstall.once.Do(func() {
			everythingInstall.dir, everythingInstall.err = installServerEverything(rel)
		})
		if everythingInstall.err != nil {
			t.Fatalf("installing @modelcontextprotocol/server-everything@%s: %v", serverEverythingVersion, everythingInstall.err)
		}
		dir = everythingInstall.dir
	}
	script = filepath.Join(dir, rel, "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("server-everything in %s: %v", dir, err)
	}
	return node, script
}

// installedVersion is the version of the package installed at dir/rel, or "".
func installedVersion(dir, rel string) string {
	b, err := os.ReadFile(filepath.Join(dir, rel, "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct{ Version string }
	json.Unmarshal(b, &pkg)
	return pkg.Version
}

// installServerEverything installs the pinned server-everything into
// <user cache>/mcpgw-e2e/server-everything, unless it is there already,
// under a file lock that other test processes respect, within 5 minutes.
func installServerEverything(rel string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "mcpgw-e2e", "server-everything")
	if installedVersion(dir, rel) == serverEverythingVersion {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if installedVersion(dir, rel) == serverEverythingVersion {
		return dir, nil // another process installed it meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund",
		"@modelcontextprotocol/server-everything@"+serverEverythingVersion)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm install: %w\n%s", err, out)
	}
	if v := installedVersion(dir, rel); v != serverEverythingVersion {
		return "", fmt.Errorf("npm installed version %q", v)
	}
	return dir, nil
}

// TestRelay_ServerEverything runs npm's server-everything as a stdio
// upstream: a long-running operation sends progress under the client's
// token, and its elicitation and sampling tools reach the client's
// handlers and return their answers.
func TestRelay_ServerEverything(t *testing.T) {
	node, script := serverEverything(t)
	g := startGateway(t, baseEnv(), fmt.Sprintf("list_changed_debounce: 50ms\nservers:\n  - name: everything\n    transport: stdio\n    command: %s\n    args: [%q, \"stdio\"]\n", node, script))
	g.waitState(t, "everything", "running")

	var seen recorder
	cs := connectRelay(t, g, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen.add("elicit|" + req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "E2E Tester", "check": true}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			seen.add("sample")
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by e2e"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			seen.add(fmt.Sprintf("progress|%v|%v", req.Params.ProgressToken, req.Params.Progress))
		},
	})

	// The server adds its elicitation and sampling tools once initialized
	// (it checks the gateway's capabilities), then says its list changed.
	deadline := time.Now().Add(time.Minute)
	for {
		tools := toolsByName(t, cs)
		if tools["mcp__everything__trigger-elicitation-request"] != nil && tools["mcp__everything__trigger-sampling-request"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never listed server-everything's elicitation and sampling tools: %v", slices.Sorted(func(yield func(string) bool) {
				for n := range tools {
					if !yield(n) {
						return
					}
				}
			}))
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("progress", func(t *testing.T) {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{
			Name: "mcp__everything__trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 2},
			Meta: mcp.Meta{"progressToken": "everything-1"},
		})
		if err != nil || res.IsError || !strings.Contains(text(res), "Long running operation completed") {
			t.Fatalf("trigger-long-running-operation = %v, %v", res, err)
		}
		seen.waitItem(t, "progress|everything-1|2")
	})
	t.Run("elicitation", func(t *testing.T) {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__everything__trigger-elicitation-request"})
		if err != nil || res.IsError {
			t.Fatalf("trigger-elicitation-request = %v, %v", res, err)
		}
		if got := text(res); !strings.Contains(got, "E2E Tester") || !strings.Contains(got, `"action": "accept"`) {
			t.Errorf("trigger-elicitation-request = %q, want the client's answer", got)
		}
		seen.wait(t, "the elicitation", func(s string) bool { return strings.HasPrefix(s, "elicit|") })
	})
	t.Run("sampling", func(t *testing.T) {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__everything__trigger-sampling-request", Arguments: map[string]any{"prompt": "hello"}})
		if err != nil || res.IsError {
			t.Fatalf("trigger-sampling-request = %v, %v", res, err)
		}
		if got := text(res); !strings.Contains(got, "sampled by e2e") || !strings.Contains(got, "e2e-model") {
			t.Errorf("trigger-sampling-request = %q, want the client's answer", got)
		}
		seen.waitItem(t, "sample")
	})
}
