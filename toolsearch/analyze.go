package toolsearch

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The fields of a tool that are indexed, each with its own weight.
const (
	fieldName = iota
	fieldTitle
	fieldDescription
	fieldParams
	fieldServer
	numFields
)

const (
	// maxFieldTerms bounds the terms taken from one field of one tool, so
	// that an upstream sending megabytes of description costs the index
	// no more than a long but honest one.
	maxFieldTerms = 1024
	// maxTermBytes drops longer "words": base64, hashes and the like,
	// which nobody searches for.
	maxTermBytes = 64
)

// fields is the text of one tool's indexed fields, as terms.
type fields [numFields][]string

// analyze extracts and tokenizes the indexed fields of t into f, reusing
// its slices. It reads only the members it needs from t.Raw and never
// changes it. Members of an unexpected type (a description that is not a
// string, a property schema that is a boolean) are skipped: the tool
// stays findable by the rest.
func analyze(t Tool, f *fields) {
	for i := range f {
		f[i] = f[i][:0]
	}
	f[fieldName] = appendTerms(f[fieldName], t.Name)
	f[fieldServer] = appendTerms(f[fieldServer], t.Server)

	var top [4]json.RawMessage
	if err := rawjson.GetMany(t.Raw, toolKeys, top[:]); err != nil {
		return
	}
	title := str(top[0])
	f[fieldTitle] = appendTerms(f[fieldTitle], title)
	if other := str(member(top[1], "title")); other != title {
		f[fieldTitle] = appendTerms(f[fieldTitle], other)
	}
	f[fieldDescription] = appendTerms(f[fieldDescription], str(top[2]))

	// Parameter names and descriptions: the top-level properties and, for
	// an object parameter or an array of objects, its own properties.
	params := f[fieldParams]
	eachProperty(member(top[3], "properties"), func(name string, schema []byte) {
		var nested []byte
		params, nested = appendSchemaTerms(params, name, schema)
		eachProperty(nested, func(name string, schema []byte) {
			params, _ = appendSchemaTerms(params, name, schema)
		})
	})
	f[fieldParams] = params
}

// appendSchemaTerms appends the terms of a parameter's name, title and
// description, and returns the properties of the parameter's own schema
// or of its items' schema.
func appendSchemaTerms(dst []string, name string, schema []byte) ([]string, []byte) {
	dst = appendTerms(dst, name)
	var m [4]json.RawMessage
	if len(schema) == 0 || schema[0] != '{' || rawjson.GetMany(schema, schemaKeys, m[:]) != nil {
		return dst, nil
	}
	dst = appendTerms(dst, str(m[0]))
	dst = appendTerms(dst, str(m[1]))
	if m[2] != nil {
		return dst, m[2]
	}
	return dst, member(m[3], "properties")
}

// The members analyze reads, of a tool and of a parameter's schema.
var (
	toolKeys   = []string{"title", "annotations", "description", "inputSchema"}
	schemaKeys = []string{"title", "description", "properties", "items"}
)

// member returns obj's member key, or nil when obj is not an object or
// has no such member. obj is valid JSON (checkTool checked the whole tool).
func member(obj []byte, key string) []byte {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	v, ok, err := rawjson.Get(obj, key)
	if err != nil || !ok {
		return nil
	}
	return v
}

// eachProperty calls fn with the name and schema of each member of a
// JSON Schema "properties" object, in the order written.
func eachProperty(props []byte, fn func(name string, schema []byte)) {
	if len(props) == 0 || props[0] != '{' {
		return
	}
	_ = rawjson.Members(props, func(key, val []byte) bool {
		if name, err := rawjson.Unquote(key); err == nil {
			fn(name, val)
		}
		return true
	})
}

// str returns the Go string of a JSON string value, or "" for any other
// value.
func str(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, err := rawjson.Unquote(v)
	if err != nil {
		return ""
	}
	return s
}

// appendTerms appends the index terms of s to dst, until dst holds
// maxFieldTerms: s is split into words (runs of letters and digits),
// words are split at camelCase boundaries ("getUserID" → get, user, id,
// and the whole word getuserid), lowered, stripped of stop words and
// single letters, and stemmed. Separators such as "__", "_", "-" and "."
// split words by being neither letter nor digit.
func appendTerms(dst []string, s string) []string {
	for len(s) > 0 && len(dst) < maxFieldTerms {
		start := strings.IndexFunc(s, isWordRune)
		if start < 0 {
			break
		}
		s = s[start:]
		end := strings.IndexFunc(s, func(r rune) bool { return !isWordRune(r) })
		if end < 0 {
			end = len(s)
		}
		word := s[:end]
		s = s[end:]
		if !hasInnerUpper(word) {
			if t, ok := term(word); ok {
				dst = append(dst, t)
			}
			continue
		}
		parts := splitCamel(word)
		if len(parts) > 1 {
			// "JavaScript" is also searched for as "javascript", and
			// "getFileInfo" as itself.
			parts = append(parts, word)
		}
		for _, part := range parts {
			if len(dst) >= maxFieldTerms {
				break
			}
			if t, ok := term(part); ok {
				dst = append(dst, t)
			}
		}
	}
	return dst
}

// hasInnerUpper reports whether word has a capital after its first
// letter, and so may be camelCase.
func hasInnerUpper(word string) bool {
	for i, r := range word {
		if i > 0 && unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// splitCamel splits a word at its camelCase boundaries: before an upper
// case letter that follows a lower case letter or a digit ("fileName",
// "utf8Decode"), and before the last capital of an acronym followed by a
// lower case word ("HTTPServer" → HTTP, Server). An acronym's plural stays
// whole ("IDs", "URLs"). Digits stay with the letters before them ("s3",
// "base64").
func splitCamel(word string) []string {
	var parts []string
	start := 0
	var prev rune = -1
	for i, r := range word {
		if i > 0 && unicode.IsUpper(r) {
			switch {
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				parts = append(parts, word[start:i])
				start = i
			case unicode.IsUpper(prev):
				rest := word[i+utf8.RuneLen(r):] // words hold no invalid UTF-8: it is no letter
				next, size := utf8.DecodeRuneInString(rest)
				if unicode.IsLower(next) && !isPluralS(rest, next, size) {
					parts = append(parts, word[start:i])
					start = i
				}
			}
		}
		prev = r
	}
	return append(parts, word[start:])
}

// isPluralS reports whether rest (what follows a capital in an acronym)
// is a lone "s" ending the word or the next camelCase part: "IDs",
// "URLsList".
func isPluralS(rest string, next rune, size int) bool {
	if next != 's' {
		return false
	}
	after, _ := utf8.DecodeRuneInString(rest[size:])
	return len(rest) == size || !unicode.IsLower(after)
}

// term turns one word part into an index term, or reports that it is not
// one.
func term(part string) (string, bool) {
	if len(part) > maxTermBytes {
		return "", false
	}
	w := strings.ToLower(part)
	if utf8.RuneCountInString(w) < 2 && !unicode.IsDigit(rune(w[0])) {
		return "", false
	}
	if stopWords[w] {
		return "", false
	}
	return stemmer(w), true
}

// stemmer is stem; a test swaps it to measure what stemming is worth.
var stemmer = stem

// stopWords are words of English queries and descriptions that say
// nothing about what a tool does. The list is short on purpose: "list",
// "get", "all" or "new" do tell tools apart.
var stopWords = map[string]bool{
	"an": true, "and": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "can": true, "do": true, "does": true, "for": true, "from": true,
	"how": true, "if": true, "in": true, "into": true, "is": true, "it": true,
	"its": true, "me": true, "my": true, "of": true, "on": true, "or": true,
	"please": true, "so": true, "such": true, "that": true, "the": true,
	"their": true, "then": true, "there": true, "these": true, "this": true,
	"to": true, "use": true, "want": true, "was": true, "what": true,
	"when": true, "which": true, "who": true, "will": true, "with": true,
	"would": true, "you": true, "your": true, "we": true, "our": true,
}

// stem reduces an English word to the form its singular and plural
// share: "repositories" → repository, "branches" → branch, "files" →
// file. It is deliberately light: also stripping -ing, -ed and a final -e
// found no tool of the package's tests better, and merges more unrelated
// words ("string" → str). Words that are not plain ASCII are left alone.
func stem(w string) string {
	if !isASCIILower(w) {
		return w
	}
	return stemPlural(w)
}

// stemPlural removes an English plural ending from w.
func stemPlural(w string) string {
	n := len(w)
	if n <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && n > 4 && !strings.HasSuffix(w, "eies") && !strings.HasSuffix(w, "aies"):
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "ches"),
		strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zes"):
		return w[:n-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

func isASCIILower(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
