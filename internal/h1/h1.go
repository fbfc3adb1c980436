// Package h1 is lean HTTP/1.1 on both of mcpgw's sides: a client
// transport for its calls to plain-HTTP upstream servers (Transport), and
// a fast path for the plain POSTs its MCP endpoint serves (Server, in
// server.go), each handing what it does not do to net/http.
//
// It exists because net/http's Transport hands every request between three
// goroutines: the caller's, the connection's writer and its reader. On a
// relayed tools/call that is most of what mcpgw adds in front of an HTTP
// upstream (issue 10's profile). Here the caller's goroutine writes the
// request and reads the answer itself, on a pooled keep-alive connection;
// its own parser reads the common responses (parseResponse, held to
// net/http's by a fuzz test), and net/http's (http.ReadResponse) every
// other.
//
// Transport is an http.RoundTripper: an http.Client over it still follows
// redirects. What it does not do itself it hands to its Fallback, whole:
// https (TLS, HTTP/2), requests that go through a proxy, bodies of unknown
// length and Expect: 100-continue. A request may belong to a Group
// (group.go), which ends it, whichever way it went, when the group is
// closed: an upstream client's requests end with the client.
package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpgw/mcpgw/internal/rawio"
)

// Defaults of a Transport's zero settings.
const (
	DefaultMaxIdlePerHost = 64
	DefaultIdleTimeout    = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a response's status line and header,
	// as net/http's Transport does by default.
	DefaultMaxHeaderBytes = 1 << 20
)

// Transport is an HTTP/1.1 client transport for http:// URLs. Its zero
// value is not usable: set Fallback. A Transport must not be copied after
// first use.
type Transport struct {
	// Fallback carries the requests this transport does not (see the
	// package comment). Its Proxy decides which requests are proxied.
	Fallback *http.Transport
	// DialContext dials new connections; nil means 30 s to connect and
	// 30 s TCP keep-alives, as net/http's default transport.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost is how many idle connections are kept per host.
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection is kept.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a response's header.
	MaxHeaderBytes int

	proxied  sync.Map     // host → bool: whether Fallback.Proxy proxies it
	nproxied atomic.Int32 // answers kept in proxied

	mu    sync.Mutex
	idle  map[string][]*conn // by host:port, most recently used last
	sweep *time.Timer        // closes expired idle connections; nil when none wait
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req and returns the response, whose body the caller must
// close. The connection goes back to the pool once the body has been read
// to its end; a body closed before that closes the connection.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback(req)
	}
	if err := checkHeader(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	g := groupOf(ctx)
	addr := hostPort(req.URL)
	resp, c, err := t.try(ctx, g, req, addr, false)
	var werr *writeError
	if (errors.Is(err, errNoAnswer) || errors.As(err, &werr)) && c.reused && idempotent(req) {
		// A server that closed an idle connection just as it was taken
		// (after alive looked): the request goes again on a new one, as
		// net/http does, when it has no body and may be repeated.
		resp, c, err = t.try(ctx, g, req, addr, true)
	}
	if err != nil {
		closeBody(req)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, groupErr(g, err)
	}
	reuse := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		c.done(t, reuse)
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, c: c, t: t, reuse: reuse, ctx: ctx}
	return resp, nil
}

// try makes one exchange of req on a connection to addr (a new one when
// fresh), which it returns with the response, or closed with the error.
// The exchange belongs to g, when not nil.
func (t *Transport) try(ctx context.Context, g *Group, req *http.Request, addr string, fresh bool) (*http.Response, *conn, error) {
	c, err := t.conn(ctx, g, addr, fresh)
	if err != nil {
		return nil, nil, err
	}
	if g != nil && !g.join(c) {
		c.close()
		return nil, nil, ErrGroupClosed
	}
	// Cancellation cuts the connection's reads and writes short; a
	// connection it cut is never reused.
	c.stop = context.AfterFunc(ctx, c.cutFn)
	resp, err := c.exchange(req, t.maxHeaderBytes())
	if err != nil {
		c.stop()
		c.leave()
		c.close()
		return nil, c, err
	}
	return resp, c, nil
}

// idempotent reports whether req may be sent again: a method without
// side effects, and no body.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
		return req.Body == nil || req.Body == http.NoBody
	}
	return false
}

// IdleConns returns how many idle connections to addr ("host:port") the
// pool holds, for a caller that has to wait until a connection is back.
func (t *Transport) IdleConns(addr string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[addr])
}

// CloseIdleConnections closes the idle connections, this transport's and
// the fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
	t.Fallback.CloseIdleConnections()
}

// handles reports whether req is this transport's to carry.
func (t *Transport) handles(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0 {
		return false // unknown length: chunked
	}
	if _, ok := req.Header["Expect"]; ok {
		return false
	}
	return !t.isProxied(req)
}

// isProxied reports whether the fallback would send req through a proxy.
// The answer depends on the URL's scheme and host alone (the proxy
// environment is read once per process), so it is kept per host.
func (t *Transport) isProxied(req *http.Request) bool {
	if t.Fallback.Proxy == nil {
		return false
	}
	key := req.URL.Host
	if v, ok := t.proxied.Load(key); ok {
		return v.(bool)
	}
	// Only the scheme and host matter; a request without the rest keeps
	// the path and query (which may carry secrets) out of the proxy func.
	probe := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: req.URL.Host}, Header: http.Header{}}
	u, err := t.Fallback.Proxy(probe)
	proxied := err != nil || u != nil   // an error: the fallback reports it
	if t.nproxied.Load() < maxProxied { // racing stores may pass it by a few
		t.nproxied.Add(1)
		t.proxied.Store(key, proxied)
	}
	return proxied
}

// maxProxied bounds the hosts whose answer isProxied keeps.
const maxProxied = 1024

func (t *Transport) maxHeaderBytes() int {
	if t.MaxHeaderBytes > 0 {
		return t.MaxHeaderBytes
	}
	return DefaultMaxHeaderBytes
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return DefaultIdleTimeout
}

// conn returns an idle connection to addr that is still open, or dials one
// (always, when fresh), a dial that g's Close cancels.
func (t *Transport) conn(ctx context.Context, g *Group, addr string, fresh bool) (*conn, error) {
	for !fresh {
		c := t.takeIdle(addr)
		if c == nil {
			break
		}
		if c.alive() {
			c.reused = true
			c.br = getReader(&c.lr)
			return c, nil
		}
		c.nc.Close()
	}
	dial := t.DialContext
	if dial == nil {
		dial = defaultDialer.DialContext
	}
	dctx := ctx
	if g != nil {
		hctx, release, ok := g.hold(ctx)
		if !ok {
			return nil, ErrGroupClosed
		}
		defer release()
		dctx = hctx
	}
	nc, err := dial(dctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, groupErr(g, err)
	}
	c := newConn(nc, addr)
	c.br = getReader(&c.lr)
	return c, nil
}

// Buffers are pooled: a connection holds a reader while it carries a
// request, and a writer only while it writes one, so that idle
// connections and ones waiting for an answer hold none.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

var defaultDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// takeIdle takes the most recently used idle connection to addr that has
// not expired, closing the expired ones.
func (t *Transport) takeIdle(addr string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.idle[addr]
	for len(cs) > 0 {
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		cs = cs[:len(cs)-1]
		if time.Since(c.idleAt) < t.idleTimeout() {
			t.idle[addr] = cs
			return c
		}
		c.nc.Close()
	}
	delete(t.idle, addr)
	return nil
}

// putIdle keeps c for the next request to its host, or closes it when the
// host has enough.
func (t *Transport) putIdle(c *conn) {
	max := t.MaxIdlePerHost
	if max <= 0 {
		max = DefaultMaxIdlePerHost
	}
	c.idleAt = time.Now()
	// done checked that nothing is buffered.
	c.br.Reset(nil)
	readers.Put(c.br)
	c.br = nil
	t.mu.Lock()
	if len(t.idle[c.addr]) >= max {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	if t.idle == nil {
		t.idle = make(map[string][]*conn)
	}
	t.idle[c.addr] = append(t.idle[c.addr], c)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout(), t.closeExpired)
	}
	t.mu.Unlock()
}

// closeExpired closes the idle connections that have expired, and comes
// back while any are left.
func (t *Transport) closeExpired() {
	var expired []*conn
	t.mu.Lock()
	for addr, cs := range t.idle {
		kept := cs[:0]
		for _, c := range cs {
			if time.Since(c.idleAt) >= t.idleTimeout() {
				expired = append(expired, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
	}
	t.sweep = nil
	if len(t.idle) > 0 {
		t.sweep = time.AfterFunc(t.idleTimeout()/4, t.closeExpired)
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.nc.Close()
	}
}

// hostPort is the address to dial for u: its host, with port 80 when it
// names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// conn is one connection, used by one request at a time.
type conn struct {
	nc     net.Conn
	fd     *rawio.FD // nc's descriptor; nil when it has none
	lr     limitedConn
	w      io.Writer     // what requests are written to: fd, or nc without one
	br     *bufio.Reader // nil while idle
	addr   string
	idleAt time.Time
	stop   func() bool // ends the current request's AfterFunc
	cutFn  func()      // cut, made once: a method value per request allocates
	group  *Group      // the current request's, if it has one
	reused bool        // taken from the pool for the current request
	wasCut atomic.Bool
}

// cut makes the connection's pending and next reads and writes fail at
// once: its request's context or group ended.
func (c *conn) cut() {
	c.wasCut.Store(true)
	c.nc.SetDeadline(time.Unix(1, 0))
}

func (c *conn) close() { c.nc.Close() }

// detach stops the current request's AfterFunc, for good: done then
// finds it stopped.
func (c *conn) detach() bool {
	if !c.stop() {
		return false
	}
	c.stop = detached
	return true
}

func detached() bool { return true }

// newConn returns the connection nc to addr, read and written with raw
// system calls (package rawio) when nc has a descriptor, and through nc's
// own methods when it has none (one a DialContext made). Why raw, with
// the numbers on both kinds of upstream: rawio's package comment. A
// socket here is never blocking, so a raw call holds its thread no longer
// than the kernel's work.
func newConn(nc net.Conn, addr string) *conn {
	c := &conn{nc: nc, addr: addr, fd: rawio.Conn(nc)}
	c.cutFn = c.cut
	c.lr.r, c.w = nc, nc
	if c.fd != nil {
		c.lr.r, c.w = c.fd, c.fd
	}
	return c
}

// alive reports whether an idle connection can carry a request: the server
// has neither closed it nor sent anything on it (an idle connection has
// nothing to read; its buffer was empty when it went idle). It peeks
// without waiting, one raw system call, so that a server's idle timeout
// does not fail the next request. A connection without a descriptor (one
// a DialContext made) is taken to be alive: a request that finds it closed
// is sent again when it may be (see RoundTrip).
func (c *conn) alive() bool { return c.fd == nil || c.fd.Idle() }

// done ends the current request on c: c goes back to the pool when reuse
// holds and no cancellation cut it, else it is closed.
func (c *conn) done(t *Transport, reuse bool) {
	c.leave() // before looking at wasCut: a group cuts only under its lock
	stopped := c.stop()
	c.stop = nil
	if !reuse || !stopped || c.wasCut.Load() || c.br.Buffered() > 0 {
		c.close()
		return
	}
	t.putIdle(c)
}

// exchange writes req and reads the response's status line and header.
func (c *conn) exchange(req *http.Request, maxHeader int) (*http.Response, error) {
	if err := c.writeRequest(req); err != nil {
		return nil, &writeError{err}
	}
	for {
		limit := int64(maxHeader) + int64(c.br.Size())
		c.lr.limit = limit
		nothing := c.br.Buffered() == 0
		if resp, ok := c.fastResponse(req); ok {
			c.lr.limit = -1
			return resp, nil
		}
		resp, err := http.ReadResponse(c.br, req)
		nothing = nothing && c.lr.limit == limit
		c.lr.limit = -1
		if err != nil {
			if errors.Is(err, errHeaderTooLarge) {
				return nil, fmt.Errorf("server's response header is larger than %d bytes", maxHeader)
			}
			if nothing && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
				return nil, errNoAnswer
			}
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return nil, errors.New("server switched protocols, which was not asked for")
		}
		// Other 1xx answers are informational; the response follows.
		if resp.StatusCode >= 100 && resp.StatusCode <= 199 {
			continue
		}
		return resp, nil
	}
}

// fastResponse reads the response to req with parseResponse when it is
// one that parseResponse takes, and reports false, having consumed
// nothing, otherwise: http.ReadResponse then reads it from its start,
// and meets any error the reading met.
func (c *conn) fastResponse(req *http.Request) (*http.Response, bool) {
	n, err := peekHeader(c.br)
	if err != nil || n < 0 {
		return nil, false // cut short, or a header longer than the buffer
	}
	b, _ := c.br.Peek(n)
	resp, chunked, ok := parseResponse(b, req)
	if !ok {
		return nil, false
	}
	c.br.Discard(n)
	resp.Body = fastBody(c.br, resp, chunked)
	return resp, true
}

// writeRequest writes req's request line, header and body, and flushes.
func (c *conn) writeRequest(req *http.Request) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("writing the request: %w", err)
		}
	}()
	defer closeBody(req)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if host == "" || !httpguts.ValidHostHeader(host) {
		return fmt.Errorf("invalid host %q", host)
	}
	w := writers.Get().(*bufio.Writer)
	w.Reset(c.w)
	defer func() {
		w.Reset(nil)
		writers.Put(w)
	}()
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		w.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		var num [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(num[:0], req.ContentLength, 10))
		w.WriteString("\r\n")
	}
	if req.Close {
		w.WriteString("Connection: close\r\n")
	}
	for k, vs := range req.Header {
		if skipHeader(k) {
			continue
		}
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(textproto.TrimString(v))
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	if hasBody {
		// Not through a LimitReader: the body's WriteTo (a bytes.Reader's,
		// through NopCloser) then writes it in one piece, where io.Copy
		// would take a 32 KiB buffer per request.
		n, err := io.Copy(w, req.Body)
		if err != nil {
			return err
		}
		if n != req.ContentLength {
			return fmt.Errorf("request body has %d bytes, its ContentLength says %d", n, req.ContentLength)
		}
	}
	return w.Flush()
}

// skipHeader reports whether header k is one writeRequest writes itself.
func skipHeader(k string) bool {
	switch k {
	case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
		return true
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// limitedConn reads from the connection (r: its raw descriptor, or its
// net.Conn without one), at most limit bytes while limit is not
// negative.
type limitedConn struct {
	r     io.Reader
	limit int64
}

var errHeaderTooLarge = errors.New("response header too large")

// writeError is the error of an exchange whose request could not be
// written.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// errNoAnswer is the error of an exchange whose connection ended before
// a byte of the answer came.
var errNoAnswer = fmt.Errorf("server closed the connection before answering: %w", io.ErrUnexpectedEOF)

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.limit < 0 {
		return l.r.Read(p)
	}
	if l.limit == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.limit {
		p = p[:l.limit]
	}
	n, err := l.r.Read(p)
	l.limit -= int64(n)
	return n, err
}

// body is a response body on a connection of the pool. Read and Close
// may race (a caller closing a stream another goroutine reads): the first
// to end the body decides what becomes of the connection.
type body struct {
	rc    io.ReadCloser
	c     *conn
	t     *Transport
	ctx   context.Context
	reuse bool
	ended atomic.Bool
	eof   atomic.Bool // ended at its end: later reads get io.EOF again
}

func (b *body) Read(p []byte) (int, error) {
	if b.ended.Load() {
		if b.eof.Load() {
			return 0, io.EOF
		}
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		if b.ended.CompareAndSwap(false, true) {
			b.eof.Store(true)
			b.rc.Close()
			b.c.done(b.t, b.reuse)
		}
	case err != nil:
		b.abandon()
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		} else {
			err = groupErr(groupOf(b.ctx), err)
		}
	}
	return n, err
}

var errBodyClosed = errors.New("h1: read on closed response body")

// Ended reports whether the body is over: read to its end (its
// connection is back in the pool already) or closed. A caller that would
// drain a body to reuse its connection has nothing to do then.
func (b *body) Ended() bool { return b.ended.Load() }

// Detach lets the body outlive its request's context: the context's end
// no longer cuts the connection, so that a caller done with the answer
// can read what is left of the body (the last chunk of an event stream,
// which often comes just after the event the caller wanted) and the
// connection go back to the pool. The request's group still ends it,
// and the caller bounds that read itself. It reports false when the
// context has ended already (the connection is cut; it closes when the
// body ends). It must not run while a Read does.
func (b *body) Detach() bool {
	if b.ended.Load() {
		return true
	}
	return b.c.detach()
}

// Close ends the body; unread, it closes the connection.
func (b *body) Close() error {
	b.abandon()
	return nil
}

// abandon ends a body that was not read to its end: the connection is
// closed first, so that net/http's body, which drains what is left on
// Close, does not wait.
func (b *body) abandon() {
	if b.ended.CompareAndSwap(false, true) {
		b.c.nc.Close()
		b.rc.Close()
		b.c.done(b.t, false)
	}
}

// checkHeader checks h's names and values as net/http's Transport does
// (httpguts), naming the header without quoting its value (which may be a
// secret).
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("invalid header field value for %q", k)
			}
		}
	}
	return nil
}
