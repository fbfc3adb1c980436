package mediastore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
)

const (
	idLen     = 52 // base32 of 32 bytes, unpadded
	maxExtLen = 10
	// maxNameLen is the longest valid name: an id, a dot and an extension.
	maxNameLen = idLen + 1 + maxExtLen
)

// idEncoding is lowercase base32 (a-z2-7) without padding: 32 bytes become
// 52 characters that are safe in a URL path and a file name everywhere.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// mediaID returns the id of data stored by owner: the first 32 bytes of
// HMAC-SHA256(idKey, owner + "\x00" + sha256(data)), the digest raw. The
// digest has a fixed length, so the message is unambiguous whatever the
// owner contains.
func mediaID(idKey []byte, owner string, data []byte) string {
	sum := sha256.Sum256(data)
	return idFromDigest(idKey, owner, sum[:])
}

func idFromDigest(idKey []byte, owner string, digest []byte) string {
	m := hmac.New(sha256.New, idKey)
	m.Write([]byte(owner))
	m.Write([]byte{0})
	m.Write(digest)
	return idEncoding.EncodeToString(m.Sum(nil)[:32])
}

// ParseName splits a media file name, "<id>.<ext>", into its id and its
// extension. It is strict, because the name comes from a URL anybody can
// type and becomes a file name: the id is exactly 52 characters of a-z and
// 2-7, the extension 1 to 10 of a-z and 0-9, and nothing else (no slash,
// second dot, percent sign, upper case or NUL) is accepted. The error says
// what is wrong.
func ParseName(name string) (id, ext string, err error) {
	if name == "" {
		return "", "", errors.New("empty media name")
	}
	if len(name) > maxNameLen {
		return "", "", fmt.Errorf("media name is %d bytes long, longer than %d", len(name), maxNameLen)
	}
	dot := strings.IndexByte(name, '.')
	if dot < 0 {
		return "", "", errors.New("media name has no extension")
	}
	id, ext = name[:dot], name[dot+1:]
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", "", fmt.Errorf("media id has %q at byte %d; only a-z and 2-7 are allowed", c, i)
		}
	}
	if len(id) != idLen {
		return "", "", fmt.Errorf("media id is %d characters long, not %d", len(id), idLen)
	}
	if ext == "" {
		return "", "", errors.New("media name has an empty extension")
	}
	if len(ext) > maxExtLen {
		return "", "", fmt.Errorf("media extension is %d characters long, longer than %d", len(ext), maxExtLen)
	}
	for i := 0; i < len(ext); i++ {
		if c := ext[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", "", fmt.Errorf("media extension has %q at byte %d; only a-z and 0-9 are allowed", c, i)
		}
	}
	return id, ext, nil
}

// exts maps a media type (lower case, no parameters) to the extension of
// its file. The table is fixed so that a name never depends on the
// machine's mime.types.
var exts = map[string]string{
	"image/png":              "png",
	"image/jpeg":             "jpg",
	"image/gif":              "gif",
	"image/webp":             "webp",
	"image/avif":             "avif",
	"image/bmp":              "bmp",
	"image/svg+xml":          "svg",
	"image/x-icon":           "ico",
	"audio/wav":              "wav",
	"audio/x-wav":            "wav",
	"audio/wave":             "wav",
	"audio/vnd.wave":         "wav",
	"audio/mpeg":             "mp3",
	"audio/ogg":              "ogg",
	"audio/flac":             "flac",
	"audio/aac":              "aac",
	"audio/mp4":              "m4a",
	"audio/webm":             "weba",
	"video/mp4":              "mp4",
	"video/webm":             "webm",
	"application/pdf":        "pdf",
	"application/json":       "json",
	"application/zip":        "zip",
	"text/plain":             "txt",
	"text/html":              "html",
	"text/csv":               "csv",
	"text/markdown":          "md",
	"application/xml":        "xml",
	"text/xml":               "xml",
	"application/javascript": "js",
	"text/javascript":        "js",
}

// ExtFor returns the file extension for a MIME type, from a fixed table
// (image/png is "png", image/jpeg "jpg", audio/mpeg "mp3", …). Parameters
// such as ";charset=utf-8" and case are ignored; a type not in the table
// is "bin".
func ExtFor(mimeType string) string {
	if ext, ok := exts[baseType(mimeType)]; ok {
		return ext
	}
	return "bin"
}

// baseType returns a MIME type without its parameters, trimmed and in
// lower case.
func baseType(mimeType string) string {
	t, _, _ := strings.Cut(mimeType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
