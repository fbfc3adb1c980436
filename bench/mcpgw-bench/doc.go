// Command mcpgw-bench is mcpgw's load tool. It loads an MCP server (mcpgw,
// or an upstream server directly, which is the limit mcpgw is measured
// against) and prints one report: requests, errors, throughput, exact
// latency percentiles, its own CPU time per request and, with -watch, the
// server's CPU time and memory.
//
// It exists because a load tool built on an MCP SDK measures the SDK as much
// as the server. mcpgw-bench speaks raw JSON-RPC: over streamable HTTP (MCP
// 2025-11-25, basic/transports), or over the stdin and stdout of a stdio
// server it spawns. It builds each request by splicing an id into prebuilt
// bytes, reuses its buffers, and checks each answer in place: it walks the
// JSON for the members it needs (id, result, isError, the text blocks, the
// tools) without decoding the rest, since encoding/json would spend about a
// millisecond on a 64 KiB result.
//
//	mcpgw-bench [flags]                    http mode: load -url
//	mcpgw-bench -idle N [flags]            hold N idle sessions with their GET streams open
//	mcpgw-bench -task [flags]              hosted tasks of 2026-07-28 clients at -url
//	mcpgw-bench -direct [flags] -- CMD...  spawn the stdio server CMD and load it
//
// The target must be this machine: -url has to resolve to loopback
// addresses only, and every connection is checked again when it is dialled.
// The tool is for Linux: it reads /proc and uses getrusage and setrlimit.
//
// # A run
//
// Every session (http mode) or worker (direct mode) has one request in
// flight and sends the next as soon as the answer is checked:
//
//	open sessions ─▶ warmup ─▶ measured period ───────────────────▶ close sessions
//	 initialize       (not      ends after -duration or after        DELETE (http),
//	 initialized      counted)  -requests, whichever comes first     close stdin (direct)
//	                            ▲                                 ▲
//	                            snapshots: own rusage, /proc of the watched process
//
// A request counts when it starts in the measured period. Its latency runs
// from just before it is sent to its answer's JSON-RPC envelope being
// parsed. It is an error when the answer is not HTTP 200, is a JSON-RPC
// error, has no result, has isError: true, or does not contain -expect (or,
// with -payload, when its text is not exactly the bytes sent).
//
// An HTTP answer may be application/json or text/event-stream: on a stream
// the tool skips priming events and notifications until the response with
// its request's id, then drains the stream so that the connection is
// reused. Server-to-client requests are not answered; they are counted in a
// note. Each POST is a round trip of net/http's client from the
// session's own goroutine. Over stdio, one reader
// goroutine reads the server's stdout lines (of any length up to 64 MiB)
// and hands each response to the worker whose id it carries; workers write
// to stdin under a mutex.
//
// With -init-url, each session's initialize and notifications/initialized
// go to that URL and its requests to -url: with two replicas of mcpgw, the
// one at -url forwards them to the one that holds the session. -watch may
// be given once per process (both replicas, say); the report has each.
//
// With -task, each session is a sessionless 2026-07-28 client that declares
// the tasks extension in every request's _meta, and one request is one
// task: tools/call, whose answer must be a task, then tasks/get until it is
// completed (failed, input_required or anything else is an error); the
// latency runs to the tasks/get that brought the result. Each tasks/get is
// sent as soon as the last answer came, not after pollIntervalMs, and the
// report counts tasks/get per task. mcpgw makes every call a task with
// tasks.promote_after: 0s.
//
// With -idle N the tool sends no requests: it opens N sessions, each with
// its GET stream, 64 at a time, holds them for -duration, and reports how
// much the watched process's VmRSS grew per session. Each stream holds a
// connection, so the tool raises its open-file limit to the hard limit
// first, and names the limit if opening fails.
//
// The report is text, or with -json one JSON object (fields in report.go).
// The exit status is 1 when a request failed or none succeeded, after the
// report, and 2 for a usage error.
//
// CPU times of other processes come from /proc/PID/stat in clock ticks of
// 10 ms (USER_HZ), so a run must be long enough for the counts to mean
// something; the report says so.
package main
