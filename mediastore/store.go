package mediastore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

const (
	// DefaultMaxBytes is the byte bound of a store whose Options.MaxBytes is zero.
	DefaultMaxBytes = 1 << 30 // 1 GiB
	// DefaultMaxAge is how long a blob lives when Options.MaxAge is zero.
	DefaultMaxAge = 24 * time.Hour
	// DefaultMinBytes is the size up to which a blob stays inline when
	// Rewrite.MinBytes is zero.
	DefaultMinBytes = 4096

	defaultSweepInterval = time.Minute
	// maxEntries bounds the number of blobs, whatever their size, so that
	// the index stays bounded even when MaxBytes is huge.
	maxEntries   = 1 << 20
	minSecretLen = 32
	// maxMIMELen bounds a stored MIME type: it comes from an upstream and
	// goes into the file header and a response header.
	maxMIMELen = 255
	// maxOwnerLen bounds an owner, which goes into the file header.
	maxOwnerLen = 4096
	// tmpPrefix starts the name of a file being written. ParseName never
	// accepts it, and New removes such leftovers.
	tmpPrefix = ".tmp-"
)

var (
	// ErrNotFound is returned by ReadFor for media that is unknown, expired
	// or another owner's. It never says which: that would let an owner
	// probe for the media of others.
	ErrNotFound = errors.New("media not found")
	// ErrTooLarge is returned by Put for a blob larger than the store's
	// MaxBytes or MaxBlobBytes.
	ErrTooLarge = errors.New("media larger than the store")

	errClosed = errors.New("media store closed")
)

// Options configures a Store. Secret and one of Dir and Blobs are
// required; every other field has a usable zero value.
type Options struct {
	// Dir is the directory the blobs live in. It is created, mode 0700, if
	// missing. One Store owns it: New removes every file in it that is not
	// a valid blob (subdirectories are left alone). Required unless Blobs
	// is set.
	Dir string
	// Blobs, instead of Dir, is a database that keeps the blobs for
	// several replicas (see the package doc). MaxBytes then bounds the
	// blobs of all of them together.
	Blobs Blobs
	// CacheBytes bounds the blobs a Store on Blobs keeps in memory (none
	// larger than a quarter of it). If zero, DefaultCacheBytes; negative:
	// no cache.
	CacheBytes int64
	// MaxBlobBytes bounds one blob: a larger one is ErrTooLarge. If zero,
	// MaxBytes. Negative is an error.
	MaxBlobBytes int64
	// MaxBytes bounds the bytes of all blobs together; when a Put goes over
	// it, the least recently used blobs are removed. If zero,
	// DefaultMaxBytes is used. Negative is an error.
	MaxBytes int64
	// MaxAge is how long a blob lives after it was last stored; after that
	// it is gone for Get, ReadFor and the Handler, and the sweeper deletes
	// it. If zero, DefaultMaxAge is used. Negative is an error.
	MaxAge time.Duration
	// Secret keys media ids and URL signatures, through two subkeys:
	// HMAC-SHA256(Secret, "mcpgw media id") and HMAC-SHA256(Secret,
	// "mcpgw media url"). It must be at least 32 bytes. Changing it
	// revokes every URL given out, and New then drops the old blobs.
	// Required.
	Secret []byte
	// Logger receives the store's warnings and debug messages. If nil,
	// nothing is logged.
	Logger *slog.Logger
	// Now tells the time. If nil, time.Now is used; tests set it.
	Now func() time.Time
	// SweepInterval is how often expired blobs are deleted from disk.
	// If zero, one minute. Negative is an error.
	SweepInterval time.Duration
}

// Store is a bounded, expiring store of blobs on disk, keyed by owner and
// content. Its methods are safe for concurrent use.
//
// One mutex guards the index, the byte total and the counters, and every
// change of a final file name (the rename that commits a Put, the removal
// of an evicted or expired blob) happens under it, so an indexed entry
// always has its file and a file opened under the lock is the indexed
// blob's. Blob bytes are written, read and hashed outside the lock.
type Store struct {
	root       *os.Root // nil on Blobs
	db         *shared  // nil on Dir
	maxBytes   int64
	maxBlob    int64
	maxAge     time.Duration
	sweepEvery time.Duration
	idKey      []byte
	urlKey     []byte
	logger     *slog.Logger
	now        func() time.Time

	mu     sync.Mutex
	index  *simplelru.LRU[string, entry] // by id; its callback drops the file and the bytes
	bytes  int64
	stats  Stats // Stored, Evictions, Expirations
	closed bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Entry describes a stored blob.
type Entry struct {
	// ID is 52 characters of lowercase base32 (a-z2-7): the first 32 bytes
	// of HMAC-SHA256(id key, Owner + "\x00" + sha256(data)), the digest
	// raw.
	ID string
	// Ext is the file extension, ExtFor(MIMEType).
	Ext string
	// MIMEType is the type the blob is served with: the one given to Put,
	// in canonical form (application/octet-stream when missing or
	// unparsable).
	MIMEType string
	// Size is the length of the blob in bytes.
	Size int64
	// Owner is opaque to the store; the gateway passes "principal:<name>"
	// or "session:<id>".
	Owner string
	// Stored is when the blob was last stored; it expires MaxAge later.
	Stored time.Time
}

// Name returns the entry's file name, the last element of its URL:
// ID + "." + Ext.
func (e Entry) Name() string { return e.ID + "." + e.Ext }

// entry is an index entry: the Entry and where its bytes start in its
// file, after the header.
type entry struct {
	Entry
	off int64
}

// Stats are counters of a Store.
type Stats struct {
	Bytes       int64  // bytes held now
	Files       int    // blobs held now
	Stored      uint64 // blobs written since start
	Evictions   uint64 // blobs removed to stay under MaxBytes
	Expirations uint64 // blobs removed for age
}

// New opens the store in opts.Dir: it indexes the blobs left there by an
// earlier run (see the package doc), removes everything else, and starts
// the sweeper of expired blobs, which Close stops.
func New(opts Options) (*Store, error) {
	switch {
	case opts.Dir == "" && opts.Blobs == nil:
		return nil, errors.New("mediastore: Dir is required")
	case opts.Dir != "" && opts.Blobs != nil:
		return nil, errors.New("mediastore: Dir and Blobs are both set; the blobs live in one of them")
	case opts.MaxBlobBytes < 0:
		return nil, errors.New("mediastore: MaxBlobBytes is negative")
	}
	if len(opts.Secret) < minSecretLen {
		return nil, fmt.Errorf("mediastore: Secret is %d bytes, it must be at least %d", len(opts.Secret), minSecretLen)
	}
	if opts.MaxBytes < 0 {
		return nil, errors.New("mediastore: MaxBytes is negative")
	}
	if opts.MaxAge < 0 {
		return nil, errors.New("mediastore: MaxAge is negative")
	}
	if opts.SweepInterval < 0 {
		return nil, errors.New("mediastore: SweepInterval is negative")
	}
	s := &Store{
		maxBytes:   opts.MaxBytes,
		maxAge:     opts.MaxAge,
		sweepEvery: opts.SweepInterval,
		idKey:      subkey(opts.Secret, "mcpgw media id"),
		urlKey:     subkey(opts.Secret, "mcpgw media url"),
		logger:     opts.Logger,
		now:        opts.Now,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	s.maxBlob = s.maxBytes
	if opts.MaxBlobBytes > 0 {
		s.maxBlob = min(s.maxBlob, opts.MaxBlobBytes)
	}
	if s.maxAge == 0 {
		s.maxAge = DefaultMaxAge
	}
	if s.sweepEvery == 0 {
		s.sweepEvery = defaultSweepInterval
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.Blobs != nil {
		cache := opts.CacheBytes
		if cache == 0 {
			cache = DefaultCacheBytes
		}
		var err error
		if s.db, err = newShared(opts.Blobs, cache); err != nil {
			return nil, err
		}
		if err := s.startShared(); err != nil {
			return nil, err
		}
		go s.sweepLoop()
		return s, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("mediastore: creating its directory: %w", err)
	}
	root, err := os.OpenRoot(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("mediastore: opening its directory: %w", err)
	}
	s.root = root
	s.index, err = simplelru.NewLRU(maxEntries, s.dropped)
	if err != nil {
		root.Close()
		return nil, err
	}
	if err := s.load(); err != nil {
		root.Close()
		return nil, fmt.Errorf("mediastore: indexing %s: %w", opts.Dir, err)
	}
	go s.sweepLoop()
	return s, nil
}

func subkey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, purpose)
	return m.Sum(nil)
}

// Close stops the sweeper and releases the directory. It is idempotent.
// Put fails after Close, and the Handler answers 404; stop serving /media
// before closing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.mu.Lock()
		s.closed = true
		if s.db != nil {
			s.db.cache.Purge()
		}
		s.mu.Unlock()
		if s.root != nil {
			s.closeErr = s.root.Close()
		}
	})
	return s.closeErr
}

// dropped is the index's eviction callback, called under s.mu for every
// entry leaving the index (evicted, expired, replaced): it gives back the
// bytes and removes the file. The caller counts the reason.
func (s *Store) dropped(_ string, e entry) {
	s.bytes -= e.Size
	if err := s.root.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Warn("removing media file failed", "name", e.Name(), "err", err)
	}
}

func (s *Store) expired(e entry, now time.Time) bool { return s.expiredAt(e.Entry, now) }

func (s *Store) expiredAt(e Entry, now time.Time) bool {
	return !now.Before(e.Stored.Add(s.maxAge))
}

// trimLocked evicts the least recently used blobs until the total fits.
func (s *Store) trimLocked() {
	for s.bytes > s.maxBytes {
		if _, _, ok := s.index.RemoveOldest(); !ok {
			return
		}
		s.stats.Evictions++
	}
}

// Put stores data for owner and returns its entry. The same owner storing
// the same bytes with the same MIME type gets the same entry back: that
// refreshes its Stored time and recency and writes no bytes. (The same
// bytes with another MIME type replace the stored blob.) A blob larger
// than MaxBytes or MaxBlobBytes is ErrTooLarge, and nothing is written;
// other blobs evict the least recently used ones until the total fits.
func (s *Store) Put(owner, mimeType string, data []byte) (Entry, error) {
	if int64(len(data)) > s.maxBlob {
		return Entry{}, fmt.Errorf("%w: %d bytes, the store keeps %d in one blob", ErrTooLarge, len(data), s.maxBlob)
	}
	if len(owner) > maxOwnerLen || !utf8.ValidString(owner) {
		return Entry{}, errors.New("mediastore: owner is too long or not UTF-8")
	}
	mimeType = cleanMIME(mimeType)
	e := entry{Entry: Entry{
		ID:       mediaID(s.idKey, owner, data),
		Ext:      ExtFor(mimeType),
		MIMEType: mimeType,
		Size:     int64(len(data)),
		Owner:    owner,
	}}
	now := s.now()
	if s.db != nil {
		return s.putShared(e.Entry, data, now)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, errClosed
	}
	got, ok := s.refreshLocked(e, now)
	s.mu.Unlock()
	if ok {
		s.touch(got.Name(), now)
		return got, nil
	}

	e.Stored = now
	hdr, err := encodeHeader(e.Entry)
	if err != nil {
		return Entry{}, err
	}
	e.off = int64(len(hdr))
	tmp, err := s.writeTemp(hdr, data, now)
	if err != nil {
		return Entry{}, fmt.Errorf("mediastore: writing a blob: %w", err)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.removeTemp(tmp)
		return Entry{}, errClosed
	}
	// Another Put of the same content may have committed meanwhile: then
	// this one only refreshes, and its bytes are counted once.
	if got, ok := s.refreshLocked(e, now); ok {
		s.mu.Unlock()
		s.removeTemp(tmp)
		s.touch(got.Name(), now)
		return got, nil
	}
	if old, ok := s.index.Peek(e.ID); ok {
		// Expired, or the same bytes with another MIME type.
		s.index.Remove(e.ID)
		if s.expired(old, now) {
			s.stats.Expirations++
		}
	}
	if err := s.root.Rename(tmp, e.Name()); err != nil {
		s.mu.Unlock()
		s.removeTemp(tmp)
		return Entry{}, fmt.Errorf("mediastore: committing a blob: %w", err)
	}
	if s.index.Add(e.ID, e) {
		s.stats.Evictions++
	}
	s.bytes += e.Size
	s.stats.Stored++
	s.trimLocked()
	s.mu.Unlock()
	return e.Entry, nil
}

// refreshLocked finds e's blob already stored, unexpired and of the same
// MIME type, and marks it stored now and most recently used.
func (s *Store) refreshLocked(e entry, now time.Time) (Entry, bool) {
	old, ok := s.index.Peek(e.ID)
	if !ok || old.MIMEType != e.MIMEType || s.expired(old, now) {
		return Entry{}, false
	}
	old.Stored = now
	s.index.Add(e.ID, old)
	return old.Entry, true
}

// touch records a refresh in the file's modification time, so that New
// gives the blob its full age again after a restart. It races harmlessly
// with removal: New takes the later of the header's time and this one.
func (s *Store) touch(name string, now time.Time) {
	if err := s.root.Chtimes(name, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Debug("refreshing media file time failed", "name", name, "err", err)
	}
}

// writeTemp writes header and data to a new temporary file in the
// directory, with mode 0600 and modification time now, and returns its
// name.
func (s *Store) writeTemp(hdr, data []byte, now time.Time) (name string, err error) {
	var rnd [12]byte
	rand.Read(rnd[:])
	name = tmpPrefix + hex.EncodeToString(rnd[:])
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			s.removeTemp(name)
		}
	}()
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := s.root.Chtimes(name, now, now); err != nil {
		return "", err
	}
	return name, nil
}

func (s *Store) removeTemp(name string) {
	if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Warn("removing temporary media file failed", "name", name, "err", err)
	}
}

// cleanMIME returns mimeType in canonical form, or
// application/octet-stream when it is missing, unparsable or too long.
func cleanMIME(mimeType string) string {
	const fallback = "application/octet-stream"
	if mimeType == "" || len(mimeType) > maxMIMELen {
		return fallback
	}
	t, params, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return fallback
	}
	out := mime.FormatMediaType(t, params)
	if out == "" || len(out) > maxMIMELen {
		return fallback
	}
	return out
}

// lookupLocked returns the unexpired entry of id with extension ext and
// marks it most recently used. An expired one is removed.
func (s *Store) lookupLocked(id, ext string, now time.Time) (entry, bool) {
	e, ok := s.index.Peek(id)
	if !ok || e.Ext != ext {
		return entry{}, false
	}
	if s.expired(e, now) {
		s.index.Remove(id)
		s.stats.Expirations++
		return entry{}, false
	}
	s.index.Get(id)
	return e, true
}

// Get returns the entry of a file name, "<id>.<ext>", and marks it most
// recently used. It is false when the name is malformed, unknown, expired
// or has another extension than the entry's.
func (s *Store) Get(name string) (Entry, bool) {
	id, ext, err := ParseName(name)
	if err != nil {
		return Entry{}, false
	}
	now := s.now()
	if s.db != nil {
		e, _, err := s.openShared(context.Background(), id, ext, now)
		return e, err == nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookupLocked(id, ext, now)
	return e.Entry, ok
}

// blob is an open blob: its entry and its bytes, to be closed after.
type blob struct {
	Entry
	r     *io.SectionReader
	close func() error
}

// open finds the blob of name, for owner unless anyOwner. It is
// ErrNotFound when the name is malformed, unknown, expired or another
// owner's; other errors say the store could not tell.
func (s *Store) open(ctx context.Context, name, owner string, anyOwner bool) (blob, error) {
	id, ext, err := ParseName(name)
	if err != nil {
		return blob{}, ErrNotFound
	}
	now := s.now()
	if s.db == nil {
		e, f, err := s.openFile(id, ext, owner, anyOwner, now)
		if err != nil {
			return blob{}, err
		}
		return blob{Entry: e.Entry, r: io.NewSectionReader(f, e.off, e.Size), close: f.Close}, nil
	}
	e, data, err := s.openShared(ctx, id, ext, now)
	if err != nil {
		return blob{}, err
	}
	if !anyOwner && e.Owner != owner {
		return blob{}, ErrNotFound
	}
	return blob{Entry: e, r: io.NewSectionReader(bytes.NewReader(data), 0, e.Size), close: func() error { return nil }}, nil
}

// openFile finds the blob of id and ext on disk and opens its file. The
// file is opened under the lock, so it is the indexed blob's even if the
// blob is evicted right after: its bytes stay readable through the open
// file.
func (s *Store) openFile(id, ext, owner string, anyOwner bool, now time.Time) (entry, *os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return entry{}, nil, ErrNotFound
	}
	if !anyOwner {
		if e, ok := s.index.Peek(id); !ok || e.Owner != owner {
			return entry{}, nil, ErrNotFound
		}
	}
	e, ok := s.lookupLocked(id, ext, now)
	if !ok {
		return entry{}, nil, ErrNotFound
	}
	f, err := s.root.Open(e.Name())
	if err == nil {
		var fi os.FileInfo
		fi, err = f.Stat()
		if err == nil && (!fi.Mode().IsRegular() || fi.Size() != e.off+e.Size) {
			err = errors.New("file changed behind the store")
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		// Somebody else touched the directory: forget the blob.
		s.logger.Warn("media file unreadable; dropping it", "name", e.Name(), "err", err)
		s.index.Remove(id)
		return entry{}, nil, ErrNotFound
	}
	return e, f, nil
}

// ReadFor returns the entry and the bytes of name ("<id>.<ext>") when
// owner stored it, for resources/read of a media URL. It is ErrNotFound
// when the name is unknown, expired or another owner's.
func (s *Store) ReadFor(owner, name string) (Entry, []byte, error) {
	b, err := s.open(context.Background(), name, owner, false)
	if err != nil {
		return Entry{}, nil, err
	}
	defer b.close()
	buf := make([]byte, b.Size)
	if _, err := b.r.ReadAt(buf, 0); err != nil && !(err == io.EOF && b.Size == 0) {
		return Entry{}, nil, fmt.Errorf("mediastore: reading %s: %w", b.Name(), err)
	}
	return b.Entry, buf, nil
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	if s.db != nil {
		st.Bytes, st.Files = s.db.totals.Bytes, int(s.db.totals.Files)
		return st
	}
	st.Bytes = s.bytes
	st.Files = s.index.Len()
	return st
}

// sweepLoop deletes expired blobs every sweepEvery until Close.
func (s *Store) sweepLoop() {
	defer close(s.done)
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if n := s.sweep(); n > 0 {
				s.logger.Debug("expired media removed", "count", n)
			}
		}
	}
}

// sweep removes every expired blob and returns how many.
func (s *Store) sweep() int {
	if s.db != nil {
		ctx, cancel := dbContext(context.Background())
		defer cancel()
		n, err := s.sweepShared(ctx)
		if err != nil {
			s.logger.Warn("sweeping media failed", "err", err)
		}
		return n
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range s.index.Keys() {
		if e, ok := s.index.Peek(id); ok && s.expired(e, now) {
			s.index.Remove(id)
			s.stats.Expirations++
			n++
		}
	}
	return n
}
