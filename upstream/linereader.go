package upstream

import (
	"bytes"
	"errors"
	"io"
	"math"
)

// errLineTooLong is returned by lineReader.readLine for a line longer than
// the reader's cap.
var errLineTooLong = errors.New("line too long")

// lineReaderInitialSize is the buffer a lineReader starts with, and goes back
// to after a line that grew it past lineReaderKeptSize, so that one big
// message does not pin a buffer the size of the cap for the life of the
// connection.
const lineReaderInitialSize = 4 << 10

// lineReaderKeptSize is the largest buffer a lineReader keeps after the
// line it grew for: a server that answers with 64 KiB results would
// otherwise regrow it (4, 8, ... 128 KiB, each copied) for every answer.
// One per stdio server.
const lineReaderKeptSize = 256 << 10

// lineReader reads newline-terminated lines of at most max bytes. Unlike
// bufio.Scanner (64 KiB by default) its cap is the upstream message cap, and
// unlike bufio.Reader.ReadBytes it never holds more than max+2 bytes (a line
// of max bytes and its "\r\n") however long the line the peer sends.
//
// A line ends at "\n" or at the end of the input; one "\r" before the end is
// dropped, so CRLF input reads like LF input. It is not safe for concurrent
// use.
type lineReader struct {
	r   io.Reader
	max int // longest line returned, without its terminator

	buf        []byte // buf[start:end] is read but not yet returned
	start, end int
	err        error // sticky error of r, returned once the buffer is drained
	skip       bool  // discarding the rest of a line that was too long
}

// newLineReader returns a lineReader of r whose lines are at most max bytes.
// A negative max is taken as 0.
func newLineReader(r io.Reader, max int64) *lineReader {
	if max < 0 {
		max = 0
	}
	if max > math.MaxInt32 {
		max = math.MaxInt32 // far above any sane cap; keeps max+2 from overflowing
	}
	return &lineReader{r: r, max: int(max)}
}

// readLine returns the next line without its terminator. The slice is valid
// until the next call. At the end of the input it returns io.EOF (or the
// reader's error).
//
// A line longer than max is returned cut to its first max bytes together
// with errLineTooLong; the rest of that line is skipped, so a caller that
// tolerates long lines (stderr) can keep reading while one that does not
// (stdout) stops.
func (lr *lineReader) readLine() ([]byte, error) {
	if lr.skip {
		if err := lr.skipLine(); err != nil {
			return nil, err
		}
	}
	lr.shrink()
	scanned := 0 // bytes of buf[start:end] known to hold no '\n'
	for {
		if i := bytes.IndexByte(lr.buf[lr.start+scanned:lr.end], '\n'); i >= 0 {
			line := lr.buf[lr.start : lr.start+scanned+i]
			lr.start += scanned + i + 1
			return lr.cut(dropCR(line))
		}
		scanned = lr.end - lr.start
		if lr.err != nil {
			if scanned == 0 {
				return nil, lr.err
			}
			line := lr.buf[lr.start:lr.end]
			lr.start = lr.end
			return lr.cut(dropCR(line))
		}
		// Too long already: even a "\r\n" coming next leaves more than max.
		if n := lr.end - lr.start; n > lr.max+1 || (n == lr.max+1 && lr.buf[lr.end-1] != '\r') {
			line := lr.buf[lr.start : lr.start+lr.max]
			lr.start = lr.end
			lr.skip = true
			return line, errLineTooLong
		}
		lr.fill()
	}
}

// cut checks a complete line against the cap.
func (lr *lineReader) cut(line []byte) ([]byte, error) {
	if len(line) > lr.max {
		return line[:lr.max], errLineTooLong
	}
	return line, nil
}

// skipLine discards input up to and including the next '\n'.
func (lr *lineReader) skipLine() error {
	for {
		if i := bytes.IndexByte(lr.buf[lr.start:lr.end], '\n'); i >= 0 {
			lr.start += i + 1
			lr.skip = false
			return nil
		}
		lr.start, lr.end = 0, 0
		if lr.err != nil {
			return lr.err
		}
		lr.fill()
	}
}

// fill reads once into the free end of the buffer, first moving unread
// bytes to the front and growing the buffer (up to max+2) when it is full.
func (lr *lineReader) fill() {
	if lr.start > 0 {
		lr.end = copy(lr.buf, lr.buf[lr.start:lr.end])
		lr.start = 0
	}
	if lr.end == len(lr.buf) {
		limit := lr.max + 2
		size := min(max(2*len(lr.buf), lineReaderInitialSize), limit)
		if size <= len(lr.buf) {
			// Cannot happen: readLine stops a line before it fills max+2.
			lr.err = errLineTooLong
			return
		}
		buf := make([]byte, size)
		copy(buf, lr.buf[:lr.end])
		lr.buf = buf
	}
	for range 100 {
		n, err := lr.r.Read(lr.buf[lr.end:])
		lr.end += n
		if err != nil {
			lr.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	lr.err = io.ErrNoProgress
}

// shrink drops a buffer grown past lineReaderKeptSize for a large line
// once what is left of it fits in a small one.
func (lr *lineReader) shrink() {
	if len(lr.buf) <= lineReaderKeptSize || lr.end-lr.start > lineReaderInitialSize/2 {
		return
	}
	buf := make([]byte, min(lineReaderInitialSize, lr.max+2))
	lr.end = copy(buf, lr.buf[lr.start:lr.end])
	lr.start = 0
	lr.buf = buf
}

func dropCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
