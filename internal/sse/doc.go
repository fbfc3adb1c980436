// Package sse reads and writes text/event-stream bodies (the WHATWG HTML
// "server-sent events" format) one event at a time.
//
// It exists because an MCP server may answer a streamable-HTTP POST with an
// event stream (MCP 2025-11-25, basic/transports): the upstream client must
// read that stream incrementally, track event ids and the retry field so it
// can resume with Last-Event-ID, and never hold more than one message's worth
// of bytes, whatever the server sends. DESIGN decision 3 keeps that reader
// ours (small, capped, fuzzed on its own) while the long-lived GET streams use
// r3labs/sse. Write is the matching writer, for tests and for servers.
//
// The parsing rules are those of the HTML standard's "event stream
// interpretation": lines end in CR, LF or CRLF; a blank line dispatches the
// event; lines starting with a colon are comments; the fields are data
// (joined with "\n"), event, id (ignored if it contains NUL) and retry
// (digits only, in milliseconds); a leading byte order mark is skipped; an
// event cut short by the end of the stream is discarded.
package sse
