package mediastore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgw/mcpgw/internal/pgtest"
	"github.com/mcpgw/mcpgw/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// mediaDB is what storeBlobs needs of a store: store.Postgres, or
// store.Memory.
type mediaDB interface {
	PutMedia(context.Context, store.Media) (bool, store.MediaTotals, error)
	TouchMedia(ctx context.Context, id, mimeType string, at time.Time) (bool, error)
	UseMedia(ctx context.Context, id string, at time.Time) error
	GetMedia(context.Context, string) (store.Media, error)
	DeleteMedia(context.Context, string) (store.MediaTotals, error)
	DeleteExpiredMedia(context.Context, time.Time) (int, store.MediaTotals, error)
	TrimMedia(context.Context, int64) ([]string, store.MediaTotals, error)
}

// storeBlobs is the tests' Blobs on the store, as cmd/mcpgw wires it.
type storeBlobs struct{ db mediaDB }

var _ Blobs = storeBlobs{}

func (b storeBlobs) PutBlob(ctx context.Context, bl Blob) (bool, Totals, error) {
	created, t, err := b.db.PutMedia(ctx, store.Media(bl))
	return created, Totals(t), err
}

func (b storeBlobs) TouchBlob(ctx context.Context, id, mimeType string, at time.Time) (bool, error) {
	return b.db.TouchMedia(ctx, id, mimeType, at)
}

func (b storeBlobs) UseBlob(ctx context.Context, id string, at time.Time) error {
	return b.db.UseMedia(ctx, id, at)
}

func (b storeBlobs) GetBlob(ctx context.Context, id string) (Blob, error) {
	m, err := b.db.GetMedia(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Blob{}, ErrNotFound
	}
	return Blob(m), err
}

func (b storeBlobs) DeleteBlob(ctx context.Context, id string) (Totals, error) {
	t, err := b.db.DeleteMedia(ctx, id)
	return Totals(t), err
}

func (b storeBlobs) DeleteExpiredBlobs(ctx context.Context, storedBy time.Time) (int, Totals, error) {
	n, t, err := b.db.DeleteExpiredMedia(ctx, storedBy)
	return n, Totals(t), err
}

func (b storeBlobs) TrimBlobs(ctx context.Context, maxBytes int64) ([]string, Totals, error) {
	ids, t, err := b.db.TrimMedia(ctx, maxBytes)
	return ids, Totals(t), err
}

// openPostgres opens the store on a new PostgreSQL database, closed at
// the end of the test.
func openPostgres(t testing.TB) *store.Postgres {
	t.Helper()
	db, err := store.OpenPostgres(t.Context(), store.PostgresOptions{DSN: pgtest.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// backends are where a Store keeps its blobs; each open fills in opts.
var backends = []struct {
	name string
	open func(t testing.TB, opts Options) *Store
}{
	{"disk", newTestStore},
	{"postgres", func(t testing.TB, opts Options) *Store {
		opts.Blobs = storeBlobs{openPostgres(t)}
		return newTestStore(t, opts)
	}},
}

// countingBlobs counts the calls that carry bytes, and fails GetBlob when
// told to.
type countingBlobs struct {
	Blobs
	mu         sync.Mutex
	puts, gets int
	getErr     error
}

func (b *countingBlobs) PutBlob(ctx context.Context, bl Blob) (bool, Totals, error) {
	b.mu.Lock()
	b.puts++
	b.mu.Unlock()
	return b.Blobs.PutBlob(ctx, bl)
}

func (b *countingBlobs) GetBlob(ctx context.Context, id string) (Blob, error) {
	b.mu.Lock()
	b.gets++
	err := b.getErr
	b.mu.Unlock()
	if err != nil {
		return Blob{}, err
	}
	return b.Blobs.GetBlob(ctx, id)
}

func (b *countingBlobs) counts() (puts, gets int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.puts, b.gets
}

func fetchURL(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestShared_Replicas runs two Stores over one database, as two replicas:
// each serves the other's blobs, and MaxBytes bounds both together.
func TestShared_Replicas(t *testing.T) {
	db := openPostgres(t)
	c := newClock()
	opts := Options{MaxBytes: 300, MaxAge: time.Hour, Now: c.Now, Blobs: storeBlobs{db}}
	a, b := newTestStore(t, opts), newTestStore(t, opts)
	srvA := httptest.NewServer(a.Handler(HandlerOptions{RequireSignature: true}))
	defer srvA.Close()
	srvB := httptest.NewServer(b.Handler(HandlerOptions{RequireSignature: true}))
	defer srvB.Close()
	blob := func(x byte) []byte { return bytes.Repeat([]byte{x}, 100) }

	ea := mustPut(t, a, "principal:alice", "image/png", blob('a'))
	c.Add(time.Second)
	eb := mustPut(t, b, "principal:bob", "image/png", blob('b'))
	for _, tt := range []struct {
		name string
		srv  *httptest.Server
		url  string
		want string
	}{
		{"a's blob on b", srvB, b.URL("", ea, time.Hour), string(blob('a'))},
		{"b's blob on a", srvA, a.URL("", eb, time.Hour), string(blob('b'))},
	} {
		if code, body := fetchURL(t, tt.srv, tt.url); code != 200 || body != tt.want {
			t.Errorf("%s: %d %q", tt.name, code, body)
		}
	}
	if _, data, err := b.ReadFor("principal:alice", ea.Name()); err != nil || !bytes.Equal(data, blob('a')) {
		t.Errorf("ReadFor of a's blob on b: %q, %v", data, err)
	}
	if _, _, err := b.ReadFor("principal:bob", ea.Name()); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadFor of alice's blob by bob: %v, want ErrNotFound", err)
	}

	// The budget is both replicas': a's third blob and b's fourth leave
	// room for three, and the least recently used (a's first) goes.
	c.Add(time.Second)
	ec := mustPut(t, a, "principal:alice", "image/png", blob('c'))
	c.Add(time.Second)
	ed := mustPut(t, b, "principal:bob", "image/png", blob('d'))
	tot, err := db.MediaTotals(t.Context())
	if err != nil || tot != (store.MediaTotals{Files: 3, Bytes: 300}) {
		t.Fatalf("the table holds %+v, %v; want 3 blobs of 100 bytes", tot, err)
	}
	if st := b.Stats(); st.Files != 3 || st.Bytes != 300 || st.Evictions != 1 || st.Stored != 2 {
		t.Errorf("b's Stats = %+v; want the table's 3 files, 300 bytes, b's own 2 stored and 1 eviction", st)
	}
	// b evicted it and forgot it; a serves it from its cache for at most
	// cacheTTL.
	if code, _ := fetchURL(t, srvB, b.URL("", ea, time.Hour)); code != 404 {
		t.Errorf("the evicted blob on b: %d, want 404", code)
	}
	c.Add(cacheTTL)
	if code, _ := fetchURL(t, srvA, a.URL("", ea, time.Hour)); code != 404 {
		t.Errorf("the evicted blob on a after cacheTTL: %d, want 404", code)
	}
	for _, e := range []Entry{eb, ec, ed} {
		for _, s := range []*Store{a, b} {
			if _, ok := s.Get(e.Name()); !ok {
				t.Errorf("%s is missing", e.Name())
			}
		}
	}

	// a sweeps what b stored: expiry is the table's too.
	c.Add(time.Hour)
	if n := a.sweep(); n != 3 {
		t.Errorf("a swept %d, want 3", n)
	}
	if st := a.Stats(); st.Files != 0 || st.Bytes != 0 || st.Expirations != 3 {
		t.Errorf("a's Stats after the sweep = %+v", st)
	}
}

// TestShared_PutAndCache pins what crosses the network: a blob's bytes
// once per content, a read once per cacheTTL, and the cache's bound.
func TestShared_PutAndCache(t *testing.T) {
	db := openPostgres(t)
	c := newClock()
	cb := &countingBlobs{Blobs: storeBlobs{db}}
	s := newTestStore(t, Options{MaxAge: time.Hour, Now: c.Now, Blobs: cb, CacheBytes: 400, MaxBlobBytes: 150})
	data := bytes.Repeat([]byte("x"), 100)

	e := mustPut(t, s, "o", "image/png", data)
	c.Add(time.Minute)
	again := mustPut(t, s, "o", "image/png", data)
	if puts, _ := cb.counts(); puts != 1 || !again.Stored.Equal(c.Now()) || again.ID != e.ID {
		t.Errorf("a second Put of the same content sent the bytes again (%d puts) or did not refresh: %+v", puts, again)
	}
	if st := s.Stats(); st.Stored != 1 || st.Files != 1 {
		t.Errorf("Stats = %+v; want one blob stored once", st)
	}
	// Read right after Put: from the cache.
	if _, _, err := s.ReadFor("o", e.Name()); err != nil {
		t.Fatal(err)
	}
	if _, gets := cb.counts(); gets != 0 {
		t.Errorf("%d reads from the database; want the cache to answer", gets)
	}
	c.Add(cacheTTL)
	for range 3 {
		if _, _, err := s.ReadFor("o", e.Name()); err != nil {
			t.Fatal(err)
		}
	}
	if _, gets := cb.counts(); gets != 1 {
		t.Errorf("%d reads from the database after cacheTTL; want 1", gets)
	}

	// Over MaxBlobBytes: refused, nothing written.
	if _, err := s.Put("o", "image/png", make([]byte, 151)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put of 151 bytes: %v, want ErrTooLarge", err)
	}
	if puts, _ := cb.counts(); puts != 1 {
		t.Errorf("the refused blob reached the database")
	}

	// The cache holds at most 400 bytes, and no blob over 100.
	for i := range 6 {
		mustPut(t, s, "o", "image/png", bytes.Repeat([]byte{byte(i)}, 100))
	}
	big := mustPut(t, s, "o", "image/png", bytes.Repeat([]byte("b"), 101))
	s.mu.Lock()
	held, n, bigCached := s.db.cacheBytes, s.db.cache.Len(), s.db.cache.Contains(big.ID)
	s.mu.Unlock()
	if held > 400 || held != int64(n)*100 || bigCached {
		t.Errorf("cache holds %d bytes in %d blobs, the big one: %v; want at most 400 bytes of 100-byte blobs", held, n, bigCached)
	}
}

// TestShared_Damaged changes a blob behind the store: the store serves
// nothing that does not hash to its id, and deletes it.
func TestShared_Damaged(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := store.OpenPostgres(t.Context(), store.PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, Options{Blobs: storeBlobs{db}, CacheBytes: -1})
	srv := httptest.NewServer(s.Handler(HandlerOptions{}))
	defer srv.Close()

	tests := []struct {
		name   string
		damage string
	}{
		{"bytes", `UPDATE media SET data = set_byte(data, 0, get_byte(data, 0) # 1) WHERE id = $1`},
		{"owner", `UPDATE media SET owner = 'principal:mallory' WHERE id = $1`},
		{"MIME type not canonical", `UPDATE media SET mime_type = 'image/PNG' WHERE id = $1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustPut(t, s, "principal:alice", "image/png", []byte("bytes of "+tt.name))
			if code, _ := fetchURL(t, srv, "/media/"+e.Name()); code != 200 {
				t.Fatalf("before the damage: %d", code)
			}
			if _, err := conn.Exec(t.Context(), tt.damage, e.ID); err != nil {
				t.Fatal(err)
			}
			if code, body := fetchURL(t, srv, "/media/"+e.Name()); code != 404 {
				t.Errorf("damaged blob: %d %q, want 404", code, body)
			}
			if _, err := db.GetMedia(t.Context(), e.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the damaged row: %v, want it deleted", err)
			}
			if _, err := s.Put("principal:alice", "image/png", []byte("bytes of "+tt.name)); err != nil {
				t.Fatal(err)
			}
			if code, body := fetchURL(t, srv, "/media/"+e.Name()); code != 200 || body != "bytes of "+tt.name {
				t.Errorf("stored again: %d %q", code, body)
			}
		})
	}
}

// TestShared_Unavailable: a database that fails is no answer about a blob,
// so neither a 404 nor ErrNotFound.
func TestShared_Unavailable(t *testing.T) {
	cb := &countingBlobs{Blobs: storeBlobs{openPostgres(t)}}
	s := newTestStore(t, Options{Blobs: cb, CacheBytes: -1})
	e := mustPut(t, s, "o", "image/png", []byte("png"))
	cb.mu.Lock()
	cb.getErr = errors.New("connection refused")
	cb.mu.Unlock()
	srv := httptest.NewServer(s.Handler(HandlerOptions{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/media/" + e.Name())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("status %d, headers %v; want 503 with Retry-After, no-store", resp.StatusCode, resp.Header)
	}
	if _, _, err := s.ReadFor("o", e.Name()); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("ReadFor: %v, want an error that is not ErrNotFound", err)
	}
}

func TestNew_SharedOptions(t *testing.T) {
	b := storeBlobs{store.NewMemory()}
	for _, tt := range []struct {
		name string
		opts Options
		want string
	}{
		{"both", Options{Dir: t.TempDir(), Blobs: b, Secret: testSecret}, "Dir and Blobs are both set"},
		{"negative blob cap", Options{Blobs: b, Secret: testSecret, MaxBlobBytes: -1}, "MaxBlobBytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestShared_OtherMIMEType: a replica that cached a blob under one MIME
// type serves it under the type another replica stored it with since.
func TestShared_OtherMIMEType(t *testing.T) {
	db := storeBlobs{openPostgres(t)}
	c := newClock()
	a := newTestStore(t, Options{Blobs: db, Now: c.Now})
	b := newTestStore(t, Options{Blobs: db, Now: c.Now})
	data := []byte("the same bytes")
	png := mustPut(t, a, "o", "image/png", data)
	jpg := mustPut(t, b, "o", "image/jpeg", data)
	if png.ID != jpg.ID || jpg.Ext != "jpg" {
		t.Fatalf("entries %+v and %+v; want one id", png, jpg)
	}
	if e, got, err := a.ReadFor("o", jpg.Name()); err != nil || !bytes.Equal(got, data) || e.MIMEType != "image/jpeg" {
		t.Errorf("a's ReadFor of the jpeg: %+v, %q, %v", e, got, err)
	}
}
