package upstream

import (
	"encoding/json"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Mirrored sessions. A legacy server learns its client's capabilities
// only at initialize, and a server must not rely on one its client did
// not declare; the gateway's sessions declare everything it relays, so a
// server would take any client for one that can sample, elicit and list
// roots. For a legacy server over http or sse, where one more session
// costs only an initialize, a call that runs server code for a client
// that declared fewer of those members goes to a session initialized with
// just the client's:
//
//	Call ─► method runs server code? server legacy over http/sse? the
//	   │    client's capabilities known, and some member of the base
//	   │    session's missing from them?
//	   ├─ no ─► the base session (or the caller's pooled one), as before
//	   └─ yes ─► e.mirrors: the session of (caller, mirrored set), made
//	             at the first call that needs it, reaped when idle
//
// The mirrored set holds the client's members that the base session
// declares, each cut down to the sub-members the base declares (so
// elicitation {"form":{}} stays form-only, and a shared session's roots
// never get listChanged), in the base's order: a few bytes that key the
// session, and a bounded number of sets per caller whatever a client
// declares. Lists, subscriptions, logging/setLevel, the catalog's
// refreshes and notifications stay on the base session, and so does a
// task-augmented tools/call, whose tasks/get and tasks/result go there.
// Requests a mirrored session sends outside a call are handled as its
// base session's would be: a shared server's belong to no one client (the
// gateway answers them), a pooled one's to its caller.

// mirroredMethods are the requests that run server code for the client.
var mirroredMethods = map[string]bool{
	"tools/call":          true,
	"prompts/get":         true,
	"resources/read":      true,
	"completion/complete": true,
}

// maxSharedMirrors bounds the mirrored sessions of a shared server: more
// than the sets the default capabilities allow (at most 30), so that only
// a manager configured with many more capabilities ever evicts one.
const maxSharedMirrors = 32

// newMirrors returns the pool of srv's mirrored sessions, or nil for a
// server that is never mirrored: stdio (one process, one session) and
// modern ones (told the capabilities on every request).
func newMirrors(srv config.Server) *pool {
	if srv.Transport != config.TransportHTTP && srv.Transport != config.TransportSSE || srv.Protocol == config.ProtocolModern {
		return nil
	}
	mode := srv.SessionMode
	if mode == "" {
		mode = config.SessionShared
	}
	p := newPoolOf(mode, srv.Pool)
	if mode == config.SessionShared {
		p.max = maxSharedMirrors
	}
	return p
}

// mirrorOf returns the capabilities of the mirrored session a call of
// method should go to, or nil for the session it would take otherwise.
// base is e's base client.
func (m *Manager) mirrorOf(e *entry, base *Client, who Caller, method string, params json.RawMessage, hooks *CallHooks) json.RawMessage {
	if e.mirrors == nil || hooks == nil || hooks.Capabilities == nil || !mirroredMethods[method] || base.Era() != EraLegacy {
		return nil
	}
	if method == "tools/call" {
		if _, ok, _ := rawjson.Get(params, "task"); ok {
			return nil
		}
	}
	return mirrorCaps(m.capsFor(e.cfg, e.mirrors.owner(who)), hooks.Capabilities)
}

// mirrorCaps returns the members of declared (a client's capabilities)
// that base (a session's) has, each with the sub-members of base's value
// that declared's value has, in base's order; or nil when declared has
// every member of base, or is not an object (unknown). A member or
// sub-member that is null, false or, for a member, not an object counts
// as not declared.
func mirrorCaps(base, declared json.RawMessage) json.RawMessage {
	if !isObject(declared) || !isObject(base) {
		return nil
	}
	out := []byte{'{'}
	all, n := true, 0
	err := rawjson.Members(base, func(key, bval []byte) bool {
		name, err := rawjson.Unquote(key)
		if err != nil {
			return true
		}
		cval, ok, _ := rawjson.Get(declared, name)
		if !ok || !isObject(cval) {
			all = false
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = rawjson.AppendString(out, name)
		out = append(out, ':')
		out = appendWithin(out, bval, cval)
		return true
	})
	if err != nil || all {
		return nil
	}
	return append(out, '}')
}

// appendWithin appends to out the object of base's members whose names
// declared has, with base's values.
func appendWithin(out, base, declared []byte) []byte {
	out = append(out, '{')
	n := 0
	if isObject(base) {
		rawjson.Members(base, func(key, val []byte) bool {
			name, err := rawjson.Unquote(key)
			if err != nil {
				return true
			}
			if v, ok, _ := rawjson.Get(declared, name); !ok || string(v) == "null" || string(v) == "false" {
				return true
			}
			if n > 0 {
				out = append(out, ',')
			}
			n++
			out = rawjson.AppendString(out, name)
			out = append(out, ':')
			out = append(out, val...)
			return true
		})
	}
	return append(out, '}')
}

// capsFor returns the capabilities a session of srv for who declares.
func (m *Manager) capsFor(srv config.Server, who Caller) json.RawMessage {
	if relaysRoots(srv, who) {
		return m.opts.Capabilities
	}
	return m.staticCaps
}
