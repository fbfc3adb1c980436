// Package rawjson reads and splices the top-level members of a JSON object
// without re-encoding the rest of it.
//
// It exists for DESIGN decision 1 (relay, don't re-model): the gateway renames
// a tool or strips a field that an older client does not know, and every other
// byte the upstream sent, including key order, number spelling and the
// JSON Schemas inside, reaches the client unchanged. encoding/json would
// round-trip the object through a map and lose that.
package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// members scans obj and returns its top-level members in order.
func members(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ErrNotObject
	}
	var out []member
	for dec.More() {
		keyStart := skipSpaceAndComma(obj, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, ErrNotObject
		}
		// The value starts after the colon.
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		valEnd := int(dec.InputOffset())
		valStart := valEnd - len(raw)
		if valStart < afterKey {
			valStart = afterKey
		}
		out = append(out, member{key: key, keyStart: keyStart, valStart: valStart, valEnd: valEnd})
	}
	if _, err := dec.Token(); err != nil { // closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the object", ErrNotObject)
	}
	return out, nil
}

func skipSpaceAndComma(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ',') {
		i++
	}
	return i
}

// Get returns the raw value of the top-level member key, and whether it is
// present. The returned slice aliases obj.
func Get(obj []byte, key string) (json.RawMessage, bool, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, false, err
	}
	for i := len(ms) - 1; i >= 0; i-- { // the last duplicate wins, as in encoding/json
		if ms[i].key == key {
			return json.RawMessage(obj[ms[i].valStart:ms[i].valEnd]), true, nil
		}
	}
	return nil, false, nil
}

// Set returns a copy of obj with the top-level member key set to the raw
// JSON value val: replaced in place if present (every duplicate of it), or
// appended at the end. val must be valid JSON.
func Set(obj []byte, key string, val json.RawMessage) ([]byte, error) {
	if !json.Valid(val) {
		return nil, fmt.Errorf("value for %q is not valid JSON", key)
	}
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(val)+len(key)+4)
	last := 0
	found := false
	for _, m := range ms {
		if m.key != key {
			continue
		}
		found = true
		out = append(out, obj[last:m.valStart]...)
		out = append(out, val...)
		last = m.valEnd
	}
	if found {
		return append(out, obj[last:]...), nil
	}
	end := bytes.LastIndexByte(obj, '}')
	out = append(out, bytes.TrimRight(obj[:end], " \t\r\n")...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	k, _ := json.Marshal(key)
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, obj[end:]...), nil
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
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
