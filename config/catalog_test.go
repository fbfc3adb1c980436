package config

import (
	"strings"
	"testing"
)

func TestCatalog(t *testing.T) {
	for _, tt := range []struct{ yaml, problem string }{
		{"catalog: {exposure: search, search_groups: [small], search_limit: 10}\n", ""},
		{"catalog: {exposure: some}\n", `catalog.exposure: "some" is not one of all, search`},
		{"catalog: {search_limit: 51}\n", "catalog.search_limit: must be from 1 to 50"},
		{"catalog: {search_groups: [\"\"]}\n", "catalog.search_groups[0]: is empty"},
	} {
		_, ps := Parse([]byte(tt.yaml), nil)
		got := ""
		for _, p := range ps {
			if strings.HasPrefix(p.Path, "catalog") {
				got = p.Path + ": " + p.Message
			}
		}
		if !strings.HasPrefix(got, tt.problem) || (tt.problem == "" && got != "") {
			t.Errorf("%q: problem %q, want %q", tt.yaml, got, tt.problem)
		}
	}
	c := Catalog{SearchGroups: []string{"small"}}
	for _, tt := range []struct {
		groups      []string
		asked, want string
	}{
		{nil, "", ExposureAll},
		{nil, ExposureSearch, ExposureSearch},
		{[]string{"small"}, ExposureAll, ExposureSearch},
		{[]string{"big"}, ExposureAll, ExposureAll},
	} {
		if got := c.ExposureFor(tt.groups, tt.asked); got != tt.want {
			t.Errorf("ExposureFor(%v, %q) = %q, want %q", tt.groups, tt.asked, got, tt.want)
		}
	}
	if got := (Catalog{Exposure: ExposureSearch}).ExposureFor(nil, ""); got != ExposureSearch {
		t.Errorf("default search: %q", got)
	}
}
