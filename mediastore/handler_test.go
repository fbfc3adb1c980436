package mediastore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestURL(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{Now: c.Now})
	e := mustPut(t, s, "principal:alice", "image/png", []byte("png"))
	urlKey := hmac.New(sha256.New, testSecret)
	urlKey.Write([]byte("mcpgw media url"))
	sig := func(owner, exp string) string {
		m := hmac.New(sha256.New, urlKey.Sum(nil))
		m.Write([]byte(e.ID + "\n" + owner + "\n" + exp))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	exp := strconv.FormatInt(c.Now().Add(10*time.Minute).Unix(), 10)
	tests := []struct {
		name string
		base string
		ttl  time.Duration
		want string
	}{
		{"plain", "https://gw.example", 0, "https://gw.example/media/" + e.Name()},
		{"trailing slash", "https://gw.example/", 0, "https://gw.example/media/" + e.Name()},
		{"with a path", "https://example.com/gw", 0, "https://example.com/gw/media/" + e.Name()},
		{"negative ttl", "https://gw.example", -time.Second, "https://gw.example/media/" + e.Name()},
		{"signed", "https://gw.example", 10 * time.Minute, "https://gw.example/media/" + e.Name() + "?exp=" + exp + "&sig=" + sig("principal:alice", exp)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.URL(tt.base, e, tt.ttl); got != tt.want {
				t.Errorf("URL = %s\nwant  %s", got, tt.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testHandler(t, b.open) })
	}
}

func testHandler(t *testing.T, newStore func(testing.TB, Options) *Store) {
	c := newClock()
	s := newStore(t, Options{MaxAge: time.Hour, Now: c.Now})
	pngData := []byte("\x89PNG\r\n\x1a\n0123456789")
	png := mustPut(t, s, "principal:alice", "image/png", pngData)
	pdf := mustPut(t, s, "principal:alice", "application/pdf", []byte("%PDF-1.7"))
	wav := mustPut(t, s, "principal:alice", "audio/x-wav", []byte("RIFF"))
	txt := mustPut(t, s, "principal:alice", "text/plain; charset=utf-8", []byte("hi"))
	svg := mustPut(t, s, "principal:alice", "image/svg+xml", []byte("<svg onload=alert(1)/>"))
	html := mustPut(t, s, "principal:alice", "text/html", []byte("<script>alert(1)</script>"))
	unknown := mustPut(t, s, "principal:alice", "application/x-thing", []byte("?"))
	js := mustPut(t, s, "principal:alice", "text/javascript", []byte("alert(1)"))
	bobs := mustPut(t, s, "principal:bob", "image/png", pngData)
	c.Add(10 * time.Minute) // 50 minutes left: max-age=3000
	lastMod := c.Now().Add(-10 * time.Minute).Format(http.TimeFormat)

	open := httptest.NewServer(s.Handler(HandlerOptions{}))
	defer open.Close()
	signed := httptest.NewServer(s.Handler(HandlerOptions{RequireSignature: true}))
	defer signed.Close()

	path := func(e Entry) string { return "/media/" + e.Name() }
	signedPath := func(e Entry, ttl time.Duration) string { return s.URL("", e, ttl) }
	tampered := func(p string) string {
		u, _ := url.Parse(p)
		q := u.Query()
		sig := []byte(q.Get("sig"))
		if sig[0] == 'A' {
			sig[0] = 'B'
		} else {
			sig[0] = 'A'
		}
		q.Set("sig", string(sig))
		u.RawQuery = q.Encode()
		return u.String()
	}
	// Alice's blob with a signature made for bob.
	wrongOwner := func(e Entry) string {
		other := e
		other.Owner = "principal:bob"
		return s.URL("", other, time.Hour)
	}
	withExp := func(p, exp string) string {
		u, _ := url.Parse(p)
		q := u.Query()
		q.Set("exp", exp)
		u.RawQuery = q.Encode()
		return u.String()
	}

	inlineHeaders := func(e Entry, maxAge int) map[string]string {
		return map[string]string{
			"Content-Type":            e.MIMEType,
			"Etag":                    `"` + e.ID + `"`,
			"Cache-Control":           "private, immutable, max-age=" + strconv.Itoa(maxAge),
			"X-Content-Type-Options":  "nosniff",
			"Last-Modified":           lastMod,
			"Content-Disposition":     "",
			"Content-Security-Policy": "",
		}
	}
	attachmentHeaders := func(e Entry) map[string]string {
		h := inlineHeaders(e, 3000)
		h["Content-Disposition"] = `attachment; filename="` + e.Name() + `"`
		h["Content-Security-Policy"] = "sandbox"
		return h
	}
	notFound := map[string]string{"Content-Type": "text/plain; charset=utf-8", "Content-Disposition": ""}

	tests := []struct {
		name        string
		server      *httptest.Server
		method      string
		path        string
		reqHeader   map[string]string
		advance     time.Duration // before the request, undone after it
		wantStatus  int
		wantHeaders map[string]string // "" means absent
		wantBody    string            // checked unless "-"
	}{
		{"png", open, "GET", path(png), nil, 0, 200, inlineHeaders(png, 3000), string(pngData)},
		{"HEAD", open, "HEAD", path(png), nil, 0, 200, map[string]string{"Content-Length": strconv.Itoa(len(pngData)), "Content-Type": "image/png"}, ""},
		{"range", open, "GET", path(png), map[string]string{"Range": "bytes=2-5"}, 0, 206, map[string]string{"Content-Range": "bytes 2-5/" + strconv.Itoa(len(pngData)), "Content-Type": "image/png"}, string(pngData[2:6])},
		{"suffix range", open, "GET", path(png), map[string]string{"Range": "bytes=-3"}, 0, 206, nil, "789"},
		{"bad range", open, "GET", path(png), map[string]string{"Range": "bytes=100-"}, 0, 416, nil, "-"},
		{"if-none-match", open, "GET", path(png), map[string]string{"If-None-Match": `"` + png.ID + `"`}, 0, 304, nil, ""},
		{"under a prefix", open, "GET", "/gw" + path(png), nil, 0, 200, nil, string(pngData)},
		{"pdf inline", open, "GET", path(pdf), nil, 0, 200, inlineHeaders(pdf, 3000), "%PDF-1.7"},
		{"audio inline", open, "GET", path(wav), nil, 0, 200, inlineHeaders(wav, 3000), "RIFF"},
		{"text inline", open, "GET", path(txt), nil, 0, 200, inlineHeaders(txt, 3000), "hi"},
		{"svg attachment", open, "GET", path(svg), nil, 0, 200, attachmentHeaders(svg), "-"},
		{"html attachment", open, "GET", path(html), nil, 0, 200, attachmentHeaders(html), "-"},
		{"unknown attachment", open, "GET", path(unknown), nil, 0, 200, attachmentHeaders(unknown), "?"},
		{"js attachment", open, "GET", path(js), nil, 0, 200, attachmentHeaders(js), "-"},
		{"max-age counts down", open, "GET", path(png), nil, 40*time.Minute + 500*time.Millisecond, 200, map[string]string{"Cache-Control": "private, immutable, max-age=599"}, "-"},
		{"expired", open, "GET", path(bobs), nil, 50 * time.Minute, 404, notFound, "media not found\n"},
		{"unknown id", open, "GET", "/media/" + strings.Repeat("a", 52) + ".png", nil, 0, 404, notFound, "media not found\n"},
		{"wrong ext", open, "GET", "/media/" + png.ID + ".jpg", nil, 0, 404, notFound, "media not found\n"},
		{"bad name", open, "GET", "/media/" + strings.ToUpper(png.Name()), nil, 0, 404, notFound, "media not found\n"},
		{"more segments", open, "GET", "/media/x/" + png.Name(), nil, 0, 404, notFound, "media not found\n"},
		{"trailing slash", open, "GET", path(png) + "/", nil, 0, 404, notFound, "media not found\n"},
		{"encoded slash", open, "GET", "/media/x%2F" + png.Name(), nil, 0, 404, notFound, "media not found\n"},
		{"no media", open, "GET", "/" + png.Name(), nil, 0, 404, notFound, "media not found\n"},
		{"empty name", open, "GET", "/media/", nil, 0, 404, notFound, "media not found\n"},
		{"POST", open, "POST", path(png), nil, 0, 405, map[string]string{"Allow": "GET, HEAD"}, "-"},
		{"DELETE", signed, "DELETE", path(png), nil, 0, 405, map[string]string{"Allow": "GET, HEAD"}, "-"},
		{"ignores a bad signature when not required", open, "GET", tampered(signedPath(png, time.Hour)), nil, 0, 200, nil, string(pngData)},

		{"signed ok", signed, "GET", signedPath(png, time.Hour), nil, 0, 200, inlineHeaders(png, 3000), string(pngData)},
		{"signed: max-age until the signature expires", signed, "GET", signedPath(png, 10*time.Minute), nil, 0, 200, map[string]string{"Cache-Control": "private, immutable, max-age=600"}, "-"},
		{"signature missing", signed, "GET", path(png), nil, 0, 403, map[string]string{"Content-Type": "text/plain; charset=utf-8"}, "bad or expired media signature\n"},
		{"signature tampered", signed, "GET", tampered(signedPath(png, time.Hour)), nil, 0, 403, nil, "bad or expired media signature\n"},
		{"signature expired", signed, "GET", signedPath(png, 10*time.Minute), nil, 10 * time.Minute, 403, nil, "bad or expired media signature\n"},
		{"exp changed", signed, "GET", withExp(signedPath(png, 10*time.Minute), strconv.FormatInt(c.Now().Add(time.Hour).Unix(), 10)), nil, 0, 403, nil, "bad or expired media signature\n"},
		{"exp respelt", signed, "GET", withExp(signedPath(png, 10*time.Minute), "+"+strconv.FormatInt(c.Now().Add(10*time.Minute).Unix(), 10)), nil, 0, 403, nil, "bad or expired media signature\n"},
		{"wrong owner", signed, "GET", wrongOwner(png), nil, 0, 403, nil, "bad or expired media signature\n"},
		{"another blob's signature", signed, "GET", "/media/" + pdf.Name() + "?" + strings.SplitN(signedPath(png, time.Hour), "?", 2)[1], nil, 0, 403, nil, "bad or expired media signature\n"},
		{"signed, unknown: 404 first", signed, "GET", "/media/" + strings.Repeat("a", 52) + ".png", nil, 0, 404, nil, "media not found\n"},
		{"signed HEAD", signed, "HEAD", signedPath(png, time.Hour), nil, 0, 200, map[string]string{"Content-Length": strconv.Itoa(len(pngData))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Add(tt.advance)
			defer c.Add(-tt.advance)
			req, err := http.NewRequest(tt.method, tt.server.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.reqHeader {
				req.Header.Set(k, v)
			}
			resp, err := tt.server.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tt.wantStatus, body)
			}
			got := map[string]string{}
			for k := range tt.wantHeaders {
				got[k] = resp.Header.Get(k)
			}
			if diff := cmp.Diff(tt.wantHeaders, got); len(tt.wantHeaders) > 0 && diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if tt.wantBody != "-" && string(body) != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
		})
	}
}
