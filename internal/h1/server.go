package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawio"
)

// Server serves HTTP/1.1 on a listener. A plain POST, the MCP endpoint's
// request, is read and answered on the connection's own goroutine; the
// first request of a connection that is anything else (another method,
// HTTP/1.0, Expect, Upgrade, a chunked or malformed request, a header
// that does not fit the read buffer) hands the connection, with every
// byte read from it, to net/http, which then serves it to its end.
//
// What the fast path leaves out of net/http's server is what it costs per
// request on a small call: the background read that watches every request
// for the client leaving (started here only once an answer streams, the
// one case the edge's handlers need it), the response's own chunking
// buffer and its header copies, deadlines reset for each request whose
// bytes are already in, and most of http.ReadRequest's allocations (its
// own parser, parseRequestInto, takes only requests that net/http reads the
// same way). It keeps what a server needs: the timeouts of HTTP
// (ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout), net/http's
// checks of the request (http.ReadRequest's and its server's Host and
// header checks; a request that fails any of them, or that parseRequestInto
// does not take, goes to net/http), a Date on every answer, the
// Content-Length or chunked framing net/http would choose, unread bodies
// drained up to 256 KiB or the connection closed, a handler's panic
// logged with the connection closed, and a graceful Shutdown.
//
// It serves a plain listener (mcpgw terminates no TLS itself: an ingress
// does). What its answers leave out: trailers, Hijack (a handler that
// needs the connection gets http.ErrNotSupported from
// http.ResponseController, as the edge's GET streams, which are net/http's
// anyway, allow for), and header changes after the first byte of the body
// is written (net/http takes them at WriteHeader; here they count until
// the header goes out).
type Server struct {
	// HTTP serves the connections handed over, and gives the fast path
	// its Handler, ErrorLog, MaxHeaderBytes and timeouts. Its ConnState,
	// BaseContext and ConnContext apply to the handed-over connections
	// only.
	HTTP *http.Server

	mu      sync.Mutex
	ln      net.Listener
	handoff *handoff
	conns   map[*serverConn]struct{}
	active  sync.WaitGroup // serving goroutines of the fast path
	closing atomic.Bool
}

// maxDrain bounds how much of a body its handler left unread is read past,
// before the answer or when the handler closes it, to keep the
// connection, as net/http does: from it on, the answer says Connection:
// close.
const maxDrain = 256 << 10

// Serve accepts connections on ln until Shutdown or Close, and returns
// http.ErrServerClosed then, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("h1: Serve called twice")
	}
	s.ln = ln
	s.handoff = &handoff{addr: ln.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	s.conns = map[*serverConn]struct{}{}
	s.mu.Unlock()
	if s.closing.Load() {
		ln.Close()
		return http.ErrServerClosed
	}

	go s.HTTP.Serve(s.handoff) // until Shutdown or Close closes handoff
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			// Out of descriptors and the like: wait, as net/http does
			// for the errors that say they are temporary.
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("h1: accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			s.handoff.close()
			return err
		}
		backoff = 0
		c := s.newConn(nc)
		if c == nil {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// Shutdown stops accepting, closes the idle connections, and waits for
// the ones answering a request to finish theirs, and for net/http's own,
// until ctx ends (then it returns ctx's error, and Close can cut them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true) // under mu: newConn's check and Add are one step
	ln, ho := s.ln, s.handoff
	s.mu.Unlock()
	var lnErr error
	if ln != nil {
		lnErr = ln.Close()
		if errors.Is(lnErr, net.ErrClosed) {
			lnErr = nil
		}
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- s.HTTP.Shutdown(ctx) }()
	if ho == nil {
		return errors.Join(lnErr, <-httpErr)
	}

	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// A connection that went idle after its last answer is closed
		// at the next tick; one that is answering finishes first.
		s.closeIdle()
		select {
		case <-done:
			return errors.Join(lnErr, <-httpErr)
		case <-ctx.Done():
			<-httpErr
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing.Store(true)
	ln := s.ln
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	var err error
	if ln != nil {
		if err = ln.Close(); errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	return errors.Join(err, s.HTTP.Close())
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle.Load() {
			c.nc.Close()
		}
	}
}

func (s *Server) logf(format string, args ...any) {
	if l := s.HTTP.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// newConn tracks a connection just accepted, or returns nil once the
// server is closing.
func (s *Server) newConn(nc net.Conn) *serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil
	}
	c := &serverConn{s: s, nc: nc, out: nc, remote: nc.RemoteAddr().String()}
	c.idle.Store(true)
	c.cr.nc, c.cr.in = nc, nc
	if fd := rawio.Conn(nc); fd != nil {
		c.fd, c.out, c.cr.in = fd, fd, fd
	}
	s.conns[c] = struct{}{}
	s.active.Add(1)
	return c
}

func (s *Server) forget(c *serverConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.active.Done()
}

// handoff is the listener net/http serves: the connections the fast path
// hands over.
type handoff struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.close()
	return nil
}

func (h *handoff) close() { h.once.Do(func() { close(h.done) }) }

func (h *handoff) Addr() net.Addr { return h.addr }

// give hands c to net/http, or closes it once net/http has stopped.
func (h *handoff) give(c net.Conn) {
	select {
	case h.ch <- c:
	case <-h.done:
		c.Close()
	}
}

// prefixConn is a connection handed over with the bytes the fast path had
// read from it: net/http reads those first.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		if c.prefix = c.prefix[n:]; len(c.prefix) == 0 {
			c.prefix = nil // a GET stream holds its connection for hours
		}
		return n, nil
	}
	return c.Conn.Read(b)
}

// connReader reads a connection for its bufio.Reader, with the byte a
// watch read, if it read one, first.
type connReader struct {
	nc       net.Conn
	in       io.Reader // nc, or the raw reads of its descriptor
	stashed  bool
	stash    byte
	watching chan struct{} // closed when the watch is over; nil when none
	aborting atomic.Bool
	gone     atomic.Bool // the watch found the client gone
}

func (r *connReader) Read(b []byte) (int, error) {
	if r.stashed && len(b) > 0 {
		b[0] = r.stash
		r.stashed = false
		return 1, nil
	}
	return r.in.Read(b)
}

// watch reads the connection from a goroutine of its own while an answer
// streams, so that the client leaving cancels the request (as net/http's
// background read does for every request). A byte read (the client's next
// request) is stashed for the next read.
func (r *connReader) watch(cancel context.CancelCauseFunc) {
	r.watching = make(chan struct{})
	go func() {
		defer close(r.watching)
		var b [1]byte
		n, err := r.nc.Read(b[:])
		if n == 1 {
			r.stash, r.stashed = b[0], true
			return
		}
		if err != nil && !r.aborting.Load() {
			r.gone.Store(true)
			cancel(errClientGone)
		}
	}()
}

// unwatch ends a watch, if one runs, and waits for its goroutine; the
// connection's read deadline is then set to rd again.
func (r *connReader) unwatch(rd time.Time) {
	if r.watching == nil {
		return
	}
	r.aborting.Store(true)
	r.nc.SetReadDeadline(aLongTimeAgo)
	<-r.watching
	r.nc.SetReadDeadline(rd)
	r.aborting.Store(false)
	r.watching = nil
}

var (
	aLongTimeAgo  = time.Unix(1, 0)
	errClientGone = errors.New("h1: the client closed the connection")
)

// serverConn is one connection on the fast path.
type serverConn struct {
	s      *Server
	nc     net.Conn
	out    io.Writer // nc, or fd
	fd     *rawio.FD // nc's descriptor, read and written raw; nil when it has none
	cr     connReader
	br     *bufio.Reader
	remote string
	ctx    context.Context // with net/http's server and local address values
	idle   atomic.Bool     // waiting for a request: Shutdown may close it
	rd     time.Time       // the read deadline set on nc
	served int             // requests answered
	tmpl   http.Request    // next parses into it; answer copies it, then zeroes it
}

// writev writes a and then b to the connection, in one system call where
// it can.
func (c *serverConn) writev(a, b []byte) error {
	if c.fd != nil {
		_, err := c.fd.Writev(a, b)
		return err
	}
	bufs := net.Buffers{a, b}
	_, err := bufs.WriteTo(c.nc)
	return err
}

// setReadDeadline sets nc's read deadline when it changes: a request
// whose bytes are all in costs no deadline call when no timeout is set.
func (c *serverConn) setReadDeadline(t time.Time) {
	if !t.Equal(c.rd) {
		c.rd = t
		c.nc.SetReadDeadline(t)
	}
}

func (c *serverConn) serve() {
	handed := false
	defer func() {
		if c.br != nil {
			c.br.Reset(nil)
			readers.Put(c.br)
		}
		if !handed {
			c.nc.Close()
		}
		c.s.forget(c)
	}()
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.ctx = context.WithValue(context.WithValue(context.Background(),
		http.ServerContextKey, c.s.HTTP), http.LocalAddrContextKey, c.nc.LocalAddr())
	for {
		req, raw, ok := c.next()
		if req == nil {
			if ok {
				c.handOver(raw)
				handed = true
			}
			return
		}
		c.served++
		if !c.answer(req) || c.s.closing.Load() {
			return
		}
	}
}

// next reads the next request of the fast path. It returns nil when there
// is none: with ok when the connection is to be handed over (raw then
// holds the bytes already read of it, consumed or not), without when it
// is to be closed.
func (c *serverConn) next() (req *http.Request, raw []byte, ok bool) {
	hs := c.s.HTTP
	c.idle.Store(true)
	switch d := idleTimeout(hs); {
	case c.served == 0 && hs.ReadHeaderTimeout > 0:
		// As net/http: a new connection's first header is timed from
		// the connection's start, so that one that never sends does
		// not hold its goroutine and buffer for ever. A kept-alive one
		// waits for its next request as long as the idle timeout says.
		c.setReadDeadline(time.Now().Add(hs.ReadHeaderTimeout))
	case d > 0:
		c.setReadDeadline(time.Now().Add(d))
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, nil, false
	}
	c.idle.Store(false)
	if c.s.closing.Load() {
		return nil, nil, false
	}
	if c.served > 0 {
		// Old clients end a POST's body with a line break that is not
		// the body's; net/http skips up to 4 bytes of it, and so must
		// this, which would otherwise hand the next request over with
		// it (see next's callers).
		b, _ := c.br.Peek(min(4, c.br.Buffered()))
		if k := numLeadingCRorLF(b); k > 0 {
			c.br.Discard(k)
			if _, err := c.br.Peek(1); err != nil {
				return nil, nil, false
			}
		}
	}
	var deadline time.Time
	if hs.ReadTimeout > 0 {
		deadline = time.Now().Add(hs.ReadTimeout)
	}
	// The header must be in the buffer before it is parsed: it is kept
	// unconsumed until the request is known to be the fast path's. What
	// is not a POST is handed over without waiting for the rest of it.
	if b := c.peek(); !bytes.HasPrefix(postLine, b[:min(len(b), len(postLine))]) {
		return nil, b, true
	}
	n := headerEnd(c.peek())
	if n < 0 {
		hd := deadline
		if d := hs.ReadHeaderTimeout; d > 0 {
			hd = time.Now().Add(d)
		}
		c.setReadDeadline(hd)
		var err error
		if n, err = peekHeader(c.br); err != nil {
			// A header cut short, or not in within its time: net/http
			// would answer neither.
			return nil, nil, false
		}
	}
	c.setReadDeadline(deadline)
	all := c.peek()
	if n < 0 {
		return nil, all, true
	}
	if max := hs.MaxHeaderBytes; max > 0 && c.br.Size() > max {
		return nil, all, true // a limit below the buffer: net/http enforces it
	}
	r := &c.tmpl // zero: answer clears it after each copy
	if !parseRequestInto(all[:n], r) {
		// Not the fast path's, or one net/http's parser or server would
		// reject: net/http answers it as it always has.
		return nil, all, true
	}
	c.br.Discard(n)
	return r, nil, false
}

func numLeadingCRorLF(b []byte) int {
	n := 0
	for _, c := range b {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

// peek returns the bytes buffered and not yet consumed.
func (c *serverConn) peek() []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return b
}

func idleTimeout(hs *http.Server) time.Duration {
	if hs.IdleTimeout != 0 {
		return hs.IdleTimeout
	}
	return hs.ReadTimeout
}

// peekHeader reads into br's buffer, consuming nothing, until it holds a
// whole header (see headerEnd), and returns the header's length: -1 when
// the buffer fills first.
func peekHeader(br *bufio.Reader) (int, error) {
	for {
		b, _ := br.Peek(br.Buffered())
		if n := headerEnd(b); n >= 0 || br.Buffered() == br.Size() {
			return n, nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return -1, err
		}
	}
}

// headerEnd returns the length of the request header at the start of b,
// its empty line included, or -1 when b holds no empty line. It ends where
// http.ReadRequest stops reading: at the first line that is empty but for
// its "\n" or "\r\n".
func headerEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

var postLine = []byte("POST ")

// handOver gives the connection to net/http with the bytes read of it.
func (c *serverConn) handOver(raw []byte) {
	// A byte a watch stashed is in raw by now: next peeked past it.
	c.s.handoff.give(&prefixConn{Conn: c.nc, prefix: bytes.Clone(raw)})
}

// answer serves r (next's template, copied here with the request's
// context) and reports whether the connection can carry another request.
func (c *serverConn) answer(r *http.Request) (keep bool) {
	hs := c.s.HTTP
	ctx, cancel := context.WithCancelCause(c.ctx)
	r = r.WithContext(ctx)
	c.tmpl = http.Request{} // holds nothing of r's past this call
	r.RemoteAddr = c.remote
	if hs.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(hs.WriteTimeout))
	}
	// One allocation for the writer and the request's body.
	w := &response{c: c, header: http.Header{}, cancel: cancel,
		closeAfter: r.Close || c.s.closing.Load()}
	b := &w.reqBody
	b.lengthBody = lengthBody{br: c.br, n: r.ContentLength}
	if r.ContentLength == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = b
	}
	defer func() {
		c.cr.unwatch(c.rd)
		cancel(context.Canceled)
		w.done.Store(true)
		if w.bw != nil {
			w.bw.Reset(nil)
			writers.Put(w.bw)
			w.bw = nil
		}
	}()
	if !c.serveHandler(w, r) {
		return false
	}
	if !w.finish() || w.closeAfter || c.cr.gone.Load() {
		return false
	}
	if b.n > 0 {
		return false // sendHeader could not read past it
	}
	if hs.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Time{})
	}
	return true
}

// serveHandler runs the handler, and reports false when it panicked.
func (c *serverConn) serveHandler(w *response, r *http.Request) (ok bool) {
	defer func() {
		if err := recover(); err != nil {
			if err != http.ErrAbortHandler {
				const size = 64 << 10
				buf := make([]byte, size)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("http: panic serving %v: %v\n%s", c.remote, err, buf)
			}
			ok = false
		}
	}()
	h := c.s.HTTP.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	h.ServeHTTP(w, r)
	return true
}
