package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errTooLarge is wrapped by the error for a line or a message over
// maxMessage bytes.
var errTooLarge = errors.New("message too large")

// lineReader reads lines of any length up to max bytes. Unlike
// bufio.Scanner (64 KiB by default) it handles a 64 MiB tools/list line,
// and it reuses its buffers: a returned line is valid until the next call.
type lineReader struct {
	br   *bufio.Reader
	long []byte // a line longer than br's buffer, assembled
	max  int
}

func newLineReader(r io.Reader, size, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, size), max: max}
}

// reset makes the reader read r, keeping its buffers.
func (lr *lineReader) reset(r io.Reader) { lr.br.Reset(r) }

// next returns the next line without its LF or CRLF. A last line without
// its LF is dropped: the error is then io.EOF. A lone CR does not end a
// line (JSON-RPC over stdio and the MCP servers' event streams use LF).
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.br.ReadSlice('\n')
	if err == nil {
		return trimEOL(line), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	lr.long = append(lr.long[:0], line...)
	for {
		line, err = lr.br.ReadSlice('\n')
		if len(lr.long)+len(line) > lr.max {
			return nil, fmt.Errorf("a line longer than %d bytes: %w", lr.max, errTooLarge)
		}
		lr.long = append(lr.long, line...)
		switch {
		case err == nil:
			return trimEOL(lr.long), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// errNoResponse is returned when an event stream ends before the response.
var errNoResponse = errors.New("the event stream ended before the response")

var dataField = []byte("data")

// readSSEResponse reads a text/event-stream answer to the request with
// the given id: it joins each event's data lines (with "\n", into data,
// whose buffer it reuses) and returns the first event whose data is the
// response to that id, with its envelope. Priming events (empty data),
// notifications, server requests and other fields (id, event, retry,
// comments) are skipped; server requests are counted in requests.
func readSSEResponse(lr *lineReader, id int64, data []byte, requests *int) ([]byte, envelope, error) {
	data = data[:0]
	hasData := false
	for {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errNoResponse
			}
			return data, envelope{}, err
		}
		if len(line) == 0 { // the end of an event
			if hasData && len(data) > 0 {
				env, err := parseEnvelope(data)
				if err != nil {
					return data, env, fmt.Errorf("an event on the stream: %w", err)
				}
				if env.isResponse() {
					if got, ok := parseID(env.id); ok && got == id {
						return data, env, nil
					}
				} else if env.method != nil && env.id != nil && requests != nil {
					*requests++
				}
			}
			data, hasData = data[:0], false
			continue
		}
		value, ok := bytes.CutPrefix(line, dataField)
		if !ok || (len(value) > 0 && value[0] != ':') {
			continue // another field, or a comment
		}
		if len(value) > 0 {
			value = value[1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if len(data)+len(value)+1 > maxMessage {
			return data, envelope{}, fmt.Errorf("an event longer than %d bytes: %w", maxMessage, errTooLarge)
		}
		if hasData {
			data = append(data, '\n')
		}
		data = append(data, value...)
		hasData = true
	}
}
