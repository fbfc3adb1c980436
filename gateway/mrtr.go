package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawjson"
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
	State     json.RawMessage `json:"st"`
	Expires   int64           `json:"x"`
}

// inputRequired returns the Result to relay when body is a server's
// input_required result (MCP 2026-07-28 multi-round-trip requests): its
// inputRequests as they are, and its requestState sealed (see
// requestState). ok is false for any other result.
func (s *Server) inputRequired(req *Request, server, method string, body json.RawMessage) (*Result, bool) {
	if !bytes.Contains(body, []byte(`"input_required"`)) {
		return nil, false
	}
	if typ, _ := rawjson.String(body, "resultType"); typ != string(ResultInputRequired) {
		return nil, false
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
// was issued for this caller, server, method and tool; params without one
// are returned as they are. Anything else is -32602.
func (s *Server) openRequestState(req *Request, server, method string, params json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(params, []byte(`"requestState"`)) {
		return params, nil
	}
	raw, ok, _ := rawjson.Get(params, "requestState")
	if !ok {
		return params, nil
	}
	bad := func(why string) error {
		return invalidParams("invalid requestState: %s; send the request again without requestState and inputResponses to start over", why)
	}
	token, err := rawjson.Unquote(raw)
	if err != nil || len(raw) == 0 || raw[0] != '"' {
		return nil, bad("it must be the string requestState of an earlier input_required result")
	}
	b, err := s.states.Open(token)
	var st requestState
	if err != nil || json.Unmarshal(b, &st) != nil {
		return nil, bad("it was not issued by this gateway, or it was changed")
	}
	switch {
	case st.Principal != req.Principal:
		return nil, bad("it was not issued to you")
	case st.Server != server || st.Method != method || st.Name != exposedName(req):
		return nil, bad("it belongs to another request")
	case time.Now().Unix() > st.Expires:
		return nil, bad("it expired")
	}
	return rawjson.Set(params, "requestState", st.State)
}
