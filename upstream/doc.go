// Package upstream holds mcpgw's clients of upstream MCP servers: Clients
// over a stdio child process, streamable HTTP, or the 2024-11-05 HTTP+SSE
// transport, and the Manager that starts, watches, restarts and stops them
// (one base client per server, plus one per principal or per downstream
// session for servers whose session mode asks for it, and, at a legacy
// http or sse server, one per set of capabilities a calling client lacked:
// see mirror.go), with each server's
// own log file, and adds, replaces, switches and removes servers while the
// gateway runs.
//
// It knows nothing of HTTP serving, and of downstream sessions only their
// ids: the gateway core calls Manager.Call with a Caller (principal,
// session), a method and raw params, and gets raw JSON back.
//
// # Shape
//
//	Manager ── one entry per configured server (state, last error, lists,
//	   │       restarts, log file, pool of per-caller clients)
//	   └─ Client ── JSON-RPC over a transport: our own request ids, a pending
//	        │       table that maps responses back, the initialize handshake,
//	        │       paginated tools/list, cancellation on context end
//	        └─ transport ── stdio (child process), streamable HTTP, legacy SSE
//
// # Request ids and attribution
//
// Each Client numbers its own requests (1, 2, 3, ...) whatever the caller's
// ids were (DESIGN decision 4), so any number of callers can share one
// connection. A message the server sends on a channel tied to one of our
// requests (the SSE stream of that request's POST) is "related" to it and is
// handed to that call's CallHooks. Over stdio and legacy SSE nothing is
// related by the transport: a progress notification goes to the call that
// sent its progress token, and a server request or another call-scoped
// notification to the only call in flight with hooks, if there is exactly
// one (DESIGN decision 5). Anything else goes to the Client's
// OnNotification and OnRequest; the Manager's OnRequest answers ping and
// hands the rest, naming the caller whose upstream session it came on, to
// the gateway's RequestFunc (see answer.go), which asks the client that
// owns that session or has AnswerForClient answer for it.
//
// # Telemetry
//
// Manager.Call gives each call that reaches a server a client span, child
// of the span in its ctx, and propagates the span's W3C trace context: in
// the traceparent header of the http and sse transports' POSTs, and in
// params._meta where the negotiated revision defines it (or where the
// caller already put a traceparent). The Manager also records the call
// durations, the calls in flight, and each server's state and restarts
// (see telemetry.go for the names).
//
// # Eras
//
// A server's config names the era (protocol: auto, modern or legacy). The
// legacy era is initialize with 2025-11-25, accepting 2025-06-18 and
// 2025-03-26 and, over SSE, 2024-11-05. The modern era (2026-07-28) has
// no handshake and no session: Connect asks server/discover, every request
// carries our version, capabilities and clientInfo in params._meta (and
// the Mcp-* headers over HTTP), results are made era-neutral, and one
// subscriptions/listen per client carries the server's change
// notifications (modern.go, modernclient.go, listen.go). auto probes
// server/discover at each start and falls back to initialize when the
// server does not answer as a modern one.
package upstream
