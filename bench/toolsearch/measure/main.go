package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	catalog, queries, searchList, ranker string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.catalog, "catalog", "bench/toolsearch/catalog", "the `dir` of <server>.json tool lists")
	fs.StringVar(&c.queries, "queries", "bench/toolsearch/queries.json", "the query set `file`")
	fs.StringVar(&c.searchList, "search-list", "bench/toolsearch/search-list.json", "the search-mode tools/list result `file`")
	names := make([]string, 0, len(rankers))
	for n := range rankers {
		names = append(names, n)
	}
	slices.Sort(names)
	fs.StringVar(&c.ranker, "ranker", "baseline", "the ranker: "+strings.Join(names, ", "))
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "measure: unexpected argument %q\n", fs.Arg(0))
		return c, errUsage
	}
	if _, ok := rankers[c.ranker]; !ok {
		fmt.Fprintf(stderr, "measure: unknown -ranker %q (have %s)\n", c.ranker, strings.Join(names, ", "))
		return c, errUsage
	}
	return c, nil
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
	rep.write(stdout)
	return 0
}

// report is what one run measured.
type report struct {
	servers, tools, queries int
	ranker                  string
	// bytes and tokens of the all- and search-mode listings; tokens[i] is
	// counted with encodings[i].
	allBytes, searchBytes   int
	allTokens, searchTokens []int
	recall, mrr             float64
	misses                  []miss
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
	qs, err := loadQueries(cfg.queries, c)
	if err != nil {
		return nil, err
	}
	all, err := allListing(c)
	if err != nil {
		return nil, err
	}
	search, err := readSearchListing(cfg.searchList)
	if err != nil {
		return nil, err
	}
	rep := &report{servers: len(c.Servers), tools: len(c.Tools), queries: len(qs), ranker: cfg.ranker, allBytes: len(all), searchBytes: len(search)}
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
	r := rankers[cfg.ranker](c)
	ranked := make([][]string, len(qs))
	for i, q := range qs {
		ranked[i] = r.Search(q.Query, mrrDepth)
		if k := rankOf(ranked[i], q.Expect); k == 0 || k > recallK {
			rep.misses = append(rep.misses, miss{q.Query, k})
		}
	}
	rep.recall = recallAt(recallK, qs, ranked)
	rep.mrr = meanReciprocalRank(qs, ranked)
	return rep, nil
}

func countTokens(codec tokenizer.Codec, text []byte) (int, error) {
	ids, _, err := codec.Encode(string(text))
	if err != nil {
		return 0, fmt.Errorf("tokenizing with %s: %w", codec.GetName(), err)
	}
	return len(ids), nil
}

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Catalog: %d servers, %d tools. Tokens: %s (%s), %s (%s).\n\n",
		r.servers, r.tools, encodings[0].enc, encodings[0].family, encodings[1].enc, encodings[1].family)
	fmt.Fprintf(w, "| tools/list | bytes | tokens %s | tokens %s |\n|---|---:|---:|---:|\n", encodings[0].enc, encodings[1].enc)
	fmt.Fprintf(w, "| all mode | %d | %d | %d |\n", r.allBytes, r.allTokens[0], r.allTokens[1])
	fmt.Fprintf(w, "| search mode | %d | %d | %d |\n", r.searchBytes, r.searchTokens[0], r.searchTokens[1])
	fmt.Fprintf(w, "| search / all | %s | %s | %s |\n\n",
		percent(r.searchBytes, r.allBytes), percent(r.searchTokens[0], r.allTokens[0]), percent(r.searchTokens[1], r.allTokens[1]))
	fmt.Fprintf(w, "| ranker | queries | recall@%d | MRR@%d |\n|---|---:|---:|---:|\n", recallK, mrrDepth)
	fmt.Fprintf(w, "| %s | %d | %.3f | %.3f |\n", r.ranker, r.queries, r.recall, r.mrr)
	if len(r.misses) > 0 {
		fmt.Fprintf(w, "\nNot in the first %d (%d):\n", recallK, len(r.misses))
		for _, m := range r.misses {
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
