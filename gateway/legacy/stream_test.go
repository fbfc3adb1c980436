package legacy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEventID(t *testing.T) {
	tests := []struct {
		in       string
		tag      string
		num, seq uint64
		ok       bool
	}{
		{"0_1", "", 0, 1, true},
		{"12_345", "", 12, 345, true},
		{"18446744073709551615_0", "", 1<<64 - 1, 0, true},
		{"18446744073709551616_0", "", 0, 0, false},
		{"", "", 0, 0, false},
		{"_", "", 0, 0, false},
		{"1", "", 0, 0, false},
		{"1_", "", 0, 0, false},
		{"_1", "", 0, 0, false},
		{"1_2_3", "", 0, 0, false},
		{"01_2", "", 0, 0, false},
		{"+1_2", "", 0, 0, false},
		{"-1_2", "", 0, 0, false},
		{"1_2 ", "", 0, 0, false},
		{"a_b", "", 0, 0, false},
		// Ids of a session a process restored carry its tag.
		{"0a1b2c3d4e5f.3_4", "0a1b2c3d4e5f", 3, 4, true},
		{"f.0_1", "f", 0, 1, true},
		{"0123456789abcdef.1_1", "0123456789abcdef", 1, 1, true},
		{"0123456789abcdef0.1_1", "", 0, 0, false}, // too long
		{".1_1", "", 0, 0, false},
		{"A.1_1", "", 0, 0, false},
		{"g.1_1", "", 0, 0, false},
		{"a.b.1_1", "", 0, 0, false},
		{"a.", "", 0, 0, false},
		{"a.01_1", "", 0, 0, false},
	}
	for _, tt := range tests {
		tag, num, seq, ok := parseLastEventID(tt.in)
		if ok != tt.ok || (ok && (tag != tt.tag || num != tt.num || seq != tt.seq)) {
			t.Errorf("parseLastEventID(%q) = %q, %d, %d, %v; want %q, %d, %d, %v", tt.in, tag, num, seq, ok, tt.tag, tt.num, tt.seq, tt.ok)
		}
		if !strings.Contains(tt.in, ".") {
			num, seq, ok := parseEventID(tt.in)
			if ok != tt.ok || (ok && (num != tt.num || seq != tt.seq)) {
				t.Errorf("parseEventID(%q) = %d, %d, %v; want %d, %d, %v", tt.in, num, seq, ok, tt.num, tt.seq, tt.ok)
			}
		}
	}
}

// FuzzParseEventID checks that Last-Event-ID parsing never panics and
// accepts exactly what formatEventID makes.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"0_1", "12_345", "", "_", "01_2", "1_2_3", "18446744073709551616_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		num, seq, ok := parseEventID(s)
		if ok && formatEventID(num, seq) != s {
			t.Fatalf("parseEventID(%q) accepted a form formatEventID does not make", s)
		}
		if !ok && strings.Count(s, "_") == 1 {
			a, b, _ := strings.Cut(s, "_")
			if fmt.Sprint(parseUint(a))+"_"+fmt.Sprint(parseUint(b)) == s {
				t.Fatalf("parseEventID(%q) refused a canonical id", s)
			}
		}
	})
}

// FuzzParseLastEventID checks that a Last-Event-ID with or without a tag
// is accepted exactly when eventID makes it.
func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"0_1", "ab.0_1", "0123456789abcdef.1_2", ".1_1", "a.b.1_1", "A.1_1", "a."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, num, seq, ok := parseLastEventID(s)
		if ok && eventID(tag, num, seq) != s {
			t.Fatalf("parseLastEventID(%q) accepted a form eventID does not make", s)
		}
		if !ok {
			if tag, rest, found := strings.Cut(s, "."); found && tag != "" && len(tag) <= maxTag && strings.Trim(tag, "0123456789abcdef") == "" {
				if _, _, ok := parseEventID(rest); ok {
					t.Fatalf("parseLastEventID(%q) refused a tagged id", s)
				}
			}
		}
	})
}

func parseUint(s string) uint64 {
	n, ok := parseDecimal(s)
	if !ok {
		return 1<<64 - 1 // a value whose formatting differs from any refused s
	}
	return n
}

// TestStreamBuffer checks the bounds of a stream's buffer: the oldest
// events go first, but never a response, and the newest always stays; a
// reader behind the oldest event continues from it.
func TestStreamBuffer(t *testing.T) {
	h := &Handler{opts: Options{MaxStreamEvents: 3, MaxStreamBytes: 100}}
	h.logger = discardLogger()
	tests := []struct {
		name   string
		sizes  []int  // message sizes appended in order
		kinds  string // per message, 'r' for a response; others are not
		wantSq []uint64
	}{
		{"under the bounds", []int{1, 1}, "", []uint64{1, 2}},
		{"event count", []int{1, 1, 1, 1, 1}, "", []uint64{3, 4, 5}},
		{"bytes", []int{30, 30, 30}, "", []uint64{2, 3}},
		{"a big last event stays alone", []int{1, 1, 500}, "", []uint64{3}},
		{"responses stay", []int{1, 1, 1, 1, 1}, "rrrrn", []uint64{1, 2, 3, 4, 5}},
		{"notifications between responses go", []int{1, 1, 1, 1, 1}, "nrnrn", []uint64{2, 4, 5}},
		{"bytes: a response stays", []int{30, 30, 30}, "rnn", []uint64{1, 3}},
		{"big responses stay", []int{500, 500, 1}, "rrn", []uint64{1, 2, 3}},
		{"the newest stays among responses", []int{1, 1, 1, 1}, "rrrn", []uint64{1, 2, 3, 4}},
		{"bytes: over with responses, the notifications between go", []int{500, 1, 1}, "rnn", []uint64{1, 3}},
		{"count: responses fill it, older notifications go", []int{1, 1, 1, 1, 1, 1}, "rrrnnn", []uint64{1, 2, 3, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &stream{num: 4}
			for i, n := range tt.sizes {
				msg := []byte(strings.Repeat("x", n))
				if i < len(tt.kinds) && tt.kinds[i] == 'r' {
					h.appendResponseLocked(st, msg)
				} else {
					h.appendLocked(st, msg)
				}
			}
			var got []uint64
			var bytes int64
			for _, e := range st.events {
				got = append(got, e.seq)
				bytes += int64(len(e.block))
			}
			if diff := cmp.Diff(tt.wantSq, got); diff != "" {
				t.Errorf("buffered seqs (-want +got):\n%s", diff)
			}
			if bytes != st.bytes {
				t.Errorf("bytes %d, counted %d", st.bytes, bytes)
			}
			if evs := st.afterLocked(0); len(evs) != len(got) || evs[0].seq != got[0] {
				t.Errorf("after 0: %v", evs)
			}
			if evs := st.afterLocked(st.lastSeq); len(evs) != 0 {
				t.Errorf("after the last: %v", evs)
			}
			if !strings.HasPrefix(string(st.events[len(st.events)-1].block), fmt.Sprintf("id: 4_%d\n", st.lastSeq)) {
				t.Errorf("block %q", st.events[len(st.events)-1].block)
			}
		})
	}
	st := &stream{num: 1}
	st.finish()
	h.appendLocked(st, []byte("x"))
	if len(st.events) != 0 {
		t.Error("appended to a finished stream")
	}
}
