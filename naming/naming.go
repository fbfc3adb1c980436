// Package naming maps the names the gateway exposes to (server, original
// name) pairs and back. It is pure: no I/O, no context, no logging.
//
// The exposed form is "<prefix><sep><server><sep><name>", by default
// "mcp__<server>__<tool>" (DESIGN decision 7). Routing always goes through
// the reverse table, never by splitting a name on the separator: tool names
// may themselves contain "__". Because a server name is [a-z0-9-] and never
// contains "__", two different (server, name) pairs never give the same
// exposed name in this mode.
package naming

// Default prefix and separator of exposed names.
const (
	DefaultPrefix    = "mcp"
	DefaultSeparator = "__"
)

// Ref is what an exposed name stands for: a server and the name the server
// itself uses.
type Ref struct {
	Server string
	Name   string
}

// Exposed returns the default exposed name of (server, name).
func Exposed(server, name string) string {
	return DefaultPrefix + DefaultSeparator + server + DefaultSeparator + name
}

// Table is an immutable two-way map between exposed names and Refs.
type Table struct {
	byExposed map[string]Ref
	byRef     map[Ref]string
}

// NewTable returns the table of refs. A ref listed twice is kept once.
func NewTable(refs []Ref) *Table {
	t := &Table{
		byExposed: make(map[string]Ref, len(refs)),
		byRef:     make(map[Ref]string, len(refs)),
	}
	for _, r := range refs {
		if _, dup := t.byRef[r]; dup {
			continue
		}
		e := Exposed(r.Server, r.Name)
		t.byExposed[e] = r
		t.byRef[r] = e
	}
	return t
}

// Lookup returns the ref an exposed name stands for.
func (t *Table) Lookup(exposed string) (Ref, bool) {
	r, ok := t.byExposed[exposed]
	return r, ok
}

// Exposed returns the exposed name of r, if r is in the table.
func (t *Table) Exposed(r Ref) (string, bool) {
	e, ok := t.byRef[r]
	return e, ok
}

// Len returns the number of names in the table.
func (t *Table) Len() int { return len(t.byExposed) }
