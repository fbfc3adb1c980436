package main

import (
	"math"
	"testing"
)

// The hand example: four queries, the first found at 1, the second at 3
// (through its second alternative), the third at 6, the fourth not at all.
var (
	handQueries = []query{
		{Query: "q1", Expect: []string{"a"}},
		{Query: "q2", Expect: []string{"x", "c"}},
		{Query: "q3", Expect: []string{"f"}},
		{Query: "q4", Expect: []string{"z"}},
	}
	handRanked = [][]string{
		{"a", "b", "c"},
		{"a", "b", "c", "x"}, // x is also right, but c comes first
		{"a", "b", "c", "d", "e", "f"},
		{"a", "b"},
	}
)

func TestRankOf(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ranked, expect []string
		want           int
	}{
		{"first", []string{"a", "b"}, []string{"a"}, 1},
		{"second alternative first", []string{"a", "b", "c"}, []string{"c", "b"}, 2},
		{"absent", []string{"a", "b"}, []string{"c"}, 0},
		{"empty ranking", nil, []string{"a"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rankOf(tc.ranked, tc.expect); got != tc.want {
				t.Errorf("rankOf(%q, %q) = %d, want %d", tc.ranked, tc.expect, got, tc.want)
			}
		})
	}
}

func TestRecallAt(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
		want float64
	}{
		{"k=1", 1, 1.0 / 4},
		{"k=3", 3, 2.0 / 4},
		{"k=5", 5, 2.0 / 4},
		{"k=6", 6, 3.0 / 4},
		{"k=100", 100, 3.0 / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recallAt(tc.k, handQueries, handRanked); got != tc.want {
				t.Errorf("recallAt(%d) = %v, want %v", tc.k, got, tc.want)
			}
		})
	}
	if got := recallAt(5, nil, nil); got != 0 {
		t.Errorf("recallAt of no queries = %v, want 0", got)
	}
}

func TestMeanReciprocalRank(t *testing.T) {
	want := (1.0 + 1.0/3 + 1.0/6 + 0) / 4
	if got := meanReciprocalRank(handQueries, handRanked); math.Abs(got-want) > 1e-12 {
		t.Errorf("meanReciprocalRank = %v, want %v", got, want)
	}
	if got := meanReciprocalRank(nil, nil); got != 0 {
		t.Errorf("meanReciprocalRank of no queries = %v, want 0", got)
	}
}
