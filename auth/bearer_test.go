package auth

import (
	"strings"
	"testing"
)

func TestParseBearer(t *testing.T) {
	tests := []struct {
		header string
		token  string // "" when not ok
	}{
		{"Bearer abc", "abc"},
		{"bearer abc", "abc"},
		{"BEARER abc", "abc"},
		{"Bearer   abc", "abc"},
		{"Bearer\tabc", "abc"},
		{" Bearer abc \t", "abc"},
		{"Bearer a-b.c_d~e+f/g==", "a-b.c_d~e+f/g=="},
		{"Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjIn0.c2ln", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjIn0.c2ln"},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"Bearerabc", ""},
		{"Bearer=abc", ""},
		{"Basic YWxpY2U6eA==", ""},
		{"Bearer a b", ""},
		{"Bearer a,b", ""},
		{"Bearer a=b", ""},
		{"Bearer ==", ""},
		{`Bearer realm="x"`, ""},
		{"Bearer abc\x00", ""},
		{"Bearer ab\rc", ""},
		{"Bearer ab\nc", ""},
		{"Bearer äbc", ""},
		{"Bearer\vabc", ""},
		{"Bear abc", ""},
		{"", ""},
	}
	for _, tt := range tests {
		tok, ok := parseBearer(tt.header)
		if tok != tt.token || ok != (tt.token != "") {
			t.Errorf("parseBearer(%q) = %q, %v; want %q", tt.header, tok, ok, tt.token)
		}
	}
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Bearer  x==", "Basic x", "Bearer a b", "Bearer\t=", " Bearer y ", "Bearer ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := parseBearer(header)
		if !ok {
			if tok != "" {
				t.Errorf("parseBearer(%q) refused but returned %q", header, tok)
			}
			return
		}
		if tok == "" {
			t.Fatalf("parseBearer(%q) accepted an empty token", header)
		}
		body := strings.TrimRight(tok, "=")
		if body == "" || strings.ContainsFunc(body, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~+/", r))
		}) {
			t.Fatalf("parseBearer(%q) = %q, not a token68", header, tok)
		}
		if again, ok := parseBearer("Bearer " + tok); !ok || again != tok {
			t.Fatalf("parseBearer(%q) = %q, %v; want %q back", "Bearer "+tok, again, ok, tok)
		}
	})
}
