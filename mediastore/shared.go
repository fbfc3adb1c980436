package mediastore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Blobs is a database that holds the blobs in place of Options.Dir, which
// replicas share, so that any of them serves a media URL another minted.
// cmd/mcpgw wires the PostgreSQL store into it. Its methods are safe for
// concurrent use, by several processes too.
type Blobs interface {
	// PutBlob stores b. When a blob of b.ID is there already (one id is
	// one content), its bytes stay and its MIME type and times are set
	// from b; created is then false. It returns the totals after.
	PutBlob(ctx context.Context, b Blob) (created bool, t Totals, err error)
	// TouchBlob sets the MIME type of the blob of id and marks it stored
	// and used at at, without its bytes; false when there is none.
	TouchBlob(ctx context.Context, id, mimeType string, at time.Time) (bool, error)
	// UseBlob marks the blob of id used at at, unless it was used later.
	UseBlob(ctx context.Context, id string, at time.Time) error
	// GetBlob returns the blob of id, or ErrNotFound.
	GetBlob(ctx context.Context, id string) (Blob, error)
	// DeleteBlob deletes the blob of id, if there is one.
	DeleteBlob(ctx context.Context, id string) (Totals, error)
	// DeleteExpiredBlobs deletes the blobs stored at or before storedBy.
	// It and the other methods that return Totals read them cheaply (the
	// metrics take them from here, never a query per scrape).
	DeleteExpiredBlobs(ctx context.Context, storedBy time.Time) (int, Totals, error)
	// TrimBlobs deletes the least recently used blobs until the rest take
	// at most maxBytes, and returns their ids. Replicas trimming at once
	// together delete no more than one would.
	TrimBlobs(ctx context.Context, maxBytes int64) ([]string, Totals, error)
}

// Blob is a blob as Blobs keeps it. Its fields are those of store.Media,
// so that one converts to the other.
type Blob struct {
	ID       string
	Owner    string
	MIMEType string
	StoredAt time.Time
	LastUsed time.Time
	Data     []byte
}

// Totals are the count and bytes of all blobs in a Blobs.
type Totals struct {
	Files int64
	Bytes int64
}

const (
	// DefaultCacheBytes bounds a replica's cache of blobs read from Blobs
	// when Options.CacheBytes is zero: a few hot images served from
	// memory instead of the database.
	DefaultCacheBytes = 32 << 20
	// cacheTTL is how long a cached blob is served before it is read
	// again; it bounds how long a replica serves a blob another replica
	// evicted.
	cacheTTL = time.Minute
	// useEvery is how stale a blob's last use may get before a read
	// records it: a hot blob costs one write a minute, not one a read.
	useEvery = time.Minute
	// dbTimeout bounds one call to Blobs.
	dbTimeout = 10 * time.Second
)

// errUnavailable wraps a failure of Blobs, which is no answer about the
// blob: the Handler says 503 rather than 404.
var errUnavailable = errors.New("media store unavailable")

// shared is the part of a Store on Blobs: a byte-bounded cache of verified
// blobs and the totals last read. Its fields are guarded by Store.mu.
type shared struct {
	blobs       Blobs
	cache       *simplelru.LRU[string, cached]
	cacheBytes  int64 // held by cache
	cacheMax    int64 // all entries together
	cacheMaxOne int64 // one entry; larger blobs are not cached
	totals      Totals
}

// cached is a blob read from (or written to) Blobs and checked against
// its id, and when.
type cached struct {
	e       Entry
	data    []byte
	fetched time.Time
}

func newShared(b Blobs, cacheBytes int64) (*shared, error) {
	sh := &shared{blobs: b, cacheMax: max(cacheBytes, 0), cacheMaxOne: max(cacheBytes, 0) / 4}
	var err error
	sh.cache, err = simplelru.NewLRU(maxEntries, func(_ string, c cached) { sh.cacheBytes -= int64(len(c.data)) })
	return sh, err
}

// cacheAddLocked keeps a blob in the cache, evicting the least recently
// used until the cache fits its bound.
func (sh *shared) cacheAddLocked(e Entry, data []byte, now time.Time) {
	if int64(len(data)) > sh.cacheMaxOne {
		sh.cache.Remove(e.ID)
		return
	}
	sh.cache.Remove(e.ID)
	sh.cache.Add(e.ID, cached{e: e, data: data, fetched: now})
	sh.cacheBytes += int64(len(data))
	for sh.cacheBytes > sh.cacheMax {
		if _, _, ok := sh.cache.RemoveOldest(); !ok {
			return
		}
	}
}

func dbContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, dbTimeout)
}

// startShared reads the totals and deletes what expired while no replica
// ran, so that a store that cannot reach its database fails at New.
func (s *Store) startShared() error {
	ctx, cancel := dbContext(context.Background())
	defer cancel()
	if _, err := s.sweepShared(ctx); err != nil {
		return err
	}
	s.logger.Info("media store on the shared database", "files", s.db.totals.Files, "bytes", s.db.totals.Bytes)
	return nil
}

// putShared is Put on Blobs: a blob stored already is only touched, so
// its bytes cross the network once; a new one is inserted, then the
// budget trimmed.
func (s *Store) putShared(e Entry, data []byte, now time.Time) (Entry, error) {
	if s.isClosed() {
		return Entry{}, errClosed
	}
	ctx, cancel := dbContext(context.Background())
	defer cancel()
	e.Stored = now
	ok, err := s.db.blobs.TouchBlob(ctx, e.ID, e.MIMEType, now)
	if err != nil {
		return Entry{}, fmt.Errorf("mediastore: refreshing a blob: %w", err)
	}
	if ok {
		s.mu.Lock()
		if c, ok := s.db.cache.Peek(e.ID); ok {
			// The database has the blob: the cached bytes are good for
			// another cacheTTL.
			c.e, c.fetched = e, now
			s.db.cache.Add(e.ID, c)
		}
		s.mu.Unlock()
		return e, nil
	}
	created, t, err := s.db.blobs.PutBlob(ctx, Blob{ID: e.ID, Owner: e.Owner, MIMEType: e.MIMEType, StoredAt: now, LastUsed: now, Data: data})
	if err != nil {
		return Entry{}, fmt.Errorf("mediastore: writing a blob: %w", err)
	}
	s.mu.Lock()
	if created {
		s.stats.Stored++
	}
	s.db.totals = t
	s.db.cacheAddLocked(e, data, now)
	s.mu.Unlock()
	if t.Bytes > s.maxBytes {
		if err := s.trimShared(ctx); err != nil {
			// Stored all the same: the next put or sweep trims again.
			s.logger.Warn("trimming media failed", "err", err)
		}
	}
	return e, nil
}

// trimShared evicts from Blobs down to MaxBytes, and from the cache what
// it evicted.
func (s *Store) trimShared(ctx context.Context) error {
	ids, t, err := s.db.blobs.TrimBlobs(ctx, s.maxBytes)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.db.cache.Remove(id)
	}
	s.stats.Evictions += uint64(len(ids))
	if err != nil {
		return err
	}
	s.db.totals = t
	return nil
}

// openShared finds the blob of id with extension ext in the cache or in
// Blobs. A blob read from Blobs is served only if its bytes and owner hash
// to its id, as New checks a file: the database is not trusted to hand
// back what was stored. It is ErrNotFound when unknown, expired, of
// another extension or damaged, and wraps errUnavailable when Blobs fails.
func (s *Store) openShared(ctx context.Context, id, ext string, now time.Time) (Entry, []byte, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, nil, ErrNotFound
	}
	// Another extension may be a MIME type another replica stored since:
	// the database decides.
	if c, ok := s.db.cache.Get(id); ok && c.e.Ext == ext && now.Sub(c.fetched) < cacheTTL && !s.expiredAt(c.e, now) {
		s.mu.Unlock()
		return c.e, c.data, nil
	}
	s.mu.Unlock()

	ctx, cancel := dbContext(ctx)
	defer cancel()
	b, err := s.db.blobs.GetBlob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Entry{}, nil, ErrNotFound
	}
	if err != nil {
		return Entry{}, nil, fmt.Errorf("%w: reading a blob: %w", errUnavailable, err)
	}
	e := Entry{ID: id, Ext: ExtFor(b.MIMEType), MIMEType: b.MIMEType, Size: int64(len(b.Data)), Owner: b.Owner, Stored: b.StoredAt}
	if e.Ext != ext || s.expiredAt(e, now) {
		return Entry{}, nil, ErrNotFound
	}
	sum := sha256.Sum256(b.Data)
	if b.ID != id || cleanMIME(b.MIMEType) != b.MIMEType || !hmac.Equal([]byte(idFromDigest(s.idKey, b.Owner, sum[:])), []byte(id)) {
		s.logger.Warn("media blob does not match its id; deleting it", "name", e.Name())
		if _, err := s.db.blobs.DeleteBlob(ctx, id); err != nil {
			s.logger.Warn("deleting a damaged media blob failed", "name", e.Name(), "err", err)
		}
		s.mu.Lock()
		s.db.cache.Remove(id)
		s.mu.Unlock()
		return Entry{}, nil, ErrNotFound
	}
	if now.Sub(b.LastUsed) >= useEvery {
		if err := s.db.blobs.UseBlob(ctx, id, now); err != nil {
			s.logger.Debug("recording a media read failed", "name", e.Name(), "err", err)
		}
	}
	s.mu.Lock()
	if !s.closed {
		s.db.cacheAddLocked(e, b.Data, now)
	}
	s.mu.Unlock()
	return e, b.Data, nil
}

// sweepShared deletes the expired blobs of every replica (several
// replicas sweeping at once delete each blob once), drops expired and
// stale ones from the cache, refreshes the totals and trims if another
// replica left the table over the budget.
func (s *Store) sweepShared(ctx context.Context) (int, error) {
	now := s.now()
	n, t, err := s.db.blobs.DeleteExpiredBlobs(ctx, now.Add(-s.maxAge))
	if err != nil {
		return 0, fmt.Errorf("mediastore: deleting expired blobs: %w", err)
	}
	s.mu.Lock()
	s.stats.Expirations += uint64(n)
	s.db.totals = t
	for _, id := range s.db.cache.Keys() {
		if c, ok := s.db.cache.Peek(id); ok && (now.Sub(c.fetched) >= cacheTTL || s.expiredAt(c.e, now)) {
			s.db.cache.Remove(id)
		}
	}
	s.mu.Unlock()
	if t.Bytes > s.maxBytes {
		if err := s.trimShared(ctx); err != nil {
			return n, fmt.Errorf("mediastore: trimming: %w", err)
		}
	}
	return n, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
