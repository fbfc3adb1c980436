package gateway

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sort"

	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
	"github.com/mcpgw/mcpgw/upstream"
)

// catalog is an immutable merged view of every server's tools (DESIGN
// decision 6). A new one replaces the old whole; readers never lock.
type catalog struct {
	version uint64
	names   *naming.Table
	tools   []tool // sorted by exposed name
	// listBody is the tools/list result {"tools":[...]}, encoded once.
	listBody json.RawMessage
}

// tool is one exposed tool.
type tool struct {
	exposed string
	ref     naming.Ref
	raw     json.RawMessage // the upstream's tool object with "name" replaced
}

// buildCatalog merges the servers' tool lists. Every field of an upstream
// tool is kept byte for byte except its name. A server that is down keeps
// its last list, so its tools stay routable and their calls can say why
// they fail.
func buildCatalog(servers []upstream.Status, version uint64, logger *slog.Logger) *catalog {
	var tools []tool
	var refs []naming.Ref
	seen := make(map[naming.Ref]bool)
	for _, st := range servers {
		for _, raw := range st.Tools {
			name, ok := rawjson.String(raw, "name")
			if !ok || name == "" {
				logger.Warn("skipping a tool without a name", "server", st.Name)
				continue
			}
			ref := naming.Ref{Server: st.Name, Name: name}
			if seen[ref] {
				logger.Warn("skipping a tool listed twice", "server", st.Name, "tool", name)
				continue
			}
			seen[ref] = true
			refs = append(refs, ref)
			tools = append(tools, tool{ref: ref, raw: raw})
		}
	}
	names := naming.NewTable(refs)
	for i := range tools {
		t := &tools[i]
		t.exposed, _ = names.Exposed(t.ref)
		exposedJSON, _ := json.Marshal(t.exposed)
		renamed, err := rawjson.Set(t.raw, "name", exposedJSON)
		if err != nil { // cannot happen: rawjson.String read the object
			logger.Error("renaming a tool failed", "server", t.ref.Server, "tool", t.ref.Name, "err", err)
			continue
		}
		t.raw = renamed
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].exposed < tools[j].exposed })

	var b bytes.Buffer
	b.WriteString(`{"tools":[`)
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t.raw)
	}
	b.WriteString(`]}`)
	return &catalog{version: version, names: names, tools: tools, listBody: b.Bytes()}
}
