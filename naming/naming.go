// Package naming decides the names under which the gateway exposes its
// servers' tools and prompts, and maps them back. It is pure: no I/O, no
// context, no logging.
//
// The gateway merges many servers' lists into one, so two servers may both
// have a "search" tool, and a server's names may break the spec's rules
// (MCP 2025-11-25, tool names: 1–128 characters of [A-Za-z0-9_.-]) or the
// 64-character limit of LLM host APIs. Build turns every (server, name) into
// one valid, unique exposed name, by default "mcp__<server>__<tool>"
// (DESIGN decision 7), and reports what it had to change. Routing goes
// through the reverse Table, never by splitting a name on the separator:
// tool names may themselves contain "__", and sanitized or shortened names
// cannot be split at all.
//
// Build works in five steps, all on entries sorted by (server, name), so
// that the outcome never depends on input order:
//
//  1. Drop repeated (server, name) pairs, and entries with an empty name.
//  2. Give each entry its candidate: the rename, the prefixed form
//     (Always) or the bare name (OnCollision, Never), sanitized and, if
//     too long, cut and given a hash suffix.
//  3. Until nothing changes: where entries of two servers share a
//     candidate, OnCollision entries switch to the prefixed form.
//  4. For each candidate still shared, the oldest entry (Seq) decides.
//     Never entries other than the oldest are left out. If the oldest is a
//     Never entry, it keeps the name; otherwise, if one entry is left, it
//     keeps it. Everyone else still sharing it takes the hashed form of
//     the name (name_1a2b3c4d): all parties alike, whatever the order.
//  5. A hashed form that is still taken gets -2, -3, … in (server, name)
//     order.
package naming

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Defaults for Options.
const (
	DefaultPrefix    = "mcp"
	DefaultSeparator = "__"
	// DefaultMaxLength is what LLM host APIs accept for a tool name.
	DefaultMaxLength = 64
)

const (
	// minMaxLength leaves room for a hash suffix (9 characters) and some
	// of the name before it.
	minMaxLength = 16
	// specMaxLength is the spec's limit on tool names (MCP 2025-11-25).
	specMaxLength = 128
	// hashLen is the length of a hash suffix: "_" and 8 hex digits.
	hashLen = 9
)

// Mode is a server's prefix mode: when its names carry the prefix and the
// server's name.
type Mode string

// The prefix modes.
const (
	// Always exposes "<prefix><sep><server><sep><name>". It is the
	// default, and cannot clash with another server's names unless a
	// server names a tool after another's exposed form.
	Always Mode = "always"
	// OnCollision exposes the bare name, or the prefixed form while
	// another server exposes the same name.
	OnCollision Mode = "on_collision"
	// Never exposes the bare name. If another entry already has it, the
	// older entry (lower Seq) keeps it and the newer Never entry is left
	// out, which Build reports as a Problem. It is meant for a single
	// upstream, or servers known not to overlap.
	Never Mode = "never"
)

// Options are the settings of Build. Zero values mean the defaults.
type Options struct {
	// Prefix starts every prefixed name. If empty, DefaultPrefix is used.
	Prefix string
	// Separator goes between prefix, server and name. If empty,
	// DefaultSeparator is used.
	Separator string
	// MaxLength is the longest exposed name, in characters. If zero,
	// DefaultMaxLength is used; it is at most 128 (the spec's limit), and
	// values below 16 are raised to 16.
	MaxLength int
}

// withDefaults returns o with its zero fields filled and MaxLength clamped.
func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Separator == "" {
		o.Separator = DefaultSeparator
	}
	switch {
	case o.MaxLength == 0:
		o.MaxLength = DefaultMaxLength
	case o.MaxLength < minMaxLength:
		o.MaxLength = minMaxLength
	case o.MaxLength > specMaxLength:
		o.MaxLength = specMaxLength
	}
	return o
}

// Ref is what an exposed name stands for: a server and the name the server
// itself uses.
type Ref struct {
	Server string
	Name   string
}

// Entry is one tool or prompt of one server, as Build takes it.
type Entry struct {
	// Server is the configured server name: [a-z0-9-], 1 to 32
	// characters, no "__" (config enforces this; Build stays correct
	// without it).
	Server string
	// Name is the server's own name for the tool or prompt. It may be any
	// string; an empty one is left out.
	Name string
	// Mode is the server's prefix mode. Empty, or a mode Build does not
	// know, means Always.
	Mode Mode
	// Rename is an exposed name from config (tools.rename), or "" for
	// none. It is used instead of the computed form, never prefixed, but
	// still sanitized and cut to MaxLength, and it may clash like any
	// other name.
	Rename string
	// Seq is the first-seen order: lower is older. It decides who keeps a
	// name that a Never entry also wants.
	Seq uint64
}

func (e *Entry) ref() Ref { return Ref{Server: e.Server, Name: e.Name} }

// Problem is something Build changed or left out that the operator should
// hear about: an entry left out, or a clash settled with a hash suffix.
// Sanitizing and shortening alone are not problems.
type Problem struct {
	// Ref is the entry concerned.
	Ref Ref
	// Exposed is the name the entry was given, or "" when it was left out.
	Exposed string
	// Other is the other party of a collision, or the zero Ref.
	Other Ref
	// Message is a sentence for the log and the server's status, naming
	// both servers and the name.
	Message string
}

// Table is an immutable two-way map between exposed names and Refs. It is
// safe for concurrent use.
type Table struct {
	byExposed map[string]Ref
	byRef     map[Ref]string
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

func (t *Table) add(r Ref, exposed string) {
	t.byExposed[exposed] = r
	t.byRef[r] = exposed
}

func (t *Table) taken(exposed string) bool {
	_, ok := t.byExposed[exposed]
	return ok
}

// Valid reports whether name is 1 to maxLength characters of
// [A-Za-z0-9_-]: the spec's rule for tool names without the dot, which
// some LLM host APIs reject. maxLength is used as given, without the
// defaults of Options.
func Valid(name string, maxLength int) bool {
	if len(name) == 0 || len(name) > maxLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !validByte(name[i]) {
			return false
		}
	}
	return true
}

func validByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// item is an entry on its way through Build.
type item struct {
	Entry
	cand   string // the exposed name it wants, then the one it gets
	out    bool   // left out
	hashed bool   // lost a clash and takes the hashed form
	clash  string // the name it clashed on
	other  Ref    // the other party of that clash
}

// Build gives each entry its exposed name and returns the table, with a
// Problem for every entry left out or renamed to settle a clash, sorted by
// Ref. The package doc lists the steps. The result depends only on opts and
// the set of entries, never on their order.
//
// An entry whose (Server, Name) is given more than once is taken once: the
// copy with the lowest Seq (then Mode, then Rename) wins and the others are
// ignored without a Problem, since a server listing a name twice is the
// caller's to report.
//
// Every exposed name is Valid for opts.MaxLength (after defaults), and
// every entry with a non-empty Name is in the table unless it is a Never
// entry that lost its name to an older entry.
func Build(opts Options, entries []Entry) (*Table, []Problem) {
	o := opts.withDefaults()
	items := dedupe(entries)

	var problems []Problem
	for i := range items {
		it := &items[i]
		if it.Name == "" {
			it.out = true
			problems = append(problems, Problem{
				Ref:     it.ref(),
				Message: fmt.Sprintf("an entry of server %q with an empty name is left out", it.Server),
			})
			continue
		}
		// Candidates are compared at full length: two servers' identical
		// long names clash even though their cut forms would differ.
		switch {
		case it.Rename != "":
			it.cand = sanitize(it.Rename)
		case it.Mode == OnCollision || it.Mode == Never:
			it.cand = sanitize(it.Name)
		default:
			it.cand = o.prefixed(&it.Entry)
		}
	}

	// OnCollision entries that share a name with another server's entry
	// take the prefixed form. That may clash anew (a tool may be named
	// like another's prefixed form), so repeat until nothing changes; an
	// entry changes at most once.
	changed := slices.ContainsFunc(items, func(it item) bool { return it.Mode == OnCollision && it.Rename == "" })
	for changed {
		changed = false
		for _, g := range clashes(items) {
			if !manyServers(items, g) {
				continue
			}
			for _, i := range g {
				it := &items[i]
				if it.Mode != OnCollision || it.Rename != "" {
					continue
				}
				if p := o.prefixed(&it.Entry); p != it.cand {
					it.cand, changed = p, true
				}
			}
		}
	}

	// What is still shared is settled by age for Never entries, and by
	// hashing for everyone else.
	var hashed []int
	for _, g := range clashes(items) {
		oldest := g[0]
		for _, i := range g[1:] {
			if older(&items[i].Entry, &items[oldest].Entry) {
				oldest = i
			}
		}
		winner := -1
		if items[oldest].Mode == Never {
			winner = oldest
		}
		var rest []int
		for _, i := range g {
			it := &items[i]
			switch {
			case i == winner:
			case it.Mode == Never:
				it.out, it.clash, it.other = true, it.cand, items[oldest].ref()
			default:
				rest = append(rest, i)
			}
		}
		if winner < 0 && len(rest) == 1 {
			continue // the only one left keeps the name
		}
		for _, i := range rest {
			other := winner
			if other < 0 {
				other = rest[0]
				if other == i {
					other = rest[1]
				}
			}
			it := &items[i]
			it.hashed, it.clash, it.other = true, it.cand, items[other].ref()
			hashed = append(hashed, i)
		}
	}

	// Names kept so far are unique. The hashed forms differ from each
	// other unless 32 bits of SHA-256 collide, but a server could name a
	// tool like one of them: then count up, in (server, name) order.
	t := &Table{
		byExposed: make(map[string]Ref, len(items)),
		byRef:     make(map[Ref]string, len(items)),
	}
	// Full-length names are unique now: those that fit go in as they are;
	// longer ones are cut with their hash, and a cut form that is taken
	// (a server naming a tool like it) counts up like the hashed forms.
	for i := range items {
		if it := &items[i]; !it.out && !it.hashed && len(it.cand) <= o.MaxLength {
			t.add(it.ref(), it.cand)
		}
	}
	for i := range items {
		it := &items[i]
		if it.out || it.hashed || len(it.cand) <= o.MaxLength {
			continue
		}
		h := hashOf(&it.Entry)
		name := o.withHash(it.cand, h, "")
		for k := 2; t.taken(name); k++ {
			name = o.withHash(it.cand, h, "-"+strconv.Itoa(k))
		}
		it.cand = name
		t.add(it.ref(), name)
	}
	slices.Sort(hashed)
	for _, i := range hashed {
		it := &items[i]
		h := hashOf(&it.Entry)
		name := o.withHash(it.cand, h, "")
		for k := 2; t.taken(name); k++ {
			name = o.withHash(it.cand, h, "-"+strconv.Itoa(k))
		}
		it.cand = name
		t.add(it.ref(), name)
	}

	for i := range items {
		it := &items[i]
		switch {
		case it.out && it.Name != "":
			problems = append(problems, Problem{
				Ref:   it.ref(),
				Other: it.other,
				Message: fmt.Sprintf("%q of server %q is left out: the name %q is already exposed by %q of server %q (prefix mode never)",
					it.Name, it.Server, it.clash, it.other.Name, it.other.Server),
			})
		case it.hashed:
			problems = append(problems, Problem{
				Ref:     it.ref(),
				Exposed: it.cand,
				Other:   it.other,
				Message: fmt.Sprintf("%q of server %q is exposed as %q: the name %q clashes with %q of server %q",
					it.Name, it.Server, it.cand, it.clash, it.other.Name, it.other.Server),
			})
		}
	}
	// Items are in Ref order and each has at most one problem, except that
	// empty names were reported first.
	slices.SortFunc(problems, func(a, b Problem) int { return compareRefs(a.Ref, b.Ref) })
	return t, problems
}

// dedupe returns the entries sorted by (Server, Name), each pair once: the
// copy with the lowest Seq, then Mode, then Rename. It sorts indexes, which
// is cheaper than moving items.
func dedupe(entries []Entry) []item {
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &entries[i], &entries[j]
		if c := compareRefs(a.ref(), b.ref()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Mode), string(b.Mode)); c != 0 {
			return c
		}
		return strings.Compare(a.Rename, b.Rename)
	})
	items := make([]item, 0, len(entries))
	for _, i := range order {
		e := &entries[i]
		if n := len(items); n > 0 && items[n-1].Server == e.Server && items[n-1].Name == e.Name {
			continue
		}
		items = append(items, item{Entry: *e})
	}
	return items
}

// clashes returns the indexes of the items that are not left out, grouped
// by the name they want, for each name more than one wants. Each group is in
// (server, name) order; the groups are in name order.
func clashes(items []item) [][]int {
	first := make(map[string]int, len(items))
	var shared map[string][]int
	for i := range items {
		it := &items[i]
		if it.out {
			continue
		}
		j, ok := first[it.cand]
		if !ok {
			first[it.cand] = i
			continue
		}
		if shared == nil {
			shared = make(map[string][]int)
		}
		g := shared[it.cand]
		if g == nil {
			g = []int{j}
		}
		shared[it.cand] = append(g, i)
	}
	names := make([]string, 0, len(shared))
	for name := range shared {
		names = append(names, name)
	}
	slices.Sort(names)
	groups := make([][]int, len(names))
	for i, name := range names {
		groups[i] = shared[name]
	}
	return groups
}

// manyServers reports whether the items of g belong to more than one server.
func manyServers(items []item, g []int) bool {
	for _, i := range g[1:] {
		if items[i].Server != items[g[0]].Server {
			return true
		}
	}
	return false
}

// older reports whether a was seen before b: lower Seq, then server name,
// then name.
func older(a, b *Entry) bool {
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return compareRefs(a.ref(), b.ref()) < 0
}

func compareRefs(a, b Ref) int {
	if c := strings.Compare(a.Server, b.Server); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// prefixed returns the Always form of e, sanitized, at full length.
func (o *Options) prefixed(e *Entry) string {
	return sanitize(o.Prefix + o.Separator + e.Server + o.Separator + e.Name)
}

// withHash returns name, cut so that it fits, then "_", the hash h and
// suffix. name is sanitized, and so ASCII.
func (o *Options) withHash(name, h, suffix string) string {
	if keep := o.MaxLength - hashLen - len(suffix); len(name) > keep {
		name = name[:max(keep, 0)]
	}
	s := name + "_" + h + suffix
	if len(s) > o.MaxLength { // a suffix longer than the name part
		s = s[len(s)-o.MaxLength:]
	}
	return s
}

// hashOf returns 8 hex digits of SHA-256 over e's server and original name:
// stable across runs and independent of other entries.
func hashOf(e *Entry) string {
	sum := sha256.Sum256([]byte(e.Server + "\x00" + e.Name))
	return hex.EncodeToString(sum[:4])
}

// sanitize replaces each character outside [A-Za-z0-9_-] with "_", one for
// each rune (or each byte of invalid UTF-8).
func sanitize(s string) string {
	i := 0
	for i < len(s) && validByte(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if r < 0x80 && validByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
