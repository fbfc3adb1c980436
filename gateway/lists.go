package gateway

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"sort"
	"time"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// cursorTTL bounds how long a cursor stays valid. Clients use a cursor
// right after they got it; the spec forbids keeping them across sessions.
const cursorTTL = time.Hour

// cursor is what a sealed cursor carries: a keyset position, not an
// offset, so a page boundary survives catalog changes (items may then
// repeat or be missed, as the spec allows) and any replica with the same
// secret can serve the next page.
type cursor struct {
	Method    string `json:"m"`
	After     string `json:"a"`
	Principal string `json:"p"`
	Expires   int64  `json:"x"`
}

// serveList answers a */list request from l: one full page when PageSize
// is zero, else a page after the request's cursor; either holds only the
// items the caller may use (Options.ACL).
func (s *Server) serveList(req *Request, method string, l *list) (*Result, error) {
	if modernClient(req) {
		l = l.modern()
	}
	after := ""
	if raw, ok, _ := rawjson.Get(req.Params, "cursor"); ok && string(raw) != "null" {
		var token string
		if json.Unmarshal(raw, &token) != nil {
			return nil, invalidParams("invalid cursor: it must be the string nextCursor of an earlier %s; call %s without a cursor to start from the beginning", method, method)
		}
		if s.opts.PageSize <= 0 {
			return nil, invalidParams("invalid cursor: this gateway returns the whole list in one page and issued no cursor; call %s without one", method)
		}
		c, ok := s.openCursor(token)
		switch {
		case !ok:
			return nil, invalidParams("invalid cursor: it was not issued by this gateway; call %s without a cursor to start from the beginning", method)
		case c.Method != method:
			return nil, invalidParams("invalid cursor: it belongs to %s, not %s; call %s without a cursor to start from the beginning", c.Method, method, method)
		case c.Principal != req.Principal:
			return nil, invalidParams("invalid cursor: it was not issued to you; call %s without a cursor to start from the beginning", method)
		case time.Now().Unix() > c.Expires:
			return nil, invalidParams("invalid cursor: it expired; call %s without a cursor to start from the beginning", method)
		}
		after = c.After
	}
	// A caller whom the rules allow everything gets the list as it is:
	// the whole list precomputed, or a slice of it.
	rules := s.acl.forCaller(req.Principal, req.Groups)
	if s.opts.PageSize <= 0 {
		if rules == nil {
			return complete(l.full), nil
		}
		items, _ := s.pageFor(rules, l, method, "", 0)
		return complete(encodePage(l.field, items, "")), nil
	}
	items, more := s.pageFor(rules, l, method, after, s.opts.PageSize)
	next := ""
	if more {
		next = s.sealCursor(cursor{Method: method, After: items[len(items)-1].key, Principal: req.Principal, Expires: time.Now().Add(cursorTTL).Unix()})
	}
	return complete(encodePage(l.field, items, next)), nil
}

// listKind returns the kind of the items of a */list method.
func listKind(method string) itemKind {
	switch method {
	case "tools/list":
		return kindTool
	case "prompts/list":
		return kindPrompt
	}
	return kindResource
}

// pageFor is l.page for a caller whose rules are rules (nil: none): it
// skips the items they forbid, so that a page holds n items whenever n
// more are allowed, and more says whether another allowed item follows.
func (s *Server) pageFor(rules *callerRules, l *list, method, after string, n int) ([]item, bool) {
	if rules == nil {
		return l.page(after, n)
	}
	cov := s.acl.coverage(l, listKind(method), s.opts.Naming.Prefix)
	i := 0
	if after != "" {
		i = sort.Search(len(l.items), func(i int) bool { return l.items[i].key > after })
	}
	var out []item
	for ; i < len(l.items); i++ {
		if !rules.allowsCovered(cov.of(i)) {
			continue
		}
		if n > 0 && len(out) == n {
			return out, true
		}
		out = append(out, l.items[i])
	}
	return out, false
}

// encodePage encodes a */list result: items as the member field, and
// next, when not "", as nextCursor.
func encodePage(field string, items []item, next string) json.RawMessage {
	size := len(field) + len(next) + 32
	for _, it := range items {
		size += len(it.raw) + 1
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"`)
	b.WriteString(field)
	b.WriteString(`":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.raw)
	}
	b.WriteByte(']')
	if next != "" {
		tok, _ := json.Marshal(next)
		b.WriteString(`,"nextCursor":`)
		b.Write(tok)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (s *Server) sealCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return s.cursors.Seal(b)
}

func (s *Server) openCursor(token string) (cursor, bool) {
	var c cursor
	b, err := s.cursors.Open(token)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return cursor{}, false
	}
	return c, true
}

// ViewOf returns a fingerprint of what a caller sees of a merged list
// ("tools", "prompts", or "resources" with its templates), for an edge
// that tells a client of a change only when its own view changed: with
// access rules, a change may touch only items the caller cannot see.
func (s *Server) ViewOf(principal string, groups []string, name string) uint64 {
	cat := s.cat.Load()
	var lists []*list
	var methods []string
	switch name {
	case "tools":
		lists, methods = []*list{cat.tools}, []string{"tools/list"}
	case "prompts":
		lists, methods = []*list{cat.prompts}, []string{"prompts/list"}
	case "resources":
		lists, methods = []*list{cat.resources, cat.templates}, []string{"resources/list", "resources/templates/list"}
	default:
		return 0
	}
	rules := s.acl.forCaller(principal, groups)
	h := fnv.New64a()
	for i, l := range lists {
		items, _ := s.pageFor(rules, l, methods[i], "", 0)
		for _, it := range items {
			h.Write(it.raw)
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return h.Sum64()
}

// modernClient reports whether req's client speaks 2026-07-28 or later
// (protocol versions are dates, which order as text).
func modernClient(req *Request) bool {
	return req.Client.ProtocolVersion >= "2026-07-28"
}
