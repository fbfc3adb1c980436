package upstream

// The modern era (MCP 2026-07-28): no initialize and no session. Every
// request carries the protocol version, the client's capabilities and its
// identity in params._meta; the server tells its own in server/discover.
// This file holds the pure parts: stamping _meta, making results
// era-neutral, and the HTTP header values of the streamable-HTTP
// transport (see spec-2026-07-28 §2).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// ModernProtocolVersion is the revision of the modern era a Client speaks.
const ModernProtocolVersion = "2026-07-28"

// The eras a Client speaks (Client.Era, Status.Era).
const (
	EraModern = "modern"
	EraLegacy = "legacy"
)

// Reserved _meta keys of the modern era.
const (
	metaReserved           = "io.modelcontextprotocol/"
	metaProtocolVersion    = metaReserved + "protocolVersion"
	metaClientCapabilities = metaReserved + "clientCapabilities"
	metaClientInfo         = metaReserved + "clientInfo"
	metaLogLevel           = metaReserved + "logLevel"
	metaServerInfo         = metaReserved + "serverInfo"
	metaSubscriptionID     = metaReserved + "subscriptionId"
)

// codeUnsupportedVersion is the modern era's error for a protocol
// version the server does not serve.
const codeUnsupportedVersion = -32022

// Header names of the modern streamable-HTTP transport.
const (
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"
	headerParamPrefix = "Mcp-Param-"
)

// defaultClientInfo is sent when ClientOptions.ClientInfo is nil.
var defaultClientInfo = json.RawMessage(`{"name":"mcpgw","version":"dev"}`)

// stamp describes the reserved _meta members of one modern request.
type stamp struct {
	caps     json.RawMessage // the client capabilities declared; never nil
	info     json.RawMessage // clientInfo; never nil
	logLevel string          // "" for none
}

// stampMeta returns params with params._meta holding s's members and our
// protocol version, after removing every reserved (io.modelcontextprotocol/)
// key the caller put there: a hop's reserved keys are its own, never passed
// on. Other _meta members (progressToken, traceparent, an application's)
// and every other member of params stay as they are. Empty params become
// an object. params must be an object.
func stampMeta(params json.RawMessage, s stamp) (json.RawMessage, error) {
	if isEmpty(params) {
		params = json.RawMessage(`{}`)
	} else if !isObject(params) {
		return nil, errors.New("params must be an object")
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if !ok || !isObject(meta) {
		meta = json.RawMessage(`{}`)
	}
	if meta, err = deleteReserved(meta); err != nil {
		return nil, fmt.Errorf("params._meta: %w", err)
	}
	edits := []rawjson.Edit{
		{Key: metaProtocolVersion, Val: json.RawMessage(strconv.Quote(ModernProtocolVersion))},
		{Key: metaClientCapabilities, Val: s.caps},
		{Key: metaClientInfo, Val: s.info},
	}
	if s.logLevel != "" {
		edits = append(edits, rawjson.Edit{Key: metaLogLevel, Val: rawjson.AppendString(nil, s.logLevel)})
	}
	if meta, err = rawjson.Apply(meta, edits...); err != nil {
		return nil, err
	}
	return rawjson.Set(params, "_meta", meta)
}

// deleteReserved returns meta without its io.modelcontextprotocol/ keys.
func deleteReserved(meta json.RawMessage) (json.RawMessage, error) {
	keys, err := rawjson.Keys(meta)
	if err != nil {
		return nil, err
	}
	var drop []string
	for _, k := range keys {
		if strings.HasPrefix(k, metaReserved) {
			drop = append(drop, k)
		}
	}
	if len(drop) == 0 {
		return meta, nil
	}
	return rawjson.Delete(meta, drop...)
}

// capsFor returns the members of declared (a client's capabilities) whose
// names are in allowed, as an object: what a modern server is told the
// gateway can serve for that client. Anything else, or nothing, is {}.
func capsFor(declared json.RawMessage, allowed []string) json.RawMessage {
	if len(allowed) == 0 || !isObject(declared) {
		return json.RawMessage(`{}`)
	}
	out := []byte{'{'}
	seen := map[string]bool{}
	err := rawjson.Members(declared, func(key, val []byte) bool {
		name, err := rawjson.Unquote(key)
		if err != nil || !slices.Contains(allowed, name) || seen[name] {
			return true
		}
		if len(seen) > 0 {
			out = append(out, ',')
		}
		seen[name] = true
		out = rawjson.AppendString(out, name)
		out = append(out, ':')
		out = append(out, val...)
		return true
	})
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return append(out, '}')
}

// ExtTasks is the tasks extension's identifier (ext-tasks,
// specification/draft/tasks.md), in capabilities.extensions.
const ExtTasks = "io.modelcontextprotocol/tasks"

// inputCapabilities are the client capabilities a modern server's
// input_required results ask of a client, which a caller that takes such
// results passes on.
var inputCapabilities = []string{"elicitation", "sampling", "roots"}

// unrelayedResult is the error (-32603) for a result type the gateway
// does not yet relay from modern servers.
func unrelayedResult(server, resultType string) *jsonrpc.Error {
	switch resultType {
	case "input_required":
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "server %q asked for input (resultType input_required), which the gateway does not yet relay from 2026-07-28 servers", server)
	case "task":
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "server %q answered with a task (resultType task), which the gateway does not yet relay from 2026-07-28 servers", server)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "server %q answered with resultType %q, which the gateway does not know", server, resultType)
}

// normalizeResult makes a modern server's result era-neutral: it removes
// resultType "complete", ttlMs (but a task's), cacheScope and _meta's serverInfo (and
// _meta when nothing else is left in it), and leaves every other member
// byte for byte as it was (DESIGN decision 1). A result that is not an
// object is returned as it is. An input_required result keeps its
// resultType when the caller takes it (takesInput), and so does a task
// (takesTasks); another resultType is a *jsonrpc.Error (see
// unrelayedResult) naming server.
func normalizeResult(server string, result json.RawMessage, takesInput, takesTasks bool) (json.RawMessage, error) {
	if !isObject(result) {
		return result, nil
	}
	var vals [5]json.RawMessage // resultType, _meta, ttlMs, cacheScope, taskId
	if err := rawjson.GetMany(result, []string{"resultType", "_meta", "ttlMs", "cacheScope", "taskId"}, vals[:]); err != nil {
		return nil, fmt.Errorf("malformed result: %w", err)
	}
	var drop []string
	if rt := vals[0]; rt != nil {
		typ, err := rawjson.Unquote(rt)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "server %q answered with a resultType that is not a string", server)
		}
		switch {
		case typ == "complete":
			drop = append(drop, "resultType")
		case typ == "input_required" && takesInput, typ == "task" && takesTasks:
			// The caller relays it as it is.
		default:
			return nil, unrelayedResult(server, typ)
		}
	}
	// A task's ttlMs (the tasks extension's CreateTaskResult and
	// tasks/get) is its lifetime, not a cache hint.
	if vals[2] != nil && vals[4] == nil {
		drop = append(drop, "ttlMs")
	}
	if vals[3] != nil {
		drop = append(drop, "cacheScope")
	}
	var metaEdit *rawjson.Edit
	if meta := vals[1]; meta != nil && isObject(meta) {
		if _, ok, _ := rawjson.Get(meta, metaServerInfo); ok {
			trimmed, err := rawjson.Delete(meta, metaServerInfo)
			if err != nil {
				return nil, fmt.Errorf("malformed result: %w", err)
			}
			if isEmptyObject(trimmed) {
				drop = append(drop, "_meta")
			} else {
				metaEdit = &rawjson.Edit{Key: "_meta", Val: trimmed}
			}
		}
	}
	out := result
	var err error
	if len(drop) > 0 {
		if out, err = rawjson.Delete(out, drop...); err != nil {
			return nil, fmt.Errorf("malformed result: %w", err)
		}
	}
	if metaEdit != nil {
		if out, err = rawjson.Apply(out, *metaEdit); err != nil {
			return nil, fmt.Errorf("malformed result: %w", err)
		}
	}
	return out, nil
}

// stripSubscriptionID returns a listen notification's params without
// _meta's subscriptionId (and without _meta when nothing else is left).
func stripSubscriptionID(params json.RawMessage) json.RawMessage {
	if !isObject(params) {
		return params
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if err != nil || !ok || !isObject(meta) {
		return params
	}
	trimmed, err := rawjson.Delete(meta, metaSubscriptionID)
	if err != nil {
		return params
	}
	var out []byte
	if isEmptyObject(trimmed) {
		out, err = rawjson.Delete(params, "_meta")
	} else {
		out, err = rawjson.Set(params, "_meta", trimmed)
	}
	if err != nil {
		return params
	}
	return out
}

// subscriptionID returns the raw subscriptionId of a notification's
// params._meta, or "".
func subscriptionID(params json.RawMessage) string {
	if !isObject(params) {
		return ""
	}
	meta, ok, _ := rawjson.Get(params, "_meta")
	if !ok || !isObject(meta) {
		return ""
	}
	raw, ok, _ := rawjson.Get(meta, metaSubscriptionID)
	if !ok {
		return ""
	}
	var id jsonrpc.ID
	if id.UnmarshalJSON(raw) != nil {
		return ""
	}
	return id.String()
}

func isEmpty(b json.RawMessage) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}

func isObject(b json.RawMessage) bool {
	s := strings.TrimLeft(string(b), " \t\r\n")
	return len(s) > 0 && s[0] == '{'
}

func isEmptyObject(b []byte) bool {
	return strings.Join(strings.Fields(string(b)), "") == "{}"
}

// Header values (streamable-http § Request Metadata): a value that is not
// plain visible ASCII, has leading or trailing blanks, or could be read as
// the sentinel itself travels as =?base64?<standard base64>?=.
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// encodeHeaderValue returns s as a header value.
func encodeHeaderValue(s string) string {
	if needsBase64(s) {
		return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
	}
	return s
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return true
		}
	}
	return strings.HasPrefix(strings.ToLower(s), base64Prefix)
}

// decodeHeaderValue returns the value a header value stands for; false
// when it has the sentinel's form but not valid base64 inside.
func decodeHeaderValue(v string) (string, bool) {
	if len(v) < len(base64Prefix)+len(base64Suffix) || !strings.EqualFold(v[:len(base64Prefix)], base64Prefix) || !strings.HasSuffix(v, base64Suffix) {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// paramBinding ties a tool argument (its path through nested objects) to
// the header Mcp-Param-<Header> that mirrors it.
type paramBinding struct {
	path   []string
	header string
}

// schemaProp is what x-mcp-header processing reads of a schema: decoded
// for reading only, the schema itself is relayed as the server wrote it.
type schemaProp struct {
	Type       json.RawMessage       `json:"type"`
	XMCPHeader json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

// paramBindings returns the x-mcp-header bindings of a tool's inputSchema
// (server/tools § x-mcp-header): on properties reached through
// "properties" only, of type string, integer or boolean, with a header
// name of token characters, unique without regard to case. Any invalid
// annotation is an error, and the tool then gets no Mcp-Param headers.
func paramBindings(inputSchema json.RawMessage) ([]paramBinding, error) {
	if !isObject(inputSchema) {
		return nil, nil
	}
	var root schemaProp
	if err := json.Unmarshal(inputSchema, &root); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	var out []paramBinding
	seen := map[string]bool{}
	var walk func(props map[string]schemaProp, prefix []string) error
	walk = func(props map[string]schemaProp, prefix []string) error {
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p := props[n]
			path := append(slices.Clone(prefix), n)
			if p.XMCPHeader != nil {
				var h, typ string
				if json.Unmarshal(p.XMCPHeader, &h) != nil || h == "" {
					return fmt.Errorf("property %s: x-mcp-header must be a non-empty string", strings.Join(path, "."))
				}
				if !validToken(h) {
					return fmt.Errorf("property %s: x-mcp-header %q is not a header name (token characters)", strings.Join(path, "."), h)
				}
				if json.Unmarshal(p.Type, &typ) != nil || typ != "string" && typ != "integer" && typ != "boolean" {
					return fmt.Errorf("property %s: x-mcp-header goes only on a string, integer or boolean", strings.Join(path, "."))
				}
				if seen[strings.ToLower(h)] {
					return fmt.Errorf("property %s: x-mcp-header %q is used twice (names are case-insensitive)", strings.Join(path, "."), h)
				}
				seen[strings.ToLower(h)] = true
				out = append(out, paramBinding{path: path, header: h})
			}
			if len(p.Properties) > 0 {
				if err := walk(p.Properties, path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root.Properties, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// validToken reports whether s is an HTTP token (RFC 9110 tchar).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// paramHeaders returns the Mcp-Param-* headers of a tools/call's params
// for the tool's bindings: an argument that is absent, null or not a
// primitive the header can carry (string, boolean, integer within ±2^53)
// gets none.
func paramHeaders(bindings []paramBinding, params json.RawMessage) http.Header {
	if len(bindings) == 0 || !isObject(params) {
		return nil
	}
	args, ok, _ := rawjson.Get(params, "arguments")
	if !ok || !isObject(args) {
		return nil
	}
	var h http.Header
	for _, b := range bindings {
		v := args
		found := true
		for _, part := range b.path {
			if !isObject(v) {
				found = false
				break
			}
			var ok bool
			if v, ok, _ = rawjson.Get(v, part); !ok {
				found = false
				break
			}
		}
		if !found {
			continue
		}
		s, ok := primitiveText(v)
		if !ok {
			continue
		}
		if h == nil {
			h = make(http.Header)
		}
		h.Set(headerParamPrefix+b.header, encodeHeaderValue(s))
	}
	return h
}

// primitiveText returns the header text of a string, boolean or integer
// JSON value.
func primitiveText(v json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "", false
	}
	switch x := x.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		const maxSafe = 1<<53 - 1
		if x != math.Trunc(x) || x > maxSafe || x < -maxSafe {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}
