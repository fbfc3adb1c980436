package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mcpgw/mcpgw"

// allowed lists, for each package of ours (path relative to the module),
// which of our packages its non-test files may import. It is DESIGN.md's
// table with the arrows pointing down: edges and admin over the core, the
// core over the leaves, leaves over nothing of ours but internal framing.
// "internal/*" allows every leaf under internal/. A package missing from
// the table fails the test: add it here, in the right place.
var allowed = map[string][]string{
	"cmd/mcpgw":             {"*"},
	"gateway":               {"config", "upstream", "naming", "auth", "mediastore", "oauthclient", "openapi", "store", "telemetry", "toolsearch", "internal/*"},
	"gateway/front":         {"internal/*"},
	"gateway/legacy":        {"gateway", "gateway/front", "auth", "config", "telemetry", "internal/*"},
	"gateway/modern":        {"gateway", "gateway/front", "auth", "internal/*"},
	"gateway/admin":         {"gateway", "store", "openapi", "config", "internal/*"},
	"upstream":              {"config", "telemetry", "internal/jsonrpc", "internal/sse", "internal/rawjson"},
	"upstream/upstreamtest": {"upstream", "config", "internal/jsonrpc", "internal/rawjson"},
	"naming":                {},
	"toolsearch":            {"internal/*"},
	"auth":                  {"config"},
	"mediastore":            {},
	"openapi":               {},
	"config":                {},
	"store":                 {"config"},
	"cluster":               {"store", "internal/*"},
	"oauthclient":           {"config", "store", "internal/*"},
	"telemetry":             {},
	"internal/jsonrpc":      {"internal/rawjson"},
	"internal/rawjson":      {},
	"internal/seal":         {},
	"internal/sse":          {},
	"internal/archtest":     {},
	"internal/pgtest":       {},
	"examples/demo-server":  {},
	"e2e/fixtures/oauthas":  {},
	"e2e":                   {"internal/rawclient", "internal/pgtest"},

	"e2e/fixtures/catalogserver":    {"e2e/fixtures/internal/fixture"},
	"e2e/fixtures/relayserver":      {"e2e/fixtures/internal/fixture"},
	"e2e/fixtures/serverrequests":   {"e2e/fixtures/internal/fixture"},
	"e2e/fixtures/eraserver":        {"e2e/fixtures/internal/fixture"},
	"e2e/fixtures/bridgeserver":     {"e2e/fixtures/internal/fixture"},
	"e2e/fixtures/internal/fixture": {},

	"internal/rawclient":         {},
	"e2e/fixtures/taskserver":    {},
	"e2e/fixtures/modernserver":  {},
	"e2e/fixtures/taskextserver": {"e2e/fixtures/internal/fixture"},

	// What measures mcpgw: the load tool, and the floor server, which
	// imports nothing of ours, not even the SDK: it is the floor.
	"bench/mcpgw-bench": {},
	"bench/floorserver": {},
	// The tool search benchmark: its measuring program names tools as the
	// gateway does and renames them the way the catalog does; its recorder
	// speaks raw JSON-RPC to the servers it records.
	"bench/toolsearch/measure": {"naming", "toolsearch", "internal/rawjson"},
	"bench/toolsearch/record":  {},

	// The client of scripts/conformance.sh's client scenarios: a black box
	// user of mcpgw, like e2e.
	"conformance/driver": {},
}

// pkg is one package directory of the module.
type pkg struct {
	rel     string          // path relative to the module root
	imports map[string]bool // our packages its non-test files import (relative)
	hasDoc  bool
}

// walkSources calls fn with the path of every non-test Go file of the
// module (skipping hidden, testdata, node_modules, bin and data folders)
// and the module root.
func walkSources(t *testing.T, fn func(root, path string) error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return fn(root, path)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func loadPackages(t *testing.T) []pkg {
	t.Helper()
	byDir := map[string]*pkg{}
	walkSources(t, func(root, path string) error {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		p := byDir[dir]
		if p == nil {
			p = &pkg{rel: dir, imports: map[string]bool{}}
			byDir[dir] = p
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			p.hasDoc = true
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(ip, module+"/"); ok {
				p.imports[rel] = true
			}
		}
		return nil
	})
	var out []pkg
	for _, p := range byDir {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

func permits(rules []string, imp string) bool {
	for _, r := range rules {
		switch {
		case r == "*", r == imp:
			return true
		case strings.HasSuffix(r, "/*") && strings.HasPrefix(imp, strings.TrimSuffix(r, "*")):
			return true
		}
	}
	return false
}

// TestImportArrows fails when a package imports one of ours that DESIGN.md
// puts above it or beside it.
func TestImportArrows(t *testing.T) {
	for _, p := range loadPackages(t) {
		rules, ok := allowed[p.rel]
		if !ok {
			t.Errorf("package %s is not in the import table of arch_test.go; add it with the packages it may import (DESIGN.md)", p.rel)
			continue
		}
		for imp := range p.imports {
			if !permits(rules, imp) {
				t.Errorf("%s imports %s, against DESIGN.md's arrows (it may import %v)", p.rel, imp, rules)
			}
		}
	}
}

// TestPackageDocs fails when a package has no package doc comment.
func TestPackageDocs(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !p.hasDoc {
			t.Errorf("package %s has no package doc: say what it is for (and, if new, why it exists) in a doc.go", p.rel)
		}
	}
}

// TestPermits keeps the rule matcher honest.
func TestPermits(t *testing.T) {
	tests := []struct {
		rules []string
		imp   string
		want  bool
	}{
		{[]string{"*"}, "gateway", true},
		{[]string{"internal/*"}, "internal/jsonrpc", true},
		{[]string{"internal/*"}, "internalx/y", false},
		{[]string{"config"}, "config", true},
		{[]string{"config"}, "gateway", false},
		{nil, "config", false},
	}
	for _, tt := range tests {
		if got := permits(tt.rules, tt.imp); got != tt.want {
			t.Errorf("permits(%v, %q) = %v, want %v", tt.rules, tt.imp, got, tt.want)
		}
	}
}
