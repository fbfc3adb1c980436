package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
)

// Resource routing. A client names a resource by the URI it was shown,
// which is normalized first (normalizeURI: FILE:///a/./b is file:///a/b):
//
//	mcp+files+file:///a  namespaced: the server is in the URI (the prefix
//	                     and server in any case: splitNamespaced)
//	file:///a            bare: found by, in order,
//	                       1. the servers that list it bare,
//	                       2. the servers that list a template it matches
//	                          bare,
//	                       3. the server whose result showed it, bare, to
//	                          this principal (a resource_link need not be
//	                          listed),
//	                       4. the servers that list it at all, then those
//	                          with a template it matches (a client may
//	                          hold the bare form of a URI that a server
//	                          lists namespaced).
//
// One candidate routes; several are -32602 naming them, so the client can
// use a namespaced form or the admin can switch namespacing on. The first
// three steps only know the forms the gateway shows, so whatever it lists
// bare is found on the server that listed it, even when another server
// offers the same URI or template namespaced.
//
// The server gets its own spelling of the URI when it listed the URI
// (ownURI), else the normalized URI. A URI that neither the server listed
// nor a result of the server showed is the client's own making: it is
// refused when the server could decode it into a path that the gateway
// did not route and check (unsafeURI).

// routeURI finds the server of a resource URI and the server's own URI.
func (s *Server) routeURI(cat *catalog, principal, uri string) (server, orig string, err error) {
	server, orig, offered, err := s.findURI(cat, principal, uri)
	if err != nil {
		return "", "", err
	}
	if !offered {
		if problem := unsafeURI(orig); problem != "" {
			return "", "", invalidParams("resource URI refused: %s; the gateway forwards such a URI only when its server lists it", problem)
		}
	}
	return server, orig, nil
}

// findURI is routeURI's search; offered says whether orig is one the
// server gave: listed, or shown in a result to this principal.
func (s *Server) findURI(cat *catalog, principal, uri string) (server, orig string, offered bool, err error) {
	if server, inner, ok := splitNamespaced(cat.prefix, uri); ok {
		if _, known := cat.namespaced[server]; !known {
			return "", "", false, invalidParams("unknown resource %q: no server named %q is behind this gateway", uri, server)
		}
		orig, offered = cat.ownURI(server, normalizeURI(inner))
		return server, orig, offered, nil
	}
	norm := normalizeURI(uri)
	route := func(servers []string) (string, string, bool, error) {
		if len(servers) == 1 {
			orig, offered := cat.ownURI(servers[0], norm)
			return servers[0], orig, offered, nil
		}
		sorted := append([]string(nil), servers...)
		sort.Strings(sorted)
		return "", "", false, jsonrpc.NewError(jsonrpc.CodeInvalidParams,
			fmt.Sprintf("ambiguous resource %q: servers %s all offer it; read it under its namespaced form (%s) or ask the operator to set resources.namespace", uri, strings.Join(quoteAll(sorted), ", "), namespacedURI(cat.prefix, sorted[0], norm)),
			map[string]any{"servers": sorted})
	}
	if servers := cat.bareURIs[norm]; len(servers) > 0 {
		return route(servers)
	}
	if servers := cat.templateServers(norm, true); len(servers) > 0 {
		return route(servers)
	}
	if seen, ok := s.seen.Get(seenKey{principal, norm}); ok {
		return seen.server, seen.uri, true, nil
	}
	if servers := cat.origURIs[norm]; len(servers) > 0 {
		return route(servers)
	}
	if servers := cat.templateServers(norm, false); len(servers) > 0 {
		return route(servers)
	}
	return "", "", false, invalidParams("unknown resource %q: it is not in resources/list, matches no resource template, and was not in a result you got", uri)
}

// templateServers returns, in name order, the servers with a template
// that the normalized URI uri matches: of the servers whose URIs are
// exposed bare when bare is set, else of all.
func (c *catalog) templateServers(uri string, bare bool) []string {
	var out []string
	for _, name := range sortedKeys(c.tmpls) {
		if bare && c.namespaced[name] {
			continue
		}
		for _, t := range c.tmpls[name] {
			if t.match(uri) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// routeTemplate finds the server of a completion ref/resource URI (a
// template or a resource URI) and the server's own spelling of it. A
// template is found by its normalized form among the templates listed
// bare, then among all; anything else is routed as a resource URI.
func (s *Server) routeTemplate(cat *catalog, uri string) (server, orig string, err error) {
	find := func(servers []string, norm string, bare bool) (exact []string, own string) {
		for _, name := range servers {
			if bare && cat.namespaced[name] {
				continue
			}
			for _, t := range cat.tmpls[name] {
				if t.norm == norm {
					exact = append(exact, name)
					own = t.raw
					break
				}
			}
		}
		return exact, own
	}
	if server, inner, ok := splitNamespaced(cat.prefix, uri); ok {
		if _, known := cat.namespaced[server]; !known {
			return "", "", invalidParams("unknown resource template %q: no server named %q is behind this gateway", uri, server)
		}
		if exact, own := find([]string{server}, normalizeURI(inner), false); len(exact) == 1 {
			return server, own, nil
		}
		return s.routeURI(cat, "", uri)
	}
	norm := normalizeURI(uri)
	servers := sortedKeys(cat.tmpls)
	exact, own := find(servers, norm, true)
	if len(exact) == 0 {
		exact, own = find(servers, norm, false)
	}
	switch len(exact) {
	case 1:
		return exact[0], own, nil
	case 0:
		return s.routeURI(cat, "", uri)
	default:
		return "", "", jsonrpc.NewError(jsonrpc.CodeInvalidParams,
			fmt.Sprintf("ambiguous resource template %q: servers %s all offer it; use its namespaced form", uri, strings.Join(quoteAll(exact), ", ")),
			map[string]any{"servers": exact})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// uriParam returns params.uri.
func uriParam(req *Request, method string) (string, error) {
	uri, ok := rawjson.String(req.Params, "uri")
	if !ok || uri == "" {
		return "", invalidParams("%s needs params.uri, a URI as resources/list or a result gave it", method)
	}
	return uri, nil
}

// resourcesRead routes resources/read and exposes the URIs of its contents.
func (s *Server) resourcesRead(ctx context.Context, req *Request) (*Result, error) {
	uri, err := uriParam(req, "resources/read")
	if err != nil {
		return nil, err
	}
	if name, ok := mediaName(uri); ok && s.opts.Media != nil {
		return s.readMedia(req, uri, name)
	}
	cat := s.cat.Load()
	server, orig, err := s.routeURI(cat, req.Principal, uri)
	if err != nil {
		return nil, err
	}
	req.routed(server)
	if !s.mayUseResource(cat, req, server, orig) {
		return nil, forbidden(kindResource, uri, server)
	}
	params, err := setString(req.Params, "uri", orig)
	if err != nil {
		return nil, err
	}
	body, err := s.forward(ctx, req, server, "resources/read", params, nil, onlyCall)
	if err != nil {
		return nil, err
	}
	if res, ok := s.inputRequired(req, server, "resources/read", body); ok {
		return res, nil
	}
	out, _ := mapArray(body, "contents", func(c json.RawMessage) (json.RawMessage, bool) {
		return s.exposeMember(cat, req.Principal, server, c, "uri")
	})
	return complete(s.rewriteResourceMedia(req, server, out)), nil
}

// exposeResult rewrites the URIs of the content blocks of a tools/call or
// prompts/get result (resource_link.uri, resource.uri) into the form the
// client sees, and remembers bare ones for routing. field is "content"
// (blocks) or "messages" (each with one content block). Every other byte
// is kept; a result with nothing to rewrite is returned as it is.
//
// A tools/call result whose blocks are all text, the common case, has
// nothing for either rewrite: one walk of its blocks tells, instead of the
// six passes over them of the two rewrites (each block's text skipped in
// every one; a 64 KiB text with a quote on every line costs about as much
// to skip as to check).
func (s *Server) exposeResult(cat *catalog, req *Request, server string, body json.RawMessage, field string, messages bool) json.RawMessage {
	if !messages && onlyText(body, field) {
		return body
	}
	return s.rewriteMedia(req, server, s.exposeURIs(cat, req.Principal, server, body, field, messages), field, messages)
}

// onlyText reports whether obj's member field is an array of text blocks,
// which neither exposeURIs nor rewriteMedia changes: each block's last
// "type" member is exactly "text". A block with an escaped key (one might
// spell "type"), a field given twice, or anything else unusual, is left
// to the rewrites. It reads obj once (rawjson.ArrayMembers): a block's
// text is skipped once, not three times.
func onlyText(obj json.RawMessage, field string) bool {
	var typ []byte
	return rawjson.ArrayMembers(obj, field, func(_ int, key, val []byte) bool {
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		if string(key) == `"type"` {
			typ = val // the last one wins, as both rewrites read it
		}
		return true
	}, func(int) bool {
		text := string(typ) == `"text"`
		typ = nil
		return text
	}, nil)
}

// exposeURIs is exposeResult's rewrite of URIs.
func (s *Server) exposeURIs(cat *catalog, principal, server string, body json.RawMessage, field string, messages bool) json.RawMessage {
	block := func(b json.RawMessage) (json.RawMessage, bool) {
		switch typ, _ := rawjson.String(b, "type"); typ {
		case "resource_link":
			return s.exposeMember(cat, principal, server, b, "uri")
		case "resource":
			inner, ok, _ := rawjson.Get(b, "resource")
			if !ok {
				return b, false
			}
			inner2, changed := s.exposeMember(cat, principal, server, inner, "uri")
			if !changed {
				return b, false
			}
			out, err := rawjson.Set(b, "resource", inner2)
			return out, err == nil
		}
		return b, false
	}
	out, _ := mapArray(body, field, func(el json.RawMessage) (json.RawMessage, bool) {
		if !messages {
			return block(el)
		}
		content, ok, _ := rawjson.Get(el, "content")
		if !ok {
			return el, false
		}
		c2, changed := block(content)
		if !changed {
			return el, false
		}
		out, err := rawjson.Set(el, "content", c2)
		return out, err == nil
	})
	return out
}

// exposeMember rewrites obj's URI member key for the client, remembering
// a bare URI as server's for this principal.
func (s *Server) exposeMember(cat *catalog, principal, server string, obj json.RawMessage, key string) (json.RawMessage, bool) {
	uri, ok := rawjson.String(obj, key)
	if !ok {
		return obj, false
	}
	exposed := cat.exposeURI(server, uri)
	if exposed == uri {
		s.seen.Add(seenKey{principal, normalizeURI(uri)}, seenURI{server: server, uri: uri})
		return obj, false
	}
	out, err := setString(obj, key, exposed)
	return out, err == nil
}

// mapArray applies fn to each element of the array member field of obj,
// where fn reports whether it changed the element, and returns obj with
// those replaced (and whether any was), every other byte kept.
func mapArray(obj json.RawMessage, field string, fn func(json.RawMessage) (json.RawMessage, bool)) (json.RawMessage, bool) {
	out, err := rawjson.MapArray(obj, field, func(el json.RawMessage) json.RawMessage {
		if next, ok := fn(el); ok {
			return next
		}
		return el
	})
	if err != nil {
		return obj, false
	}
	return out, !bytes.Equal(out, obj)
}

// Subscriptions. A session subscribes to a resource through the gateway;
// the gateway subscribes upstream once per (server, URI) however many
// sessions want it, and unsubscribes when the last one leaves or ends.
// Updates go to the subscribed sessions only, through the session sink of
// their subscribe request.

// subKey names one upstream subscription: a server's URI on one of its
// upstream sessions (the shared one, a principal's or a session's, by the
// server's session mode), with the caller to reach that session.
type subKey struct {
	server, uri string
	who         upstream.Caller
}

// subKeyOf returns the subscription key of a request for server's uri.
func (s *Server) subKeyOf(req *Request, server, uri string) subKey {
	var who upstream.Caller
	switch s.serverConfig(server).SessionMode {
	case config.SessionPerPrincipal:
		who.Principal = req.Principal
	case config.SessionPerSession:
		who = upstream.Caller{Principal: req.Principal, Session: req.Session}
	}
	return subKey{server: server, uri: uri, who: who}
}

type subscriptions struct {
	mu        sync.Mutex
	byKey     map[subKey]map[string]func(string, json.RawMessage)
	bySession map[string]map[subKey]bool
	bg        sync.WaitGroup // upstream unsubscribes after a session ended
}

func (ss *subscriptions) init() {
	ss.byKey = map[subKey]map[string]func(string, json.RawMessage){}
	ss.bySession = map[string]map[subKey]bool{}
}

// subscribe serves resources/subscribe.
func (s *Server) subscribe(ctx context.Context, req *Request) (*Result, error) {
	uri, err := uriParam(req, "resources/subscribe")
	if err != nil {
		return nil, err
	}
	if req.Session == "" || req.SessionNotify == nil {
		return nil, invalidParams("resources/subscribe needs a session that can receive notifications/resources/updated")
	}
	cat := s.cat.Load()
	server, orig, err := s.routeURI(cat, req.Principal, uri)
	if err != nil {
		return nil, err
	}
	req.routed(server)
	if !s.mayUseResource(cat, req, server, orig) {
		return nil, forbidden(kindResource, uri, server)
	}
	key := s.subKeyOf(req, server, orig)
	s.subs.mu.Lock()
	first := len(s.subs.byKey[key]) == 0
	s.subs.mu.Unlock()
	if first {
		params, err := setString(req.Params, "uri", orig)
		if err != nil {
			return nil, err
		}
		if _, err := s.forward(ctx, req, server, "resources/subscribe", params, nil, 0); err != nil {
			return nil, err
		}
	}
	s.subs.mu.Lock()
	if s.subs.byKey[key] == nil {
		s.subs.byKey[key] = map[string]func(string, json.RawMessage){}
	}
	s.subs.byKey[key][req.Session] = req.SessionNotify
	if s.subs.bySession[req.Session] == nil {
		s.subs.bySession[req.Session] = map[subKey]bool{}
	}
	s.subs.bySession[req.Session][key] = true
	s.subs.mu.Unlock()
	return complete(json.RawMessage(`{}`)), nil
}

// unsubscribe serves resources/unsubscribe.
func (s *Server) unsubscribe(ctx context.Context, req *Request) (*Result, error) {
	uri, err := uriParam(req, "resources/unsubscribe")
	if err != nil {
		return nil, err
	}
	cat := s.cat.Load()
	server, orig, err := s.routeURI(cat, req.Principal, uri)
	if err != nil {
		return nil, err
	}
	req.routed(server)
	key := s.subKeyOf(req, server, orig)
	if s.dropSubscription(req.Session, key) {
		params, err := setString(req.Params, "uri", orig)
		if err != nil {
			return nil, err
		}
		if _, err := s.forward(ctx, req, server, "resources/unsubscribe", params, nil, 0); err != nil {
			return nil, err
		}
	}
	return complete(json.RawMessage(`{}`)), nil
}

// dropSubscription removes session's subscription to key and reports
// whether it was the last one.
func (s *Server) dropSubscription(session string, key subKey) (last bool) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	sinks := s.subs.byKey[key]
	if _, ok := sinks[session]; !ok {
		return false
	}
	delete(sinks, session)
	delete(s.subs.bySession[session], key)
	if len(s.subs.bySession[session]) == 0 {
		delete(s.subs.bySession, session)
	}
	if len(sinks) == 0 {
		delete(s.subs.byKey, key)
		return true
	}
	return false
}

// EndSession forgets what a session held in the core (its resource
// subscriptions, unsubscribing upstream where it was the last subscriber;
// its log level) and releases its per_session upstream sessions. Edges
// call it when a session ends.
func (s *Server) EndSession(session string) {
	s.endSearchSession(session)
	s.sessionsMu.Lock()
	delete(s.sessions, session)
	s.ended.Add(session, struct{}{})
	s.sessionsMu.Unlock()
	s.endLogging(session)
	defer s.opts.Upstreams.EndSession(session)
	s.subs.mu.Lock()
	keys := make([]subKey, 0, len(s.subs.bySession[session]))
	for k := range s.subs.bySession[session] {
		keys = append(keys, k)
	}
	s.subs.mu.Unlock()
	for _, k := range keys {
		if !s.dropSubscription(session, k) {
			continue
		}
		params, _ := json.Marshal(map[string]string{"uri": k.uri})
		s.subs.bg.Add(1)
		go func() {
			defer s.subs.bg.Done()
			ctx, cancel := context.WithTimeout(s.life, s.timeout(k.server))
			defer cancel()
			if _, err := s.opts.Upstreams.Call(ctx, k.server, k.who, "resources/unsubscribe", params, nil); err != nil {
				s.logger.Debug("unsubscribing after a session ended failed", "server", k.server, "err", err)
			}
		}()
	}
}

// onNotification relays a server's notification that belongs to no call.
func (s *Server) onNotification(server string, who upstream.Caller, n *jsonrpc.Message) {
	if n.Method != "notifications/tasks/status" {
		// A copy: the message is the upstream client's.
		n = &jsonrpc.Message{JSONRPC: n.JSONRPC, Method: n.Method, Params: s.retagTask(server, who, n.Params)}
	}
	switch n.Method {
	case "notifications/progress":
		if !s.relay.deliverProgress(n.Params) {
			s.logger.Debug("dropping progress with a token of no call", "server", server)
		}
	case "notifications/message":
		s.logToSessions(server, n.Params)
	case "notifications/elicitation/complete":
		s.elicitationComplete(server, n.Params)
	case "notifications/tasks/status":
		s.taskStatus(server, who, n.Params)
	case "notifications/cancelled":
		// The server gave up one of its own requests; the upstream client
		// ends the answer it was waiting for.
	case "notifications/resources/updated":
		uri, ok := rawjson.String(n.Params, "uri")
		if !ok {
			return
		}
		params, err := setString(n.Params, "uri", s.cat.Load().exposeURI(server, uri))
		if err != nil {
			return
		}
		for _, sink := range s.subscribers(server, who, uri) {
			sink("notifications/resources/updated", params)
		}
	default:
		if !s.events.add(server, n.Method, n.Params) {
			return // a repeat within the dedup window
		}
		if s.serverConfig(server).ForwardNotifications {
			for _, sink := range s.sessionSinks() {
				sink(n.Method, n.Params)
			}
		}
	}
}

// subscribers returns the sinks of the sessions subscribed to server's
// uri, or, when none is, to a URI that uri is a sub-resource of.
func (s *Server) subscribers(server string, who upstream.Caller, uri string) []func(string, json.RawMessage) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	// The sessions subscribed to uri on the upstream session that sent the
	// update (who: zero for a shared server), or, when none is, to a URI
	// that uri is a sub-resource of.
	var out []func(string, json.RawMessage)
	for k, v := range s.subs.byKey {
		if k.server == server && k.who == who && k.uri == uri {
			for _, f := range v {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		for k, v := range s.subs.byKey {
			if k.server == server && k.who == who && strings.HasPrefix(uri, k.uri) {
				for _, f := range v {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// seenURI is a bare URI of a result: its server and the server's own
// spelling.
type seenURI struct{ server, uri string }
