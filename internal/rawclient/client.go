package rawclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultProtocolVersion is the version Dial asks for when
// Options.ProtocolVersion is empty.
const DefaultProtocolVersion = "2025-11-25"

const (
	// DefaultMaxMessage bounds one JSON-RPC message the client reads when
	// Options.MaxMessage is zero.
	DefaultMaxMessage = 4 << 20
	// DefaultMaxResumes is how many reconnections in a row a stream gets
	// when Options.MaxResumes is zero.
	DefaultMaxResumes = 3
)

// CodeMethodNotFound is the JSON-RPC code of the error the client answers a
// server request with when Options.OnRequest is nil.
const CodeMethodNotFound = -32601

const (
	// defaultRetry is the wait before reconnecting a stream whose server
	// sent no retry field.
	defaultRetry = 100 * time.Millisecond
	// maxRetry caps the wait a server's retry field asks for.
	maxRetry = 5 * time.Second
	// sendTimeout bounds POSTing the answer to a server request, and the
	// notifications/cancelled for an abandoned Call.
	sendTimeout = 10 * time.Second
	// closeTimeout bounds the DELETE of Close.
	closeTimeout = 5 * time.Second
	// maxErrorBody is how much of an unexpected HTTP answer HTTPError keeps.
	maxErrorBody = 1 << 10
)

// ErrClosed is returned by the methods of a closed Client.
var ErrClosed = errors.New("rawclient: client closed")

// Options configure a Client. The zero value is usable.
type Options struct {
	// ProtocolVersion is the version sent in initialize. If empty,
	// DefaultProtocolVersion is used. Later requests carry the version the
	// server answered with in the MCP-Protocol-Version header.
	ProtocolVersion string
	// Capabilities is the client's capabilities object, sent as is. If
	// nil, {} is sent.
	Capabilities json.RawMessage
	// ClientInfo is the clientInfo object, sent as is. If nil,
	// {"name":"rawclient","version":"v0.1.0"} is sent.
	ClientInfo json.RawMessage
	// Header is added to every HTTP request (for example Authorization).
	// If nil, none is added. Dial copies it.
	Header http.Header
	// HTTPClient sends the requests. If nil, http.DefaultClient is used.
	// It should have no Timeout: streams stay open as long as calls last.
	HTTPClient *http.Client
	// OnRequest answers a request the server sends (elicitation/create,
	// sampling/createMessage, roots/list, ...) on any stream; the client
	// POSTs the answer. It runs in its own goroutine, with a context that
	// ends with Close, and should return when that context is done. A nil
	// result with a nil error is sent as {}. If OnRequest is nil, every
	// server request gets a CodeMethodNotFound error.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *Error)
	// OnNotification receives the notifications the server sends on any
	// stream. It is called on the goroutine reading that stream, possibly
	// concurrently with itself, and should not block. If nil, notifications
	// are dropped.
	OnNotification func(method string, params json.RawMessage)
	// MaxMessage bounds one message (a JSON body or an event's data). If
	// zero, DefaultMaxMessage is used; negative is an error.
	MaxMessage int
	// MaxResumes is how many times in a row the client reconnects a stream
	// that ends early: a Call's stream cut before its response, or the GET
	// stream. A reconnection that delivers an event resets the count. If
	// zero, DefaultMaxResumes is used; negative disables reconnection.
	MaxResumes int
}

// Error is a JSON-RPC error response. Call returns it, unwrapped, when the
// server answers with an error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// HTTPError is an HTTP answer the transport does not call for: a status
// other than the expected one, or a body of the wrong type.
type HTTPError struct {
	StatusCode  int
	ContentType string
	// Body is the start of the body, at most 1 KiB.
	Body string
}

func (e *HTTPError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("http status %d (%s)", e.StatusCode, e.ContentType)
	}
	return fmt.Sprintf("http status %d (%s): %s", e.StatusCode, e.ContentType, e.Body)
}

// Client is one MCP session over streamable HTTP. Its methods are safe for
// concurrent use.
type Client struct {
	endpoint string
	opts     Options
	hc       *http.Client

	// Set by Dial, read-only afterwards.
	sessionID  string
	version    string
	initResult json.RawMessage

	nextID atomic.Int64

	// ctx is the lifetime of the client's own goroutines (the GET stream
	// and OnRequest calls); Close cancels it and waits on wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	streaming bool // the GET stream goroutine runs

	closeOnce sync.Once
	closeErr  error
}

// wireMessage is any JSON-RPC message; which members are set tells which.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// answer is a response's result or error.
func (m *wireMessage) answer() (json.RawMessage, error) {
	switch {
	case m.Error != nil:
		return nil, m.Error
	case m.Result == nil:
		return nil, errors.New("response has neither result nor error")
	}
	return m.Result, nil
}

// Dial starts a session at endpoint: it POSTs initialize, keeps the
// Mcp-Session-Id and the negotiated protocol version, and sends
// notifications/initialized. ctx bounds the handshake only.
func Dial(ctx context.Context, endpoint string, opts Options) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("rawclient: endpoint %q is not an http(s) URL", endpoint)
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = DefaultProtocolVersion
	}
	if opts.Capabilities == nil {
		opts.Capabilities = json.RawMessage(`{}`)
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = json.RawMessage(`{"name":"rawclient","version":"v0.1.0"}`)
	}
	if opts.MaxMessage < 0 {
		return nil, fmt.Errorf("rawclient: negative MaxMessage %d", opts.MaxMessage)
	}
	if opts.MaxMessage == 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.MaxResumes == 0 {
		opts.MaxResumes = DefaultMaxResumes
	}
	opts.Header = opts.Header.Clone()
	c := &Client{endpoint: endpoint, opts: opts, hc: opts.HTTPClient}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	params, err := json.Marshal(struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}{opts.ProtocolVersion, opts.Capabilities, opts.ClientInfo})
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("rawclient: encoding initialize params: %w", err)
	}
	id := c.nextID.Add(1)
	resp, err := c.post(ctx, request(id, "initialize", params))
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("initializing: %w", err)
	}
	c.sessionID = resp.Header.Get("Mcp-Session-Id")
	res, err := c.readAnswer(ctx, resp, id)
	if err == nil {
		var ir struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(res, &ir) != nil || ir.ProtocolVersion == "" {
			err = errors.New("initialize result has no protocolVersion")
		}
		c.version, c.initResult = ir.ProtocolVersion, res
	}
	if err == nil {
		err = c.Notify(ctx, "notifications/initialized", nil)
	}
	if err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("initializing: %w", err)
	}
	return c, nil
}

// SessionID returns the Mcp-Session-Id the server assigned, or "".
func (c *Client) SessionID() string { return c.sessionID }

// ProtocolVersion returns the protocol version the server answered with.
func (c *Client) ProtocolVersion() string { return c.version }

// InitializeResult returns the server's initialize result as it came.
func (c *Client) InitializeResult() json.RawMessage { return c.initResult }

// Call sends a request and returns its result. params is marshalled as is
// (nil sends none; a json.RawMessage goes verbatim). While the answer is an
// event stream, notifications on it go to Options.OnNotification and server
// requests to Options.OnRequest; if the stream is cut before the response,
// Call resumes it with GET and Last-Event-ID (Options.MaxResumes). A
// JSON-RPC error answer is returned as a *Error. If ctx ends first, Call
// sends notifications/cancelled for the request and returns an error
// wrapping ctx.Err().
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	p, err := encodeParams(params)
	if err != nil {
		return nil, fmt.Errorf("rawclient: encoding %s params: %w", method, err)
	}
	id := c.nextID.Add(1)
	resp, err := c.post(ctx, request(id, method, p))
	var res json.RawMessage
	if err == nil {
		res, err = c.readAnswer(ctx, resp, id)
	}
	if err != nil {
		var rpcErr *Error
		if errors.As(err, &rpcErr) {
			return nil, rpcErr
		}
		if ctx.Err() != nil {
			c.cancelRequest(ctx, id)
		}
		return nil, fmt.Errorf("calling %s: %w", method, err)
	}
	return res, nil
}

// Notify sends a notification; the server should answer 202 Accepted.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	if c.isClosed() {
		return ErrClosed
	}
	p, err := encodeParams(params)
	if err != nil {
		return fmt.Errorf("rawclient: encoding %s params: %w", method, err)
	}
	body, err := json.Marshal(wireMessage{JSONRPC: "2.0", Method: method, Params: p})
	if err != nil {
		return fmt.Errorf("rawclient: encoding %s: %w", method, err)
	}
	if err := c.send(ctx, body); err != nil {
		return fmt.Errorf("sending %s: %w", method, err)
	}
	return nil
}

// OpenStream opens the GET stream for server-initiated messages and returns
// once the server accepted it (a 405 comes back as an *HTTPError). A
// goroutine of the client then reads it until Close, reconnecting with
// Last-Event-ID when it drops (Options.MaxResumes); after it gives up,
// OpenStream may be called again. ctx bounds the opening only.
func (c *Client) OpenStream(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.streaming:
		c.mu.Unlock()
		return errors.New("rawclient: the GET stream is already open")
	}
	c.streaming = true
	c.mu.Unlock()
	resp, err := c.openGET(ctx, "")
	if err == nil && !c.goRun(func() { c.runStream(resp.Body) }) {
		resp.Body.Close()
		err = ErrClosed
	}
	if err != nil {
		c.mu.Lock()
		c.streaming = false
		c.mu.Unlock()
		return fmt.Errorf("opening the GET stream: %w", err)
	}
	return nil
}

// Close ends the session with DELETE (a 405 answer is fine), stops the GET
// stream and waits for the client's goroutines, OnRequest calls included.
// It returns the DELETE's error, and the same on every later call. ctx,
// and a few seconds at most, bound the DELETE. Calls in flight are not
// interrupted (their contexts are); later ones return ErrClosed.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		if c.sessionID != "" {
			c.closeErr = c.deleteSession(ctx)
		}
		c.cancel()
		c.wg.Wait()
	})
	return c.closeErr
}

func (c *Client) deleteSession(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodDelete, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("deleting the session: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("deleting the session: %w", newHTTPError(resp))
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// goRun runs f on a goroutine Close waits for, unless the client is closed.
func (c *Client) goRun(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Go(f)
	return true
}

// newRequest is an HTTP request to the endpoint with the session headers.
func (c *Client) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint, r)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.opts.Header {
		req.Header[k] = slices.Clone(vs)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
	}
	if c.version != "" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	return req, nil
}

// post POSTs one message, accepting either kind of answer.
func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := c.newRequest(ctx, http.MethodPost, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	return c.hc.Do(req)
}

// send POSTs a notification or response, which the server answers with 202
// (or another 2xx) and no body worth reading.
func (c *Client) send(ctx context.Context, body []byte) error {
	resp, err := c.post(ctx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return newHTTPError(resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// get is a GET for an event stream, resuming after lastID when it is set.
func (c *Client) get(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := c.newRequest(ctx, http.MethodGet, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp) != "text/event-stream" {
		defer resp.Body.Close()
		return nil, newHTTPError(resp)
	}
	return resp, nil
}

// openGET is get for the long-lived GET stream: the request lives until
// Close (or until its body is closed), while ctx bounds only the wait for
// the answer's headers.
func (c *Client) openGET(ctx context.Context, lastID string) (*http.Response, error) {
	reqCtx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, cancel)
	resp, err := c.get(reqCtx, lastID)
	if !stop() && err == nil {
		// ctx ended as the answer came: treat it as not opened.
		resp.Body.Close()
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases its request's context once closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// readAnswer reads the answer to request id from resp, which it closes.
func (c *Client) readAnswer(ctx context.Context, resp *http.Response, id int64) (json.RawMessage, error) {
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, newHTTPError(resp)
	}
	switch mediaType(resp) {
	case "application/json":
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.opts.MaxMessage)+1))
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if len(data) > c.opts.MaxMessage {
			return nil, fmt.Errorf("answer longer than %d bytes: %w", c.opts.MaxMessage, errTooLarge)
		}
		var m wireMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("decoding the answer: %w", err)
		}
		if m.Method != "" || !sameID(m.ID, id) {
			return nil, fmt.Errorf("the answer to request %d is not its response: %.200s", id, data)
		}
		return m.answer()
	case "text/event-stream":
		return c.readStream(ctx, resp.Body, id)
	default:
		defer resp.Body.Close()
		return nil, newHTTPError(resp)
	}
}

// streamState is what reconnecting a stream needs.
type streamState struct {
	lastID     string
	retry      time.Duration
	hasRetry   bool
	progressed bool // an event came since the last reconnection
}

// wait is how long to wait before reconnecting.
func (st *streamState) wait() time.Duration {
	if !st.hasRetry {
		return defaultRetry
	}
	return min(st.retry, maxRetry)
}

// readStream reads request id's event stream until its response, resuming
// with GET + Last-Event-ID when the stream ends early (basic/transports,
// "Resumability and Redelivery"). It closes body.
func (c *Client) readStream(ctx context.Context, body io.ReadCloser, id int64) (json.RawMessage, error) {
	var st streamState
	failures := 0
	for {
		res, done, err := c.consume(body, id, &st)
		body.Close()
		if done {
			return res, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if st.lastID == "" {
			return nil, fmt.Errorf("stream ended before the response, with no event id to resume from: %w", err)
		}
		if st.progressed {
			failures, st.progressed = 0, false
		}
		if failures >= c.opts.MaxResumes {
			return nil, fmt.Errorf("stream ended before the response, %d resumptions in a row failed: %w", failures, err)
		}
		failures++
		if err := sleep(ctx, st.wait()); err != nil {
			return nil, err
		}
		resp, err := c.get(ctx, st.lastID)
		if err != nil {
			return nil, fmt.Errorf("resuming the stream after event %q: %w", st.lastID, err)
		}
		body = resp.Body
	}
}

// runStream reads the GET stream until Close, reconnecting when it drops.
func (c *Client) runStream(body io.ReadCloser) {
	defer func() {
		c.mu.Lock()
		c.streaming = false
		c.mu.Unlock()
	}()
	var st streamState
	failures := 0
	for {
		if body != nil {
			_, done, _ := c.consume(body, 0, &st)
			body.Close()
			if done {
				return // a message too large or not JSON: not worth resuming
			}
		}
		if c.ctx.Err() != nil {
			return
		}
		if st.progressed {
			failures, st.progressed = 0, false
		}
		if failures >= c.opts.MaxResumes {
			return
		}
		failures++
		if sleep(c.ctx, st.wait()) != nil {
			return
		}
		body = nil
		if resp, err := c.openGET(c.ctx, st.lastID); err == nil {
			body = resp.Body
		}
	}
}

// consume reads events from body, dispatching server requests and
// notifications, until the response to request want (0: none) arrives
// (done), the stream ends (not done: resumable), or it breaks (done, with
// the error).
func (c *Client) consume(body io.Reader, want int64, st *streamState) (res json.RawMessage, done bool, err error) {
	r := newEventReader(body, c.opts.MaxMessage)
	for {
		ev, err := r.next()
		if err != nil {
			return nil, errors.Is(err, errTooLarge), err
		}
		st.progressed = true
		if ev.hasID {
			st.lastID = ev.id
		}
		if ev.hasRetry {
			st.retry, st.hasRetry = ev.retry, true
		}
		if len(ev.data) == 0 || (ev.typ != "" && ev.typ != "message") {
			continue // a priming event, or not a message
		}
		var m wireMessage
		if err := json.Unmarshal(ev.data, &m); err != nil {
			return nil, true, fmt.Errorf("decoding a message on the stream: %w", err)
		}
		switch {
		case m.Method != "" && m.ID != nil:
			c.serve(m)
		case m.Method != "":
			if c.opts.OnNotification != nil {
				c.opts.OnNotification(m.Method, m.Params)
			}
		case want != 0 && sameID(m.ID, want):
			res, err := m.answer()
			return res, true, err
		}
	}
}

// serve answers a server request on a goroutine of the client.
func (c *Client) serve(m wireMessage) {
	c.goRun(func() {
		var (
			result json.RawMessage
			rpcErr *Error
		)
		if c.opts.OnRequest == nil {
			rpcErr = &Error{Code: CodeMethodNotFound, Message: "method not found: " + m.Method}
		} else {
			result, rpcErr = c.opts.OnRequest(c.ctx, m.Method, m.Params)
		}
		reply := wireMessage{JSONRPC: "2.0", ID: m.ID, Result: result, Error: rpcErr}
		if rpcErr != nil {
			reply.Result = nil
		} else if len(result) == 0 {
			reply.Result = json.RawMessage(`{}`)
		}
		body, err := json.Marshal(reply)
		if err != nil {
			body, _ = json.Marshal(wireMessage{JSONRPC: "2.0", ID: m.ID,
				Error: &Error{Code: -32603, Message: "the client's answer is not valid JSON"}})
		}
		ctx, cancel := context.WithTimeout(c.ctx, sendTimeout)
		defer cancel()
		// Nobody waits for the outcome; a lost answer shows up as the
		// server's request never completing.
		c.send(ctx, body)
	})
}

// cancelRequest tells the server that request id is abandoned
// (basic/utilities/cancellation).
func (c *Client) cancelRequest(ctx context.Context, id int64) {
	reason := context.Cause(ctx).Error()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	c.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
}

// request encodes a request whose params are already JSON.
func request(id int64, method string, params json.RawMessage) []byte {
	b, err := json.Marshal(wireMessage{
		JSONRPC: "2.0",
		ID:      json.RawMessage(strconv.FormatInt(id, 10)),
		Method:  method,
		Params:  params,
	})
	if err != nil {
		panic("rawclient: encoding a request of valid parts: " + err.Error())
	}
	return b
}

func encodeParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	if raw, ok := params.(json.RawMessage); ok {
		if raw == nil {
			return nil, nil
		}
		if !json.Valid(raw) {
			return nil, errors.New("params are not valid JSON")
		}
		return raw, nil
	}
	return json.Marshal(params)
}

// sameID reports whether a response's id is the integer id.
func sameID(raw json.RawMessage, id int64) bool {
	var n int64
	return json.Unmarshal(raw, &n) == nil && n == id
}

func mediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

func newHTTPError(resp *http.Response) *HTTPError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &HTTPError{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(bytes.TrimSpace(b))}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
