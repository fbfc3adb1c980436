package gateway

import (
	"fmt"
	"regexp"
	"strings"
)

// Resource URIs of different servers can clash (two servers with file:///),
// so a server's URIs may be exposed namespaced (DESIGN decision 7):
//
//	<prefix>+<server>+<original URI>      e.g.  mcp+files+file:///srv/a.txt
//
// The form round-trips: server names are [a-z0-9-] and never hold "+", so
// the first "+" after the prefix ends the server name and the rest is the
// original URI, byte for byte. It is itself a URI whose scheme
// ("mcp+files+file") is valid, because the prefix starts with a letter.
// Templates are namespaced the same way and stay templates.
//
// The prefix and the server are part of the scheme, which is
// case-insensitive (RFC 3986 §3.1): MCP+Files+file:///a names the files
// server as mcp+files+file:///a does. Whether a URI is namespaced is
// decided on its normalized form (splitNamespaced), so that no spelling
// of a URI routes elsewhere than another, and a server's own URI that
// reads as namespaced in any spelling is itself listed namespaced
// (catalog.exposedNamespaced).

// namespacedURI returns the exposed form of a server's URI.
func namespacedURI(prefix, server, uri string) string {
	return prefix + "+" + server + "+" + uri
}

// parseNamespaced splits a URI in the namespaced form, the prefix and the
// server in any case, into the server (in lowercase) and the original
// URI. ok is false when uri is not in the namespaced form.
func parseNamespaced(prefix, uri string) (server, orig string, ok bool) {
	if len(uri) <= len(prefix) || !strings.EqualFold(uri[:len(prefix)], prefix) || uri[len(prefix)] != '+' {
		return "", "", false
	}
	server, orig, ok = strings.Cut(uri[len(prefix)+1:], "+")
	server = strings.ToLower(server)
	if !ok || server == "" || !validServerName(server) {
		return "", "", false
	}
	return server, orig, true
}

// splitNamespaced is parseNamespaced of uri in any spelling: uri is in the
// namespaced form when its normalized form is. orig is then the original
// URI as uri spells it, when uri starts with the prefix and server in
// some case; else (a URI without a ":" whose prefix or server
// percent-encodes a letter) as the normalized form spells it.
func splitNamespaced(prefix, uri string) (server, orig string, ok bool) {
	if server, orig, ok = parseNamespaced(prefix, uri); ok {
		// Normalizing changes no letter and no "+" of a URI's scheme
		// but its case, so the normalized form is namespaced too.
		return server, orig, true
	}
	return parseNamespaced(prefix, normalizeURI(uri))
}

func validServerName(s string) bool {
	if len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Resource URIs are compared, routed and checked against access rules in
// one normalized form, so that a client cannot reach a resource under a
// spelling that a rule or the routing tables did not foresee
// (mcp+files+file:///secret/./key for file:///secret/key).
//
// normalizeURI is RFC 3986's syntax-based normalization (§6.2.2), and only
// that, so that the URI it gives names the same resource as the one it
// was given on every server:
//
//   - the scheme and the host in lowercase (§6.2.2.1);
//   - percent-encodings with uppercase hex digits, and those of unreserved
//     characters (A-Z a-z 0-9 - . _ ~) decoded (§6.2.2.1, §6.2.2.2); "%2F"
//     and every other reserved character stay encoded (which is why
//     unsafeURI refuses a made-up URI with "%2F" in its path);
//   - the dot segments of a path that starts with "/" removed (§6.2.2.3,
//     §5.2.4), after the decoding, so that %2E%2E is a dot segment too.
//
// A URI without a scheme, or with a path that does not start with "/"
// (urn:isbn:0451450523, data:,x, mailto:a@b), gets the percent-encoding
// step only: its path is opaque. Userinfo, port, query and fragment keep
// their case. A "%" that starts no percent-encoding (which RFC 3986 does
// not allow) is taken for itself and encoded, as %25.
// normalizeURI(normalizeURI(u)) == normalizeURI(u) for every string.
func normalizeURI(uri string) string {
	sch := scheme(uri)
	if sch == "" {
		// Decoded, what precedes a ":" could become a scheme
		// ("a%2Eb:x"): it gets its hex digits uppercased only.
		if i := strings.IndexByte(uri, ':'); i >= 0 {
			return upperPercent(uri[:i]) + normalizePercent(uri[i:], false)
		}
		return normalizePercent(uri, false)
	}
	rest := uri[len(sch)+1:]
	var b strings.Builder
	b.Grow(len(uri))
	b.WriteString(sch)
	b.WriteByte(':')
	hasAuthority := strings.HasPrefix(rest, "//")
	if hasAuthority {
		end := len(rest)
		if i := strings.IndexAny(rest[2:], "/?#"); i >= 0 {
			end = 2 + i
		}
		b.WriteString("//")
		b.WriteString(normalizeAuthority(rest[2:end]))
		rest = rest[end:]
	}
	p, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		p, tail = rest[:i], rest[i:]
	}
	p = normalizePercent(p, false)
	if strings.HasPrefix(p, "/") {
		p = removeDotSegments(p)
		if !hasAuthority && strings.HasPrefix(p, "//") {
			// Without an authority, a path that now starts with "//"
			// would read as one (RFC 3986 §3.3): keep it a path.
			p = "/." + p
		}
	}
	b.WriteString(p)
	b.WriteString(normalizePercent(tail, false))
	return b.String()
}

// aclKey is the stricter form of a URI that deny rules are also matched
// against: normalizeURI's, with repeated slashes of a path that starts
// with "/" collapsed and its trailing slashes dropped. These are not
// RFC 3986 equivalences (a server may tell a//b from a/b), so the gateway
// never forwards this form; but most servers resolve them to one
// resource, and a deny rule must hold for all of them.
func aclKey(uri string) string {
	n := normalizeURI(uri)
	start := 0
	if sch := scheme(n); sch != "" {
		start = len(sch) + 1
		if strings.HasPrefix(n[start:], "//") {
			start += 2
			if i := strings.IndexAny(n[start:], "/?#"); i >= 0 {
				start += i
			} else {
				start = len(n)
			}
		}
	}
	end := len(n)
	if i := strings.IndexAny(n[start:], "?#"); i >= 0 {
		end = start + i
	}
	p := n[start:end]
	if !strings.HasPrefix(p, "/") {
		return n
	}
	// normalizeURI's "/." before a path that starts with "//" and has no
	// authority: collapsed, that path keeps no "//".
	if strings.HasPrefix(p, "/.//") {
		p = p[2:]
	}
	var b strings.Builder
	b.Grow(len(n))
	b.WriteString(n[:start])
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && (i+1 == len(p) || p[i+1] == '/') {
			continue // a repeated or a trailing slash
		}
		b.WriteByte(p[i])
	}
	b.WriteString(n[end:])
	return b.String()
}

// A resource URI that a client makes up is forwarded only when the server
// would read the path the gateway routed and checked: normalization keeps
// "%2F" encoded (RFC 3986: it is data, not a "/"), so
// file:///public/..%2Fsecret matches an allow rule for file:///public/*
// and the template file:///public/{name}, yet a server that decodes its
// path before using it (Go's url.Parse().Path, Python's unquote) reads
// /secret. unsafeURI names such a URI's problem:
//
//   - a "\", raw or encoded (%5C): WHATWG URL parsers and Windows take it
//     for "/";
//   - an encoded "/" (%2F, or encoded again: %252F);
//   - a "." or ".." segment once the path is percent-decoded as many
//     times as it holds encodings (%252E%252E), or in an opaque path
//     (notes:a/../b), which normalization leaves alone.
//
// It looks at the authority and the path, which servers map onto names;
// the query and fragment are the server's to read. A URI its server lists
// (or showed in a result) is the server's own and is not checked
// (resources.go): the check costs only made-up URIs that encode a "/" on
// purpose, such as an RFC 6570 {name} expansion of a value with a "/".

// maxDecodes bounds how many times unsafeURI percent-decodes a path: no
// real URI is encoded that deep, and each round is a pass over the path.
const maxDecodes = 8

// unsafeURI returns what makes uri unsafe to forward (client-safe words,
// quoting nothing of uri), or "" when nothing does.
func unsafeURI(uri string) string {
	hier := uri
	if sch := scheme(uri); sch != "" {
		hier = uri[len(sch)+1:]
	}
	if i := strings.IndexAny(hier, "?#"); i >= 0 {
		hier = hier[:i]
	}
	if strings.IndexByte(hier, '\\') >= 0 {
		return `its path holds a "\", which some servers take for "/"`
	}
	decoded := hier
	for n := 0; ; n++ {
		next := percentDecode(decoded)
		if next == decoded {
			break
		}
		if n == maxDecodes {
			return fmt.Sprintf("its path is percent-encoded more than %d times", maxDecodes)
		}
		decoded = next
	}
	switch {
	case strings.Count(decoded, "/") > strings.Count(hier, "/"):
		return `its path holds an encoded "/" (%2F), which a server may decode into another path`
	case strings.IndexByte(decoded, '\\') >= 0:
		return `its path holds an encoded "\" (%5C), which some servers take for "/"`
	}
	for seg := range strings.SplitSeq(decoded, "/") {
		if seg == "." || seg == ".." {
			return `its path holds a dot segment ("." or "..") once percent-decoded, which a server may resolve to another path`
		}
	}
	return ""
}

// percentDecode decodes every percent-encoding of s once, and leaves a "%"
// that starts none as it is.
func percentDecode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// normalizeAuthority lowercases the host of an authority
// ([userinfo@]host[:port]) and normalizes the percent-encodings of all of
// it.
func normalizeAuthority(a string) string {
	userinfo, host := "", a
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		userinfo, host = a[:i+1], a[i+1:]
	}
	port := ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host, port = host[:i], host[i:]
	}
	return normalizePercent(userinfo, false) + normalizePercent(host, true) + normalizePercent(port, false)
}

// normalizePercent uppercases the hex digits of the percent-encodings of
// s and decodes those of unreserved characters; lower also lowercases the
// ASCII letters (a host's, which is case-insensitive).
func normalizePercent(s string, lower bool) string {
	if strings.IndexByte(s, '%') < 0 && (!lower || !hasUpper(s)) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if unreserved(d) {
				if lower {
					d = toLower(d)
				}
				b.WriteByte(d)
			} else {
				const hex = "0123456789ABCDEF"
				b.WriteByte('%')
				b.WriteByte(hex[d>>4])
				b.WriteByte(hex[d&15])
			}
			i += 2
			continue
		}
		if c == '%' {
			// A "%" that starts no percent-encoding is the character
			// itself, encoded: left bare, it could start one with the
			// characters decoded after it ("%%34%31" would become "%41").
			b.WriteString("%25")
			continue
		}
		if lower {
			c = toLower(c)
		}
		b.WriteByte(c)
	}
	return b.String()
}

// upperPercent uppercases the hex digits of the percent-encodings of s
// and encodes a "%" that starts none, decoding nothing.
func upperPercent(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '%':
			b.WriteByte(s[i])
		case i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte('%')
			b.WriteByte(toUpper(s[i+1]))
			b.WriteByte(toUpper(s[i+2]))
			i += 2
		default:
			b.WriteString("%25")
		}
	}
	return b.String()
}

// removeDotSegments is RFC 3986 §5.2.4's algorithm, for a path that starts
// with "/".
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	out := make([]string, 0, strings.Count(p, "/"))
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "") // "/a/." is "/a/"
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func toUpper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// scheme returns the scheme of a URI or URI template (what precedes the
// first ":"), lowercased, or "" when it has none.
func scheme(uri string) string {
	i := strings.IndexByte(uri, ':')
	if i <= 0 {
		return ""
	}
	s := uri[:i]
	for j := 0; j < len(s); j++ {
		c := s[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(s)
}

// template is a compiled RFC 6570 URI template, for routing a concrete URI
// to the server whose template it matches. Matching is a routing aid, not
// a full reverse expansion: each expression matches what its operator can
// expand to. It matches normalized URIs (normalizeURI): it is compiled
// from the normalized template.
type template struct {
	raw  string // as the server gives it
	norm string // normalizeURI(raw)
	re   *regexp.Regexp
}

// compileTemplate compiles t; a malformed template (an unclosed brace)
// gives one that matches nothing.
func compileTemplate(t string) *template {
	norm := normalizeURI(t)
	out := &template{raw: t, norm: norm}
	var b strings.Builder
	b.WriteString("^")
	rest := norm
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return out
		}
		expr := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		op := byte(0)
		if expr != "" && strings.IndexByte("+#./;?&", expr[0]) >= 0 {
			op = expr[0]
		}
		switch op {
		case 0:
			b.WriteString(`[^/?#]*`)
		case '+':
			b.WriteString(`[^#]*`)
		case '#':
			b.WriteString(`(?:#.*)?`)
		case '.':
			b.WriteString(`(?:\.[^/?#]*)*`)
		case '/':
			b.WriteString(`(?:/[^?#]*)*`)
		case ';':
			b.WriteString(`(?:;[^/?#]*)*`)
		case '?', '&':
			b.WriteString(`(?:[?&][^#]*)?`)
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return out
	}
	out.re = re
	return out
}

// match reports whether the normalized URI uri is an expansion of the
// template.
func (t *template) match(uri string) bool {
	return t.re != nil && t.re.MatchString(uri)
}
