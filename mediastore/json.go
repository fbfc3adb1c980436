package mediastore

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A small scanner over JSON that the caller has checked with json.Valid.
// It hands out subslices of the input, so that a block the rewrite does
// not touch is relayed byte for byte and a megabyte of base64 is never
// copied just to be looked at. On malformed input it reports failure or
// returns spans as malformed as the input, and never panics.

// member is one member of a JSON object: its key (unquoted), its key as
// written (quotes included), and its value as written.
type member struct {
	key    string
	rawKey []byte
	val    []byte
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts with the
// quote at b[i].
func skipString(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		q := i + j
		k := q
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 { // an even number of backslashes: not escaped
			return q + 1
		}
		i = q + 1
	}
	return len(b)
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i
	}
}

// eachMember calls fn with the raw key token and the value of each member
// of the object obj, in order, until fn returns false. It reports whether
// obj was walked to its end: false for malformed input or when fn stopped.
// It allocates nothing itself.
func eachMember(obj []byte, fn func(rawKey, val []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return true
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		ke := skipString(obj, i)
		if ke <= i {
			return false
		}
		rawKey := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipSpace(obj, i+1)
		ve := skipValue(obj, i)
		if ve <= i {
			return false
		}
		if !fn(rawKey, obj[i:ve]) {
			return false
		}
		i = ve
	}
}

// objectMembers returns the members of the object obj, in order.
func objectMembers(obj []byte) ([]member, bool) {
	out := make([]member, 0, 8)
	ok := eachMember(obj, func(rawKey, val []byte) bool {
		key, ok := unquote(rawKey)
		if ok {
			out = append(out, member{key: key, rawKey: rawKey, val: val})
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return out, true
}

// plainBlock reports whether the object block is certainly a content
// block nothing rewrites: its type member (the last one) is a string
// other than "image", "audio" and "resource". It allocates nothing, so
// that a text result's blocks cost a scan each; false means "look
// closer" (a media type, no type, escapes in a key or the type).
func plainBlock(block []byte) bool {
	var typ []byte
	walked := eachMember(block, func(rawKey, val []byte) bool {
		if bytes.IndexByte(rawKey, '\\') >= 0 {
			return false // an escaped key might spell "type"
		}
		if string(rawKey) == `"type"` {
			typ = val
		}
		return true
	})
	if !walked || len(typ) < 2 || typ[0] != '"' || bytes.IndexByte(typ, '\\') >= 0 {
		return false
	}
	switch string(typ[1 : len(typ)-1]) {
	case "image", "audio", "resource":
		return false
	}
	return true
}

// arrayElements appends the elements of the array arr, in order, to dst:
// a caller's stack buffer keeps a short array's from the heap.
func arrayElements(dst [][]byte, arr []byte) ([][]byte, bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, false
	}
	out := dst
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) {
			return nil, false
		}
		switch arr[i] {
		case ']':
			return out, true
		case ',':
			i++
			continue
		}
		ve := skipValue(arr, i)
		if ve <= i {
			return nil, false
		}
		out = append(out, arr[i:ve])
		i = ve
	}
}

// get returns the value of key; the last one wins, as in encoding/json.
func get(ms []member, key string) ([]byte, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return ms[i].val, true
		}
	}
	return nil, false
}

// unquote returns the string a JSON string token stands for.
func unquote(tok []byte) (string, bool) {
	raw, ok := stringBytes(tok)
	if !ok {
		return "", false
	}
	return string(raw), true
}

// stringBytes returns the bytes a JSON string token stands for: a
// subslice of tok when it has no escapes, a copy otherwise.
func stringBytes(tok []byte) ([]byte, bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return nil, false
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

// stringMember returns the string value of key, and whether it is there
// as a string.
func stringMember(ms []member, key string) (string, bool) {
	v, ok := get(ms, key)
	if !ok {
		return "", false
	}
	return unquote(v)
}

// appendString appends s as a JSON string. It escapes only what JSON
// requires (and U+2028, U+2029), not <, > and &, which URLs contain.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0xfffd && size == 1: // invalid UTF-8
			b = append(b, `\ufffd`...)
		case r == 0x2028 || r == 0x2029:
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
