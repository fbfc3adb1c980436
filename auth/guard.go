package auth

import (
	"fmt"
	"net/http"
)

// The checks a request passes before anything reads it: where it says it
// is going and where it comes from (HostCheck), and how its body is
// framed (RequireContentLength).

// HostCheck refuses requests whose Host the gateway does not answer to
// (DNS rebinding: a page of another site whose name now points at the
// gateway) or whose Origin it does not trust (a browser page of another
// site), as MCP 2025-11-25 (basic/transports, Security Warning) asks of
// the MCP endpoint. A request without Origin passes: only browsers send
// one, and other clients are not subject to it. The zero HostCheck lets
// everything through.
type HostCheck struct {
	// AllowHost reports whether a Host header value (host or host:port,
	// as the client sent it) may pass. Nil allows every host.
	AllowHost func(host string) bool
	// AllowOrigin reports whether an Origin header value may pass. Nil
	// allows every origin: the check is then of Host only, for what
	// hosts fetch from pages of any origin (media links).
	AllowOrigin func(origin string) bool
	// OnRefuse writes the answer to a request that Middleware or Admit
	// refuses: status 403 and a body saying msg, which is safe to show.
	// The MCP edge writes a JSON-RPC error, the admin API its own error
	// shape; nil writes plain text.
	OnRefuse func(w http.ResponseWriter, r *http.Request, status int, msg string)
}

// Check returns nil when r may pass, else an error whose text tells the
// client what was refused and which setting decides it.
func (c *HostCheck) Check(r *http.Request) error {
	if c.AllowHost != nil && !c.AllowHost(r.Host) {
		return fmt.Errorf("host %q is not allowed: reach the gateway by its public address (see allowed_hosts)", r.Host)
	}
	if c.AllowOrigin == nil {
		return nil
	}
	if origin := r.Header.Get("Origin"); origin != "" && !c.AllowOrigin(origin) {
		return fmt.Errorf("origin %q is not allowed to use this gateway (see allowed_origins)", origin)
	}
	return nil
}

// Admit reports whether r may pass (Check); when it may not, it has
// answered 403 with OnRefuse's body. It is Middleware for a handler that
// has more to check before it goes on (the MCP edge's guard), so that
// every refusal of a Host or Origin is written here.
func (c *HostCheck) Admit(w http.ResponseWriter, r *http.Request) bool {
	if err := c.Check(r); err != nil {
		refuse(w, r, c.OnRefuse, http.StatusForbidden, err.Error())
		return false
	}
	return true
}

// Middleware passes on the requests Check lets through and answers the
// others 403 with OnRefuse's body.
func (c *HostCheck) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.Admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// TransferEncodingRefused is the message of RequireContentLength's
// refusal.
const TransferEncodingRefused = "request bodies must carry Content-Length; Transfer-Encoding is not accepted"

// RequireContentLength returns middleware that refuses every request
// framed by Transfer-Encoding: 400 with onRefuse's body (nil: plain text)
// and Connection: close, and the body is never read. net/http serves a
// request that carries both Content-Length and Transfer-Encoding: chunked
// by the chunks, drops the Content-Length and keeps the connection, so
// the bytes after the last chunk would be read as the next request: a
// request smuggled past any front end that framed the body by its
// Content-Length (RFC 9112, section 6.1, asks a server to refuse such a
// request and close the connection). Once net/http has dropped the
// Content-Length, a handler cannot tell that request from a plain chunked
// one, so both are refused: MCP clients send Content-Length. Closing the
// connection after the answer is what keeps a smuggled request from
// being read.
func RequireContentLength(onRefuse func(w http.ResponseWriter, r *http.Request, status int, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.TransferEncoding) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Connection", "close")
			refuse(w, r, onRefuse, http.StatusBadRequest, TransferEncodingRefused)
		})
	}
}

// refuse writes a refusal with onRefuse, or as plain text when it is nil.
func refuse(w http.ResponseWriter, r *http.Request, onRefuse func(http.ResponseWriter, *http.Request, int, string), status int, msg string) {
	if onRefuse != nil {
		onRefuse(w, r, status, msg)
		return
	}
	http.Error(w, msg, status)
}
