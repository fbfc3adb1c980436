package h1

// The fast path's request body and http.ResponseWriter (see Server).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// requestBody is a fast-path request's body: the next n bytes of the
// connection, read as a client's answer of a known length is (lengthBody),
// with an error kept for later reads and a read after Close refused.
type requestBody struct {
	lengthBody
	err    error
	closed bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.lengthBody.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// discard reads the rest of the body, and reports whether all of it came.
func (b *requestBody) discard() bool {
	_, err := io.Copy(io.Discard, b)
	return err == nil && b.n == 0
}

// Close reads past the rest of a body shorter than maxDrain, as net/http's
// does, so that the connection can carry the next request.
func (b *requestBody) Close() error {
	if !b.closed && b.n > 0 && b.n < maxDrain && b.err == nil {
		b.discard()
	}
	b.closed = true
	return nil
}

// response is a fast-path request's http.ResponseWriter.
type response struct {
	c       *serverConn
	header  http.Header
	reqBody requestBody // the request's Body, unless it has none
	cancel  context.CancelCauseFunc
	bw      *bufio.Writer

	status      int
	wroteHeader bool  // WriteHeader called with a final status
	sent        bool  // the status line and header are in bw
	chunked     bool  // the body goes out in chunks
	declared    int64 // the handler's Content-Length, or -1
	written     int64 // body bytes written
	pending     []byte
	unbuffered  bool // chunked from the first write
	closeAfter  bool
	failed      bool        // a write to the connection failed
	done        atomic.Bool // the handler returned: bw is back in its pool (atomic: a misused writer is a goroutine of its own)
}

// errHandlerDone answers a write after the handler returned, which must
// not reach the write buffer: it went back to its pool.
var errHandlerDone = errors.New("h1: write after the handler returned")

// bufferLimit is how much of a body with no Content-Length of its
// handler's is held to give it one; beyond it, or on Flush, it is chunked.
const bufferLimit = 4 << 10

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.wroteHeader || w.done.Load() {
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An interim answer goes out at once, with the header so far.
		w.writeInterim(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	w.declared = -1
	if v := w.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseUint(v, 10, 63); err == nil {
			w.declared = int64(n)
		} else {
			// As net/http does: the answer goes out chunked.
			w.c.s.logf("http: invalid Content-Length of %q", v)
			w.header.Del("Content-Length")
			w.unbuffered = true
		}
	}
}

func (w *response) writeInterim(code int) {
	bw := w.writer()
	h := append(bw.AvailableBuffer(), statusLine(code)...)
	h = appendHeader(h, w.header)
	bw.Write(append(h, "\r\n"...))
	if bw.Flush() != nil {
		w.failed = true
	}
}

func (w *response) writer() *bufio.Writer {
	if w.bw == nil {
		w.bw = writers.Get().(*bufio.Writer)
		w.bw.Reset(w.c.out)
	}
	return w.bw
}

// bodyless reports whether the status has no body.
func bodyless(code int) bool {
	return code == http.StatusNoContent || code == http.StatusNotModified || (code >= 100 && code < 200)
}

func (w *response) Write(p []byte) (int, error) {
	if w.done.Load() {
		return 0, errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed || w.c.cr.gone.Load() {
		return 0, errClientGone
	}
	if len(p) == 0 {
		return 0, nil
	}
	if bodyless(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.sent {
		if w.declared >= 0 {
			head := w.sendHeader(false, p)
			if len(head)+len(p) > w.bw.Size() {
				// A large answer goes out with its header in one
				// system call, not copied into bw in part.
				if err := w.c.writev(head, p); err != nil {
					w.failed = true
					return 0, errClientGone
				}
				return len(p), nil
			}
			w.bw.Write(head)
		} else if !w.unbuffered && len(w.pending)+len(p) <= bufferLimit {
			w.pending = append(w.pending, p...)
			return len(p), nil
		} else {
			// The body's start, for a Content-Type to be sniffed from
			// as net/http would: its first 512 bytes.
			var start [512]byte
			first := append(start[:0], w.pending[:min(len(w.pending), len(start))]...)
			first = append(first, p[:min(len(p), len(start)-len(first))]...)
			w.sendPending(true, first)
		}
	}
	if w.chunked {
		w.writeChunk(p)
	} else if _, err := w.bw.Write(p); err != nil {
		w.failed = true
	}
	if w.failed {
		return 0, errClientGone
	}
	return len(p), nil
}

func (w *response) writeChunk(p []byte) {
	if len(p) == 0 {
		return
	}
	bw := w.bw
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
	bw.WriteString("\r\n")
	bw.Write(p)
	if _, err := bw.WriteString("\r\n"); err != nil {
		w.failed = true
	}
}

// sendHeader returns the status line and header, framing the body in
// chunks or by its length, in bw's free space: the caller writes it
// (bw.Write) or sends it with a large body in one system call (writev).
// first is the body's start, for a Content-Type the handler did not set.
func (w *response) sendHeader(chunked bool, first []byte) []byte {
	w.sent = true
	h := append(w.writer().AvailableBuffer(), statusLine(w.status)...)
	if v := w.header["Connection"]; len(v) > 0 && httpguts.HeaderValuesContainsToken(v, "close") {
		w.closeAfter = true
	}
	if w.c.s.closing.Load() {
		w.closeAfter = true
	}
	if b := &w.reqBody; b.n > 0 && !w.closeAfter && (b.closed || b.n >= maxDrain || !b.discard()) {
		w.closeAfter = true
	}
	switch {
	case bodyless(w.status):
	case chunked && w.declared < 0:
		w.chunked = true
		h = append(h, "Transfer-Encoding: chunked\r\n"...)
	default:
		n := w.declared
		if n < 0 {
			n = int64(len(w.pending))
		}
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, n, 10)
		h = append(h, "\r\n"...)
	}
	if _, ok := w.header["Content-Type"]; !ok && !bodyless(w.status) && len(first) > 0 {
		h = append(h, "Content-Type: "...)
		h = append(h, http.DetectContentType(first)...)
		h = append(h, "\r\n"...)
	}
	if _, ok := w.header["Date"]; !ok {
		h = append(h, "Date: "...)
		h = append(h, httpDate()...)
		h = append(h, "\r\n"...)
	}
	if w.closeAfter {
		h = append(h, "Connection: close\r\n"...)
	}
	h = appendHeader(h, w.header)
	return append(h, "\r\n"...)
}

// sendPending puts the header into bw with the body held so far, in a
// chunk when the body is chunked (see sendHeader). first is the body's
// start.
func (w *response) sendPending(chunked bool, first []byte) {
	w.bw.Write(w.sendHeader(chunked, first))
	if w.chunked {
		w.writeChunk(w.pending)
	} else if _, err := w.bw.Write(w.pending); err != nil {
		w.failed = true
	}
	w.pending = nil
}

// framing reports whether k is a field of the answer's framing, which the
// server writes itself.
func framing(k string) bool {
	switch k {
	case "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
		return true
	}
	return false
}

// newlineToSpace keeps a value's line breaks out of the header, as
// net/http's Header.Write does.
var newlineToSpace = strings.NewReplacer("\r", " ", "\n", " ")

// appendHeader appends h's fields but the framing ones to b.
func appendHeader(b []byte, h http.Header) []byte {
	for k, vv := range h {
		if framing(k) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n") {
				v = newlineToSpace.Replace(v)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, strings.TrimSpace(v)...)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// statusLine returns the status line of an answer with the code.
func statusLine(code int) string {
	if code < len(statusLines) && statusLines[code] != "" {
		return statusLines[code]
	}
	return newStatusLine(code)
}

// statusLines holds the status lines of the codes net/http has a text for.
var statusLines = func() (lines [600]string) {
	for code := range lines {
		if http.StatusText(code) != "" {
			lines[code] = newStatusLine(code)
		}
	}
	return lines
}()

func newStatusLine(code int) string {
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
}

// dates keeps the Date value of the current second.
var dates atomic.Pointer[dateValue]

type dateValue struct {
	sec int64
	s   string
}

func httpDate() string {
	now := time.Now()
	if d := dates.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &dateValue{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	dates.Store(d)
	return d.s
}

// Flush sends what the handler wrote; the answer is chunked from then on
// unless the handler gave its length. The first flush also starts
// watching the connection, for an answer that streams outlives what the
// client may wait for.
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush, reporting a write that failed (for
// http.ResponseController).
func (w *response) FlushError() error {
	if w.done.Load() {
		return errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed || w.c.cr.gone.Load() {
		return errClientGone
	}
	if !w.sent {
		w.sendPending(true, w.pending)
	}
	if err := w.bw.Flush(); err != nil {
		w.failed = true
		return err
	}
	// Watching needs the connection to itself: the body read and nothing
	// more buffered (a client does not send its next request before this
	// answer ends, but if it did, that request is not read early).
	if w.c.cr.watching == nil && w.reqBody.n == 0 && w.c.br.Buffered() == 0 {
		w.c.cr.watch(w.cancel)
	}
	return nil
}

// SetWriteDeadline sets the connection's write deadline (for
// http.ResponseController), as net/http's response does.
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// finish ends the answer after its handler returned, and reports whether
// the connection is still good for another request.
func (w *response) finish() bool {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed || w.c.cr.gone.Load() {
		return false
	}
	if !w.sent {
		w.sendPending(false, w.pending)
	}
	if w.chunked {
		w.bw.WriteString("0\r\n\r\n")
	}
	if w.declared >= 0 && w.written < w.declared && !bodyless(w.status) {
		// An answer cut short of its length ends its connection, or the
		// client would read the next answer as its rest.
		w.closeAfter = true
	}
	if err := w.bw.Flush(); err != nil {
		return false
	}
	return !w.failed
}
