package naming

import (
	"fmt"
	"testing"
)

// benchTable builds the table of 100 servers × 100 tools (always mode)
// and returns it with every exposed name and every ref, in entry order.
func benchTable(b *testing.B) (*Table, []string, []Ref) {
	b.Helper()
	var entries []Entry
	for s := range 100 {
		for i := range 100 {
			entries = append(entries, Entry{Server: fmt.Sprintf("server-%03d", s), Name: fmt.Sprintf("tool_%03d", i), Seq: uint64(s)})
		}
	}
	t, problems := Build(Options{}, entries)
	if len(problems) != 0 || t.Len() != len(entries) {
		b.Fatalf("Build: %d names, problems %v", t.Len(), problems)
	}
	names := make([]string, len(entries))
	refs := make([]Ref, len(entries))
	for i := range entries {
		refs[i] = entries[i].ref()
		name, ok := t.Exposed(refs[i])
		if !ok {
			b.Fatalf("no exposed name for %v", refs[i])
		}
		names[i] = name
	}
	return t, names, refs
}

// BenchmarkTable_Lookup maps an exposed name back to its server and tool
// in a table of 10,000 tools, as the core routes every tools/call. The
// names go round the whole table, so that the map is not hit in one place.
func BenchmarkTable_Lookup(b *testing.B) {
	t, names, refs := benchTable(b)
	if r, ok := t.Lookup("mcp__server-042__tool_007"); !ok || r != (Ref{Server: "server-042", Name: "tool_007"}) {
		b.Fatalf("Lookup = %v, %v", r, ok)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r, ok := t.Lookup(names[i]); !ok || r.Server != refs[i].Server {
			b.Fatalf("Lookup(%q) = %v, %v", names[i], r, ok)
		}
		i = (i + 1) % len(names)
	}
}

// BenchmarkTable_LookupMiss looks up a name the table does not have (a
// client calling a tool that went away).
func BenchmarkTable_LookupMiss(b *testing.B) {
	t, _, _ := benchTable(b)
	const name = "mcp__server-042__no_such_tool"
	if _, ok := t.Lookup(name); ok {
		b.Fatal("found a name that is not there")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := t.Lookup(name); ok {
			b.Fatal("found")
		}
	}
}

// BenchmarkTable_Exposed maps a (server, tool) to its exposed name in a
// table of 10,000 tools: the forward direction, used for the names in
// lists and notifications.
func BenchmarkTable_Exposed(b *testing.B) {
	t, names, refs := benchTable(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if name, ok := t.Exposed(refs[i]); !ok || len(name) != len(names[i]) {
			b.Fatalf("Exposed(%v) = %q, %v", refs[i], name, ok)
		}
		i = (i + 1) % len(refs)
	}
}
