// Command measure prints what the search exposure mode saves and how well
// tool search finds the right tool, on a catalog of real MCP servers' tool
// lists (bench/toolsearch/catalog) and sets of natural-language requests
// (bench/toolsearch/*.json; QUERIES.md).
//
//	catalog/<server>.json ─▶ exposed names (naming, gateway defaults)
//	                          │
//	                          ├─▶ the all-mode tools/list result ─┐
//	-search-list FILE ────────┼─▶ the search-mode result ─────────┼─▶ bytes, tokens, ratio
//	                          └─▶ Rankers ◀── query sets ─────────┴─▶ recall@5, MRR@10 per ranker and set
//
// The all-mode listing is built as the gateway serves it on its defaults to
// a 2025-11-25 client: every tool renamed "mcp__<server>__<tool>" by the
// naming package, execution.taskSupport set as the gateway hosts tasks by
// default, all other bytes as the server sent them, sorted by exposed name,
// in one {"tools":[...]} object. Tokens are counted on that JSON text with
// an offline BPE encoding (o200k_base, the GPT-4o family, and cl100k_base,
// the GPT-4 family); a host that turns the list into its own tool format
// spends a similar, not identical, count.
//
// Retrieval is measured through the Ranker interface, by default for
// every ranker of the rankers table on every query set: "baseline" is
// plain term overlap weighted by rarity, the floor; "toolsearch" is the
// gateway's own. A set is a JSON array of {query, expect}, or of
// {request, query, expect} where an agent wrote query for the user's
// request.
//
// Usage, from the module root:
//
//	go run ./bench/toolsearch/measure [-ranker baseline,toolsearch] [-queries A.json,B.json] [-search-list FILE] [-v]
package main
