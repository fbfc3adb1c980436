package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mediaStore is the media part of the contract. SQLite has none: on one
// replica the media store keeps its blobs in files (TestSQLite_NoMediaTable).
type mediaStore interface {
	PutMedia(context.Context, Media) (bool, MediaTotals, error)
	TouchMedia(ctx context.Context, id, mimeType string, at time.Time) (bool, error)
	UseMedia(ctx context.Context, id string, at time.Time) error
	GetMedia(context.Context, string) (Media, error)
	DeleteMedia(context.Context, string) (MediaTotals, error)
	DeleteExpiredMedia(context.Context, time.Time) (int, MediaTotals, error)
	TrimMedia(context.Context, int64) ([]string, MediaTotals, error)
	MediaTotals(context.Context) (MediaTotals, error)
}

var (
	_ mediaStore = (*Memory)(nil)
	_ mediaStore = (*Postgres)(nil)
)

// forEachMediaStore runs f on a new store of each driver that keeps media.
func forEachMediaStore(t *testing.T, f func(t *testing.T, s mediaStore)) {
	t.Helper()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			s, ok := d.open(t).(mediaStore)
			if !ok {
				if d.name != "sqlite" {
					t.Fatalf("driver %s keeps no media", d.name)
				}
				return // see TestSQLite_NoMediaTable
			}
			f(t, s)
		})
	}
}

var mediaT0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

func testMedia(id string, size int, at time.Time) Media {
	return Media{ID: id, Owner: "principal:alice", MIMEType: "image/png", StoredAt: at, LastUsed: at,
		Data: bytes.Repeat([]byte{id[0]}, size)}
}

func TestMedia_PutGet(t *testing.T) {
	forEachMediaStore(t, func(t *testing.T, s mediaStore) {
		ctx := t.Context()
		a := testMedia("a", 100, mediaT0)
		a.Data[0] = 0 // bytes, not text
		created, tot, err := s.PutMedia(ctx, a)
		if err != nil || !created || tot != (MediaTotals{Files: 1, Bytes: 100}) {
			t.Fatalf("PutMedia = %v, %+v, %v; want created, 1 file of 100 bytes", created, tot, err)
		}
		empty := Media{ID: "e", Owner: "", MIMEType: "text/plain", StoredAt: mediaT0, LastUsed: mediaT0, Data: []byte{}}
		if _, _, err := s.PutMedia(ctx, empty); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetMedia(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("GetMedia (-want +got):\n%s", diff)
		}
		if got, err := s.GetMedia(ctx, "e"); err != nil || got.Data == nil || len(got.Data) != 0 {
			t.Errorf("GetMedia of an empty blob = %+v, %v", got, err)
		}
		if _, err := s.GetMedia(ctx, "zz"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetMedia of an unknown id: %v, want ErrNotFound", err)
		}

		// Again with the same id: the bytes stay, the rest is refreshed.
		later := mediaT0.Add(time.Hour)
		again := a
		again.MIMEType, again.StoredAt, again.LastUsed = "image/jpeg", later, later
		again.Data = bytes.Repeat([]byte("x"), 100)
		created, tot, err = s.PutMedia(ctx, again)
		if err != nil || created || tot != (MediaTotals{Files: 2, Bytes: 100}) {
			t.Fatalf("second PutMedia = %v, %+v, %v; want not created, 2 files of 100 bytes", created, tot, err)
		}
		want := a
		want.MIMEType, want.StoredAt, want.LastUsed = "image/jpeg", later, later
		if got, _ := s.GetMedia(ctx, "a"); !cmp.Equal(want, got) {
			t.Errorf("after the second put (-want +got):\n%s", cmp.Diff(want, got))
		}
	})
}

func TestMedia_TouchUse(t *testing.T) {
	forEachMediaStore(t, func(t *testing.T, s mediaStore) {
		ctx := t.Context()
		if _, _, err := s.PutMedia(ctx, testMedia("a", 10, mediaT0)); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.TouchMedia(ctx, "b", "image/png", mediaT0); ok || err != nil {
			t.Errorf("TouchMedia of an unknown id = %v, %v", ok, err)
		}
		t1 := mediaT0.Add(time.Minute)
		if ok, err := s.TouchMedia(ctx, "a", "image/gif", t1); !ok || err != nil {
			t.Fatalf("TouchMedia = %v, %v", ok, err)
		}
		if err := s.UseMedia(ctx, "a", mediaT0); err != nil { // earlier: no change
			t.Fatal(err)
		}
		if err := s.UseMedia(ctx, "b", t1); err != nil {
			t.Errorf("UseMedia of an unknown id: %v", err)
		}
		got, err := s.GetMedia(ctx, "a")
		if err != nil || got.MIMEType != "image/gif" || !got.StoredAt.Equal(t1) || !got.LastUsed.Equal(t1) {
			t.Errorf("after TouchMedia: %+v, %v", got, err)
		}
		t2 := t1.Add(time.Minute)
		if err := s.UseMedia(ctx, "a", t2); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetMedia(ctx, "a"); !got.StoredAt.Equal(t1) || !got.LastUsed.Equal(t2) {
			t.Errorf("after UseMedia: stored %v, used %v; want %v, %v", got.StoredAt, got.LastUsed, t1, t2)
		}
	})
}

func TestMedia_Delete(t *testing.T) {
	forEachMediaStore(t, func(t *testing.T, s mediaStore) {
		setDeleteBatch(s.(contractStore), 2)
		ctx := t.Context()
		for i, id := range []string{"a", "b", "c", "d", "e"} {
			if _, _, err := s.PutMedia(ctx, testMedia(id, 10, mediaT0.Add(time.Duration(i)*time.Minute))); err != nil {
				t.Fatal(err)
			}
		}
		tot, err := s.DeleteMedia(ctx, "e")
		if err != nil || tot != (MediaTotals{Files: 4, Bytes: 40}) {
			t.Fatalf("DeleteMedia = %+v, %v", tot, err)
		}
		if tot, err := s.DeleteMedia(ctx, "e"); err != nil || tot.Files != 4 {
			t.Errorf("DeleteMedia again = %+v, %v", tot, err)
		}
		// Stored at or before the bound: a, b, c (the bound itself).
		n, tot, err := s.DeleteExpiredMedia(ctx, mediaT0.Add(2*time.Minute))
		if err != nil || n != 3 || tot != (MediaTotals{Files: 1, Bytes: 10}) {
			t.Fatalf("DeleteExpiredMedia = %d, %+v, %v; want 3 deleted, 1 left", n, tot, err)
		}
		for id, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true} {
			if _, err := s.GetMedia(ctx, id); (err == nil) != want {
				t.Errorf("GetMedia(%s): %v, want found %v", id, err, want)
			}
		}
		if tot, err := s.MediaTotals(ctx); err != nil || tot != (MediaTotals{Files: 1, Bytes: 10}) {
			t.Errorf("MediaTotals = %+v, %v", tot, err)
		}
	})
}

func TestMedia_Trim(t *testing.T) {
	tests := []struct {
		name     string
		maxBytes int64
		wantLeft []string
	}{
		{"under", 1000, []string{"a", "b", "c", "d", "e", "f"}},
		{"exactly", 600, []string{"a", "b", "c", "d", "e", "f"}},
		// c was used last, then b and a tie (by id), then f, e, d.
		{"one over", 599, []string{"a", "b", "c", "e", "f"}},
		{"half", 300, []string{"a", "b", "c"}},
		{"one left", 100, []string{"c"}},
		{"none", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachMediaStore(t, func(t *testing.T, s mediaStore) {
				setDeleteBatch(s.(contractStore), 2)
				ctx := t.Context()
				used := map[string]time.Duration{"d": 1, "e": 2, "f": 3, "a": 4, "b": 4, "c": 5}
				for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
					m := testMedia(id, 100, mediaT0)
					m.LastUsed = mediaT0.Add(used[id] * time.Minute)
					if _, _, err := s.PutMedia(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
				ids, tot, err := s.TrimMedia(ctx, tt.maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				if want := (MediaTotals{Files: int64(len(tt.wantLeft)), Bytes: 100 * int64(len(tt.wantLeft))}); tot != want {
					t.Errorf("TrimMedia totals %+v, want %+v", tot, want)
				}
				var wantGone []string
				for _, id := range []string{"d", "e", "f", "a", "b", "c"} { // in use order
					if !slices.Contains(tt.wantLeft, id) {
						wantGone = append(wantGone, id)
					}
				}
				if diff := cmp.Diff(wantGone, ids); diff != "" {
					t.Errorf("TrimMedia ids, in use order (-want +got):\n%s", diff)
				}
				var left []string
				for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
					if _, err := s.GetMedia(ctx, id); err == nil {
						left = append(left, id)
					}
				}
				if diff := cmp.Diff(tt.wantLeft, left); diff != "" {
					t.Errorf("left (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestMedia_Refused(t *testing.T) {
	defer func(n int) { maxMediaSize = n }(maxMediaSize)
	maxMediaSize = 64
	ok := testMedia("a", 64, mediaT0)
	with := func(f func(*Media)) Media { m := ok; f(&m); return m }
	tests := []struct {
		name string
		m    Media
		want string
	}{
		{"no id", with(func(m *Media) { m.ID = "" }), "media id"},
		{"id with a space", with(func(m *Media) { m.ID = "a b" }), "media id"},
		{"long id", with(func(m *Media) { m.ID = strings.Repeat("a", 129) }), "media id"},
		{"owner with NUL", with(func(m *Media) { m.Owner = "a\x00" }), "owner"},
		{"owner not UTF-8", with(func(m *Media) { m.Owner = "\xff" }), "owner"},
		{"no MIME type", with(func(m *Media) { m.MIMEType = "" }), "MIME type"},
		{"too large", with(func(m *Media) { m.Data = make([]byte, 65) }), "65 bytes, more than the store keeps in one blob (64)"},
		{"year 10000", with(func(m *Media) { m.StoredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), "StoredAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachMediaStore(t, func(t *testing.T, s mediaStore) {
				_, _, err := s.PutMedia(t.Context(), tt.m)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("PutMedia: %v, want an error with %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "principal:alice") {
					t.Errorf("error %q shows the owner", err)
				}
				if tot, err := s.MediaTotals(t.Context()); err != nil || tot != (MediaTotals{}) {
					t.Errorf("after a refused put: %+v, %v; want nothing stored", tot, err)
				}
			})
		})
	}
	forEachMediaStore(t, func(t *testing.T, s mediaStore) {
		if _, _, err := s.TrimMedia(t.Context(), -1); err == nil {
			t.Error("TrimMedia(-1) succeeded")
		}
		if _, err := s.GetMedia(t.Context(), ""); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("GetMedia(\"\"): %v, want a refusal", err)
		}
	})
}

// TestMedia_PostgresReplicas runs puts, deletes and trims of two stores
// over one database at once, as replicas do: the totals row stays the sum
// of the table, and trims that race evict no more than the budget asks.
func TestMedia_PostgresReplicas(t *testing.T) {
	a := openPostgresTest(t)
	b, err := OpenPostgres(t.Context(), PostgresOptions{DSN: a.pool.Config().ConnString()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	const budget = 2000
	var wg sync.WaitGroup
	for g, s := range []*Postgres{a, b, a, b} {
		wg.Go(func() {
			for i := range 40 {
				at := mediaT0.Add(time.Duration(g*100+i) * time.Second)
				m := testMedia(fmt.Sprintf("g%d-%d", g, i%30), 100, at) // some ids again
				if _, _, err := s.PutMedia(ctx, m); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := s.TrimMedia(ctx, budget); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					if _, _, err := s.DeleteExpiredMedia(ctx, mediaT0.Add(time.Duration(g*100)*time.Second)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	var sum MediaTotals
	if err := a.pool.QueryRow(ctx, `SELECT count(*), COALESCE(sum(size), 0) FROM media`).Scan(&sum.Files, &sum.Bytes); err != nil {
		t.Fatal(err)
	}
	tot, err := b.MediaTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tot != sum {
		t.Errorf("totals row %+v, the table holds %+v", tot, sum)
	}
	// Each put is followed by its trim, so the last trim saw the last put.
	if sum.Bytes > budget {
		t.Errorf("the table holds %d bytes, over the budget of %d", sum.Bytes, budget)
	}

	// Trims racing on one excess take turns: together they evict exactly
	// what one would.
	for i := range 30 {
		if _, _, err := a.PutMedia(ctx, testMedia(fmt.Sprintf("r%02d", i), 100, mediaT0.Add(time.Hour+time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	before, err := a.MediaTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	evicted := 0
	for _, s := range []*Postgres{a, b, a, b} {
		wg.Go(func() {
			ids, _, err := s.TrimMedia(ctx, budget)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			evicted += len(ids)
			mu.Unlock()
		})
	}
	wg.Wait()
	after, err := a.MediaTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Bytes != budget || evicted != int(before.Files-after.Files) || int64(evicted)*100 != before.Bytes-budget {
		t.Errorf("racing trims evicted %d of %+v, leaving %+v; want exactly %d bytes left", evicted, before, after, budget)
	}
}

func TestSQLite_NoMediaTable(t *testing.T) {
	s := openTest(t)
	var n int
	if err := s.w.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE name LIKE 'media%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("SQLite has %d media tables or indexes; its blobs belong in files", n)
	}
}
