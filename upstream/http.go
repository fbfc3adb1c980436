package upstream

// The streamable HTTP transport (MCP 2025-11-25, basic/transports; also
// 2025-06-18 and 2025-03-26 servers).
//
// # Flow
//
//	send(request) ── POST ─► 200 application/json ──► one message or a batch ─► recv(·, rel=id)
//	                   │
//	                   └──► 200 text/event-stream ─► [id + empty data: priming]
//	                          │                       [notifications, requests: recv(·, rel=id)]
//	                          │                       response ─► stop reading, return
//	                          │ ends before the response, an event id seen
//	                          ▼
//	                        wait retry (1s if unset) ─► GET + Last-Event-ID ─► read on
//	                          (gives up after 5 resumes in a row without a new event id)
//
//	send(notification or response) ── POST ─► 202
//	404 (we sent a session id) or 400 "No valid session ID" ─► errSessionExpired,
//	    and so is every send but initialize until the Client initializes again
//
//	ready ── GET stream (r3labs/sse, reconnects with backoff) ─► recv(·, zero rel)
//	         405: the server offers none; 404: the session is gone; both stop it
//	         silent past StreamIdleTimeout (5m): re-opened with Last-Event-ID
//	close ── stop the GET stream ── DELETE the session
//
// The POST answers are read by internal/sse (capped at MaxMessageBytes per
// event); the long-lived GET stream by r3labs/sse with its buffer raised to
// the same cap (DESIGN decision 3).
//
// Nothing here prints the api key, header values or the URL's query string
// (which may carry secrets after ${VAR} expansion): logs and errors name the
// server by scheme://host/path, and bodies quoted in errors are redacted.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	r3sse "github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Header names of the streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-ID"
)

const (
	// defaultRetry is how long to wait before resuming a POST's event stream
	// when the server sent no retry field (the spec leaves it to the client).
	defaultRetry = time.Second
	// maxRetryWait caps a server's retry field.
	maxRetryWait = 30 * time.Second
	// maxResumes is how many times in a row a POST's event stream is resumed
	// without the server sending a new event id before the call fails.
	maxResumes = 5
	// errorSnippet is how much of an error body is quoted in an error.
	errorSnippet = 200
	// drainLimit and drainTimeout bound reading the rest of a body we no
	// longer need, so that its connection can be reused.
	drainLimit   = 64 << 10
	drainTimeout = 2 * time.Second
	// Reconnection of the GET streams: exponential with jitter, reset by
	// every event.
	streamBackoffMin = 500 * time.Millisecond
	streamBackoffMax = 30 * time.Second
	// defaultStreamIdle is how long the GET stream may stay silent before
	// it is opened again (ClientOptions.StreamIdleTimeout).
	defaultStreamIdle = 5 * time.Minute
)

// errTransportClosed is returned by sends on a closed transport, and by
// sends that close interrupted.
var errTransportClosed = errors.New("transport closed")

// peer is what both HTTP transports know about their server: where it is,
// how to reach it, and what never to print.
type peer struct {
	rawURL  string      // as configured; its query may carry secrets
	safeURL string      // scheme://host/path, for logs and errors
	forward []string    // forward_headers, canonical, without the ones never forwarded
	base    http.Header // the configured headers and ours, canonical; read-only
	hc      *http.Client
	max     int64
	logger  *slog.Logger
	secrets []string // redacted from quoted bodies
}

func newPeer(srv config.Server, opts *ClientOptions, transport string) peer {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := peer{
		rawURL:  srv.URL,
		safeURL: "(invalid URL)",
		forward: forwardable(srv.ForwardHeaders),
		hc:      opts.HTTPClient,
		max:     opts.MaxMessageBytes,
	}
	if p.hc == nil {
		p.hc = defaultHTTPClient
	}
	p.base = make(http.Header, len(srv.Headers)+1)
	for k, v := range srv.Headers {
		p.base[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
	}
	if srv.APIKey != "" {
		p.base["Authorization"] = []string{"Bearer " + srv.APIKey} // ours wins
	}
	if p.max <= 0 {
		p.max = config.DefaultMaxResponseBody
	}
	addSecret := func(s string) {
		if len(s) >= 4 {
			p.secrets = append(p.secrets, s)
		}
	}
	addSecret(srv.APIKey)
	for _, v := range srv.Headers {
		addSecret(v)
	}
	if u, err := url.Parse(srv.URL); err == nil {
		p.safeURL = safeURL(u)
		addSecret(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				addSecret(v)
			}
		}
		if pw, ok := u.User.Password(); ok {
			addSecret(pw)
		}
	}
	// New has already added the server's name.
	p.logger = logger.With("transport", transport, "url", p.safeURL)
	return p
}

// safeURL returns u without user info, query and fragment.
func safeURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// newRequest returns a request to target with our authentication, the
// configured headers and, when not empty, the session and protocol version
// headers. Its body is in memory, as http.NewRequest makes it: net/http
// writes it with the headers, in one write, and sends it again after a
// redirect.
func (p *peer) newRequest(ctx context.Context, method, target string, body []byte, sid, version string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		// The error would quote the URL.
		return nil, fmt.Errorf("invalid server URL %s", p.safeURL)
	}
	req.Header = p.header(sid, version)
	return req, nil
}

// newPost returns a POST of a JSON-RPC message to target that lives
// within rctx: newRequest's headers, the content headers, the headers of
// client (a client's request headers) that forward_headers names, and
// the trace context of ctx, the call's.
func (p *peer) newPost(ctx, rctx context.Context, target string, body []byte, sid, version string, client http.Header) (*http.Request, error) {
	req, err := p.newRequest(rctx, http.MethodPost, target, body, sid, version)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	addMissing(req.Header, p.forwarded(client)) // ours and the configured ones win
	injectTraceContext(ctx, req.Header)
	return req, nil
}

// header returns a new request header: the configured headers and ours
// over them, and the session's.
func (p *peer) header(sid, version string) http.Header {
	h := p.base.Clone()
	if sid != "" {
		h.Set(headerSessionID, sid)
	}
	if version != "" {
		h.Set(headerProtocolVersion, version)
	}
	return h
}

// headerMap is header as the map the r3labs stream clients take.
func (p *peer) headerMap(sid, version string) map[string]string {
	h := p.header(sid, version)
	m := make(map[string]string, len(h))
	for k, vs := range h {
		m[k] = vs[0]
	}
	return m
}

// forwardable returns names in canonical form, without repeats and without
// the ones never forwarded whatever the configuration says (config refuses
// them too, from the same list): the client's credentials, the transports'
// own headers, hop-by-hop ones and the trace context, which is the
// transports' own: each POST carries that of its call's span, whose parent
// is the client's (injectTraceContext).
func forwardable(names []string) []string {
	var out []string
	for _, n := range names {
		k := textproto.CanonicalMIMEHeaderKey(n)
		if _, never := config.NeverForwarded(k); k != "" && !never && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// addMissing copies into dst the headers of src that dst does not have:
// with src a client's forwarded headers (peer.forwarded), our own and the
// configured ones win.
func addMissing(dst, src http.Header) {
	for k, vs := range src {
		if _, has := dst[k]; !has {
			dst[k] = vs
		}
	}
}

// forwarded returns the headers of client, a client's request headers,
// that the server's forward_headers name, in canonical form, or nil when
// there are none. A header the client's Connection header names is for
// the gateway's hop only (RFC 9110, section 7.6.1) and is not forwarded.
func (p *peer) forwarded(client http.Header) http.Header {
	if len(p.forward) == 0 || len(client) == 0 {
		return nil
	}
	var fwd http.Header
	for k, vs := range client {
		// The edge's headers are canonical; a hand-made map may not be.
		if ck := textproto.CanonicalMIMEHeaderKey(k); len(vs) > 0 && slices.Contains(p.forward, ck) && !hopByHop(client, ck) {
			if fwd == nil {
				fwd = make(http.Header)
			}
			fwd[ck] = append(fwd[ck], vs...)
		}
	}
	return fwd
}

// hopByHop reports whether the Connection header of h names the header
// key, in canonical form.
func hopByHop(h http.Header, key string) bool {
	for _, v := range h.Values("Connection") {
		for opt := range strings.SplitSeq(v, ",") {
			if textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(opt)) == key {
				return true
			}
		}
	}
	return false
}

// netError rewrites the *url.Error of a failed request so that it names the
// server by its safe URL, keeping the cause for errors.Is.
func (p *peer) netError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, p.safeURL, ue.Err)
	}
	return err
}

// redact replaces the secrets in s.
func (p *peer) redact(s string) string {
	for _, sec := range p.secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// statusError is a server's answer with an unexpected HTTP status.
type statusError struct {
	Code int
	Msg  string // what the server said, redacted and shortened, or our hint
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("server answered %d %s", e.Code, http.StatusText(e.Code))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// statusError reads the start of resp's body and returns the error that
// describes resp. It closes the body.
func (p *peer) statusError(resp *http.Response) error {
	snippet := readSnippet(resp.Body)
	resp.Body.Close()
	return p.errorFor(resp.StatusCode, snippet)
}

func (p *peer) errorFor(code int, body []byte) error {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		return &statusError{Code: code, Msg: "unauthorized (check api_key)"}
	}
	return &statusError{Code: code, Msg: p.quote(body)}
}

// readSnippet reads up to 4 KiB of an error body.
func readSnippet(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, 4<<10))
	return b
}

// quote returns the printable start of an error body, redacted.
func (p *peer) quote(body []byte) string {
	s := p.redact(strings.ToValidUTF8(string(body), "?"))
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > errorSnippet {
		cut := errorSnippet
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// sessionGone reports whether an answer with code and body means that the
// server no longer knows the session: 404 to a request that carried a
// session id (the spec), or a TypeScript SDK's 400 "No valid session ID".
func sessionGone(code int, body []byte, sentSession bool) bool {
	switch code {
	case http.StatusNotFound:
		return sentSession
	case http.StatusBadRequest:
		return bytes.Contains(bytes.ToLower(body), []byte("no valid session id"))
	}
	return false
}

// followingBoth returns the context of one HTTP exchange: it ends when
// ctx (the caller's) or life (the transport's) ends, or on cancel. detach
// stops following ctx, for a body drained after the caller has gone
// (release). It is life's child, not ctx's, so that detach can let it
// outlive ctx; it carries none of ctx's values (injectTraceContext takes
// ctx itself).
func followingBoth(ctx, life context.Context) (rctx context.Context, detach, cancel func()) {
	rctx, rcancel := context.WithCancel(life)
	stop := context.AfterFunc(ctx, rcancel)
	detach = func() { stop() }
	cancel = func() {
		stop()
		rcancel()
	}
	return rctx, detach, cancel
}

// mediaType returns the response's media type, lower case, without
// parameters.
func mediaType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	switch ct { // what servers send, without a map per response
	case "text/event-stream", "application/json":
		return ct
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return strings.ToLower(mt)
}

// streamBackoff is the reconnection strategy of the r3labs/sse clients:
// exponential with jitter, reset by the caller when an event arrives, and
// stopping for good when ctx ends or stop is set (r3labs retries any error
// otherwise; its default gives up after 15 minutes counted from the first
// connect).
type streamBackoff struct {
	ctx  context.Context
	stop *atomic.Bool
	next time.Duration
}

var _ backoff.BackOffContext = (*streamBackoff)(nil)

func (b *streamBackoff) NextBackOff() time.Duration {
	if b.ctx.Err() != nil || (b.stop != nil && b.stop.Load()) {
		return backoff.Stop
	}
	if b.next == 0 {
		b.next = streamBackoffMin
	}
	d := b.next
	b.next = min(2*b.next, streamBackoffMax)
	return d/2 + rand.N(d/2+1)
}

func (b *streamBackoff) Reset()                   { b.next = 0 }
func (b *streamBackoff) Context() context.Context { return b.ctx }

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// newStreamClient returns an r3labs/sse client of target whose buffer holds
// one message of the peer's cap, plus room for field names.
func (p *peer) newStreamClient(target string, headers map[string]string, bo backoff.BackOff) *r3sse.Client {
	size := min(p.max, math.MaxInt-4<<10) + 4<<10
	c := r3sse.NewClient(target, r3sse.ClientMaxBufferSize(int(size)))
	c.Connection = p.hc
	c.Headers = headers
	c.ReconnectStrategy = bo
	return c
}

// deliver parses the data of an event and passes each message to recv, and
// returns them. Events of a type other than message are not ours. owned
// says data is the event's own (the messages may alias it); otherwise it
// is copied.
func (p *peer) deliver(typ string, data []byte, owned bool, recv func(*jsonrpc.Message, related), rel related) []*jsonrpc.Message {
	if len(data) == 0 {
		return nil
	}
	if typ != "" && typ != "message" {
		p.logger.Debug("ignoring an event of unknown type", "event", typ)
		return nil
	}
	parse := jsonrpc.Parse
	if owned {
		parse = jsonrpc.ParseOwned
	}
	msgs, _, err := parse(data)
	if err != nil {
		p.logger.Warn("dropping a malformed message from the server", "err", err)
		return nil
	}
	for _, m := range msgs {
		recv(m, rel)
	}
	return msgs
}

// httpTransport is the streamable HTTP transport.
type httpTransport struct {
	peer
	recv func(*jsonrpc.Message, related)
	idle time.Duration // re-open a GET stream silent for this long; 0: never

	// life is the lifetime of background work (the GET stream, resumes,
	// drains) and of sends in flight; endLife, called by close, ends it.
	life     context.Context
	endLife  context.CancelFunc
	wg       sync.WaitGroup
	doneCh   chan struct{}
	closeErr error // set before doneCh is closed

	mu        sync.Mutex
	sessionID string
	version   string // negotiated; sent once ready
	// modern is set while the version is of the modern era: no
	// session, the Mcp-* request headers, JSON-RPC errors in 4xx.
	modern bool
	// expired is set when the server forgot the session, until the next
	// initialize: sending without the session would only earn a 400.
	expired bool
	get     context.CancelFunc
	closed  bool
}

var _ transport = (*httpTransport)(nil)

func newHTTPTransport(srv config.Server, opts *ClientOptions) transport {
	idle := opts.StreamIdleTimeout
	switch {
	case idle == 0:
		idle = defaultStreamIdle
	case idle < 0:
		idle = 0
	}
	t := &httpTransport{
		peer:   newPeer(srv, opts, config.TransportHTTP),
		idle:   idle,
		doneCh: make(chan struct{}),
	}
	t.life, t.endLife = context.WithCancel(context.Background())
	return t
}

// requestStreams reports that what the server sends about a request comes
// on that request's stream, so the Client attributes by it alone.
func (t *httpTransport) requestStreams() bool { return true }

// start has nothing to connect: the first POST (initialize) does.
func (t *httpTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	t.recv = recv
	u, err := url.Parse(t.rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid server URL %s", t.safeURL)
	}
	return nil
}

// background runs f on a goroutine that close waits for, unless the
// transport is closed.
func (t *httpTransport) background(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// release closes a body we stopped reading. What is left is drained in the
// background, briefly, so that an HTTP/1.1 connection can be reused; detach
// first lets the exchange outlive its sender's context, which ends as soon
// as the sender has its result. cancel ends the exchange.
func (t *httpTransport) release(body io.ReadCloser, detach, cancel func()) {
	detach()
	ok := t.background(func() {
		timer := time.AfterFunc(drainTimeout, cancel)
		defer timer.Stop()
		io.Copy(io.Discard, io.LimitReader(body, drainLimit))
		body.Close()
		cancel()
	})
	if !ok {
		body.Close()
		cancel()
	}
}

func (t *httpTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	return t.sendModern(ctx, m, nil, nil)
}

var (
	_ headerForwarder = (*httpTransport)(nil)
	_ modernSender    = (*httpTransport)(nil)
)

// sendForwarding is send, with the client headers of h that the server's
// forward_headers name on the POST (see CallHooks.Header).
func (t *httpTransport) sendForwarding(ctx context.Context, m *jsonrpc.Message, h http.Header) error {
	return t.sendModern(ctx, m, h, nil)
}

// sendModern is sendForwarding with the headers of extra set on the POST
// as well, when the server speaks the modern era (Mcp-Param-*).
func (t *httpTransport) sendModern(ctx context.Context, m *jsonrpc.Message, h, extra http.Header) error {
	body, err := jsonrpc.Encode(m)
	if err != nil {
		return err
	}
	initialize := m.Method == "initialize"
	t.mu.Lock()
	closed, sid, version, expired, modern := t.closed, t.sessionID, t.version, t.expired, t.modern
	t.mu.Unlock()
	switch {
	case closed:
		return errTransportClosed
	case expired && !initialize:
		return errSessionExpired
	}
	if initialize {
		// A new session: no session id, no version yet (spec: the client
		// starts over with an initialize without a session id).
		sid, version = "", ""
	}
	rctx, detach, cancel := followingBoth(ctx, t.life)
	req, err := t.newPost(ctx, rctx, t.rawURL, body, sid, version, h)
	if err != nil {
		cancel()
		return err
	}
	if modern && !initialize {
		setModernHeaders(req.Header, m, extra)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		cancel()
		return t.abortErr(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := readSnippet(resp.Body)
		resp.Body.Close()
		cancel()
		if modern {
			// The modern era answers a request it refuses with 4xx and
			// a JSON-RPC error body (404 -32601 is an unknown method,
			// not a lost session: there is none).
			if jerr := modernError(resp.StatusCode, snippet, m.ID); jerr != nil {
				return jerr
			}
			return t.errorFor(resp.StatusCode, snippet)
		}
		if sessionGone(resp.StatusCode, snippet, sid != "") {
			t.expire(sid)
			return errSessionExpired
		}
		return t.errorFor(resp.StatusCode, snippet)
	}
	if initialize {
		if err := t.setSession(resp.Header.Get(headerSessionID)); err != nil {
			resp.Body.Close()
			cancel()
			return err
		}
		sid = resp.Header.Get(headerSessionID)
	}
	if !m.IsRequest() {
		// 202 Accepted, or 200/204; there is no answer to a notification
		// or a response.
		if resp.ContentLength == 0 {
			resp.Body.Close()
			cancel()
		} else {
			t.release(resp.Body, detach, cancel)
		}
		return nil
	}
	switch mt := mediaType(resp); {
	case mt == "text/event-stream":
		return t.readStream(ctx, resp.Body, detach, cancel, m.ID, sid, version)
	case mt == "application/json":
		defer cancel()
		defer resp.Body.Close()
		return t.readJSON(ctx, resp.Body, resp.ContentLength, m.ID)
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent || resp.ContentLength == 0:
		t.release(resp.Body, detach, cancel)
		return fmt.Errorf("server answered %d %s to a request, without a response", resp.StatusCode, http.StatusText(resp.StatusCode))
	default:
		t.release(resp.Body, detach, cancel)
		return fmt.Errorf("server answered with content type %q; want application/json or text/event-stream", mt)
	}
}

// abortErr returns the error of an exchange that failed: ctx's own error
// when it ended, errTransportClosed when close interrupted it.
func (t *httpTransport) abortErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if t.life.Err() != nil {
		return errTransportClosed
	}
	return t.netError(err)
}

// session returns the session id the server assigned, "" when none.
func (t *httpTransport) session() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessionID
}

// setSession records the session id the server assigned in its answer to
// initialize; empty means the server keeps no session.
func (t *httpTransport) setSession(sid string) error {
	for i := 0; i < len(sid); i++ {
		if sid[i] < 0x21 || sid[i] > 0x7E {
			return errors.New("server sent a session id with characters other than visible ASCII")
		}
	}
	t.mu.Lock()
	t.sessionID, t.expired = sid, false
	t.mu.Unlock()
	return nil
}

// expire forgets session sid and stops its GET stream, unless a new
// session replaced it meanwhile.
func (t *httpTransport) expire(sid string) {
	t.mu.Lock()
	if t.sessionID != sid {
		t.mu.Unlock()
		return
	}
	t.sessionID, t.version, t.expired = "", "", true
	stop := t.get
	t.get = nil
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
	t.logger.Info("upstream session expired")
}

// maxPresized bounds the buffer readJSON makes for an answer's declared
// length before any of it came: a larger answer's buffer grows as its
// bytes do, so that a server cannot have a large buffer made by its
// header alone.
const maxPresized = 1 << 20

// readJSON reads a JSON answer of length bytes (-1: unknown): one
// message, or a batch from a 2025-03-26 server.
func (t *httpTransport) readJSON(ctx context.Context, body io.Reader, length int64, id jsonrpc.ID) error {
	var data []byte
	var err error
	if length >= 0 && length <= min(t.max, maxPresized) {
		// The usual answer: read into a buffer of its size, at once.
		data = make([]byte, length)
		_, err = io.ReadFull(body, data)
	} else {
		data, err = io.ReadAll(io.LimitReader(body, t.max+1))
	}
	if err != nil {
		return t.abortErr(ctx, err)
	}
	if int64(len(data)) > t.max {
		return fmt.Errorf("server's answer is larger than the limit of %d bytes (max_response_body)", t.max)
	}
	msgs, _, err := jsonrpc.ParseOwned(data) // read for this answer alone
	if err != nil {
		return fmt.Errorf("server's answer is not JSON-RPC: %w", err)
	}
	answered := false
	for _, m := range msgs {
		t.recv(m, id)
		answered = answered || (m.IsResponse() && m.ID == id)
	}
	if !answered {
		return errors.New("server's answer does not contain the response to the request")
	}
	return nil
}

// streamState is what reading a POST's event stream remembers across
// resumptions.
type streamState struct {
	lastID string
	retry  time.Duration
}

// readStream reads the event stream that answers request id until the
// response arrives, resuming it with GET + Last-Event-ID when the server
// closes it first (spec: the server may close the connection any time after
// the priming event; disconnection is not cancellation).
func (t *httpTransport) readStream(ctx context.Context, body io.ReadCloser, detach, cancel func(), id jsonrpc.ID, sid, version string) error {
	st := streamState{retry: defaultRetry}
	var lastErr error
	misses := 0
	for {
		if body != nil {
			before := st.lastID
			answered, err := t.readEvents(body, id, &st)
			if answered {
				t.release(body, detach, cancel)
				return nil
			}
			body.Close()
			cancel()
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case t.life.Err() != nil:
				return errTransportClosed
			case errors.Is(err, sse.ErrTooLarge):
				return fmt.Errorf("server sent an event larger than the limit of %d bytes (max_response_body)", t.max)
			case st.lastID == "":
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("server closed the response stream before answering: %w", t.netError(err))
				}
				return errors.New("server closed the response stream before answering")
			}
			if st.lastID != before {
				misses = 0
			}
			if err != nil && !errors.Is(err, io.EOF) {
				lastErr = t.netError(err)
			}
		}
		misses++
		if misses > maxResumes {
			if lastErr != nil {
				return fmt.Errorf("server closed the response stream before answering, and %d attempts to resume it made no progress: %w", maxResumes, lastErr)
			}
			return fmt.Errorf("server closed the response stream before answering, and %d attempts to resume it made no progress", maxResumes)
		}
		wait := min(st.retry, maxRetryWait)
		t.logger.Debug("resuming the response stream", "in", wait, "attempt", misses)
		if !sleep(ctx, wait) || t.life.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errTransportClosed
		}
		var err error
		body, detach, cancel, err = t.resume(ctx, st.lastID, sid, version)
		if err != nil {
			var se *statusError
			switch {
			case errors.Is(err, errSessionExpired):
				// Not errSessionExpired itself: the server had the request,
				// so the Client must not send it again. The next call
				// initializes a new session.
				return errors.New("the upstream session expired before the server answered")
			case ctx.Err() != nil, t.life.Err() != nil:
				return err
			case errors.As(err, &se) && (se.Code == http.StatusMethodNotAllowed || se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden):
				return fmt.Errorf("server closed the response stream before answering, and resuming it failed: %w", err)
			}
			lastErr = err
		}
	}
}

// readEvents reads events from body, passing their messages to recv, until
// the response to id arrived (answered) or the stream ends (err).
func (t *httpTransport) readEvents(body io.Reader, id jsonrpc.ID, st *streamState) (answered bool, err error) {
	r := sse.NewReader(body, t.max)
	defer r.Release()
	for {
		ev, err := r.Next()
		if err != nil {
			return false, err
		}
		if ev.HasID {
			st.lastID = ev.ID
		}
		if ev.HasRetry {
			st.retry = ev.Retry
		}
		for _, m := range t.deliver(ev.Type, ev.Data, true, t.recv, id) { // sse.Event.Data is the event's own
			answered = answered || (m.IsResponse() && m.ID == id)
		}
		if answered {
			return true, nil
		}
	}
}

// resume asks for the rest of a response stream: GET with Last-Event-ID.
func (t *httpTransport) resume(ctx context.Context, lastID, sid, version string) (body io.ReadCloser, detach, cancel func(), err error) {
	rctx, detach, cancel := followingBoth(ctx, t.life)
	req, err := t.newRequest(rctx, http.MethodGet, t.rawURL, nil, sid, version)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerLastEventID, lastID)
	resp, err := t.hc.Do(req)
	if err != nil {
		cancel()
		return nil, nil, nil, t.abortErr(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := readSnippet(resp.Body)
		resp.Body.Close()
		cancel()
		if sessionGone(resp.StatusCode, snippet, sid != "") {
			t.expire(sid)
			return nil, nil, nil, errSessionExpired
		}
		return nil, nil, nil, t.errorFor(resp.StatusCode, snippet)
	}
	if mt := mediaType(resp); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, nil, nil, fmt.Errorf("server resumed the stream with content type %q", mt)
	}
	return resp.Body, detach, cancel, nil
}

// ready records the negotiated version and opens the GET stream.
func (t *httpTransport) negotiated(version string) {
	t.mu.Lock()
	t.version = version
	t.modern = version >= ModernProtocolVersion
	t.mu.Unlock()
}

func (t *httpTransport) ready(context.Context) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	version := t.version
	sid := t.sessionID
	ctx, stop := context.WithCancel(t.life)
	prev := t.get
	t.get = stop
	t.wg.Add(1)
	t.mu.Unlock()
	if prev != nil {
		prev()
	}
	go func() {
		defer t.wg.Done()
		defer stop()
		t.runGetStream(ctx, sid, version)
	}()
}

// runGetStream holds the GET stream on which the server sends what belongs
// to no request, until ctx ends, the server says it has none (405) or the
// session is gone. r3labs/sse reconnects after errors with Last-Event-ID;
// a stream the server ends cleanly (which the spec allows) is reopened
// here, after a pause, and so is a stream silent for longer than t.idle (a
// proxy or NAT may have dropped it without a word to either end), at once.
func (t *httpTransport) runGetStream(ctx context.Context, sid, version string) {
	headers := t.headerMap(sid, version)
	var gone atomic.Bool
	bo := &streamBackoff{stop: &gone}
	c := t.newStreamClient(t.rawURL, headers, bo)
	c.ReconnectNotify = func(err error, d time.Duration) {
		if errors.Is(err, bufio.ErrTooLong) {
			t.logger.Warn("server event stream sent an event over the size limit; reconnecting", "limit", t.max, "in", d)
			return
		}
		t.logger.Debug("server event stream failed; reconnecting", "err", t.netError(err), "in", d)
	}
	c.ResponseValidator = func(_ *r3sse.Client, resp *http.Response) error {
		if resp.StatusCode == http.StatusOK && mediaType(resp) == "text/event-stream" {
			return nil
		}
		snippet := readSnippet(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusMethodNotAllowed:
			t.logger.Debug("server offers no event stream for its own messages (GET answered 405)")
			gone.Store(true)
		case sessionGone(resp.StatusCode, snippet, sid != ""):
			t.logger.Debug("server event stream: the session is gone")
			gone.Store(true)
		case resp.StatusCode == http.StatusOK:
			t.logger.Debug("server answered GET with no event stream", "content_type", mediaType(resp))
			gone.Store(true)
			return errors.New("not an event stream")
		}
		return t.errorFor(resp.StatusCode, snippet)
	}
	var idle *time.Timer // nil when t.idle is 0
	handler := func(ev *r3sse.Event) {
		bo.Reset()
		if idle != nil {
			idle.Reset(t.idle)
		}
		t.deliver(string(ev.Event), ev.Data, false, t.recv, related{})
	}
	for {
		// Each subscription has its own context, which the idle timer
		// ends; the backoff follows it so that r3labs stops retrying.
		sctx, cancel := context.WithCancel(ctx)
		var silent atomic.Bool
		if t.idle > 0 {
			idle = time.AfterFunc(t.idle, func() {
				silent.Store(true)
				cancel()
			})
		}
		bo.ctx = sctx
		err := c.SubscribeWithContext(sctx, "", handler)
		if idle != nil {
			idle.Stop()
		}
		cancel()
		if ctx.Err() != nil || gone.Load() {
			return
		}
		if silent.Load() {
			t.logger.Debug("server event stream silent; opening it again", "after", t.idle)
			continue
		}
		if err != nil {
			t.logger.Debug("server event stream failed", "err", t.netError(err))
		}
		bo.ctx = ctx
		if !sleep(ctx, bo.NextBackOff()) {
			return
		}
	}
}

// close stops the GET stream, deletes the session and waits for what the
// transport started, all within ctx.
func (t *httpTransport) close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		select {
		case <-t.doneCh:
			return t.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.closed = true
	sid, version := t.sessionID, t.version
	t.get = nil
	t.mu.Unlock()

	t.endLife()
	if sid != "" {
		t.deleteSession(ctx, sid, version)
	}
	waited := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		t.closeErr = ctx.Err()
	}
	close(t.doneCh)
	return t.closeErr
}

// deleteSession ends the session on the server (spec: clients SHOULD; a 405
// means the server does not let them).
func (t *httpTransport) deleteSession(ctx context.Context, sid, version string) {
	req, err := t.newRequest(ctx, http.MethodDelete, t.rawURL, nil, sid, version)
	if err != nil {
		return
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		t.logger.Debug("deleting the session failed", "err", t.netError(err))
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299,
		resp.StatusCode == http.StatusMethodNotAllowed,
		resp.StatusCode == http.StatusNotFound:
	default:
		t.logger.Debug("deleting the session failed", "status", resp.StatusCode)
	}
}

func (t *httpTransport) done() <-chan struct{} { return t.doneCh }

// err is nil: only close ends an HTTP transport.
func (t *httpTransport) err() error { return nil }

// modernSender is implemented by the transport that sends the requests
// of a modern streamable-HTTP server.
type modernSender interface {
	// sendModern is sendForwarding with extra's headers on the POST.
	sendModern(ctx context.Context, m *jsonrpc.Message, client, extra http.Header) error
}

// setModernHeaders sets the request metadata headers of the modern era
// (streamable-http § Request Metadata) on the POST of m: Mcp-Method, and
// Mcp-Name for tools/call and prompts/get (params.name), resources/read
// (params.uri) and the tasks extension's tasks/get, tasks/update and
// tasks/cancel (params.taskId); then extra's (Mcp-Param-*). Other Mcp-*
// headers (a client's, forwarded) are removed.
func setModernHeaders(h http.Header, m *jsonrpc.Message, extra http.Header) {
	if m.Method == "" {
		return
	}
	// A client's forwarded headers never speak for the request: the
	// Mcp-* request metadata is ours alone.
	for k := range h {
		if strings.HasPrefix(k, "Mcp-") && k != headerProtocolVersion {
			delete(h, k)
		}
	}
	h.Set(headerMethod, m.Method)
	key := ""
	switch m.Method {
	case "tools/call", "prompts/get":
		key = "name"
	case "resources/read":
		key = "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		key = "taskId" // the tasks extension's routing header
	}
	if key != "" {
		if v, ok := rawjson.String(m.Params, key); ok {
			h.Set(headerName, encodeHeaderValue(v))
		}
	}
	for k, vs := range extra {
		h[k] = vs
	}
}

// modernError returns the JSON-RPC error of a modern server's 4xx answer
// to request id, or nil when its body holds none (a bare 4xx, from an
// intermediary perhaps). 401 and 403 are the server's authentication,
// never a JSON-RPC error.
func modernError(code int, body []byte, id jsonrpc.ID) *jsonrpc.Error {
	if code < 400 || code > 499 || code == http.StatusUnauthorized || code == http.StatusForbidden {
		return nil
	}
	m, err := jsonrpc.ParseOne(body)
	if err != nil || !m.IsResponse() || m.Error == nil {
		return nil
	}
	if m.ID.IsValid() && id.IsValid() && m.ID != id {
		return nil
	}
	return m.Error
}
