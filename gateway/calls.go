package gateway

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// toolsCall routes a call by the reverse name table to its server, under
// the server's own name for the tool, and exposes the URIs of its result.
func (s *Server) toolsCall(ctx context.Context, req *Request) (*Result, error) {
	name, err := paramName(req, "tools/call", "the tool's name as tools/list gives it")
	if err != nil {
		return nil, err
	}
	if res, err, handled := s.gatewayToolCall(ctx, req, name); handled {
		return res, err
	}
	cat := s.cat.Load()
	ref, ok := cat.toolNames.Lookup(name)
	if !ok {
		return nil, invalidParams("unknown tool %q: it is not in this gateway's tools/list", name)
	}
	req.routed(ref.Server)
	req.toolName = name
	// Before taskCall: a task, relayed or hosted, and block and poll are
	// tools/calls too.
	if !s.acl.allows(req.Principal, req.Groups, kindTool, ref.Server, name) {
		return nil, forbidden(kindTool, name, ref.Server)
	}
	if ref.Name == ConnectTool {
		for _, st := range s.opts.Upstreams.Servers() {
			if st.Name == ref.Server && s.waitsForAccount(st) {
				return s.callConnectTool(ctx, req, ref.Server)
			}
		}
	}
	// The upstream's own name, set in the copy that forward makes anyway.
	var buf [64]byte
	rename := rawjson.Edit{Key: "name", Val: rawjson.AppendString(buf[:0], ref.Name)}
	if res, err, handled := s.taskCall(ctx, req, ref, req.Params, rename); handled {
		return res, err
	}
	body, err := s.forward(ctx, req, ref.Server, "tools/call", req.Params, &rename, onlyCall)
	if err != nil {
		return nil, err
	}
	if res, ok := s.inputRequired(req, ref.Server, "tools/call", body); ok {
		return res, nil
	}
	return complete(s.exposeResult(cat, req, ref.Server, body, "content", false)), nil
}

// promptsGet routes prompts/get like a tool call.
func (s *Server) promptsGet(ctx context.Context, req *Request) (*Result, error) {
	name, err := paramName(req, "prompts/get", "the prompt's name as prompts/list gives it")
	if err != nil {
		return nil, err
	}
	cat := s.cat.Load()
	ref, ok := cat.promptNames.Lookup(name)
	if !ok {
		return nil, invalidParams("unknown prompt %q: it is not in this gateway's prompts/list", name)
	}
	req.routed(ref.Server)
	req.promptName = name
	if !s.acl.allows(req.Principal, req.Groups, kindPrompt, ref.Server, name) {
		return nil, forbidden(kindPrompt, name, ref.Server)
	}
	var buf [64]byte
	rename := rawjson.Edit{Key: "name", Val: rawjson.AppendString(buf[:0], ref.Name)}
	body, err := s.forward(ctx, req, ref.Server, "prompts/get", req.Params, &rename, onlyCall)
	if err != nil {
		return nil, err
	}
	if res, ok := s.inputRequired(req, ref.Server, "prompts/get", body); ok {
		return res, nil
	}
	return complete(s.exposeResult(cat, req, ref.Server, body, "messages", true)), nil
}

// complete routes completion/complete by its ref: a prompt by its exposed
// name, a resource (template) by its URI.
func (s *Server) complete(ctx context.Context, req *Request) (*Result, error) {
	ref, ok, _ := rawjson.Get(req.Params, "ref")
	if !ok {
		return nil, invalidParams("completion/complete needs params.ref, a ref/prompt or ref/resource")
	}
	typ, _ := rawjson.String(ref, "type")
	cat := s.cat.Load()
	var server string
	var newRef json.RawMessage
	var err error
	switch typ {
	case "ref/prompt":
		name, _ := rawjson.String(ref, "name")
		r, ok := cat.promptNames.Lookup(name)
		if !ok {
			return nil, invalidParams("unknown prompt %q in completion ref: it is not in this gateway's prompts/list", name)
		}
		if !s.acl.allows(req.Principal, req.Groups, kindPrompt, r.Server, name) {
			return nil, forbidden(kindPrompt, name, r.Server)
		}
		server = r.Server
		newRef, err = setString(ref, "name", r.Name)
	case "ref/resource":
		uri, _ := rawjson.String(ref, "uri")
		var orig string
		server, orig, err = s.routeTemplate(cat, uri)
		if err == nil && !s.mayUseResource(cat, req, server, orig) {
			err = forbidden(kindResource, uri, server)
		}
		if err == nil {
			newRef, err = setString(ref, "uri", orig)
		}
	default:
		return nil, invalidParams("completion ref type %q is not ref/prompt or ref/resource", typ)
	}
	if err != nil {
		return nil, err
	}
	req.routed(server)
	params, err := rawjson.Set(req.Params, "ref", newRef)
	if err != nil {
		return nil, invalidParams("completion/complete params must be a JSON object")
	}
	body, err := s.forward(ctx, req, server, "completion/complete", params, nil, onlyCall)
	if err != nil {
		return nil, err
	}
	return complete(body), nil
}

// paramName returns params.name of a request that needs one.
func paramName(req *Request, method, what string) (string, error) {
	if len(req.Params) == 0 {
		return "", invalidParams("%s needs params with a name", method)
	}
	var name string
	if raw, _ := req.member(req.Params, "name"); len(raw) > 0 && raw[0] == '"' {
		name, _ = rawjson.Unquote(raw)
	}
	if name == "" {
		return "", invalidParams("%s needs params.name, %s", method, what)
	}
	return name, nil
}

// setString sets a string member of a params object.
func setString(obj json.RawMessage, key, value string) (json.RawMessage, error) {
	out, err := rawjson.Set(obj, key, rawjson.AppendString(nil, value))
	if err != nil {
		return nil, invalidParams("params must be a JSON object")
	}
	return out, nil
}

// ToolInputSchema returns the inputSchema of the tool exposed as name in
// the merged catalog, as its server gives it, for an edge that checks a
// call's headers against it. ok is false when no tool has that name.
func (s *Server) ToolInputSchema(name string) (schema json.RawMessage, ok bool) {
	items := s.cat.Load().tools.items
	i := sort.Search(len(items), func(i int) bool { return items[i].key >= name })
	if i == len(items) || items[i].key != name {
		return nil, false
	}
	schema, _, _ = rawjson.Get(items[i].raw, "inputSchema")
	return schema, true
}
