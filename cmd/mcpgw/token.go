package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/mcpgw/mcpgw/config"
)

// tokenBytes is the size of a token: 256 bits, beyond guessing.
const tokenBytes = 32

// tokenAbout is the token command's own help.
const tokenAbout = `Prints a new random token, 32 bytes from the operating system's random
source written in unpadded base64url (43 characters), and its SHA-256 as the
config takes it: "sha256:" and 64 hex digits.

Give the token to whoever calls, as "Authorization: Bearer <token>": the
admin API's client, or an MCP client as its API key. Put only the hash in
the config, never the token:

  admin.tokens            admits the token to the admin API (/admin)
  auth.api_keys           admits it to /mcp as a principal's API key
`

// tokenCmd prints a new random token and its hash, with where each goes.
func tokenCmd(args []string, stdout, stderr io.Writer) error {
	if err := noFlags("token", args, stderr); err != nil {
		return err
	}
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails (crypto/rand)
	token := base64.RawURLEncoding.EncodeToString(b)
	hash := config.HashToken(token)
	_, err := fmt.Fprintf(stdout, `token: %s
hash:  %s

Give the token to the caller (Authorization: Bearer <token>); put the hash
in the config, never the token. For the admin API:

  admin:
    tokens: ["%s"]

or as the API key of a principal on /mcp:

  auth:
    api_keys:
      - {principal: NAME, key_sha256: "%s"}
`, token, hash, hash, hash)
	return err
}
