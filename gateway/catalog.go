package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/upstream"
)

// catalog is an immutable merged view of every server's tools, prompts,
// resources and resource templates (DESIGN decision 6). A new one replaces
// the old whole; readers never lock.
type catalog struct {
	version   uint64
	tools     *list
	prompts   *list
	resources *list
	templates *list

	toolNames   *naming.Table
	promptNames *naming.Table
	// taskSupport is, by server and original tool name, the tool's own
	// execution.taskSupport when its server declared task-augmented
	// tools/call ("forbidden" when absent), and "" when the server has no
	// task support.
	taskSupport map[naming.Ref]string

	// Resource routing (resources.go). URIs are indexed in their
	// normalized form (normalizeURI).
	prefix     string
	namespaced map[string]bool        // by server: are its URIs exposed namespaced?
	bareURIs   map[string][]string    // URI exposed bare -> servers
	origURIs   map[string][]string    // URI -> servers (every server)
	ownURIs    map[ownURI]string      // (server, URI) -> the server's own spelling of it
	tmpls      map[string][]*template // server -> its templates

	// problems are what the build noticed, per server: clashing names,
	// tools left out.
	problems map[string][]string
}

// list is one merged list: its items sorted by key, and the whole list
// encoded once as the result object of its */list method.
type list struct {
	field string // the result member: "tools", "prompts", "resources", "resourceTemplates"
	items []item
	full  json.RawMessage // {"<field>":[...]}
	// coverage is which access rules cover each item (acl.go), worked
	// out at the first list for a caller with rules.
	coverage listCoverage
	// nonObjectOutput says that a tool of the list has an outputSchema
	// whose root is not an object schema: a 2026-07-28 server's, which
	// the session era cannot carry.
	nonObjectOutput bool
	// modernList is the list as 2026-07-28 clients get it, made at the
	// first of their lists (see modern).
	modernOnce sync.Once
	modernList *list
}

// modern returns l as the 2026-07-28 era lists it: its tools without
// execution.taskSupport, which that era removed (tasks are an extension
// there). It is made once, at the first modern list of l; l itself when
// nothing differs.
func (l *list) modern() *list {
	if l.field != "tools" {
		return l
	}
	l.modernOnce.Do(func() {
		items := make([]item, len(l.items))
		changed := false
		for i, it := range l.items {
			items[i] = it
			if raw, ok := withoutTaskSupport(it.raw); ok {
				items[i].raw, changed = raw, true
			}
		}
		l.modernList = l
		if changed {
			l.modernList = newList(l.field, items)
		}
	})
	return l.modernList
}

// withoutTaskSupport returns tool without execution.taskSupport (and
// without execution when nothing else is in it), and whether it changed.
func withoutTaskSupport(tool json.RawMessage) (json.RawMessage, bool) {
	exec, ok, _ := rawjson.Get(tool, "execution")
	if !ok {
		return tool, false
	}
	if len(exec) > 0 && exec[0] == '{' {
		if _, has, _ := rawjson.Get(exec, "taskSupport"); !has {
			return tool, false
		}
		rest, err := rawjson.Delete(exec, "taskSupport")
		if err != nil {
			return tool, false
		}
		if keys, _ := rawjson.Keys(rest); len(keys) > 0 {
			out, err := rawjson.Set(tool, "execution", rest)
			return out, err == nil
		}
	}
	out, err := rawjson.Delete(tool, "execution")
	if err != nil {
		return tool, false
	}
	return out, true
}

// item is one entry of a merged list.
type item struct {
	key    string // sort and cursor key: the exposed name or URI (+ "\x00" + server when URIs may repeat)
	server string
	uri    string          // a resource's URI or a template, as the server gives it; "" for tools and prompts
	raw    json.RawMessage // the upstream's object with its name or URI rewritten
}

// ownURI names a server's resource by its normalized URI.
type ownURI struct{ server, uri string }

func newList(field string, items []item) *list {
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	var b bytes.Buffer
	b.WriteString(`{"`)
	b.WriteString(field)
	b.WriteString(`":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.raw)
	}
	b.WriteString(`]}`)
	l := &list{field: field, items: items, full: b.Bytes()}
	if field == "tools" {
		for _, it := range items {
			if schema, ok, _ := rawjson.Get(it.raw, "outputSchema"); ok && !ObjectSchema(schema) {
				l.nonObjectOutput = true
				break
			}
		}
	}
	return l
}

// ObjectSchema reports whether a tool's outputSchema is one the session
// era allows: an object schema ("type": "object" at its root).
func ObjectSchema(schema json.RawMessage) bool {
	if len(schema) == 0 || schema[0] != '{' {
		return false
	}
	typ, _ := rawjson.String(schema, "type")
	return typ == "object"
}

// NonObjectOutputSchemas reports whether a tool of the merged list has an
// outputSchema that is not an object schema, which an edge of the session
// era must leave out of its tools/list.
func (s *Server) NonObjectOutputSchemas() bool { return s.cat.Load().tools.nonObjectOutput }

// page returns the items after key after (all when after is ""), at most n
// (all when n <= 0), and whether more follow.
func (l *list) page(after string, n int) ([]item, bool) {
	i := 0
	if after != "" {
		i = sort.Search(len(l.items), func(i int) bool { return l.items[i].key > after })
	}
	rest := l.items[i:]
	if n <= 0 || len(rest) <= n {
		return rest, false
	}
	return rest[:n], true
}

// catalogInput is what a build needs besides the servers' statuses.
type catalogInput struct {
	settings func(server string) serverSettings
	naming   naming.Options
	prefix   string // of namespaced URIs
	// seq gives each (server, name) its first-seen order, across builds.
	seq func(kind string, r naming.Ref) uint64
	// bareServer is the server whose URIs namespace auto leaves as they
	// are (see bareServer); "" when there is none.
	bareServer string
	// hostsTasks says whether the gateway runs tasks itself for a
	// server's tools that have no task support of their own.
	hostsTasks func(server string) bool
	// waitsForAccount says whether a server lists only ConnectTool: a
	// per-user server the gateway could not list yet, for want of a
	// connected account.
	waitsForAccount func(st upstream.Status) bool
}

// serverSettings are the per-server options the core applies.
type serverSettings struct {
	mode      naming.Mode
	namespace string // config.NamespaceAuto, Always or Never
	tools     config.ToolOptions
}

// buildCatalog merges the servers' lists. Every byte of an upstream object
// is kept except the name or URI the gateway exposes it under (and a
// description override from config). A server that is not running leaves
// the lists (clients get list_changed, and another when it is back), but
// its last lists stay in the routing tables, so that a call to one of its
// tools names the server and its state (DESIGN decision 9) rather than
// being an unknown tool.
func buildCatalog(servers []upstream.Status, version uint64, in catalogInput, logger *slog.Logger) *catalog {
	c := &catalog{
		version:     version,
		prefix:      in.prefix,
		namespaced:  map[string]bool{},
		bareURIs:    map[string][]string{},
		origURIs:    map[string][]string{},
		ownURIs:     map[ownURI]string{},
		tmpls:       map[string][]*template{},
		problems:    map[string][]string{},
		taskSupport: map[naming.Ref]string{},
	}
	c.tools, c.toolNames = c.buildNamed(servers, in, "tools", logger)
	c.prompts, c.promptNames = c.buildNamed(servers, in, "prompts", logger)
	c.buildResources(servers, in)
	return c
}

// buildNamed merges tools or prompts under the naming rules.
func (c *catalog) buildNamed(servers []upstream.Status, in catalogInput, kind string, logger *slog.Logger) (*list, *naming.Table) {
	type src struct {
		ref    naming.Ref
		raw    json.RawMessage
		listed bool
	}
	var srcs []src
	var entries []naming.Entry
	listed := map[naming.Ref]bool{}
	for _, st := range servers {
		set := in.settings(st.Name)
		objs := st.Tools
		if kind == "prompts" {
			objs = st.Prompts
		}
		waiting := kind == "tools" && in.waitsForAccount != nil && in.waitsForAccount(st)
		if waiting {
			objs = []json.RawMessage{connectTool(st.Name)}
		}
		for _, raw := range objs {
			name, ok := rawjson.String(raw, "name")
			if !ok || name == "" {
				c.problems[st.Name] = append(c.problems[st.Name], "a "+strings.TrimSuffix(kind, "s")+" without a name was left out")
				continue
			}
			ref := naming.Ref{Server: st.Name, Name: name}
			if listed[ref] {
				c.problems[st.Name] = append(c.problems[st.Name], fmt.Sprintf("%q is listed twice; the second is left out", name))
				continue
			}
			listed[ref] = true
			e := naming.Entry{Server: st.Name, Name: name, Mode: set.mode}
			if kind == "tools" {
				if !set.tools.Visible(name) {
					continue // hidden by tools.allow / tools.deny
				}
				e.Rename = set.tools.Rename[name]
				if d, ok := set.tools.Describe[name]; ok {
					desc, _ := json.Marshal(d)
					if r, err := rawjson.Set(raw, "description", desc); err == nil {
						raw = r
					}
				}
				support := upstreamTaskSupport(st, raw)
				c.taskSupport[ref] = support
				raw = withTaskSupport(raw, exposedTaskSupport(support, in.hostsTasks != nil && in.hostsTasks(st.Name)))
			}
			e.Seq = in.seq(kind, ref)
			entries = append(entries, e)
			srcs = append(srcs, src{ref: ref, raw: raw, listed: st.State == upstream.StateRunning || waiting})
		}
	}
	table, problems := naming.Build(in.naming, entries)
	for _, p := range problems {
		c.problems[p.Ref.Server] = append(c.problems[p.Ref.Server], p.Message)
	}
	items := make([]item, 0, len(srcs))
	for _, s := range srcs {
		exposed, ok := table.Exposed(s.ref)
		if !ok {
			continue // left out (a clash in prefix mode never)
		}
		name, _ := json.Marshal(exposed)
		raw, err := rawjson.Set(s.raw, "name", name)
		if err != nil {
			logger.Error("renaming failed", "server", s.ref.Server, "name", s.ref.Name, "err", err)
			continue
		}
		if s.listed {
			items = append(items, item{key: exposed, server: s.ref.Server, raw: raw})
		}
	}
	return newList(kind, items), table
}

// bareServer returns the server whose resource URIs namespace auto leaves
// as they are: the first server of order (the servers of the config file
// in its order, then the other registered servers by name) whose
// namespace is not always; "" when there is none. It depends on the
// configuration only, never on which server came up first or which
// schemes the servers use (DESIGN decision 7), so the form of every URI
// is the same in every run and a server coming up never changes the form
// of URIs already listed. If that server's namespace is never, no server
// under auto keeps its URIs bare.
func bareServer(order []string, settings func(server string) serverSettings) string {
	for _, name := range order {
		if settings(name).namespace != config.NamespaceAlways {
			return name
		}
	}
	return ""
}

// buildResources merges resources and templates, namespacing the URIs of
// the servers whose setting says so, and builds the routing indexes.
func (c *catalog) buildResources(servers []upstream.Status, in catalogInput) {
	var resources, templates []item
	for _, st := range servers {
		var ns bool
		switch in.settings(st.Name).namespace {
		case config.NamespaceAlways:
			ns = true
		case config.NamespaceNever:
			ns = false
		default:
			ns = st.Name != in.bareServer
		}
		c.namespaced[st.Name] = ns
		for _, raw := range st.Resources {
			uri, ok := rawjson.String(raw, "uri")
			if !ok {
				c.problems[st.Name] = append(c.problems[st.Name], "a resource without a uri was left out")
				continue
			}
			norm := normalizeURI(uri)
			if own, dup := c.ownURIs[ownURI{st.Name, norm}]; dup && own != uri {
				c.problems[st.Name] = append(c.problems[st.Name], fmt.Sprintf("resources %q and %q are one URI; %q is read for both", own, uri, own))
			} else {
				c.ownURIs[ownURI{st.Name, norm}] = uri
			}
			c.origURIs[norm] = appendOnce(c.origURIs[norm], st.Name)
			exposed := uri
			if c.exposedNamespaced(st.Name, uri) {
				exposed = namespacedURI(c.prefix, st.Name, uri)
				v, _ := json.Marshal(exposed)
				raw, _ = rawjson.Set(raw, "uri", v)
			} else {
				c.bareURIs[norm] = appendOnce(c.bareURIs[norm], st.Name)
			}
			if st.State == upstream.StateRunning {
				resources = append(resources, item{key: exposed + "\x00" + st.Name, server: st.Name, uri: uri, raw: raw})
			}
		}
		for _, raw := range st.Templates {
			t, ok := rawjson.String(raw, "uriTemplate")
			if !ok {
				c.problems[st.Name] = append(c.problems[st.Name], "a resource template without a uriTemplate was left out")
				continue
			}
			c.tmpls[st.Name] = append(c.tmpls[st.Name], compileTemplate(t))
			exposed := t
			if c.exposedNamespaced(st.Name, t) {
				exposed = namespacedURI(c.prefix, st.Name, t)
				v, _ := json.Marshal(exposed)
				raw, _ = rawjson.Set(raw, "uriTemplate", v)
			}
			if st.State == upstream.StateRunning {
				templates = append(templates, item{key: exposed + "\x00" + st.Name, server: st.Name, uri: t, raw: raw})
			}
		}
	}
	c.resources = newList("resources", resources)
	c.templates = newList("resourceTemplates", templates)
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// exposeURI returns the form of server's URI the client sees.
func (c *catalog) exposeURI(server, uri string) string {
	if c.exposedNamespaced(server, uri) {
		return namespacedURI(c.prefix, server, uri)
	}
	return uri
}

// exposedNamespaced reports whether server's URI (or template) uri is
// exposed namespaced: every one of a server whose URIs are namespaced,
// and, of any server, one that is itself in the namespaced form in any
// spelling (MCP+Files+x), which shown as it is would read as another
// server's.
func (c *catalog) exposedNamespaced(server, uri string) bool {
	if c.namespaced[server] {
		return true
	}
	_, _, ok := splitNamespaced(c.prefix, uri)
	return ok
}

// ownURI returns server's own spelling of the normalized URI norm: the
// one it listed (listed true), or norm when it listed none.
func (c *catalog) ownURI(server, norm string) (own string, listed bool) {
	if own, ok := c.ownURIs[ownURI{server, norm}]; ok {
		return own, true
	}
	return norm, false
}

// upstreamTaskSupport returns a tool's own task support: its
// execution.taskSupport ("forbidden" when absent) when its server declared
// task-augmented tools/call, else "".
func upstreamTaskSupport(st upstream.Status, tool json.RawMessage) string {
	tasks, ok, _ := rawjson.Get(st.Capabilities, "tasks")
	if !ok {
		return ""
	}
	reqs, _, _ := rawjson.Get(tasks, "requests")
	tools, _, _ := rawjson.Get(reqs, "tools")
	if _, ok, _ := rawjson.Get(tools, "call"); !ok {
		return ""
	}
	exec, _, _ := rawjson.Get(tool, "execution")
	switch v, _ := rawjson.String(exec, "taskSupport"); v {
	case "optional", "required":
		return v
	}
	return "forbidden"
}

// exposedTaskSupport is the task support the gateway lists for a tool: the
// gateway serves a required tool without a task too (block and poll), so
// required becomes optional; a tool without task support of its own is
// optional when the gateway hosts tasks for it, else forbidden.
func exposedTaskSupport(upstream string, hosts bool) string {
	switch {
	case upstream == "optional", upstream == "required":
		return "optional"
	case hosts:
		return "optional"
	}
	return "forbidden"
}

// withTaskSupport sets a tool's execution.taskSupport, keeping the rest of
// execution, and leaves the tool as it is when it already says so.
func withTaskSupport(tool json.RawMessage, support string) json.RawMessage {
	exec, ok, _ := rawjson.Get(tool, "execution")
	if !ok || string(exec) == "null" {
		exec = json.RawMessage(`{}`)
	}
	if cur, _ := rawjson.String(exec, "taskSupport"); cur == support {
		return tool
	}
	v, _ := json.Marshal(support)
	exec2, err := rawjson.Set(exec, "taskSupport", v)
	if err != nil {
		return tool
	}
	out, err := rawjson.Set(tool, "execution", exec2)
	if err != nil {
		return tool
	}
	return out
}
