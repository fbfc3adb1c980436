package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// hash8 is the documented hash suffix, computed independently of the code
// under test.
func hash8(server, name string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + name))
	return hex.EncodeToString(sum[:])[:8]
}

// hashed is name cut to max-9 characters plus "_" and the hash of (server,
// original).
func hashed(name string, max int, server, original string) string {
	if len(name) > max-9 {
		name = name[:max-9]
	}
	return name + "_" + hash8(server, original)
}

var (
	long80  = strings.Repeat("abcdefghij", 8)
	long300 = strings.Repeat("0123456789", 30)
)

func TestBuild(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		entries  []Entry
		want     map[Ref]string
		problems []Problem // compared without Message
	}{
		{
			name: "always",
			entries: []Entry{
				{Server: "files", Name: "read"},
				{Server: "files", Name: "a__b"},
				{Server: "files-x", Name: "b", Mode: Always},
				{Server: "git", Name: "read", Mode: "bogus"}, // unknown mode is Always
			},
			want: map[Ref]string{
				{"files", "read"}: "mcp__files__read",
				{"files", "a__b"}: "mcp__files__a__b",
				{"files-x", "b"}:  "mcp__files-x__b",
				{"git", "read"}:   "mcp__git__read",
			},
		},
		{
			name: "always with prefix and separator",
			opts: Options{Prefix: "gw", Separator: "-"},
			entries: []Entry{
				{Server: "files", Name: "read"},
				{Server: "git", Name: "log"},
			},
			want: map[Ref]string{
				{"files", "read"}: "gw-files-read",
				{"git", "log"}:    "gw-git-log",
			},
		},
		{
			// Two servers' identical long names clash before they are cut,
			// though their cut forms (hashed by server) would differ.
			name: "on_collision with a shared long name",
			entries: []Entry{
				{Server: "a", Name: long80, Mode: OnCollision},
				{Server: "b", Name: long80, Mode: OnCollision},
			},
			want: map[Ref]string{
				{"a", long80}: hashed("mcp__a__"+long80, 64, "a", long80),
				{"b", long80}: hashed("mcp__b__"+long80, 64, "b", long80),
			},
		},
		{
			name: "never with a shared long name",
			entries: []Entry{
				{Server: "a", Name: long80, Mode: Never, Seq: 2},
				{Server: "b", Name: long80, Mode: Never, Seq: 1},
			},
			want: map[Ref]string{
				{"b", long80}: hashed(long80, 64, "b", long80),
			},
			problems: []Problem{{Ref: Ref{"a", long80}, Other: Ref{"b", long80}}},
		},
		{
			name: "on_collision without clash",
			entries: []Entry{
				{Server: "files", Name: "read", Mode: OnCollision},
				{Server: "git", Name: "log", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"files", "read"}: "read",
				{"git", "log"}:    "log",
			},
		},
		{
			name: "on_collision with clash",
			entries: []Entry{
				{Server: "files", Name: "search", Mode: OnCollision},
				{Server: "files", Name: "read", Mode: OnCollision},
				{Server: "git", Name: "search", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"files", "search"}: "mcp__files__search",
				{"files", "read"}:   "read",
				{"git", "search"}:   "mcp__git__search",
			},
		},
		{
			name: "on_collision three-way clash",
			entries: []Entry{
				{Server: "a", Name: "search", Mode: OnCollision},
				{Server: "b", Name: "search", Mode: OnCollision},
				{Server: "c", Name: "search", Mode: OnCollision},
				{Server: "c", Name: "other", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"a", "search"}: "mcp__a__search",
				{"b", "search"}: "mcp__b__search",
				{"c", "search"}: "mcp__c__search",
				{"c", "other"}:  "other",
			},
		},
		{
			name: "on_collision cascade: the prefixed form clashes with a bare name",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: OnCollision},
				{Server: "b", Name: "x", Mode: OnCollision},
				{Server: "c", Name: "mcp__a__x", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"a", "x"}:         "mcp__a__x",
				{"b", "x"}:         "mcp__b__x",
				{"c", "mcp__a__x"}: "mcp__c__mcp__a__x",
			},
		},
		{
			name: "on_collision within one server is not a prefix clash",
			entries: []Entry{
				{Server: "s", Name: "a.b", Mode: OnCollision},
				{Server: "s", Name: "a_b", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"s", "a.b"}: "a_b_" + hash8("s", "a.b"),
				{"s", "a_b"}: "a_b_" + hash8("s", "a_b"),
			},
			problems: []Problem{
				{Ref: Ref{"s", "a.b"}, Exposed: "a_b_" + hash8("s", "a.b"), Other: Ref{"s", "a_b"}},
				{Ref: Ref{"s", "a_b"}, Exposed: "a_b_" + hash8("s", "a_b"), Other: Ref{"s", "a.b"}},
			},
		},
		{
			name: "never without clash",
			entries: []Entry{
				{Server: "files", Name: "read", Mode: Never},
			},
			want: map[Ref]string{{"files", "read"}: "read"},
		},
		{
			name: "never: the older server keeps the name",
			entries: []Entry{
				{Server: "b", Name: "x", Mode: Never, Seq: 2},
				{Server: "a", Name: "x", Mode: Never, Seq: 1},
				{Server: "b", Name: "y", Mode: Never, Seq: 2},
			},
			want: map[Ref]string{
				{"a", "x"}: "x",
				{"b", "y"}: "y",
			},
			problems: []Problem{{Ref: Ref{"b", "x"}, Other: Ref{"a", "x"}}},
		},
		{
			name: "never: the older one wins whatever its server name",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: Never, Seq: 7},
				{Server: "b", Name: "x", Mode: Never, Seq: 3},
			},
			want:     map[Ref]string{{"b", "x"}: "x"},
			problems: []Problem{{Ref: Ref{"a", "x"}, Other: Ref{"b", "x"}}},
		},
		{
			name: "never: equal Seq falls back to the server name",
			entries: []Entry{
				{Server: "b", Name: "x", Mode: Never},
				{Server: "a", Name: "x", Mode: Never},
			},
			want:     map[Ref]string{{"a", "x"}: "x"},
			problems: []Problem{{Ref: Ref{"b", "x"}, Other: Ref{"a", "x"}}},
		},
		{
			name: "never: three-way, two left out",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: Never, Seq: 3},
				{Server: "b", Name: "x", Mode: Never, Seq: 1},
				{Server: "c", Name: "x", Mode: Never, Seq: 2},
			},
			want: map[Ref]string{{"b", "x"}: "x"},
			problems: []Problem{
				{Ref: Ref{"a", "x"}, Other: Ref{"b", "x"}},
				{Ref: Ref{"c", "x"}, Other: Ref{"b", "x"}},
			},
		},
		{
			name: "mixed: on_collision yields to never",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: OnCollision, Seq: 1},
				{Server: "b", Name: "x", Mode: Never, Seq: 2},
				{Server: "c", Name: "x"}, // always: no clash
			},
			want: map[Ref]string{
				{"a", "x"}: "mcp__a__x",
				{"b", "x"}: "x",
				{"c", "x"}: "mcp__c__x",
			},
		},
		{
			name: "mixed: a newer never entry loses to an older always entry",
			entries: []Entry{
				{Server: "a", Name: "y", Seq: 1},
				{Server: "b", Name: "mcp__a__y", Mode: Never, Seq: 2},
			},
			want:     map[Ref]string{{"a", "y"}: "mcp__a__y"},
			problems: []Problem{{Ref: Ref{"b", "mcp__a__y"}, Other: Ref{"a", "y"}}},
		},
		{
			name: "mixed: an older never entry keeps the name, the always entry is hashed",
			entries: []Entry{
				{Server: "a", Name: "y", Seq: 2},
				{Server: "b", Name: "mcp__a__y", Mode: Never, Seq: 1},
			},
			want: map[Ref]string{
				{"a", "y"}:         "mcp__a__y_" + hash8("a", "y"),
				{"b", "mcp__a__y"}: "mcp__a__y",
			},
			problems: []Problem{{Ref: Ref{"a", "y"}, Exposed: "mcp__a__y_" + hash8("a", "y"), Other: Ref{"b", "mcp__a__y"}}},
		},
		{
			name: "mixed: always and on_collision on one server",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: OnCollision},
				{Server: "b", Name: "x"},
				{Server: "b", Name: "mcp__a__x", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"a", "x"}:         "x",
				{"b", "x"}:         "mcp__b__x",
				{"b", "mcp__a__x"}: "mcp__a__x",
			},
		},
		{
			name: "rename",
			entries: []Entry{
				{Server: "files", Name: "read", Rename: "read_file"},
				{Server: "git", Name: "log", Mode: OnCollision, Rename: "git log"},
				{Server: "web", Name: "get", Mode: Never, Rename: "fetch"},
			},
			want: map[Ref]string{
				{"files", "read"}: "read_file",
				{"git", "log"}:    "git_log",
				{"web", "get"}:    "fetch",
			},
		},
		{
			name: "rename clashing with a rename",
			entries: []Entry{
				{Server: "a", Name: "x", Rename: "find"},
				{Server: "b", Name: "y", Rename: "find"},
			},
			want: map[Ref]string{
				{"a", "x"}: "find_" + hash8("a", "x"),
				{"b", "y"}: "find_" + hash8("b", "y"),
			},
			problems: []Problem{
				{Ref: Ref{"a", "x"}, Exposed: "find_" + hash8("a", "x"), Other: Ref{"b", "y"}},
				{Ref: Ref{"b", "y"}, Exposed: "find_" + hash8("b", "y"), Other: Ref{"a", "x"}},
			},
		},
		{
			name: "rename clashing with an always name",
			entries: []Entry{
				{Server: "a", Name: "x", Rename: "mcp__b__y"},
				{Server: "b", Name: "y"},
			},
			want: map[Ref]string{
				{"a", "x"}: "mcp__b__y_" + hash8("a", "x"),
				{"b", "y"}: "mcp__b__y_" + hash8("b", "y"),
			},
			problems: []Problem{
				{Ref: Ref{"a", "x"}, Exposed: "mcp__b__y_" + hash8("a", "x"), Other: Ref{"b", "y"}},
				{Ref: Ref{"b", "y"}, Exposed: "mcp__b__y_" + hash8("b", "y"), Other: Ref{"a", "x"}},
			},
		},
		{
			name: "rename clashing with on_collision: the on_collision entry is prefixed",
			entries: []Entry{
				{Server: "a", Name: "x", Rename: "search"},
				{Server: "b", Name: "search", Mode: OnCollision},
			},
			want: map[Ref]string{
				{"a", "x"}:      "search",
				{"b", "search"}: "mcp__b__search",
			},
		},
		{
			name: "rename too long",
			entries: []Entry{
				{Server: "a", Name: "x", Rename: long80},
			},
			want: map[Ref]string{{"a", "x"}: hashed(long80, 64, "a", "x")},
		},
		{
			name: "dots, spaces and unicode are sanitized",
			entries: []Entry{
				{Server: "a", Name: "get.file"},
				{Server: "a", Name: "list all"},
				{Server: "a", Name: "héllo wörld"},
				{Server: "a", Name: "日本"},
				{Server: "a", Name: "x/y:z,w"},
				{Server: "a", Name: "bad\xffutf8"},
				{Server: "b", Name: "ok-Name_9", Mode: Never},
			},
			want: map[Ref]string{
				{"a", "get.file"}:    "mcp__a__get_file",
				{"a", "list all"}:    "mcp__a__list_all",
				{"a", "héllo wörld"}: "mcp__a__h_llo_w_rld",
				{"a", "日本"}:          "mcp__a____",
				{"a", "x/y:z,w"}:     "mcp__a__x_y_z_w",
				{"a", "bad\xffutf8"}: "mcp__a__bad_utf8",
				{"b", "ok-Name_9"}:   "ok-Name_9",
			},
		},
		{
			name: "prefix and separator are sanitized too",
			opts: Options{Prefix: "m.c.p", Separator: "::"},
			entries: []Entry{
				{Server: "a", Name: "x"},
			},
			want: map[Ref]string{{"a", "x"}: "m_c_p__a__x"},
		},
		{
			name: "sanitization clash a.b vs a_b",
			entries: []Entry{
				{Server: "s", Name: "a.b"},
				{Server: "s", Name: "a_b"},
				{Server: "s", Name: "c"},
			},
			want: map[Ref]string{
				{"s", "a.b"}: "mcp__s__a_b_" + hash8("s", "a.b"),
				{"s", "a_b"}: "mcp__s__a_b_" + hash8("s", "a_b"),
				{"s", "c"}:   "mcp__s__c",
			},
			problems: []Problem{
				{Ref: Ref{"s", "a.b"}, Exposed: "mcp__s__a_b_" + hash8("s", "a.b"), Other: Ref{"s", "a_b"}},
				{Ref: Ref{"s", "a_b"}, Exposed: "mcp__s__a_b_" + hash8("s", "a_b"), Other: Ref{"s", "a.b"}},
			},
		},
		{
			name: "sanitization clash with a never entry: the newer never entry is left out",
			entries: []Entry{
				{Server: "s", Name: "a.b", Mode: Never, Seq: 2},
				{Server: "t", Name: "a_b", Mode: Never, Seq: 1},
			},
			want:     map[Ref]string{{"t", "a_b"}: "a_b"},
			problems: []Problem{{Ref: Ref{"s", "a.b"}, Other: Ref{"t", "a_b"}}},
		},
		{
			name: "sanitization clash of three: prefixing first, then age",
			entries: []Entry{
				{Server: "a", Name: "a b", Mode: OnCollision, Seq: 1},
				{Server: "a", Name: "a.b", Seq: 2, Rename: "a.b"},
				{Server: "c", Name: "a_b", Mode: Never, Seq: 3},
			},
			// All want "a_b" and two servers are involved, so the
			// on_collision entry is prefixed. The renamed entry is older
			// than the never entry and keeps the name.
			want: map[Ref]string{
				{"a", "a b"}: "mcp__a__a_b",
				{"a", "a.b"}: "a_b",
			},
			problems: []Problem{
				{Ref: Ref{"c", "a_b"}, Other: Ref{"a", "a.b"}},
			},
		},
		{
			name: "80-char name is cut with a hash",
			entries: []Entry{
				{Server: "files", Name: long80},
				{Server: "git", Name: long80, Mode: Never},
			},
			want: map[Ref]string{
				{"files", long80}: hashed("mcp__files__"+long80, 64, "files", long80),
				{"git", long80}:   hashed(long80, 64, "git", long80),
			},
		},
		{
			name: "300-char name is cut with a hash",
			entries: []Entry{
				{Server: "files", Name: long300},
				{Server: "files", Name: long300 + "x"}, // same cut prefix, other hash
			},
			want: map[Ref]string{
				{"files", long300}:       hashed("mcp__files__"+long300, 64, "files", long300),
				{"files", long300 + "x"}: hashed("mcp__files__"+long300, 64, "files", long300+"x"),
			},
		},
		{
			name: "exactly MaxLength is not cut",
			entries: []Entry{
				{Server: "a", Name: long80[:64], Mode: Never},
				{Server: "b", Name: long80[:65], Mode: Never},
			},
			want: map[Ref]string{
				{"a", long80[:64]}: long80[:64],
				{"b", long80[:65]}: hashed(long80, 64, "b", long80[:65]),
			},
		},
		{
			name: "MaxLength 32",
			opts: Options{MaxLength: 32},
			entries: []Entry{
				{Server: "files", Name: long80},
				{Server: "files", Name: "short"},
			},
			want: map[Ref]string{
				{"files", long80}:  hashed("mcp__files__"+long80, 32, "files", long80),
				{"files", "short"}: "mcp__files__short",
			},
		},
		{
			name: "MaxLength below 16 is raised to 16",
			opts: Options{MaxLength: 3},
			entries: []Entry{
				{Server: "files", Name: "readme"},
			},
			want: map[Ref]string{{"files", "readme"}: hashed("mcp__files__readme", 16, "files", "readme")},
		},
		{
			name: "negative MaxLength is raised to 16",
			opts: Options{MaxLength: -1},
			entries: []Entry{
				{Server: "a", Name: "read"},
			},
			want: map[Ref]string{{"a", "read"}: "mcp__a__read"},
		},
		{
			name: "MaxLength above 128 is lowered to 128",
			opts: Options{MaxLength: 1000},
			entries: []Entry{
				{Server: "files", Name: long80},
				{Server: "files", Name: long300},
			},
			want: map[Ref]string{
				{"files", long80}:  "mcp__files__" + long80,
				{"files", long300}: hashed("mcp__files__"+long300, 128, "files", long300),
			},
		},
		{
			name: "MaxLength 128",
			opts: Options{MaxLength: 128},
			entries: []Entry{
				{Server: "files", Name: long300, Mode: OnCollision},
			},
			want: map[Ref]string{{"files", long300}: hashed(long300, 128, "files", long300)},
		},
		{
			name: "duplicate entry: the oldest copy counts",
			entries: []Entry{
				{Server: "a", Name: "x", Mode: Never, Seq: 5},
				{Server: "a", Name: "x", Mode: Always, Seq: 1},
				{Server: "a", Name: "x", Mode: OnCollision, Seq: 9},
			},
			want: map[Ref]string{{"a", "x"}: "mcp__a__x"},
		},
		{
			name: "empty name is left out",
			entries: []Entry{
				{Server: "a", Name: ""},
				{Server: "b", Name: "", Mode: OnCollision},
				{Server: "c", Name: "", Rename: "named"},
				{Server: "c", Name: "ok"},
			},
			want: map[Ref]string{{"c", "ok"}: "mcp__c__ok"},
			problems: []Problem{
				{Ref: Ref{"a", ""}},
				{Ref: Ref{"b", ""}},
				{Ref: Ref{"c", ""}},
			},
		},
		{
			name: "a name made to look like a hashed one",
			entries: []Entry{
				{Server: "s", Name: "a.b", Mode: OnCollision},
				{Server: "s", Name: "a_b", Mode: OnCollision},
				{Server: "t", Name: "a_b_" + hash8("s", "a.b"), Mode: Never},
			},
			want: map[Ref]string{
				{"s", "a.b"}:                      "a_b_" + hash8("s", "a.b") + "-2",
				{"s", "a_b"}:                      "a_b_" + hash8("s", "a_b"),
				{"t", "a_b_" + hash8("s", "a.b")}: "a_b_" + hash8("s", "a.b"),
			},
			problems: []Problem{
				{Ref: Ref{"s", "a.b"}, Exposed: "a_b_" + hash8("s", "a.b") + "-2", Other: Ref{"s", "a_b"}},
				{Ref: Ref{"s", "a_b"}, Exposed: "a_b_" + hash8("s", "a_b"), Other: Ref{"s", "a.b"}},
			},
		},
		{
			name: "no entries",
			want: map[Ref]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, problems := Build(tt.opts, tt.entries)
			checkTable(t, tt.opts, tab)
			if diff := cmp.Diff(tt.want, tab.byRef, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.problems, problems, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Problem{}, "Message")); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, p := range problems {
				checkMessage(t, p)
			}
		})
	}
}

// checkTable checks that every name is valid, and that the two directions
// agree.
func checkTable(t *testing.T, opts Options, tab *Table) {
	t.Helper()
	max := opts.withDefaults().MaxLength
	if tab.Len() != len(tab.byRef) {
		t.Errorf("Len = %d, but %d refs: two refs share a name", tab.Len(), len(tab.byRef))
	}
	for r, e := range tab.byRef {
		if !Valid(e, max) {
			t.Errorf("%v is exposed as %q, not valid for length %d", r, e, max)
		}
		if got, ok := tab.Lookup(e); !ok || got != r {
			t.Errorf("Lookup(%q) = %v, %v; want %v", e, got, ok, r)
		}
		if got, ok := tab.Exposed(r); !ok || got != e {
			t.Errorf("Exposed(%v) = %q, %v; want %q", r, got, ok, e)
		}
	}
}

// checkMessage checks that a problem's message names the servers and the
// names concerned.
func checkMessage(t *testing.T, p Problem) {
	t.Helper()
	want := []string{fmt.Sprintf("%q", p.Ref.Server)}
	if p.Ref.Name != "" {
		want = append(want, fmt.Sprintf("%q", p.Ref.Name))
	}
	if p.Other != (Ref{}) {
		want = append(want, fmt.Sprintf("%q", p.Other.Server), fmt.Sprintf("%q", p.Other.Name))
	}
	if p.Exposed != "" {
		want = append(want, fmt.Sprintf("%q", p.Exposed))
	}
	for _, w := range want {
		if !strings.Contains(p.Message, w) {
			t.Errorf("message %q does not mention %s", p.Message, w)
		}
	}
}

func TestBuild_Messages(t *testing.T) {
	_, problems := Build(Options{}, []Entry{
		{Server: "a", Name: "x", Mode: Never, Seq: 1},
		{Server: "b", Name: "x", Mode: Never, Seq: 2},
		{Server: "c", Name: "p.q"},
		{Server: "c", Name: "p_q"},
		{Server: "d", Name: ""},
	})
	want := []string{
		`"x" of server "b" is left out: the name "x" is already exposed by "x" of server "a" (prefix mode never)`,
		`"p.q" of server "c" is exposed as "mcp__c__p_q_` + hash8("c", "p.q") + `": the name "mcp__c__p_q" clashes with "p_q" of server "c"`,
		`"p_q" of server "c" is exposed as "mcp__c__p_q_` + hash8("c", "p_q") + `": the name "mcp__c__p_q" clashes with "p.q" of server "c"`,
		`an entry of server "d" with an empty name is left out`,
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Message)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestBuild_LongNameLength checks that every name longer than the limit
// is cut to exactly the limit and ends in the hash of the original.
func TestBuild_LongNameLength(t *testing.T) {
	for _, max := range []int{16, 17, 32, 64, 100, 128} {
		for _, name := range []string{long80, long300, strings.Repeat("é", 150)} {
			for _, mode := range []Mode{Always, OnCollision} {
				tab, _ := Build(Options{MaxLength: max}, []Entry{{Server: "srv", Name: name, Mode: mode}})
				e, _ := tab.Exposed(Ref{"srv", name})
				n := utf8.RuneCountInString(name) // after sanitizing
				if mode == Always {
					n += len("mcp__srv__")
				}
				if n <= max {
					continue
				}
				if len(e) != max || !Valid(e, max) {
					t.Errorf("max %d, %d-character name, %s: got %q (%d chars)", max, n, mode, e, len(e))
				}
				if !strings.HasSuffix(e, "_"+hash8("srv", name)) {
					t.Errorf("max %d: %q lacks the hash of the original", max, e)
				}
			}
		}
	}
}

// TestBuild_OrderIndependent shuffles entries full of clashes of every
// kind and wants the same table and problems each time.
func TestBuild_OrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	servers := []string{"a", "b", "c", "files", "git", "web-1"}
	names := []string{"x", "y", "a.b", "a_b", "a b", "search", "", "mcp__a__x", "mcp__b__y", long80, long80 + "!", "x_" + hash8("a", "a.b")}
	modes := []Mode{"", Always, OnCollision, Never}
	var entries []Entry
	for range 200 {
		e := Entry{
			Server: servers[rng.IntN(len(servers))],
			Name:   names[rng.IntN(len(names))],
			Mode:   modes[rng.IntN(len(modes))],
			Seq:    uint64(rng.IntN(5)),
		}
		if rng.IntN(8) == 0 {
			e.Rename = names[rng.IntN(len(names))]
		}
		entries = append(entries, e)
	}
	for _, opts := range []Options{{}, {MaxLength: 16}, {Prefix: "p", Separator: "_"}} {
		wantTab, wantProblems := Build(opts, entries)
		checkTable(t, opts, wantTab)
		for i := range 50 {
			shuffled := slices.Clone(entries)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			tab, problems := Build(opts, shuffled)
			if diff := cmp.Diff(wantTab.byRef, tab.byRef); diff != "" {
				t.Fatalf("%+v, shuffle %d: names differ (-first +this):\n%s", opts, i, diff)
			}
			if diff := cmp.Diff(wantProblems, problems); diff != "" {
				t.Fatalf("%+v, shuffle %d: problems differ (-first +this):\n%s", opts, i, diff)
			}
		}
	}
}

func TestBuild_DoesNotModifyEntries(t *testing.T) {
	entries := []Entry{{Server: "b", Name: "x"}, {Server: "a", Name: "x"}}
	want := slices.Clone(entries)
	Build(Options{}, entries)
	if diff := cmp.Diff(want, entries); diff != "" {
		t.Errorf("entries changed (-before +after):\n%s", diff)
	}
}

// TestWithHash covers counters too long for the name part, which Build
// reaches only with millions of look-alike names.
func TestWithHash(t *testing.T) {
	o := Options{MaxLength: 16}.withDefaults()
	tests := []struct {
		name, suffix, want string
	}{
		{"abc", "", "abc_12345678"},
		{"abcdefghij", "", "abcdefg_12345678"},
		{"abcdefghij", "-2", "abcde_12345678-2"},
		{"abcdefghij", "-1234567", "_12345678-1234567"[1:]},
		{"abcdefghij", "-123456789", "345678-123456789"},
	}
	for _, tt := range tests {
		if got := o.withHash(tt.name, "12345678", tt.suffix); got != tt.want || len(got) > 16 {
			t.Errorf("withHash(%q, %q) = %q, want %q", tt.name, tt.suffix, got, tt.want)
		}
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		max  int
		want bool
	}{
		{"read", 64, true},
		{"A-z_0-9", 64, true},
		{"", 64, false},
		{"a.b", 64, false},
		{"a b", 64, false},
		{"é", 64, false},
		{"abcd", 4, true},
		{"abcde", 4, false},
		{"a", 0, false},
	}
	for _, tt := range tests {
		if got := Valid(tt.name, tt.max); got != tt.want {
			t.Errorf("Valid(%q, %d) = %v, want %v", tt.name, tt.max, got, tt.want)
		}
	}
}

func FuzzBuild(f *testing.F) {
	f.Add("files", "read", uint8(0), "git", "read", uint8(1), "web", "read", uint8(2), "a", "", uint8(4), "x", 0)
	f.Add("a", "b__c", uint8(1), "b", "b__c", uint8(1), "a", "b.c", uint8(1), "c", "mcp__a__b__c", uint8(0x12), "find", 16)
	f.Add("a", "x", uint8(0x22), "b", "x", uint8(0x12), "c", "x", uint8(0x02), "a", "mcp__b__x", uint8(3), "x", 64)
	f.Add("s", "a.b", uint8(1), "s", "a_b", uint8(1), "t", "a_b_"+hash8("s", "a.b"), uint8(2), "s", "a b", uint8(5), "a_b", 20)
	f.Add("srv", long300, uint8(0), "srv", long300+"x", uint8(1), "srv-2", long80, uint8(2), "srv", long80, uint8(6), long80, 128)
	f.Fuzz(func(t *testing.T, s1, n1 string, m1 uint8, s2, n2 string, m2 uint8, s3, n3 string, m3 uint8, s4, n4 string, m4 uint8, rename string, maxLength int) {
		for _, s := range []string{s1, s2, s3, s4} {
			if !validServer(s) {
				return
			}
		}
		entry := func(s, n string, m uint8) Entry {
			e := Entry{Server: s, Name: n, Mode: []Mode{"", OnCollision, Never, Always}[m&3], Seq: uint64(m >> 4)}
			if m&4 != 0 {
				e.Rename = rename
			}
			return e
		}
		entries := []Entry{entry(s1, n1, m1), entry(s2, n2, m2), entry(s3, n3, m3), entry(s4, n4, m4)}
		opts := Options{MaxLength: maxLength}
		tab, problems := Build(opts, entries)
		checkTable(t, opts, tab)

		// Every entry is in the table, or left out with a reason.
		leftOut := make(map[Ref]bool)
		for _, p := range problems {
			if p.Exposed == "" {
				leftOut[p.Ref] = true
			}
		}
		never := make(map[Ref]bool)
		for _, e := range entries {
			if e.Mode == Never {
				never[Ref{e.Server, e.Name}] = true
			}
		}
		for _, e := range entries {
			r := Ref{e.Server, e.Name}
			_, in := tab.Exposed(r)
			switch {
			case in && leftOut[r]:
				t.Errorf("%v is in the table and reported left out", r)
			case !in && !leftOut[r]:
				t.Errorf("%v is missing without a problem", r)
			case !in && e.Name != "" && !never[r]:
				t.Errorf("%v (%s) is left out but not in never mode", r, e.Mode)
			}
		}
		// Problems are sorted, one per ref.
		if !slices.IsSortedFunc(problems, func(a, b Problem) int { return compareRefs(a.Ref, b.Ref) }) {
			t.Errorf("problems not sorted: %v", problems)
		}
		for i := 1; i < len(problems); i++ {
			if problems[i].Ref == problems[i-1].Ref {
				t.Errorf("two problems for %v", problems[i].Ref)
			}
		}
		for _, p := range problems {
			if e, ok := tab.Exposed(p.Ref); ok && e != p.Exposed {
				t.Errorf("problem says %v is %q, table says %q", p.Ref, p.Exposed, e)
			}
		}

		// Order does not matter.
		slices.Reverse(entries)
		entries[0], entries[2] = entries[2], entries[0]
		tab2, problems2 := Build(opts, entries)
		if diff := cmp.Diff(tab.byRef, tab2.byRef); diff != "" {
			t.Errorf("names depend on order (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(problems, problems2); diff != "" {
			t.Errorf("problems depend on order (-before +after):\n%s", diff)
		}
	})
}

// validServer is the config rule for server names: [a-z0-9-]{1,32} (which
// leaves no room for "__").
func validServer(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func BenchmarkBuild(b *testing.B) {
	const servers, tools = 100, 100
	entries := func(mode Mode, shared bool) []Entry {
		es := make([]Entry, 0, servers*tools)
		for s := range servers {
			for i := range tools {
				name := fmt.Sprintf("server%d_tool%d", s, i)
				if shared && i%2 == 0 { // half of each server's names clash with every other server
					name = fmt.Sprintf("tool%d", i)
				}
				es = append(es, Entry{Server: fmt.Sprintf("server-%d", s), Name: name, Mode: mode, Seq: uint64(s)})
			}
		}
		return es
	}
	for _, bc := range []struct {
		name    string
		entries []Entry
	}{
		{"always", entries(Always, false)},
		{"on_collision", entries(OnCollision, true)},
		{"never", entries(Never, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Build(Options{}, bc.entries)
			}
		})
	}
}
