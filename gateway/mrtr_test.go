package gateway

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// TestInputRequired_Relay: a server's input_required result reaches a
// 2026-07-28 client with its inputRequests as they are and its
// requestState sealed; the client's retry reaches the server with the
// server's own state; a changed, borrowed or misrouted state is -32602
// and never reaches the server.
func TestInputRequired_Relay(t *testing.T) {
	got := make(chan json.RawMessage, 8)
	takes := make(chan bool, 8)
	srv := func(name string) *upstreamtest.Server {
		return &upstreamtest.Server{
			Name:    name,
			Tools:   raws(`{"name":"ask","inputSchema":{"type":"object"}}`),
			Prompts: raws(`{"name":"p"}`),
			Handle: func(_ context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
				got <- params
				takes <- hooks.TakesInput
				if st, _ := rawjson.String(params, "requestState"); st == "round-1" {
					return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
				}
				return json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Proceed?"}}},"requestState":"round-1","content":null}`), nil
			},
		}
	}
	s := newCore(t, upstreamtest.NewManager(srv("a"), srv("b")), Options{})
	modern := Client{ProtocolVersion: "2026-07-28", Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	call := func(principal, method, params string) (*Result, error) {
		return s.Handle(context.Background(), &Request{Method: method, Principal: principal, Client: modern, Params: json.RawMessage(params)})
	}

	res, err := call("alice", "tools/call", `{"name":"mcp__a__ask","arguments":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	<-got
	if !<-takes {
		t.Error("a 2026-07-28 client's call was not marked as taking input")
	}
	if res.Type != ResultInputRequired {
		t.Fatalf("result type %q, want input_required: %s", res.Type, res.Body)
	}
	if !strings.Contains(string(res.Body), `"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Proceed?"}}}`) {
		t.Errorf("inputRequests not relayed as they are: %s", res.Body)
	}
	sealed, _ := rawjson.String(res.Body, "requestState")
	if sealed == "" || sealed == "round-1" || strings.Contains(sealed, "round-1") {
		t.Fatalf("requestState %q: want the server's own sealed", sealed)
	}

	// The retry: the server gets its own state back and answers.
	res, err = call("alice", "tools/call", `{"name":"mcp__a__ask","arguments":{},"inputResponses":{"q":{"action":"accept"}},"requestState":"`+sealed+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	params := <-got
	<-takes
	if st, _ := rawjson.String(params, "requestState"); st != "round-1" {
		t.Errorf("the server got requestState %q, want its own", st)
	}
	if !strings.Contains(string(params), `"inputResponses":{"q":{"action":"accept"}}`) {
		t.Errorf("the server did not get the client's inputResponses: %s", params)
	}
	if res.Type != ResultComplete {
		t.Errorf("the retry's result type %q, want complete", res.Type)
	}

	tampered := []byte(sealed)
	tampered[len(tampered)/2] ^= 1
	for _, tt := range []struct {
		name, principal, method, params, want string
	}{
		{"changed", "alice", "tools/call", `{"name":"mcp__a__ask","requestState":"` + string(tampered) + `"}`, "not issued by this gateway"},
		{"not a string", "alice", "tools/call", `{"name":"mcp__a__ask","requestState":{"x":1}}`, "must be the string"},
		{"another principal", "bob", "tools/call", `{"name":"mcp__a__ask","requestState":"` + sealed + `"}`, "not issued to you"},
		{"another server", "alice", "tools/call", `{"name":"mcp__b__ask","requestState":"` + sealed + `"}`, "another request"},
		{"another method", "alice", "prompts/get", `{"name":"mcp__a__p","requestState":"` + sealed + `"}`, "another request"},
	} {
		_, err := call(tt.principal, tt.method, tt.params)
		jerr, ok := err.(*jsonrpc.Error)
		if !ok || jerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(jerr.Message, tt.want) {
			t.Errorf("%s: %v, want -32602 saying %q", tt.name, err, tt.want)
		}
	}
	select {
	case p := <-got:
		t.Errorf("a refused retry reached the server: %s", p)
	default:
	}

	// A 2025 client's call is not marked: its server is told no input
	// capabilities and must not ask.
	if _, err := s.Handle(context.Background(), &Request{Method: "tools/call", Principal: "alice", Client: Client{ProtocolVersion: "2025-11-25"}, Params: json.RawMessage(`{"name":"mcp__a__ask"}`)}); err != nil {
		t.Fatal(err)
	}
	<-got
	if <-takes {
		t.Error("a 2025-11-25 client's call was marked as taking input")
	}
}

// TestInputRequired_Drive: for a client of the session era the core asks
// the client each input request of a server's input_required result, and
// calls the server again with the answers and its own state, round after
// round, at most maxInputRounds times.
func TestInputRequired_Drive(t *testing.T) {
	got := make(chan json.RawMessage, 16)
	rounds := 2
	srv := &upstreamtest.Server{
		Name:  "a",
		Tools: raws(`{"name":"ask","inputSchema":{"type":"object"}}`, `{"name":"forever","inputSchema":{"type":"object"}}`, `{"name":"odd","inputSchema":{"type":"object"}}`, `{"name":"url","inputSchema":{"type":"object"}}`),
		Handle: func(_ context.Context, _ string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
			got <- params
			if !hooks.TakesInput {
				t.Error("a session-era client with input was not marked as taking input")
			}
			name, _ := rawjson.String(params, "name")
			switch name {
			case "odd": // a kind of input no client gives
				return json.RawMessage(`{"resultType":"input_required","inputRequests":{"x":{"method":"tools/call","params":{"name":"rm"}}}}`), nil
			case "url": // URL-mode elicitation from a shared server
				return json.RawMessage(`{"resultType":"input_required","inputRequests":{"u":{"method":"elicitation/create","params":{"mode":"url","url":"https://example.com/x","message":"Sign in"}}}}`), nil
			}
			st, _ := rawjson.String(params, "requestState")
			if name == "ask" && st == "r"+strconv.Itoa(rounds) {
				return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
			}
			next := "r1"
			if st != "" {
				n, _ := strconv.Atoi(st[1:])
				next = "r" + strconv.Itoa(n+1)
			}
			return json.RawMessage(`{"resultType":"input_required","inputRequests":{"e":{"method":"elicitation/create","params":{"message":"Name?"}},"r":{"method":"roots/list"}},"requestState":"` + next + `"}`), nil
		},
	}
	s := newCore(t, upstreamtest.NewManager(srv), Options{})
	var asked []string
	req := func(tool string) *Request {
		return &Request{
			Method: "tools/call", Principal: "alice", Session: "s1",
			Client: Client{ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{"elicitation":{},"roots":{}}`)},
			Params: json.RawMessage(`{"name":"mcp__a__` + tool + `","arguments":{}}`),
			Input: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				asked = append(asked, method)
				if method == "roots/list" {
					return json.RawMessage(`{"roots":[{"uri":"file:///w"}]}`), nil
				}
				return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
			},
		}
	}
	res, err := s.Handle(context.Background(), req("ask"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Type != ResultComplete || !strings.Contains(string(res.Body), "done") {
		t.Fatalf("result %q %s, want the server's final answer", res.Type, res.Body)
	}
	if len(asked) != 4 {
		t.Errorf("the client was asked %q, want each of two requests in two rounds", asked)
	}
	first, retry := <-got, <-got
	if strings.Contains(string(first), "inputResponses") {
		t.Errorf("the first call carried inputResponses: %s", first)
	}
	if st, _ := rawjson.String(retry, "requestState"); st != "r1" {
		t.Errorf("the retry carried requestState %q, want the server's own r1", st)
	}
	if !strings.Contains(string(retry), `"inputResponses":{"e":{"action":"accept","content":{"name":"Ada"}},"r":{"roots":[{"uri":"file:///w"}]}}`) {
		t.Errorf("the retry's inputResponses: %s", retry)
	}
	<-got

	// A server that never stops asking is given up after maxInputRounds.
	_, err = s.Handle(context.Background(), req("forever"))
	jerr, ok := err.(*jsonrpc.Error)
	if !ok || !strings.Contains(jerr.Message, "asked for input 8 times") {
		t.Errorf("a server asking forever: %v, want the gateway to give up after 8 rounds", err)
	}
	for range maxInputRounds + 1 {
		<-got
	}

	// What a hostile or broken server asks for is refused before any
	// client is asked: a kind of input that is not one, and URL-mode
	// elicitation from a server shared by every user.
	asked = nil
	for _, tt := range []struct{ tool, want string }{
		{"odd", `unknown kind "tools/call"`},
		{"url", "URL-mode elicitation"},
	} {
		_, err := s.Handle(context.Background(), req(tt.tool))
		jerr, ok := err.(*jsonrpc.Error)
		if !ok || !strings.Contains(jerr.Message, tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.tool, err, tt.want)
		}
		<-got
	}
	if len(asked) != 0 {
		t.Errorf("the client was asked %q for a refused input request", asked)
	}
}
