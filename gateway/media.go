package gateway

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/mediastore"
)

// Media (DESIGN decision 8). The image, audio and embedded blobs of a
// result go to the media store, and the client gets a resource_link to
// <base URL>/media/<id>.<ext> instead: the store keys the id on the blob and
// its owner (the caller's principal, or its session when anonymous, like a
// task), so the URL is a capability of that owner. The rewrite comes after
// the URIs of the result are exposed (a media link is the gateway's own,
// never a server's), and the edge encodes a link for the client's version.

// MediaStore is what the core needs of the media store; *mediastore.Store
// has it. Its methods are safe for concurrent use and never fail a
// rewrite: what cannot be stored stays in the result.
type MediaStore interface {
	RewriteContent(content json.RawMessage, r mediastore.Rewrite) (json.RawMessage, bool)
	RewriteBlock(block json.RawMessage, r mediastore.Rewrite) (json.RawMessage, bool)
	RewriteResourceContents(contents json.RawMessage, r mediastore.Rewrite) (json.RawMessage, bool)
	ReadFor(owner, name string) (mediastore.Entry, []byte, error)
}

var _ MediaStore = (*mediastore.Store)(nil)

// mediaRewrite returns how server's results are rewritten for req, and
// false when they are not (no store, or mode inline).
func (s *Server) mediaRewrite(req *Request, server string) (mediastore.Rewrite, bool) {
	if s.opts.Media == nil {
		return mediastore.Rewrite{}, false
	}
	cfg := s.opts.MediaConfig
	sc := s.serverConfig(server)
	mode := cfg.ModeFor(&sc)
	if mode == config.MediaInline {
		return mediastore.Rewrite{}, false
	}
	base := req.BaseURL
	if base == "" {
		base = s.opts.PublicURL
	}
	minBytes := int(cfg.MinBytes)
	if minBytes == 0 {
		minBytes = -1 // every size: the store's zero is its default
	}
	return mediastore.Rewrite{
		Owner:    owner(req),
		BaseURL:  base,
		Mode:     mediastore.Mode(mode),
		MinBytes: minBytes,
		SignTTL:  cfg.SignTTL(),
	}, true
}

// rewriteMedia rewrites the media of a result's field: "content" (the
// blocks of a tools/call result) or "messages" (prompts/get, each with one
// block; only with media.rewrite_resources).
func (s *Server) rewriteMedia(req *Request, server string, body json.RawMessage, field string, messages bool) json.RawMessage {
	r, ok := s.mediaRewrite(req, server)
	if !ok || messages && !s.opts.MediaConfig.RewriteResources {
		return body
	}
	if !messages {
		return rewriteMember(body, field, func(v json.RawMessage) (json.RawMessage, bool) { return s.opts.Media.RewriteContent(v, r) })
	}
	out, _ := mapArray(body, field, func(msg json.RawMessage) (json.RawMessage, bool) {
		block, ok, _ := rawjson.Get(msg, "content")
		if !ok {
			return msg, false
		}
		b2, changed := s.opts.Media.RewriteBlock(block, r)
		if !changed {
			return msg, false
		}
		m2, err := rawjson.Set(msg, "content", b2)
		return m2, err == nil
	})
	return out
}

// rewriteResourceMedia rewrites the blob contents of a resources/read
// result, with media.rewrite_resources.
func (s *Server) rewriteResourceMedia(req *Request, server string, body json.RawMessage) json.RawMessage {
	r, ok := s.mediaRewrite(req, server)
	if !ok || !s.opts.MediaConfig.RewriteResources {
		return body
	}
	return rewriteMember(body, "contents", func(v json.RawMessage) (json.RawMessage, bool) { return s.opts.Media.RewriteResourceContents(v, r) })
}

// rewriteMember returns obj with its member key rewritten by f, or obj as
// it is when it has no such member or f changed nothing.
func rewriteMember(obj json.RawMessage, key string, f func(json.RawMessage) (json.RawMessage, bool)) json.RawMessage {
	v, ok, _ := rawjson.Get(obj, key)
	if !ok {
		return obj
	}
	v2, changed := f(v)
	if !changed {
		return obj
	}
	out, err := rawjson.Set(obj, key, v2)
	if err != nil {
		return obj
	}
	return out
}

// mediaName returns the file name of a media URL the gateway gave out
// ("<id>.<ext>", whatever its scheme, host and query), or false.
func mediaName(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Path, "/media/")
	if !ok {
		return "", false
	}
	if _, _, err := mediastore.ParseName(name); err != nil {
		return "", false
	}
	return name, true
}

// readMedia answers resources/read of a media URL from the store, for its
// owner only; anybody else is told it does not exist, as for an expired
// one.
func (s *Server) readMedia(req *Request, uri, name string) (*Result, error) {
	e, data, err := s.opts.Media.ReadFor(owner(req), name)
	if errors.Is(err, mediastore.ErrNotFound) {
		return nil, jsonrpc.NewError(CodeResourceNotFound, "resource not found: this media URL is unknown or has expired", map[string]string{"uri": uri})
	}
	if err != nil {
		s.logger.Error("reading media failed", "name", name, "err", err)
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway could not read this media; try again")
	}
	body, err := json.Marshal(map[string]any{"contents": []map[string]any{{
		"uri": uri, "mimeType": e.MIMEType, "blob": data,
	}}})
	if err != nil {
		return nil, err
	}
	return complete(body), nil
}
