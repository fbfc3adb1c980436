package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	secret := bytes.Repeat([]byte("k"), 32)
	s, err := New(secret, "session")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(secret, "cursor")
	otherKey, _ := New(bytes.Repeat([]byte("x"), 32), "session")

	tok := s.Seal([]byte("payload"))
	if strings.ContainsAny(tok, "+/= ") {
		t.Errorf("token %q is not URL-safe base64", tok)
	}
	got, err := s.Open(tok)
	if err != nil || string(got) != "payload" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if tok == s.Seal([]byte("payload")) {
		t.Error("two seals of the same payload are equal; nonce not random")
	}

	tests := []struct {
		name  string
		s     *Sealer
		token string
	}{
		{"other purpose", other, tok},
		{"other secret", otherKey, tok},
		{"flipped byte", s, tok[:len(tok)-2] + flip(tok[len(tok)-2])},
		{"truncated", s, tok[:10]},
		{"not base64", s, "!!!"},
		{"empty", s, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.Open(tt.token); !errors.Is(err, ErrInvalid) {
				t.Errorf("Open = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := New([]byte("short"), "x"); err == nil {
		t.Error("New accepted a short secret")
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func FuzzOpen(f *testing.F) {
	s, _ := New(bytes.Repeat([]byte("k"), 32), "session")
	f.Add(s.Seal([]byte("x")))
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		if p, err := s.Open(token); err == nil && string(p) != "x" {
			t.Fatalf("forged token %q opened to %q", token, p)
		}
	})
}
