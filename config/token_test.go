package config

import (
	"crypto/sha256"
	"strings"
	"testing"
)

func TestParseTokenHash(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	hashed := HashToken("s3cret")
	for _, tt := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"HashToken's form", hashed, true},
		{"upper-case hex", "sha256:" + strings.ToUpper(strings.TrimPrefix(hashed, "sha256:")), true},
		{"no prefix", strings.TrimPrefix(hashed, "sha256:"), false},
		{"other algorithm", "sha512:" + strings.TrimPrefix(hashed, "sha256:"), false},
		{"short", hashed[:len(hashed)-2], false},
		{"long", hashed + "00", false},
		{"not hex", hashed[:len(hashed)-1] + "g", false},
		{"the token itself", "s3cret", false},
		{"empty", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseTokenHash(tt.in)
			if ok != tt.ok {
				t.Fatalf("ParseTokenHash(%q) ok = %t, want %t", tt.in, ok, tt.ok)
			}
			if ok && got != sum {
				t.Errorf("ParseTokenHash(%q) = %x, want %x", tt.in, got, sum)
			}
		})
	}
}
