package gateway

import (
	"fmt"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The gateway's own JSON-RPC error codes. The spec reserves -32000 to
// -32099 (and 2026-07-28 forbids undefined codes in -32020 to -32099), so
// they live outside -32768 to -32000. Each error's data names the server.
const (
	CodeUpstreamUnavailable = -31001 // the server is not running or could not be reached
	CodeUpstreamTimeout     = -31002 // the server did not answer within the call timeout
	CodeRateLimited         = -31003
	CodeForbidden           = -31004
	CodeRequestTooLarge     = -31005
	CodeInputRefused        = -31006
)

// errorData is the data object of the gateway's own errors.
type errorData struct {
	Server  string `json:"server"`
	State   string `json:"state,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

func unavailable(server, state, detail string) *jsonrpc.Error {
	msg := fmt.Sprintf("server %q is unavailable (state: %s)", server, state)
	if detail != "" {
		msg += ": " + detail
	}
	return jsonrpc.NewError(CodeUpstreamUnavailable, msg, errorData{Server: server, State: state})
}

func timedOut(server, method string, d time.Duration) *jsonrpc.Error {
	return jsonrpc.NewError(CodeUpstreamTimeout,
		fmt.Sprintf("server %q did not answer %s within %s; the call was cancelled", server, method, d),
		errorData{Server: server, Timeout: d.String()})
}

func invalidParams(format string, args ...any) *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, format, args...)
}
