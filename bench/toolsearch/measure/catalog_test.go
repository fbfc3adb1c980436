package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The floor for the benchmark catalog and query set.
const (
	minServers = 20
	minTools   = 400
	minQueries = 60
)

// TestCatalog checks the data in the repository: every file parses, the
// exposed names are unique, the catalog is as large as promised, every
// query's tools exist and each query set spreads over many servers.
func TestCatalog(t *testing.T) {
	c, err := loadCatalog("../catalog")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Servers) < minServers {
		t.Errorf("catalog has %d servers, want at least %d", len(c.Servers), minServers)
	}
	if len(c.Tools) < minTools {
		t.Errorf("catalog has %d tools, want at least %d", len(c.Tools), minTools)
	}
	seen := map[string]bool{}
	for _, tl := range c.Tools {
		want := "mcp__" + tl.Server + "__" + tl.Name
		if tl.Exposed != want {
			t.Errorf("tool %q of %q is exposed as %q, want %q (shortened or sanitized names make queries hard to write)", tl.Name, tl.Server, tl.Exposed, want)
		}
		if seen[tl.Exposed] {
			t.Errorf("exposed name %q given twice", tl.Exposed)
		}
		// The recorder's temporary directories must not reach the repo.
		if strings.Contains(string(tl.Raw), "toolsearch-record-") {
			t.Errorf("tool %q of %q names a temporary directory of the recorder", tl.Name, tl.Server)
		}
		seen[tl.Exposed] = true
	}
	qs, err := loadQueries("../queries.json", c)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < minQueries {
		t.Errorf("query set has %d queries, want at least %d", len(qs), minQueries)
	}
	servers := map[string]bool{}
	ambiguous := 0
	for _, q := range qs {
		for _, e := range q.Expect {
			tl, _ := c.lookup(e)
			servers[tl.Server] = true
		}
		if len(q.Expect) > 1 {
			ambiguous++
		}
	}
	if len(servers) < minServers {
		t.Errorf("queries ask for tools of %d servers, want at least %d", len(servers), minServers)
	}
	if ambiguous == 0 {
		t.Error("no query has two right tools")
	}
	if _, err := readSearchListing("../search-list.json"); err != nil {
		t.Error(err)
	}
	// Generated servers are marked, and SOURCES.md names every server.
	sources, err := os.ReadFile("../catalog/SOURCES.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		if !strings.Contains(string(sources), "| "+s+" |") {
			t.Errorf("catalog/SOURCES.md has no row for %q", s)
		}
	}
}

func TestParseTools(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []tool
		wantErr string
	}{
		{
			name: "compacted, description kept",
			in:   `[ {"name": "a", "description": "does a", "inputSchema": {"type": "object"}}, {"name":"b"} ]`,
			want: []tool{
				{Server: "s", Name: "a", Description: "does a", Raw: json.RawMessage(`{"name":"a","description":"does a","inputSchema":{"type":"object"}}`)},
				{Server: "s", Name: "b", Raw: json.RawMessage(`{"name":"b"}`)},
			},
		},
		{name: "not an array", in: `{"tools":[]}`, wantErr: "want the tools array"},
		{name: "empty", in: `[]`, wantErr: "the tools array is empty"},
		{name: "not an object", in: `["a"]`, wantErr: "tool 0: want an object"},
		{name: "no name", in: `[{"description":"x"}]`, wantErr: "tool 0: no name"},
		{name: "empty name", in: `[{"name":""}]`, wantErr: "tool 0: no name"},
		{name: "name not a string", in: `[{"name":1}]`, wantErr: "tool 0: want an object"},
		{name: "description not a string", in: `[{"name":"a","description":{}}]`, wantErr: "tool 0: want an object"},
		{name: "twice", in: `[{"name":"a"},{"name":"a"}]`, wantErr: `tool "a" is listed twice`},
		{name: "bad JSON", in: `[{"name":"a"}`, wantErr: "want the tools array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTools("s", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestLoadCatalog_Errors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr []string
	}{
		{name: "no files", files: map[string]string{"SOURCES.md": "x"}, wantErr: []string{"no <server>.json files"}},
		{
			name:    "bad server names, every one reported",
			files:   map[string]string{"Upper.json": `[{"name":"a"}]`, "a_b.json": `[{"name":"a"}]`, strings.Repeat("x", 33) + ".json": `[{"name":"a"}]`},
			wantErr: []string{`server name "Upper"`, `server name "a_b"`, "want 1 to 32 characters"},
		},
		{
			name:    "bad file among good ones",
			files:   map[string]string{"good.json": `[{"name":"a"}]`, "bad.json": `[{"name":"a"},{"name":"a"}]`},
			wantErr: []string{`bad.json: tool "a" is listed twice`},
		},
		{
			name:    "names that clash once sanitized",
			files:   map[string]string{"s.json": `[{"name":"get user"},{"name":"get_user"}]`},
			wantErr: []string{"naming the catalog's tools:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := loadCatalog(dir)
			if err == nil {
				t.Fatal("loadCatalog succeeded")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// testCatalog is a small catalog of two servers, one of whose tools says
// something about its execution already.
func testCatalog(t *testing.T) *catalog {
	t.Helper()
	var tools []tool
	for server, data := range map[string]string{
		"files": `[{"name":"read_file","description":"Read the complete contents of a file from disk.","inputSchema":{"type":"object"}},{"name":"write_file","description":"Create a new file or overwrite an existing file.","execution":{"taskSupport":"forbidden","x":1}}]`,
		"git":   `[{"name":"git_commit","description":"Record changes to the repository.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}]`,
	} {
		ts, err := parseTools(server, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, ts...)
	}
	c, err := newCatalog([]string{"files", "git"}, tools)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAllListing(t *testing.T) {
	got, err := allListing(testCatalog(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tools":[` +
		`{"name":"mcp__files__read_file","description":"Read the complete contents of a file from disk.","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},` +
		`{"name":"mcp__files__write_file","description":"Create a new file or overwrite an existing file.","execution":{"taskSupport":"optional","x":1}},` +
		`{"name":"mcp__git__git_commit","description":"Record changes to the repository.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}},"execution":{"taskSupport":"optional"}}` +
		`]}`
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestParseQueries(t *testing.T) {
	c := testCatalog(t)
	for _, tc := range []struct {
		name    string
		in      string
		want    []query
		wantErr []string
	}{
		{
			name: "good",
			in:   `[{"query":"save my work","expect":["mcp__git__git_commit"]},{"query":"open notes.txt","expect":["mcp__files__read_file","mcp__files__write_file"]}]`,
			want: []query{
				{Query: "save my work", Expect: []string{"mcp__git__git_commit"}},
				{Query: "open notes.txt", Expect: []string{"mcp__files__read_file", "mcp__files__write_file"}},
			},
		},
		{
			name: "agent set: two requests may lead to one search",
			in:   `[{"request":"save my work","query":"git commit","expect":["mcp__git__git_commit"]},{"request":"commit this","query":"git commit","expect":["mcp__git__git_commit"]}]`,
			want: []query{
				{Request: "save my work", Query: "git commit", Expect: []string{"mcp__git__git_commit"}},
				{Request: "commit this", Query: "git commit", Expect: []string{"mcp__git__git_commit"}},
			},
		},
		{
			name:    "agent set: a request given twice, a search missing",
			in:      `[{"request":"save","query":"git commit","expect":["mcp__git__git_commit"]},{"request":"save","query":" ","expect":["mcp__git__git_commit"]}]`,
			wantErr: []string{"query 1: empty request"},
		},
		{
			name:    "agent set: a request given twice",
			in:      `[{"request":"save","query":"git commit","expect":["mcp__git__git_commit"]},{"request":"save","query":"commit","expect":["mcp__git__git_commit"]}]`,
			wantErr: []string{`query 1: "save" is given twice`},
		},
		{name: "not an array", in: `{"query":"x"}`, wantErr: []string{"want a JSON array"}},
		{name: "unknown member", in: `[{"query":"x","expect":["mcp__git__git_commit"],"tools":[]}]`, wantErr: []string{`unknown field "tools"`}},
		{name: "trailing data", in: `[{"query":"x","expect":["mcp__git__git_commit"]}] []`, wantErr: []string{"data after the array"}},
		{name: "empty set", in: `[]`, wantErr: []string{"no queries"}},
		{
			name:    "every problem at once",
			in:      `[{"query":" ","expect":["mcp__git__git_commit"]},{"query":"a","expect":[]},{"query":"a","expect":["mcp__git__git_commit","mcp__git__git_commit"]}]`,
			wantErr: []string{"query 0: empty request", "query 1: no expected tool", `query 2: "a" is given twice`, `query 2: expected tool "mcp__git__git_commit" is given twice`},
		},
		{
			name:    "unknown tools",
			in:      `[{"query":"push","expect":["mcp__git__git_push"]},{"query":"commit","expect":["git_commit"]}]`,
			wantErr: []string{`expected tool "mcp__git__git_push" is not in the catalog`, `expected tool "git_commit" is not in the catalog`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseQueries([]byte(tc.in))
			if err == nil {
				err = checkQueries(got, c)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseListing(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{name: "compacted", in: "{\n  \"tools\": [ {\"name\": \"search_tools\"} ]\n}\n", want: `{"tools":[{"name":"search_tools"}]}`},
		{name: "an array", in: `[{"name":"a"}]`, wantErr: "want a tools/list result object"},
		{name: "no tools", in: `{"tools":[]}`, wantErr: "non-empty"},
		{name: "nameless tool", in: `{"tools":[{"description":"x"}]}`, wantErr: "tool 0: want an object with a non-empty string name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseListing([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func FuzzParseTools(f *testing.F) {
	f.Add([]byte(`[{"name":"a","description":"b","inputSchema":{"type":"object"}}]`))
	f.Add([]byte(`[{"name":"a"},{"name":"a"}]`))
	f.Add([]byte(`{"tools":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tools, err := parseTools("s", data)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, tl := range tools {
			if tl.Name == "" || names[tl.Name] || !json.Valid(tl.Raw) {
				t.Fatalf("parseTools accepted a bad tool: %+v", tl)
			}
			names[tl.Name] = true
		}
		// Names that differ only in characters naming must replace clash,
		// and newCatalog refuses them; any catalog it makes must list.
		c, err := newCatalog([]string{"s"}, tools)
		if err != nil {
			return
		}
		all, err := allListing(c)
		if err != nil {
			t.Fatalf("allListing of an accepted catalog: %v", err)
		}
		if !json.Valid(all) {
			t.Fatalf("allListing gave invalid JSON %q", all)
		}
	})
}

func FuzzParseQueries(f *testing.F) {
	f.Add([]byte(`[{"query":"save my work","expect":["mcp__git__git_commit"]}]`))
	f.Add([]byte(`[{"query":"","expect":[]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := parseQueries(data)
		if err != nil {
			return
		}
		for _, q := range qs {
			if strings.TrimSpace(q.Query) == "" || len(q.Expect) == 0 {
				t.Fatalf("parseQueries accepted %+v", q)
			}
		}
	})
}

func FuzzParseListing(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"search_tools"}]}`))
	f.Add([]byte(`{"tools":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := parseListing(data)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("parseListing returned invalid JSON %q", out)
		}
	})
}
