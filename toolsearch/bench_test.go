package toolsearch

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// synthetic returns a catalog of servers × perServer tools, the same on
// every call: names of a verb and one or two nouns, titles, descriptions
// of 10 to 40 words and 1 to 6 described parameters, one of them an
// object with two of its own, drawn from a vocabulary of a few thousand
// words with a skewed (Zipf) frequency, as words of real descriptions
// are.
func synthetic(servers, perServer int) (map[string][]Tool, []string) {
	r := rand.New(rand.NewPCG(1, 2))
	syll := []string{"ka", "lo", "mi", "ter", "san", "po", "ri", "vel", "dor", "qu", "ne", "sta", "bi", "gra", "fu", "zen"}
	vocab := make([]string, 4000)
	for i := range vocab {
		var w strings.Builder
		for range 2 + r.IntN(3) {
			w.WriteString(syll[r.IntN(len(syll))])
		}
		vocab[i] = w.String()
	}
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	word := func() string { return vocab[zipf.Uint64()] }
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = word()
		}
		return strings.Join(ws, " ")
	}
	verbs := []string{"get", "list", "create", "update", "delete", "search", "run", "send", "read", "write"}

	out := make(map[string][]Tool, servers)
	for s := range servers {
		server := fmt.Sprintf("srv-%s-%d", vocab[s%len(vocab)], s)
		for i := range perServer {
			name := fmt.Sprintf("%s_%s_%s_%d", verbs[r.IntN(len(verbs))], word(), word(), i)
			props := map[string]any{}
			for p := range 1 + r.IntN(6) {
				props[fmt.Sprintf("%s%d", word(), p)] = map[string]any{"type": "string", "description": words(3 + r.IntN(10))}
			}
			props["options"] = map[string]any{"type": "object", "properties": map[string]any{
				word(): map[string]any{"type": "boolean", "description": words(5)},
				word(): map[string]any{"type": "integer", "description": words(5)},
			}}
			raw, err := json.Marshal(map[string]any{
				"name":        name,
				"title":       words(3),
				"description": words(10 + r.IntN(31)),
				"inputSchema": map[string]any{"type": "object", "properties": props},
			})
			if err != nil {
				panic(err)
			}
			out[server] = append(out[server], Tool{Name: "mcp__" + server + "__" + name, Server: server, Raw: raw})
		}
	}
	queries := make([]string, 100)
	for i := range queries {
		queries[i] = words(3 + r.IntN(4))
	}
	return out, queries
}

// BenchmarkBuild10k builds the index of 10,000 tools of 250 servers in
// one step, as start-up does, and reports the heap the index keeps.
func BenchmarkBuild10k(b *testing.B) {
	tools, _ := synthetic(250, 40)
	var keep *Index
	for b.Loop() {
		var ix Index
		if err := ix.SetServers(tools); err != nil {
			b.Fatal(err)
		}
		keep = &ix
	}
	b.StopTimer()
	keep = nil
	before := heapInUse()
	var ix Index
	if err := ix.SetServers(tools); err != nil {
		b.Fatal(err)
	}
	after := heapInUse()
	runtime.KeepAlive(&ix)
	runtime.KeepAlive(keep)
	b.ReportMetric(float64(after-before)/(1<<20), "index-MiB")
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkSetServer10k replaces one server's 40 tools in an index of
// 10,000, as a list_changed does.
func BenchmarkSetServer10k(b *testing.B) {
	tools, _ := synthetic(250, 40)
	var ix Index
	if err := ix.SetServers(tools); err != nil {
		b.Fatal(err)
	}
	var server string
	for s := range tools {
		server = s
		break
	}
	for b.Loop() {
		if err := ix.SetServer(server, tools[server]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch10k runs queries of 3 to 6 words over 10,000 tools, with
// a visible filter that hides half of them.
func BenchmarkSearch10k(b *testing.B) {
	tools, queries := synthetic(250, 40)
	var ix Index
	if err := ix.SetServers(tools); err != nil {
		b.Fatal(err)
	}
	visible := func(name string) bool { return len(name)%2 == 0 }
	i := 0
	for b.Loop() {
		if _, err := ix.Search(queries[i%len(queries)], DefaultLimit, visible); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSearch10kWorst runs the costliest query a client can send:
// MaxQueryTerms of the most common words of the catalog.
func BenchmarkSearch10kWorst(b *testing.B) {
	tools, _ := synthetic(250, 40)
	var ix Index
	if err := ix.SetServers(tools); err != nil {
		b.Fatal(err)
	}
	sn := ix.cur.Load()
	df := map[string]int{}
	for _, s := range sn.segs {
		for t, sp := range s.terms {
			df[t] += int(sp.n)
		}
	}
	common := slices.SortedFunc(maps.Keys(df), func(a, b string) int { return cmp.Compare(df[b], df[a]) })
	query := strings.Join(common[:MaxQueryTerms], " ")
	if _, err := ix.Search(query, MaxLimit, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ix.Search(query, MaxLimit, nil); err != nil {
			b.Fatal(err)
		}
	}
}
