package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/naming"
)

// maxServerName is config's limit on a server name.
const maxServerName = 32

// tool is one tool of the catalog.
type tool struct {
	Server      string
	Name        string // the server's own name
	Exposed     string // the name the gateway exposes
	Description string
	// Raw is the tool object as the server sent it, compacted.
	Raw json.RawMessage
}

// catalog is the merged tools of every server, sorted by exposed name.
type catalog struct {
	Servers []string
	Tools   []tool
	byName  map[string]int // exposed name -> index in Tools
}

// lookup returns the tool exposed as name.
func (c *catalog) lookup(name string) (*tool, bool) {
	i, ok := c.byName[name]
	if !ok {
		return nil, false
	}
	return &c.Tools[i], true
}

// loadCatalog reads every <server>.json of dir: each is what that server
// answers to tools/list, its "tools" array. It reports every bad file at
// once.
func loadCatalog(dir string) (*catalog, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("catalog %s: no <server>.json files", dir)
	}
	slices.Sort(paths)
	var (
		errs    []error
		tools   []tool
		servers []string
	)
	for _, p := range paths {
		server := strings.TrimSuffix(filepath.Base(p), ".json")
		if err := checkServerName(server); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts, err := parseTools(server, data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		servers = append(servers, server)
		tools = append(tools, ts...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return newCatalog(servers, tools)
}

// newCatalog names tools as the gateway does on its defaults and sorts
// them by exposed name.
func newCatalog(servers []string, tools []tool) (*catalog, error) {
	entries := make([]naming.Entry, len(tools))
	for i, t := range tools {
		entries[i] = naming.Entry{Server: t.Server, Name: t.Name, Seq: uint64(i)}
	}
	table, problems := naming.Build(naming.Options{}, entries)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = errors.New(p.Message)
		}
		return nil, fmt.Errorf("naming the catalog's tools: %w", errors.Join(errs...))
	}
	c := &catalog{Servers: servers, Tools: tools, byName: make(map[string]int, len(tools))}
	for i := range c.Tools {
		t := &c.Tools[i]
		exposed, ok := table.Exposed(naming.Ref{Server: t.Server, Name: t.Name})
		if !ok {
			return nil, fmt.Errorf("server %q: tool %q got no exposed name", t.Server, t.Name)
		}
		t.Exposed = exposed
	}
	slices.SortFunc(c.Tools, func(a, b tool) int { return strings.Compare(a.Exposed, b.Exposed) })
	for i, t := range c.Tools {
		if _, dup := c.byName[t.Exposed]; dup {
			return nil, fmt.Errorf("exposed name %q is given twice", t.Exposed)
		}
		c.byName[t.Exposed] = i
	}
	return c, nil
}

// checkServerName applies config's rule for server names: [a-z0-9-], 1 to
// 32 characters, no "__".
func checkServerName(s string) error {
	if s == "" || len(s) > maxServerName {
		return fmt.Errorf("server name %q: want 1 to %d characters", s, maxServerName)
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("server name %q: only a-z, 0-9 and - are allowed", s)
		}
	}
	return nil
}

// parseTools reads one server's tools array. Each element must be an
// object with a non-empty string name, given once; a description, when
// present, must be a string.
func parseTools(server string, data []byte) ([]tool, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("want the tools array of a tools/list result: %w", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("the tools array is empty")
	}
	seen := make(map[string]bool, len(raws))
	tools := make([]tool, 0, len(raws))
	for i, raw := range raws {
		var head struct {
			Name        *string `json:"name"`
			Description *string `json:"description"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("tool %d: want an object with a string name: %w", i, err)
		}
		if head.Name == nil || *head.Name == "" {
			return nil, fmt.Errorf("tool %d: no name", i)
		}
		name := *head.Name
		if seen[name] {
			return nil, fmt.Errorf("tool %q is listed twice", name)
		}
		seen[name] = true
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("tool %q: %w", name, err)
		}
		t := tool{Server: server, Name: name, Raw: b.Bytes()}
		if head.Description != nil {
			t.Description = *head.Description
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// allListing is the tools/list result the gateway gives in all mode on its
// defaults to a 2025-11-25 client: each tool with its exposed name and the
// task support the gateway lists when it hosts tasks (optional), in the
// order of exposed names.
func allListing(c *catalog) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"tools":[`)
	for i, t := range c.Tools {
		name, err := json.Marshal(t.Exposed)
		if err != nil {
			return nil, err
		}
		raw, err := rawjson.Set(t.Raw, "name", name)
		if err != nil {
			return nil, fmt.Errorf("renaming %q: %w", t.Exposed, err)
		}
		if raw, err = withTaskSupportOptional(raw); err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Exposed, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(raw)
	}
	b.WriteString(`]}`)
	return b.Bytes(), nil
}

// withTaskSupportOptional sets execution.taskSupport to "optional", keeping
// the rest of execution, as the gateway does for every tool when it hosts
// tasks (its default).
func withTaskSupportOptional(raw json.RawMessage) (json.RawMessage, error) {
	exec, ok, err := rawjson.Get(raw, "execution")
	if err != nil {
		return nil, err
	}
	if !ok || string(exec) == "null" {
		exec = json.RawMessage(`{}`)
	}
	if v, _ := rawjson.String(exec, "taskSupport"); v == "optional" {
		return raw, nil
	}
	exec, err = rawjson.Set(exec, "taskSupport", json.RawMessage(`"optional"`))
	if err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	return rawjson.Set(raw, "execution", exec)
}

// readSearchListing reads a search-mode tools/list result: a JSON object
// whose "tools" array holds at least one tool with a name. It returns the
// result compacted, as the gateway sends it.
func readSearchListing(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseListing(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// parseListing checks and compacts a tools/list result.
func parseListing(data []byte) ([]byte, error) {
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("want a tools/list result object: %w", err)
	}
	if len(res.Tools) == 0 {
		return nil, errors.New(`want a tools/list result with a non-empty "tools" array`)
	}
	for i, raw := range res.Tools {
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.Name == "" {
			return nil, fmt.Errorf("tool %d: want an object with a non-empty string name", i)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
