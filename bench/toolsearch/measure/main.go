package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

const (
	// recallK is the depth of recall@k: what search_tools returns by
	// default is about this many tools.
	recallK = 5
	// mrrDepth is how deep the ranking is read for the reciprocal rank.
	mrrDepth = 10
)

// encodings are the tokenizers the listings are counted with, the first
// being the one the ratio is given in.
var encodings = []struct {
	enc    tokenizer.Encoding
	family string
}{
	{tokenizer.O200kBase, "GPT-4o family"},
	{tokenizer.Cl100kBase, "GPT-4 family"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a command line mistake (exit 2); what was wrong has been
// printed.
var errUsage = errors.New("usage")

// config is the command line.
type config struct {
	catalog, searchList string
	queries, rankers    []string
	verbose             bool
}

// defaultQueries are the query sets of bench/toolsearch (QUERIES.md).
var defaultQueries = []string{
	"bench/toolsearch/queries.json",
	"bench/toolsearch/queries-agent.json",
	"bench/toolsearch/holdout.json",
	"bench/toolsearch/holdout-agent.json",
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var queries, ranker string
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.catalog, "catalog", "bench/toolsearch/catalog", "the `dir` of <server>.json tool lists")
	fs.StringVar(&queries, "queries", strings.Join(defaultQueries, ","), "the query set `files`, comma-separated")
	fs.StringVar(&c.searchList, "search-list", "bench/toolsearch/search-list.json", "the search-mode tools/list result `file`")
	names := slices.Sorted(maps.Keys(rankers))
	fs.StringVar(&ranker, "ranker", strings.Join(names, ","), "the `rankers`, comma-separated: "+strings.Join(names, ", "))
	fs.BoolVar(&c.verbose, "v", false, "list each set's requests whose tool was not in the first 5")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "measure: unexpected argument %q\n", fs.Arg(0))
		return c, errUsage
	}
	c.queries = splitList(queries)
	c.rankers = splitList(ranker)
	if len(c.queries) == 0 {
		fmt.Fprintln(stderr, "measure: -queries names no file")
		return c, errUsage
	}
	if len(c.rankers) == 0 {
		fmt.Fprintf(stderr, "measure: -ranker names no ranker (have %s)\n", strings.Join(names, ", "))
		return c, errUsage
	}
	for _, r := range c.rankers {
		if _, ok := rankers[r]; !ok {
			fmt.Fprintf(stderr, "measure: unknown -ranker %q (have %s)\n", r, strings.Join(names, ", "))
			return c, errUsage
		}
	}
	return c, nil
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// run measures and prints the report; it returns the exit code: 0, 1 when
// an input is bad, 2 for a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	rep, err := measure(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "measure:", err)
		return 1
	}
	rep.write(stdout, cfg.verbose)
	return 0
}

// report is what one run measured.
type report struct {
	servers, tools int
	// bytes and tokens of the all- and search-mode listings; tokens[i] is
	// counted with encodings[i].
	allBytes, searchBytes   int
	allTokens, searchTokens []int
	results                 []result
}

// result is how one ranker did on one query set.
type result struct {
	ranker, set string
	queries     int
	recall, mrr float64
	misses      []miss
}

// miss is a query whose tool the ranker did not put in the first recallK.
type miss struct {
	query string
	rank  int // of the first expected tool within mrrDepth, or 0
}

func measure(cfg config) (*report, error) {
	c, err := loadCatalog(cfg.catalog)
	if err != nil {
		return nil, err
	}
	sets := make([][]query, len(cfg.queries))
	for i, path := range cfg.queries {
		if sets[i], err = loadQueries(path, c); err != nil {
			return nil, err
		}
	}
	all, err := allListing(c)
	if err != nil {
		return nil, err
	}
	search, err := readSearchListing(cfg.searchList)
	if err != nil {
		return nil, err
	}
	rep := &report{servers: len(c.Servers), tools: len(c.Tools), allBytes: len(all), searchBytes: len(search)}
	for _, e := range encodings {
		codec, err := tokenizer.Get(e.enc)
		if err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", e.enc, err)
		}
		n, err := countTokens(codec, all)
		if err != nil {
			return nil, err
		}
		rep.allTokens = append(rep.allTokens, n)
		if n, err = countTokens(codec, search); err != nil {
			return nil, err
		}
		rep.searchTokens = append(rep.searchTokens, n)
	}
	for _, name := range cfg.rankers {
		r := rankers[name](c)
		for i, qs := range sets {
			rep.results = append(rep.results, rank(r, name, setName(cfg.queries[i]), qs))
		}
	}
	return rep, nil
}

// rank runs the queries of one set through r.
func rank(r Ranker, ranker, set string, qs []query) result {
	res := result{ranker: ranker, set: set, queries: len(qs)}
	ranked := make([][]string, len(qs))
	for i, q := range qs {
		ranked[i] = r.Search(q.Query, mrrDepth)
		if k := rankOf(ranked[i], q.Expect); k == 0 || k > recallK {
			res.misses = append(res.misses, miss{q.Query, k})
		}
	}
	res.recall = recallAt(recallK, qs, ranked)
	res.mrr = meanReciprocalRank(qs, ranked)
	return res
}

// setName names a query set by its file: "queries-agent" for
// bench/toolsearch/queries-agent.json.
func setName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".json")
}

func countTokens(codec tokenizer.Codec, text []byte) (int, error) {
	ids, _, err := codec.Encode(string(text))
	if err != nil {
		return 0, fmt.Errorf("tokenizing with %s: %w", codec.GetName(), err)
	}
	return len(ids), nil
}

func (r *report) write(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "Catalog: %d servers, %d tools. Tokens: %s (%s), %s (%s).\n\n",
		r.servers, r.tools, encodings[0].enc, encodings[0].family, encodings[1].enc, encodings[1].family)
	fmt.Fprintf(w, "| tools/list | bytes | tokens %s | tokens %s |\n|---|---:|---:|---:|\n", encodings[0].enc, encodings[1].enc)
	fmt.Fprintf(w, "| all mode | %d | %d | %d |\n", r.allBytes, r.allTokens[0], r.allTokens[1])
	fmt.Fprintf(w, "| search mode | %d | %d | %d |\n", r.searchBytes, r.searchTokens[0], r.searchTokens[1])
	fmt.Fprintf(w, "| search / all | %s | %s | %s |\n\n",
		percent(r.searchBytes, r.allBytes), percent(r.searchTokens[0], r.allTokens[0]), percent(r.searchTokens[1], r.allTokens[1]))
	fmt.Fprintf(w, "| ranker | set | queries | recall@%d | MRR@%d |\n|---|---|---:|---:|---:|\n", recallK, mrrDepth)
	for _, res := range r.results {
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.3f |\n", res.ranker, res.set, res.queries, res.recall, res.mrr)
	}
	if !verbose {
		return
	}
	for _, res := range r.results {
		if len(res.misses) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s on %s, not in the first %d (%d):\n", res.ranker, res.set, recallK, len(res.misses))
		for _, m := range res.misses {
			at := fmt.Sprintf("not in the first %d", mrrDepth)
			if m.rank > 0 {
				at = fmt.Sprintf("at %d", m.rank)
			}
			fmt.Fprintf(w, "- %q: %s\n", m.query, at)
		}
	}
}

func percent(part, whole int) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(part)/float64(whole))
}
