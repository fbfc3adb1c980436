package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// runIdle is idle mode: open c.idle sessions, each with its GET stream,
// hold them for -duration, and report how much the watched process's RSS
// grew per session; then close everything.
func runIdle(ctx context.Context, c *config) (*report, error) {
	t, err := newTarget(ctx, c, c.idle, 0)
	if err != nil {
		return nil, err
	}
	defer t.close()
	var (
		w      *watcher
		before memStatus
	)
	if len(c.watch) > 0 {
		if w, err = newWatcher(c.watch[0]); err != nil {
			return nil, err
		}
		if before, err = w.memory(); err != nil {
			return nil, fmt.Errorf("watching process %d: %w", c.watch[0], err)
		}
	}

	streams := newStreamSet(ctx)
	start := time.Now()
	sessions, err := t.openSessions(ctx, c.idle, streams.open)
	opened := time.Since(start)
	defer func() {
		streams.close()
		t.closeSessions(ctx, sessions)
	}()
	if err != nil {
		return nil, fmt.Errorf("opening %d idle sessions (mcpgw-bench's open-file limit RLIMIT_NOFILE is %d; the server's may be lower): %w", c.idle, noFileLimit(), err)
	}

	if w != nil {
		w.start()
	}
	holdStart := time.Now()
	hold := time.NewTimer(c.duration)
	select {
	case <-hold.C:
	case <-ctx.Done():
		hold.Stop()
	}
	held := time.Since(holdStart)
	if w != nil {
		w.stop()
	}
	return idleReportOf(c, len(sessions), opened, held, streams.ended.Load(), w, before), nil
}

// idleReportOf builds the report of idle mode.
func idleReportOf(c *config, n int, opened, held time.Duration, ended int64, w *watcher, before memStatus) *report {
	rep := &report{
		Mode:      modeIdle,
		Target:    c.url,
		Sessions:  n,
		DurationS: round3(held.Seconds()),
		Errors:    ended,
		Idle:      &idleReport{OpenS: round3(opened.Seconds()), StreamsEnded: ended},
	}
	if ended > 0 {
		rep.ErrorSamples = append(rep.ErrorSamples, fmt.Sprintf("%d GET streams ended while they were held", ended))
	}
	if w == nil {
		return rep
	}
	wr, err := w.report(0)
	if err != nil {
		rep.Notes = append(rep.Notes, err.Error())
		return rep
	}
	rep.Watched = wr
	beforeMiB, afterMiB := mib(before.rss), mib(w.mem.rss)
	perSession := round1(float64(w.mem.rss-before.rss) / 1024 / float64(max(n, 1)))
	rep.Idle.RSSBeforeMiB, rep.Idle.RSSMiB, rep.Idle.RSSPerSessionKiB = &beforeMiB, &afterMiB, &perSession
	rep.Notes = append(rep.Notes, tickNote(held))
	return rep
}

// streamSet owns the GET streams of idle mode: one goroutine each reads
// and discards its stream until close.
type streamSet struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// ended counts the streams that ended before close.
	ended atomic.Int64
}

func newStreamSet(ctx context.Context) *streamSet {
	ss := &streamSet{}
	ss.ctx, ss.cancel = context.WithCancel(ctx)
	return ss
}

// open opens the session's GET stream (basic/transports, "Listening for
// Messages from the Server") and starts reading it.
func (ss *streamSet) open(s *session) error {
	req, err := http.NewRequestWithContext(ss.ctx, http.MethodGet, s.t.url, nil)
	if err != nil {
		return err
	}
	req.Header = s.header.Clone()
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.t.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		err := statusError(resp)
		resp.Body.Close()
		return fmt.Errorf("GET stream: %w", err)
	}
	if ct := mediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body.Close()
		return fmt.Errorf("GET stream: Content-Type %q, want text/event-stream", ct)
	}
	ss.wg.Go(func() {
		defer resp.Body.Close()
		var buf [256]byte // small: thousands of streams are held at once
		for {
			if _, err := resp.Body.Read(buf[:]); err != nil {
				break
			}
		}
		if ss.ctx.Err() == nil {
			ss.ended.Add(1)
		}
	})
	return nil
}

// close ends every stream and waits for their goroutines.
func (ss *streamSet) close() {
	ss.cancel()
	ss.wg.Wait()
}
