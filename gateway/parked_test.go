package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// parkedServer is a server of the session era whose tools ask the client
// during the call, as a 2025-11-25 server does; answers gets what each
// request was answered.
func parkedServer(answers chan<- string) *upstreamtest.Server {
	ask := func(ctx context.Context, hooks *upstream.CallHooks, method, params string) string {
		res, err := hooks.Request(ctx, &jsonrpc.Message{Method: method, Params: json.RawMessage(params)})
		if err != nil {
			answers <- "error: " + err.Error()
			return "error"
		}
		answers <- string(res)
		return string(res)
	}
	return &upstreamtest.Server{
		Name: "old",
		Era:  upstream.EraLegacy,
		Tools: raws(`{"name":"one","inputSchema":{"type":"object"}}`, `{"name":"two","inputSchema":{"type":"object"}}`,
			`{"name":"all","inputSchema":{"type":"object"}}`, `{"name":"quiet","inputSchema":{"type":"object"}}`,
			`{"name":"hang","inputSchema":{"type":"object"}}`),
		Prompts: raws(`{"name":"p"}`),
		Handle: func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			name, _ := rawjson.String(params, "name")
			text := func(s string) (json.RawMessage, error) {
				b, _ := json.Marshal(s)
				if method == "prompts/get" {
					return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":` + string(b) + `}}]}`), nil
				}
				return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}]}`), nil
			}
			switch {
			case method == "prompts/get", name == "one":
				return text("got " + ask(ctx, hooks, "elicitation/create", `{"message":"Name?","requestedSchema":{"type":"object"}}`))
			case name == "two":
				first := ask(ctx, hooks, "elicitation/create", `{"message":"Name?","requestedSchema":{"type":"object"}}`)
				second := ask(ctx, hooks, "elicitation/create", `{"message":"Colour?","requestedSchema":{"type":"object"}}`)
				return text(first + " then " + second)
			case name == "all":
				var wg sync.WaitGroup
				got := make([]string, 3)
				for i, r := range [][2]string{
					{"elicitation/create", `{"message":"Name?","requestedSchema":{"type":"object"}}`},
					{"sampling/createMessage", `{"messages":[],"maxTokens":5}`},
					{"roots/list", ``},
				} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						got[i] = ask(ctx, hooks, r[0], r[1])
					}()
				}
				wg.Wait()
				return text(strings.Join(got, " | "))
			case name == "hang": // asks, then works until cancelled
				ask(ctx, hooks, "elicitation/create", `{"message":"Name?","requestedSchema":{"type":"object"}}`)
				<-ctx.Done()
				answers <- "cancelled"
				return nil, ctx.Err()
			case name == "quiet":
				return text("no input needed")
			}
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no tool %q", name)
		},
	}
}

// modernCall makes a request of a 2026-07-28 client that declared every
// kind of input.
func modernCall(s *Server, ctx context.Context, principal, method, params string) (*Result, error) {
	return s.Handle(ctx, &Request{
		Method: method, Principal: principal, Params: json.RawMessage(params),
		Client: Client{ProtocolVersion: "2026-07-28", Capabilities: json.RawMessage(`{"elicitation":{},"sampling":{},"roots":{}}`)},
	})
}

// inputRequired checks res is an input_required result and returns its
// inputRequests' keys by method, and its requestState.
func wantInputRequired(t *testing.T, res *Result, err error) (map[string]string, string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.Type != ResultInputRequired {
		t.Fatalf("result %q %s, want input_required", res.Type, res.Body)
	}
	if typ, _ := rawjson.String(res.Body, "resultType"); typ != "input_required" {
		t.Errorf("resultType %q in %s", typ, res.Body)
	}
	reqs, _, _ := rawjson.Get(res.Body, "inputRequests")
	keys := map[string]string{}
	rawjson.Members(reqs, func(k, v []byte) bool {
		key, _ := rawjson.Unquote(k)
		m, _ := rawjson.String(v, "method")
		keys[m] = key
		return true
	})
	state, _ := rawjson.String(res.Body, "requestState")
	if state == "" {
		t.Fatalf("no requestState in %s", res.Body)
	}
	return keys, state
}

func followUp(name, state string, responses map[string]string) string {
	var b strings.Builder
	b.WriteString(`{"name":"` + name + `","arguments":{},"requestState":"` + state + `","inputResponses":{`)
	first := true
	for k, v := range responses {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(`"` + k + `":` + v)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestParked_RoundTrips: a 2026-07-28 client's call to a server of the
// session era that asks for input mid-call gets input_required; its
// follow-up's answers reach the waiting server request, and the call's
// result (or the next round) comes back.
func TestParked_RoundTrips(t *testing.T) {
	answers := make(chan string, 16)
	m := upstreamtest.NewManager(parkedServer(answers))
	s := newCore(t, m, Options{Naming: config.Naming{PrefixMode: "never"}})
	ctx := context.Background()

	t.Run("one round", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"one","arguments":{}}`)
		keys, state := wantInputRequired(t, res, err)
		key := keys["elicitation/create"]
		if key == "" || !strings.Contains(string(res.Body), `"message":"Name?"`) {
			t.Fatalf("inputRequests do not carry the server's request: %s", res.Body)
		}
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("one", state, map[string]string{key: `{"action":"accept","content":{"name":"Ada"}}`}))
		if err != nil {
			t.Fatal(err)
		}
		if got := <-answers; got != `{"action":"accept","content":{"name":"Ada"}}` {
			t.Errorf("the server was answered %s", got)
		}
		if res.Type != ResultComplete || !strings.Contains(string(res.Body), `got {\"action\":\"accept\"`) {
			t.Errorf("result %q %s, want the call's own", res.Type, res.Body)
		}
		// The state of a finished call is spent.
		_, err = modernCall(s, ctx, "alice", "tools/call", followUp("one", state, map[string]string{key: `{"action":"accept"}`}))
		wantInvalidParams(t, err, "is over")
	})

	t.Run("two rounds and a missing answer", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"two","arguments":{}}`)
		keys, first := wantInputRequired(t, res, err)
		key1 := keys["elicitation/create"]
		// An answer under another key leaves the request asked again.
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("two", first, map[string]string{"nope": `{"action":"accept"}`}))
		keys, again := wantInputRequired(t, res, err)
		if keys["elicitation/create"] != key1 {
			t.Errorf("a missing answer was not asked again under %q: %s", key1, res.Body)
		}
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("two", again, map[string]string{key1: `{"action":"accept","content":{"n":"Ada"}}`}))
		keys, second := wantInputRequired(t, res, err)
		<-answers
		key2 := keys["elicitation/create"]
		if key2 == key1 || second == first || !strings.Contains(string(res.Body), "Colour?") {
			t.Errorf("round 2: key %q (round 1 %q), state changed %v: %s", key2, key1, second != first, res.Body)
		}
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("two", second, map[string]string{key2: `{"action":"accept","content":{"c":"blue"}}`}))
		if err != nil {
			t.Fatal(err)
		}
		<-answers
		if !strings.Contains(string(res.Body), "Ada") || !strings.Contains(string(res.Body), "blue") {
			t.Errorf("result %s, want both answers", res.Body)
		}
	})

	t.Run("requests sent at once make one round", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"all","arguments":{}}`)
		keys, state := wantInputRequired(t, res, err)
		if len(keys) != 3 || keys["elicitation/create"] == "" || keys["sampling/createMessage"] == "" || keys["roots/list"] == "" {
			t.Fatalf("one round with %v, want elicitation, sampling and roots: %s", keys, res.Body)
		}
		// The server sent roots/list without params; clients decode
		// them as an object.
		if !strings.Contains(string(res.Body), `"method":"roots/list","params":{}`) {
			t.Errorf("roots/list without params, want {}: %s", res.Body)
		}
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("all", state, map[string]string{
			keys["elicitation/create"]:     `{"action":"decline"}`,
			keys["sampling/createMessage"]: `{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`,
			keys["roots/list"]:             `{"roots":[]}`,
		}))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-answers
		}
		if res.Type != ResultComplete || !strings.Contains(string(res.Body), "decline") || !strings.Contains(string(res.Body), "roots") {
			t.Errorf("result %q %s", res.Type, res.Body)
		}
	})

	t.Run("prompts/get parks too", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "prompts/get", `{"name":"p"}`)
		keys, state := wantInputRequired(t, res, err)
		res, err = modernCall(s, ctx, "alice", "prompts/get", `{"name":"p","requestState":"`+state+`","inputResponses":{"`+keys["elicitation/create"]+`":{"action":"cancel"}}}`)
		if err != nil {
			t.Fatal(err)
		}
		<-answers
		if !strings.Contains(string(res.Body), "messages") || !strings.Contains(string(res.Body), "cancel") {
			t.Errorf("prompt %s", res.Body)
		}
	})

	t.Run("a call that asks nothing", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"quiet","arguments":{}}`)
		if err != nil || res.Type != ResultComplete || !strings.Contains(string(res.Body), "no input needed") {
			t.Errorf("%v %v", res, err)
		}
	})

	s.parkMu.Lock()
	n := len(s.parked)
	s.parkMu.Unlock()
	if n != 0 {
		t.Errorf("%d parked calls left after every call ended", n)
	}
}

// TestParked_Refusals: a follow-up with a state that was changed, made
// for another principal, tool or method, or with malformed answers, is
// -32602 and never reaches the waiting server; the call still waits for
// its rightful follow-up.
func TestParked_Refusals(t *testing.T) {
	answers := make(chan string, 16)
	s := newCore(t, upstreamtest.NewManager(parkedServer(answers)), Options{Naming: config.Naming{PrefixMode: "never"}})
	ctx := context.Background()
	res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"one","arguments":{}}`)
	keys, state := wantInputRequired(t, res, err)
	key := keys["elicitation/create"]
	tampered := []byte(state)
	tampered[len(tampered)/2] ^= 1
	for _, tt := range []struct {
		name, principal, method, params, want string
	}{
		{"changed", "alice", "tools/call", followUp("one", string(tampered), map[string]string{key: `{"action":"accept"}`}), "not issued by this gateway"},
		{"appended", "alice", "tools/call", followUp("one", state+"-TAMPERED", map[string]string{key: `{"action":"accept"}`}), "not issued by this gateway"},
		{"another principal", "bob", "tools/call", followUp("one", state, map[string]string{key: `{"action":"accept"}`}), "not issued to you"},
		{"another tool", "alice", "tools/call", followUp("two", state, map[string]string{key: `{"action":"accept"}`}), "another request"},
		{"another method", "alice", "prompts/get", `{"name":"p","requestState":"` + state + `"}`, "another request"},
		{"answers not an object", "alice", "tools/call", `{"name":"one","requestState":"` + state + `","inputResponses":[1]}`, "inputResponses must be an object"},
		{"null answers", "alice", "tools/call", `{"name":"one","requestState":"` + state + `","inputResponses":null}`, "inputResponses must be an object"},
		{"an answer not an object", "alice", "tools/call", followUp("one", state, map[string]string{key: `12345`}), `inputResponses["` + key + `"]`},
	} {
		_, err := modernCall(s, ctx, tt.principal, tt.method, tt.params)
		wantInvalidParams(t, err, tt.want)
	}
	select {
	case a := <-answers:
		t.Fatalf("a refused follow-up answered the server: %s", a)
	default:
	}
	res, err = modernCall(s, ctx, "alice", "tools/call", followUp("one", state, map[string]string{key: `{"action":"accept","content":{"name":"Ada"}}`}))
	if err != nil || res.Type != ResultComplete {
		t.Fatalf("the rightful follow-up: %v %v", res, err)
	}
	<-answers
}

// TestParked_Expiry: a client that does not come back within
// input_timeout leaves the server the answer of a silent client, for its
// later requests too; the call runs on, and a late follow-up is -32602.
func TestParked_Expiry(t *testing.T) {
	answers := make(chan string, 16)
	m := upstreamtest.NewManager(parkedServer(answers))
	s := newCore(t, m, Options{Naming: config.Naming{PrefixMode: "never"}, InputTimeout: time.Second})
	ctx := context.Background()
	res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"two","arguments":{}}`)
	keys, state := wantInputRequired(t, res, err)
	// The server gets a silent client's answer, then, for its next
	// request, the same without a second wait; its call is not
	// cancelled under it ("cancelled" or an error would say so).
	for _, which := range []string{"first", "second"} {
		if got := <-answers; got != `{"action":"cancel"}` {
			t.Errorf("the server's %s request was answered %s after the timeout, want a cancel", which, got)
		}
	}
	_, err = modernCall(s, ctx, "alice", "tools/call", followUp("two", state, map[string]string{keys["elicitation/create"]: `{"action":"accept"}`}))
	// The state's own expiry is in whole seconds: it may say so first.
	if jerr, ok := err.(*jsonrpc.Error); !ok || !strings.Contains(jerr.Message, "expired") {
		wantInvalidParams(t, err, "is over")
	}
	// The second was answered at once: the call's input was closed.
	if a := m.Answers(); len(a) != 2 || !strings.Contains(a[0].Reason, "did not answer") || !strings.Contains(a[1].Reason, "did not come back") {
		t.Errorf("AnswerForClient answered %+v, want the first after the timeout, the second at once", a)
	}
}

// TestParked_ClientGone: a client that goes away while it waits on the
// call cancels it upstream; a follow-up without answers is asked the
// waiting requests again.
func TestParked_ClientGone(t *testing.T) {
	answers := make(chan string, 16)
	s := newCore(t, upstreamtest.NewManager(parkedServer(answers)), Options{Naming: config.Naming{PrefixMode: "never"}})
	res, err := modernCall(s, context.Background(), "alice", "tools/call", `{"name":"hang","arguments":{}}`)
	keys, state := wantInputRequired(t, res, err)
	res, err = modernCall(s, context.Background(), "alice", "tools/call", `{"name":"hang","requestState":"`+state+`"}`)
	again, state := wantInputRequired(t, res, err)
	if again["elicitation/create"] != keys["elicitation/create"] {
		t.Errorf("a follow-up without answers got %v, want %v again", again, keys)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := modernCall(s, ctx, "alice", "tools/call", followUp("hang", state, map[string]string{keys["elicitation/create"]: `{"action":"accept"}`}))
		done <- err
	}()
	if got := <-answers; got != `{"action":"accept"}` {
		t.Fatalf("the server was answered %s", got)
	}
	cancel()
	if got := <-answers; got != "cancelled" {
		t.Errorf("the server saw %q, want its call cancelled", got)
	}
	if err := <-done; err == nil {
		t.Error("the request of a client that went away returned no error")
	}
	s.parkMu.Lock()
	n := len(s.parked)
	s.parkMu.Unlock()
	if n != 0 {
		t.Errorf("%d parked calls left", n)
	}
}

func wantInvalidParams(t *testing.T, err error, want string) {
	t.Helper()
	jerr, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok || jerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(jerr.Message, want) {
		t.Errorf("%v, want -32602 saying %q", err, want)
	}
}

// TestURLElicitation_AcrossEras: URL-mode elicitation crosses eras as
// each era has it. A 2025 server's -32042 reaches a 2026-07-28 client as
// input_required whose retry calls afresh; a 2025 server's URL-mode
// elicitation/create reaches it without elicitationId, and its completion
// notice not at all; a 2026-07-28 server's URL-mode input request reaches
// a 2025 client with an elicitationId of the gateway's.
func TestURLElicitation_AcrossEras(t *testing.T) {
	calls := make(chan json.RawMessage, 8)
	answers := make(chan string, 8)
	var signins atomic.Int32
	old := &upstreamtest.Server{
		Name: "old", Era: upstream.EraLegacy,
		Tools: raws(`{"name":"signin","inputSchema":{"type":"object"}}`, `{"name":"visit","inputSchema":{"type":"object"}}`),
		Handle: func(ctx context.Context, _ string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			calls <- params
			name, _ := rawjson.String(params, "name")
			if name == "visit" {
				res, err := hooks.Request(ctx, &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","elicitationId":"up-7","url":"https://auth.example/x","message":"Sign in"}`)})
				if err != nil {
					return nil, err
				}
				hooks.Notify(&jsonrpc.Message{Method: "notifications/elicitation/complete", Params: json.RawMessage(`{"elicitationId":"up-7"}`)})
				answers <- string(res)
				return json.RawMessage(`{"content":[{"type":"text","text":"visited"}]}`), nil
			}
			if signins.Add(1) > 1 {
				return json.RawMessage(`{"content":[{"type":"text","text":"signed in"}]}`), nil
			}
			return nil, &jsonrpc.Error{Code: CodeURLElicitationRequired, Message: "sign in first",
				Data: json.RawMessage(`{"elicitations":[{"mode":"url","elicitationId":"up-1","url":"https://auth.example/a","message":"Sign in"}]}`)}
		},
	}
	modern := &upstreamtest.Server{
		Name: "new", Era: upstream.EraModern,
		Tools: raws(`{"name":"link","inputSchema":{"type":"object"}}`),
		Handle: func(_ context.Context, _ string, params json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			if strings.Contains(string(params), "inputResponses") {
				return json.RawMessage(`{"content":[{"type":"text","text":"linked"}]}`), nil
			}
			return json.RawMessage(`{"resultType":"input_required","inputRequests":{"u":{"method":"elicitation/create","params":{"mode":"url","url":"https://auth.example/b","message":"Link"}}},"requestState":"s1"}`), nil
		},
	}
	s := newCore(t, upstreamtest.NewManager(old, modern), Options{
		Naming: config.Naming{PrefixMode: "never"},
		Servers: []config.Server{
			{Name: "old", SessionMode: config.SessionPerPrincipal},
			{Name: "new", SessionMode: config.SessionPerPrincipal},
		},
	})
	ctx := context.Background()

	t.Run("-32042 to a 2026-07-28 client", func(t *testing.T) {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"signin","arguments":{"n":"first"}}`)
		keys, state := wantInputRequired(t, res, err)
		<-calls
		key := keys["elicitation/create"]
		if key == "" || !strings.Contains(string(res.Body), `"url":"https://auth.example/a"`) || strings.Contains(string(res.Body), "elicitationId") {
			t.Fatalf("input_required %s, want the URL-mode elicitation without its id", res.Body)
		}
		res, err = modernCall(s, ctx, "alice", "tools/call", followUp("signin", state, map[string]string{key: `{"action":"accept"}`}))
		if err != nil || !strings.Contains(string(res.Body), "signed in") {
			t.Fatalf("retry: %v %v", res, err)
		}
		retry := <-calls
		if strings.Contains(string(retry), "requestState") || strings.Contains(string(retry), "inputResponses") {
			t.Errorf("the retry reached the server with MRTR members: %s", retry)
		}
	})

	t.Run("URL-mode elicitation/create to a 2026-07-28 client", func(t *testing.T) {
		var notified []string
		req := &Request{
			Method: "tools/call", Principal: "alice", Params: json.RawMessage(`{"name":"visit","arguments":{}}`),
			Client: Client{ProtocolVersion: "2026-07-28", Capabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)},
		}
		res, err := s.Handle(ctx, req)
		keys, state := wantInputRequired(t, res, err)
		<-calls
		if strings.Contains(string(res.Body), "elicitationId") || !strings.Contains(string(res.Body), `"mode":"url"`) {
			t.Errorf("input request %s, want URL mode without elicitationId", res.Body)
		}
		res, err = s.Handle(ctx, &Request{
			Method: "tools/call", Principal: "alice", Client: req.Client,
			Params: json.RawMessage(followUp("visit", state, map[string]string{keys["elicitation/create"]: `{"action":"accept"}`})),
			Notify: func(method string, _ json.RawMessage) { notified = append(notified, method) },
		})
		if err != nil || !strings.Contains(string(res.Body), "visited") {
			t.Fatalf("follow-up: %v %v", res, err)
		}
		if a := <-answers; a != `{"action":"accept"}` {
			t.Errorf("the server was answered %s", a)
		}
		if len(notified) != 0 {
			t.Errorf("the 2026-07-28 client got %q, want no completion notice", notified)
		}
	})

	t.Run("a 2026-07-28 server's URL-mode request to a 2025 client", func(t *testing.T) {
		var asked json.RawMessage
		res, err := s.Handle(ctx, &Request{
			Method: "tools/call", Principal: "alice", Session: "s1", Params: json.RawMessage(`{"name":"link","arguments":{}}`),
			Client: Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)},
			Input: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
				asked = params
				return json.RawMessage(`{"action":"accept"}`), nil
			},
		})
		if err != nil || !strings.Contains(string(res.Body), "linked") {
			t.Fatalf("%v %v", res, err)
		}
		if id, _ := rawjson.String(asked, "elicitationId"); !strings.HasPrefix(id, "mcpgw-e-") {
			t.Errorf("the 2025 client was asked %s, want an elicitationId of the gateway's", asked)
		}
	})
}

// TestParked_Bounds: past maxParkedPerPrincipal, a server's request for
// the principal gets the default answer of a client that cannot be asked
// instead of parking the call; another principal still parks.
func TestParked_Bounds(t *testing.T) {
	answers := make(chan string, maxParkedPerPrincipal+4)
	m := upstreamtest.NewManager(parkedServer(answers))
	s := newCore(t, m, Options{Naming: config.Naming{PrefixMode: "never"}})
	ctx := context.Background()
	for range maxParkedPerPrincipal {
		res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"one","arguments":{}}`)
		wantInputRequired(t, res, err)
	}
	res, err := modernCall(s, ctx, "alice", "tools/call", `{"name":"one","arguments":{}}`)
	if err != nil || res.Type != ResultComplete || !strings.Contains(string(res.Body), `cancel`) {
		t.Errorf("the call past the bound: %v %v, want the server's own result after a cancel", res, err)
	}
	if got := <-answers; got != `{"action":"cancel"}` {
		t.Errorf("the server was answered %s", got)
	}
	res, err = modernCall(s, ctx, "bob", "tools/call", `{"name":"one","arguments":{}}`)
	wantInputRequired(t, res, err)
}

// TestParked_OtherProcess: a follow-up that reaches another gateway
// process with the same secret (another replica, or this one after a
// restart) is told the call is held elsewhere, and never reaches a
// server; the process that holds it still takes it.
func TestParked_OtherProcess(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	answers := make(chan string, 4)
	a := newCore(t, upstreamtest.NewManager(parkedServer(answers)), Options{Naming: config.Naming{PrefixMode: "never"}, Secret: secret, Replica: "r-a"})
	b := newCore(t, upstreamtest.NewManager(parkedServer(answers)), Options{Naming: config.Naming{PrefixMode: "never"}, Secret: secret})
	ctx := context.Background()
	res, err := modernCall(a, ctx, "alice", "tools/call", `{"name":"one","arguments":{}}`)
	keys, state := wantInputRequired(t, res, err)
	follow := followUp("one", state, map[string]string{keys["elicitation/create"]: `{"action":"accept"}`})
	_, err = modernCall(b, ctx, "alice", "tools/call", follow)
	wantInvalidParams(t, err, "held by another gateway process")
	// An edge in a cluster learns where to send it.
	if ee, ok := errors.AsType[*ElsewhereError](err); !ok || ee.Replica != "r-a" {
		t.Errorf("err = %#v, want an ElsewhereError naming r-a", err)
	}
	res, err = modernCall(a, ctx, "alice", "tools/call", follow)
	if err != nil || res.Type != ResultComplete {
		t.Fatalf("the owner's follow-up: %v %v", res, err)
	}
	if got := <-answers; got != `{"action":"accept"}` {
		t.Errorf("the server was answered %s", got)
	}
}
