package mediastore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Mode says what becomes of a blob in a result.
type Mode string

const (
	// ModeLink replaces the block with a resource_link. It is the default.
	ModeLink Mode = "link"
	// ModeLinkMarkdown does as ModeLink and adds a text block after the
	// link, "![<name>](<url>)" for an image and "[<name>](<url>)"
	// otherwise, for clients that render Markdown but not links.
	ModeLinkMarkdown Mode = "link+markdown"
	// ModeInline leaves every block as it is.
	ModeInline Mode = "inline"
)

// Rewrite says whose a result's media are and how to rewrite them.
type Rewrite struct {
	// Owner owns the blobs stored (see Entry.Owner).
	Owner string
	// BaseURL is the gateway's public URL, which media URLs start with.
	BaseURL string
	// Mode is what to do; if empty, ModeLink. A value that is none of the
	// modes is taken as ModeLink.
	Mode Mode
	// MinBytes is the size up to which a blob (decoded) stays inline. If
	// zero, DefaultMinBytes is used; if negative, every blob is rewritten.
	MinBytes int
	// SignTTL, when positive, makes the URLs signed and expiring that long
	// from now (see Store.URL).
	SignTTL time.Duration
}

// minBytes returns the effective threshold: -1 means every size.
func (r *Rewrite) minBytes() int {
	switch {
	case r.MinBytes == 0:
		return DefaultMinBytes
	case r.MinBytes < 0:
		return -1
	}
	return r.MinBytes
}

// RewriteContent rewrites a JSON array of MCP content blocks (the
// "content" of a tools/call result). Image and audio blocks, and embedded
// resources with a blob, whose decoded size is above r.MinBytes are
// stored, for r.Owner, and replaced by a resource_link (PROTOCOL point 5):
//
//	{"type":"resource_link","uri":<URL>,"name":<name>,"title":<the resource's title, if any>,
//	 "mimeType":<MIME type>,"size":<decoded bytes>,"annotations":…,"_meta":…}
//
// with the block's own annotations and _meta copied verbatim. Every other
// block (text, resource_link, an embedded text resource, unknown types)
// is relayed byte for byte. It returns the new array and whether anything
// changed; if nothing did, content itself.
//
// It never fails: a block whose base64 does not decode, or that cannot be
// stored (ErrTooLarge, a disk error), is left exactly as it was and a
// warning is logged, so no content is ever lost. Input that is not a JSON
// array is returned as it is; content must otherwise be valid JSON (as
// everything the gateway relays has been checked to be), or the result
// may be as malformed as the input.
func (s *Store) RewriteContent(content json.RawMessage, r Rewrite) (json.RawMessage, bool) {
	if r.Mode == ModeInline {
		return content, false
	}
	var elBuf [8][]byte
	els, ok := arrayElements(elBuf[:0], content)
	if !ok {
		return content, false
	}
	var parts [][]byte // nil until a block changes
	for i, el := range els {
		link, md, ok := s.rewriteBlock(el, &r, r.Mode == ModeLinkMarkdown)
		if !ok {
			if parts != nil {
				parts = append(parts, el)
			}
			continue
		}
		if parts == nil {
			parts = append(make([][]byte, 0, len(els)+1), els[:i]...)
		}
		parts = append(parts, link)
		if md != nil {
			parts = append(parts, md)
		}
	}
	if parts == nil {
		return content, false
	}
	return joinArray(parts), true
}

// RewriteBlock rewrites one content block (the "content" of a prompt
// message) as RewriteContent does, but one block comes out: never a
// Markdown block.
func (s *Store) RewriteBlock(block json.RawMessage, r Rewrite) (json.RawMessage, bool) {
	if r.Mode == ModeInline {
		return block, false
	}
	link, _, ok := s.rewriteBlock(block, &r, false)
	if !ok {
		return block, false
	}
	return link, true
}

// RewriteResourceContents rewrites the "contents" of a resources/read
// result. Each blob content ({"uri", "mimeType", "blob"}) above
// r.MinBytes is stored and becomes
//
//	{"uri":<same uri>,"mimeType":"text/uri-list","text":<media URL>,
//	 "_meta":{"mcpgw/media":{"mimeType":<its MIME type>,"size":<decoded bytes>}, …its own _meta}}
//
// keeping its other members. Text contents and everything else are
// relayed byte for byte. It fails no more than RewriteContent does.
func (s *Store) RewriteResourceContents(contents json.RawMessage, r Rewrite) (json.RawMessage, bool) {
	if r.Mode == ModeInline {
		return contents, false
	}
	var elBuf [8][]byte
	els, ok := arrayElements(elBuf[:0], contents)
	if !ok {
		return contents, false
	}
	var parts [][]byte
	for i, el := range els {
		out, ok := s.rewriteResource(el, &r)
		if !ok {
			if parts != nil {
				parts = append(parts, el)
			}
			continue
		}
		if parts == nil {
			parts = append(make([][]byte, 0, len(els)), els[:i]...)
		}
		parts = append(parts, out)
	}
	if parts == nil {
		return contents, false
	}
	return joinArray(parts), true
}

func joinArray(parts [][]byte) json.RawMessage {
	n := 2
	for _, p := range parts {
		n += len(p) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, p := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p...)
	}
	return append(out, ']')
}

// rewriteBlock stores the blob of one content block and returns the
// resource_link that replaces it and, with markdown, the text block that
// follows. It is false for a block that stays.
func (s *Store) rewriteBlock(block []byte, r *Rewrite, markdown bool) (link, md []byte, ok bool) {
	if plainBlock(block) {
		return nil, nil, false // text, resource_link, …: relayed as it is
	}
	ms, ok := objectMembers(block)
	if !ok {
		return nil, nil, false
	}
	kind, _ := stringMember(ms, "type")
	var (
		src, title []byte
		mimeType   string
		name       string
	)
	switch kind {
	case "image", "audio":
		v, ok := get(ms, "data")
		if !ok {
			return nil, nil, false
		}
		if src, ok = stringBytes(v); !ok {
			return nil, nil, false
		}
		if mimeType, ok = optionalString(ms, "mimeType"); !ok {
			return nil, nil, false
		}
	case "resource":
		res, ok := get(ms, "resource")
		if !ok {
			return nil, nil, false
		}
		rms, ok := objectMembers(res)
		if !ok {
			return nil, nil, false
		}
		v, ok := get(rms, "blob")
		if !ok {
			return nil, nil, false // a text resource
		}
		if src, ok = stringBytes(v); !ok {
			return nil, nil, false
		}
		if mimeType, ok = optionalString(rms, "mimeType"); !ok {
			return nil, nil, false
		}
		if uri, ok := stringMember(rms, "uri"); ok {
			name = uriName(uri)
		}
		if t, ok := get(rms, "title"); ok && len(t) > 0 && t[0] == '"' {
			title = t
		}
	default:
		return nil, nil, false
	}
	e, ok := s.storeBase64(src, mimeType, r, kind)
	if !ok {
		return nil, nil, false
	}
	if name == "" {
		name = kind + "-" + e.ID[:8] + "." + e.Ext
	}
	u := s.URL(r.BaseURL, e, r.SignTTL)

	link = make([]byte, 0, 256+len(u))
	link = append(link, `{"type":"resource_link","uri":`...)
	link = appendString(link, u)
	link = append(link, `,"name":`...)
	link = appendString(link, name)
	if title != nil {
		link = append(link, `,"title":`...)
		link = append(link, title...)
	}
	link = append(link, `,"mimeType":`...)
	link = appendString(link, e.MIMEType)
	link = append(link, `,"size":`...)
	link = strconv.AppendInt(link, e.Size, 10)
	for _, k := range [...]string{"annotations", "_meta"} {
		if v, ok := get(ms, k); ok {
			link = append(link, ',')
			link = appendString(link, k)
			link = append(link, ':')
			link = append(link, v...)
		}
	}
	link = append(link, '}')

	if markdown {
		text := "[" + name + "](" + u + ")"
		if kind == "image" || strings.HasPrefix(baseType(e.MIMEType), "image/") {
			text = "!" + text
		}
		md = append(md, `{"type":"text","text":`...)
		md = appendString(md, text)
		md = append(md, '}')
	}
	return link, md, true
}

// rewriteResource stores the blob of one resource content and returns
// what replaces it, or false when it stays.
func (s *Store) rewriteResource(el []byte, r *Rewrite) ([]byte, bool) {
	ms, ok := objectMembers(el)
	if !ok {
		return nil, false
	}
	v, ok := get(ms, "blob")
	if !ok {
		return nil, false
	}
	src, ok := stringBytes(v)
	if !ok {
		return nil, false
	}
	uri, ok := get(ms, "uri")
	if !ok || len(uri) == 0 || uri[0] != '"' {
		return nil, false
	}
	mimeType, ok := optionalString(ms, "mimeType")
	if !ok {
		return nil, false
	}
	e, ok := s.storeBase64(src, mimeType, r, "resource")
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, 256+len(el)-len(v))
	out = append(out, `{"uri":`...)
	out = append(out, uri...)
	out = append(out, `,"mimeType":"text/uri-list","text":`...)
	out = appendString(out, s.URL(r.BaseURL, e, r.SignTTL))
	seen := map[string]bool{"uri": true, "mimeType": true, "blob": true, "text": true, "_meta": true}
	for _, m := range ms {
		if seen[m.key] {
			continue
		}
		seen[m.key] = true // a repeated key: only its last value, as encoding/json reads it
		val, _ := get(ms, m.key)
		out = append(out, ',')
		out = append(out, m.rawKey...)
		out = append(out, ':')
		out = append(out, val...)
	}
	out = append(out, `,"_meta":{"mcpgw/media":{"mimeType":`...)
	out = appendString(out, e.MIMEType)
	out = append(out, `,"size":`...)
	out = strconv.AppendInt(out, e.Size, 10)
	out = append(out, '}')
	if meta, ok := get(ms, "_meta"); ok {
		if mms, ok := objectMembers(meta); ok {
			done := map[string]bool{"mcpgw/media": true}
			for _, m := range mms {
				if done[m.key] {
					continue
				}
				done[m.key] = true
				val, _ := get(mms, m.key)
				out = append(out, ',')
				out = append(out, m.rawKey...)
				out = append(out, ':')
				out = append(out, val...)
			}
		}
	}
	out = append(out, "}}"...)
	return out, true
}

// optionalString returns the string value of key, "" when it is absent
// or null, and false when it is there but not a string.
func optionalString(ms []member, key string) (string, bool) {
	v, ok := get(ms, key)
	if !ok || string(v) == "null" {
		return "", true
	}
	return unquote(v)
}

// storeBase64 decodes src and stores it for r.Owner, unless it is small
// enough to stay inline. It logs why a blob above the threshold stays.
func (s *Store) storeBase64(src []byte, mimeType string, r *Rewrite, kind string) (Entry, bool) {
	minBytes := r.minBytes()
	// len*3/4 bounds the decoded size from above: skip small blobs
	// without decoding them.
	if len(src)/4*3+len(src)%4 <= minBytes {
		return Entry{}, false
	}
	data, err := decodeBase64(src)
	if err != nil {
		s.logger.Warn("media kept inline: its base64 does not decode", "type", kind, "err", err)
		return Entry{}, false
	}
	if len(data) <= minBytes {
		return Entry{}, false
	}
	e, err := s.Put(r.Owner, mimeType, data)
	if err != nil {
		s.logger.Warn("media kept inline: storing it failed", "type", kind, "size", len(data), "err", err)
		return Entry{}, false
	}
	return e, true
}

// decodeBase64 decodes standard base64, padded or not. (Like every Go
// decoder of it, it skips CR and LF, so line-wrapped base64 decodes too.)
func decodeBase64(src []byte) ([]byte, error) {
	// The unpadded length bounds both decodings.
	dst := make([]byte, base64.RawStdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(dst, src)
	if err != nil && bytes.IndexByte(src, '=') < 0 {
		n, err = base64.RawStdEncoding.Decode(dst, src)
	}
	if err != nil {
		return nil, err
	}
	return dst[:n], nil
}

// uriName returns the last path segment of uri when it is a safe name
// for a link (1 to 128 of A-Z, a-z, 0-9, '.', '_' and '-', not "." or
// ".."), and "" otherwise.
func uriName(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	seg := p[strings.LastIndexByte(p, '/')+1:]
	if seg == "" || seg == "." || seg == ".." || len(seg) > 128 {
		return ""
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ""
		}
	}
	return seg
}
