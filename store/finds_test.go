package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// findsStore is the search finds' part of the contract (contract_test.go).
type findsStore interface {
	PutFinds(ctx context.Context, f Finds, announce bool) error
	GetFinds(ctx context.Context, principal string) (Finds, error)
	DeleteExpiredFinds(ctx context.Context, now time.Time) (int, error)
}

// finds is principal's record of names, expiring at expires.
func finds(principal string, expires time.Time, names ...string) Finds {
	return Finds{Principal: principal, Names: names, Expires: expires}
}

// TestFinds puts each case's records in order, announcing every other
// one, on a new store whose clock reads base, then checks what GetFinds
// returns for each principal wanted and that each of gone has nothing.
func TestFinds(t *testing.T) {
	later := base.Add(time.Hour)
	longPrincipal := strings.Repeat("p", maxFindPrincipal)
	longName := strings.Repeat("n", maxFindName)
	manyNames := make([]string, MaxFindNames)
	for i := range manyNames {
		manyNames[i] = fmt.Sprintf("%04d%s", i, longName[4:])
	}
	lastYear := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	tests := []struct {
		name string
		puts []Finds
		want []Finds // what Get returns, by principal
		gone []string
	}{
		{
			name: "empty",
			gone: []string{"alice", "bob"},
		},
		{
			name: "put and get",
			puts: []Finds{finds("alice", later, "github__create_issue", "slack__post")},
			want: []Finds{finds("alice", later, "github__create_issue", "slack__post")},
			gone: []string{"bob", "Alice", "alice "},
		},
		{
			name: "a put replaces the names and the time",
			puts: []Finds{
				finds("alice", later, "a", "b"),
				finds("alice", later.Add(time.Minute), "c"),
			},
			want: []Finds{finds("alice", later.Add(time.Minute), "c")},
		},
		{
			name: "a later put may expire sooner",
			puts: []Finds{
				finds("alice", later, "a"),
				finds("alice", base.Add(time.Nanosecond), "a", "b"),
			},
			want: []Finds{finds("alice", base.Add(time.Nanosecond), "a", "b")},
		},
		{
			name: "principals are apart",
			puts: []Finds{
				finds("alice", later, "a"),
				finds("bob", later.Add(time.Minute), "b"),
				finds("alice@example.com", later, "c"),
			},
			want: []Finds{
				finds("alice", later, "a"),
				finds("bob", later.Add(time.Minute), "b"),
				finds("alice@example.com", later, "c"),
			},
			gone: []string{"carol", "ALICE"},
		},
		{
			name: "names keep their order, repeats and bytes",
			puts: []Finds{finds("alice", later, "z", "a", "m", "a", `q"uote\\`, "<&>", "é", "日本")},
			want: []Finds{finds("alice", later, "z", "a", "m", "a", `q"uote\\`, "<&>", "é", "日本")},
		},
		{
			name: "no names, nil or empty, read back as nil",
			puts: []Finds{
				{Principal: "alice", Expires: later},
				{Principal: "bob", Names: []string{}, Expires: later},
			},
			want: []Finds{{Principal: "alice", Expires: later}, {Principal: "bob", Expires: later}},
		},
		{
			name: "expires read back in UTC",
			puts: []Finds{finds("alice", later.In(cet), "a")},
			want: []Finds{finds("alice", later, "a")},
		},
		{
			name: "every field at its bound",
			puts: []Finds{finds(longPrincipal, lastYear, manyNames...), finds("é", later, "x")},
			want: []Finds{finds(longPrincipal, lastYear, manyNames...), finds("é", later, "x")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachStore(t, func() time.Time { return base.In(cet) }, func(t *testing.T, s contractStore) {
				ctx := t.Context()
				for i, f := range tt.puts {
					if err := s.PutFinds(ctx, f, i%2 == 0); err != nil {
						t.Fatalf("put %d: %v", i, err)
					}
				}
				for _, want := range tt.want {
					got, err := s.GetFinds(ctx, want.Principal)
					if err != nil {
						t.Errorf("GetFinds(%.20q): %v", want.Principal, err)
						continue
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("GetFinds(%.20q) (-want +got):\n%s", want.Principal, diff)
					}
					if got.Expires.Location() != time.UTC {
						t.Errorf("GetFinds(%.20q): Expires %v is in %v, want UTC", want.Principal, got.Expires, got.Expires.Location())
					}
				}
				for _, p := range tt.gone {
					got, err := s.GetFinds(ctx, p)
					if !errors.Is(err, ErrNotFound) || !cmp.Equal(Finds{}, got) {
						t.Errorf("GetFinds(%q) = %+v, %v; want ErrNotFound", p, got, err)
						continue
					}
					if err.Error() != "getting search finds: not found" {
						t.Errorf("GetFinds(%q) error %q, want %q", p, err, "getting search finds: not found")
					}
				}
			})
		})
	}
}

// TestFinds_Expiry: a record is hidden from the moment it expires by the
// store's clock, DeleteExpiredFinds (in batches) deletes what expired by
// the time it is given, and a put after expiry makes the principal's
// finds visible again.
func TestFinds_Expiry(t *testing.T) {
	var now time.Time
	forEachStore(t, func() time.Time { return now }, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		setDeleteBatch(s, 2)
		now = base
		puts := []Finds{
			finds("alice", at(1), "a"),
			finds("bob", at(2), "b"),
			finds("carol", at(2).Add(time.Nanosecond), "c"),
			finds("dave", at(60), "d"),
		}
		const expiredN = 2*2 + 1 // more than one batch
		for i := range expiredN {
			puts = append(puts, finds(fmt.Sprintf("old-%d", i), base.Add(-time.Duration(i+1)*time.Second), "x"))
		}
		for i, f := range puts {
			if err := s.PutFinds(ctx, f, true); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		// visible checks which principals GetFinds finds at now.
		visible := func(when string, want map[string]bool) {
			t.Helper()
			for p, ok := range want {
				_, err := s.GetFinds(ctx, p)
				switch {
				case ok && err != nil:
					t.Errorf("%s: GetFinds(%q) = %v, want the record", when, p, err)
				case !ok && !errors.Is(err, ErrNotFound):
					t.Errorf("%s: GetFinds(%q) = %v, want ErrNotFound", when, p, err)
				}
			}
		}
		visible("at base", map[string]bool{"alice": true, "bob": true, "carol": true, "dave": true, "old-0": false})
		now = at(1).Add(-time.Nanosecond)
		visible("just before alice's", map[string]bool{"alice": true})
		now = at(1)
		visible("at alice's", map[string]bool{"alice": false, "bob": true})
		now = at(2)
		visible("at bob's", map[string]bool{"alice": false, "bob": false, "carol": true, "dave": true})

		// Delete at bob's: alice, bob and the old ones; carol is a
		// nanosecond later.
		if n, err := s.DeleteExpiredFinds(ctx, at(2).In(cet)); err != nil || n != expiredN+2 {
			t.Errorf("DeleteExpiredFinds = %d, %v; want %d", n, err, expiredN+2)
		}
		if n, err := s.DeleteExpiredFinds(ctx, at(2)); err != nil || n != 0 {
			t.Errorf("DeleteExpiredFinds again = %d, %v; want 0", n, err)
		}
		// What reads no longer showed is gone from the table, and the rest
		// is kept.
		now = base
		visible("back at base", map[string]bool{"alice": false, "bob": false, "carol": true, "dave": true, "old-0": false})

		// A put brings a principal back.
		now = at(3)
		if err := s.PutFinds(ctx, finds("alice", at(4), "again"), false); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetFinds(ctx, "alice"); err != nil || !cmp.Equal(finds("alice", at(4), "again"), got) {
			t.Errorf("after a new put, GetFinds = %+v, %v", got, err)
		}
		if n, err := s.DeleteExpiredFinds(ctx, at(3)); err != nil || n != 1 {
			t.Errorf("DeleteExpiredFinds at carol's = %d, %v; want 1", n, err)
		}
	})
}

// TestFinds_OwnCopy: a store shares no memory with its callers.
func TestFinds_OwnCopy(t *testing.T) {
	forEachStore(t, func() time.Time { return base }, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		f := finds("alice", at(1), "a", "b")
		if err := s.PutFinds(ctx, f, true); err != nil {
			t.Fatal(err)
		}
		f.Names[0] = "changed by the caller"
		for range 2 {
			got, err := s.GetFinds(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal([]string{"a", "b"}, got.Names) {
				t.Fatalf("GetFinds names %q, want [a b]", got.Names)
			}
			got.Names[0] = "changed by a reader"
			got.Names = append(got.Names[:1], "appended")
		}
	})
}

// TestFinds_Invalid: every bad argument is refused with an error naming
// the field, never showing the principal or the names, and changes
// nothing stored.
func TestFinds_Invalid(t *testing.T) {
	const secret = "alice-secret@example.com"
	later := base.Add(time.Hour)
	var (
		longPrincipal = secret + strings.Repeat("p", maxFindPrincipal+1-len(secret))
		longName      = secret + strings.Repeat("n", maxFindName+1-len(secret))
		tooMany       = make([]string, MaxFindNames+1)
	)
	for i := range tooMany {
		tooMany[i] = secret
	}
	const (
		badPrincipal = "the Principal must be 1 to 1024 bytes of UTF-8 without NUL"
		badName      = "each of the Names must be 1 to 512 bytes of UTF-8 without NUL, and Names[1] is not"
	)
	put := func(f Finds) func(context.Context, findsStore) error {
		return func(ctx context.Context, s findsStore) error { return s.PutFinds(ctx, f, true) }
	}
	get := func(principal string) func(context.Context, findsStore) error {
		return func(ctx context.Context, s findsStore) error {
			_, err := s.GetFinds(ctx, principal)
			return err
		}
	}
	tests := []struct {
		name string
		call func(context.Context, findsStore) error
		want string
	}{
		{"put, no principal", put(finds("", later, secret)), "putting search finds: " + badPrincipal},
		{"put, principal too long", put(finds(longPrincipal, later, "a")), "putting search finds: " + badPrincipal},
		{"put, principal with NUL", put(finds(secret+"\x00", later, "a")), "putting search finds: " + badPrincipal},
		{"put, principal not UTF-8", put(finds(secret+"\xe9", later, "a")), "putting search finds: " + badPrincipal},
		{"put, too many names", put(finds(secret, later, tooMany...)), "putting search finds: the Names must be at most 1000, not 1001"},
		{"put, an empty name", put(finds(secret, later, secret, "")), "putting search finds: " + badName},
		{"put, a name too long", put(finds(secret, later, secret, longName)), "putting search finds: " + badName},
		{"put, a name with NUL", put(finds(secret, later, secret, secret+"\x00")), "putting search finds: " + badName},
		{"put, a name not UTF-8", put(finds(secret, later, secret, secret+"\xff")), "putting search finds: " + badName},
		{"put, no expiry", put(finds(secret, time.Time{}, secret)), "putting search finds: the Expires must be set"},
		{"put, expiry past year 9999", put(finds(secret, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), secret)),
			"putting search finds: Expires is outside years 0 to 9999"},
		{"put, expiry before year 0", put(finds(secret, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), secret)),
			"putting search finds: Expires is outside years 0 to 9999"},
		{"get, no principal", get(""), "getting search finds: " + badPrincipal},
		{"get, principal too long", get(longPrincipal), "getting search finds: " + badPrincipal},
		{"get, principal not UTF-8", get(secret + "\xe9"), "getting search finds: " + badPrincipal},
		{"delete expired, now past year 9999", func(ctx context.Context, s findsStore) error {
			_, err := s.DeleteExpiredFinds(ctx, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
			return err
		}, "deleting expired search finds: now is outside years 0 to 9999"},
	}
	forEachStore(t, func() time.Time { return base }, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		// What is stored before must be all there is after.
		kept := finds(secret, later, "kept")
		if err := s.PutFinds(ctx, kept, false); err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call(ctx, s)
				if err == nil {
					t.Fatal("the call succeeded")
				}
				if err.Error() != tt.want {
					t.Errorf("error %q,\nwant %q", err, tt.want)
				}
				if errors.Is(err, ErrNotFound) {
					t.Errorf("error %q is ErrNotFound; a bad argument is not a missing record", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a principal or a name", err)
				}
			})
		}
		if got, err := s.GetFinds(ctx, secret); err != nil || !cmp.Equal(kept, got) {
			t.Errorf("after the refusals, GetFinds = %+v, %v; want %+v", got, err, kept)
		}
	})
}

func TestFinds_ContextCancelled(t *testing.T) {
	forEachStore(t, func() time.Time { return base }, func(t *testing.T, s contractStore) {
		kept := finds("alice", at(1), "kept")
		if err := s.PutFinds(t.Context(), kept, false); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := map[string]func() error{
			"PutFinds": func() error { return s.PutFinds(ctx, finds("alice", at(2), "new"), true) },
			"GetFinds": func() error { _, err := s.GetFinds(ctx, "alice"); return err },
			"DeleteExpiredFinds": func() error {
				_, err := s.DeleteExpiredFinds(ctx, at(5))
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s = %v, want context.Canceled", name, err)
			}
		}
		if got, err := s.GetFinds(t.Context(), "alice"); err != nil || !cmp.Equal(kept, got) {
			t.Errorf("after cancelled calls, GetFinds = %+v, %v; want %+v", got, err, kept)
		}
	})
}

// TestFinds_Concurrent has goroutines put and read one principal's finds
// at once; run it with -race. Every read sees a record some put wrote,
// whole, and the last is some goroutine's last.
func TestFinds_Concurrent(t *testing.T) {
	forEachStore(t, func() time.Time { return base }, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		const goroutines, rounds = 8, 5
		names := func(g, r int) []string {
			out := make([]string, g+1)
			for i := range out {
				out[i] = fmt.Sprintf("g%d-r%d-%d", g, r, i)
			}
			return out
		}
		written, last := map[string]bool{}, map[string]bool{}
		for g := range goroutines {
			for r := range rounds {
				written[fmt.Sprint(names(g, r))] = true
			}
			last[fmt.Sprint(names(g, rounds-1))] = true
		}
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					if err := s.PutFinds(ctx, finds("shared", at(1), names(g, r)...), r%2 == 0); err != nil {
						errs <- err
						return
					}
					got, err := s.GetFinds(ctx, "shared")
					if err != nil {
						errs <- err
						return
					}
					if !written[fmt.Sprint(got.Names)] {
						errs <- fmt.Errorf("goroutine %d round %d: read names no put wrote: %q", g, r, got.Names)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got, err := s.GetFinds(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if !last[fmt.Sprint(got.Names)] {
			t.Errorf("the finds ended as %q, not the last put of any goroutine", got.Names)
		}
	})
}

// TestFinds_SQLiteUsesIndex checks SQLite's plan: DeleteExpiredFinds
// finds its rows through search_finds_expires.
func TestFinds_SQLiteUsesIndex(t *testing.T) {
	s := openTest(t)
	rows, err := s.r.QueryContext(t.Context(), `EXPLAIN QUERY PLAN DELETE FROM search_finds WHERE principal IN (
		SELECT principal FROM search_finds WHERE expires <= ? LIMIT ?)`, formatTime(base), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if joined := strings.Join(plan, "; "); !strings.Contains(joined, "search_finds_expires") {
		t.Errorf("plan %q does not use search_finds_expires", joined)
	}
}
