// Package rawjson reads and splices the top-level members of a JSON object
// without re-encoding the rest of it.
//
// It exists for DESIGN decision 1 (relay, don't re-model): the gateway renames
// a tool or strips a field that an older client does not know, and every other
// byte the upstream sent, including key order, number spelling and the
// JSON Schemas inside, reaches the client unchanged. encoding/json would
// round-trip the object through a map and lose that.
//
// Inputs are trusted to be valid JSON: everything the gateway handles
// passed jsonrpc.Parse, which checked the whole message. On malformed
// input the functions return an error or a result as malformed as the
// input, and never panic.
package rawjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ErrNotObject is returned when the input is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// member is the byte span of one top-level member: from the start of its key
// to the end of its value.
type member struct {
	key                string
	keyStart, valStart int
	valEnd             int
}

// members scans obj and returns its top-level members in order. It checks
// obj with json.Valid (which allocates nothing) and then walks it with a
// small scanner that relies on that validity, so that finding one member
// of an upstream's tool costs a pass over its bytes and no allocations
// beyond the member list.
func members(obj []byte) ([]member, error) {
	out := make([]member, 0, 8)
	err := scan(obj, func(keyTok []byte, keyStart, valStart, valEnd int) (bool, error) {
		key, err := unquote(keyTok)
		if err != nil {
			return false, err
		}
		out = append(out, member{key: key, keyStart: keyStart, valStart: valStart, valEnd: valEnd})
		return true, nil
	})
	return out, err
}

// errSyntax is returned for input the scanner cannot walk.
var errSyntax = fmt.Errorf("%w: malformed JSON", ErrNotObject)

// scan calls fn for each top-level member of obj, in order, with the raw
// key token (quotes included) and the member's byte offsets, until fn
// returns false or an error.
//
// scan trusts obj to be valid JSON, as everything that reached the gateway
// through jsonrpc.Parse is (json.Valid checked the whole message), and does
// not validate values again: that would double the cost of reading one
// member of every tool. On malformed input it returns an error or offsets
// as malformed as the input, and never panics.
func scan(obj []byte, fn func(keyTok []byte, keyStart, valStart, valEnd int) (bool, error)) error {
	n := len(obj)
	i := skipSpace(obj, 0)
	if i >= n || obj[i] != '{' {
		return ErrNotObject
	}
	i++
	for first := true; ; first = false {
		keyTok, keyStart, valStart, ok := nextMember(obj, &i, first)
		switch {
		case !ok:
			return errSyntax
		case keyTok == nil:
			if skipSpace(obj, i) != n {
				return fmt.Errorf("%w: data after the object", ErrNotObject)
			}
			return nil
		}
		valEnd := skipValue(obj, valStart)
		if valEnd > n || valEnd == valStart {
			return errSyntax
		}
		more, err := fn(keyTok, keyStart, valStart, valEnd)
		if err != nil || !more {
			return err
		}
		i = valEnd
	}
}

// keyIs reports whether the key token tok is the string key, without
// allocating when tok has no escapes.
func keyIs(tok []byte, key string) bool {
	if len(tok) < 2 {
		return false
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	s, err := unquote(tok)
	return err == nil && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i], or
// len(b)+1 when it is not closed. It goes from quote to quote with the
// vectorized bytes.IndexByte and counts the backslashes before each: an
// odd count escapes it. That is fastest for short strings and for long
// runs between quotes, but a string that holds JSON (a tool's answer as
// text) has an escaped quote every few bytes, and there a call and a
// missed branch per quote cost three times what skipBlocks takes: so
// after escaped quotes close together it goes on in blocks.
func skipString(b []byte, i int) int { return skipFrom(b, i, i+1) }

// skipFrom is skipString from b[i] on, i outside any escape, for the
// string whose opening quote is at b[start].
func skipFrom(b []byte, start, i int) int {
	for n := 1; i < len(b); n++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			break
		}
		j += i
		if !escapedQuote(b, i, j) {
			return j + 1
		}
		i = j + 1
		if n == denseQuotes && j-start <= denseQuotes*denseGap && len(b)-i >= 64 {
			return skipBlocks(b, i)
		}
	}
	return len(b) + 1
}

// A string is taken to hold JSON when its first denseQuotes escaped
// quotes come within denseGap bytes each on average (blocks pay off from
// about four quotes in 64 bytes; a text with a quoted word per line has
// fewer, and stays with IndexByte).
const (
	denseQuotes = 8
	denseGap    = 16
)

// skipBlocks is skipString from b[i] on, i outside any escape, 64 bytes
// at a time: the quotes and backslashes of a block become bit masks, the
// bytes that odd runs of backslashes escape are worked out from them
// (simdjson's method, carrying a run across blocks), and the first quote
// left is the end. A block with neither starts a long plain run, which
// IndexByte crosses to its next quote. The last bytes, under a block, go
// quote to quote (skipFrom).
func skipBlocks(b []byte, i int) int {
	var carry uint64 // 1 when b[i] is escaped by the block before
	for len(b)-i >= 64 {
		quotes, backslashes := specials(b[i : i+64])
		if backslashes == 0 && carry == 0 {
			if quotes != 0 {
				return i + bits.TrailingZeros64(quotes) + 1
			}
			j := bytes.IndexByte(b[i+64:], '"')
			if j < 0 {
				return len(b) + 1
			}
			j += i + 64
			if escapedQuote(b, i, j) {
				i = j + 1
				continue
			}
			return j + 1
		}
		if q := quotes &^ escapedBy(backslashes, &carry); q != 0 {
			return i + bits.TrailingZeros64(q) + 1
		}
		i += 64
	}
	if carry != 0 {
		i++
	}
	return skipFrom(b, i, i) // under 64 bytes left: never back to blocks
}

// escapedQuote reports whether the quote at b[j] is escaped: an odd run
// of backslashes before it, counted back to from, a position no escape
// spans.
func escapedQuote(b []byte, from, j int) bool {
	k := j
	for k > from && b[k-1] == '\\' {
		k--
	}
	return (j-k)%2 == 1
}

// specials returns where the quotes and the backslashes of the 64 bytes
// of b are, as masks: bit k for b[k].
func specials(b []byte) (quotes, backslashes uint64) {
	_ = b[63]
	for w := 0; w < 8; w++ {
		x := binary.LittleEndian.Uint64(b[8*w:])
		quotes |= zeroLanes(x^lanesQuote) << (8 * w)
		backslashes |= zeroLanes(x^lanesBack) << (8 * w)
	}
	return quotes, backslashes
}

// zeroLanes returns a byte whose bit k is set when byte k of v is zero.
// A lane's high bit is first set when the lane is not zero (adding 0x7f
// to its low seven bits carries into it, and never out of the lane), then
// the eight high bits are gathered by a multiplication.
func zeroLanes(v uint64) uint64 {
	nonzero := ((v & lanes7f) + lanes7f) | v
	return (^nonzero & lanes80 >> 7) * 0x0102040810204080 >> 56
}

// escapedBy returns the bytes of a block that its backslashes escape (bit
// k: b[k] follows an odd run of backslashes), with carry the escape that
// crossed in from the block before (1: the first byte is escaped) and
// set to the one that crosses out. This is simdjson's find_escaped: the
// runs that start on an odd bit are told apart from those on an even bit
// by an addition, whose carries run to each run's end.
func escapedBy(backslashes uint64, carry *uint64) uint64 {
	const even = 0x5555555555555555
	backslashes &^= *carry
	follows := backslashes<<1 | *carry
	oddStarts := backslashes &^ even &^ follows
	sum, out := bits.Add64(oddStarts, backslashes, 0)
	*carry = out
	return (even ^ sum<<1) & follows
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b) + 1
	default: // a number, true, false or null
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i
	}
}

// unquote returns the Go string of a JSON string token, without
// allocating when it has no escapes (the common case for keys).
func unquote(tok []byte) (string, error) {
	if len(tok) < 2 {
		return "", errSyntax
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", err
	}
	return s, nil
}

// Members calls fn with each top-level member of obj, in order, until fn
// returns false: the member's key token as written (quotes and escapes
// included) and its raw value, both aliasing obj. Like Get,
// it trusts obj to be valid JSON.
func Members(obj []byte, fn func(key, val []byte) bool) error {
	return scan(obj, func(keyTok []byte, _, valStart, valEnd int) (bool, error) {
		return fn(keyTok, obj[valStart:valEnd]), nil
	})
}

// ArrayMembers walks, in one pass over obj, the array that is obj's
// member key and the members of each of its elements: member gets each
// element's index and each of its members in order (the key token as
// written and the raw value, aliasing obj), and done gets an element's
// index after its last member. other, if not nil, gets obj's other
// members, as Members gives them. Each value is skipped once, where Get,
// Elements and Members in turn would skip a long one three times. It
// reports whether all of it was walked: obj has the member once, as an
// array of objects, and no callback returned false (which stops it).
// Like Get, it trusts obj to be valid JSON.
func ArrayMembers(obj []byte, key string, member func(el int, key, val []byte) bool, done func(el int) bool, other func(key, val []byte)) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	seen := false
	i++
	for first := true; ; first = false {
		keyTok, _, vs, ok := nextMember(obj, &i, first)
		switch {
		case !ok:
			return false
		case keyTok == nil:
			return seen
		case !keyIs(keyTok, key):
			if i = skipValue(obj, vs); i > len(obj) {
				return false
			}
			if other != nil {
				other(keyTok, obj[vs:i])
			}
			continue
		case seen || obj[vs] != '[':
			return false // a second one, or not an array
		}
		seen = true
		if i, ok = arrayMembers(obj, vs, member, done); !ok {
			return false
		}
	}
}

// arrayMembers is ArrayMembers' walk of the array at obj[i]; it returns
// the index after the array.
func arrayMembers(obj []byte, i int, member func(el int, key, val []byte) bool, done func(el int) bool) (int, bool) {
	i++ // the "["
	for el := 0; ; {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return i, false
		}
		switch obj[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
			continue
		case '{':
		default:
			return i, false // an element that is not an object
		}
		i++
		for first := true; ; first = false {
			keyTok, _, vs, ok := nextMember(obj, &i, first)
			if !ok {
				return i, false
			}
			if keyTok == nil {
				break
			}
			ve := skipValue(obj, vs)
			if ve > len(obj) || !member(el, keyTok, obj[vs:ve]) {
				return i, false
			}
			i = ve
		}
		if !done(el) {
			return i, false
		}
		el++
	}
}

// nextMember reads the next member of an object from obj[*i] on (after
// its "{", first, or after a member's value): its key token, where that
// starts and where its value starts, with *i at the value; or a nil key
// at the object's "}", with *i past it. It reports false for what is
// neither. scan and ArrayMembers read members with it.
func nextMember(obj []byte, i *int, first bool) (keyTok []byte, keyStart, valStart int, ok bool) {
	n := len(obj)
	j := skipSpace(obj, *i)
	if j >= n {
		return nil, 0, 0, false
	}
	if obj[j] == '}' {
		*i = j + 1
		return nil, 0, 0, true
	}
	if !first {
		if obj[j] != ',' {
			return nil, 0, 0, false
		}
		j = skipSpace(obj, j+1)
	}
	if j >= n || obj[j] != '"' {
		return nil, 0, 0, false
	}
	keyEnd := skipString(obj, j)
	if keyEnd > n {
		return nil, 0, 0, false
	}
	k := skipSpace(obj, keyEnd)
	if k >= n || obj[k] != ':' {
		return nil, 0, 0, false
	}
	vs := skipSpace(obj, k+1)
	if vs >= n {
		return nil, 0, 0, false
	}
	*i = vs
	return obj[j:keyEnd], j, vs, true
}

// Elements calls fn with each element of the JSON array arr, in order,
// aliasing arr. Like Get, it trusts arr to be valid JSON.
func Elements(arr []byte, fn func(el []byte)) error {
	return elements(arr, func(start, end int) { fn(arr[start:end]) })
}

// Unquote returns the Go string of a JSON string token.
func Unquote(tok []byte) (string, error) { return unquote(tok) }

// Get returns the raw value of the top-level member key, and whether it is
// present. The returned slice aliases obj.
func Get(obj []byte, key string) (json.RawMessage, bool, error) {
	var val json.RawMessage
	found := false
	err := scan(obj, func(keyTok []byte, _, valStart, valEnd int) (bool, error) {
		if keyIs(keyTok, key) { // the last duplicate wins, as in encoding/json
			val, found = obj[valStart:valEnd], true
		}
		return true, nil
	})
	if err != nil {
		return nil, false, err
	}
	return val, found, nil
}

// GetMany looks up several top-level members of obj in one pass: vals[i]
// gets the raw value of keys[i] (the last duplicate, as Get), or nil when
// it is absent. vals must be as long as keys. The values alias obj.
func GetMany(obj []byte, keys []string, vals []json.RawMessage) error {
	clear(vals)
	err := scan(obj, func(keyTok []byte, _, valStart, valEnd int) (bool, error) {
		for i, key := range keys {
			if keyIs(keyTok, key) {
				vals[i] = obj[valStart:valEnd]
			}
		}
		return true, nil
	})
	if err != nil {
		clear(vals)
	}
	return err
}

// Set returns a copy of obj with the top-level member key set to the raw
// JSON value val: replaced in place if present (every duplicate of it), or
// appended at the end. val must be valid JSON; obj is trusted to be (see
// scan).
func Set(obj []byte, key string, val json.RawMessage) ([]byte, error) {
	return Apply(obj, Edit{Key: key, Val: val})
}

// Edit is a change Apply makes to the member Key of an object: with In,
// the edits In are applied to its value if that is an object (an absent
// member, or one of another type, is left alone); else it is set to Val,
// every duplicate of it, or appended when absent. Val must be valid JSON.
type Edit struct {
	Key string
	Val json.RawMessage
	In  []Edit
}

// Apply returns a copy of obj with edits made, in one pass over obj and
// one buffer: what a chain of Set calls does with a copy each. With no
// edits it returns obj itself. obj is trusted to be valid JSON (see scan).
func Apply(obj []byte, edits ...Edit) ([]byte, error) {
	if len(edits) == 0 {
		return obj, nil
	}
	return AppendApply(nil, obj, edits...)
}

// AppendApply appends obj with edits made to dst, as Apply makes them,
// and returns the extended buffer. It grows dst at most once, to the room
// the edited copy needs. obj must not overlap dst's free room.
func AppendApply(dst, obj []byte, edits ...Edit) ([]byte, error) {
	if err := validEdits(edits); err != nil {
		return nil, err
	}
	if need := len(dst) + len(obj) + editsLen(edits); cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	return appendApply(dst, obj, edits)
}

func validEdits(edits []Edit) error {
	for _, e := range edits {
		if e.In != nil {
			if err := validEdits(e.In); err != nil {
				return err
			}
		} else if !Valid(e.Val) {
			// Not fmt: e's strings would escape, and with them every
			// caller's stack buffer of edits.
			return errors.New("value for " + strconv.Quote(e.Key) + " is not valid JSON")
		}
	}
	return nil
}

// editsLen is about what edits add to an object, for the buffer's size.
func editsLen(edits []Edit) int {
	n := 0
	for _, e := range edits {
		n += len(e.Key) + len(e.Val) + 4 + editsLen(e.In)
	}
	return n
}

// appendApply appends obj with edits made to dst.
func appendApply(dst, obj []byte, edits []Edit) ([]byte, error) {
	var foundArr [8]bool
	found := foundArr[:0]
	if len(edits) > len(foundArr) {
		found = make([]bool, len(edits))
	} else {
		found = foundArr[:len(edits)]
	}
	last, n := 0, 0
	err := scan(obj, func(keyTok []byte, _, valStart, valEnd int) (bool, error) {
		n++
		for i, e := range edits {
			if !keyIs(keyTok, e.Key) {
				continue
			}
			found[i] = true
			if e.In == nil {
				dst = append(dst, obj[last:valStart]...)
				dst = append(dst, e.Val...)
				last = valEnd
			} else if val := obj[valStart:valEnd]; val[0] == '{' {
				dst = append(dst, obj[last:valStart]...)
				var err error
				if dst, err = appendApply(dst, val, e.In); err != nil {
					return false, err
				}
				last = valEnd
			}
			break // the first edit of a key applies
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	missing := false
	for i, e := range edits {
		missing = missing || (!found[i] && e.In == nil)
	}
	if !missing {
		return append(dst, obj[last:]...), nil
	}
	end := bytes.LastIndexByte(obj, '}')
	if end < last {
		return nil, errSyntax
	}
	dst = append(dst, bytes.TrimRight(obj[last:end], " \t\r\n")...)
	for i, e := range edits {
		if found[i] || e.In != nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = AppendString(dst, e.Key)
		dst = append(dst, ':')
		dst = append(dst, e.Val...)
	}
	return append(dst, obj[end:]...), nil
}

// AppendString appends s to dst as a JSON string, escaped as
// encoding/json escapes it (HTML characters included), without
// allocating for the common string of printable ASCII.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(strings.Clone(s)) // a copy: s itself does not escape
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Delete returns a copy of obj without the top-level members named in keys.
// Absent keys are ignored; obj is returned unchanged (not copied) when none
// is present.
func Delete(obj []byte, keys ...string) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	drop := func(k string) bool {
		for _, d := range keys {
			if d == k {
				return true
			}
		}
		return false
	}
	any := false
	for _, m := range ms {
		if drop(m.key) {
			any = true
			break
		}
	}
	if !any {
		return obj, nil
	}
	// Rebuild from the kept members' spans: "{" + kept joined by "," + "}".
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	n := 0
	for _, m := range ms {
		if drop(m.key) {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[m.keyStart:m.valEnd]...)
		n++
	}
	return append(out, '}'), nil
}

// Keys returns the top-level member names of obj in order.
func Keys(obj []byte) ([]string, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.key
	}
	return keys, nil
}

// String returns the member key as a Go string when it is a JSON string.
func String(obj []byte, key string) (string, bool) {
	raw, ok, err := Get(obj, key)
	if err != nil || !ok {
		return "", false
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	s, err := unquote(raw)
	return s, err == nil
}

// elements calls fn with the byte span of each element of the JSON array
// arr, in order. Like scan, it trusts arr to be valid JSON and does not
// check the elements themselves.
func elements(arr []byte, fn func(start, end int)) error {
	n := len(arr)
	i := skipSpace(arr, 0)
	if i >= n || arr[i] != '[' {
		return errSyntax
	}
	i++
	for first := true; ; first = false {
		i = skipSpace(arr, i)
		if i >= n {
			return errSyntax
		}
		if arr[i] == ']' {
			if skipSpace(arr, i+1) != n {
				return errSyntax
			}
			return nil
		}
		if !first {
			if arr[i] != ',' {
				return errSyntax
			}
			i = skipSpace(arr, i+1)
			if i >= n {
				return errSyntax
			}
		}
		start := i
		i = skipValue(arr, i)
		if i > n || i == start {
			return errSyntax
		}
		fn(start, i)
	}
}

// MapArray applies fn to each element of the array member key of obj and
// returns obj with the elements fn changed replaced, every other byte kept
// (whitespace included). fn returns its element as it is to leave it
// alone. When nothing changed, or obj has no member key, obj itself is
// returned and nothing is allocated; a member that is not an array is an
// error. A key given more than once is mapped in every copy, so that no
// reader, whichever duplicate it takes, sees an element fn would change.
func MapArray(obj []byte, key string, fn func(el json.RawMessage) json.RawMessage) (json.RawMessage, error) {
	type change struct {
		start, end int // in obj
		el         []byte
	}
	var changes []change
	var elErr error
	err := scan(obj, func(keyTok []byte, _, valStart, valEnd int) (bool, error) {
		if !keyIs(keyTok, key) {
			return true, nil
		}
		raw := obj[valStart:valEnd]
		if err := elements(raw, func(s, e int) {
			el := raw[s:e]
			if out := fn(el); !bytes.Equal(out, el) {
				changes = append(changes, change{valStart + s, valStart + e, out})
			}
		}); err != nil {
			elErr = fmt.Errorf("member %q is not an array", key)
			return false, nil
		}
		return true, nil
	})
	switch {
	case err != nil:
		return obj, err
	case elErr != nil:
		return nil, elErr
	case len(changes) == 0:
		return obj, nil
	}
	size := len(obj)
	for _, c := range changes {
		size += len(c.el) - (c.end - c.start)
	}
	out := make([]byte, 0, size)
	last := 0
	for _, c := range changes {
		out = append(out, obj[last:c.start]...)
		out = append(out, c.el...)
		last = c.end
	}
	return append(out, obj[last:]...), nil
}
