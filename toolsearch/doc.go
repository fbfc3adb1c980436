// Package toolsearch ranks the gateway's merged tools for a query.
//
// It exists for the search exposure mode, where a client lists a few
// gateway tools instead of hundreds and finds the rest with search_tools:
// the gateway keeps an Index of every tool it exposes and asks it for the
// caller's best matches.
//
// # What is indexed
//
// Each Tool is indexed under five fields, read from its definition (Raw)
// without re-encoding it (DESIGN decision 1):
//
//	name         the exposed name, split on "__", "_", "-" and camelCase   weight 3
//	title        title, and annotations.title if it differs                weight 3
//	description  description                                               weight 1.5
//	params       inputSchema properties: names, titles, descriptions;      weight 1
//	             one level down for object and array-of-object parameters
//	server       the server's name                                         weight 1
//
// Text is split into words of letters and digits, lowered, stripped of a
// short list of English stop words and of plural endings (stem). A query
// is split the same way.
//
// # Ranking
//
// Search scores with BM25F: per query term, the term's counts in a
// tool's fields are weighted, normalized by field length, added up and
// saturated once (k1), then multiplied by the term's rarity over the whole
// index (idf). A term counts at most twice per field, so repeating it
// gains an upstream nothing. The visible filter is applied while taking
// the best candidates off a heap, before the limit: a hidden tool is
// never returned and never takes a visible one's place. Equal scores are
// ordered by name.
//
// Ranking by words has a limit no filter removes: an upstream can list
// many words agents search for in its descriptions and rank its tools
// higher for them. What an agent can call stays bounded by visible, and
// which upstreams are there is the operator's choice.
//
// # Updates
//
// The index is copy-on-write, per server (as the gateway's catalog is,
// DESIGN decision 6):
//
//	SetServers({a: tools, b: nil})
//	  │ build a segment per server given (terms → postings), outside the lock;
//	  │ any bad tool: return its error, change nothing
//	  ▼
//	lock ─► new snapshot = old segments − replaced + built, sorted by server
//	      ─► check exposed names are unique ─► atomic swap ─► unlock
//
//	Search ─► load the current snapshot ─► score over its segments
//
// A snapshot is never changed once swapped in, so a search sees one
// consistent state, takes no lock and never waits for an update. An
// update costs a rebuild of the servers it names, not of the index;
// document frequencies and average field lengths, which every server
// shares, are summed over the segments at search time. SetServers
// replaces several servers in one step, for start-up and for renames
// that move an exposed name from one server to another.
package toolsearch
