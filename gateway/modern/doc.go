// Package modern is the /mcp edge of the 2026-07-28 protocol era: every
// request stands alone, with the protocol version, the client's
// capabilities and its info in params._meta, and no session.
//
// The legacy edge owns the route and runs the checks every POST gets
// (Host, Origin, auth, rate limit, body size, Accept); it hands each POST
// that gateway/front classifies as modern to Handler.Serve, parsed:
//
//	POST /mcp ─► legacy guard ─► front.Classify ─┬─ legacy edge (sessions)
//	                                             └─ Serve ─► checks (_meta, headers, version)
//	                                                  ├─ server/discover, removed methods: answered here
//	                                                  ├─ subscriptions/listen: a stream of list changes
//	                                                  └─ the rest ─► gateway.Server.Handle ─► upstreams
//
// Serve keeps nothing between requests: any replica can answer any of
// them. A request's progress and log notifications go on its own
// response, which becomes an event stream when there is one to send or
// when the answer takes long; the response ends the stream. A client
// that drops the connection cancels the request upstream.
package modern
