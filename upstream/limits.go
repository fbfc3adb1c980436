package upstream

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgw/mcpgw/config"
)

// Reasons of a RateLimitedError.
const (
	// ReasonRate: the server's rate_limit.rate and burst are used up.
	ReasonRate = "rate"
	// ReasonConcurrency: rate_limit.max_concurrent calls are in flight.
	ReasonConcurrency = "concurrency"
)

// RateLimitedError is returned by Manager.Call for a call over its
// server's rate_limit (config.ServerLimit), before anything is sent to the
// server. The gateway answers it with CodeRateLimited.
type RateLimitedError struct {
	Server string
	// RetryAfter is when the server's bucket next holds a token
	// (ReasonRate). It is 0 for ReasonConcurrency, where a slot frees when
	// one of the calls in flight ends.
	RetryAfter time.Duration
	// Reason is ReasonRate or ReasonConcurrency.
	Reason string
}

func (e *RateLimitedError) Error() string {
	if e.Reason == ReasonConcurrency {
		return fmt.Sprintf("server %q already has as many calls in flight as its rate_limit.max_concurrent allows; try again later", e.Server)
	}
	return fmt.Sprintf("server %q is over its rate limit; retry after %s", e.Server, e.RetryAfter.Round(time.Millisecond))
}

// limits enforces one server's rate_limit: a token bucket for the calls
// per second, and a semaphore of the calls in flight. A nil *limits
// limits nothing.
//
// Every Manager.Call counts, whatever its method, the gateway's own
// tasks/get polling on a client's behalf included; what the Manager sends
// by itself (initialize, list refreshes, logging/setLevel, restored
// subscriptions) goes to the client directly and does not. An entry's
// limits are made with it, so a change of the server (Replace, SetEnabled,
// Restart) starts them anew, with the new configuration's numbers.
type limits struct {
	bucket *rate.Limiter // nil: no rate limit
	slots  chan struct{} // nil: no concurrency limit
}

// newLimits returns the limits of l, or nil when it sets none.
func newLimits(l config.ServerLimit) *limits {
	if l.Rate <= 0 && l.MaxConcurrent <= 0 {
		return nil
	}
	ls := &limits{}
	if l.Rate > 0 {
		// Validation requires burst >= 1 with a rate; a bucket of 0
		// would refuse every call.
		ls.bucket = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
	if l.MaxConcurrent > 0 {
		ls.slots = make(chan struct{}, l.MaxConcurrent)
	}
	return ls
}

// acquire admits one call of server at now, or returns a
// *RateLimitedError at once: it never waits. The call holds a slot (when
// there is a concurrency limit) until it calls release; a refused call
// takes neither a slot nor a token.
func (ls *limits) acquire(server string, now time.Time) (release func(), err error) {
	if ls == nil {
		return func() {}, nil
	}
	release = func() {}
	if ls.slots != nil {
		select {
		case ls.slots <- struct{}{}:
			release = func() { <-ls.slots }
		default:
			return nil, &RateLimitedError{Server: server, Reason: ReasonConcurrency}
		}
	}
	if ls.bucket != nil && !ls.bucket.AllowN(now, 1) {
		release()
		return nil, &RateLimitedError{Server: server, Reason: ReasonRate, RetryAfter: tokenDelay(ls.bucket, now)}
	}
	return release, nil
}

// tokenDelay returns how long from now until lim holds a whole token.
// (Reserve and Cancel would give it too, but a reservation cancelled
// behind a later one returns no token, so refused calls would drain the
// bucket under load.)
func tokenDelay(lim *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / float64(lim.Limit()) * float64(time.Second)))
}
