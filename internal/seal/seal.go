// Package seal makes and opens the sealed tokens mcpgw hands to clients:
// session ids now, and later cursors, task ids and modern requestState
// (DESIGN decision 4). A token is AES-256-GCM over a small payload, keyed by
// a key derived from the configured secret and the token's purpose, so a
// client can neither read, forge nor move a token from one use to another,
// and any replica with the same secret can open it.
//
// It is a leaf package of its own because both edges and the core seal
// tokens, and the crypto deserves one small, tested place.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// MinSecretLen is the shortest secret New accepts.
const MinSecretLen = 32

// ErrInvalid is returned by Open for a token that was not sealed by this
// Sealer (forged, truncated, another purpose or another secret).
var ErrInvalid = errors.New("invalid token")

// Sealer seals and opens tokens of one purpose. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for purpose (such as "session") keyed by secret,
// which must be at least MinSecretLen bytes.
func New(secret []byte, purpose string) (*Sealer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("secret must be at least %d bytes", MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "mcpgw seal v1: "+purpose, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// RandomSecret returns a fresh random secret, for a gateway started without
// one (its tokens then die with the process).
func RandomSecret() []byte {
	b := make([]byte, MinSecretLen)
	rand.Read(b)
	return b
}

// Seal returns payload sealed as URL-safe base64 text, which is visible
// ASCII and so fits in an Mcp-Session-Id header.
func (s *Sealer) Seal(payload []byte) string {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(payload)+s.aead.Overhead())
	rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, payload, nil)
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the payload of a token made by Seal, or ErrInvalid.
func (s *Sealer) Open(token string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, ErrInvalid
	}
	ns := s.aead.NonceSize()
	if len(raw) < ns+s.aead.Overhead() {
		return nil, ErrInvalid
	}
	payload, err := s.aead.Open(nil, raw[:ns], raw[ns:], nil)
	if err != nil {
		return nil, ErrInvalid
	}
	return payload, nil
}
