// Package front holds what both /mcp edges share before a request is
// decoded in its era: which era a POST belongs to (Classify), the keys
// and headers both eras name, the routing headers' encoding, the Accept
// check, and what a request says about how its client reached the
// gateway (a trusted proxy's X-Forwarded-*, the client's address) and
// which of its headers may travel on.
//
//	POST /mcp ─► Classify ─┬─ Legacy: initialize, Mcp-Session-Id, batches
//	                       └─ Modern: a protocol version in params._meta
package front
