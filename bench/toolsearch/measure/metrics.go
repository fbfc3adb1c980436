package main

// Ranker is what the benchmark needs of a tool search: the exposed names of
// at most limit tools for a request, best first.
type Ranker interface {
	Search(query string, limit int) []string
}

// rankOf returns the 1-based position of the first of expect in ranked, or
// 0 when none of them is there.
func rankOf(ranked, expect []string) int {
	for i, name := range ranked {
		for _, e := range expect {
			if name == e {
				return i + 1
			}
		}
	}
	return 0
}

// recallAt is the share of queries for which a satisfying tool is among the
// first k results: each query's expected tools are alternatives, so finding
// one of them is finding the tool. ranked[i] is the ranking for qs[i].
func recallAt(k int, qs []query, ranked [][]string) float64 {
	if len(qs) == 0 {
		return 0
	}
	hits := 0
	for i, q := range qs {
		if r := rankOf(ranked[i], q.Expect); r > 0 && r <= k {
			hits++
		}
	}
	return float64(hits) / float64(len(qs))
}

// meanReciprocalRank is the mean over queries of 1/rank of the first
// satisfying tool, counting 0 when none was returned. ranked[i] is the
// ranking for qs[i], cut at whatever depth the caller searched.
func meanReciprocalRank(qs []query, ranked [][]string) float64 {
	if len(qs) == 0 {
		return 0
	}
	sum := 0.0
	for i, q := range qs {
		if r := rankOf(ranked[i], q.Expect); r > 0 {
			sum += 1 / float64(r)
		}
	}
	return sum / float64(len(qs))
}
