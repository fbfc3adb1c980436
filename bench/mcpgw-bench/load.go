package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// callFunc sends one request, waits for its answer and checks it. It
// returns the request's latency, from just before sending to having the
// answer's JSON-RPC envelope parsed, and for tools/list the number of tools.
// One callFunc is called by one goroutine at a time.
type callFunc func(ctx context.Context) (latency time.Duration, tools int, err error)

// errStopped is wrapped by a callFunc's error when no further call can
// succeed (the stdio server is gone): the worker stops.
var errStopped = errors.New("the connection to the server is gone")

// maxErrorSamples is how many error messages a report keeps.
const maxErrorSamples = 5

// plan is when a load run measures and when it ends.
type plan struct {
	warmup      time.Duration
	duration    time.Duration
	maxRequests int64 // measured requests in all; 0 means no limit
	sessions    int   // for sizing the latency samples
}

func (c *config) plan() plan {
	return plan{warmup: c.warmup, duration: c.duration, maxRequests: c.requests, sessions: c.sessions}
}

// loadResult is what a load run measured.
type loadResult struct {
	measured     bool            // the measured period began
	elapsed      time.Duration   // from its start until the last worker ended
	ok, errors   int64           // measured requests
	samples      []time.Duration // latencies of the ok requests, sorted
	errorSamples []string
	tools        int           // tools on the last tools/list page seen
	cpu          time.Duration // this process's user+sys time over the period
}

// runLoad runs one worker per call until the plan ends or ctx is done, and
// calls onStart and onEnd (either may be nil) at the two ends of the
// measured period. A request still in flight callGrace after the end is
// given up (the context passed to the calls ends) and counted as an error.
func runLoad(ctx context.Context, p plan, calls []callFunc, onStart, onEnd func()) loadResult {
	var res loadResult
	t0 := time.Now()
	mStart := t0.Add(p.warmup)
	mEnd := mStart.Add(p.duration)
	callCtx, cancel := context.WithDeadline(ctx, mEnd.Add(callGrace))
	defer cancel()

	var (
		measureStart time.Time
		cpu0         time.Duration
		// begun is set once the measured period has begun: the workers
		// count the requests they start after that, and not by the
		// clock, so that what is counted is what the snapshots and
		// measureStart frame, however late the timer fires.
		begun atomic.Bool
	)
	begin := func() {
		res.measured = true
		cpu0 = selfCPU()
		if onStart != nil {
			onStart()
		}
		measureStart = time.Now()
		begun.Store(true)
	}
	if p.warmup <= 0 {
		begin()
	}

	var issued atomic.Int64
	workers := make([]worker, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		w := &workers[i]
		w.samples = make([]time.Duration, 0, sampleCap(p))
		wg.Go(func() { w.run(ctx, callCtx, call, &begun, mEnd, p.maxRequests, &issued) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if p.warmup > 0 {
		t := time.NewTimer(time.Until(mStart))
		select {
		case <-t.C:
			begin()
		case <-done:
			t.Stop()
		}
	}
	<-done
	if !res.measured {
		return merge(res, workers)
	}
	res.elapsed = time.Since(measureStart)
	res.cpu = selfCPU() - cpu0
	if onEnd != nil {
		onEnd()
	}
	return merge(res, workers)
}

// sampleCap is the initial capacity of a worker's latency samples: enough
// for a fast server without growing, bounded so that many sessions do not
// reserve much.
func sampleCap(p plan) int {
	n := int(p.duration.Seconds()*50_000) / p.sessions
	if p.maxRequests > 0 {
		n = min(n, int(p.maxRequests/int64(p.sessions))+1)
	}
	return max(min(n, 1<<20), 1024)
}

// worker is one session's or stdio worker's share of a load run.
type worker struct {
	ok, errors int64
	samples    []time.Duration
	errs       []string
	tools      int
}

// run sends requests back to back. Requests starting in the measured
// period (once begun is set, until mEnd) are counted; ctx ending (a
// signal) stops the run without counting the request it cut short.
func (w *worker) run(ctx, callCtx context.Context, call callFunc, begun *atomic.Bool, mEnd time.Time, maxRequests int64, issued *atomic.Int64) {
	for {
		if callCtx.Err() != nil || !time.Now().Before(mEnd) {
			return
		}
		measured := begun.Load()
		if measured && maxRequests > 0 && issued.Add(1) > maxRequests {
			return
		}
		lat, tools, err := call(callCtx)
		if ctx.Err() != nil {
			return
		}
		stopped := errors.Is(err, errStopped)
		switch {
		case err != nil && (measured || stopped):
			w.errors++
			if len(w.errs) < maxErrorSamples {
				w.errs = append(w.errs, err.Error())
			}
		case err == nil && measured:
			w.ok++
			w.samples = append(w.samples, lat)
			w.tools = tools
		}
		if stopped {
			return
		}
	}
}

// merge adds the workers' counts and samples to res.
func merge(res loadResult, workers []worker) loadResult {
	n := 0
	for i := range workers {
		n += len(workers[i].samples)
	}
	res.samples = make([]time.Duration, 0, n)
	for i := range workers {
		w := &workers[i]
		res.ok += w.ok
		res.errors += w.errors
		res.samples = append(res.samples, w.samples...)
		res.tools = max(res.tools, w.tools)
		for _, e := range w.errs {
			if len(res.errorSamples) < maxErrorSamples {
				res.errorSamples = append(res.errorSamples, e)
			}
		}
	}
	slices.Sort(res.samples)
	return res
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample with at least p% of the
// samples at or below it. It is exact, and 0 for no samples.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n), in integers
	return sorted[max(rank, 1)-1]
}

// selfCPU returns this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
