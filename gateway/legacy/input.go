package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// inputIDPrefix starts the ids of the input requests the gateway sends a
// client; a counter per session follows it.
const inputIDPrefix = "mcpgw-"

// input is an input request sent to the client and not yet answered. It
// lives in its session's inputs until the answer comes, its context ends
// or the session ends, whichever is first; the one that removes it from
// the map under the session's mu is the one that sends on reply.
type input struct {
	reply chan reply // buffered 1
}

// reply is how an input request ended: the client's result, or an error
// (the client's *jsonrpc.Error, or the end of the session).
type reply struct {
	result json.RawMessage
	err    error
}

// errInputClosed is returned by an input request made after its call
// finished: the core then takes it for a request outside any call.
var errInputClosed = fmt.Errorf("the client can no longer be asked for input: %w", gateway.ErrCallOver)

// input implements gateway.Request.Input for call c answered on stream st
// (see "Input requests" in the package doc). It sends the client a
// JSON-RPC request under an id of the gateway's, as an event of st, and
// waits for the client's response, for ctx, or for the cancellation of c
// or the end of the session (c answering first ends nothing). When ctx
// (or c's cancellation) comes first, the client is sent
// notifications/cancelled for the request and ctx's error is returned.
func (h *Handler) input(ctx context.Context, s *session, c *call, st *stream, method string, params json.RawMessage) (json.RawMessage, error) {
	return h.ask(ctx, s, c.ctx, st, method, params)
}

// errSessionEnded is returned by an input request made after its session
// ended.
var errSessionEnded = errors.New("the session ended: the client can no longer be asked for input")

// sessionInput implements gateway.Request.SessionInput: input for a
// request that belongs to no call of s, sent on its standalone GET stream
// (MCP 2025-11-25, basic/transports, lets a server send requests there).
// A session that has no GET stream yet gets one, whose buffer keeps the
// request until the client opens it: clients open it right after
// initialize, and the core's input timeout bounds the wait.
func (h *Handler) sessionInput(ctx context.Context, s *session, method string, params json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil, errSessionEnded
	}
	st := s.standaloneLocked()
	s.mu.Unlock()
	return h.ask(ctx, s, context.Background(), st, method, params)
}

// ask is input with owner, the context of what the request belongs to (a
// call; Background for the session itself), in place of the call's.
func (h *Handler) ask(ctx context.Context, s *session, owner context.Context, st *stream, method string, params json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	switch {
	case s.ended:
		s.mu.Unlock()
		return nil, errSessionEnded
	case st.done || owner.Err() != nil:
		s.mu.Unlock()
		return nil, errInputClosed
	}
	s.nextInput++
	key := inputIDPrefix + strconv.FormatUint(s.nextInput, 10)
	id := jsonrpc.StringID(key)
	in := &input{reply: make(chan reply, 1)}
	s.inputs[key] = in
	s.lastActive = time.Now()
	h.appendLocked(st, requestMessage(id, method, params))
	s.mu.Unlock()
	h.logger.Debug("input request sent", "session_id", s.key, "method", method, "id", key)

	var ended context.Context
	ownerDone := owner.Done()
	for ended == nil {
		select {
		case r := <-in.reply:
			return r.result, r.err
		case <-ctx.Done():
			ended = ctx
		case <-ownerDone:
			if context.Cause(owner) == errAnswered {
				// The call answered, cancelled by nobody: its server
				// still waits for this answer (over stdio a request is
				// only taken for the call's because the call was the
				// one in flight). Any other end is a cancellation.
				ownerDone = nil
				continue
			}
			ended = owner
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inputs[key] != in {
		// The answer (or the session's end) came first; it is waiting.
		r := <-in.reply
		return r.result, r.err
	}
	delete(s.inputs, key)
	// MCP 2025-11-25, basic/utilities/cancellation: tell the client to stop
	// asking its user. On the same stream as the request, or, once the
	// request's call has answered and its stream is done, on the GET
	// stream; a session that ended takes nothing.
	to := st
	if st.done && s.standalone != nil {
		to = s.standalone
	}
	h.appendLocked(to, notificationMessage("notifications/cancelled", marshal(struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}{id.Raw(), cancelReason(ended)})))
	h.logger.Debug("input request cancelled", "session_id", s.key, "method", method, "id", key)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, owner.Err()
}

// cancelReason says why ctx ended, in words for the client: the cause when
// it is one of the edge's own, "timeout" for a deadline (PROTOCOL.md 9),
// else "cancelled". Causes from elsewhere are not shown: they may say
// more than the client should learn.
func cancelReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case ours(cause):
		return cause.Error()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timeout"
	default:
		return "cancelled"
	}
}

// answer hands a response the client POSTed on s to the input request it
// answers. It reports whether one was waiting for it: a response with an
// id s did not issue, or for a request already answered or cancelled,
// reaches nothing. What the client answered is never logged: it may be
// what its user typed.
func (h *Handler) answer(s *session, m *jsonrpc.Message) bool {
	key, ok := inputKey(m.ID)
	s.mu.Lock()
	in := s.inputs[key]
	if ok && in != nil {
		delete(s.inputs, key)
		r := reply{result: m.Result}
		if m.Error != nil {
			r = reply{err: m.Error}
		}
		in.reply <- r
		s.lastActive = time.Now()
	}
	s.mu.Unlock()
	if !ok || in == nil {
		h.logger.Debug("ignoring a client response that answers no input request", "session_id", s.key, "id", m.ID.String())
		return false
	}
	return true
}

// inputKey returns the key in session.inputs of a response's id: the
// decoded string, so that an id the client re-encoded still matches. Only
// string ids with our prefix can be ours.
func inputKey(id jsonrpc.ID) (string, bool) {
	raw := id.Raw()
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var key string
	if json.Unmarshal(raw, &key) != nil || len(key) <= len(inputIDPrefix) || key[:len(inputIDPrefix)] != inputIDPrefix {
		return "", false
	}
	return key, true
}
