package modern

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// paramHeaderPrefix starts the header that mirrors a tool argument whose
// schema property carries x-mcp-header.
const paramHeaderPrefix = "Mcp-Param-"

// checkParamHeaders checks a tools/call's Mcp-Param-* headers against its
// arguments, for the parameters the exposed tool's inputSchema marks with
// x-mcp-header (MCP 2026-07-28, server/tools § x-mcp-header): an argument
// that is there needs its header with the same value, decoded, and a
// header needs its argument. It returns nil for a call it cannot match to
// a tool: the core says what is wrong with that.
func (h *Handler) checkParamHeaders(r *http.Request, params json.RawMessage) *jsonrpc.Error {
	name, _ := rawjson.String(params, "name")
	schema, ok := h.core.ToolInputSchema(name)
	if !ok || !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil
	}
	props, ok, _ := rawjson.Get(schema, "properties")
	if !ok || len(props) == 0 || props[0] != '{' {
		return nil
	}
	args, _, _ := rawjson.Get(params, "arguments")
	var jerr *jsonrpc.Error
	rawjson.Members(props, func(key, val []byte) bool {
		header, ok := headerParam(val)
		if !ok {
			return true
		}
		param, err := rawjson.Unquote(key)
		if err != nil {
			return true
		}
		jerr = checkParam(r.Header, paramHeaderPrefix+header, param, args)
		return jerr == nil
	})
	return jerr
}

// headerParam returns a schema property's x-mcp-header name when it is a
// valid one: a token (RFC 9110 §5.6.2) on a primitive property.
func headerParam(prop []byte) (string, bool) {
	if len(prop) == 0 || prop[0] != '{' {
		return "", false
	}
	name, ok := rawjson.String(prop, "x-mcp-header")
	if !ok || name == "" || !isToken(name) {
		return "", false
	}
	switch typ, _ := rawjson.String(prop, "type"); typ {
	case "string", "integer", "boolean", "number":
		return name, true
	}
	return "", false
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// checkParam checks one mirrored argument.
func checkParam(hd http.Header, header, param string, args []byte) *jsonrpc.Error {
	mismatch := func(format string, a ...any) *jsonrpc.Error {
		return jsonrpc.Errorf(CodeHeaderMismatch, format, a...)
	}
	var arg json.RawMessage
	if len(args) > 0 && args[0] == '{' {
		arg, _, _ = rawjson.Get(args, param)
	}
	values, sent := hd[http.CanonicalHeaderKey(header)]
	if arg == nil || string(arg) == "null" {
		if sent {
			return mismatch("the %s header is sent but arguments.%s is absent", header, param)
		}
		return nil
	}
	if !sent {
		return mismatch("the %s header is missing: it must mirror arguments.%s", header, param)
	}
	got, err := front.DecodeHeader(values[0])
	if err != nil {
		return mismatch("the %s header is not valid: %v", header, err)
	}
	if !sameValue(arg, got) {
		return mismatch("the %s header does not match arguments.%s", header, param)
	}
	return nil
}

// sameValue reports whether a header's text stands for the JSON value
// arg: a string's text, a number equal as a number, a boolean's literal.
func sameValue(arg json.RawMessage, text string) bool {
	switch arg[0] {
	case '"':
		s, err := rawjson.Unquote(arg)
		return err == nil && s == text
	case 't', 'f':
		return string(arg) == text
	default:
		a, err1 := strconv.ParseFloat(string(arg), 64)
		b, err2 := strconv.ParseFloat(text, 64)
		return err1 == nil && err2 == nil && a == b
	}
}
