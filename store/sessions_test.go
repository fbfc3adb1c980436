package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sessionStore is the session half of the contract (contract_test.go).
type sessionStore interface {
	PutSession(context.Context, Session) error
	GetSession(context.Context, string) (Session, error)
	TouchSessions(context.Context, []SessionTouch) error
	DeleteSessions(context.Context, ...string) error
	DeleteIdleSessions(context.Context, time.Time) (int, error)
	ListSessions(context.Context, time.Time, int) ([]Session, error)
}

func forEachSessionStore(t *testing.T, f func(t *testing.T, s sessionStore)) {
	t.Helper()
	forEachStore(t, nil, func(t *testing.T, s contractStore) { f(t, s) })
}

func session(id string, active time.Time) Session {
	return Session{
		ID:           id,
		Principal:    "alice",
		Version:      "2025-03-26",
		Capabilities: json.RawMessage(`{"sampling": {}, "x":"é"}`),
		ClientInfo:   json.RawMessage(`{"name":"c","version":"1"}`),
		CreatedAt:    active.Add(-time.Hour),
		LastActiveAt: active,
	}
}

func getSession(t *testing.T, s sessionStore, id string) (Session, bool) {
	t.Helper()
	sess, err := s.GetSession(t.Context(), id)
	if errors.Is(err, ErrNotFound) {
		return Session{}, false
	}
	if err != nil {
		t.Fatalf("GetSession(%s): %v", id, err)
	}
	return sess, true
}

func TestSessions(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600))
	forEachSessionStore(t, func(t *testing.T, s sessionStore) {
		ctx := t.Context()
		a, b := session("a", now), session("b", now)
		b.Capabilities, b.ClientInfo = nil, json.RawMessage{}
		for _, sess := range []Session{a, b} {
			if err := s.PutSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
		}

		// Round trip: UTC times to the nanosecond, JSON byte for byte,
		// empty JSON as nil.
		want := a
		want.CreatedAt, want.LastActiveAt = a.CreatedAt.UTC(), a.LastActiveAt.UTC()
		got, ok := getSession(t, s, "a")
		if !ok {
			t.Fatal("a: not found")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("a (-want +got):\n%s", diff)
		}
		got, _ = getSession(t, s, "b")
		if got.Capabilities != nil || got.ClientInfo != nil {
			t.Errorf("b: empty JSON read back as %q, %q", got.Capabilities, got.ClientInfo)
		}
		if _, ok := getSession(t, s, "nobody"); ok {
			t.Error("a session nobody stored was found")
		}

		// A touch only moves forward, and never makes a record.
		later := now.Add(time.Minute)
		if err := s.TouchSessions(ctx, []SessionTouch{{"a", later}, {"b", now.Add(-time.Minute)}, {"gone", later}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := getSession(t, s, "a"); !got.LastActiveAt.Equal(later) {
			t.Errorf("a after a touch: last active %v, want %v", got.LastActiveAt, later)
		}
		if got, _ := getSession(t, s, "b"); !got.LastActiveAt.Equal(now) {
			t.Errorf("b after a touch back in time: last active %v, want %v", got.LastActiveAt, now)
		}
		if _, ok := getSession(t, s, "gone"); ok {
			t.Error("a touch made a record")
		}

		// Idle ones go: b was last active at now, a a minute later.
		n, err := s.DeleteIdleSessions(ctx, now.Add(time.Second))
		if err != nil || n != 1 {
			t.Errorf("DeleteIdleSessions = %d, %v; want 1", n, err)
		}
		if _, ok := getSession(t, s, "b"); ok {
			t.Error("b outlived DeleteIdleSessions")
		}
		if _, ok := getSession(t, s, "a"); !ok {
			t.Error("a went with the idle sessions")
		}

		if err := s.DeleteSessions(ctx, "a", "nobody"); err != nil {
			t.Fatal(err)
		}
		if _, ok := getSession(t, s, "a"); ok {
			t.Error("a outlived DeleteSessions")
		}
		if err := s.TouchSessions(ctx, []SessionTouch{{"a", later.Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if _, ok := getSession(t, s, "a"); ok {
			t.Error("a touch brought a deleted session back")
		}
	})
}

// TestListSessions: the records active since a time, oldest created
// first and then by id, bounded, without the capabilities.
func TestListSessions(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := func(id string, created, active time.Duration) Session {
		sess := session(id, now.Add(active))
		sess.CreatedAt = now.Add(created)
		return sess
	}
	recs := []Session{
		rec("d", -time.Hour, 0),
		rec("c", -3*time.Hour, 0),
		rec("a", -3*time.Hour, 0),
		rec("b", -2*time.Hour, -2*time.Hour),
	}
	tests := []struct {
		name  string
		since time.Duration
		limit int
		want  []string
	}{
		{"active ones", -time.Hour, 10, []string{"a", "c", "d"}},
		{"bounded", -time.Hour, 2, []string{"a", "c"}},
		{"all", -2 * time.Hour, 10, []string{"a", "c", "b", "d"}},
		{"none", time.Hour, 10, nil},
	}
	forEachSessionStore(t, func(t *testing.T, s sessionStore) {
		for _, r := range recs {
			if err := s.PutSession(t.Context(), r); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range tests {
			got, err := s.ListSessions(t.Context(), now.Add(tt.since), tt.limit)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			var ids []string
			for _, sess := range got {
				ids = append(ids, sess.ID)
				if sess.Capabilities != nil || string(sess.ClientInfo) != `{"name":"c","version":"1"}` || sess.Principal != "alice" {
					t.Errorf("%s: %s listed as %+v; want it without its capabilities", tt.name, sess.ID, sess)
				}
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.name, diff)
			}
		}
		for _, bad := range []struct {
			since time.Time
			limit int
			want  string
		}{
			{now, 0, "limit must be positive"},
			{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), 1, "since is outside"},
		} {
			if _, err := s.ListSessions(t.Context(), bad.since, bad.limit); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("ListSessions(%v, %d) = %v, want an error with %q", bad.since, bad.limit, err, bad.want)
			}
		}
	})
}

func TestPutSession_Invalid(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		edit func(*Session)
		want string
	}{
		{"no id", func(s *Session) { s.ID = "" }, "no ID"},
		{"no version", func(s *Session) { s.Version = "" }, "no Version"},
		{"capabilities not JSON", func(s *Session) { s.Capabilities = json.RawMessage(`{`) }, "Capabilities are not a JSON object"},
		{"capabilities an array", func(s *Session) { s.Capabilities = json.RawMessage(`[]`) }, "Capabilities are not a JSON object"},
		{"client info not UTF-8", func(s *Session) { s.ClientInfo = json.RawMessage("{\"n\":\"\xff\"}") }, "ClientInfo are not a JSON object"},
		{"capabilities too large", func(s *Session) {
			s.Capabilities = json.RawMessage(`{"x":"` + strings.Repeat("a", MaxSessionJSON) + `"}`)
		}, "larger than 65536 bytes"},
		{"created out of range", func(s *Session) { s.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "CreatedAt is outside"},
	}
	for _, tt := range tests {
		forEachSessionStore(t, func(t *testing.T, s sessionStore) {
			sess := session("a", now)
			tt.edit(&sess)
			err := s.PutSession(t.Context(), sess)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: PutSession = %v, want an error with %q", tt.name, err, tt.want)
			}
			if _, ok := getSession(t, s, sess.ID); ok {
				t.Errorf("%s: stored anyway", tt.name)
			}
		})
	}
}

// TestSessions_Persist: a session record outlives the process that wrote
// it, which is the point of it.
func TestSessions_Persist(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.PutSession(ctx, session("a", now)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok := getSession(t, s, "a")
	if !ok || got.Principal != "alice" || !got.LastActiveAt.Equal(now) {
		t.Errorf("after reopening: %+v, %v", got, ok)
	}
}

func TestSessions_ContextCancelled(t *testing.T) {
	forEachSessionStore(t, func(t *testing.T, s sessionStore) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		now := time.Now()
		if err := s.PutSession(ctx, session("a", now)); !errors.Is(err, context.Canceled) {
			t.Errorf("PutSession = %v", err)
		}
		if _, err := s.GetSession(ctx, "a"); !errors.Is(err, context.Canceled) {
			t.Errorf("GetSession = %v", err)
		}
		if err := s.TouchSessions(ctx, []SessionTouch{{"a", now}}); !errors.Is(err, context.Canceled) {
			t.Errorf("TouchSessions = %v", err)
		}
		if err := s.DeleteSessions(ctx, "a"); !errors.Is(err, context.Canceled) {
			t.Errorf("DeleteSessions = %v", err)
		}
		if _, err := s.DeleteIdleSessions(ctx, now); !errors.Is(err, context.Canceled) {
			t.Errorf("DeleteIdleSessions = %v", err)
		}
		if _, err := s.ListSessions(ctx, now, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("ListSessions = %v", err)
		}
	})
}

// TestDeleteIdleSessions_Batches deletes more idle sessions than one
// DELETE takes.
func TestDeleteIdleSessions_Batches(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		setDeleteBatch(s, 2)
		now := time.Now()
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if err := s.PutSession(t.Context(), session(id, now)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutSession(t.Context(), session("f", now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		n, err := s.DeleteIdleSessions(t.Context(), now.Add(time.Minute))
		if err != nil || n != 5 {
			t.Fatalf("DeleteIdleSessions = %d, %v; want 5", n, err)
		}
		if _, ok := getSession(t, s, "f"); !ok {
			t.Error("the active session went too")
		}
	})
}
