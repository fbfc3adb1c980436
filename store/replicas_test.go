package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// replicaStore is the replica registry of both implementations.
type replicaStore interface {
	PutReplica(context.Context, Replica) error
	ListReplicas(context.Context, time.Time) ([]Replica, error)
	DeleteReplica(context.Context, string, time.Time) error
}

func forEachReplicaStore(t *testing.T, f func(t *testing.T, s replicaStore)) {
	t.Helper()
	forEachStore(t, nil, func(t *testing.T, s contractStore) { f(t, s) })
}

// TestReplicas: heartbeats replace a replica's record, a listing has the
// ones seen since a time, and a delete takes the replica named and the
// ones that lapsed long ago.
func TestReplicas(t *testing.T) {
	forEachReplicaStore(t, func(t *testing.T, s replicaStore) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC)
		a := Replica{ID: "a", URL: "http://10.0.0.1:8080", StartedAt: t0, SeenAt: t0, Servers: json.RawMessage(`{"git":"running","web":"failed"}`)}
		b := Replica{ID: "b", URL: "http://10.0.0.2:8080", StartedAt: t0, SeenAt: t0.Add(time.Second)}
		old := Replica{ID: "old", URL: "http://10.0.0.3:8080", StartedAt: t0.Add(-time.Hour), SeenAt: t0.Add(-time.Hour)}
		for _, r := range []Replica{a, b, old} {
			if err := s.PutReplica(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		// a's heartbeat, from another time zone: stored in UTC.
		a.SeenAt = t0.Add(5 * time.Second).In(time.FixedZone("x", 3600))
		if err := s.PutReplica(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.SeenAt = a.SeenAt.UTC()
		got, err := s.ListReplicas(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Replica{a, b}, got); diff != "" {
			t.Errorf("replicas seen since t0 (-want +got):\n%s", diff)
		}
		if err := s.DeleteReplica(ctx, "b", t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err = s.ListReplicas(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Replica{a}, got); diff != "" {
			t.Errorf("after deleting b and the lapsed (-want +got):\n%s", diff)
		}
	})
}

func TestPutReplica_Invalid(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		r    Replica
		want string
	}{
		{"no id", Replica{URL: "http://a:1", StartedAt: now, SeenAt: now}, "ID must be"},
		{"no url", Replica{ID: "a", StartedAt: now, SeenAt: now}, "absolute http or https URL"},
		{"relative url", Replica{ID: "a", URL: "/mcp", StartedAt: now, SeenAt: now}, "absolute http or https URL"},
		{"other scheme", Replica{ID: "a", URL: "file:///etc", StartedAt: now, SeenAt: now}, "absolute http or https URL"},
		{"long id", Replica{ID: strings.Repeat("a", 513), URL: "http://a:1", StartedAt: now, SeenAt: now}, "ID must be"},
		{"servers not an object", Replica{ID: "a", URL: "http://a:1", StartedAt: now, SeenAt: now, Servers: json.RawMessage(`["x"]`)}, "servers must be a JSON object"},
		{"servers not JSON", Replica{ID: "a", URL: "http://a:1", StartedAt: now, SeenAt: now, Servers: json.RawMessage(`{"x"`)}, "servers must be a JSON object"},
		{"bad time", Replica{ID: "a", URL: "http://a:1", StartedAt: now, SeenAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "SeenAt is outside"},
	} {
		forEachReplicaStore(t, func(t *testing.T, s replicaStore) {
			t.Run(tc.name, func(t *testing.T) {
				err := s.PutReplica(context.Background(), tc.r)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("PutReplica(%+v) = %v, want an error saying %q", tc.r, err, tc.want)
				}
			})
		})
	}
}
