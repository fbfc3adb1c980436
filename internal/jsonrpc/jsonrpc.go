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
// number; null gives the zero ID; anything else is an error.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
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

// Encode returns the wire form of m on one line: raw members are compacted
// (insignificant whitespace, including newlines, removed, which stdio and
// SSE framing need) but not otherwise re-encoded, so key order, number
// spelling and escapes stay as the peer wrote them.
func Encode(m *Message) ([]byte, error) {
	b, err := m.MarshalJSON()
	if err != nil {
		return nil, err
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
	b := make([]byte, 0, 64+len(m.Params)+len(m.Result))
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
		method, err := json.Marshal(m.Method)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"method":`...)
		b = append(b, method...)
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
func Parse(data []byte) (msgs []*Message, batch bool, err error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, false, &Error{Code: CodeInvalidRequest, Message: ErrEmpty.Error()}
	}
	if !json.Valid(data) {
		return nil, false, &Error{Code: CodeParseError, Message: "body is not valid JSON"}
	}
	if data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, true, &Error{Code: CodeParseError, Message: "batch is not a JSON array"}
		}
		if len(raws) == 0 {
			return nil, true, &Error{Code: CodeInvalidRequest, Message: "empty batch"}
		}
		msgs = make([]*Message, 0, len(raws))
		for i, raw := range raws {
			m, err := decodeOne(raw)
			if err != nil {
				err.Message = fmt.Sprintf("batch element %d: %s", i, err.Message)
				return nil, true, err
			}
			msgs = append(msgs, m)
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

// wire is Message with presence tracking for the members whose absence and
// null differ.
type wire struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func decodeOne(data []byte) (*Message, *Error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, &Error{Code: CodeInvalidRequest, Message: "message is not a JSON object"}
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "message members have the wrong types"}
	}
	m := &Message{}
	if w.JSONRPC == nil || *w.JSONRPC != Version {
		return nil, &Error{Code: CodeInvalidRequest, Message: `"jsonrpc" must be "2.0"`}
	}
	m.JSONRPC = Version
	if w.ID != nil {
		if err := m.ID.UnmarshalJSON(w.ID); err != nil {
			return nil, &Error{Code: CodeInvalidRequest, Message: "id must be a string or a number"}
		}
	}
	if w.Method != nil {
		if *w.Method == "" {
			return nil, &Error{Code: CodeInvalidRequest, Message: "method must not be empty"}
		}
		m.Method = *w.Method
		if w.Result != nil || w.Error != nil {
			return nil, &Error{Code: CodeInvalidRequest, Message: "a request cannot carry result or error"}
		}
		if w.Params != nil && !isNull(w.Params) {
			if c := firstByte(w.Params); c != '{' && c != '[' {
				return nil, &Error{Code: CodeInvalidRequest, Message: "params must be an object or an array"}
			}
			m.Params = w.Params
		}
		if w.ID != nil && isNull(w.ID) {
			return nil, &Error{Code: CodeInvalidRequest, Message: "request id must not be null"}
		}
		return m, nil
	}
	// A response.
	hasResult := w.Result != nil
	hasError := w.Error != nil && !isNull(w.Error)
	if hasResult == hasError {
		return nil, &Error{Code: CodeInvalidRequest, Message: "a response needs exactly one of result and error"}
	}
	if w.ID == nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "a response needs an id"}
	}
	if hasResult {
		m.Result = w.Result
		return m, nil
	}
	var e Error
	if err := json.Unmarshal(w.Error, &e); err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "error must be an object with an integer code"}
	}
	m.Error = &e
	return m, nil
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

func firstByte(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
