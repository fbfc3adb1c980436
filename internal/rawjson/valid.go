package rawjson

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// maxDepth is the deepest nesting of objects and arrays that Valid accepts.
// It is encoding/json's maxNestingDepth (encoding/json/scanner.go): the
// scanner fails on the bracket that opens level 10001.
const maxDepth = 10000

// Valid reports whether data is a valid JSON encoding. It returns what
// encoding/json.Valid returns for every input, including the depth limit of
// encoding/json's scanner, but several times faster and without allocating:
// the gateway checks every message it relays, and tool results can carry
// megabytes of text.
//
// Like encoding/json, Valid accepts any byte of 0x20 or above inside a
// string, invalid UTF-8 included.
func Valid(data []byte) bool {
	return valid(data, nil)
}

// ValidMembers is Valid that also calls visit with each member of data
// when data is an object, in order: the member's key token as written
// (quotes and escapes included) and its raw value, both aliasing data, as
// Members gives them. It reads data once where Valid and then Members
// read it twice: a relayed message is checked and its members found in
// one pass over its params or result. visit may be called before a later
// byte of data turns out invalid; what it was given is then to be
// dropped.
func ValidMembers(data []byte, visit func(key, val []byte)) bool {
	return valid(data, func(keyStart, keyEnd, valStart, valEnd int) {
		visit(data[keyStart:keyEnd], data[valStart:valEnd])
	})
}

// valid is Valid, calling visit with the bounds of each top-level member
// when data is an object. It hands visit indexes, not slices, so that
// Valid's data does not leak to the heap through it.
func valid(data []byte, visit func(keyStart, keyEnd, valStart, valEnd int)) bool {
	// objects has bit d set when level d is an object and clear when it is
	// an array. 157 words cover maxDepth levels, so it lives on the stack.
	var objects [(maxDepth + 64) / 64]uint64
	depth := 0
	i := skipSpace(data, 0)
	// The top-level member being read, for visit: its key token and where
	// its value starts.
	keyStart, keyEnd, valStart := 0, 0, 0

	// Each turn of the loop reads one value at data[i], then the
	// whitespace, commas, closing brackets and object key that lead to the
	// next value, or to the end of the input.
	for {
		if i >= len(data) {
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			depth++
			if depth > maxDepth {
				return false
			}
			// An empty container is a whole value: break to what follows
			// it. Otherwise continue to its first value.
			w, bit := depth/64, uint64(1)<<(depth%64)
			i = skipSpace(data, i+1)
			if c == '[' {
				objects[w] &^= bit
				if i < len(data) && data[i] == ']' {
					i++
					depth--
					break
				}
				continue
			}
			objects[w] |= bit
			if i < len(data) && data[i] == '}' {
				i++
				depth--
				break
			}
			k := i
			ke, v := validKey(data, i)
			if v < 0 {
				return false
			}
			i = v
			if depth == 1 {
				keyStart, keyEnd, valStart = k, ke, i
			}
			continue
		case '"':
			i = validString(data, i+1)
		case 't':
			i = validLiteral(data, i, "true")
		case 'f':
			i = validLiteral(data, i, "false")
		case 'n':
			i = validLiteral(data, i, "null")
		default:
			i = validNumber(data, i)
		}
		if i < 0 {
			return false
		}

		// After a value: close containers until a comma leads to the next
		// value.
		for {
			if depth == 1 && visit != nil && objects[0]&2 != 0 {
				visit(keyStart, keyEnd, valStart, i)
			}
			i = skipSpace(data, i)
			if depth == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			inObject := objects[depth/64]&(1<<(depth%64)) != 0
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if inObject {
					k := i
					ke, v := validKey(data, i)
					if v < 0 {
						return false
					}
					i = v
					if depth == 1 {
						keyStart, keyEnd, valStart = k, ke, i
					}
				}
				break
			}
			if inObject && c != '}' || !inObject && c != ']' {
				return false
			}
			i++
			depth--
		}
	}
}

// validKey checks the object key at data[i] and the colon after it, and
// returns the index after the key's closing quote and that of the
// member's value (after whitespace), or -1.
func validKey(data []byte, i int) (keyEnd, next int) {
	if i >= len(data) || data[i] != '"' {
		return -1, -1
	}
	if keyEnd = validString(data, i+1); keyEnd < 0 {
		return -1, -1
	}
	i = skipSpace(data, keyEnd)
	if i >= len(data) || data[i] != ':' {
		return -1, -1
	}
	return keyEnd, skipSpace(data, i+1)
}

// endsRun is true for the bytes that end a run of plain string bytes: the
// quote, the backslash and the control characters, which JSON forbids
// unescaped (RFC 8259, section 7).
var endsRun = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

// isHex is true for the hexadecimal digits of a \u escape.
var isHex = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefABCDEF") {
		t[c] = true
	}
	return t
}()

// Bytes repeated in every lane of a uint64, for the SWAR tests of
// validString and indexControl.
const (
	lanes01    = 0x0101010101010101
	lanes80    = 0x8080808080808080
	lanes7f    = 0x7f7f7f7f7f7f7f7f
	lanesE0    = 0xe0e0e0e0e0e0e0e0
	lanesSpace = ' ' * lanes01
	lanesQuote = '"' * lanes01
	lanesBack  = '\\' * lanes01
)

// validString checks the string whose opening quote is at data[i-1] and
// returns the index after its closing quote, or -1.
func validString(data []byte, i int) int {
	var lr longRuns
	start, escapes := i, 0
	for {
		// Skip a run of plain bytes. Most runs are short: keys, names, and
		// text with an escaped newline on every line. They are read eight
		// bytes at a time, in one register. A lane of t has its high bit
		// set when the byte is below 0x20, a quote or a backslash (the
		// "haszero" and "hasless" tricks of Bit Twiddling Hacks). A borrow
		// can set lanes above a flagged one, never below, so the lowest
		// set bit is the first byte that ends the run. Bytes of 0x80 and
		// above are plain, and ^x clears their lanes. A run longer than
		// shortRun (a base64 blob, a long line) is left to lr, which finds
		// its end several times faster.
		for n := 0; len(data)-i >= 8; {
			x := binary.LittleEndian.Uint64(data[i:])
			t := (x - lanesSpace) | ((x ^ lanesQuote) - lanes01) | ((x ^ lanesBack) - lanes01)
			if t &= ^x & lanes80; t != 0 {
				i += bits.TrailingZeros64(t) / 8
				break
			}
			i += 8
			if n += 8; n == shortRun {
				i = lr.end(data, i)
				break
			}
		}
		for i < len(data) && !endsRun[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i++; i >= len(data) || !validEscape(data, i) {
				return -1
			}
			if i++; data[i-1] == 'u' {
				i += 4
			}
			// A string that holds JSON (escapes every few bytes, as in
			// a tool's answer of a JSON document as text) goes on in
			// blocks, as skipString does.
			if escapes++; escapes == denseQuotes && i-start <= denseQuotes*denseGap && len(data)-i >= 64 {
				return validBlocks(data, i)
			}
		default: // a control character
			return -1
		}
	}
}

// validBlocks is validString from data[i] on, i outside any escape, 64
// bytes at a time: the block's quotes, backslashes and control characters
// become bit masks, the bytes that odd runs of backslashes escape are
// worked out from them (escapedBy, carrying a run across blocks), the
// first quote left ends the string, no control character may come before
// it, and each escaped byte is checked as validString checks it. The last
// bytes, under a block, go back to validString.
func validBlocks(data []byte, i int) int {
	var carry uint64 // 1 when data[i] is escaped by the block before
	for len(data)-i >= 64 {
		quotes, backslashes, controls := stringSpecials(data[i : i+64])
		escaped := escapedBy(backslashes, &carry)
		end := quotes &^ escaped
		in := ^uint64(0) // the block's bytes that are in the string
		if end != 0 {
			in = end&-end - 1
		}
		if controls&in != 0 {
			return -1
		}
		for e := escaped & in; e != 0; e &= e - 1 {
			if !validEscape(data, i+bits.TrailingZeros64(e)) {
				return -1
			}
		}
		if end != 0 {
			return i + bits.TrailingZeros64(end) + 1
		}
		i += 64
	}
	if carry != 0 {
		// The tail starts with the byte of an escape the last block began.
		if i >= len(data) || !validEscape(data, i) {
			return -1
		}
		if i++; data[i-1] == 'u' {
			i += 4
		}
	}
	return validString(data, i)
}

// validEscape reports whether the byte at data[p], which a backslash
// escapes, makes a valid escape: one of "\\/bfnrt, or u and four hex
// digits.
func validEscape(data []byte, p int) bool {
	switch data[p] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		return len(data)-p >= 5 && isHex[data[p+1]] && isHex[data[p+2]] && isHex[data[p+3]] && isHex[data[p+4]]
	}
	return false
}

// stringSpecials returns where the quotes, the backslashes and the
// control characters (below 0x20) of the 64 bytes of b are, as masks: bit
// k for b[k].
func stringSpecials(b []byte) (quotes, backslashes, controls uint64) {
	_ = b[63]
	for w := 0; w < 8; w++ {
		x := binary.LittleEndian.Uint64(b[8*w:])
		quotes |= zeroLanes(x^lanesQuote) << (8 * w)
		backslashes |= zeroLanes(x^lanesBack) << (8 * w)
		controls |= zeroLanes(x&lanesE0) << (8 * w)
	}
	return quotes, backslashes, controls
}

// shortRun is how many plain bytes validString reads eight at a time
// before it takes a run for a long one.
const shortRun = 64

// longRuns finds where the long runs of one string end. It looks for the
// next quote, and for the next backslash before that quote, with the
// vectorized bytes.IndexByte, and checks only the bytes up to the first of
// them for control characters. It keeps the two positions it found for
// the string's later runs, so that each byte is searched once however many
// escapes the string has. Both are absolute indexes into data, and valid
// while they are at or after the run's start; the zero value has looked
// for nothing (a string's first byte is at 1 or later).
type longRuns struct {
	quote int // the next quote, or len(data) when there is none
	back  int // the next backslash before quote, or quote when there is none
}

// end returns the index of the first byte at or after i that ends a run of
// plain string bytes (see endsRun), or len(data).
func (lr *longRuns) end(data []byte, i int) int {
	if lr.quote < i {
		// back <= the old quote < i: both are looked for again.
		if q := bytes.IndexByte(data[i:], '"'); q >= 0 {
			lr.quote = i + q
		} else {
			lr.quote = len(data)
		}
	}
	if lr.back < i {
		if b := bytes.IndexByte(data[i:lr.quote], '\\'); b >= 0 {
			lr.back = i + b
		} else {
			lr.back = lr.quote
		}
	}
	if c := indexControl(data[i:lr.back]); c >= 0 {
		return i + c
	}
	return lr.back
}

// indexControl returns the index of the first byte of b below 0x20, or -1.
// It tests 32 bytes per branch (the "hasless" trick of validString, on
// four registers), then finds the byte eight at a time.
func indexControl(b []byte) int {
	n := len(b)
	for len(b) >= 32 {
		x0 := binary.LittleEndian.Uint64(b)
		x1 := binary.LittleEndian.Uint64(b[8:])
		x2 := binary.LittleEndian.Uint64(b[16:])
		x3 := binary.LittleEndian.Uint64(b[24:32])
		t := ((x0 - lanesSpace) &^ x0) | ((x1 - lanesSpace) &^ x1) | ((x2 - lanesSpace) &^ x2) | ((x3 - lanesSpace) &^ x3)
		if t&lanes80 != 0 {
			break
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if t := (x - lanesSpace) &^ x & lanes80; t != 0 {
			return n - len(b) + bits.TrailingZeros64(t)/8
		}
		b = b[8:]
	}
	for i, c := range b {
		if c < ' ' {
			return n - len(b) + i
		}
	}
	return -1
}

// validLiteral checks that data[i:] starts with lit (true, false or null)
// and returns the index after it, or -1.
func validLiteral(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validNumber checks the number at data[i] against RFC 8259, section 6:
//
//	-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
//
// and returns the index after it, or -1. What follows the number is left to
// the caller.
func validNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// skipDigits returns the index of the first byte at or after data[i] that
// is not a decimal digit.
func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}
