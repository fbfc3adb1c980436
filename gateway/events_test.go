package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func TestEventsPage(t *testing.T) {
	s := newCore(t, upstreamtest.NewManager(), Options{})
	for i, ev := range []struct{ server, method string }{
		{"a", "event/x"}, {"b", "event/x"}, {"a", "event/y"}, {"a", "event/x"}, {"b", "event/y"},
	} {
		s.events.add(ev.server, ev.method, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
	}
	seqs := func(evs []Event) (out []uint64) {
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}
	tests := []struct {
		name           string
		server, method string
		after          uint64
		limit          int
		want           []uint64
		next           uint64
	}{
		{"all", "", "", 0, 10, []uint64{1, 2, 3, 4, 5}, 0},
		{"first page", "", "", 0, 2, []uint64{1, 2}, 2},
		{"second page", "", "", 2, 2, []uint64{3, 4}, 4},
		{"last page", "", "", 4, 2, []uint64{5}, 0},
		{"a server", "a", "", 0, 10, []uint64{1, 3, 4}, 0},
		{"a method", "", "event/y", 0, 10, []uint64{3, 5}, 0},
		{"both, paged", "a", "event/x", 0, 1, []uint64{1}, 1},
		{"past the end", "", "", 9, 10, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := s.EventsPage(tt.server, tt.method, tt.after, tt.limit)
			if diff := cmp.Diff(tt.want, seqs(got)); diff != "" || next != tt.next {
				t.Errorf("EventsPage = %v next %d, want %v next %d", seqs(got), next, tt.want, tt.next)
			}
		})
	}
}
