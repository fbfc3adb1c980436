package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tiktoken-go/tokenizer"
)

func TestBaseline(t *testing.T) {
	b := newBaseline(testCatalog(t))
	for _, tc := range []struct {
		name, query string
		limit       int
		want        []string
	}{
		{"description words", "show me what is in the file notes.txt", 0, []string{"mcp__files__read_file", "mcp__files__write_file"}},
		{"name words count double", "commit these changes", 0, []string{"mcp__git__git_commit"}},
		{"camelCase and plurals", "ReadFiles", 0, []string{"mcp__files__read_file", "mcp__files__write_file"}},
		{"limit", "file", 1, []string{"mcp__files__read_file"}},
		{"nothing shared", "book a flight", 0, []string{}},
		{"only stopwords", "what is this", 0, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, b.Search(tc.query, tc.limit)); d != "" {
				t.Errorf("Search(%q) (-want +got)\n%s", tc.query, d)
			}
		})
	}
}

// TestRun runs the program on the repository's data, every query set and
// ranker, and checks the shape of its report: every expected tool of every
// set is in the catalog, or the run fails.
func TestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	var sets []string
	for _, q := range defaultQueries {
		sets = append(sets, "../"+strings.TrimPrefix(q, "bench/toolsearch/"))
	}
	args := []string{"-catalog", "../catalog", "-queries", strings.Join(sets, ","), "-search-list", "../search-list.json", "-v"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	res := []string{
		`(?m)^Catalog: \d+ servers, \d+ tools\. Tokens: o200k_base \(GPT-4o family\), cl100k_base \(GPT-4 family\)\.$`,
		`(?m)^\| all mode \| \d+ \| \d+ \| \d+ \|$`,
		`(?m)^\| search mode \| \d+ \| \d+ \| \d+ \|$`,
		`(?m)^\| search / all \| \d+\.\d\d% \| \d+\.\d\d% \| \d+\.\d\d% \|$`,
		`(?m)^toolsearch on queries, not in the first 5 \(\d+\):$`,
	}
	for _, r := range []string{"baseline", "toolsearch"} {
		for _, set := range []string{"queries", "queries-agent", "holdout", "holdout-agent"} {
			res = append(res, `(?m)^\| `+r+` \| `+set+` \| \d+ \| [01]\.\d{3} \| [01]\.\d{3} \|$`)
		}
	}
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("report does not match %s:\n%s", re, out)
		}
	}
}

func TestRun_Errors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "search.json")
	if err := os.WriteFile(bad, []byte(`{"tools":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	data := []string{"-catalog", "../catalog", "-queries", "../queries.json"}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown ranker", []string{"-ranker", "magic"}, 2, `unknown -ranker "magic" (have baseline, toolsearch)`},
		{"unknown ranker in a list", []string{"-ranker", "baseline,magic"}, 2, `unknown -ranker "magic"`},
		{"no ranker", []string{"-ranker", " , "}, 2, `-ranker names no ranker (have baseline, toolsearch)`},
		{"no query set", []string{"-queries", ","}, 2, `-queries names no file`},
		{"a missing query set", append(data[:2:2], "-queries", "../queries.json,"+filepath.Join(dir, "none.json")), 1, "none.json"},
		{"argument", []string{"extra"}, 2, `unexpected argument "extra"`},
		{"bad search listing", append(data, "-search-list", bad), 1, bad + `: want a tools/list result with a non-empty "tools" array`},
		{"missing catalog", []string{"-catalog", filepath.Join(dir, "none")}, 1, "no <server>.json files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.wantCode, tc.wantErr)
			}
			if stdout.Len() > 0 {
				t.Errorf("a failed run printed a report:\n%s", stdout.String())
			}
		})
	}
}

// TestEncodings pins the tokenizers to OpenAI's published encodings of
// "tiktoken is great!" (tiktoken's own example), so that a count is what
// the named encoding gives.
func TestEncodings(t *testing.T) {
	want := map[tokenizer.Encoding][]uint{
		tokenizer.O200kBase:  {83, 8251, 2488, 382, 2212, 0},
		tokenizer.Cl100kBase: {83, 1609, 5963, 374, 2294, 0},
	}
	for _, e := range encodings {
		codec, err := tokenizer.Get(e.enc)
		if err != nil {
			t.Fatal(err)
		}
		ids, _, err := codec.Encode("tiktoken is great!")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want[e.enc], ids); d != "" {
			t.Errorf("%s (-want +got)\n%s", e.enc, d)
		}
		n, err := countTokens(codec, []byte("tiktoken is great!"))
		if err != nil || n != len(want[e.enc]) {
			t.Errorf("countTokens with %s = %d, %v; want %d", e.enc, n, err, len(want[e.enc]))
		}
	}
}
