package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/config"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Anonymous is the principal of every request until the auth layer names
// real ones.
const Anonymous = "anonymous"

// ErrCallOver is wrapped by the error of a Request.Input whose call was
// over before the request could be sent to the client: over stdio, a
// server's request is taken for the call in flight when it comes, and
// that call may answer first.
var ErrCallOver = errors.New("the call is over")

// Request is one client request as an edge hands it to the core, whatever
// the protocol era it arrived in.
type Request struct {
	// Method is the JSON-RPC method, such as "tools/call".
	Method string
	// Params are the request's params exactly as the client sent them, or
	// nil. They may sit in a buffer the edge reuses once Handle returns.
	Params json.RawMessage
	// Principal is who is asking. Sessions, tasks and media belong to it.
	Principal string
	// Groups are the groups Principal belongs to, as the auth layer names
	// them, for the access rules (Options.ACL). Nil means none.
	Groups []string
	// Session is the legacy edge's session id; "" on the modern edge.
	Session string
	// Client is what the client declared for this request.
	Client Client
	// LogLevel is the lowest level of the log messages the client asked
	// for with this request (the modern era's per-request logLevel); ""
	// asks for none. The legacy edge leaves it "": a session's level is
	// set with logging/setLevel.
	LogLevel string
	// Notify receives the notifications that belong to this request
	// (progress, log messages) in the order they arrive; the edge writes
	// them on this request's own stream. It must not block for long. Nil
	// drops them.
	Notify func(method string, params json.RawMessage)
	// SessionNotify receives notifications for the client that outlive
	// this request: notifications/resources/updated after a subscribe. The
	// legacy edge writes them on the session's GET stream. Nil means the
	// client cannot receive them, and subscribing is refused.
	SessionNotify func(method string, params json.RawMessage)
	// Input asks the client for input on behalf of an upstream
	// (elicitation/create, sampling/createMessage, roots/list) and returns
	// the client's result. Nil means the client cannot be asked, and the
	// core answers the upstream itself (DESIGN decision 5). An error that
	// wraps ErrCallOver says the request's call was over before it could
	// be sent: the core then takes it for one outside any call.
	Input func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// SessionInput is Input for the requests that belong to no call of
	// the client's: those an upstream session the client's session owns
	// (session_mode per_session, say) sends on its own. The legacy edge
	// sends them on the session's GET stream. It must not depend on this
	// request: the core keeps the first one a session gives. Nil means
	// the client cannot be asked outside its calls.
	SessionInput func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// BaseURL is the gateway's URL as this client reaches it (scheme and
	// host, no path), for the media links in its results: the edge sets it
	// from a trusted proxy's X-Forwarded-* headers. "" means
	// Options.PublicURL.
	BaseURL string
	// Header is the client's HTTP request header (read-only), without its
	// credentials; a server gets the members its forward_headers name.
	// Nil forwards none.
	Header http.Header
	// Exposure is what the client asked for through its endpoint URL
	// (/mcp?exposure=all|search), on every request; "" for nothing (the
	// gateway's catalog.exposure then).
	Exposure string
	// Credential is the client's bearer token when an identity provider's
	// JWT authenticated it (see CredentialOf): what a server with oauth
	// grant token_exchange exchanges for a token of its own. It is never
	// forwarded, logged or stored.
	Credential string

	// ID is the JSON-RPC id of the request as sent, for its span; "" if
	// the edge does not say.
	ID string
	// Cancel, when not nil, ends the context the edge gives Handle for
	// this request (its own, made for it) with a cause. The core may then
	// end that context itself, with a cause of its own, when the request's
	// only upstream call times out, instead of giving the call a context
	// of its own (see newCallTimer). The edge answers by what Handle
	// returns, whatever its context's cause: a timed-out call returns its
	// error. Nil: the core leaves the request's context alone.
	Cancel context.CancelCauseFunc

	// toolName is the exposed name of a tools/call's tool, once read.
	toolName string
	// promptName is the exposed name of a prompts/get's prompt, once
	// found; server is the server the request was routed to (see routed).
	promptName, server string
	// members are the members of Params the core reads, once read.
	members paramsMembers
	// sealed says the request's input_required result is the gateway's
	// own (a parked call's, a translated -32042), its state sealed.
	sealed bool
	// takesTasks says the request's call takes a task result of a modern
	// server (the client declared the tasks extension; taskext.go).
	takesTasks bool
}

// paramsMembers are the members of a request's params that the core reads
// (the name, the task and _meta), found in one pass: each lookup skips
// every other member, and a tool call's arguments can be megabytes.
type paramsMembers struct {
	of               json.RawMessage // the params they were read from
	name, task, meta json.RawMessage // nil when absent
}

// memberKeys are the keys of paramsMembers, in GetMany's order.
var memberKeys = []string{"name", "task", "_meta"}

// member returns the raw value of key, one of memberKeys, in params, and
// whether it is present. When params are req.Params (the same bytes), the
// members are read once for all the lookups of the request; other params
// (an edited copy, a background call's) are read on their own.
func (req *Request) member(params json.RawMessage, key string) (json.RawMessage, bool) {
	m := &req.members
	if !sameBytes(params, req.Params) {
		v, ok, _ := rawjson.Get(params, key)
		return v, ok
	}
	if !sameBytes(m.of, params) || m.of == nil {
		var vals [3]json.RawMessage
		rawjson.GetMany(params, memberKeys, vals[:])
		*m = paramsMembers{of: params, name: vals[0], task: vals[1], meta: vals[2]}
	}
	var v json.RawMessage
	switch key {
	case "name":
		v = m.name
	case "task":
		v = m.task
	case "_meta":
		v = m.meta
	default:
		panic("gateway: member of an unknown key " + key)
	}
	return v, v != nil
}

// sameBytes reports whether a and b are the same bytes in memory, not
// merely equal ones.
func sameBytes(a, b json.RawMessage) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Client is what a client declared: its negotiated protocol version,
// capabilities and Implementation, as raw JSON.
type Client struct {
	ProtocolVersion string
	Capabilities    json.RawMessage
	Info            json.RawMessage
}

// ResultType says what a Result is, in the modern era's terms.
type ResultType string

// The result types.
const (
	ResultComplete      ResultType = "complete"
	ResultInputRequired ResultType = "input_required"
	ResultTask          ResultType = "task"
)

// Result is the core's answer to a Request: the JSON result object and its
// type.
type Result struct {
	Type ResultType
	Body json.RawMessage
}

func complete(body json.RawMessage) *Result {
	return &Result{Type: ResultComplete, Body: body}
}

// CredentialOf returns the bearer token of a request header whose
// principal a JWT authenticated (its name is "jwt:<issuer>#<subject>", which
// no API key's principal can have), or "": an API key never leaves the
// gateway, not even to be exchanged.
func CredentialOf(h http.Header, principal string) string {
	if !strings.HasPrefix(principal, config.JWTNamePrefix) {
		return ""
	}
	v := h.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}
