package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// maxBatchParallel bounds the requests of one batch that run at once when
// the answer is a JSON array.
const maxBatchParallel = 16

// local reports whether the gateway answers method itself, so that its
// answer can be plain JSON: nothing from an upstream will travel with it.
// logging/setLevel is one of these: the core records the session's level
// and answers {}.
func local(method string) bool {
	switch method {
	case "ping", "logging/setLevel",
		// A poll: the spec asks servers not to upgrade tasks/get to SSE.
		"tasks/get", "tasks/cancel":
		return true
	}
	return strings.HasSuffix(method, "/list")
}

// requireSession returns the session a GET names, or answers the request
// itself (400 with missing, when it names none) and returns nil.
func (h *Handler) requireSession(w http.ResponseWriter, r *http.Request, missing string) *session {
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		h.noSession(w, r, missing)
		return nil
	}
	if !checkVersionHeader(w, r, jsonrpc.ID{}) {
		return nil
	}
	return h.sessionOf(w, sid, r)
}

// noSession answers a GET or DELETE that names no session: for a client of
// the session era (its MCP-Protocol-Version says so), 400 with missing;
// for anyone else, when the modern era is served too, 405, which is what
// a 2026-07-28 client expects of GET and DELETE.
func (h *Handler) noSession(w http.ResponseWriter, r *http.Request, missing string) {
	if h.opts.Modern == nil || front.IsLegacyVersion(strings.TrimSpace(r.Header.Get(HeaderProtocolVersion))) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, missing, nil)
		return
	}
	w.Header().Set("Allow", "POST")
	writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("%s /mcp needs the Mcp-Session-Id of a session (protocol versions %s); in protocol version 2026-07-28 every message is a POST",
			r.Method, strings.Join(Versions, ", ")), nil)
}

// sessionOf returns the live session sid names, or answers the request
// itself (404, or why it cannot be served now) and returns nil.
func (h *Handler) sessionOf(w http.ResponseWriter, sid string, r *http.Request) *session {
	s, ref := h.lookup(r, sid)
	switch {
	case ref != nil:
		ref.write(w, r, h, jsonrpc.ID{})
		return nil
	case s == nil:
		writeNoSession(w)
		return nil
	}
	return s
}

func writeNoSession(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
		"session not found: it expired, was ended, or was not issued to you; send initialize without Mcp-Session-Id to start a new one", nil)
}

// post serves POST /mcp: one JSON-RPC message, or a batch on 2025-03-26
// sessions.
func (h *Handler) post(c echo.Context) error {
	r, w := c.Request(), c.Response()
	if !front.Accepts(r, "application/json") || !front.Accepts(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"the Accept header must list both application/json and text/event-stream", nil)
		return nil
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return nil
	}
	if sid := r.Header.Get(HeaderSessionID); sid != "" && h.forward(w, r, sid, body) {
		return nil
	}
	r = withTraceContext(r)
	// Strict: a client is told what is wrong with its body (invalid
	// UTF-8 too), and its id goes back as it came.
	msgs, batch, err := jsonrpc.ParseOwnedStrict(body) // body is this request's own
	if err != nil {
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) {
			jerr = jsonrpc.NewError(jsonrpc.CodeParseError, err.Error(), nil)
		}
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jerr.Code,
			fmt.Sprintf("the body is not a JSON-RPC message: %s", jerr.Message), nil)
		return nil
	}
	// One endpoint, two eras: a request of the modern era goes to its
	// edge, after the checks above that every POST gets.
	if h.opts.Modern != nil && front.Classify(r.Header, msgs, batch) == front.Modern {
		h.opts.Modern.Serve(w, r, msgs[0])
		return nil
	}
	if !checkVersionHeader(w, r, firstID(msgs, batch)) {
		return nil
	}
	hasInit := false
	for _, m := range msgs {
		hasInit = hasInit || m.Method == "initialize"
	}

	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		switch m := msgs[0]; {
		case batch:
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"batches need a 2025-03-26 session: send initialize alone first", nil)
		case m.Method != "initialize":
			writeError(w, http.StatusBadRequest, m.ID, jsonrpc.CodeInvalidRequest,
				"no session: send initialize first (without Mcp-Session-Id), then send the Mcp-Session-Id it returns on every request; or, in protocol version 2026-07-28, put the version, client capabilities and client info in params._meta", nil)
		case !m.IsRequest():
			writeError(w, http.StatusBadRequest, m.ID, jsonrpc.CodeInvalidRequest,
				"initialize must be a request with an id", nil)
		default:
			h.initialize(w, r, m)
		}
		return nil
	}
	if hasInit && !batch {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"initialize must not carry Mcp-Session-Id: to start a new session, send it without one", nil)
		return nil
	}
	s := h.sessionOf(w, sid, r)
	if s == nil {
		return nil
	}
	if batch {
		h.batch(w, r, s, msgs, hasInit)
		return nil
	}
	switch m := msgs[0]; {
	case m.IsRequest():
		h.request(w, r, s, m)
	case m.IsNotification():
		h.notification(s, m)
		w.WriteHeader(http.StatusAccepted)
	default:
		// A response to one of the gateway's input requests (MCP
		// 2025-11-25, basic/transports: 202 whether or not it answers
		// anything).
		h.answer(s, m)
		w.WriteHeader(http.StatusAccepted)
	}
	return nil
}

// readBody reads a POST body of at most MaxRequestBody bytes; above it the
// client gets 413.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := h.opts.MaxRequestBody
	tooLarge := func() {
		writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, gateway.CodeRequestTooLarge,
			fmt.Sprintf("the request body is larger than this gateway's limit of %d bytes (max_request_body); send a smaller message", limit),
			map[string]int64{"limit": limit})
	}
	if r.ContentLength > limit {
		tooLarge()
		return nil, false
	}
	body, err := readBodyBytes(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			tooLarge()
		} else {
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "the request body could not be read; send it again", nil)
		}
		return nil, false
	}
	return body, true
}

// readBodyBytes reads a request body to its end. With its length known
// (n >= 0, within the limit) it reads into one buffer of that size, which
// net/http's body ends at: io.ReadAll would grow a buffer from 512 bytes,
// allocating about four times a large body's size.
func readBodyBytes(r io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		return io.ReadAll(r)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// initialize starts a session: it negotiates the version (the client's if
// this edge speaks it, else the newest) and answers with the gateway's
// capabilities and the session id (MCP 2025-11-25, basic/lifecycle). The
// core observes it like the requests it answers (its span and metrics).
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
	req := &gateway.Request{Method: "initialize", ID: front.PlainID(m.ID), Params: m.Params}
	h.core.Observe(r.Context(), req, func(context.Context) (*gateway.Result, error) {
		if jerr := h.startSession(w, r, m, req); jerr != nil {
			return nil, jerr
		}
		return nil, nil
	})
}

// startSession is initialize's work. It writes the answer, records the
// session and its version in req, and returns the JSON-RPC error it
// answered with, if any.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message, req *gateway.Request) *jsonrpc.Error {
	if c := bytes.TrimSpace(m.Params); len(c) == 0 || c[0] != '{' {
		jerr := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "initialize needs params {protocolVersion, capabilities, clientInfo}", nil)
		front.WriteJSON(w, http.StatusOK, errorMessage(m.ID, jerr))
		return jerr
	}
	requested, _ := rawjson.String(m.Params, "protocolVersion")
	version := V20251125
	if supported(requested) {
		version = requested
	}
	req.Client.ProtocolVersion = version
	caps, _, _ := rawjson.Get(m.Params, "capabilities")
	info, _, _ := rawjson.Get(m.Params, "clientInfo")
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"capabilities", caps}, {"clientInfo", info}} {
		if len(f.v) > MaxClientJSON {
			jerr := jsonrpc.NewError(jsonrpc.CodeInvalidParams,
				fmt.Sprintf("initialize: %s is %d bytes, more than the %d a session keeps; declare less", f.name, len(f.v), MaxClientJSON),
				map[string]int{"limit": MaxClientJSON})
			front.WriteJSON(w, http.StatusOK, errorMessage(m.ID, jerr))
			return jerr
		}
	}
	s, tok, ref := h.create(r, version, bytes.Clone(caps), bytes.Clone(info))
	if ref != nil {
		return ref.write(w, r, h, m.ID)
	}
	req.Session = s.key
	h.logger.Debug("session started", "session_id", s.key, "principal", s.principal,
		"version", version, "client", s.clientName, "client_version", s.clientVersion)
	gi := h.core.InfoFor(s.principal)
	result := marshal(struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
	}{version, gi.Capabilities, gi.ServerInfo})
	w.Header().Set(HeaderSessionID, tok)
	front.WriteJSON(w, http.StatusOK, resultMessage(m.ID, result))
	return nil
}

// notification handles a client notification on s.
func (h *Handler) notification(s *session, m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/initialized":
		// Nothing waits for it: the gateway's only requests to the client
		// are input requests, which come with or after the client's first
		// call.
	case "notifications/roots/list_changed":
		// The servers of the upstream sessions this session owns ask for
		// the client's roots again.
		h.core.RootsChanged(s.key)
	case "notifications/cancelled":
		// MCP 2025-11-25, basic/utilities/cancellation: stop the request
		// and do not answer it; unknown or finished ids are ignored.
		raw, ok, _ := rawjson.Get(m.Params, "requestId")
		var id jsonrpc.ID
		if !ok || id.UnmarshalJSON(raw) != nil || !id.IsValid() {
			return
		}
		s.mu.Lock()
		if c := s.calls[id.String()]; c != nil {
			c.cancel(errClientCancelled)
			h.logger.Debug("request cancelled by the client", "session_id", s.key, "method", c.method, "id", id.String())
		}
		s.mu.Unlock()
	default:
		h.logger.Debug("ignoring a client notification", "session_id", s.key, "method", m.Method)
	}
}

// begin registers request m as in flight on s. On refusal it returns the
// error to answer m with and the HTTP status to send it in (0: in a 200 or
// on the stream, as a JSON-RPC error).
func (h *Handler) begin(r *http.Request, s *session, m *jsonrpc.Message) (*call, int, *jsonrpc.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != running {
		return nil, http.StatusServiceUnavailable, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := m.ID.String()
	switch {
	case s.ended:
		return nil, http.StatusNotFound, nil
	case s.calls[key] != nil:
		return nil, 0, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"request id %s is already in flight in this session; use a new id for each request", key)
	case len(s.calls) >= h.opts.MaxInFlight:
		h.rejected(r.Context(), "session_in_flight")
		return nil, 0, jsonrpc.NewError(gateway.CodeRateLimited,
			fmt.Sprintf("this session has %d requests in flight, the limit; wait for some to finish", h.opts.MaxInFlight),
			map[string]int{"limit": h.opts.MaxInFlight})
	}
	// A dropped connection is not a cancel (MCP 2025-11-25,
	// basic/transports): the call outlives the request's context.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	c := &call{id: m.ID, method: m.Method, ctx: ctx, cancel: cancel, baseURL: front.ForwardedBaseURL(r, h.opts.TrustedProxies), groups: groupsOf(r, s.principal), header: front.Forwardable(r.Header),
		credential: gateway.CredentialOf(r.Header, s.principal), exposure: r.URL.Query().Get("exposure")}
	s.calls[key] = c
	s.lastActive = time.Now()
	h.calls.Add(1)
	return c, 0, nil
}

// groupsOf returns the groups of the auth principal of r, for the core's
// access rules. They are taken from each request, not kept with the
// session, and only when that principal is the session's: the session
// belongs to a name, which Options.Principal may give without auth.
func groupsOf(r *http.Request, principal string) []string {
	if p, ok := auth.FromContext(r.Context()); ok && p.Name == principal {
		return p.Groups
	}
	return nil
}

// serve answers a call begun by begin and hands deliver the response to
// write, or nil when nothing is to be written (the client cancelled, or the
// session ended). openLocked, when not nil, returns the stream the call's
// notifications and input requests go to, under s.mu (see run). Only
// after deliver returns is the call over for Close, so that a response
// reaches its stream before Close closes the streams.
func (h *Handler) serve(s *session, c *call, params json.RawMessage, openLocked func() *stream, deliver func(msg []byte)) {
	defer h.calls.Done()
	deliver(h.run(s, c, params, openLocked))
}

// run answers a call and returns its response (see serve). openLocked,
// called under s.mu when the call has a notification or an input request
// for the client, returns the stream to put it on, or nil when the call's
// answer can carry none any more (it was decided to be JSON). A nil
// openLocked (a request the gateway answers itself) carries none at all.
func (h *Handler) run(s *session, c *call, params json.RawMessage, openLocked func() *stream) []byte {
	// The keys MCP reserves in _meta describe the client's own hop: they
	// never travel on (the params were parsed strictly: this cannot fail).
	if p, err := front.StripReserved(params); err == nil {
		params = p
	}
	req := &gateway.Request{
		Method:     c.method,
		ID:         front.PlainID(c.id),
		Params:     params,
		Principal:  s.principal,
		Groups:     c.groups,
		Session:    s.key,
		Client:     gateway.Client{ProtocolVersion: s.version, Capabilities: s.caps, Info: s.info},
		BaseURL:    c.baseURL,
		Header:     c.header,
		Credential: c.credential,
		Exposure:   c.exposure,
		Cancel:     c.cancel, // run answers by what Handle returns, whatever the cause
		// What outlives the request (resources/updated after a subscribe)
		// goes on the session's standalone GET stream, like list_changed.
		SessionNotify: func(method string, params json.RawMessage) {
			msg := notificationMessage(method, params)
			s.mu.Lock()
			defer s.mu.Unlock()
			if st := s.standalone; st != nil && !s.ended {
				h.appendLocked(st, msg)
			}
		},
		// Requests of the upstream sessions this session owns that belong
		// to none of its calls go on its standalone GET stream too.
		SessionInput: s.ask,
	}
	if openLocked != nil {
		req.Notify = func(method string, params json.RawMessage) {
			msg := notificationMessage(method, params)
			s.mu.Lock()
			defer s.mu.Unlock()
			if c.ctx.Err() == nil && !s.ended {
				if st := openLocked(); st != nil {
					h.appendLocked(st, msg)
				}
			}
		}
		// Only a stream can carry a request to the client before the
		// response; requests answered as JSON cannot ask for input.
		req.Input = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			s.mu.Lock()
			var st *stream
			if c.ctx.Err() == nil && !s.ended {
				st = openLocked()
			}
			s.mu.Unlock()
			if st == nil {
				return nil, errInputClosed
			}
			return h.input(ctx, s, c, st, method, params)
		}
	}
	res, err := h.core.Handle(c.ctx, req)
	cause := context.Cause(c.ctx) // nil unless cancelled, always with a cause of ours
	c.cancel(errAnswered)
	s.mu.Lock()
	if s.calls[c.id.String()] == c {
		delete(s.calls, c.id.String())
	}
	s.lastActive = time.Now()
	s.mu.Unlock()

	jerr, isRPC := errors.AsType[*jsonrpc.Error](err)
	switch {
	case cause == errClientCancelled:
		return nil
	case err == nil && res != nil:
		if res.Type != gateway.ResultComplete && res.Type != "" {
			h.logger.Debug("relaying a result that is not complete", "session_id", s.key, "method", c.method, "type", string(res.Type))
		}
		return resultMessage(c.id, encodeResult(s.version, c.method, res.Body, c.method == "tools/list" && h.core.NonObjectOutputSchemas()))
	case isRPC:
		return errorMessage(c.id, jerr)
	case cause == errShutdown:
		return errorMessage(c.id, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the gateway shut down before this request finished; it was cancelled upstream; retry it", nil))
	case cause != nil:
		return nil
	default:
		h.logger.Error("core failed a request", "session_id", s.key, "method", c.method, "err", err)
		return errorMessage(c.id, jsonrpc.NewError(jsonrpc.CodeInternalError, "the gateway failed to answer this request", nil))
	}
}

// finishLocked appends a call's response (if any) to st and ends st after
// its last call.
func (h *Handler) finishLocked(st *stream, msg []byte) {
	if msg != nil {
		h.appendResponseLocked(st, msg)
	}
	if st.pending--; st.pending <= 0 {
		st.finish()
	}
}

// refuse writes begin's refusal of a lone request.
func refuse(w http.ResponseWriter, id jsonrpc.ID, status int, jerr *jsonrpc.Error) {
	switch status {
	case http.StatusServiceUnavailable:
		writeShuttingDown(w, id)
	case http.StatusNotFound:
		writeNoSession(w)
	default:
		front.WriteJSON(w, http.StatusOK, errorMessage(id, jerr))
	}
}

// request answers one request. The ones the gateway answers itself get
// JSON. A forwarded one runs on this goroutine and gets JSON too when its
// response is ready before it has anything else for the client and
// within StreamAfter; its first notification or input request, or
// StreamAfter passing, turns its answer into an event stream instead,
// written by a goroutine of its own while the call goes on (see the
// package doc).
func (h *Handler) request(w http.ResponseWriter, r *http.Request, s *session, m *jsonrpc.Message) {
	c, status, jerr := h.begin(r, s, m)
	if c == nil {
		refuse(w, m.ID, status, jerr)
		return
	}
	if local(m.Method) {
		var msg []byte
		h.serve(s, c, m.Params, nil, func(m []byte) { msg = m })
		if msg == nil {
			msg = errorMessage(m.ID, jsonrpc.NewError(jsonrpc.CodeInternalError, "the request was cancelled", nil))
		}
		front.WriteJSON(w, http.StatusOK, msg)
		return
	}
	// Guarded by s.mu: whether the answer is JSON (c.decided once the
	// response is in without a stream), and the stream's writer.
	openLocked := func() *stream {
		if c.st == nil && !c.decided {
			st := s.newStreamLocked(1)
			c.st = st
			if s.version == V20251125 {
				h.appendLocked(st, nil) // the priming event
			}
			att := s.attachLocked(st)
			c.written = make(chan struct{})
			go func(done chan struct{}) {
				defer close(done)
				startSSE(w)
				h.pump(r.Context(), newResponseSink(w, h.opts.WriteTimeout), s, st, att, 0)
			}(c.written)
		}
		return c.st
	}
	t := time.AfterFunc(h.opts.StreamAfter, func() {
		s.mu.Lock()
		if c.ctx.Err() == nil && !s.ended {
			openLocked()
		}
		s.mu.Unlock()
	})
	msg := h.run(s, c, m.Params, openLocked)
	t.Stop()
	s.mu.Lock()
	c.decided = true
	st, done := c.st, c.written
	if st != nil {
		h.finishLocked(st, msg)
	}
	s.mu.Unlock()
	if st == nil {
		if msg != nil {
			front.WriteJSON(w, http.StatusOK, msg)
		} else {
			// Cancelled, or its session ended: no response, so an empty
			// stream, as a streamed answer would have ended.
			startSSE(w)
		}
	}
	h.calls.Done()
	if done != nil {
		<-done
	}
}

// batch answers a JSON-RPC batch, which only 2025-03-26 sessions may send
// (2025-06-18 removed batching).
func (h *Handler) batch(w http.ResponseWriter, r *http.Request, s *session, msgs []*jsonrpc.Message, hasInit bool) {
	if s.version != V20250326 {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("JSON-RPC batches need protocol version 2025-03-26; this session negotiated %s, so send one message per POST", s.version), nil)
		return
	}
	if hasInit {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"a batch must not contain initialize; send initialize alone", nil)
		return
	}
	// A batch the session could never have in flight at once is refused
	// whole, before any of it is acted on, with one -31003 (the code of
	// the cap, as a lone request over it gets): answering each request
	// would only make the client sort out what ran.
	n := 0
	for _, m := range msgs {
		if m.IsRequest() {
			n++
		}
	}
	if n > h.opts.MaxInFlight {
		h.rejected(r.Context(), "session_in_flight")
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, gateway.CodeRateLimited,
			fmt.Sprintf("this batch holds %d requests, more than the %d a session may have in flight; nothing in it was run: send at most %d requests per batch", n, h.opts.MaxInFlight, h.opts.MaxInFlight),
			map[string]int{"limit": h.opts.MaxInFlight, "requests": n})
		return
	}
	reqs := make([]*jsonrpc.Message, 0, n)
	for _, m := range msgs {
		switch {
		case m.IsRequest():
			reqs = append(reqs, m)
		case m.IsNotification():
			h.notification(s, m)
		default:
			h.answer(s, m)
		}
	}
	if len(reqs) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}

	// Begin every request; refusals become their error responses.
	calls := make([]*call, len(reqs))
	refused := make([][]byte, len(reqs))
	forward := false
	for i, m := range reqs {
		c, status, jerr := h.begin(r, s, m)
		switch {
		case c != nil:
			calls[i] = c
			forward = forward || !local(m.Method)
		case status == http.StatusServiceUnavailable:
			jerr = jsonrpc.NewError(refuseShutdown.code, refuseShutdown.msg, nil)
		case status == http.StatusNotFound:
			jerr = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "the session ended", nil)
		}
		if jerr != nil {
			refused[i] = errorMessage(m.ID, jerr)
		}
	}

	if !forward {
		out := make([][]byte, len(reqs))
		var g errgroup.Group
		g.SetLimit(maxBatchParallel)
		for i, c := range calls {
			if c == nil {
				out[i] = refused[i]
				continue
			}
			g.Go(func() error {
				h.serve(s, c, reqs[i].Params, nil, func(msg []byte) { out[i] = msg })
				return nil
			})
		}
		g.Wait()
		var b bytes.Buffer
		b.WriteByte('[')
		n := 0
		for _, msg := range out {
			if msg == nil {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			b.Write(msg)
			n++
		}
		b.WriteByte(']')
		front.WriteJSON(w, http.StatusOK, b.Bytes())
		return
	}

	// One stream carries every response as its own event; 2025-03-26 has
	// no priming event.
	running := 0
	for _, c := range calls {
		if c != nil {
			running++
		}
	}
	s.mu.Lock()
	st := s.newStreamLocked(running)
	for _, msg := range refused {
		if msg != nil {
			h.appendResponseLocked(st, msg)
		}
	}
	if running == 0 {
		st.finish()
	}
	for _, c := range calls {
		if c != nil {
			c.st = st
		}
	}
	att := s.attachLocked(st)
	s.mu.Unlock()
	for i, c := range calls {
		if c == nil {
			continue
		}
		go h.serve(s, c, reqs[i].Params, func() *stream { return st }, func(msg []byte) {
			s.mu.Lock()
			h.finishLocked(st, msg)
			s.mu.Unlock()
		})
	}
	startSSE(w)
	h.pump(r.Context(), newResponseSink(w, h.opts.WriteTimeout), s, st, att, 0)
}

// get serves GET /mcp: the session's standalone stream, or the resumption
// of any of its streams with Last-Event-ID.
func (h *Handler) get(c echo.Context) error {
	r, w := c.Request(), c.Response()
	if !front.Accepts(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"GET /mcp opens an event stream: the Accept header must list text/event-stream", nil)
		return nil
	}
	if sid := r.Header.Get(HeaderSessionID); sid != "" && h.forward(w, r, sid, nil) {
		return nil
	}
	s := h.requireSession(w, r, "GET /mcp needs the Mcp-Session-Id of a session: send initialize first")
	if s == nil {
		return nil
	}

	// An empty Last-Event-ID is taken as none: there is nothing to resume.
	if lastID := r.Header.Get(HeaderLastEventID); lastID != "" {
		tag, num, seq, ok := parseLastEventID(lastID)
		s.mu.Lock()
		if ok && s.tag != "" && tag != s.tag {
			// An event of the process the session lived in before this
			// one restored it: its streams went with that process. Not
			// an error: the session is fine.
			s.mu.Unlock()
			if num != 0 {
				// A POST stream: the call it answered went too, and its
				// response will never come. An empty stream ends it; the
				// client may send the request again.
				startSSE(w)
				return nil
			}
			// The GET stream: opened anew, as by a GET without
			// Last-Event-ID.
			return h.openStandalone(c, s)
		}
		st := s.streams[num]
		if !ok || tag != s.tag || st == nil || seq > st.lastSeq || s.ended {
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("cannot resume after event %q: this session has no such stream or event (a finished stream stays resumable for %s); send the request again", lastID, h.opts.ResumeWindow), nil)
			return nil
		}
		// A resume after the stream's window passed comes too late, even
		// if the janitor has not looked yet: its calls are cancelled, and
		// the connection gets what the stream still has.
		h.abandonLocked(s, st, time.Now())
		att := s.attachLocked(st)
		s.mu.Unlock()
		h.serveStream(c, s, st, att, seq)
		return nil
	}
	return h.openStandalone(c, s)
}

// openStandalone serves a fresh GET: the session's standalone stream,
// stream 0, from the events no connection delivered yet.
func (h *Handler) openStandalone(c echo.Context, s *session) error {
	w := c.Response()
	h.mu.Lock()
	st0 := h.state
	h.mu.Unlock()
	if st0 != running {
		writeShuttingDown(w, jsonrpc.ID{})
		return nil
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		writeNoSession(w)
		return nil
	}
	st := s.standaloneLocked()
	cursor := st.delivered
	att := s.attachLocked(st)
	if s.version == V20251125 {
		h.appendLocked(st, nil) // the priming event
	}
	s.mu.Unlock()
	h.serveStream(c, s, st, att, cursor)
	return nil
}

// delete serves DELETE /mcp: the client ends its session. A session this
// process does not hold is ended in the store, without being restored
// first: a cap that would refuse its restore must not keep its client
// from ending it.
func (h *Handler) delete(c echo.Context) error {
	r, w := c.Request(), c.Response()
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		h.noSession(w, r, "DELETE /mcp ends a session: send the Mcp-Session-Id of the session to end")
		return nil
	}
	if !checkVersionHeader(w, r, jsonrpc.ID{}) {
		return nil
	}
	if h.forward(w, r, sid, nil) {
		return nil
	}
	var (
		found bool
		err   error
		key   string
	)
	if s := h.held(sid); s != nil {
		if s = h.live(r, s); s != nil {
			found, key = true, s.key
			err = h.endForGood(s, errDeleted)
		}
	} else if k, principal, ok := h.storedKey(r, sid); ok {
		key = k
		found, err = h.endStored(r.Context(), key, principal, errDeleted)
	}
	switch {
	case err != nil:
		h.logger.Error("ending a session failed; the session goes on", "session_id", key, "err", err)
		refuseStore.write(w, r, h, jsonrpc.ID{})
	case !found:
		writeNoSession(w)
	default:
		w.WriteHeader(http.StatusOK)
	}
	return nil
}

// firstID returns the id of a POST's one message, to echo in an error
// about the whole POST; a batch's errors carry none.
func firstID(msgs []*jsonrpc.Message, batch bool) jsonrpc.ID {
	if batch || len(msgs) == 0 {
		return jsonrpc.ID{}
	}
	return msgs[0].ID
}
