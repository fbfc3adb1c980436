package e2e

import (
	"crypto/sha256"
	"encoding/hex"
)

func hashToken(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(s[:])
}
