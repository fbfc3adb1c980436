package gateway

import (
	"bytes"
	"encoding/json"
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
// is zero, else a page after the request's cursor.
func (s *Server) serveList(req *Request, method string, l *list) (*Result, error) {
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
	if s.opts.PageSize <= 0 {
		return complete(l.full), nil
	}
	items, more := l.page(after, s.opts.PageSize)
	var b bytes.Buffer
	b.WriteString(`{"`)
	b.WriteString(l.field)
	b.WriteString(`":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.raw)
	}
	b.WriteByte(']')
	if more {
		next := s.sealCursor(cursor{Method: method, After: items[len(items)-1].key, Principal: req.Principal, Expires: time.Now().Add(cursorTTL).Unix()})
		tok, _ := json.Marshal(next)
		b.WriteString(`,"nextCursor":`)
		b.Write(tok)
	}
	b.WriteByte('}')
	return complete(b.Bytes()), nil
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
