package gateway

import (
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

// namespacedURI returns the exposed form of a server's URI.
func namespacedURI(prefix, server, uri string) string {
	return prefix + "+" + server + "+" + uri
}

// parseNamespaced splits an exposed namespaced URI into server and original
// URI. ok is false when uri is not in the namespaced form.
func parseNamespaced(prefix, uri string) (server, orig string, ok bool) {
	rest, ok := strings.CutPrefix(uri, prefix+"+")
	if !ok {
		return "", "", false
	}
	server, orig, ok = strings.Cut(rest, "+")
	if !ok || server == "" || !validServerName(server) {
		return "", "", false
	}
	return server, orig, true
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
// expand to.
type template struct {
	raw string
	re  *regexp.Regexp
}

// compileTemplate compiles t; a malformed template (an unclosed brace)
// gives nil, which matches nothing.
func compileTemplate(t string) *template {
	var b strings.Builder
	b.WriteString("^")
	rest := t
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil
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
		return nil
	}
	return &template{raw: t, re: re}
}

// match reports whether uri is an expansion of the template.
func (t *template) match(uri string) bool {
	return t != nil && t.re.MatchString(uri)
}
