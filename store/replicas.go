package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Replica is one gateway process of a cluster as the store knows it: its
// name (what its session ids carry), the URL the other replicas reach it
// at, when it started and when it last said it was alive.
type Replica struct {
	ID        string
	URL       string
	StartedAt time.Time
	SeenAt    time.Time
	// Servers is the replica's view of its servers at SeenAt, a JSON
	// object (name → state), kept byte for byte; nil: none.
	Servers json.RawMessage
}

// maxReplicaField bounds a replica's ID and URL: they come from config;
// maxReplicaServers its servers' states.
const (
	maxReplicaField   = 512
	maxReplicaServers = 1 << 20
)

// checkReplica reports what is wrong with r.
func checkReplica(r Replica) error {
	switch {
	case r.ID == "" || len(r.ID) > maxReplicaField || !utf8.ValidString(r.ID):
		return fmt.Errorf("a replica's ID must be 1 to %d bytes of UTF-8", maxReplicaField)
	case len(r.URL) > maxReplicaField:
		return fmt.Errorf("replica %q: its URL is longer than %d bytes", r.ID, maxReplicaField)
	case len(r.Servers) > 0 && (len(r.Servers) > maxReplicaServers || !json.Valid(r.Servers) || r.Servers[0] != '{'):
		return fmt.Errorf("replica %q: its servers must be a JSON object of at most %d bytes", r.ID, maxReplicaServers)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("replica %q: its URL must be an absolute http or https URL", r.ID)
	}
	if err := checkTime("StartedAt", r.StartedAt); err != nil {
		return fmt.Errorf("replica %q: %w", r.ID, err)
	}
	if err := checkTime("SeenAt", r.SeenAt); err != nil {
		return fmt.Errorf("replica %q: %w", r.ID, err)
	}
	return nil
}

const replicaColumns = `id, url, started_at, seen_at, servers`

// PutReplica records r, replacing the record of the same ID: a replica
// calls it at start and then at each heartbeat.
func (s *SQLite) PutReplica(ctx context.Context, r Replica) error {
	if err := checkReplica(r); err != nil {
		return fmt.Errorf("putting a replica: %w", err)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO replicas (`+replicaColumns+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, started_at = excluded.started_at, seen_at = excluded.seen_at, servers = excluded.servers`,
		r.ID, r.URL, formatTime(r.StartedAt), formatTime(r.SeenAt), jsonText(r.Servers))
	if err != nil {
		return fmt.Errorf("putting replica %q: %w", r.ID, err)
	}
	return nil
}

// ListReplicas returns the replicas seen at or after since, by ID.
func (s *SQLite) ListReplicas(ctx context.Context, since time.Time) ([]Replica, error) {
	if err := checkTime("since", since); err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	out, err := queryAll(ctx, s.r, scanReplica, `SELECT `+replicaColumns+` FROM replicas WHERE seen_at >= ? ORDER BY id`, formatTime(since))
	if err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	return out, nil
}

// DeleteReplica deletes the record of the replica id, if there is one,
// and any record not seen since before: a replica that stops, and the
// ones that died long ago.
func (s *SQLite) DeleteReplica(ctx context.Context, id string, before time.Time) error {
	if err := checkTime("before", before); err != nil {
		return fmt.Errorf("deleting a replica: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM replicas WHERE id = ? OR seen_at < ?`, id, formatTime(before)); err != nil {
		return fmt.Errorf("deleting replica %q: %w", id, err)
	}
	return nil
}

func scanReplica(row interface{ Scan(...any) error }) (Replica, error) {
	var r Replica
	var started, seen string
	var servers []byte
	if err := row.Scan(&r.ID, &r.URL, &started, &seen, &servers); err != nil {
		return Replica{}, err
	}
	if len(servers) > 0 {
		r.Servers = json.RawMessage(servers)
	}
	var err error
	if r.StartedAt, err = parseTime(started); err != nil {
		return Replica{}, err
	}
	if r.SeenAt, err = parseTime(seen); err != nil {
		return Replica{}, err
	}
	return r, nil
}

// PutReplica is SQLite's PutReplica in memory.
func (m *Memory) PutReplica(ctx context.Context, r Replica) error {
	if err := checkReplica(r); err != nil {
		return fmt.Errorf("putting a replica: %w", err)
	}
	r.StartedAt, r.SeenAt = r.StartedAt.UTC(), r.SeenAt.UTC()
	if len(r.Servers) == 0 {
		r.Servers = nil
	} else {
		r.Servers = append(json.RawMessage(nil), r.Servers...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.replicas == nil {
		m.replicas = map[string]Replica{}
	}
	m.replicas[r.ID] = r
	return nil
}

// ListReplicas is SQLite's ListReplicas in memory.
func (m *Memory) ListReplicas(ctx context.Context, since time.Time) ([]Replica, error) {
	if err := checkTime("since", since); err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Replica
	for _, r := range m.replicas {
		if !r.SeenAt.Before(since) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteReplica is SQLite's DeleteReplica in memory.
func (m *Memory) DeleteReplica(ctx context.Context, id string, before time.Time) error {
	if err := checkTime("before", before); err != nil {
		return fmt.Errorf("deleting a replica: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.replicas {
		if k == id || r.SeenAt.Before(before) {
			delete(m.replicas, k)
		}
	}
	return nil
}

// PutReplica is SQLite's PutReplica on PostgreSQL.
func (p *Postgres) PutReplica(ctx context.Context, r Replica) error {
	if err := checkReplica(r); err != nil {
		return fmt.Errorf("putting a replica: %w", err)
	}
	if err := checkText("replica", "ID", r.ID, "URL", r.URL); err != nil {
		return fmt.Errorf("putting a replica: %w", err)
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO replicas (`+replicaColumns+`) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, started_at = excluded.started_at, seen_at = excluded.seen_at, servers = excluded.servers`,
		r.ID, r.URL, formatTime(r.StartedAt), formatTime(r.SeenAt), jsonBytes(r.Servers))
	if err != nil {
		return fmt.Errorf("putting replica %q: %w", r.ID, err)
	}
	return nil
}

// ListReplicas is SQLite's ListReplicas on PostgreSQL.
func (p *Postgres) ListReplicas(ctx context.Context, since time.Time) ([]Replica, error) {
	if err := checkTime("since", since); err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	out, err := pgQueryAll(ctx, p, func(row pgx.Row) (Replica, error) { return scanReplica(row) },
		`SELECT `+replicaColumns+` FROM replicas WHERE seen_at >= $1 ORDER BY id`, formatTime(since))
	if err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	return out, nil
}

// DeleteReplica is SQLite's DeleteReplica on PostgreSQL.
func (p *Postgres) DeleteReplica(ctx context.Context, id string, before time.Time) error {
	if err := checkTime("before", before); err != nil {
		return fmt.Errorf("deleting a replica: %w", err)
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1 OR seen_at < $2`, id, formatTime(before)); err != nil {
		return fmt.Errorf("deleting replica %q: %w", id, err)
	}
	return nil
}
