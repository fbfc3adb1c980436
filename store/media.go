package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Media is one blob of the media store, kept in the database when replicas
// share it (PostgreSQL; on SQLite the media store keeps its files on disk).
// The store does not know how ID is made: the media store derives it from
// Owner and Data, and checks it again when it reads a blob back.
type Media struct {
	ID       string
	Owner    string
	MIMEType string
	// StoredAt is when the blob was last stored: it expires a max age
	// later. LastUsed is when it was last stored or read: the budget
	// evicts the least recently used first.
	StoredAt time.Time
	LastUsed time.Time
	Data     []byte
}

// MediaTotals are the count and bytes of all blobs.
type MediaTotals struct {
	Files int64
	Bytes int64
}

// Bounds of a Media record. MaxMediaSize is far under bytea's 1 GB, and a
// blob is read whole: the media store's own cap (max_response_body) is
// lower still.
const (
	MaxMediaSize     = 256 << 20
	maxMediaID       = 128
	maxMediaOwner    = 4096
	maxMediaMIMEType = 255
)

// maxMediaSize is MaxMediaSize; tests lower it.
var maxMediaSize = MaxMediaSize

// checkMedia reports what is wrong with m, never showing its owner or its
// bytes.
func checkMedia(m Media) error {
	switch {
	case m.ID == "" || len(m.ID) > maxMediaID || !printableASCII(m.ID):
		return fmt.Errorf("a media id must be 1 to %d printable ASCII characters", maxMediaID)
	case len(m.Owner) > maxMediaOwner || !textOK(m.Owner):
		return fmt.Errorf("the media's owner must be at most %d bytes of UTF-8 without NUL", maxMediaOwner)
	case m.MIMEType == "" || len(m.MIMEType) > maxMediaMIMEType || !textOK(m.MIMEType):
		return fmt.Errorf("the media's MIME type must be 1 to %d bytes of UTF-8 without NUL", maxMediaMIMEType)
	case len(m.Data) > maxMediaSize:
		return fmt.Errorf("the media is %d bytes, more than the store keeps in one blob (%d)", len(m.Data), maxMediaSize)
	}
	if err := checkTime("StoredAt", m.StoredAt); err != nil {
		return err
	}
	return checkTime("LastUsed", m.LastUsed)
}

func checkMediaID(id string) error {
	if id == "" || len(id) > maxMediaID || !printableASCII(id) {
		return fmt.Errorf("a media id must be 1 to %d printable ASCII characters", maxMediaID)
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return utf8.ValidString(s)
}

// PutMedia stores m. When a blob of m.ID is stored already (one id is one
// content), its bytes stay and only its MIME type and times are set from
// m; created is then false. It returns the totals after the put.
func (p *Postgres) PutMedia(ctx context.Context, m Media) (created bool, _ MediaTotals, _ error) {
	if err := checkMedia(m); err != nil {
		return false, MediaTotals{}, fmt.Errorf("putting media: %w", err)
	}
	var t MediaTotals
	// The totals row is locked last and only by a transaction that added
	// a row no other one sees yet, so a put never waits for a trim that
	// waits for it.
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO media (id, owner, mime_type, size, stored_at, last_used, data)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
			m.ID, m.Owner, m.MIMEType, int64(len(m.Data)), formatTime(m.StoredAt), formatTime(m.LastUsed), m.Data)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			created = true
			return tx.QueryRow(ctx, `UPDATE media_totals SET files = files + 1, bytes = bytes + $1 RETURNING files, bytes`,
				int64(len(m.Data))).Scan(&t.Files, &t.Bytes)
		}
		if _, err := tx.Exec(ctx, `UPDATE media SET mime_type = $2, stored_at = $3, last_used = $4 WHERE id = $1`,
			m.ID, m.MIMEType, formatTime(m.StoredAt), formatTime(m.LastUsed)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT files, bytes FROM media_totals`).Scan(&t.Files, &t.Bytes)
	})
	if err != nil {
		return false, MediaTotals{}, fmt.Errorf("putting media: %w", err)
	}
	return created, t, nil
}

// TouchMedia marks the blob of id stored and used at at, with mimeType,
// without sending its bytes again. It is false when there is no such blob.
func (p *Postgres) TouchMedia(ctx context.Context, id, mimeType string, at time.Time) (bool, error) {
	if err := checkMedia(Media{ID: id, MIMEType: mimeType, StoredAt: at, LastUsed: at}); err != nil {
		return false, fmt.Errorf("touching media: %w", err)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE media SET mime_type = $2, stored_at = $3, last_used = $3 WHERE id = $1`,
		id, mimeType, formatTime(at))
	if err != nil {
		return false, fmt.Errorf("touching media: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// UseMedia marks the blob of id used at at, unless it was used later. It
// is no error when there is no such blob.
func (p *Postgres) UseMedia(ctx context.Context, id string, at time.Time) error {
	if err := checkMediaID(id); err != nil {
		return fmt.Errorf("using media: %w", err)
	}
	if err := checkTime("at", at); err != nil {
		return fmt.Errorf("using media: %w", err)
	}
	if _, err := p.pool.Exec(ctx, `UPDATE media SET last_used = $2 WHERE id = $1 AND last_used < $2`, id, formatTime(at)); err != nil {
		return fmt.Errorf("using media: %w", err)
	}
	return nil
}

// GetMedia returns the blob of id, its bytes read whole, or ErrNotFound.
func (p *Postgres) GetMedia(ctx context.Context, id string) (Media, error) {
	if err := checkMediaID(id); err != nil {
		return Media{}, fmt.Errorf("getting media: %w", err)
	}
	var m Media
	var stored, used string
	err := p.pool.QueryRow(ctx, `SELECT id, owner, mime_type, stored_at, last_used, data FROM media WHERE id = $1`, id).
		Scan(&m.ID, &m.Owner, &m.MIMEType, &stored, &used, &m.Data)
	if isNoRows(err) {
		return Media{}, ErrNotFound
	}
	if err == nil {
		m.StoredAt, err = parseTime(stored)
	}
	if err == nil {
		m.LastUsed, err = parseTime(used)
	}
	if err != nil {
		return Media{}, fmt.Errorf("getting media: %w", err)
	}
	if m.Data == nil {
		m.Data = []byte{}
	}
	return m, nil
}

// DeleteMedia deletes the blob of id, if there is one, and returns the
// totals after.
func (p *Postgres) DeleteMedia(ctx context.Context, id string) (MediaTotals, error) {
	if err := checkMediaID(id); err != nil {
		return MediaTotals{}, fmt.Errorf("deleting media: %w", err)
	}
	_, t, err := p.deleteMedia(ctx, `SELECT id FROM media WHERE id = $1`, id)
	if err != nil {
		return MediaTotals{}, fmt.Errorf("deleting media: %w", err)
	}
	return t, nil
}

// DeleteExpiredMedia deletes the blobs stored at or before storedBy, in
// batches, and returns how many and the totals after.
func (p *Postgres) DeleteExpiredMedia(ctx context.Context, storedBy time.Time) (int, MediaTotals, error) {
	if err := checkTime("storedBy", storedBy); err != nil {
		return 0, MediaTotals{}, fmt.Errorf("deleting expired media: %w", err)
	}
	n := 0
	for {
		k, t, err := p.deleteMedia(ctx, `SELECT id FROM media WHERE stored_at <= $1 LIMIT $2`, formatTime(storedBy), p.deleteBatch)
		n += k
		if err != nil {
			return n, MediaTotals{}, fmt.Errorf("deleting expired media: %w", err)
		}
		if k < p.deleteBatch {
			return n, t, nil
		}
	}
}

// deleteMedia deletes the rows whose ids victims selects and takes them
// off the totals. Every delete locks the totals row first, before any
// media row, so deletes and trims never wait for each other in a cycle.
func (p *Postgres) deleteMedia(ctx context.Context, victims string, args ...any) (n int, t MediaTotals, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM media_totals FOR UPDATE`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `WITH d AS (DELETE FROM media WHERE id IN (`+victims+`) RETURNING size)
			UPDATE media_totals SET files = files - (SELECT count(*) FROM d), bytes = bytes - (SELECT COALESCE(sum(size), 0) FROM d)
			RETURNING (SELECT count(*) FROM d), files, bytes`, args...).Scan(&n, &t.Files, &t.Bytes)
	})
	return n, t, err
}

// TrimMedia deletes the least recently used blobs until all of them
// together take at most maxBytes, in batches, and returns the ids it
// deleted and the totals after. Each batch locks the totals row first, so
// replicas trimming at once take turns, and each reads the bytes the
// previous one left: together they evict no more than one would.
func (p *Postgres) TrimMedia(ctx context.Context, maxBytes int64) ([]string, MediaTotals, error) {
	if maxBytes < 0 {
		return nil, MediaTotals{}, errors.New("trimming media: the budget is negative")
	}
	var ids []string
	for {
		var batch []string
		var t MediaTotals
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT files, bytes FROM media_totals FOR UPDATE`).Scan(&t.Files, &t.Bytes); err != nil {
				return err
			}
			if t.Bytes <= maxBytes {
				return nil
			}
			// The oldest rows, in use order, until their bytes cover the
			// excess: a row is taken while the ones before it fall short.
			return tx.QueryRow(ctx, `WITH o AS (
					SELECT id, size, sum(size) OVER (ORDER BY last_used, id) AS run
					FROM (SELECT id, size, last_used FROM media ORDER BY last_used, id LIMIT $2) l),
				d AS (DELETE FROM media WHERE id IN (SELECT id FROM o WHERE run - size < $1) RETURNING id, size, last_used)
				UPDATE media_totals SET files = files - (SELECT count(*) FROM d), bytes = bytes - (SELECT COALESCE(sum(size), 0) FROM d)
				RETURNING (SELECT array_agg(id ORDER BY last_used, id) FROM d), files, bytes`,
				t.Bytes-maxBytes, p.deleteBatch).Scan(&batch, &t.Files, &t.Bytes)
		})
		ids = append(ids, batch...)
		if err != nil {
			return ids, MediaTotals{}, fmt.Errorf("trimming media: %w", err)
		}
		if t.Bytes <= maxBytes || len(batch) == 0 {
			return ids, t, nil
		}
	}
}

// MediaTotals returns the count and bytes of all blobs: one row, kept by
// the statements that change the table.
func (p *Postgres) MediaTotals(ctx context.Context) (MediaTotals, error) {
	var t MediaTotals
	if err := p.pool.QueryRow(ctx, `SELECT files, bytes FROM media_totals`).Scan(&t.Files, &t.Bytes); err != nil {
		return MediaTotals{}, fmt.Errorf("reading the media totals: %w", err)
	}
	return t, nil
}

// PutMedia is Postgres's PutMedia in memory.
func (m *Memory) PutMedia(ctx context.Context, md Media) (bool, MediaTotals, error) {
	if err := checkMedia(md); err != nil {
		return false, MediaTotals{}, fmt.Errorf("putting media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.media == nil {
		m.media = map[string]Media{}
	}
	old, ok := m.media[md.ID]
	if ok {
		old.MIMEType, old.StoredAt, old.LastUsed = md.MIMEType, md.StoredAt.UTC(), md.LastUsed.UTC()
		m.media[md.ID] = old
		return false, m.mediaTotalsLocked(), nil
	}
	md.StoredAt, md.LastUsed = md.StoredAt.UTC(), md.LastUsed.UTC()
	md.Data = append([]byte{}, md.Data...)
	m.media[md.ID] = md
	return true, m.mediaTotalsLocked(), nil
}

// TouchMedia is Postgres's TouchMedia in memory.
func (m *Memory) TouchMedia(ctx context.Context, id, mimeType string, at time.Time) (bool, error) {
	if err := checkMedia(Media{ID: id, MIMEType: mimeType, StoredAt: at, LastUsed: at}); err != nil {
		return false, fmt.Errorf("touching media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	md, ok := m.media[id]
	if !ok {
		return false, nil
	}
	md.MIMEType, md.StoredAt, md.LastUsed = mimeType, at.UTC(), at.UTC()
	m.media[id] = md
	return true, nil
}

// UseMedia is Postgres's UseMedia in memory.
func (m *Memory) UseMedia(ctx context.Context, id string, at time.Time) error {
	if err := checkMediaID(id); err != nil {
		return fmt.Errorf("using media: %w", err)
	}
	if err := checkTime("at", at); err != nil {
		return fmt.Errorf("using media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if md, ok := m.media[id]; ok && md.LastUsed.Before(at) {
		md.LastUsed = at.UTC()
		m.media[id] = md
	}
	return nil
}

// GetMedia is Postgres's GetMedia in memory.
func (m *Memory) GetMedia(ctx context.Context, id string) (Media, error) {
	if err := checkMediaID(id); err != nil {
		return Media{}, fmt.Errorf("getting media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	md, ok := m.media[id]
	if !ok {
		return Media{}, ErrNotFound
	}
	md.Data = append([]byte{}, md.Data...)
	return md, nil
}

// DeleteMedia is Postgres's DeleteMedia in memory.
func (m *Memory) DeleteMedia(ctx context.Context, id string) (MediaTotals, error) {
	if err := checkMediaID(id); err != nil {
		return MediaTotals{}, fmt.Errorf("deleting media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.media, id)
	return m.mediaTotalsLocked(), nil
}

// DeleteExpiredMedia is Postgres's DeleteExpiredMedia in memory.
func (m *Memory) DeleteExpiredMedia(ctx context.Context, storedBy time.Time) (int, MediaTotals, error) {
	if err := checkTime("storedBy", storedBy); err != nil {
		return 0, MediaTotals{}, fmt.Errorf("deleting expired media: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, md := range m.media {
		if !md.StoredAt.After(storedBy) {
			delete(m.media, id)
			n++
		}
	}
	return n, m.mediaTotalsLocked(), nil
}

// TrimMedia is Postgres's TrimMedia in memory.
func (m *Memory) TrimMedia(ctx context.Context, maxBytes int64) ([]string, MediaTotals, error) {
	if maxBytes < 0 {
		return nil, MediaTotals{}, errors.New("trimming media: the budget is negative")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.mediaTotalsLocked()
	all := slices.Collect(maps.Values(m.media))
	slices.SortFunc(all, func(a, b Media) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var ids []string
	for _, md := range all {
		if t.Bytes <= maxBytes {
			break
		}
		delete(m.media, md.ID)
		t.Files--
		t.Bytes -= int64(len(md.Data))
		ids = append(ids, md.ID)
	}
	return ids, t, nil
}

// MediaTotals is Postgres's MediaTotals in memory.
func (m *Memory) MediaTotals(ctx context.Context) (MediaTotals, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mediaTotalsLocked(), nil
}

func (m *Memory) mediaTotalsLocked() MediaTotals {
	t := MediaTotals{Files: int64(len(m.media))}
	for _, md := range m.media {
		t.Bytes += int64(len(md.Data))
	}
	return t
}
