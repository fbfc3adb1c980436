package modern

import (
	"encoding/json"
	"errors"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Cache scopes of a cacheable result (MCP 2026-07-28,
// server/utilities/caching).
const (
	scopePublic  = "public"
	scopePrivate = "private"
)

// cacheable reports whether method's complete results carry ttlMs and
// cacheScope.
func cacheable(method string) bool {
	switch method {
	case "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read":
		return true
	}
	return false
}

// scopeOf returns the cacheScope of method's results for everyone: a
// list is private when access rules shape what each caller sees, else
// public, the same for every page of it; what a server reads out is
// private (a legacy server gives no hint, and media links name their
// principal).
func (h *Handler) scopeOf(method string) string {
	if method == "resources/read" || h.core.ListsVaryByPrincipal() {
		return scopePrivate
	}
	return scopePublic
}

// encodeResult returns the core's result as this era writes it: with its
// resultType, the gateway's serverInfo in _meta and, where the method's
// results are cacheable, ttlMs 0 (the catalog changes when its servers
// do, and listen streams tell of it) and cacheScope. Every other member
// stays as the server sent it.
func (h *Handler) encodeResult(req *request, res *gateway.Result) (json.RawMessage, error) {
	body := res.Body
	if len(body) == 0 {
		body = json.RawMessage(`{}`)
	}
	if body[0] != '{' {
		return nil, errors.New("result is not an object")
	}
	typ := res.Type
	if typ == "" {
		typ = gateway.ResultComplete
	}
	edits := []rawjson.Edit{{Key: "resultType", Val: mustJSON(string(typ))}}
	edits = append(edits, h.metaEdit(body))
	if typ == gateway.ResultComplete && cacheable(req.method) {
		edits = append(edits,
			rawjson.Edit{Key: "ttlMs", Val: json.RawMessage("0")},
			rawjson.Edit{Key: "cacheScope", Val: mustJSON(h.scopeOf(req.method))})
	}
	return rawjson.Apply(body, edits...)
}

// metaEdit is the edit that puts the gateway's serverInfo into obj's
// _meta, keeping the rest of it.
func (h *Handler) metaEdit(obj json.RawMessage) rawjson.Edit {
	info := h.core.Info().ServerInfo
	if meta, ok, _ := rawjson.Get(obj, "_meta"); ok && len(meta) > 0 && meta[0] == '{' {
		return rawjson.Edit{Key: "_meta", In: []rawjson.Edit{{Key: front.MetaServerInfo, Val: info}}}
	}
	meta, _ := rawjson.Set([]byte(`{}`), front.MetaServerInfo, info)
	return rawjson.Edit{Key: "_meta", Val: meta}
}

// discover answers server/discover: the versions served on this endpoint
// in both eras, what the gateway offers, and who it is.
func (h *Handler) discover(req *request) *gateway.Result {
	caps := h.core.InfoFor(req.principal).Capabilities
	// The session era's tasks are not this era's, which are an
	// extension.
	if c, err := rawjson.Delete(caps, "tasks"); err == nil {
		caps = c
	}
	if c, err := withExtension(caps, gateway.ExtTasks); err == nil {
		caps = c
	}
	body := map[string]any{
		"supportedVersions": h.versions,
		"capabilities":      caps,
	}
	if s := h.core.Instructions(); s != "" {
		body["instructions"] = s
	}
	res, err := h.encodeResult(req, &gateway.Result{Type: gateway.ResultComplete, Body: mustJSON(body)})
	if err != nil {
		panic("modern: encoding discover: " + err.Error()) // our own object
	}
	return &gateway.Result{Type: gateway.ResultComplete, Body: res}
}

// withExtension returns capabilities caps with the extension id declared
// (an empty object) in capabilities.extensions, keeping the others.
func withExtension(caps json.RawMessage, id string) (json.RawMessage, error) {
	ext, ok, err := rawjson.Get(caps, "extensions")
	if err != nil {
		return nil, err
	}
	if !ok || len(ext) == 0 || ext[0] != '{' {
		ext = json.RawMessage(`{}`)
	}
	ext, err = rawjson.Set(ext, id, json.RawMessage(`{}`))
	if err != nil {
		return nil, err
	}
	return rawjson.Set(caps, "extensions", ext)
}
