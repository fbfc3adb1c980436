package h1

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// parseRequest parses hdr, a request's header up to and with its empty
// line (headerEnd's bytes), into the request that http.ReadRequest and
// then net/http's server would give a handler: its Host taken out of the
// header into r.Host, duplicate Content-Lengths merged, Pragma's no-cache
// copied to Cache-Control, Close from the Connection header. Its Body,
// context and RemoteAddr are the caller's to set.
//
// It takes only the requests the fast path serves, the ones that MCP
// clients send: a POST over HTTP/1.1 to an origin-form target, one valid
// Host, and a Content-Length or no body. It reports false for anything
// else, and for any request that either of net/http's parsers would
// reject or read otherwise (a folded line, a space before a colon, an
// empty name, a Transfer-Encoding, Expect or Upgrade): such a request
// goes to net/http. FuzzParseRequest holds every request it takes to
// what net/http makes of it.
//
// It costs one string for the whole header, which the target and the
// values are cut from, one map and one slice of values; a name is cut
// from the header as well when it is sent in canonical form, and a
// common one is interned when it is not.
func parseRequest(hdr []byte) (*http.Request, bool) {
	// The request line: "POST " target " HTTP/1.1".
	eol := bytes.IndexByte(hdr, '\n')
	if eol < 0 {
		return nil, false
	}
	line := hdr[:eol]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	const method, proto = "POST ", " HTTP/1.1"
	if len(line) < len(method)+1+len(proto) ||
		string(line[:len(method)]) != method || string(line[len(line)-len(proto):]) != proto {
		return nil, false
	}
	target := line[len(method) : len(line)-len(proto)]
	if target[0] != '/' {
		return nil, false // "*", or absolute form: its authority is net/http's to judge
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return nil, false
		}
	}
	s := string(hdr) // what every string below is cut from
	rest := s[eol+1:]
	uri := s[len(method) : len(method)+len(target)]
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, false
	}

	lines := max(bytes.Count(hdr[eol+1:], []byte{'\n'})-1, 0)
	h := make(http.Header, lines)
	strs := make([]string, lines) // one value per name, as most are
	var host string
	hosts := 0
	special := false // one of the names looked up below was sent
	for {
		eol := strings.IndexByte(rest, '\n')
		if eol < 0 {
			return nil, false
		}
		line := rest[:eol]
		rest = rest[eol+1:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if line == "" {
			break
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
			return nil, false // no name, or a line folded into the one before
		}
		key, ok := canonicalKey(line[:colon])
		if !ok {
			return nil, false
		}
		v := line[colon+1:]
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return nil, false
			}
		}
		v = trimSpace(v)
		switch key {
		case "Host":
			host = v
			hosts++
			continue
		case "Transfer-Encoding", "Expect", "Upgrade":
			return nil, false
		case "Content-Length", "Pragma", "Connection":
			special = true
		}
		vv := h[key]
		if vv == nil && len(strs) > 0 {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = v
		} else {
			vv = append(vv, v)
		}
		h[key] = vv
	}
	if hosts != 1 || !httpguts.ValidHostHeader(host) {
		return nil, false
	}
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       host,
		RequestURI: uri,
	}
	if !special {
		return r, true
	}
	if cl := h["Content-Length"]; len(cl) > 0 {
		first := textproto.TrimString(cl[0])
		for _, v := range cl[1:] {
			if textproto.TrimString(v) != first {
				return nil, false
			}
		}
		if len(cl) > 1 {
			h["Content-Length"] = []string{first}
		}
		if first == "" {
			return nil, false
		}
		n, err := strconv.ParseUint(first, 10, 63)
		if err != nil {
			return nil, false
		}
		r.ContentLength = int64(n)
	}
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	r.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	return r, true
}

// canonicalKey returns k in canonical form, as textproto's reader gives
// it, or false when k is not a token (net/http then either rejects the
// line or keeps the name as it was sent, for its server to reject).
func canonicalKey(k string) (string, bool) {
	canonical := true
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !httpguts.IsTokenRune(rune(c)) {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return k, true
	}
	if len(k) > 64 {
		return textproto.CanonicalMIMEHeaderKey(k), true
	}
	var buf [64]byte
	b := buf[:len(k)]
	upper = true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
		upper = c == '-'
	}
	if v, ok := commonKeys[string(b)]; ok {
		return v, true
	}
	return string(b), true
}

// commonKeys interns the names MCP clients send, for those that send them
// in lower case (as fetch does).
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type",
		"Cookie", "Host", "Last-Event-Id", "Mcp-Method", "Mcp-Name",
		"Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Pragma", "Referer",
		"Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Traceparent",
		"Tracestate", "Baggage", "User-Agent", "X-Forwarded-For",
		"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// trimSpace trims spaces and tabs, as textproto does a header value.
func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}
