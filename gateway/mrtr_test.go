package gateway

import (
	"context"
	"encoding/json"
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
