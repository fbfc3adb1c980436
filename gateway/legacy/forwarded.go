package legacy

import (
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// forwardedBaseURL returns the gateway's URL as the client reached it,
// "<X-Forwarded-Proto>://<X-Forwarded-Host>", when r comes from one of the
// trusted proxies and names a valid host; else "", and the core uses the
// configured public URL. Anybody else's X-Forwarded-* headers are ignored:
// they would let a client point other people's media links anywhere. Of a
// list ("a, b"), the first entry is the one the client's proxy saw.
func forwardedBaseURL(r *http.Request, trusted []netip.Prefix) string {
	if len(trusted) == 0 {
		return ""
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	ip := peer.Addr().Unmap()
	if !slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(ip) }) {
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

// forwardable returns a copy of a client's request header without what
// must never reach a server: its credentials and cookies. Which of the
// rest a server gets is its forward_headers' choice.
func forwardable(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		out.Del(k)
	}
	return out
}
