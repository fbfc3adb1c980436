package main

import (
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"
)

// rankers are the rankers -ranker can name, each built from the catalog:
// the baseline, and the gateway's own (toolsearch).
var rankers = map[string]func(*catalog) Ranker{
	"baseline":   func(c *catalog) Ranker { return newBaseline(c) },
	"toolsearch": func(c *catalog) Ranker { return newIndexed(c) },
}

// baseline ranks tools by the words they share with the request, each
// word weighted by its rarity in the catalog (inverse document frequency)
// and doubled when it is in the tool's name. It knows no synonyms: it is the
// floor a real search must beat, not a search.
type baseline struct {
	docs []baselineDoc
	idf  map[string]float64
}

type baselineDoc struct {
	exposed string
	name    map[string]bool // terms of the server's and the tool's name
	text    map[string]bool // terms of the name and the description
}

func newBaseline(c *catalog) *baseline {
	b := &baseline{idf: map[string]float64{}}
	df := map[string]int{}
	for _, t := range c.Tools {
		d := baselineDoc{exposed: t.Exposed, name: termSet(t.Server + " " + t.Name), text: termSet(t.Server + " " + t.Name + " " + t.Description)}
		for term := range d.text {
			df[term]++
		}
		b.docs = append(b.docs, d)
	}
	n := float64(len(c.Tools))
	for term, f := range df {
		b.idf[term] = math.Log(1 + n/float64(f))
	}
	return b
}

// Search returns the best limit tools for query, ties broken by name, and
// no tool that shares no word with it.
func (b *baseline) Search(query string, limit int) []string {
	type scored struct {
		name  string
		score float64
	}
	// In a fixed order, so that equal scores are added up alike and tie
	// the same way every run.
	q := slices.Sorted(maps.Keys(termSet(query)))
	var hits []scored
	for _, d := range b.docs {
		s := 0.0
		for _, term := range q {
			if d.text[term] {
				w := b.idf[term]
				if d.name[term] {
					w *= 2
				}
				s += w
			}
		}
		if s > 0 {
			hits = append(hits, scored{d.exposed, s})
		}
	}
	slices.SortFunc(hits, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.name
	}
	return out
}

// stopwords are words too common in requests and descriptions to say
// anything about a tool.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and any are as at be by can do does for from get give has have how i if in into is it its
		me my of on or our please show so some that the their them then there these this to up us use
		using want we what when where which who will with you your`) {
		stopwords[w] = true
	}
}

// termSet splits s into lowercase words (at anything but letters and
// digits, and where camelCase changes case), drops stopwords, and strips a
// plural s.
func termSet(s string) map[string]bool {
	out := map[string]bool{}
	var word []rune
	flush := func() {
		w := strings.ToLower(string(word))
		word = word[:0]
		if len(w) < 2 || stopwords[w] {
			return
		}
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out[w] = true
	}
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			word = append(word, r)
		default:
			word = append(word, r)
		}
		prev = r
	}
	flush()
	return out
}
