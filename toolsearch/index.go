package toolsearch

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Limits of Search.
const (
	// DefaultLimit is the number of hits Search returns when asked for 0.
	DefaultLimit = 5
	// MaxLimit is the most hits one Search returns.
	MaxLimit = 50
	// MaxQueryBytes is the longest query Search takes.
	MaxQueryBytes = 1024
	// MaxQueryTerms is the most distinct words (stop words aside) a
	// query may have. A search costs about the postings of its words, so
	// this bounds what one query can make the gateway do; a question put
	// in words needs far fewer.
	MaxQueryTerms = 32
)

// maxTF bounds how often a term counts in one field of one tool. Honest
// text rarely says a word more than twice; an upstream that repeats the
// words agents search for gains nothing from it, while the length of
// the field it stuffed still counts against it.
const maxTF = 2

// Ranking parameters. k1 is BM25's usual value. The weights put a tool's
// name and title above its description, and that above its parameters;
// the server's name counts like a parameter. b, BM25's length
// normalization, is 0.5 rather than the usual 0.75: tool descriptions are
// short, and a long one is more often thorough than padded. A server's
// name has nothing to normalize. These values sit in the middle of the
// range where every query of the package's tests finds its tool first.
const k1 = 1.2

var (
	fieldWeight = [numFields]float64{
		fieldName:        3,
		fieldTitle:       3,
		fieldDescription: 1.5,
		fieldParams:      1,
		fieldServer:      1,
	}
	fieldB = [numFields]float64{
		fieldName:        0.5,
		fieldTitle:       0.5,
		fieldDescription: 0.5,
		fieldParams:      0.5,
		fieldServer:      0,
	}
)

// Tool is one tool as the gateway exposes it.
type Tool struct {
	// Name is the exposed name, unique in the index.
	Name string
	// Server is the name of the server the tool belongs to.
	Server string
	// Raw is the tool's definition as the server listed it: a JSON object
	// with title, description, inputSchema and so on. The index reads it
	// and keeps none of it.
	Raw json.RawMessage
}

// Hit is one tool found by Search.
type Hit struct {
	Name   string
	Server string
	// Score is the tool's relevance to the query; it compares hits of one
	// search, not of different searches.
	Score float64
}

// Index ranks tools for a query. Its zero value is an empty index ready
// to use. An Index is safe for concurrent use: updates are serialized,
// and each Search works on the snapshot that was current when it began.
type Index struct {
	mu  sync.Mutex // serializes updates; Search never takes it
	cur atomic.Pointer[snapshot]
}

// snapshot is an immutable state of the index: one segment per server,
// sorted by server name so that scores are summed in one order.
type snapshot struct {
	segs []*segment
	base []int // base[i] is the number of docs in segs[:i]
	docs int
	lens [numFields]float64 // total terms per field over all docs
}

// segment is the immutable index of one server's tools.
type segment struct {
	server string
	docs   []doc
	byName map[string]int32
	terms  map[string]span // where each term's postings are in postings
	// postings holds the postings of all terms, each term's in doc order.
	postings []posting
	lens     [numFields]float64
}

// span is a part of segment.postings.
type span struct{ off, n int32 }

// postingsOf returns the postings of term t.
func (s *segment) postingsOf(t string) []posting {
	sp := s.terms[t]
	return s.postings[sp.off : sp.off+sp.n]
}

// doc is one tool in a segment.
type doc struct {
	name string
	lens [numFields]int32 // terms per field
}

// posting is a term's occurrences in one doc.
type posting struct {
	doc int32
	tf  [numFields]uint8 // at most maxTF
}

// SetServer replaces server's tools with tools. An empty tools removes the
// server. On error the index is unchanged.
func (ix *Index) SetServer(server string, tools []Tool) error {
	return ix.SetServers(map[string][]Tool{server: tools})
}

// RemoveServer removes server's tools. Removing a server the index does
// not have does nothing.
func (ix *Index) RemoveServer(server string) {
	// An empty list of a named server cannot fail.
	_ = ix.SetServers(map[string][]Tool{server: nil})
}

// SetServers replaces the tools of each server in byServer, in one step:
// a search sees all of these changes or none. An empty list removes that
// server. It is what start-up uses, and what a change that renames tools
// of several servers at once (a name collision appearing) needs, since
// exposed names must stay unique in the index. On error the index is
// unchanged.
func (ix *Index) SetServers(byServer map[string][]Tool) error {
	built := make(map[string]*segment, len(byServer))
	var b builder
	// In server order, so that of several bad servers the same one is
	// reported every time.
	for _, server := range slices.Sorted(maps.Keys(byServer)) {
		tools := byServer[server]
		if server == "" {
			return errors.New("a server name is empty")
		}
		if len(tools) == 0 {
			built[server] = nil
			continue
		}
		seg, err := b.buildSegment(server, tools)
		if err != nil {
			return err
		}
		built[server] = seg
	}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.cur.Load()
	var segs []*segment
	if old != nil {
		for _, s := range old.segs {
			if _, replaced := built[s.server]; !replaced {
				segs = append(segs, s)
			}
		}
	}
	for _, s := range built {
		if s != nil {
			segs = append(segs, s)
		}
	}
	slices.SortFunc(segs, func(a, b *segment) int { return strings.Compare(a.server, b.server) })
	if err := checkUnique(segs, built); err != nil {
		return err
	}
	ix.cur.Store(newSnapshot(segs))
	return nil
}

// checkUnique reports a name that two segments of segs have, one of them
// new (in built). Its cost is linear in the size of the index, whatever
// the number of servers set at once.
func checkUnique(segs []*segment, built map[string]*segment) error {
	owner := map[string]*segment{}
	for _, s := range segs { // sorted by server: the error is the same every time
		if built[s.server] != s {
			continue
		}
		for _, d := range s.docs {
			if o, ok := owner[d.name]; ok {
				return nameTaken(d.name, s, o)
			}
			owner[d.name] = s
		}
	}
	for _, o := range segs {
		if built[o.server] == o {
			continue
		}
		for _, d := range o.docs {
			if s, ok := owner[d.name]; ok {
				return nameTaken(d.name, s, o)
			}
		}
	}
	return nil
}

func nameTaken(name string, s, other *segment) error {
	return fmt.Errorf("tool %q of server %q: server %q has a tool of that name", name, s.server, other.server)
}

func newSnapshot(segs []*segment) *snapshot {
	sn := &snapshot{segs: segs, base: make([]int, len(segs))}
	for i, s := range segs {
		sn.base[i] = sn.docs
		sn.docs += len(s.docs)
		for f := range numFields {
			sn.lens[f] += s.lens[f]
		}
	}
	return sn
}

// builder holds the scratch space of buildSegment, reused from one
// server to the next.
type builder struct {
	// Postings are collected in doc order with the id of their term, then
	// laid out term after term in one array.
	pend    []pending
	ids     map[string]int32
	terms   []string
	df      []int32 // per term id
	lastDoc []int32 // per term id: the doc that last had it, and
	slot    []int32 // its pending posting
	f       fields
}

type pending struct {
	term int32
	p    posting
}

// buildSegment indexes one server's tools.
func (b *builder) buildSegment(server string, tools []Tool) (*segment, error) {
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	seg := &segment{
		server: server,
		docs:   make([]doc, len(sorted)),
		byName: make(map[string]int32, len(sorted)),
	}
	if b.ids == nil {
		b.ids = map[string]int32{}
	}
	clear(b.ids)
	b.pend, b.terms, b.df, b.lastDoc, b.slot = b.pend[:0], b.terms[:0], b.df[:0], b.lastDoc[:0], b.slot[:0]
	pend, ids, terms, df, lastDoc, slot, f := b.pend, b.ids, b.terms, b.df, b.lastDoc, b.slot, &b.f
	defer func() { b.pend, b.terms, b.df, b.lastDoc, b.slot = pend, terms, df, lastDoc, slot }()
	for i, t := range sorted {
		if err := checkTool(server, t); err != nil {
			return nil, err
		}
		if _, dup := seg.byName[t.Name]; dup {
			return nil, fmt.Errorf("tool %q of server %q is listed twice", t.Name, server)
		}
		seg.byName[t.Name] = int32(i)
		d := doc{name: t.Name}
		analyze(t, f)
		for field, fterms := range f {
			d.lens[field] = int32(len(fterms))
			seg.lens[field] += float64(len(fterms))
			for _, term := range fterms {
				id, ok := ids[term]
				if !ok {
					id = int32(len(terms))
					ids[term] = id
					terms = append(terms, term)
					df = append(df, 0)
					lastDoc = append(lastDoc, -1)
					slot = append(slot, 0)
				}
				if lastDoc[id] != int32(i) {
					lastDoc[id] = int32(i)
					slot[id] = int32(len(pend))
					df[id]++
					pend = append(pend, pending{term: id, p: posting{doc: int32(i)}})
				}
				if tf := &pend[slot[id]].p.tf[field]; *tf < maxTF {
					*tf++
				}
			}
		}
		seg.docs[i] = d
	}

	// The terms are substrings of the tools' text: copy them into one
	// string, so that the index keeps none of that text alive.
	var all strings.Builder
	for _, t := range terms {
		all.WriteString(t)
	}
	keys := all.String()
	seg.terms = make(map[string]span, len(terms))
	next := make([]int32, len(terms))
	off, koff := int32(0), 0
	for id, t := range terms {
		seg.terms[keys[koff:koff+len(t)]] = span{off: off, n: df[id]}
		koff += len(t)
		next[id] = off
		off += df[id]
	}
	seg.postings = make([]posting, len(pend))
	for _, p := range pend {
		seg.postings[next[p.term]] = p.p
		next[p.term]++
	}
	return seg, nil
}

// checkTool reports what is wrong with t, a tool listed for server.
func checkTool(server string, t Tool) error {
	switch {
	case t.Name == "":
		return fmt.Errorf("a tool of server %q has no name", server)
	case t.Server != server:
		return fmt.Errorf("tool %q is listed for server %q but names server %q", t.Name, server, t.Server)
	case !rawjson.Valid(t.Raw):
		return fmt.Errorf("tool %q of server %q: its definition is not valid JSON", t.Name, server)
	case !isObject(t.Raw):
		return fmt.Errorf("tool %q of server %q: its definition is not a JSON object", t.Name, server)
	}
	return nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// Len returns the number of tools in the index.
func (ix *Index) Len() int {
	if sn := ix.cur.Load(); sn != nil {
		return sn.docs
	}
	return 0
}

// Search returns the tools most relevant to query, best first, at most
// limit of them (DefaultLimit when limit is 0). Only tools for which
// visible returns true are considered (all when visible is nil), so a
// hidden tool neither appears nor takes a visible one's place. Tools of
// equal score come in name order. Only tools that share a term with the
// query are hits.
//
// The query is words in any order; a tool scores by BM25F over its
// weighted fields. visible is called on the calling goroutine, best
// candidate first, until limit tools passed it. Search returns an error,
// naming the problem but not repeating the query, for a query that is
// empty, longer than MaxQueryBytes, without words or with more than
// MaxQueryTerms of them, and for a limit outside 0..MaxLimit; each is the
// caller's input to fix.
func (ix *Index) Search(query string, limit int, visible func(name string) bool) ([]Hit, error) {
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return nil, fmt.Errorf("limit %d is out of range: it must be 1 to %d", limit, MaxLimit)
	}
	terms, err := queryTerms(query)
	if err != nil {
		return nil, err
	}
	sn := ix.cur.Load()
	if sn == nil || sn.docs == 0 {
		return []Hit{}, nil
	}
	return sn.search(terms, limit, visible), nil
}

// queryTerms checks query and returns its distinct terms in order.
func queryTerms(query string) ([]string, error) {
	if len(query) > MaxQueryBytes {
		return nil, fmt.Errorf("query is %d bytes long, more than the %d allowed", len(query), MaxQueryBytes)
	}
	if strings.TrimSpace(query) == "" {
		return nil, errors.New("query is empty: give some words that describe the tool")
	}
	terms := appendTerms(nil, query)
	if len(terms) == 0 {
		return nil, errors.New("query has no words to search for: give some words that describe the tool (common words such as \"the\" are left out)")
	}
	seen := make(map[string]bool, len(terms))
	out := terms[:0]
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if len(out) > MaxQueryTerms {
		return nil, fmt.Errorf("query has %d distinct words, more than the %d allowed: say what the tool does in fewer words", len(out), MaxQueryTerms)
	}
	return out, nil
}

// cand is a candidate hit: the index of a doc in the snapshot (segment
// after segment, see base) and its score.
type cand struct {
	k     int32
	score float64
}

func (sn *snapshot) search(terms []string, limit int, visible func(string) bool) []Hit {
	var avg [numFields]float64
	for f := range numFields {
		avg[f] = sn.lens[f] / float64(sn.docs)
	}
	// acc holds the score of every doc; cands lists the docs that have
	// one.
	dfs := make([]int, len(terms))
	sum := 0
	for i, t := range terms {
		for _, s := range sn.segs {
			dfs[i] += int(s.terms[t].n)
		}
		sum += dfs[i]
	}
	acc := make([]float64, sn.docs)
	cands := make([]cand, 0, min(sum, sn.docs))
	for ti, t := range terms {
		df := dfs[ti]
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(sn.docs)-float64(df)+0.5)/(float64(df)+0.5))
		for i, s := range sn.segs {
			for _, p := range s.postingsOf(t) {
				// BM25F: the term's frequencies in the doc's fields,
				// weighted and normalized by field length, saturate
				// together.
				d := &s.docs[p.doc]
				w := 0.0
				for f := range numFields {
					if p.tf[f] == 0 {
						continue
					}
					norm := 1 - fieldB[f] + fieldB[f]*float64(d.lens[f])/avg[f]
					w += fieldWeight[f] * float64(p.tf[f]) / norm
				}
				k := sn.base[i] + int(p.doc)
				if acc[k] == 0 { // every term adds more than 0
					cands = append(cands, cand{k: int32(k)})
				}
				acc[k] += idf * w * (k1 + 1) / (w + k1)
			}
		}
	}
	for i := range cands {
		cands[i].score = acc[cands[i].k]
	}

	// Take the best candidates off a heap until limit of them are
	// visible: a common word makes thousands of candidates, of which a
	// handful are wanted.
	h := &candHeap{sn: sn, c: cands}
	heap.Init(h)
	hits := make([]Hit, 0, min(limit, len(cands)))
	for len(hits) < limit && len(h.c) > 0 {
		c := heap.Pop(h).(cand)
		s, d := sn.doc(c.k)
		if visible != nil && !visible(d.name) {
			continue
		}
		hits = append(hits, Hit{Name: d.name, Server: s.server, Score: c.score})
	}
	return hits
}

// doc returns the segment and the doc of index k.
func (sn *snapshot) doc(k int32) (*segment, *doc) {
	// The segment is the last one whose base is at most k; segments are
	// never empty, so bases strictly increase.
	i, found := slices.BinarySearch(sn.base, int(k))
	if !found {
		i--
	}
	s := sn.segs[i]
	return s, &s.docs[int(k)-sn.base[i]]
}

// candHeap orders candidates best first (container/heap): higher score,
// then name.
type candHeap struct {
	sn *snapshot
	c  []cand
}

func (h *candHeap) Len() int      { return len(h.c) }
func (h *candHeap) Swap(i, j int) { h.c[i], h.c[j] = h.c[j], h.c[i] }
func (h *candHeap) Push(x any)    { h.c = append(h.c, x.(cand)) }

func (h *candHeap) Less(i, j int) bool {
	a, b := h.c[i], h.c[j]
	if a.score != b.score {
		return a.score > b.score
	}
	_, da := h.sn.doc(a.k)
	_, db := h.sn.doc(b.k)
	return da.name < db.name
}

func (h *candHeap) Pop() any {
	last := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	return last
}
