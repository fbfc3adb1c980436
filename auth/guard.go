package auth

import (
	"net/http"
)

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
