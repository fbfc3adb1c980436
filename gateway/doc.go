// Package gateway is mcpgw's core: it takes era-neutral requests from the
// /mcp edges, answers what the gateway answers itself (ping, the merged
// lists), and routes the rest to the upstream server that owns it.
//
// The core knows no HTTP edge and no protocol era's wire format. Each edge
// (gateway/legacy for 2025-11-25, 2025-06-18 and 2025-03-26 sessions; later
// gateway/modern for 2026-07-28) decodes its era into a Request, calls
// Server.Handle, and encodes the Result for the client's negotiated version.
//
//	client ──► edge ──Request──► Server.Handle ──► upstream.Manager.Call ──► server
//	             ◄──Result/error──      │  ◄── notifications for this call ──┘
//	             ◄──Request.Notify──────┘
//
// # The envelope (DESIGN decision 11)
//
// A Request carries the method and raw params, the principal, the client's
// protocol version and capabilities for this request (from initialize on the
// legacy edge, from params._meta on the modern one), Notify, a sink for the
// notifications that belong to this request (the edge writes them on the
// request's own stream), and Input, a callback for input requests
// (elicitation, sampling, roots) that the edge answers its own way: a legacy
// edge sends a server-to-client request on the session, a modern edge
// returns an input_required result and resumes on the retry. SessionInput
// does the same for the requests an upstream session that the client's
// session owns sends outside any call (see serverrequests.go).
//
// A Result is the result object as raw JSON plus its ResultType (complete,
// input_required, task), the modern era's shape. The legacy edge drops the
// type; the modern edge writes it as "resultType". Errors are
// *jsonrpc.Error values with a standard code or one of the gateway's own
// (CodeUpstreamUnavailable and the rest, outside the range the spec
// reserves), with a data object naming the server.
//
// # Where the modern edge plugs in
//
// gateway/modern will build the same Request from a 2026-07-28 POST
// (version and capabilities from _meta, Session empty), call the same
// Handle, add resultType and cache hints to the Result, and answer
// server/discover from Server.Info. Nothing in this package changes for it.
package gateway
