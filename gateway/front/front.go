package front

import (
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// ForwardedBaseURL returns the gateway's URL as the client reached it,
// "<X-Forwarded-Proto>://<X-Forwarded-Host>", when r comes from one of the
// trusted proxies and names a valid host; else "", and the core uses the
// configured public URL. Anybody else's X-Forwarded-* headers are ignored:
// they would let a client point other people's media links anywhere. Of a
// list ("a, b"), the first entry is the one the client's proxy saw.
func ForwardedBaseURL(r *http.Request, trusted []netip.Prefix) string {
	if len(trusted) == 0 {
		return ""
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !isTrusted(trusted, peer.Addr()) {
		return ""
	}
	host := firstValue(r.Header.Get("X-Forwarded-Host"))
	if host == "" {
		return ""
	}
	if u, err := url.Parse("http://" + host); err != nil || u.Host != host || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	proto := strings.ToLower(firstValue(r.Header.Get("X-Forwarded-Proto")))
	if proto != "http" && proto != "https" {
		proto = "http"
		if r.TLS != nil {
			proto = "https"
		}
	}
	return proto + "://" + host
}

// firstValue returns the first entry of a comma-separated header value.
func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

// Forwardable returns a client's request header without what must never
// reach a server: its credentials and cookies. Which of the rest a server
// gets is its forward_headers' choice. A header without them is returned
// as it is (no copy per call); else the map is new. Either way its value
// slices are the request's own, which nothing changes (it is read-only
// from here on: the upstream transports copy what they forward).
func Forwardable(h http.Header) http.Header {
	if !hasCredentials(h) {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if !isCredential(k) {
			out[k] = vs
		}
	}
	return out
}

func hasCredentials(h http.Header) bool {
	for k := range h {
		if isCredential(k) {
			return true
		}
	}
	return false
}

// isCredential reports whether the canonical header name k carries a
// client's credentials.
func isCredential(k string) bool {
	switch k {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	return false
}

// isTrusted reports whether a is one of the trusted proxies.
func isTrusted(trusted []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	return slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}

// ClientIP returns the address of the client of r, for the rate limits of
// anonymous callers: the peer, or, when the peer is a trusted proxy, the
// last address of X-Forwarded-For that is not a trusted proxy (the ones
// before it could be made up by the client).
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	client := peer.Addr().Unmap()
	if !isTrusted(trusted, client) {
		return client.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a malformed hop: trust nothing before it
		}
		client = a.Unmap()
		if !isTrusted(trusted, client) {
			break
		}
	}
	return client.String()
}

// Accepts reports whether the Accept header lists media type typ, directly
// or by a wildcard, with a non-zero quality.
func Accepts(r *http.Request, typ string) bool {
	major, _, _ := strings.Cut(typ, "/")
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			part = strings.TrimSpace(part)
			if !strings.Contains(part, ";") {
				// No parameters: a match by name is a valid media type;
				// anything else does not match anyway.
				if strings.EqualFold(part, typ) || part == "*/*" || (len(part) == len(major)+2 && strings.EqualFold(part[:len(major)], major) && part[len(major):] == "/*") {
					return true
				}
				continue
			}
			mt, params, err := mime.ParseMediaType(part)
			if err != nil {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			if mt == typ || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

// PlainID returns a request id as a span attribute shows it: a string id
// without its JSON quotes, a number as it was sent.
func PlainID(id jsonrpc.ID) string {
	raw := id.String() // the id's JSON text
	if len(raw) < 2 || raw[0] != '"' {
		return raw
	}
	if !strings.Contains(raw, `\`) {
		return raw[1 : len(raw)-1] // no escapes: no copy
	}
	if s, err := rawjson.Unquote([]byte(raw)); err == nil {
		return s
	}
	return raw
}

// jsonContentType is the Content-Type value of every JSON answer, shared:
// header values are only read once set (net/http shares its own the same
// way), and a new slice per answer was an allocation per request.
var jsonContentType = []string{"application/json"}

// WriteJSON writes a JSON answer with status and its Content-Length.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
