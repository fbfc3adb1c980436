package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	// openConcurrency bounds the sessions being opened, or closed, at once.
	openConcurrency = 64
	// closeTimeout bounds the DELETEs at the end of a run.
	closeTimeout = 5 * time.Second
	// loadBufSize is the size of the connection and line buffers of the
	// load sessions; idle sessions keep the smaller defaults.
	loadBufSize = 32 << 10
)

// runHTTP is http mode: open the sessions, load them, close them.
func runHTTP(ctx context.Context, c *config) (*report, error) {
	t, err := newTarget(ctx, c, c.sessions, loadBufSize)
	if err != nil {
		return nil, err
	}
	defer t.close()
	sessions, err := t.openSessions(ctx, c.sessions, nil)
	defer t.closeSessions(ctx, sessions)
	if err != nil {
		return nil, err
	}
	ws, err := newWatchers(c.watch)
	if err != nil {
		return nil, err
	}
	calls := make([]callFunc, len(sessions))
	for i, s := range sessions {
		calls[i] = s.caller(c.request, &c.check)
	}
	res := runLoad(ctx, c.plan(), calls, ws.start, ws.stop)
	rep := newLoadReport(modeHTTP, c.url, c, res)
	if t.initURL != t.url {
		rep.InitTarget = t.initURL
	}
	if n := skippedRequests(sessions); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d server-to-client requests on the response streams were not answered", n))
	}
	addWatched(rep, res, ws...)
	return rep, nil
}

// target is the endpoint of http and idle mode and the clients that load
// it.
type target struct {
	url string
	// initURL is where sessions are initialized: -init-url, else url.
	initURL string
	client  *http.Client // GET streams and DELETEs
	// posts carries the POSTs: round trips that follow no redirect.
	posts  *http.Transport
	header http.Header // -header
	buf    int         // line buffer size of a session
}

// newTarget checks that -url is on this machine and builds the client. It
// allows conns connections at once, each kept for reuse.
func newTarget(ctx context.Context, c *config, conns, bufSize int) (*target, error) {
	if err := checkLoopback(ctx, "-url", c.url, net.DefaultResolver.LookupIPAddr); err != nil {
		return nil, err
	}
	initURL := c.url
	if c.initURL != "" {
		if err := checkLoopback(ctx, "-init-url", c.initURL, net.DefaultResolver.LookupIPAddr); err != nil {
			return nil, err
		}
		initURL = c.initURL
	}
	tr := &http.Transport{
		DialContext:         dialLoopback,
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: conns + openConcurrency,
		MaxConnsPerHost:     0, // no limit: each idle GET holds one
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		Protocols:           new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(true) // no HTTP/2: each session its own connection
	if bufSize > 0 {
		tr.ReadBufferSize, tr.WriteBufferSize = bufSize, bufSize
	}
	return &target{
		url:     c.url,
		initURL: initURL,
		client: &http.Client{
			Transport: tr,
			// A redirect could leave this machine; the answer is an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		posts:  tr,
		header: c.header,
		buf:    max(bufSize, 4<<10),
	}, nil
}

// close closes the idle connections.
func (t *target) close() { t.posts.CloseIdleConnections() }

// checkLoopback refuses a URL (of the flag name) whose host is not a
// loopback address or does not resolve to loopback addresses only: the
// tool generates load, and only on this machine.
func checkLoopback(ctx context.Context, name, raw string, lookup func(context.Context, string) ([]net.IPAddr, error)) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s %s is not an http:// or https:// URL", name, raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("refusing %s %s: %s is not a loopback address, and mcpgw-bench only loads this machine", name, raw, host)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil {
		return fmt.Errorf("refusing %s %s: resolving %s: %w", name, raw, host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("refusing %s %s: %s has no address", name, raw, host)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return fmt.Errorf("refusing %s %s: %s resolves to %s, not a loopback address, and mcpgw-bench only loads this machine", name, raw, host, a.IP)
		}
	}
	return nil
}

var loopbackDialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// dialLoopback dials and then makes sure the peer is on this machine, what
// ever a name resolved to since checkLoopback.
func dialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := loopbackDialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		conn.Close()
		return nil, fmt.Errorf("refusing to connect to %s: not a loopback address", conn.RemoteAddr())
	}
	return conn, nil
}

// session is one MCP session of http or idle mode, with the buffers every
// request reuses. One goroutine uses it at a time.
type session struct {
	t      *target
	id     string      // Mcp-Session-Id; empty if the server set none
	header http.Header // every request's headers; read-only once open
	nextID int64
	body   []byte // the request being sent
	msg    []byte // the answer being read
	lines  *lineReader
	// requests counts server-to-client requests seen on response streams.
	requests int
}

// open runs the handshake: initialize, then notifications/initialized.
func (s *session) open(ctx context.Context) error {
	s.header = s.t.baseHeader()
	s.header.Set("MCP-Protocol-Version", protocolVersion)
	s.lines = newLineReader(nil, s.t.buf, maxMessage)
	init := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpgw-bench","version":"0.1.0"}}}`, protocolVersion)
	// The handshake goes to -init-url, the load to -url.
	resp, err := s.t.postTo(ctx, s.t.initURL, s.header.Clone(), init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	env, err := s.readAnswer(resp, 0)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	result, err := responseResult(env, 0)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(result, &r); err != nil || r.ProtocolVersion == "" {
		return errors.New("initialize: the result has no protocolVersion")
	}
	h := s.header.Clone()
	h.Set("MCP-Protocol-Version", r.ProtocolVersion)
	if sid != "" {
		h.Set("Mcp-Session-Id", sid)
	}
	s.id, s.header = sid, h

	resp, err = s.t.postTo(ctx, s.t.initURL, s.header, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: HTTP %s, want 202 Accepted", resp.Status)
	}
	return nil
}

// baseHeader returns the headers of every request before the handshake.
func (t *target) baseHeader() http.Header {
	h := t.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	return h
}

// post sends one POST with the given headers (which it keeps: the caller
// must not change them afterwards).
func (t *target) post(ctx context.Context, h http.Header, body []byte) (*http.Response, error) {
	return t.postTo(ctx, t.url, h, body)
}

// postTo is post to another URL of the target (-init-url).
func (t *target) postTo(ctx context.Context, to string, h http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	return t.posts.RoundTrip(req)
}

// caller returns the callFunc of the session for a load run.
func (s *session) caller(tmpl requestTemplate, chk *checker) callFunc {
	return func(ctx context.Context) (time.Duration, int, error) {
		s.nextID++
		id := s.nextID
		s.body = tmpl.build(s.body[:0], id)
		start := time.Now()
		resp, err := s.t.post(ctx, s.header, s.body)
		if err != nil {
			return 0, 0, err
		}
		env, err := s.readAnswer(resp, id)
		if err != nil {
			return 0, 0, err
		}
		return chk.measure(env, id, start)
	}
}

// readAnswer reads the response to request id from resp, as JSON or as an
// event stream, and closes resp's body after draining it, so that the
// connection is reused. The envelope points into s.msg.
func (s *session) readAnswer(resp *http.Response, id int64) (envelope, error) {
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return envelope{}, statusError(resp)
	}
	var err error
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		if s.msg, err = readBody(resp.Body, s.msg[:0], maxMessage); err != nil {
			return envelope{}, fmt.Errorf("reading the answer: %w", err)
		}
		return parseEnvelope(s.msg)
	case "text/event-stream":
		s.lines.reset(resp.Body)
		var env envelope
		s.msg, env, err = readSSEResponse(s.lines, id, s.msg[:0], &s.requests)
		s.lines.reset(nil) // drop the body
		return env, err
	default:
		return envelope{}, fmt.Errorf("answer of Content-Type %q", ct)
	}
}

// statusError describes an answer that is not 200, with the start of its
// body.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if msg := strings.TrimSpace(string(b)); msg != "" {
		return fmt.Errorf("HTTP %s: %s", resp.Status, msg)
	}
	return fmt.Errorf("HTTP %s", resp.Status)
}

// mediaType returns the media type of a Content-Type value, lowercased.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// readBody appends all of r to buf, up to max bytes.
func readBody(r io.Reader, buf []byte, max int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return buf, fmt.Errorf("an answer longer than %d bytes: %w", max, errTooLarge)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// drainClose reads what is left of body and closes it: an HTTP/1.1
// connection is reused only after its body was read to the end. An event
// stream ends when the server closes it after the response, as MCP says it
// should (basic/transports).
func drainClose(body io.ReadCloser) {
	io.Copy(io.Discard, body)
	body.Close()
}

// delete ends the session (DELETE with its Mcp-Session-Id); the answer is
// ignored.
func (s *session) delete(ctx context.Context) {
	if s.id == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.t.url, nil)
	if err != nil {
		return
	}
	req.Header = s.header.Clone()
	req.Header.Del("Content-Type")
	if resp, err := s.t.client.Do(req); err == nil {
		drainClose(resp.Body)
	}
}

// openSessions opens n sessions, openConcurrency at a time, and runs then
// (if not nil) on each once open. On the first failure it stops opening
// and returns the error with the sessions opened so far, which the caller
// closes as usual.
func (t *target) openSessions(ctx context.Context, n int, then func(*session) error) ([]*session, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := make([]*session, n)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, openConcurrency)
	for i := range all {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s := &session{t: t}
			err := s.open(ctx)
			if err == nil && then != nil {
				err = then(s)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil || s.id != "" { // a session the server knows is closed too
				all[i] = s
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("opening session %d of %d: %w", i+1, n, err)
				cancel()
			}
		})
	}
	wg.Wait()
	var opened []*session
	for _, s := range all {
		if s != nil {
			opened = append(opened, s)
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return opened, firstErr
}

// closeSessions DELETEs every session, openConcurrency at a time, within
// closeTimeout even when ctx is done, and then closes the idle connections.
func (t *target) closeSessions(ctx context.Context, sessions []*session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	sem := make(chan struct{}, openConcurrency)
	var wg sync.WaitGroup
	for _, s := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.delete(ctx)
		})
	}
	wg.Wait()
	t.close()
}

// skippedRequests sums the server-to-client requests the sessions skipped.
func skippedRequests(sessions []*session) int {
	n := 0
	for _, s := range sessions {
		n += s.requests
	}
	return n
}
