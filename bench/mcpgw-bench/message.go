package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// requestTemplate is a JSON-RPC request without its id. The tool builds it
// once and splices each request's id in, so that sending costs no encoding.
type requestTemplate struct {
	prefix, suffix []byte
}

func newTemplate(method string, params json.RawMessage) requestTemplate {
	m, _ := json.Marshal(method) // cannot fail for a string
	suffix := append([]byte(`,"method":`), m...)
	suffix = append(suffix, `,"params":`...)
	suffix = append(suffix, params...)
	suffix = append(suffix, '}')
	return requestTemplate{prefix: []byte(`{"jsonrpc":"2.0","id":`), suffix: suffix}
}

// build appends the request with the given id to dst.
func (t requestTemplate) build(dst []byte, id int64) []byte {
	dst = append(dst, t.prefix...)
	dst = strconv.AppendInt(dst, id, 10)
	return append(dst, t.suffix...)
}

// envelope holds the top-level members of a JSON-RPC message that the tool
// reads, as sub-slices of the message (the raw JSON values). A nil member
// is absent.
type envelope struct {
	id, method, result, err []byte
}

// isResponse reports whether the message is a response (no method).
func (e envelope) isResponse() bool { return e.method == nil && e.id != nil }

var errMalformed = errors.New("malformed JSON")

// parseEnvelope finds the id, method, result and error members of the JSON
// object b without decoding or copying anything (see eachMember).
func parseEnvelope(b []byte) (envelope, error) {
	var env envelope
	err := eachMember(b, func(key, value []byte) {
		switch string(key) { // no allocation: the compiler compares in place
		case "id":
			env.id = value
		case "method":
			env.method = value
		case "result":
			env.result = value
		case "error":
			env.err = value
		}
	})
	return env, err
}

// eachMember calls fn with the key (raw, without its quotes) and the raw
// value of each member of the JSON object b, in order. It walks b without
// decoding or copying it, skipping strings with bytes.IndexByte, so that a
// large value costs little. It checks the structure it walks (quotes,
// brackets, separators) but does not validate the values it skips. A key
// spelled with escapes is not unescaped: callers look for plain keys.
func eachMember(b []byte, fn func(key, value []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errMalformed
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return checkTrailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errMalformed
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errMalformed
		}
		start := skipSpace(b, i+1)
		if end, err = skipValue(b, start); err != nil {
			return err
		}
		fn(key, b[start:end])
		if i, err = nextItem(b, end, '}'); i < 0 || err != nil {
			return err
		}
	}
}

// eachElement calls fn with each raw element of the JSON array b (see
// eachMember).
func eachElement(b []byte, fn func(value []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errMalformed
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return checkTrailing(b, i+1)
	}
	for {
		end, err := skipValue(b, i)
		if err != nil {
			return err
		}
		fn(b[i:end])
		if i, err = nextItem(b, end, ']'); i < 0 || err != nil {
			return err
		}
	}
}

// nextItem moves past the separator after an item that ends at b[i]: it
// returns the start of the next item, or -1 at the closer (after checking
// that nothing follows it).
func nextItem(b []byte, i int, closer byte) (int, error) {
	i = skipSpace(b, i)
	switch {
	case i >= len(b):
		return 0, errMalformed
	case b[i] == ',':
		return skipSpace(b, i+1), nil
	case b[i] == closer:
		return -1, checkTrailing(b, i+1)
	}
	return 0, errMalformed
}

func checkTrailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return errMalformed
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at b[i]
// (a quote). A quote ends the string unless an odd run of backslashes
// precedes it.
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errMalformed
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errMalformed
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	if j == i {
		return 0, errMalformed
	}
	return j, nil
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
		return true
	}
	return false
}

// skipNested returns the index just past the object or array starting at
// b[i], matching brackets and skipping strings.
func skipNested(b []byte, i int) (int, error) {
	var buf [32]byte
	stack := buf[:0] // the closers expected; on the stack unless nesting is deep
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			end, err := skipString(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return 0, errMalformed
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, errMalformed
}

// parseID returns the integer id of a response; the tool sends only
// integer ids.
func parseID(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// responseResult returns the result of env, the response to request id, or
// why it has none.
func responseResult(env envelope, id int64) ([]byte, error) {
	if env.method != nil {
		return nil, fmt.Errorf("%w: a request or notification where the response was due", errMalformed)
	}
	if env.err != nil {
		return nil, rpcError(env.err)
	}
	if got, ok := parseID(env.id); !ok || got != id {
		return nil, fmt.Errorf("response id %.40s, want %d", env.id, id)
	}
	if env.result == nil || string(env.result) == "null" {
		return nil, errors.New("response without a result")
	}
	return env.result, nil
}

// rpcError describes a JSON-RPC error object: its code and the start of
// its message.
func rpcError(raw []byte) error {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("%w: bad error member", errMalformed)
	}
	return fmt.Errorf("JSON-RPC error %d: %s", e.Code, truncate(e.Message, 200))
}

// checker checks the result of each answer. Like parseEnvelope, it reads
// the result's JSON in place rather than decoding it: encoding/json needs
// about a millisecond for a 64 KiB text, and the tool would measure itself.
type checker struct {
	method string // tools/call or tools/list
	// expect, if not nil, must occur in the result: in its JSON, or in the
	// text of its content blocks once decoded.
	expect []byte
	// textLen, if > 0, is the exact length of the result's text (-payload).
	textLen int
}

// measure ends a request sent at start: the latency up to the parsed
// response env of request id, and the check of its result (the tools on
// a tools/list page).
func (c *checker) measure(env envelope, id int64, start time.Time) (time.Duration, int, error) {
	result, err := responseResult(env, id)
	lat := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	tools, err := c.checkResult(result)
	return lat, tools, err
}

// checkResult checks one result and returns, for tools/list, the number
// of tools on the page.
func (c *checker) checkResult(result []byte) (int, error) {
	if c.method == "tools/list" {
		return c.checkList(result)
	}
	var isError, content []byte
	err := eachMember(result, func(key, value []byte) {
		switch string(key) {
		case "isError":
			isError = value
		case "content":
			content = value
		}
	})
	if err != nil {
		return 0, fmt.Errorf("the tools/call result: %w", err)
	}
	if content == nil || content[0] != '[' {
		return 0, fmt.Errorf("%w: the tools/call result has no content array", errMalformed)
	}
	if string(isError) == "true" {
		text, _ := contentText(content)
		return 0, fmt.Errorf("tool error (isError): %s", truncate(text, 200))
	}
	if c.textLen > 0 {
		n, err := contentTextLen(content)
		if err != nil {
			return 0, err
		}
		if n != c.textLen {
			return 0, fmt.Errorf("the result's text is %d bytes, want %d", n, c.textLen)
		}
	}
	// The JSON first: decoding is needed only if the text was escaped.
	if c.expect != nil && !bytes.Contains(result, c.expect) {
		if text, err := contentText(content); err != nil || !strings.Contains(text, string(c.expect)) {
			return 0, errors.New("the result does not contain the expected text")
		}
	}
	return 0, nil
}

// checkList checks a tools/list result and counts its tools.
func (c *checker) checkList(result []byte) (int, error) {
	var tools []byte
	err := eachMember(result, func(key, value []byte) {
		if string(key) == "tools" {
			tools = value
		}
	})
	if err != nil {
		return 0, fmt.Errorf("the tools/list result: %w", err)
	}
	if tools == nil {
		return 0, errors.New("tools/list result without tools")
	}
	n := 0
	if err := eachElement(tools, func([]byte) { n++ }); err != nil {
		return 0, fmt.Errorf("the tools/list result's tools: %w", err)
	}
	if c.expect != nil && !bytes.Contains(result, c.expect) {
		return 0, errors.New("the result does not contain the -expect text")
	}
	return n, nil
}

// eachText calls fn with the raw JSON string of the text of each text
// block of content, a CallToolResult's content array.
func eachText(content []byte, fn func(raw []byte)) error {
	var bad error
	err := eachElement(content, func(block []byte) {
		var typ, text []byte
		if err := eachMember(block, func(key, value []byte) {
			switch string(key) {
			case "type":
				typ = value
			case "text":
				text = value
			}
		}); err != nil && bad == nil {
			bad = err
		}
		if string(typ) == `"text"` {
			if len(text) < 2 || text[0] != '"' {
				bad = fmt.Errorf("%w: a text block without text", errMalformed)
				return
			}
			fn(text)
		}
	})
	if err != nil {
		return fmt.Errorf("the result's content: %w", err)
	}
	return bad
}

// contentTextLen returns the length of the text of content's text blocks,
// decoding only strings with escapes.
func contentTextLen(content []byte) (int, error) {
	n := 0
	var bad error
	err := eachText(content, func(raw []byte) {
		if bytes.IndexByte(raw, '\\') < 0 {
			n += len(raw) - 2
			return
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			bad = fmt.Errorf("the result's text: %w", err)
		}
		n += len(s)
	})
	return n, errors.Join(err, bad)
}

// contentText returns the text of content's text blocks, decoded.
func contentText(content []byte) (string, error) {
	var b strings.Builder
	var bad error
	err := eachText(content, func(raw []byte) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			bad = fmt.Errorf("the result's text: %w", err)
		}
		b.WriteString(s)
	})
	return b.String(), errors.Join(err, bad)
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
