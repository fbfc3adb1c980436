package auth

import "strings"

// parseBearer returns the token of an Authorization header value of the
// Bearer scheme (RFC 6750, section 2.1). It follows RFC 9110, section
// 11.4: the scheme is case-insensitive and the token is a token68
// (letters, digits, "-._~+/", then any "="s) after at least one space; it
// also takes tabs there and around the value, which net/http may leave.
// Anything else (another scheme, auth-params, a comma, a second token) is
// not ok.
func parseBearer(header string) (token string, ok bool) {
	h := strings.Trim(header, " \t")
	if len(h) < len("Bearer") || !strings.EqualFold(h[:len("Bearer")], "Bearer") {
		return "", false
	}
	rest := h[len("Bearer"):]
	token = strings.TrimLeft(rest, " \t")
	if len(token) == len(rest) || !isToken68(token) {
		return "", false
	}
	return token, true
}

// isToken68 reports whether s is a non-empty token68 (RFC 9110, section
// 11.2): 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}
