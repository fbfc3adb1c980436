package main

import (
	"fmt"
	"os"

	"github.com/mcpgw/mcpgw/toolsearch"
)

// indexed is the gateway's own ranking (package toolsearch), fed the
// catalog as the gateway feeds it: a server's tools at a time, under their
// exposed names.
type indexed struct{ ix toolsearch.Index }

func newIndexed(c *catalog) *indexed {
	r := &indexed{}
	byServer := map[string][]toolsearch.Tool{}
	for _, t := range c.Tools {
		byServer[t.Server] = append(byServer[t.Server], toolsearch.Tool{Name: t.Exposed, Server: t.Server, Raw: t.Raw})
	}
	if err := r.ix.SetServers(byServer); err != nil {
		fmt.Fprintln(os.Stderr, "measure: indexing the catalog:", err)
		os.Exit(1)
	}
	return r
}

func (r *indexed) Search(query string, limit int) []string {
	hits, err := r.ix.Search(query, limit, func(string) bool { return true })
	if err != nil {
		return nil
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Name
	}
	return out
}
