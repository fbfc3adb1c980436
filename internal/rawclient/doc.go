// Package rawclient is a minimal MCP client that speaks raw JSON-RPC over
// the streamable HTTP transport of MCP 2025-11-25 and the revisions before
// it (the "legacy" era: an initialize handshake and an Mcp-Session-Id).
//
// It exists for mcpgw's end-to-end tests and, later, its load tool. The
// official Go SDK (v1.8.0) cannot send what those need to send, such as
// task-augmented requests and the tasks/* methods, and it hides the wire.
// This client models nothing above JSON-RPC: params go out as given, and
// results come back as json.RawMessage. It imports nothing of mcpgw's.
//
// One Client is one session (basic/transports, "Streamable HTTP"):
//
//	Dial        POST initialize ─▶ the result; Mcp-Session-Id, negotiated version
//	            POST notifications/initialized ─▶ 202
//	Call        POST request ─▶ application/json: the response
//	                         ╰▶ text/event-stream: notifications → OnNotification,
//	                            requests → OnRequest → POST the response, ...,
//	                            then the response
//	            stream cut before the response ─▶ GET + Last-Event-ID, the rest
//	OpenStream  GET ─▶ server-initiated messages; reconnects with Last-Event-ID
//	Close       DELETE ─▶ the session ends; the GET stream stops
//
// Every request after initialize carries Mcp-Session-Id (when the server set
// one), MCP-Protocol-Version (the negotiated version) and Options.Header.
package rawclient
