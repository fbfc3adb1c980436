package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
)

// requestStateTTL bounds how long the requestState of an input_required
// result the core relays may be presented again: a client retries once it
// has the user's answers, which may take a while, but not a day.
const requestStateTTL = time.Hour

// requestState is what the sealed requestState of a relayed input_required
// result carries: the server's own state, and what it is bound to, so
// that a client can neither read nor change it, nor present it for
// another caller, server, method or tool (MCP 2026-07-28,
// basic/patterns/mrtr: requestState is attacker-controlled).
type requestState struct {
	Server    string          `json:"s"`
	Principal string          `json:"p"`
	Method    string          `json:"m"`
	Name      string          `json:"n,omitempty"` // the exposed tool or prompt
	State     json.RawMessage `json:"st,omitempty"`
	Expires   int64           `json:"x"`
	// Parked names the parked call whose server waits for the answers
	// (parked.go), and Owner the gateway process that holds it; both are
	// empty for a server's own state.
	Parked string `json:"k,omitempty"`
	Owner  string `json:"o,omitempty"`
	// Reissue says the retry is to be made afresh: the server refused the
	// call until the user visited URLs (-32042, urlInputRequired).
	Reissue bool `json:"r,omitempty"`
}

// inputRequired returns the Result to relay when body is a server's
// input_required result (MCP 2026-07-28 multi-round-trip requests): its
// inputRequests as they are, and its requestState sealed (see
// requestState). ok is false for any other result.
func (s *Server) inputRequired(req *Request, server, method string, body json.RawMessage) (*Result, bool) {
	if !modernClient(req) || !isInputRequired(body) {
		return nil, false
	}
	if req.sealed {
		// The gateway's own: its state is sealed.
		return &Result{Type: ResultInputRequired, Body: body}, true
	}
	state, ok, _ := rawjson.Get(body, "requestState")
	if !ok {
		return &Result{Type: ResultInputRequired, Body: body}, true
	}
	b, _ := json.Marshal(requestState{
		Server: server, Principal: req.Principal, Method: method, Name: exposedName(req),
		State: state, Expires: time.Now().Add(requestStateTTL).Unix(),
	})
	sealed, err := rawjson.Set(body, "requestState", json.RawMessage(strconv.Quote(s.states.Seal(b))))
	if err != nil {
		// A result that is not an object has no state to protect.
		return &Result{Type: ResultInputRequired, Body: body}, true
	}
	return &Result{Type: ResultInputRequired, Body: sealed}, true
}

// exposedName returns the exposed name of a request's tool or prompt, once
// routed; "" for others.
func exposedName(req *Request) string {
	if req.toolName != "" {
		return req.toolName
	}
	return req.promptName
}

// openRequestState returns params with the sealed requestState of a
// retried request replaced by the server's own, after checking that it
// was issued for this caller, server, method and tool, and its opened
// state; params without one are returned as they are, with a nil state.
// A state that names a parked call leaves params as they are. Anything
// else is -32602.
func (s *Server) openRequestState(req *Request, server, method string, params json.RawMessage) (json.RawMessage, *requestState, error) {
	if !bytes.Contains(params, []byte(`"requestState"`)) {
		return params, nil, nil
	}
	raw, ok, _ := rawjson.Get(params, "requestState")
	if !ok {
		return params, nil, nil
	}
	bad := func(why string) error {
		return invalidParams("invalid requestState: %s; send the request again without requestState and inputResponses to start over", why)
	}
	token, err := rawjson.Unquote(raw)
	if err != nil || len(raw) == 0 || raw[0] != '"' {
		return nil, nil, bad("it must be the string requestState of an earlier input_required result")
	}
	b, err := s.states.Open(token)
	var st requestState
	if err != nil || json.Unmarshal(b, &st) != nil {
		return nil, nil, bad("it was not issued by this gateway, or it was changed")
	}
	switch {
	case st.Principal != req.Principal:
		return nil, nil, bad("it was not issued to you")
	case st.Server != server || st.Method != method || st.Name != exposedName(req):
		return nil, nil, bad("it belongs to another request")
	case time.Now().Unix() > st.Expires:
		return nil, nil, bad("it expired")
	}
	switch {
	case st.Parked != "":
		return params, &st, nil
	case st.Reissue:
		out, err := rawjson.Delete(params, "requestState")
		if err == nil {
			out, err = rawjson.Delete(out, "inputResponses")
		}
		return out, &st, err
	}
	out, err := rawjson.Set(params, "requestState", st.State)
	return out, &st, err
}

// maxInputRounds bounds the rounds of input the core drives for a client
// of the session era in one call.
const maxInputRounds = 8

// isInputRequired reports whether body is an input_required result.
func isInputRequired(body json.RawMessage) bool {
	if !bytes.Contains(body, []byte(`"input_required"`)) {
		return false
	}
	typ, _ := rawjson.String(body, "resultType")
	return typ == string(ResultInputRequired)
}

// inputRound returns the input requests of a server's input_required
// body, the round-th of one method call, with their keys: the three kinds
// a client can be asked, a URL-mode elicitation only from a server whose
// sessions belong to one user, and at most maxInputRounds rounds.
func (s *Server) inputRound(server, method string, round int, body json.RawMessage) ([]string, []*jsonrpc.Message, error) {
	if round > maxInputRounds {
		return nil, nil, jsonrpc.NewError(jsonrpc.CodeInternalError,
			fmt.Sprintf("server %q asked for input %d times in one %s; the gateway gave up the call", server, maxInputRounds, method),
			errorData{Server: server})
	}
	requests, _, _ := rawjson.Get(body, "inputRequests")
	var keys []string
	var msgs []*jsonrpc.Message
	var bad error
	rawjson.Members(requests, func(key, val []byte) bool {
		name, err := rawjson.Unquote(key)
		if err != nil {
			return true
		}
		m := &jsonrpc.Message{}
		m.Method, _ = rawjson.String(val, "method")
		m.Params, _, _ = rawjson.Get(val, "params")
		switch m.Method {
		case "elicitation/create", "sampling/createMessage", "roots/list":
		default:
			bad = jsonrpc.NewError(jsonrpc.CodeInternalError,
				fmt.Sprintf("server %q asked for input of an unknown kind %q", server, m.Method), errorData{Server: server})
			return false
		}
		if mode, _ := rawjson.String(m.Params, "mode"); m.Method == "elicitation/create" && mode == "url" && !s.userBound(server) {
			bad = refusedURLElicitation(server)
			return false
		}
		keys, msgs = append(keys, name), append(msgs, m)
		return true
	})
	return keys, msgs, bad
}

// nextRound is the params of the call that answers body's input requests
// with responses: the call's params, the answers and the server's state.
func nextRound(params, body json.RawMessage, responses map[string]json.RawMessage) (json.RawMessage, error) {
	next, err := rawjson.Set(params, "inputResponses", mustJSON(responses))
	if err != nil {
		return nil, err
	}
	if state, ok, _ := rawjson.Get(body, "requestState"); ok {
		return rawjson.Set(next, "requestState", state)
	}
	return rawjson.Delete(next, "requestState")
}

// driveInput answers a 2026-07-28 server's input_required results for a
// client of the session era, which has no such result: it asks the client
// each input request as it asks the server's own requests during a call
// (its capabilities, the server's session mode, the input timeout, the
// default answers), then calls the server again with the answers and its
// state (params are the call's, as sent), until the server answers
// otherwise; at most maxInputRounds rounds.
func (s *Server) driveInput(ctx context.Context, req *Request, server, method string, who upstream.Caller, params, body json.RawMessage, mode forwardMode) (json.RawMessage, error) {
	asker := clientAsker{
		session: req.Session,
		caps:    req.Client.Capabilities,
		input:   req.Input,
		notify:  req.SessionNotify,
		noInput: "the client's request cannot carry a request to it",
	}
	for round := 1; isInputRequired(body); round++ {
		keys, msgs, err := s.inputRound(server, method, round, body)
		if err != nil {
			return nil, err
		}
		responses := make(map[string]json.RawMessage, len(keys))
		for i, m := range msgs {
			res, err := s.ask(ctx, server, who, m, asker)
			if err != nil {
				return nil, err
			}
			responses[keys[i]] = res
		}
		next, err := nextRound(params, body, responses)
		if err != nil {
			return nil, err
		}
		if body, err = s.forwardAs(ctx, req, server, who, method, next, 0, mode); err != nil {
			return nil, err
		}
	}
	return body, nil
}
