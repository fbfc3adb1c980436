// Package cluster lets the replicas of a gateway that share one store
// reach each other. Each replica records itself in the store's registry
// (its name, the URL the others reach it at) and renews the record at
// every heartbeat; a request that needs what only one replica holds (a
// legacy session, with its streams, calls in flight and pending requests)
// is forwarded to it, with a header only a replica can make:
//
//	client ─► replica B: Mcp-Session-Id names replica A
//	            │ A seen within the lapse? ── no ─► 404: the session is lost
//	            ▼ yes
//	          POST/GET/DELETE to A's URL, Mcpgw-Replica-Token:
//	          seal{from B, to A, the session, an expiry}
//	            ▼
//	          A serves it as its own; its answer, streams too, goes back
//	          through B as it comes
//
// The token is sealed with a key derived from the gateway's secret, which
// every replica has and no client does: a request that carries one that
// does not open, is stale, names another replica or another session is
// refused (403) before any handler sees it.
package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/seal"
	"github.com/mcpgw/mcpgw/store"
)

// HeaderToken carries a forwarded request's token.
const HeaderToken = "Mcpgw-Replica-Token"

// headerSession is the legacy edge's session header, which a token binds.
const headerSession = "Mcp-Session-Id"

// Defaults.
const (
	DefaultHeartbeat = 2 * time.Second
	// DefaultLapse: a replica not seen for five heartbeats is gone.
	DefaultLapse = 10 * time.Second
	// tokenLife bounds how long a forwarded request's token is good for:
	// it is made for one request, sent at once.
	tokenLife = 30 * time.Second
	// dialTimeout bounds reaching a replica: one that is gone must cost
	// its clients a 404, not a hang.
	dialTimeout = 2 * time.Second
	// refreshEvery bounds the registry reads that a request for an
	// unknown replica causes: a replica that just joined is not known to
	// the others until they read again. Only replicas name replicas (in
	// sealed ids), so misses are rare.
	refreshEvery = 100 * time.Millisecond
)

// Registry is where the replicas find each other: the shared store.
type Registry interface {
	PutReplica(ctx context.Context, r store.Replica) error
	ListReplicas(ctx context.Context, since time.Time) ([]store.Replica, error)
	DeleteReplica(ctx context.Context, id string, before time.Time) error
}

// Options configure a Cluster.
type Options struct {
	// ID names this replica in the session ids it issues; URL is where the
	// other replicas reach it (cluster.self_url).
	ID, URL string
	// Secret is the gateway's secret; the forwarding tokens' key is
	// derived from it.
	Secret []byte
	// Registry is the shared store.
	Registry Registry
	// Heartbeat and Lapse: how often this replica renews its record, and
	// how long a record stays alive unrenewed. If zero, the defaults.
	Heartbeat, Lapse time.Duration
	// Status, if not nil, returns this replica's view of its servers (a
	// JSON object, name → state), recorded at each heartbeat for the
	// admin API of every replica to show.
	Status func() json.RawMessage
	// Transport reaches the other replicas. If nil, one with a bounded dial.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Cluster is this replica's view of the others. It is safe for concurrent use.
type Cluster struct {
	opts    Options
	started time.Time
	sealer  *seal.Sealer
	proxy   *httputil.ReverseProxy

	mu     sync.Mutex
	peers  map[string]store.Replica // as last read, this replica's included
	readAt time.Time
}

// New returns the Cluster of opts; Join makes it known to the others.
func New(opts Options) (*Cluster, error) {
	if opts.ID == "" || opts.URL == "" || opts.Registry == nil {
		return nil, errors.New("cluster: a replica needs an ID, a URL and the shared store")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cluster: self_url %q must be an absolute http or https URL", opts.URL)
	}
	sealer, err := seal.New(opts.Secret, "replica forward")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Lapse <= 0 {
		opts.Lapse = DefaultLapse
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			Proxy:               nil, // replicas reach each other directly
			DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: dialTimeout,
		}
	}
	c := &Cluster{opts: opts, started: time.Now(), sealer: sealer, peers: map[string]store.Replica{}}
	c.proxy = &httputil.ReverseProxy{
		Rewrite:       c.rewrite,
		Transport:     opts.Transport,
		FlushInterval: -1, // event streams go through as they come
		ErrorHandler:  c.proxyError,
		// A stream cut mid-way (the client or the owner went) is logged
		// at debug: it is how streams end.
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	return c, nil
}

// ID is this replica's name.
func (c *Cluster) ID() string { return c.opts.ID }

// Join records this replica in the registry, after checking that no other
// live replica goes by its name (a second process with the same
// cluster.replica_id would take the other's sessions). A record of its
// name at another URL may be this replica's own before a crash, at an
// address it no longer has: Join waits for it to lapse, and fails only if
// it is renewed meanwhile, by a process that is alive.
func (c *Cluster) Join(ctx context.Context) error {
	for {
		now := time.Now()
		live, err := c.opts.Registry.ListReplicas(ctx, now.Add(-c.opts.Lapse))
		if err != nil {
			return fmt.Errorf("cluster: reading the replicas: %w", err)
		}
		var other *store.Replica
		for i, r := range live {
			if r.ID == c.opts.ID && r.URL != c.opts.URL {
				other = &live[i]
			}
		}
		if other == nil {
			return c.beat(ctx)
		}
		if other.SeenAt.After(c.started) {
			return fmt.Errorf("cluster: replica id %q is in use by the live replica at %s; give each replica its own cluster.replica_id",
				c.opts.ID, other.URL)
		}
		c.opts.Logger.Warn("a replica under this id was at another URL; waiting for its record to lapse", "replica", c.opts.ID, "url", other.URL)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the record of replica %q at %s to lapse: %w", c.opts.ID, other.URL, ctx.Err())
		case <-time.After(time.Until(other.SeenAt.Add(c.opts.Lapse))):
		}
	}
}

// Run renews this replica's record every heartbeat until ctx ends, then
// deletes it (and the records that lapsed long ago).
func (c *Cluster) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Heartbeat)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.opts.Registry.DeleteReplica(lctx, c.opts.ID, time.Now().Add(-24*time.Hour)); err != nil {
				c.opts.Logger.Warn("leaving the cluster failed; the others see this replica lapse", "err", err)
			}
			return
		case <-t.C:
			bctx, cancel := context.WithTimeout(ctx, c.opts.Heartbeat)
			err := c.beat(bctx)
			cancel()
			switch {
			case err != nil && !failing:
				c.opts.Logger.Error("cluster heartbeat failed; the other replicas stop forwarding here if it goes on", "err", err)
			case err == nil && failing:
				c.opts.Logger.Info("cluster heartbeat works again")
			}
			failing = err != nil
		}
	}
}

// beat renews this replica's record and re-reads the others.
func (c *Cluster) beat(ctx context.Context) error {
	now := time.Now()
	me := store.Replica{ID: c.opts.ID, URL: c.opts.URL, StartedAt: c.started, SeenAt: now}
	if c.opts.Status != nil {
		me.Servers = c.opts.Status()
	}
	if err := c.opts.Registry.PutReplica(ctx, me); err != nil {
		return err
	}
	return c.read(ctx)
}

// read replaces the known replicas with the registry's live ones.
func (c *Cluster) read(ctx context.Context) error {
	now := time.Now()
	live, err := c.opts.Registry.ListReplicas(ctx, now.Add(-c.opts.Lapse))
	if err != nil {
		return err
	}
	peers := make(map[string]store.Replica, len(live))
	for _, r := range live {
		peers[r.ID] = r
	}
	c.mu.Lock()
	c.peers, c.readAt = peers, now
	c.mu.Unlock()
	return nil
}

// Replicas returns the live replicas as last read, this one included.
func (c *Cluster) Replicas() []store.Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]store.Replica, 0, len(c.peers))
	for _, r := range c.peers {
		out = append(out, r)
	}
	return out
}

// peer returns the live replica id, reading the registry again (at most
// once per refreshEvery) when it is not known yet: it may have just
// started.
func (c *Cluster) peer(ctx context.Context, id string) (store.Replica, bool) {
	c.mu.Lock()
	r, ok := c.peers[id]
	readAt := c.readAt
	c.mu.Unlock()
	if !ok && time.Since(readAt) >= refreshEvery {
		if err := c.read(ctx); err != nil {
			c.opts.Logger.Warn("reading the replicas failed", "err", err)
		}
		c.mu.Lock()
		r, ok = c.peers[id]
		readAt = c.readAt
		c.mu.Unlock()
	}
	// Alive as of the last read: when the store cannot be read, the
	// others are not taken for gone (a dead one still refuses the dial).
	return r, ok && readAt.Sub(r.SeenAt) < c.opts.Lapse
}

// forwardToken is the payload of HeaderToken.
type forwardToken struct {
	From    string `json:"f"`
	To      string `json:"t"`
	Session string `json:"s"` // a hash of the request's session id
	Expires int64  `json:"e"` // Unix seconds
}

func sessionHash(r *http.Request) string {
	sum := sha256.Sum256([]byte(r.Header.Get(headerSession)))
	return hex.EncodeToString(sum[:16])
}

// forwarding is what one Forward hands its proxy through the context.
type forwarding struct {
	to     store.Replica
	body   []byte
	failed error
}

type forwardingKey struct{}

// Forward sends r (whose body was read into body) to the replica id and
// copies its answer to w as it comes. It returns false, having written
// nothing, when that replica is not alive or cannot be reached: the
// caller answers for what it held (for a session: lost).
func (c *Cluster) Forward(w http.ResponseWriter, r *http.Request, body []byte, id string) bool {
	if id == c.opts.ID {
		return false
	}
	to, ok := c.peer(r.Context(), id)
	if !ok {
		return false
	}
	f := &forwarding{to: to, body: body}
	c.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardingKey{}, f)))
	if f.failed != nil {
		c.opts.Logger.Info("forwarding to a replica failed; answering for it", "replica", id, "err", f.failed)
		return false
	}
	return true
}

func (c *Cluster) rewrite(pr *httputil.ProxyRequest) {
	f := pr.In.Context().Value(forwardingKey{}).(*forwarding)
	target, _ := url.Parse(f.to.URL) // checked when it was put
	pr.SetURL(target)
	// The owner checks Host as it would the client's.
	pr.Out.Host = pr.In.Host
	tok, _ := json.Marshal(forwardToken{From: c.opts.ID, To: f.to.ID, Session: sessionHash(pr.In), Expires: time.Now().Add(tokenLife).Unix()})
	pr.Out.Header.Set(HeaderToken, c.sealer.Seal(tok))
	if f.body != nil {
		pr.Out.Body = io.NopCloser(bytes.NewReader(f.body))
		pr.Out.ContentLength = int64(len(f.body))
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.body)), nil }
	}
}

// proxyError records that the replica could not be reached; nothing has
// been written then, so Forward's caller answers.
func (c *Cluster) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if f, ok := r.Context().Value(forwardingKey{}).(*forwarding); ok {
		f.failed = err
	}
}

// ErrBadToken is Verify's answer for a token that did not come from a
// replica of this cluster for this replica and request.
var ErrBadToken = errors.New("the request carries a Mcpgw-Replica-Token that is not a live token of this cluster for this replica and session")

// Verify reports whether r was forwarded by another replica: false
// without a token, ErrBadToken with one that does not open, has expired,
// or was made for another replica or session.
func (c *Cluster) Verify(r *http.Request) (bool, error) {
	raw := r.Header.Get(HeaderToken)
	if raw == "" {
		return false, nil
	}
	b, err := c.sealer.Open(raw)
	if err != nil {
		return false, ErrBadToken
	}
	var tok forwardToken
	if json.Unmarshal(b, &tok) != nil || tok.To != c.opts.ID || tok.Session != sessionHash(r) || time.Now().Unix() > tok.Expires {
		return false, ErrBadToken
	}
	return true, nil
}

// forwardedKey marks a request Middleware verified as forwarded.
type forwardedKey struct{}

// Middleware refuses (403) a request with a token Verify does not take,
// before any handler sees it, and marks one it takes (Forwarded).
func (c *Cluster) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := c.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if ok {
			r = r.WithContext(context.WithValue(r.Context(), forwardedKey{}, true))
		}
		next.ServeHTTP(w, r)
	})
}

// Forwarded reports whether Middleware took r as forwarded by a replica.
func (c *Cluster) Forwarded(r *http.Request) bool { return Forwarded(r) }

// Forwarded reports whether Middleware took r as forwarded by a replica.
func Forwarded(r *http.Request) bool {
	v, _ := r.Context().Value(forwardedKey{}).(bool)
	return v
}
