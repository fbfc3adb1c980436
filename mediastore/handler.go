package mediastore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// URL returns the URL of e under the gateway's baseURL (a trailing slash
// is trimmed): baseURL + "/media/" + e.Name(). When signTTL > 0 the URL
// is signed for e's owner and expires signTTL from now: it carries
// "?exp=<unix seconds>&sig=<signature>", the signature being the unpadded
// base64url of HMAC-SHA256(url key, ID + "\n" + Owner + "\n" + exp).
func (s *Store) URL(baseURL string, e Entry, signTTL time.Duration) string {
	u := strings.TrimSuffix(baseURL, "/") + "/media/" + e.Name()
	if signTTL <= 0 {
		return u
	}
	exp := strconv.FormatInt(s.now().Add(signTTL).Unix(), 10)
	return u + "?exp=" + exp + "&sig=" + base64.RawURLEncoding.EncodeToString(s.signature(e.ID, e.Owner, exp))
}

func (s *Store) signature(id, owner, exp string) []byte {
	m := hmac.New(sha256.New, s.urlKey)
	io.WriteString(m, id)
	io.WriteString(m, "\n")
	io.WriteString(m, owner)
	io.WriteString(m, "\n")
	io.WriteString(m, exp)
	return m.Sum(nil)
}

// checkSignature reports whether q carries a valid signature of e that
// has not expired at now, and when it expires. The exp is MACed as it
// was sent, so any other spelling of the same number fails.
func (s *Store) checkSignature(e Entry, q url.Values, now time.Time) (time.Time, bool) {
	exp, sig := q.Get("exp"), q.Get("sig")
	if exp == "" || sig == "" {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= n {
		return time.Time{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.signature(e.ID, e.Owner, exp)) {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// HandlerOptions configures Store.Handler.
type HandlerOptions struct {
	// RequireSignature makes a request without a valid, unexpired exp and
	// sig (see Store.URL) a 403. If false, a bare URL is enough.
	RequireSignature bool
}

// Handler serves GET and HEAD of "/media/{name}" (whatever comes before
// "/media/" in the path, so it may be mounted under a prefix); other
// methods are 405. It needs and checks no Authorization: the URL is the
// capability (see the package doc).
//
// A malformed, unknown or expired name is 404, as is a path with more
// segments after "/media/"; with RequireSignature, a known name with a
// missing, bad or expired signature is 403. On Blobs, a database that
// fails to answer is 503 with Retry-After, never 404. A blob is served with
// http.ServeContent, so Range and conditional requests work, with its MIME
// type, ETag "<id>", Last-Modified its Stored time, "Cache-Control:
// private, immutable, max-age=<seconds until it expires>" (or until the
// signature expires, if sooner) and "X-Content-Type-Options: nosniff".
// Types a browser could run (HTML, SVG, XML, scripts, JSON, anything not
// on a short allow-list of images, audio, video, PDF and plain text) are
// sent as attachments under "Content-Security-Policy: sandbox", so a media
// URL can never run script in the gateway's origin.
func (s *Store) Handler(o HandlerOptions) http.Handler {
	return &handler{s: s, o: o}
}

type handler struct {
	s *Store
	o HandlerOptions
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	_, name, ok := strings.Cut(r.URL.Path, "/media/")
	if !ok || strings.Contains(name, "/") {
		notFound(w)
		return
	}
	e, err := h.s.open(r.Context(), name, "", true)
	if errors.Is(err, errUnavailable) {
		h.s.logger.Warn("serving media failed", "name", name, "err", err)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "media store unavailable; try again", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		notFound(w)
		return
	}
	defer e.close()
	now := h.s.now()
	life := e.Stored.Add(h.s.maxAge).Sub(now)
	if h.o.RequireSignature {
		exp, ok := h.s.checkSignature(e.Entry, r.URL.Query(), now)
		if !ok {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "bad or expired media signature", http.StatusForbidden)
			return
		}
		life = min(life, exp.Sub(now))
	}
	hd := w.Header()
	hd.Set("Content-Type", e.MIMEType)
	hd.Set("ETag", `"`+e.ID+`"`)
	hd.Set("Cache-Control", "private, immutable, max-age="+strconv.FormatInt(int64(max(life, 0)/time.Second), 10))
	hd.Set("X-Content-Type-Options", "nosniff")
	if !inline(e.MIMEType) {
		hd.Set("Content-Disposition", `attachment; filename="`+e.Name()+`"`)
		hd.Set("Content-Security-Policy", "sandbox")
	}
	http.ServeContent(w, r, e.Name(), e.Stored, e.r)
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "media not found", http.StatusNotFound)
}

// inlineTypes are the types a browser shows but cannot run.
var inlineTypes = map[string]bool{
	"image/png":       true,
	"image/jpeg":      true,
	"image/gif":       true,
	"image/webp":      true,
	"image/avif":      true,
	"image/bmp":       true,
	"image/x-icon":    true,
	"application/pdf": true,
	"text/plain":      true,
}

// inline reports whether a blob of mimeType may be shown in the browser
// rather than downloaded.
func inline(mimeType string) bool {
	t := baseType(mimeType)
	return inlineTypes[t] || strings.HasPrefix(t, "audio/") || strings.HasPrefix(t, "video/")
}
