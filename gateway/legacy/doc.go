// Package legacy is mcpgw's /mcp edge for the session-based protocol
// revisions: 2025-11-25, 2025-06-18 and 2025-03-26, over the streamable
// HTTP transport (MCP 2025-11-25, basic/transports). It terminates
// initialize, owns the downstream sessions, turns each POSTed request into
// a gateway.Request for the core, writes the answer as JSON or as an SSE
// stream, lets a client resume a dropped stream with GET and Last-Event-ID,
// and encodes results for the client's negotiated version (DESIGN decisions
// 11 and 12).
//
// It exists apart from the core because the core knows no HTTP and no era's
// wire format; the modern (2026-07-28) edge will sit beside it and share
// nothing but the core.
//
// # Session lifecycle
//
//	POST initialize (no Mcp-Session-Id)
//	   │  caps: global → 503, per principal → 429; its record stored
//	   ▼
//	 live session ── Mcp-Session-Id = seal{replica, principal, 16 random bytes, created}
//	   │  version, client capabilities and info, principal, last activity,
//	   │  calls in flight (request id → cancel), streams (0 = GET, 1, 2, …),
//	   │  input requests waiting for the client (our id → waiter)
//	   │
//	   ├─ DELETE ────────────┐
//	   ├─ idle (no call, no  │  end: cancel its calls, fail its input
//	   │  input request, no  ├─ requests, close its streams, forget the id
//	   │  connected stream,  │  and delete its record; that id now gets 404
//	   │  for IdleTimeout) ──┤  and the client initializes again
//	   ├─ admin API ─────────┘
//	   └─ Handler.Close ───── end it here, keep its record: the next process
//	                          serves it (see "Sessions across restarts")
//
// A session id is a sealed token (internal/seal, purpose "session"): any
// request whose id does not open, names another principal, or names a
// session neither this process nor its store holds gets 404. The random
// part, in hex, is the session's short id: the key of the session table
// and of the store, the "session_id" in logs, gateway.Request.Session and
// SessionInfo.ID. The token itself is a bearer credential and is never
// logged or stored.
//
// The janitor goroutine, owned by the Handler and stopped by Close, ends
// idle sessions, drops finished streams whose resume window passed, and
// cancels the calls of streams nobody resumed within it. A
// lookup also checks idleness itself, so an expired id is 404 even between
// two janitor rounds.
//
// # Sessions across restarts
//
// With a Store (the gateway's database, when the config sets a secret),
// a session outlives the process that created it. Its record (short id,
// principal, version, the client's capabilities and clientInfo, created,
// last active) is written at initialize, before the client gets the id;
// the janitor carries its activity forward once a round (a busy session
// counts as active); the idle timeout deletes it, and so do DELETE and the
// admin API, first: if they cannot, the session goes on and they fail
// (503); shutting down keeps it.
//
//	process A: initialize ─► record; id = seal{A, principal, nonce, t}
//	             … SIGTERM or SIGKILL …
//	process B: request with the id ─► not in the table ─► open the seal
//	   ─► its principal is the caller's ─► the record of hex(nonce) is
//	   there, the caller's, not idle past IdleTimeout (plus a janitor
//	   round: the record may lag by one) ─► admitted under the caps like a
//	   new session (503, 429) ─► served, as the same short id
//
// A session ended for good is not brought back by a restore that read its
// record just before: the Handler remembers the short ids of the sessions
// that ended here (the most recent maxEnded) and admits none of them. A
// session the store holds and no request restored yet is ended without
// being restored, so that no cap stands in the way: by DELETE (its
// principal's) and by the admin API, which names it by its short id and
// lists it as "stored".
//
// Whatever names the replica in the id does not matter: a process serves
// any session its store holds. A restored session keeps its version,
// capabilities, client and created time, and its short id, so its tasks
// are its own again and its per_session upstreams start anew at its first
// call. What lived only in the old process is gone: its calls in flight
// and their streams, its resource subscriptions and log level (the
// client subscribes and sets them again), its input requests (a restored
// session numbers its own from a random point, so a late answer to an old
// one reaches nothing).
//
// The event ids of a restored session carry a tag of the process that
// restored it, "<tag>.<stream>_<seq>", so that the ids of the process
// before it are told apart. A GET whose Last-Event-ID names another
// process's stream is not an error: for stream 0 it opens the GET stream
// afresh, as a GET without Last-Event-ID does; for a POST stream (whose
// call died with that process) it gets an empty event stream that ends at
// once, after which a client may send the request again. A Last-Event-ID
// that does not parse still gets 400.
//
// Without a Store, sessions live and die with the Handler.
//
// # Streams and event ids
//
// Every SSE response belongs to a logical stream of its session, numbered
// from 1 for POST responses; stream 0 is the session's standalone GET
// stream. Each event gets the id "<stream>_<seq>" (seq counts from 1 within
// the stream), which is unique across all streams of the session and names
// its stream, as 2025-11-25 asks. Events are appended to the stream's buffer
// and written by at most one attached connection, from its cursor:
//
//	POST tools/call ─► stream 3: [3_1 priming] [3_2 progress] [3_3 response] ─► done
//	                        ▲ the POST's connection writes from its cursor
//	connection drops ─► the call keeps running (a dropped connection is not
//	                    a cancel); later events wait in the buffer, and the
//	                    resume window starts
//	GET, Last-Event-ID: 3_2 ─► a new connection attaches to stream 3 at seq 2,
//	                    writes 3_3, and the response ends with the stream
//
// A forwarded request (anything but ping, initialize and */list) runs on
// its POST's handler goroutine. Its answer is application/json when its
// response is ready before it has anything else for the client and within
// StreamAfter (config stream_after, 1s): most calls, which then cost one
// write and no goroutine of their own. Otherwise the answer becomes
// text/event-stream at the first of: the call's first notification or
// input request for the client, or StreamAfter passing. From then on a
// goroutine writes the stream while the call goes on: on 2025-11-25
// sessions it begins with a priming event (an id and empty data), older
// sessions get none; then the request's notifications, then its response,
// and the stream ends. A call cancelled while its answer was still to be
// JSON gets an empty stream. Requests the gateway answers itself are
// always answered as application/json. A newer
// connection for a stream (a resume, or a fresh GET for stream 0) replaces
// the older one, which ends; a message is only ever written to the one
// logical stream it belongs to, so it is never sent on two streams.
//
// A fresh GET (no Last-Event-ID) attaches to stream 0, first writing the
// events no connection delivered yet (at least once: one written just as
// the older connection went may come again), then a priming event on
// 2025-11-25 sessions, then each notifications/{tools,prompts,resources}/
// list_changed as it happens and each notifications/resources/updated of a
// resource the session subscribed to, and the input requests that belong
// to no call (see "Input requests"). Sessions that never opened a GET
// stream do not get list_changed (nor resources/updated), unless an input
// request made stream 0 for them first. A GET
// (fresh or resuming) on HTTP/1.1 takes its connection over from net/http
// once checked, and two small goroutines write and watch it instead of
// the connection's handler (takeover.go): an idle GET stream is the bulk
// of an idle session's memory.
//
// Buffers are bounded: a stream keeps at most MaxStreamEvents events and
// MaxStreamBytes bytes, dropping its oldest events first, but never a
// response and never its last event. A response is what the client waits
// for, so it is kept whatever its size; a stream holds at most one per
// call answered on it, and a session has at most MaxInFlight calls. A
// connection or a resume that falls behind dropped events goes on with the
// next one it has: the dropped events (notifications, and requests to the
// client, which then time out) are lost. A finished
// stream whose events were all written is dropped at once; one that was
// not is kept for ResumeWindow, and a session keeps at most
// maxFinishedStreams of them.
//
// A Last-Event-ID that does not parse, names a stream the session does not
// have (never opened, or dropped after its resume window) or an event not
// issued yet gets 400 with a JSON-RPC error: not 404, which would tell the
// client its whole session is gone (the go-sdk server makes the same
// choice).
//
// # Input requests
//
// While a forwarded call runs, its server may ask the client for input
// (elicitation/create, sampling/createMessage, roots/list). The core
// decides whether this client may be asked (its capabilities) and bounds
// the wait; the edge does the asking, through gateway.Request.Input, which
// it offers only to requests answered as a stream (a JSON answer has no
// room for a request before the response):
//
//	POST tools/call (id 7) ─► stream 3: [3_1 priming]
//	core: Input(elicitation/create) ─► [3_2 {"id":"mcpgw-1","method":"elicitation/create",…}]
//	POST {"id":"mcpgw-1","result":{…}} ─► 202; Input returns the result
//	                                   ─► [3_3 response to 7] ─► done
//
// The request is an event of the call's own stream (MCP 2025-11-25,
// basic/transports: it relates to the originating request), so it is
// buffered and replayed on resume like any other: one sent while the
// connection is gone reaches the client when it resumes. Its id is the
// gateway's own, "mcpgw-<n>" with n counting per session; the client's
// response, POSTed on the session, is routed by that id to the waiting
// Input (a result is returned as it is, an error response as the client's
// *jsonrpc.Error). A response with an id the session did not issue, one
// already answered or cancelled, or posted on another session (even the
// same principal's) reaches nothing: it gets 202 like every response and
// is dropped. What a client answers is never logged.
//
// When Input's context ends first (the core's input timeout, or the call
// was cancelled), the client is sent notifications/cancelled for our id on
// the same stream, with the reason "timeout" for a deadline or the edge's
// own cause, and Input returns the context's error. A call that answers
// first ends nothing: its server still waits for the answer (over stdio a
// request is only taken for a call's because that call was the one in
// flight), and a later cancellation goes on the GET stream, the call's
// being done. Ending the session fails every input request it has
// pending; while one is pending the session is not idle.
//
// An upstream session that the session owns (session_mode per_session,
// say) may also ask outside any call: on its own GET stream, or over stdio
// while no call is in flight. The core then hands the request to
// gateway.Request.SessionInput, which asks the same way on the standalone
// stream 0: our id, the answer routed back by it, notifications/cancelled
// on stream 0 when the core's context ends first (the input timeout, or
// the server cancelled its request):
//
//	upstream ─roots/list (GET stream)─► core: the session that owns it
//	   ─► SessionInput ─► [0_4 {"id":"mcpgw-2","method":"roots/list"}]
//	POST {"id":"mcpgw-2","result":{"roots":[…]}} ─► 202; back upstream
//
// A session that has not opened its GET stream yet gets stream 0 made for
// it, whose buffer keeps the request for the GET to come (clients open it
// right after initialize), bounded by the input timeout: answering for
// the client at once would lose the race between a server that asks as
// soon as it starts and a client's GET. A client's
// notifications/roots/list_changed goes to the core, which passes it on
// to the upstream sessions the session owns.
//
// # Cancellation and shutdown
//
// A call runs under a context detached from its HTTP request
// (context.WithoutCancel), so a dropped connection does not cancel it
// (MCP 2025-11-25, basic/transports). It is cancelled by
// notifications/cancelled (no response is written; its stream ends), by
// the end of its session, by Close once its drain deadline passes (the
// client then gets a JSON-RPC error saying the gateway shut down), or
// when its stream goes unresumed:
//
//	connection of stream 3 drops ─► resume window starts (ResumeWindow)
//	  GET, Last-Event-ID: 3_n before it ends ─► window stopped; a later
//	                                            drop starts a new one
//	  window ends, nobody resumed ─► the stream's calls are cancelled with
//	                                 the cause "the call's stream was not
//	                                 resumed within the resume window";
//	                                 the core cancels them upstream
//
// The janitor checks the windows, so one may run over by up to a quarter
// of ResumeWindow (at most 30s); a resume that arrives after its window
// ended is too late even if the janitor has not looked yet: it cancels the
// calls and gets what the stream still holds. A call runs on its POST's
// handler goroutine (those of a batch, on goroutines of their own), which
// returns once the call is over even when its connection went earlier;
// Close waits for every call.
//
// # Batches
//
// Only 2025-03-26 sessions may POST a JSON-RPC batch (that revision allows
// them; later ones removed them). A batch never holds initialize. A batch
// of notifications and responses gets 202. A batch with more requests than
// a session may have in flight (MaxInFlight) is refused whole before any
// of it is acted on: 400 with one JSON-RPC error, id null, -31003 (as a
// lone request over the cap gets) with data.limit naming the cap.
// Requests in a batch run concurrently; if all are answered by the
// gateway itself the answer is a JSON array of their responses,
// otherwise one SSE stream carries each response as its own event, in the
// order they finish, and ends after the last: every request gets exactly
// one response.
//
// # Per-version results
//
// The core returns the newest shape. For 2025-06-18 the edge drops tools'
// icons and execution; for 2025-03-26 also their outputSchema, title and
// _meta, and in tools/call results structuredContent, with each
// resource_link block turned into a text block "<title or name>: <uri>".
// 2025-11-25 results pass byte for byte. Everything not removed passes
// through untouched (internal/rawjson).
package legacy
