// Package upstream holds mcpgw's clients of upstream MCP servers: one Client
// per server over a stdio child process, streamable HTTP, or the 2024-11-05
// HTTP+SSE transport, and the Manager that starts, watches and stops them.
//
// It knows nothing of downstream sessions or HTTP serving: the gateway core
// calls Manager.Call with a method and raw params and gets raw JSON back.
//
// # Shape
//
//	Manager ── one entry per configured server (state, last error, tools)
//	   │
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
// handed to that call's CallHooks; anything else goes to the Client's
// OnNotification and OnRequest. Over stdio nothing is related by the
// transport: the relay issue attributes by progress token and task id.
//
// # Eras
//
// Clients speak the legacy era (initialize with 2025-11-25, accepting
// 2025-06-18 and 2025-03-26 and, over SSE, 2024-11-05). The modern era
// (2026-07-28: no handshake, per-request _meta) will be a second handshake
// strategy on the same transports; the transport interface already carries
// no session semantics of its own beyond what streamable HTTP needs.
package upstream
