package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// server is one npm MCP server of the catalog.
type server struct {
	Name    string // the catalog file name and the gateway's server name
	Package string
	Version string // pinned, so that a re-recording is the same list
	Bin     string // in node_modules/.bin
	// Args and Env ({home} is the server's temporary HOME) are what it
	// needs to start and list its tools: dummy credentials, never real
	// ones.
	Args []string
	Env  []string
	// Files are written into HOME before the server starts: dummy
	// credential files some servers insist on reading.
	Files map[string]string
}

// writeSources rewrites dir/SOURCES.md: a row for each recorded server of
// the table whose file is in dir, and one for each generated server.
func writeSources(dir string) error {
	var b bytes.Buffer
	b.WriteString(`# Where the catalog comes from

Each ` + "`<server>.json`" + ` is the ` + "`tools`" + ` array that server answered to
` + "`tools/list`" + `, byte for byte as it sent it but for the temporary
directories it ran in, which read ` + "`/home/user`" + ` and ` + "`/opt/mcp-server`" + `.
` + "`go run ./bench/toolsearch/record`" + ` records them and rewrites this file:
it installs the npm package at the pinned version with ` + "`--ignore-scripts`" + `
and starts it over stdio with dummy credentials. Files named ` + "`gen-*.json`" + `
are servers written by hand for the benchmark, marked "generated" below.

| server | source | package | version | tools |
|---|---|---|---|---:|
`)
	n := 0
	for _, s := range servers {
		count, err := countTools(filepath.Join(dir, s.Name+".json"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "| %s | recorded | `%s` | %s | %d |\n", s.Name, s.Package, s.Version, count)
		n += count
	}
	gens, err := filepath.Glob(filepath.Join(dir, "gen-*.json"))
	if err != nil {
		return err
	}
	slices.Sort(gens)
	for _, p := range gens {
		count, err := countTools(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "| %s | generated | – | – | %d |\n", strings.TrimSuffix(filepath.Base(p), ".json"), count)
		n += count
	}
	fmt.Fprintf(&b, "| **all** | | | | **%d** |\n", n)
	if len(gens) == 0 {
		b.WriteString("\nNo server is generated: every one is recorded.\n")
	}
	return os.WriteFile(filepath.Join(dir, "SOURCES.md"), b.Bytes(), 0o644)
}

func countTools(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var els []json.RawMessage
	if err := json.Unmarshal(data, &els); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return len(els), nil
}
