// Package jsonrpc is the JSON-RPC 2.0 framing shared by the gateway core and
// the upstream clients: one Message type for requests, notifications and
// responses, a parser that accepts a single message or a batch, and the
// standard error codes.
//
// Messages are relayed, not re-modelled (DESIGN decision 1): params and
// results stay json.RawMessage, and ids keep their exact bytes so that a
// response goes back under the very id the peer sent.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Version is the only value of the "jsonrpc" member.
const Version = "2.0"

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// ID is a request id as it appeared on the wire: a JSON string or number.
// The zero ID is "absent". IDs are compared by their bytes, which is what a
// peer expects back; a string id "1" and a number id 1 are different ids.
type ID struct {
	raw string
}

// StringID returns the ID for the JSON string s.
func StringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: string(b)}
}

// IntID returns the ID for the JSON number n.
func IntID(n int64) ID { return ID{raw: strconv.FormatInt(n, 10)} }

// IsValid reports whether the id is present (a string or a number).
func (id ID) IsValid() bool { return id.raw != "" }

// Raw returns the id's JSON encoding, or nil for the zero ID.
func (id ID) Raw() json.RawMessage {
	if id.raw == "" {
		return nil
	}
	return json.RawMessage(id.raw)
}

// String returns the id's JSON encoding, for logs and map keys.
func (id ID) String() string { return id.raw }

// Int returns the id as an integer when it is a JSON integer.
func (id ID) Int() (int64, bool) {
	n, err := strconv.ParseInt(id.raw, 10, 64)
	return n, err == nil
}

// MarshalJSON implements json.Marshaler. The zero ID encodes as null, which
// is what an error response carries when the request id could not be read.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.raw == "" {
		return []byte("null"), nil
	}
	return []byte(id.raw), nil
}

// UnmarshalJSON implements json.Unmarshaler. It accepts a string or a
// number; null gives the zero ID; anything else is an error, and so is
// invalid UTF-8, which the id would carry back out.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case !utf8.Valid(b):
		return errors.New("id is not UTF-8")
	case len(b) == 0:
		return errors.New("empty id")
	case string(b) == "null":
		id.raw = ""
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("bad string id: %w", err)
		}
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'):
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("bad number id: %w", err)
		}
	default:
		return errors.New("id must be a string or a number")
	}
	id.raw = string(b)
	return nil
}

// Error is a JSON-RPC error object. It is also a Go error, so a peer's error
// can travel up the stack and be written back unchanged.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// NewError returns an Error with code and message and, when data is not nil,
// data encoded as JSON.
func NewError(code int, message string, data any) *Error {
	e := &Error{Code: code, Message: message}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// Errorf returns an Error with code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Message is one JSON-RPC message: a request (Method and ID), a notification
// (Method, no ID) or a response (ID with Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      ID              `json:"id,omitzero"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m is a request.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID.IsValid() }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && !m.ID.IsValid() }

// IsResponse reports whether m is a response (a result or an error).
func (m *Message) IsResponse() bool { return m.Method == "" }

// NewRequest returns a request message.
func NewRequest(id ID, method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: Version, ID: id, Method: method, Params: params}
}

// NewNotification returns a notification message.
func NewNotification(method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: Version, Method: method, Params: params}
}

// NewResult returns a success response.
func NewResult(id ID, result json.RawMessage) *Message {
	if result == nil {
		result = json.RawMessage("{}")
	}
	return &Message{JSONRPC: Version, ID: id, Result: result}
}

// NewErrorResponse returns an error response. The zero id is sent as null.
func NewErrorResponse(id ID, err *Error) *Message {
	return &Message{JSONRPC: Version, ID: id, Error: err}
}

// Encode returns the wire form of m on one line: raw members that hold a
// newline (which in JSON can only be whitespace) are compacted, as stdio
// and SSE framing need, but not otherwise re-encoded, so key order, number
// spelling and escapes stay as the peer wrote them. Members without one
// are copied as they are, whitespace and all, without another pass.
func Encode(m *Message) ([]byte, error) {
	b, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b, nil
	}
	var out bytes.Buffer
	out.Grow(len(b))
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("encoding message: %w", err)
	}
	return out.Bytes(), nil
}

// MarshalJSON implements json.Marshaler. A response always carries "id",
// null when the request's id could not be read, as JSON-RPC 2.0 requires;
// a notification never does.
func (m *Message) MarshalJSON() ([]byte, error) {
	return m.appendJSON(make([]byte, 0, 64+len(m.Params)+len(m.Result)))
}

// AppendEncode is Encode appending to dst, for a caller that reuses its
// buffers. Unlike Encode's, the bytes are written into dst's array when
// it has room; on an error dst is returned as it was.
func AppendEncode(dst []byte, m *Message) ([]byte, error) {
	b, err := m.appendJSON(dst)
	if err != nil {
		return dst, err
	}
	out := b[len(dst):]
	if bytes.IndexByte(out, '\n') < 0 && bytes.IndexByte(out, '\r') < 0 {
		return b, nil
	}
	c, err := Encode(m) // the rare message with a newline: compacted
	if err != nil {
		return dst, err
	}
	return append(dst, c...), nil
}

func (m *Message) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0"`...)
	if m.ID.IsValid() || m.IsResponse() {
		b = append(b, `,"id":`...)
		if m.ID.IsValid() {
			b = append(b, m.ID.raw...)
		} else {
			b = append(b, "null"...)
		}
	}
	if m.Method != "" {
		b = append(b, `,"method":`...)
		b = rawjson.AppendString(b, m.Method)
		if len(m.Params) > 0 {
			b = append(b, `,"params":`...)
			b = append(b, m.Params...)
		}
		return append(b, '}'), nil
	}
	if m.Error != nil {
		e, err := json.Marshal(m.Error)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"error":`...)
		b = append(b, e...)
		return append(b, '}'), nil
	}
	b = append(b, `,"result":`...)
	if len(m.Result) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, m.Result...)
	}
	return append(b, '}'), nil
}

// ErrEmpty is returned by Parse for a body with no JSON value, and for an
// empty batch, which JSON-RPC 2.0 calls an invalid request.
var ErrEmpty = errors.New("empty message")

// Parse decodes one JSON-RPC message or a batch (a JSON array of messages).
// batch reports whether data was an array. Each message is checked with
// Validate; the first invalid one fails the whole parse, because a relay
// cannot answer half a batch meaningfully.
//
// A syntax error is returned as a *Error with CodeParseError; a message that
// is JSON but not JSON-RPC as a *Error with CodeInvalidRequest.
//
// JSON text exchanged between systems must be UTF-8 (RFC 8259, section
// 8.1), and the members of a message go out again byte for byte (an id
// goes back as it came), so no message leaves Parse with invalid UTF-8:
// each byte that is not part of a valid UTF-8 sequence (it can only be in
// a string) becomes U+FFFD, as encoding/json, and so the peers' SDKs,
// decode it. ParseOwnedStrict refuses such a message instead.
//
// The messages' raw members are slices of one copy of data, so the caller
// may reuse data afterwards (ParseOwned spares the copy).
func Parse(data []byte) (msgs []*Message, batch bool, err error) {
	return ParseOwned(bytes.Clone(bytes.TrimSpace(data)))
}

// ParseOwned is Parse for a caller that hands data over: the messages'
// raw members alias it, so it must not change afterwards. (Data with
// invalid UTF-8 is copied, mended.)
//
// The whole of data is checked once (rawjson.Valid, which allocates
// nothing), and its members are then found by a scanner that trusts that
// check: no reflection, and no copy of params or results.
func ParseOwned(data []byte) (msgs []*Message, batch bool, err error) {
	return parseOwned(data, false)
}

// ParseOwnedStrict is ParseOwned for a message whose sender is told what
// was wrong with it (a client's request): data with invalid UTF-8 is
// refused with CodeParseError, naming the first bad byte, instead of
// mended. Where a message arrives refused, nothing of it is relayed.
func ParseOwnedStrict(data []byte) (msgs []*Message, batch bool, err error) {
	return parseOwned(data, true)
}

func parseOwned(data []byte, strict bool) (msgs []*Message, batch bool, err error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, false, &Error{Code: CodeInvalidRequest, Message: ErrEmpty.Error()}
	}
	// Cheap beside the JSON check: utf8.Valid reads ASCII eight bytes at
	// a time.
	if !utf8.Valid(data) {
		if strict {
			return nil, false, &Error{Code: CodeParseError, Message: fmt.Sprintf(
				"body is not valid JSON text: byte %d is not part of a UTF-8 sequence (JSON text is UTF-8)", invalidUTF8At(data))}
		}
		data = mendUTF8(data)
	}
	if data[0] == '{' {
		// One message, the usual case: its members are found while it is
		// checked, in one pass over its params or result.
		var w wire
		if !rawjson.ValidMembers(data, w.add) {
			return nil, false, &Error{Code: CodeParseError, Message: "body is not valid JSON"}
		}
		m, jerr := w.decode()
		if jerr != nil {
			return nil, false, jerr
		}
		return []*Message{m}, false, nil
	}
	if !rawjson.Valid(data) {
		return nil, false, &Error{Code: CodeParseError, Message: "body is not valid JSON"}
	}
	if data[0] == '[' {
		var jerr *Error
		i := 0
		rawjson.Elements(data, func(el []byte) {
			if jerr != nil {
				return
			}
			m, err := decodeOne(el)
			if err != nil {
				err.Message = fmt.Sprintf("batch element %d: %s", i, err.Message)
				jerr = err
				return
			}
			msgs = append(msgs, m)
			i++
		})
		if jerr != nil {
			return nil, true, jerr
		}
		if len(msgs) == 0 {
			return nil, true, &Error{Code: CodeInvalidRequest, Message: "empty batch"}
		}
		return msgs, true, nil
	}
	m, jerr := decodeOne(data)
	if jerr != nil {
		return nil, false, jerr
	}
	return []*Message{m}, false, nil
}

// ParseOne decodes a single message; a batch is an invalid request.
func ParseOne(data []byte) (*Message, error) {
	msgs, batch, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if batch {
		return nil, &Error{Code: CodeInvalidRequest, Message: "expected one message, got a batch"}
	}
	return msgs[0], nil
}

// wire holds the raw members of one message; nil is absent. A null
// jsonrpc or method counts as absent, as a null for a *string did with
// encoding/json; a null id, params, result or error is kept as "null".
type wire struct {
	jsonrpc, id, method, params, result, error []byte
}

// decodeOne decodes one message of valid JSON data. Member names match
// exactly (JSON-RPC 2.0 names are case-sensitive); a repeated member's
// last value wins.
func decodeOne(data []byte) (*Message, *Error) {
	if len(data) == 0 || data[0] != '{' {
		return nil, &Error{Code: CodeInvalidRequest, Message: "message is not a JSON object"}
	}
	var w wire
	rawjson.Members(data, func(key, val []byte) bool {
		w.add(key, val)
		return true
	})
	return w.decode()
}

// add records the message member key (its token as written) with its
// value; a member given twice counts as its last.
func (w *wire) add(key, val []byte) {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		u, _ := rawjson.Unquote(key)
		name = []byte(u)
	}
	switch string(name) {
	case "jsonrpc":
		w.jsonrpc = val
	case "id":
		w.id = val
	case "method":
		w.method = val
	case "params":
		w.params = val
	case "result":
		w.result = val
	case "error":
		w.error = val
	}
}

// decode makes the message of the members w holds.
func (w *wire) decode() (*Message, *Error) {
	for _, v := range [][]byte{w.jsonrpc, w.method} {
		if v != nil && v[0] != '"' && !isNull(v) {
			return nil, &Error{Code: CodeInvalidRequest, Message: "message members have the wrong types"}
		}
	}
	if w.jsonrpc == nil || isNull(w.jsonrpc) || !stringIs(w.jsonrpc, Version) {
		return nil, &Error{Code: CodeInvalidRequest, Message: `"jsonrpc" must be "2.0"`}
	}
	m := &Message{JSONRPC: Version}
	if w.id != nil {
		switch c := w.id[0]; {
		case c == 'n': // null: no id
		case c == '"' || c == '-' || (c >= '0' && c <= '9'):
			m.ID = ID{raw: string(w.id)}
		default:
			return nil, &Error{Code: CodeInvalidRequest, Message: "id must be a string or a number"}
		}
	}
	if w.method != nil && !isNull(w.method) {
		method, err := methodName(w.method)
		if err != nil {
			return nil, &Error{Code: CodeInvalidRequest, Message: "message members have the wrong types"}
		}
		if method == "" {
			return nil, &Error{Code: CodeInvalidRequest, Message: "method must not be empty"}
		}
		m.Method = method
		if w.result != nil || w.error != nil {
			return nil, &Error{Code: CodeInvalidRequest, Message: "a request cannot carry result or error"}
		}
		if w.params != nil && !isNull(w.params) {
			if c := w.params[0]; c != '{' && c != '[' {
				return nil, &Error{Code: CodeInvalidRequest, Message: "params must be an object or an array"}
			}
			m.Params = w.params
		}
		if w.id != nil && isNull(w.id) {
			return nil, &Error{Code: CodeInvalidRequest, Message: "request id must not be null"}
		}
		return m, nil
	}
	// A response.
	hasResult := w.result != nil
	hasError := w.error != nil && !isNull(w.error)
	if hasResult == hasError {
		return nil, &Error{Code: CodeInvalidRequest, Message: "a response needs exactly one of result and error"}
	}
	if w.id == nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "a response needs an id"}
	}
	if hasResult {
		m.Result = w.result
		return m, nil
	}
	var e Error
	if err := json.Unmarshal(w.error, &e); err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "error must be an object with an integer code"}
	}
	m.Error = &e
	return m, nil
}

// stringIs reports whether the JSON string token tok is s.
func stringIs(tok []byte, s string) bool {
	if len(tok) == len(s)+2 && string(tok[1:len(tok)-1]) == s {
		return true
	}
	u, err := rawjson.Unquote(tok)
	return err == nil && u == s
}

// methods are the method names the gateway relays most, so that decoding
// one allocates no new string.
var methods = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"initialize", "ping", "tools/call", "tools/list", "prompts/get", "prompts/list",
		"resources/read", "resources/list", "resources/templates/list", "completion/complete",
		"notifications/initialized", "notifications/progress", "notifications/cancelled",
		"notifications/message", "notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed", "notifications/resources/updated",
		"elicitation/create", "sampling/createMessage", "roots/list",
		"tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "notifications/tasks/status",
	} {
		m[s] = s
	}
	return m
}()

// methodName returns the method of a JSON string token: a well-known
// one's shared copy, without allocating.
func methodName(tok []byte) (string, error) {
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return rawjson.Unquote(tok)
	}
	if v, ok := methods[string(inner)]; ok {
		return v, nil
	}
	return string(inner), nil
}

func isNull(b []byte) bool { return string(b) == "null" }

// invalidUTF8At returns the index of the first byte of b that is not part
// of a valid UTF-8 sequence, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// replacement is U+FFFD in UTF-8.
const replacement = "\uFFFD"

// mendUTF8 returns a copy of b with each byte that is not part of a valid
// UTF-8 sequence replaced by U+FFFD: what encoding/json's decoder makes of
// it, byte for byte (a valid U+FFFD in b stays as it is).
func mendUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		i := invalidUTF8At(b)
		if i < 0 {
			return append(out, b...)
		}
		out = append(append(out, b[:i]...), replacement...)
		b = b[i+1:]
	}
	return out
}
