package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

const (
	// protocolVersion is the MCP revision the recorder asks for; a server
	// that does not know it answers with its own, which is fine for a list.
	protocolVersion = "2025-11-25"
	// maxLine bounds one message a server writes.
	maxLine = 16 << 20
	// maxPages bounds the tools/list pages followed, against a server whose
	// cursor never ends.
	maxPages = 100
)

// session is the client side of one stdio MCP connection: requests are
// answered strictly in turn, as the recorder sends one at a time.
type session struct {
	w      io.Writer
	r      *bufio.Reader
	nextID int
	// skipped counts stdout lines that were not JSON-RPC messages.
	skipped int
}

func newSession(w io.Writer, r io.Reader) *session {
	return &session{w: w, r: bufio.NewReaderSize(r, 64<<10)}
}

// response is a JSON-RPC response, or a request or notification of the
// server's when Method is set.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// listTools initializes the session and returns the tools of every page
// of tools/list: the server's own bytes when there is one page, else the
// elements of each page in order, in one array.
func (s *session) listTools(ctx context.Context) (json.RawMessage, error) {
	init := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpgw-toolsearch-record","version":"1"}}`, protocolVersion)
	if _, err := s.call(ctx, "initialize", json.RawMessage(init)); err != nil {
		return nil, err
	}
	if err := s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return nil, err
	}
	var pages []json.RawMessage
	cursor := ""
	for range maxPages {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := s.call(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      json.RawMessage `json:"tools"`
			NextCursor string          `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		if len(page.Tools) == 0 || page.Tools[0] != '[' {
			return nil, errors.New("tools/list result has no tools array")
		}
		pages = append(pages, page.Tools)
		if page.NextCursor == "" {
			return joinArrays(pages)
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list: still a next page after %d", maxPages)
}

// joinArrays returns the one array of pages' elements.
func joinArrays(pages []json.RawMessage) (json.RawMessage, error) {
	if len(pages) == 1 {
		return pages[0], nil
	}
	var all []json.RawMessage
	for _, p := range pages {
		var els []json.RawMessage
		if err := json.Unmarshal(p, &els); err != nil {
			return nil, err
		}
		all = append(all, els...)
	}
	return json.Marshal(all)
}

// call sends a request and returns its result. Server requests that come
// before the answer are refused; notifications and lines that are not
// JSON-RPC are skipped.
func (s *session) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	s.nextID++
	id := strconv.Itoa(s.nextID)
	if err := s.send(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params}); err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := s.readLine()
		if err != nil {
			return nil, fmt.Errorf("waiting for the answer to %s: %w", method, err)
		}
		// Servers print banners and JSON logs on stdout too; a line
		// without "jsonrpc": "2.0" is not a message.
		var m response
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" {
			s.skipped++
			continue
		}
		switch {
		case m.Method != "" && m.ID != nil:
			if err := s.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "the recorder answers no requests"}}); err != nil {
				return nil, err
			}
		case m.Method != "":
			// A notification: logging, list changes.
		case m.ID == nil:
			return nil, fmt.Errorf("%s: answer without an id", method)
		case string(m.ID) != id:
			return nil, fmt.Errorf("%s: answer for id %s, want %s", method, m.ID, id)
		case m.Error != nil:
			return nil, fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
		case m.Result == nil || string(m.Result) == "null":
			return nil, fmt.Errorf("%s: answer without a result", method)
		default:
			return m.Result, nil
		}
	}
}

func (s *session) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

// readLine returns the next line without its newline, refusing one longer
// than maxLine.
func (s *session) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := s.r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}
