package auth

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/mcpgw/mcpgw/config"
)

// RateLimiterOptions configures a RateLimiter.
type RateLimiterOptions struct {
	// Rate is the token bucket of each principal (config
	// rate_limits.per_principal). A zero Rate disables the limiter: its
	// Middleware passes every request on untouched.
	Rate config.Rate
	// MaxKeys bounds the buckets kept, one per principal or IP address;
	// past it the least recently used one is dropped, and its key starts
	// again with a full bucket. If zero, config.DefaultMaxLimiters.
	MaxKeys int
	// OnLimit writes the answer to a request over the limit, whose
	// Retry-After header is already set: the status (429 normally) and a
	// body. retryAfter is when the next request of the same key would
	// pass. The MCP edge sets it to write a JSON-RPC error. If nil, a
	// plain-text 429 is written.
	OnLimit func(w http.ResponseWriter, r *http.Request, retryAfter time.Duration)
	// ClientIP returns the address that a request without a principal
	// (or with the anonymous one) is limited under. If nil, the host of
	// r.RemoteAddr: put the edge's trusted-proxy logic here to limit by
	// the forwarded client address instead.
	ClientIP func(r *http.Request) string
	// Now returns the current time, for tests. If nil, time.Now.
	Now func() time.Time
}

// RateLimiter limits the requests of each principal with a token bucket
// (x/time/rate), and answers those over it 429 with Retry-After. The
// principal comes from the context (FromContext); a request without one,
// or of the Anonymous principal, which stands for everybody without a key,
// is limited under its client's IP address instead, so the limiter also
// works in front of authentication and one anonymous client cannot use up
// the others' requests.
//
// The buckets live in an LRU bounded by MaxKeys (STYLE.md: per-key state is
// bounded), so they need no janitor and hold no goroutine. It is safe for
// concurrent use.
type RateLimiter struct {
	opts RateLimiterOptions

	mu   sync.Mutex
	keys *simplelru.LRU[string, *rate.Limiter] // nil when disabled
}

// NewRateLimiter returns a RateLimiter for opts. A negative rate, burst or
// MaxKeys, or a positive rate with a burst below 1 (a bucket that never
// holds a token), is an error.
func NewRateLimiter(opts RateLimiterOptions) (*RateLimiter, error) {
	r := opts.Rate
	switch {
	case r.Rate < 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) || r.Burst < 0:
		return nil, errors.New("auth: rate limit needs a finite rate >= 0 and burst >= 0")
	case r.Rate > 0 && r.Burst < 1:
		return nil, errors.New("auth: rate limit needs burst >= 1 with a rate above 0")
	case opts.MaxKeys < 0:
		return nil, errors.New("auth: rate limit MaxKeys must be 0 (the default) or more")
	}
	if opts.MaxKeys == 0 {
		opts.MaxKeys = config.DefaultMaxLimiters
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ClientIP == nil {
		opts.ClientIP = remoteIP
	}
	l := &RateLimiter{opts: opts}
	if r.Rate > 0 {
		var err error
		if l.keys, err = simplelru.NewLRU[string, *rate.Limiter](opts.MaxKeys, nil); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Enabled reports whether the limiter limits anything (a Rate above 0).
func (l *RateLimiter) Enabled() bool { return l.keys != nil }

// Allow takes a token for r from its key's bucket. When none is left it
// takes nothing and returns false with the time until the next token.
// A disabled limiter allows everything.
func (l *RateLimiter) Allow(r *http.Request) (retryAfter time.Duration, ok bool) {
	if l.keys == nil {
		return 0, true
	}
	key := l.key(r)
	now := l.opts.Now()
	l.mu.Lock()
	lim, found := l.keys.Get(key)
	if !found {
		lim = rate.NewLimiter(rate.Limit(l.opts.Rate.Rate), l.opts.Rate.Burst)
		l.keys.Add(key, lim)
	}
	l.mu.Unlock()
	if lim.AllowN(now, 1) {
		return 0, true
	}
	// AllowN took nothing. Reserve and Cancel would also give the delay,
	// but a reservation cancelled behind a later one returns no token, so
	// refused requests would drain the bucket under load.
	return tokenDelay(lim, now), false
}

// tokenDelay returns how long from now until lim holds a whole token.
func tokenDelay(lim *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / float64(lim.Limit()) * float64(time.Second)))
}

// key returns the bucket key of r: "p:" and the principal's name, or
// "ip:" and the client's address.
func (l *RateLimiter) key(r *http.Request) string {
	if p, ok := FromContext(r.Context()); ok && p.Name != "" && !p.IsAnonymous() {
		return "p:" + p.Name
	}
	return "ip:" + l.opts.ClientIP(r)
}

// remoteIP returns the host of r.RemoteAddr, or all of it when it has no
// port.
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Middleware passes on the requests within their key's limit. One over it
// gets Retry-After, in whole seconds and at least 1, and OnLimit's answer
// (429); next is not called. A disabled limiter returns next itself.
func (l *RateLimiter) Middleware(next http.Handler) http.Handler {
	if l.keys == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := l.Allow(r)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", RetryAfter(d))
		if l.opts.OnLimit != nil {
			l.opts.OnLimit(w, r, d)
			return
		}
		http.Error(w, "too many requests; retry after "+RetryAfter(d)+"s", http.StatusTooManyRequests)
	})
}

// RetryAfter returns d as the value of a Retry-After header: whole
// seconds, rounded up, at least 1 (RFC 9110, section 10.2.3).
func RetryAfter(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(max(s, 1), 10)
}
