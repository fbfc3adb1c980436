// Package auth says who is calling and how much they may: principals from
// API keys or OAuth 2.1 access tokens (JWTs), per-principal rate limits,
// the protected-resource metadata that tells clients where to get a
// token, and the checks every request passes before anything reads it
// (guard.go: its Host and Origin, and a body framed by Content-Length).
// It is HTTP middleware (func(http.Handler) http.Handler) that knows no
// echo and no MCP (STYLE.md); the edges mount it.
//
// For MCP 2025-11-25 (basic/authorization) the gateway is an OAuth 2.1
// resource server. A request carries "Authorization: Bearer <token>"; the
// Authenticator tries the token as an API key (by its SHA-256, so the
// lookup reveals nothing about the keys), then, when config auth.jwt names
// an issuer, as a JWT signed by one of the issuer's keys:
//
//	Authorization ──parseBearer──▶ token ──API key?──▶ Principal
//	                                  │
//	                                  └──JWS, alg allowed──▶ kid ──JWKS──▶ key
//	                                        signature, iss, aud, exp, nbf, iat
//	                                        scopes (else 403), principal claim ──▶ Principal
//
// A key's principal keeps its configured name; a token's principal and
// groups are named "jwt:<issuer>#<claim value>" (config.JWT.Qualify), so
// the two sources never share a principal, and neither do two issuers:
// whatever binds to the name (sessions, tasks, media, rate limits, access
// rules) tells them apart.
//
// A refusal is an *Error that carries its status (401, or 403 for missing
// scopes) and its WWW-Authenticate challenge, which points clients at the
// protected-resource metadata (RFC 9728) served by MetadataHandler.
//
// The issuer's keys (JWKS) are fetched lazily on the first token, kept for
// their Cache-Control max-age (bounded to [1m, 24h], else an hour), and
// fetched again early when a token names a key id the set lacks, at most
// once per 30 seconds; concurrent requests share one fetch and a failed
// fetch keeps the old keys. No goroutine is started.
package auth
