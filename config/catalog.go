package config

import (
	"fmt"
	"slices"
	"strings"
)

// Catalog sets how the merged tools are shown to clients.
type Catalog struct {
	// Exposure is ExposureAll (the default: tools/list holds every tool
	// the caller may use) or ExposureSearch (tools/list holds the
	// gateway's search_tools and call_tool, and the tools the client
	// found). A client picks its own with /mcp?exposure=.
	Exposure string `yaml:"exposure"`
	// SearchGroups are groups whose principals always get ExposureSearch,
	// whatever their client asks for (small-context agents). Default none.
	SearchGroups []string `yaml:"search_groups"`
	// SearchLimit is the most tools one search_tools returns, from 1 to
	// 50. Default DefaultSearchLimit.
	SearchLimit int `yaml:"search_limit"`
}

// Exposures of Catalog.Exposure.
const (
	ExposureAll    = "all"
	ExposureSearch = "search"
)

// DefaultSearchLimit is Catalog.SearchLimit's default; MaxSearchLimit its
// bound.
const (
	DefaultSearchLimit = 5
	MaxSearchLimit     = 50
)

// ReservedServerName is the name of the gateway's own tools' namespace
// (mcp__mcpgw__search_tools): no server may take it.
const ReservedServerName = "mcpgw"

// ExposureFor returns the exposure of a request of a principal in groups
// whose client asked for asked ("" for none): search for the configured
// search groups, else what the client asked, else the default.
func (c Catalog) ExposureFor(groups []string, asked string) string {
	for _, g := range groups {
		if slices.Contains(c.SearchGroups, g) {
			return ExposureSearch
		}
	}
	if asked != "" {
		return asked
	}
	if c.Exposure == "" {
		return ExposureAll
	}
	return c.Exposure
}

// ValidExposure says what is wrong with an exposure a client asked for,
// or "".
func ValidExposure(e string) string {
	if e == ExposureAll || e == ExposureSearch {
		return ""
	}
	return fmt.Sprintf("exposure %q is not one of %s, %s", e, ExposureAll, ExposureSearch)
}

func (c *Config) validateCatalog(add func(path, format string, args ...any)) {
	if e := c.Catalog.Exposure; e != "" && ValidExposure(e) != "" {
		add("catalog.exposure", "%q is not one of %s", e, strings.Join([]string{ExposureAll, ExposureSearch}, ", "))
	}
	if n := c.Catalog.SearchLimit; n < 0 || n > MaxSearchLimit {
		add("catalog.search_limit", "must be from 1 to %d (0 means %d)", MaxSearchLimit, DefaultSearchLimit)
	}
	for i, g := range c.Catalog.SearchGroups {
		if g == "" {
			add(fmt.Sprintf("catalog.search_groups[%d]", i), "is empty")
		}
	}
}
