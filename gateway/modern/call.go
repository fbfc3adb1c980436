package modern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Causes of a request's context's end.
var (
	errClientGone = errors.New("the client closed the connection")
	errShutdown   = errors.New("the gateway shut down")
)

// call answers a request the core serves: the merged lists, tool calls,
// prompts, resources and completions.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, req *request, m *jsonrpc.Message) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	out := &response{w: w, rc: http.NewResponseController(w), h: h}
	h.mu.Lock()
	h.calls[out] = cancel
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.calls, out)
		h.mu.Unlock()
	}()
	greq := h.coreRequest(r, req)
	greq.Cancel = cancel
	greq.Notify = func(method string, params json.RawMessage) {
		if method == "notifications/message" && !wantsLog(req.logLevel, params) {
			return
		}
		out.event(notification(method, params))
	}
	// A request that runs long becomes an event stream, so that keep-alive
	// comments tell the client and its proxies that it is still alive.
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() {
		defer ticker.Done()
		t := time.NewTimer(h.opts.StreamAfter)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if !out.comment() {
					cancel(errClientGone)
					return
				}
				t.Reset(h.opts.KeepAlive)
			}
		}
	}()
	res, err := h.core.Handle(ctx, greq)
	close(stop)
	ticker.Wait()
	switch {
	case context.Cause(ctx) == errClientGone || r.Context().Err() != nil:
		return // nobody to answer
	case context.Cause(ctx) == errShutdown:
		out.final(http.StatusOK, errorResponse(req.id, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the gateway shut down before this request finished; it was cancelled upstream; retry it", nil)))
		return
	}
	if ee, ok := errors.AsType[*gateway.ElsewhereError](err); ok {
		if h.forward(w, r, out, m, ee.Replica) {
			return
		}
		if ee.Fallback != nil {
			res, err = ee.Fallback()
		}
	}
	if err != nil {
		jerr, ok := errors.AsType[*jsonrpc.Error](err)
		if !ok {
			h.logger.Error("core failed a request", "method", req.method, "err", err)
			jerr = jsonrpc.NewError(jsonrpc.CodeInternalError, "the gateway failed to answer this request", nil)
		}
		jerr = translateError(req, jerr)
		out.final(statusOf(jerr), errorResponse(req.id, jerr))
		return
	}
	body, err := h.encodeResult(req, res)
	if err != nil {
		h.logger.Error("encoding a result failed", "method", req.method, "err", err)
		out.final(http.StatusOK, errorResponse(req.id, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the gateway could not encode the server's result: it is not a JSON object", nil)))
		return
	}
	out.final(http.StatusOK, resultResponse(req.id, body))
}

// forward sends m, which only the replica named can serve, there, unless
// it came from a replica or its answer has begun, and reports whether
// that replica answered.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, out *response, m *jsonrpc.Message, replica string) bool {
	if h.opts.Cluster == nil || h.opts.Cluster.Forwarded(r) {
		return false
	}
	out.mu.Lock()
	started := out.streaming || out.done
	out.mu.Unlock()
	if started {
		return false
	}
	body, err := jsonrpc.Encode(m)
	if err != nil {
		return false
	}
	return h.opts.Cluster.Forward(w, r, body, replica)
}

// wantsLog reports whether a log message's params are at or above level,
// the lowest the request asked for; no level asks for none.
func wantsLog(level string, params json.RawMessage) bool {
	if level == "" {
		return false
	}
	got, _ := rawjson.String(params, "level")
	r := levelRank(got)
	return r < 0 || r >= levelRank(level) // an unknown level is passed on
}

// statusOf returns the HTTP status a JSON-RPC error goes in when it is the
// whole answer (MCP 2026-07-28, basic/transports/streamable-http).
func statusOf(e *jsonrpc.Error) int {
	switch e.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case CodeHeaderMismatch, CodeMissingClientCapability, CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// translateError turns what a legacy server says into the modern era's
// terms: resource-not-found is -32602 with the URI in its data.
func translateError(req *request, e *jsonrpc.Error) *jsonrpc.Error {
	if req.method != "resources/read" || (e.Code != codeResourceNotFound && e.Code != jsonrpc.CodeInvalidParams) {
		return e
	}
	uri, _ := rawjson.String(req.params, "uri")
	data := e.Data
	switch {
	case len(data) == 0 || string(data) == "null":
		data, _ = json.Marshal(map[string]string{"uri": uri})
	case data[0] == '{':
		if _, ok, _ := rawjson.Get(data, "uri"); !ok {
			if d, err := rawjson.Set(data, "uri", mustJSON(uri)); err == nil {
				data = d
			}
		}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: data}
}

// response writes one request's answer: JSON, or an event stream once a
// notification or a keep-alive comment must go first.
type response struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	h  *Handler

	mu        sync.Mutex
	streaming bool
	failed    bool // a write failed: the client is gone
	done      bool
}

// startLocked turns the answer into an event stream.
func (o *response) startLocked() {
	if o.streaming {
		return
	}
	o.streaming = true
	hd := o.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
}

// writeLocked writes b and flushes it within the write timeout.
func (o *response) writeLocked(b []byte) bool {
	if o.failed {
		return false
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.h.opts.WriteTimeout))
	if _, err := o.w.Write(b); err != nil {
		o.failed = true
		return false
	}
	if err := o.rc.Flush(); err != nil {
		o.failed = true
		return false
	}
	return true
}

// event writes a message of the request's stream before its answer.
func (o *response) event(msg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	o.startLocked()
	o.writeLocked(sseEvent(msg))
}

// comment writes a keep-alive comment, starting the stream if need be. It
// reports whether the client still reads.
func (o *response) comment() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return true
	}
	o.startLocked()
	return o.writeLocked([]byte(": keep-alive\n\n"))
}

// final writes the answer: in the stream when one was started, else as
// JSON with status.
func (o *response) final(status int, msg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
	if o.streaming {
		o.writeLocked(sseEvent(msg))
		return
	}
	front.WriteJSON(o.w, status, msg)
}

func sseEvent(msg []byte) []byte {
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	return append(b, "\n\n"...)
}

func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	front.WriteJSON(w, status, errorResponse(id, e))
}

func resultResponse(id jsonrpc.ID, result json.RawMessage) []byte {
	b, err := jsonrpc.Encode(jsonrpc.NewResult(id, result))
	if err != nil {
		panic(fmt.Sprintf("modern: encoding a result: %v", err)) // result is valid JSON by construction
	}
	return b
}

func errorResponse(id jsonrpc.ID, e *jsonrpc.Error) []byte {
	b, err := jsonrpc.Encode(jsonrpc.NewErrorResponse(id, e))
	if err != nil {
		panic(fmt.Sprintf("modern: encoding an error: %v", err))
	}
	return b
}

func notification(method string, params json.RawMessage) []byte {
	b, err := jsonrpc.Encode(jsonrpc.NewNotification(method, params))
	if err != nil {
		panic(fmt.Sprintf("modern: encoding a notification: %v", err))
	}
	return b
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("modern: encoding %T: %v", v, err))
	}
	return b
}
