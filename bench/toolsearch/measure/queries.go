package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// query is one request of the query set and the exposed names of the
// tools that satisfy it; any one of them counts as found. Query is what
// the ranker is given. In an agent set, Request is the user's request
// and Query the search an agent wrote for it.
type query struct {
	Request string   `json:"request,omitempty"`
	Query   string   `json:"query"`
	Expect  []string `json:"expect"`
}

// key is what must be unique in a set: the user's request, since two
// requests may lead an agent to the same search.
func (q query) key() string {
	if q.Request != "" {
		return strings.TrimSpace(q.Request)
	}
	return strings.TrimSpace(q.Query)
}

// loadQueries reads the query set and checks it against c.
func loadQueries(path string, c *catalog) ([]query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	qs, err := parseQueries(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkQueries(qs, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}

// parseQueries decodes a JSON array of queries strictly: unknown members,
// empty requests, requests given twice and queries without an expected
// tool are errors, all reported at once.
func parseQueries(data []byte) ([]query, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var qs []query
	if err := dec.Decode(&qs); err != nil {
		return nil, fmt.Errorf("want a JSON array of {query, expect} or {request, query, expect}: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data after the array")
	}
	if len(qs) == 0 {
		return nil, errors.New("no queries")
	}
	var errs []error
	seen := make(map[string]bool, len(qs))
	for i, q := range qs {
		text := q.key()
		switch {
		case strings.TrimSpace(q.Query) == "":
			errs = append(errs, fmt.Errorf("query %d: empty request", i))
		case seen[text]:
			errs = append(errs, fmt.Errorf("query %d: %q is given twice", i, text))
		}
		seen[text] = true
		if len(q.Expect) == 0 {
			errs = append(errs, fmt.Errorf("query %d: no expected tool", i))
		}
		names := make(map[string]bool, len(q.Expect))
		for _, e := range q.Expect {
			if names[e] {
				errs = append(errs, fmt.Errorf("query %d: expected tool %q is given twice", i, e))
			}
			names[e] = true
		}
	}
	return qs, errors.Join(errs...)
}

// checkQueries reports every expected tool that c does not expose.
func checkQueries(qs []query, c *catalog) error {
	var errs []error
	for i, q := range qs {
		for _, e := range q.Expect {
			if _, ok := c.lookup(e); !ok {
				errs = append(errs, fmt.Errorf("query %d (%q): expected tool %q is not in the catalog", i, q.Query, e))
			}
		}
	}
	return errors.Join(errs...)
}
