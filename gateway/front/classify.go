package front

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Era is the protocol era a POST to /mcp is served in.
type Era int

// The eras.
const (
	// Legacy: 2025-11-25 and older, with initialize and sessions.
	Legacy Era = iota
	// Modern: 2026-07-28, with the protocol version in each request's
	// params._meta and no session.
	Modern
)

func (e Era) String() string {
	if e == Modern {
		return "modern"
	}
	return "legacy"
}

// Keys of a modern request's params._meta.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// The headers both eras' clients send on a POST.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
)

// legacyVersions are the protocol versions of the session era, served or
// not: a request naming one of them is a legacy client's.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// IsLegacyVersion reports whether v is a protocol version of the session
// era.
func IsLegacyVersion(v string) bool {
	for _, l := range legacyVersions {
		if v == l {
			return true
		}
	}
	return false
}

// Classify says which edge serves a POST whose body parsed to msgs.
//
// A request with a session and a legacy MCP-Protocol-Version is legacy.
// Otherwise, a request whose params._meta carries a protocol version is
// modern, unless it also names a session and the version is a legacy one; an
// initialize, a batch, or anything with a session is legacy. A request
// with neither a _meta version nor a session is modern only when its
// MCP-Protocol-Version header names a version that is not legacy (the
// modern edge then says what its _meta lacks); the header alone never
// makes a sessioned or _meta-less legacy request modern.
func Classify(h http.Header, msgs []*jsonrpc.Message, batch bool) Era {
	if batch || len(msgs) != 1 {
		return Legacy
	}
	m := msgs[0]
	session := h.Get(HeaderSessionID) != ""
	header := strings.TrimSpace(h.Get(HeaderProtocolVersion))
	if session && IsLegacyVersion(header) {
		// A session's request that says its version: the hot path,
		// decided without reading the params.
		return Legacy
	}
	if v, ok := metaVersion(m.Params); ok {
		if session && IsLegacyVersion(v) {
			return Legacy
		}
		return Modern
	}
	if m.Method == "initialize" || session {
		return Legacy
	}
	if header != "" && !IsLegacyVersion(header) {
		return Modern
	}
	return Legacy
}

// metaVersion returns params._meta's protocol version member, as a string
// when it is one, and whether the member is there at all.
func metaVersion(params []byte) (string, bool) {
	if len(params) == 0 {
		return "", false
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if !ok || err != nil || len(meta) == 0 || meta[0] != '{' {
		return "", false
	}
	raw, ok, err := rawjson.Get(meta, MetaProtocolVersion)
	if !ok || err != nil {
		return "", false
	}
	v, err := rawjson.Unquote(raw)
	if err != nil {
		return "", true
	}
	return v, true
}

// base64 sentinel of an encoded header value (MCP 2026-07-28,
// basic/transports/streamable-http, Request Metadata).
const (
	encodedPrefix = "=?base64?"
	encodedSuffix = "?="
)

// ErrHeaderEncoding is returned by DecodeHeader for a value that claims
// the base64 encoding but is not valid base64.
var ErrHeaderEncoding = errors.New("invalid =?base64?...?= encoding")

// DecodeHeader returns the value a routing header (Mcp-Name,
// Mcp-Param-*) carries: without surrounding whitespace, and decoded when
// it is sent as =?base64?...?=.
func DecodeHeader(v string) (string, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, encodedPrefix) || !strings.HasSuffix(v, encodedSuffix) || len(v) < len(encodedPrefix)+len(encodedSuffix) {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(v[len(encodedPrefix) : len(v)-len(encodedSuffix)])
	if err != nil {
		return "", ErrHeaderEncoding
	}
	return string(b), nil
}

// StripReserved returns params without the reserved keys of its _meta:
// they describe the client's own hop (its version, capabilities, info),
// and each hop stamps its own. _meta goes when nothing else is left in
// it. params without any is returned as it is.
func StripReserved(params json.RawMessage) (json.RawMessage, error) {
	// The common case, decided by a scan: every reserved key has
	// ".modelcontextprotocol" or ".mcp" in it, unless escapes spell it.
	if !bytes.Contains(params, []byte(".modelcontextprotocol")) && !bytes.Contains(params, []byte(".mcp")) &&
		!bytes.Contains(params, []byte(`\u`)) {
		return params, nil
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if err != nil {
		return nil, err
	}
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return params, nil
	}
	keys, err := rawjson.Keys(meta)
	if err != nil {
		return nil, err
	}
	var reserved []string
	for _, k := range keys {
		if ReservedKey(k) {
			reserved = append(reserved, k)
		}
	}
	if len(reserved) == 0 {
		return params, nil
	}
	if len(reserved) == len(keys) {
		return rawjson.Delete(params, "_meta")
	}
	meta, err = rawjson.Delete(meta, reserved...)
	if err != nil {
		return nil, err
	}
	return rawjson.Set(params, "_meta", meta)
}

// ReservedKey reports whether a _meta key is one MCP reserves for the
// protocol itself: a prefix whose second label is modelcontextprotocol
// or mcp (MCP 2026-07-28, basic/index § _meta).
func ReservedKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	labels := strings.Split(prefix, ".")
	return len(labels) >= 2 && (labels[1] == "modelcontextprotocol" || labels[1] == "mcp")
}
