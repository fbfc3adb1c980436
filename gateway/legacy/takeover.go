package legacy

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// A GET stream lives as long as its session, mostly idle. Served by
// net/http, it holds the connection's goroutine, its 4 KiB read and write
// buffers, the response's 2 KiB chunking buffer, the request and echo's
// context: about two thirds of an idle session's memory. So a GET stream
// on HTTP/1.1 takes the connection over (Hijack) once its request is
// checked: the handler returns, net/http lets go of all that, and two
// small goroutines of ours write the stream (pump, through a connSink)
// and notice the client leaving (watch). The bytes on the wire are what
// net/http would have written, chunked, plus Connection: close, since
// the connection is not given back after the stream. HTTP/2, HTTP/1.0
// and writers that cannot be hijacked (tests' recorders) keep the
// response.

// sink is where pump writes a stream's bytes.
type sink interface {
	// write writes b (nil: only the headers) and flushes it, within the
	// write timeout. It reports whether that worked.
	write(b []byte) bool
	// end is called once, when pump is done writing.
	end()
}

// responseSink writes to the response of the request holding the stream.
type responseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newResponseSink(w http.ResponseWriter, timeout time.Duration) *responseSink {
	return &responseSink{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (s *responseSink) write(b []byte) bool {
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // unsupported in tests' recorders: ignored
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// end clears the deadline: a keep-alive connection must not carry it into
// its next request.
func (s *responseSink) end() { s.rc.SetWriteDeadline(time.Time{}) }

// connSink writes an HTTP/1.1 response, chunked, on a connection taken
// over from net/http.
type connSink struct {
	conn    net.Conn
	timeout time.Duration
	head    []byte // the status line and headers, until written
	broken  bool   // a write failed: no terminating chunk
	buf     []byte
}

func (s *connSink) write(b []byte) bool {
	out := append(s.buf[:0], s.head...)
	s.head = nil
	if len(b) > 0 {
		out = strconv.AppendInt(out, int64(len(b)), 16)
		out = append(out, "\r\n"...)
		out = append(out, b...)
		out = append(out, "\r\n"...)
	}
	if cap(out) <= 4<<10 {
		s.buf = out // keep a small buffer for the keep-alives
	}
	if len(out) == 0 {
		return true
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.conn.Write(out); err != nil {
		s.broken = true
		return false
	}
	return true
}

// end writes the last chunk of a stream that ended cleanly, so that the
// client sees its end, not a connection lost.
func (s *connSink) end() {
	if !s.broken && s.head == nil {
		s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
		s.conn.Write([]byte("0\r\n\r\n"))
	}
}

// sseHead returns the status line and headers of a GET stream's response:
// the ones startSSE sets, over any already set on w, and ours for a
// connection that ends with the stream.
func sseHead(w http.ResponseWriter) []byte {
	h := w.Header().Clone()
	for _, k := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Trailer"} {
		delete(h, k)
	}
	setSSEHeaders(h)
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	if _, ok := h["Date"]; !ok {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// serveStream writes st from cursor on as the answer to c's GET: on the
// connection taken over when it can be (and then returns at once), else on
// the response, returning when the stream is over.
func (h *Handler) serveStream(c echo.Context, s *session, st *stream, att *attachment, cursor uint64) {
	r, w := c.Request(), c.Response()
	// HTTP/1.1 only: an HTTP/1.0 client knows no chunked encoding.
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		head := sseHead(w)
		if conn, ok := h.takeOver(w); ok {
			h.pumpConn(conn, head, s, st, att, cursor)
			return
		}
	}
	startSSE(w)
	h.pump(r.Context(), newResponseSink(w, h.opts.WriteTimeout), s, st, att, cursor)
}

// takeOver hijacks w's connection and counts it in h.conns until pumpConn
// is done with it. It must run in a handler (guard holds h.conns, so the
// Add cannot race Close's Wait).
func (h *Handler) takeOver(w http.ResponseWriter) (net.Conn, bool) {
	// Bytes the client sent after its GET are not read: the connection
	// ends with the stream, and an HTTP/1.1 client does not pipeline
	// behind a response that has not ended.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	h.conns.Add(1)
	h.mu.Lock()
	h.taken[conn] = struct{}{}
	h.mu.Unlock()
	return conn, true
}

// pumpConn writes the stream on conn from a goroutine of its own, and
// watches conn from another: the client closing it ends the pump, as the
// request's context would have. Both are gone, and conn closed, when
// h.conns is told.
func (h *Handler) pumpConn(conn net.Conn, head []byte, s *session, st *stream, att *attachment, cursor uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		defer cancel()
		var buf [64]byte
		for {
			if _, err := conn.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	go func() {
		defer h.conns.Done()
		h.pump(ctx, &connSink{conn: conn, timeout: h.opts.WriteTimeout, head: head}, s, st, att, cursor)
		conn.Close()
		cancel()
		<-watched
		h.mu.Lock()
		delete(h.taken, conn)
		h.mu.Unlock()
	}()
}

// closeTaken closes the connections taken over, whose pumps then end: for
// a Close whose time ran out while they were still writing.
func (h *Handler) closeTaken() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for conn := range h.taken {
		conn.Close()
	}
}
