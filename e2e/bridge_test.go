package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bridge matrix runs every way a server's request for input can cross
// mcpgw: a client of either era (2026-07-28 or 2025-11-25) in front of a
// server of either era, over stdio and over HTTP. The server is
// fixtures/bridgeserver, which asks in the era it is spoken to in; the
// clients are the official Go SDK's (a raw client for 2025 tasks).
//
//	client=2026 ─► upstream=modern   input_required relayed, requestState sealed
//	client=2025 ─► upstream=modern   the gateway drives the rounds with real requests
//	client=2025 ─► upstream=legacy   the server's requests relayed during the call
//	client=2026 ─► upstream=legacy   the call is parked: its requests become input_required

// buildBridge builds, once, fixtures/bridgeserver into binDir.
var buildBridge = sync.OnceValues(func() (string, error) {
	args := []string{"build", "-o", binDir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./fixtures/bridgeserver")...).CombinedOutput()
	return string(out), err
})

// notes are lines that arrive while a test runs, for it to wait on
// without polling.
type notes struct {
	mu    sync.Mutex
	items []string
	grew  chan struct{} // closed and replaced at each new line; nil until one waits
}

func (n *notes) add(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.items = append(n.items, s)
	if n.grew != nil {
		close(n.grew)
		n.grew = nil
	}
}

// snapshot returns the lines so far and a channel closed at the next.
func (n *notes) snapshot() ([]string, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.grew == nil {
		n.grew = make(chan struct{})
	}
	return slices.Clone(n.items), n.grew
}

func (n *notes) all() []string {
	items, _ := n.snapshot()
	return items
}

// await waits until found, given the lines so far, says done, and returns
// what it returned; it fails the test after a minute.
func (n *notes) await(t *testing.T, what string, found func([]string) ([]string, bool)) []string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		items, grew := n.snapshot()
		if got, ok := found(items); ok {
			return got
		}
		select {
		case <-grew:
		case <-timeout:
			t.Fatalf("no %s within a minute; got %q", what, items)
		}
	}
}

// waitItem waits for the line s.
func (n *notes) waitItem(t *testing.T, s string) {
	t.Helper()
	n.await(t, fmt.Sprintf("%q", s), func(items []string) ([]string, bool) { return nil, slices.Contains(items, s) })
}

// bridgeLog keeps the lines bridgeservers report with -events. Each
// server reports on one connection, so its lines keep their order; every
// line names the test's unique tag, alone or at the end of a URI.
type bridgeLog struct {
	notes
	addr string
}

// listenBridge listens on 127.0.0.1:0 for bridgeserver reports until the
// test ends.
func listenBridge(t *testing.T) *bridgeLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &bridgeLog{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					l.add(sc.Text())
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l
}

// tagged returns lines that name tag.
func tagged(lines []string, tag string) []string {
	var out []string
	for _, line := range lines {
		if slices.ContainsFunc(strings.Fields(line), func(f string) bool { return f == tag || strings.HasSuffix(f, "/"+tag) }) {
			out = append(out, line)
		}
	}
	return out
}

// wait waits until line has been reported.
func (l *bridgeLog) wait(t *testing.T, tag, line string) {
	t.Helper()
	l.await(t, fmt.Sprintf("report %q", line), func(items []string) ([]string, bool) {
		return nil, slices.Contains(tagged(items, tag), line)
	})
}

// want waits until the call tagged tag ended (the server reported done or
// failed) and checks that the lines of tag are want, in order: the calls
// the server got with their requestState, the answers it got, and its
// result.
func (l *bridgeLog) want(t *testing.T, tag string, want ...string) {
	t.Helper()
	got := l.await(t, "end of the call "+tag, func(items []string) ([]string, bool) {
		lines := tagged(items, tag)
		i := slices.IndexFunc(lines, func(s string) bool {
			return strings.HasPrefix(s, "done "+tag+" ") || strings.HasPrefix(s, "failed "+tag+" ")
		})
		return lines[:i+1], i >= 0
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the server reported for %s (-want +got):\n%s", tag, diff)
	}
}

// bridgeUpstream is one upstream of the matrix.
type bridgeUpstream struct {
	modern bool
	http   bool
}

func (u bridgeUpstream) era() string {
	if u.modern {
		return "modern"
	}
	return "legacy"
}

func (u bridgeUpstream) transport() string {
	if u.http {
		return "http"
	}
	return "stdio"
}

// bridgeExpiry is the input_timeout of the gateways in front of legacy
// servers: how long a parked call waits for a 2026 client's follow-up.
const bridgeExpiry = 2 * time.Second

// startBridge runs a bridgeserver of u's era over u's transport as server
// "bridge" (single_user, so that URL elicitation is relayed from it) and
// a gateway in front of it, and waits until it runs in its era.
func startBridge(t *testing.T, u bridgeUpstream, events string) *gateway {
	t.Helper()
	args := []string{"-events", events}
	if !u.modern {
		args = append(args, "-legacy")
	}
	var cfg strings.Builder
	if !u.modern {
		fmt.Fprintf(&cfg, "input_timeout: %s\n", bridgeExpiry)
	}
	// Every call of a client of the tasks extension becomes a hosted
	// task at once; the Go SDK's clients do not declare it.
	cfg.WriteString("tasks:\n  promote_after: 0s\nresources:\n  namespace: always\nservers:\n  - name: bridge\n")
	if u.http {
		p := start(t, baseEnv(), "bridgeserver", append(args, "-http", "127.0.0.1:0")...)
		url := p.waitLine(t, "the bridgeserver's address", func(l string) string {
			if u, ok := strings.CutPrefix(l, "listening on "); ok {
				return strings.TrimSpace(u)
			}
			return ""
		})
		fmt.Fprintf(&cfg, "    transport: http\n    url: %s\n", url)
	} else {
		quoted, _ := json.Marshal(args)
		fmt.Fprintf(&cfg, "    transport: stdio\n    command: %s\n    args: %s\n", bin("bridgeserver"), quoted)
	}
	fmt.Fprintf(&cfg, "    protocol: %s\n    single_user: true\n", u.era())
	g := startGateway(t, baseEnv(), cfg.String())
	g.waitState(t, "bridge", "running")
	var st struct {
		Era             string `json:"era"`
		ProtocolVersion string `json:"protocol_version"`
	}
	g.adminGet(t, "/admin/servers/bridge", &st)
	version := legacyVersion
	if u.modern {
		version = modernVersion
	}
	if st.Era != u.era() || st.ProtocolVersion != version {
		t.Fatalf("server bridge: era %q, protocol_version %q; want %q, %q", st.Era, st.ProtocolVersion, u.era(), version)
	}
	return g
}

// bridgeClient is a go-sdk client of the matrix and what its handlers saw.
type bridgeClient struct {
	*mcp.ClientSession
	era  string // "2026" or "2025"
	seen notes
}

// subscriptionIDKey is the _meta key that ties a notification to the
// subscriptions/listen it answers (2026-07-28).
const subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

// Answers of the clients' elicitation handler: the two-round tool's
// questions get one and two, any other form the client's era's answer.
const (
	firstAnswer  = "one"
	secondAnswer = "two"
)

func (c *bridgeClient) answer() string { return "answer-" + c.era }

// rootURI is the one root a client of era offers.
func rootURI(era string) string { return "file:///bridge/" + era }

// connectBridge connects a go-sdk client of era ("2026": its default,
// sessionless; "2025": a session) to the gateway. It declares form and URL
// elicitation, sampling and roots; its handlers record what they get in
// seen ("elicit|mode|message|url|elicitationId|schema?", "sample|prompt",
// "complete|elicitationId", "updated|uri|subscriptionId?"). manual turns
// off the SDK's own answering of input_required results, for a test that
// answers them itself.
func connectBridge(t *testing.T, g *gateway, era string, manual bool) *bridgeClient {
	t.Helper()
	c := &bridgeClient{era: era}
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			p := req.Params
			c.seen.add(fmt.Sprintf("elicit|%s|%s|%s|%s|%v", p.Mode, p.Message, p.URL, p.ElicitationID, p.RequestedSchema != nil))
			if p.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			answer := c.answer()
			switch {
			case strings.HasPrefix(p.Message, "First answer?"):
				answer = firstAnswer
			case strings.HasPrefix(p.Message, "Second answer"):
				answer = secondAnswer
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var prompt string
			if len(req.Params.Messages) == 1 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			c.seen.add("sample|" + prompt)
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: c.era + " on " + prompt}}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			c.seen.add("complete|" + req.Params.ElicitationID)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			var sub any
			if req.Params.Meta != nil {
				sub = req.Params.Meta[subscriptionIDKey]
			}
			c.seen.add(fmt.Sprintf("updated|%s|%v", req.Params.URI, sub != nil))
		},
	}
	if manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-bridge", Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: rootURI(era), Name: era})
	var sessOpts *mcp.ClientSessionOptions
	if era == "2025" {
		sessOpts = legacySession
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, sessOpts)
	if err != nil {
		t.Fatalf("connecting a %s client: %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	want := legacyVersion
	if era == "2026" {
		want = modernVersion
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("the %s client negotiated %q, want %q", era, got, want)
	}
	c.ClientSession = cs
	return c
}

// call calls a bridge tool and returns its text; a JSON-RPC error or a
// tool error fails the test, which goes on to see what the server saw
// (bridgeLog.want waits for the server's end of the call, so that a call
// left parked in the gateway does not spill into the next test).
func (c *bridgeClient) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := c.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__bridge__" + tool, Arguments: args})
	if err != nil {
		t.Errorf("calling %s: %v", tool, err)
		return ""
	}
	if res.IsError {
		t.Errorf("%s failed: %s", tool, text(res))
	}
	return text(res)
}

// inputRequired calls the ask tool with the SDK's own answering off and
// returns the one input request and the requestState of the
// input_required result it must get.
func (c *bridgeClient) inputRequired(t *testing.T, tag, message string) (key, state string) {
	t.Helper()
	res, err := c.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__bridge__ask", Arguments: map[string]any{"tag": tag, "message": message}})
	if err != nil {
		t.Fatalf("calling ask: %v", err)
	}
	if !res.NeedsInput() {
		t.Fatalf("ask answered %q (isError %v), want an input_required result", text(res), res.IsError)
	}
	if len(res.InputRequests) != 1 {
		t.Fatalf("ask asked %d input requests, want one: %v", len(res.InputRequests), res.InputRequests)
	}
	var ir mcp.InputRequest
	for key, ir = range res.InputRequests {
	}
	if p, ok := ir.(*mcp.ElicitParams); !ok || p.Message != message || p.Mode == "url" {
		t.Fatalf("input request %q = %#v, want a form elicitation asking %q", key, ir, message)
	}
	if res.RequestState == "" {
		t.Fatal("the input_required result has no requestState")
	}
	return key, res.RequestState
}

// retry sends the ask call again with an accepting answer to key and
// state.
func (c *bridgeClient) retry(t *testing.T, tag, message, key, answer, state string) (*mcp.CallToolResult, error) {
	t.Helper()
	return c.CallTool(ctxT(t), &mcp.CallToolParams{
		Name:           "mcp__bridge__ask",
		Arguments:      map[string]any{"tag": tag, "message": message},
		InputResponses: mcp.InputResponseMap{key: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}},
		RequestState:   state,
	})
}

// wantInvalidParams checks that err is a -32602 whose message holds all of
// words.
func wantInvalidParams(t *testing.T, err error, words ...string) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("err = %v, want JSON-RPC error -32602", err)
		return
	}
	for _, w := range words {
		if !strings.Contains(werr.Message, w) {
			t.Errorf("-32602 message %q does not say %q", werr.Message, w)
		}
	}
}

// tamper changes one character in the middle of a sealed state.
func tamper(state string) string {
	b := []byte(state)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestBridgeMatrix runs clients of both eras against servers of both eras,
// over stdio and HTTP, through one gateway per server: elicitation,
// sampling and roots round trips, two rounds in one call, a tampered
// requestState, a parked call that expires, URL-mode elicitation, a
// resource subscription and a hosted task, each where the cell has it.
// What the server reports (each call and its requestState, each answer)
// pins which way the input went.
func TestBridgeMatrix(t *testing.T) {
	if out, err := buildBridge(); err != nil {
		t.Fatalf("building bridgeserver: %v\n%s", err, out)
	}
	events := listenBridge(t)
	upstreams := []bridgeUpstream{{modern: true}, {modern: true, http: true}, {}, {http: true}}
	for _, u := range upstreams {
		g := startBridge(t, u, events.addr)
		for _, era := range []string{"2026", "2025"} {
			t.Run(fmt.Sprintf("client=%s/upstream=%s/%s", era, u.era(), u.transport()), func(t *testing.T) {
				bridgeCell(t, g, events, u, era)
			})
		}
	}
}

// bridgeCell runs the items of one cell of the matrix.
func bridgeCell(t *testing.T, g *gateway, events *bridgeLog, u bridgeUpstream, era string) {
	c := connectBridge(t, g, era, false)
	prefix := fmt.Sprintf("c%s-%s-%s-", era, u.era(), u.transport())
	// calls lists what the server reports for the rounds of a call of
	// tool: a modern server is called once per round, each time with the
	// requestState of the round before; a legacy one once, and asks
	// during the call.
	serverEra := "2025"
	if u.modern {
		serverEra = "2026"
	}
	calls := func(tool, tag string, states ...string) []string {
		if !u.modern {
			states = states[:1]
		}
		var out []string
		for _, s := range states {
			out = append(out, fmt.Sprintf("call %s %s era=%s state=%s", tool, tag, serverEra, s))
		}
		return out
	}
	then := func(lines []string, more ...string) []string { return append(lines, more...) }

	t.Run("elicitation", func(t *testing.T) {
		tag := prefix + "ask"
		message := "Your answer? " + tag
		want := "action=accept answer=" + c.answer()
		if got := c.call(t, "ask", map[string]any{"tag": tag, "message": message}); got != want {
			t.Errorf("ask = %q, want %q", got, want)
		}
		if diff := cmp.Diff([]string{"elicit|form|" + message + "|||true"}, c.seen.all()); diff != "" {
			t.Errorf("the client's handler was asked (-want +got):\n%s", diff)
		}
		events.want(t, tag, then(calls("ask", tag, "", "ask|"+tag), "answered "+tag+" answer accept", "done "+tag+" "+want)...)
	})

	t.Run("sampling", func(t *testing.T) {
		tag := prefix + "sample"
		prompt := "hello from " + tag
		want := "model=e2e-model text=" + era + " on " + prompt
		if got := c.call(t, "sample", map[string]any{"tag": tag, "prompt": prompt}); got != want {
			t.Errorf("sample = %q, want %q", got, want)
		}
		if !slices.Contains(c.seen.all(), "sample|"+prompt) {
			t.Errorf("the client's handler saw %q, want the prompt %q", c.seen.all(), prompt)
		}
		events.want(t, tag, then(calls("sample", tag, "", "sample|"+tag), "answered "+tag+" sample e2e-model", "done "+tag+" "+want)...)
	})

	t.Run("roots", func(t *testing.T) {
		tag := prefix + "roots"
		want := "roots: " + rootURI(era)
		if got := c.call(t, "roots", map[string]any{"tag": tag}); got != want {
			t.Errorf("roots = %q, want the client's root: %q", got, want)
		}
		events.want(t, tag, then(calls("roots", tag, "", "roots|"+tag), "answered "+tag+" roots 1", "done "+tag+" "+want)...)
	})

	t.Run("two rounds", func(t *testing.T) {
		tag := prefix + "twice"
		before := len(c.seen.all())
		want := "first=" + firstAnswer + " second=" + secondAnswer
		if got := c.call(t, "twice", map[string]any{"tag": tag}); got != want {
			t.Errorf("twice = %q, want %q", got, want)
		}
		asked := []string{
			"elicit|form|First answer? " + tag + "|||true",
			"elicit|form|Second answer, after " + firstAnswer + "? " + tag + "|||true",
		}
		if diff := cmp.Diff(asked, c.seen.all()[before:]); diff != "" {
			t.Errorf("the client's handler was asked (-want +got):\n%s", diff)
		}
		first, second := "answered "+tag+" first accept", "answered "+tag+" second accept"
		var lines []string
		if u.modern {
			lines = slices.Concat(calls("twice", tag, "", "twice|1"), []string{first}, calls("twice", tag, "twice|2|"+firstAnswer), []string{second})
		} else {
			lines = then(calls("twice", tag, ""), first, second)
		}
		events.want(t, tag, then(lines, "done "+tag+" "+want)...)
	})

	// A 2025 client never sees a requestState: the gateway keeps the
	// rounds to itself.
	if era == "2026" {
		t.Run("tampered state", func(t *testing.T) {
			m := connectBridge(t, g, era, true)
			tag := prefix + "tampered"
			message := "Tamper with me? " + tag
			key, state := m.inputRequired(t, tag, message)
			if strings.Contains(state, "ask|") {
				t.Errorf("the requestState %q shows the server's own state: the gateway must seal it", state)
			}
			_, err := m.retry(t, tag, message, key, "tampered", tamper(state))
			wantInvalidParams(t, err, "invalid requestState")
			// The call is still whole: the true state completes it, and
			// the server saw only the calls with states it issued.
			res, err := m.retry(t, tag, message, key, "honest", state)
			if err != nil {
				t.Fatalf("the retry with the untampered state: %v", err)
			}
			want := "action=accept answer=honest"
			if got := text(res); got != want || res.NeedsInput() {
				t.Errorf("the retry with the untampered state = %q (needs input %v), want %q", got, res.NeedsInput(), want)
			}
			events.want(t, tag, then(calls("ask", tag, "", "ask|"+tag), "answered "+tag+" answer accept", "done "+tag+" "+want)...)
		})
	}

	// Only a legacy server's call is parked in the gateway, waiting for
	// the follow-up; a modern server keeps nothing between rounds.
	if era == "2026" && !u.modern {
		t.Run("expired parked call", func(t *testing.T) {
			m := connectBridge(t, g, era, true)
			tag := prefix + "expired"
			message := "Too late? " + tag
			key, state := m.inputRequired(t, tag, message)
			// No follow-up within input_timeout: the server gets the
			// answer of a client that did not answer.
			want := then(calls("ask", tag, ""), "answered "+tag+" answer cancel", "done "+tag+" action=cancel answer=")
			events.want(t, tag, want...)
			_, err := m.retry(t, tag, message, key, "late", state)
			wantInvalidParams(t, err, "expire")
			if got := tagged(events.all(), tag); !slices.Equal(got, want) {
				t.Errorf("after the late follow-up the server had reported %q, want nothing more than %q", got, want)
			}
		})
	}

	t.Run("url elicitation", func(t *testing.T) {
		tag := prefix + "url"
		url := "https://example.com/bridge/" + tag
		before := len(c.seen.all())
		serverID := ""
		if !u.modern {
			serverID = "bridge-el-" + tag
		}
		want := "action=accept elicitationId=" + serverID
		if got := c.call(t, "ask_url", map[string]any{"tag": tag, "url": url}); got != want {
			t.Errorf("ask_url = %q, want %q", got, want)
		}
		events.want(t, tag, then(calls("ask_url", tag, "", "url|"+tag), "answered "+tag+" link accept", "done "+tag+" "+want)...)
		asked := c.seen.all()[before:]
		if len(asked) == 0 || !strings.HasPrefix(asked[0], "elicit|") {
			t.Fatalf("the client's handler saw %q, want a URL elicitation", asked)
		}
		f := strings.Split(asked[0], "|")
		mode, message, gotURL, id, schema := f[1], f[2], f[3], f[4], f[5]
		if mode != "url" || message != "Open the link "+tag || gotURL != url || schema != "false" {
			t.Errorf("the client was asked mode %q, message %q, url %q, a schema %s; want url mode, %q, %q, no schema",
				mode, message, gotURL, schema, "Open the link "+tag, url)
		}
		if era == "2026" {
			// 2026-07-28 has no elicitationId (its changelog, m11).
			if id != "" {
				t.Errorf("a 2026-07-28 client got elicitationId %q, which its era has not", id)
			}
			return
		}
		// 2025-11-25 requires one, the gateway's own: ids are re-minted
		// per hop, and one is made up for a 2026 server's request.
		if id == "" || id == serverID {
			t.Errorf("the 2025 client got elicitationId %q, want one of the gateway's own", id)
		}
		if !u.modern {
			// The server's notifications/elicitation/complete reaches the
			// client under the id the client knows.
			c.seen.waitItem(t, "complete|"+id)
		}
	})

	t.Run("subscription", func(t *testing.T) {
		tag := prefix + "sub"
		uri := "bridge://doc/" + tag
		exposed := "mcp+bridge+" + uri
		// A 2025 client sends resources/subscribe; the 2026 client's
		// Subscribe opens a subscriptions/listen for the resource, which
		// stays open until Unsubscribe.
		if err := c.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: exposed}); err != nil {
			t.Fatalf("subscribing to %s: %v", exposed, err)
		}
		t.Cleanup(func() { c.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: exposed}) })
		events.wait(t, tag, "subscribed "+uri)
		if got, want := c.call(t, "touch", map[string]any{"uri": uri}), "touched "+uri; got != want {
			t.Errorf("touch = %q, want %q", got, want)
		}
		// A 2026 client hears of it on its listen stream, tagged with the
		// listen's id; a 2025 client on its session, untagged.
		c.seen.waitItem(t, fmt.Sprintf("updated|%s|%v", exposed, era == "2026"))
		if err := c.Unsubscribe(ctxT(t), &mcp.UnsubscribeParams{URI: exposed}); err != nil {
			t.Fatalf("unsubscribing from %s: %v", exposed, err)
		}
		events.wait(t, tag, "unsubscribed "+uri)
	})

	t.Run("hosted task", func(t *testing.T) {
		tag := prefix + "task"
		if era == "2026" {
			// The go-sdk has no tasks extension: a raw client of it.
			tc := &extClient{t: t, url: g.URL, caps: tasksExtCaps}
			created := tc.result("tools/call", map[string]any{"name": "mcp__bridge__echo", "arguments": map[string]any{"text": tag}})
			id, _ := created["taskId"].(string)
			if created["resultType"] != "task" || id == "" {
				t.Fatalf("tools/call = %v, want a hosted task", created)
			}
			done := tc.await(id, terminalTask)
			if done["status"] != "completed" || firstText(done["result"]) != "echo: "+tag {
				t.Errorf("tasks/get = %v, want completed with the text %q inlined", done, "echo: "+tag)
			}
			return
		}
		tc := dialTasks(t, g, nil)
		tk := tc.create(t, "mcp__bridge__echo", map[string]any{"text": tag}, 60000)
		if done, _ := tc.poll(t, tk.TaskID, isTerminal); done.Status != "completed" {
			t.Fatalf("the task ended %q (%s), want completed", done.Status, done.StatusMessage)
		}
		res := decodeResult(t, tc.result(t, tk.TaskID))
		if res.text() != "echo: "+tag || res.IsError || relatedTask(res.Meta) != tk.TaskID {
			t.Errorf("tasks/result = %+v, want the text %q, related to task %s", res, "echo: "+tag, tk.TaskID)
		}
	})
}
