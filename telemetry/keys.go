package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// Attribute keys of the OpenTelemetry MCP semantic conventions
// (gen-ai/mcp.md), used on spans and metrics alike.
const (
	// MethodName is the JSON-RPC method of the request, "tools/call".
	MethodName = attribute.Key("mcp.method.name")
	// SessionID is the MCP session: the client's session with the gateway
	// on server spans, the gateway's session with the upstream on client
	// spans. Spans only, never a metric label.
	SessionID = attribute.Key("mcp.session.id")
	// ProtocolVersion is the negotiated MCP revision, "2025-11-25".
	ProtocolVersion = attribute.Key("mcp.protocol.version")
	// ToolName is the tool of a tools/call: its exposed name on server
	// spans, the upstream's own name on client spans.
	ToolName = attribute.Key("gen_ai.tool.name")
	// PromptName is the prompt of a prompts/get, named as ToolName is.
	PromptName = attribute.Key("gen_ai.prompt.name")
	// OperationName is "execute_tool" on tools/call spans.
	OperationName = attribute.Key("gen_ai.operation.name")
	// RequestID is the JSON-RPC request id. Spans only.
	RequestID = attribute.Key("jsonrpc.request.id")
	// ErrorType says why a request failed: the JSON-RPC error code as a
	// string, "tool_error" for a tool result with isError, or the kind of
	// failure ("timeout", "cancelled", "unavailable"). Absent on success.
	ErrorType = attribute.Key("error.type")
	// StatusCode is the JSON-RPC error code of a failed request, as a
	// string.
	StatusCode = attribute.Key("rpc.response.status_code")
	// NetworkTransport is "pipe" (stdio) or "tcp" (HTTP).
	NetworkTransport = attribute.Key("network.transport")
)

// Attribute keys of mcpgw's own, for what the conventions do not name.
const (
	// Server is the name of an upstream server as configured.
	Server = attribute.Key("mcpgw.server")
	// Outcome is how a request ended: OutcomeOK, OutcomeError,
	// OutcomeToolError or OutcomeCancelled.
	Outcome = attribute.Key("mcpgw.outcome")
	// State is an upstream server's state ("running", "restarting", ...).
	State = attribute.Key("mcpgw.state")
	// Reason says which limit refused a request, or why access was
	// refused.
	Reason = attribute.Key("mcpgw.reason")
)

// Outcomes of a request (the values of Outcome).
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"      // a JSON-RPC error
	OutcomeToolError = "tool_error" // a tools/call result with isError
	OutcomeCancelled = "cancelled"  // the client cancelled or went away
)

// OtherMethod stands for a method the gateway does not know, so that a
// client cannot grow a metric's label set with made-up method names.
const OtherMethod = "_OTHER"

// OtherErrorType stands for a JSON-RPC error code ErrorTypeLabel does not
// keep.
const OtherErrorType = "_OTHER"

// ExecuteTool is the OperationName of tools/call.
const ExecuteTool = "execute_tool"

// DurationBuckets are the histogram bounds, in seconds, of request and
// call durations: 5 ms for a list served from the catalog or a local
// tool, then steps of about 2.5 to 4 times up to 2 minutes for a slow
// tool. Nine bounds, where the MCP semantic conventions advise fourteen:
// each bound is a line per series in /metrics, and a series per method
// and server (see README, Observability).
var DurationBuckets = []float64{0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 120}

// Propagator reads and writes W3C trace context (traceparent and
// tracestate) only: baggage is the client's, and the gateway does not pass
// it on to servers of other owners.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// ScopeName is the instrumentation scope of mcpgw's tracers and meters.
const ScopeName = "github.com/mcpgw/mcpgw"

// Shared instruments: the core and the edges count into the same ones (an
// SDK meter returns one instrument for one name), so their names and
// descriptions live here.

// RateLimitRejections counts requests refused by a limit, by Reason:
// "principal" (rate_limits.per_principal), "sessions" (sessions.max or
// max_per_principal), "session_in_flight" (a session's in-flight cap),
// "server" (a server's rate_limit), "server_concurrency" (its
// max_concurrent), "server_pool" (its session pool), "hosted_tasks"
// (tasks.max_hosted_per_principal) or "session_store" (the store that
// keeps sessions failed, and the request got 503). On a meter that fails
// to create it, a no-op counter.
func RateLimitRejections(m metric.Meter) metric.Int64Counter {
	c, err := m.Int64Counter("mcpgw.rate_limit.rejections",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused by a limit, or because the session store failed, by reason (mcpgw.reason)."))
	if err != nil {
		return noopmetric.Int64Counter{}
	}
	return c
}

// AccessDenials counts requests refused for who sent them, by Reason:
// "acl" (the access rules), "unauthenticated" (no or a bad credential) or
// "insufficient_scope" (a token without the needed scopes). On a meter
// that fails to create it, a no-op counter.
func AccessDenials(m metric.Meter) metric.Int64Counter {
	c, err := m.Int64Counter("mcpgw.access.denials",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused for the caller's identity or rights, by the reason (mcpgw.reason)."))
	if err != nil {
		return noopmetric.Int64Counter{}
	}
	return c
}

// errorCodes are the JSON-RPC error codes that ErrorTypeLabel keeps: the
// standard ones, MCP's, the TypeScript SDK's connection closed (-32000)
// and request timeout (-32001), the 2026-07-28 header errors, and the
// gateway's own (-31001 to -31006).
var errorCodes = map[string]bool{
	"-32700": true, "-32600": true, "-32601": true, "-32602": true, "-32603": true,
	"-32002": true, "-32042": true, "-32000": true, "-32001": true,
	"-32020": true, "-32021": true, "-32022": true,
	"-31001": true, "-31002": true, "-31003": true, "-31004": true, "-31005": true, "-31006": true,
}

// ErrorTypeLabel returns an ErrorType value as a metric label: itself
// when it is a known JSON-RPC error code or not a code at all (the
// values below), else OtherErrorType, so that a server cannot grow a
// metric's label set by answering with made-up error codes. Spans keep the
// code itself.
func ErrorTypeLabel(errType string) string {
	if errType == "" || (errType[0] != '-' && (errType[0] < '0' || errType[0] > '9')) || errorCodes[errType] {
		return errType
	}
	return OtherErrorType
}

// Values of ErrorType for failures without a JSON-RPC error code.
const (
	ErrorToolError   = "tool_error"  // a tools/call result with isError
	ErrorCancelled   = "cancelled"   // the caller cancelled or went away
	ErrorTimeout     = "timeout"     // a deadline passed
	ErrorUnavailable = "unavailable" // the server could not be reached
	ErrorInternal    = "internal"    // the gateway failed
)

// methods are the MCP request methods whose names may be a metric label.
var methods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/cancel": true, "tasks/list": true,
	// 2026-07-28.
	"server/discover": true, "subscriptions/listen": true, "tasks/update": true,
}

// Methods returns the MCP request methods MethodLabel keeps.
func Methods() []string {
	out := make([]string, 0, len(methods))
	for m := range methods {
		out = append(out, m)
	}
	return out
}

// MethodLabel returns method as a metric label: itself when it is an MCP
// request method, else OtherMethod, so that a client cannot grow a
// metric's label set with made-up method names.
func MethodLabel(method string) string {
	if methods[method] {
		return method
	}
	return OtherMethod
}
