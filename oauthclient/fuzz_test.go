package oauthclient

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParseChallenge feeds WWW-Authenticate values of a hostile server.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		`Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="a b"`,
		`Bearer error="insufficient_scope", scope="read write", Basic realm="x"`,
		`Bearer error=invalid_token`, `Bearer`, `,,,`, `Bearer scope="`, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ch := parseChallenge(http.Header{"Www-Authenticate": {v}})
		for _, s := range ch.Scopes {
			if s == "" || strings.ContainsAny(s, " \t") {
				t.Fatalf("scope %q from %q", s, v)
			}
		}
	})
}

// FuzzParseTokenResponse feeds token endpoint answers of a hostile
// authorization server: a token or an error, never a panic, and an error's
// text stays printable and short.
func FuzzParseTokenResponse(f *testing.F) {
	f.Add(200, `{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r","scope":"x y"}`)
	f.Add(400, `{"error":"invalid_grant","error_description":"gone"}`)
	f.Add(200, `{"access_token":"a","expires_in":99999999999999999999}`)
	f.Add(200, `{"access_token":"a","expires_in":"7"}`)
	f.Add(500, `not json`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		tok, err := parseTokenResponse(status, []byte(body), time.Unix(0, 0))
		if err == nil {
			if tok.AccessToken == "" {
				t.Fatal("a token without an access token")
			}
			return
		}
		if msg := err.Error(); len(msg) > 400 || strings.ContainsAny(msg, "\r\n\x00") {
			t.Fatalf("error text %q", msg)
		}
	})
}
