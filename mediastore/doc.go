// Package mediastore keeps the images, audio and embedded blobs of tool
// results on disk and serves them at URLs of the gateway's own, so that a
// client gets a small resource_link instead of megabytes of base64.
//
// It exists for DESIGN decision 8 and PROTOCOL point 5: an MCP server
// returns media inline as base64, which bloats every message, every stored
// task result and the model's context, while hosts and Markdown renderers
// can show a URL. The gateway therefore writes each blob here (Store.Put,
// usually through Store.RewriteContent, RewriteBlock or
// RewriteResourceContents) and hands the client a resource_link to
// <public URL>/media/<id>.<ext>, which Store.Handler serves.
//
// Such URLs are fetched by hosts and renderers without the client's token,
// so the URL itself is the capability:
//
//   - An id is a keyed hash (HMAC-SHA256 under Options.Secret) of the owner
//     and the content. The same owner storing the same bytes gets the same
//     id; two owners never share one; and nobody without the secret can
//     compute an id to probe whether some content was stored.
//   - URLs may also be signed and expiring (Store.URL with a TTL, and
//     HandlerOptions.RequireSignature).
//   - Only media a browser cannot run is served inline; HTML, SVG, XML,
//     scripts and unknown types are attachments under a sandbox CSP.
//
// The store is bounded in bytes (least recently used blobs go first) and in
// age (a blob is gone MaxAge after it was last stored). Its index lives in
// memory and is rebuilt from the directory by New, so blobs survive a
// restart of the gateway.
//
// # On disk
//
// Each blob is one file, <Dir>/<id>.<ext>, mode 0600:
//
//	{"mcpgw_media":1,"mimeType":"image/png","owner":"principal:alice","stored":"2026-01-02T03:04:05.123456789Z","size":1234}\n
//	<size bytes of the blob>
//
// A one-line JSON header, then the bytes, served through an
// io.SectionReader at the header's end. A file is written under a temporary
// name (".tmp-*") and renamed into place, so a final name never holds half
// a write; its modification time is set to the time it was last stored, so
// a refresh survives a restart. New reads every file back and keeps it only
// if its header parses, its name's extension matches its MIME type, its
// length matches the header, it has not expired, and its bytes hash, with
// its owner, to the id in its name. That last check makes a crash at any
// point (even one that leaves a renamed file with lost data on a file
// system that reorders writes) unable to serve wrong bytes, and it drops
// every blob when the secret changes, which is how their URLs are revoked.
// It costs a read of the whole store at startup.
//
// One Store owns its directory: two processes must not share one.
//
// # In a shared database
//
// Replicas share no directory, so with Options.Blobs (PostgreSQL's media
// table, wired by cmd/mcpgw) the blobs live in the database and any
// replica serves any media URL. Put first touches the blob's row (its
// bytes cross the network once per content), else inserts it, then trims
// the table to MaxBytes, least recently used first; the database counts
// the bytes of all replicas, and trims that race take turns. The Handler
// and ReadFor read a blob whole (it is bounded by MaxBlobBytes, which the
// gateway sets to max_response_body: one blob in memory per request
// served) and serve it only if its owner and bytes hash to its id, as New
// checks a file; a row that does not is deleted. A read records its use
// at most once a minute. Each replica keeps the blobs it read or wrote in
// an LRU cache of CacheBytes (32 MiB by default, no blob over a quarter of
// it), each served for at most a minute before it is read again, which
// also bounds how long a replica serves a blob another one evicted. The
// sweeper deletes expired blobs every SweepInterval, whichever replica
// stored them. Stats are the table's count and bytes, as last read (by
// the replica's own puts, trims and sweeps), and this replica's counters.
package mediastore
