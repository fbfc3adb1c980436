package upstream

// The listen stream of a modern server (spec-2026-07-28 §2.5): the only
// way such a server tells of changes that belong to no request. A Client
// holds one subscriptions/listen request open per server (over HTTP a POST
// whose event stream stays open; over stdio a request whose id stays
// pending) for the tools, prompts and resources list changes and the
// resource URIs subscribed through it.
//
//	runListen ─► open listen #n ──► ack ──► close #n-1 (if any)
//	                 ▲                │
//	                 │                ├─ subscriptions change ─► open #n+1, keep #n until #n+1 acks
//	                 └── backoff ◄────┴─ result (graceful close) or drop
//
// Its notifications lose _meta's subscriptionId and go to OnNotification
// as a legacy server's unsolicited ones do.

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Re-opening a listen stream: exponential with jitter, reset by an ack.
const (
	listenBackoffMin = 500 * time.Millisecond
	listenBackoffMax = 30 * time.Second
)

// listenRun is one subscriptions/listen request.
type listenRun struct {
	id    jsonrpc.ID
	stop  context.CancelFunc
	acked chan struct{} // closed by the first acknowledgement
	ack   sync.Once
	done  chan struct{} // closed when the request ended
	err   error         // why it ended (nil: the server's listen result); set before done
}

// runListen keeps a listen stream open until ctx ends or the transport
// does.
func (c *Client) runListen(ctx context.Context) {
	var old *listenRun // still open until its successor is acknowledged
	defer func() {
		if old != nil {
			old.stop()
			<-old.done
		}
	}()
	wait := time.Duration(0)
	for {
		run := c.openListen(ctx)
		acked, changed := false, false
		select {
		case <-run.acked:
			acked = true
		case <-run.done:
		case <-c.subsChanged:
			changed = true
		case <-ctx.Done():
		case <-c.t.done():
		}
		if acked {
			wait = 0
			if old != nil {
				old.stop()
				<-old.done
				old = nil
			}
			select {
			case <-run.done:
			case <-c.subsChanged:
				changed = true
			case <-ctx.Done():
			case <-c.t.done():
			}
		}
		if changed {
			// Over HTTP, open the next before closing this one, so that
			// nothing falls between them. Of two open ones, the one kept
			// is the acknowledged (or the older) one. A stdio process is
			// one session to its server, and servers keep one listen per
			// session (go-sdk v1.8 forgets the new one when the old one
			// ends): there the old one is closed first.
			switch {
			case !c.requestStreams():
				c.closeListenAndWait(ctx, run)
				if old != nil {
					c.closeListenAndWait(ctx, old)
					old = nil
				}
			case old == nil:
				old = run
			case acked:
				old.stop()
				<-old.done
				old = run
			default:
				run.stop()
				<-run.done
			}
			continue
		}
		run.stop()
		<-run.done
		if ctx.Err() != nil || isDone(c.t.done()) {
			return
		}
		if run.err != nil {
			c.logger.Debug("listen stream ended; opening it again", "err", run.err)
		} else {
			c.logger.Debug("server closed the listen stream; opening it again")
		}
		wait = min(max(2*wait, listenBackoffMin), listenBackoffMax)
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-c.t.done():
		}
		t.Stop()
		if ctx.Err() != nil || isDone(c.t.done()) {
			return
		}
	}
}

// listenEndWait bounds how long closeListenAndWait waits for the server
// to end a cancelled listen: a server that follows the spec never answers
// a cancelled request.
const listenEndWait = 500 * time.Millisecond

// closeListenAndWait cancels run and waits until the server has ended it
// too (its answer came), for at most listenEndWait. Over stdio a server
// keeps one listen per session, and one that cleans up a cancelled listen
// after the next one arrived forgets the next one with it (the npm
// everything-server does, now and then): the next listen goes only once
// the server is done with this one.
func (c *Client) closeListenAndWait(ctx context.Context, run *listenRun) {
	ended := make(chan struct{})
	c.mu.Lock()
	c.closing[run.id.String()] = ended
	c.mu.Unlock()
	run.stop()
	<-run.done
	if run.err == nil {
		// The server ended it before the cancellation: done.
		c.mu.Lock()
		delete(c.closing, run.id.String())
		c.mu.Unlock()
		return
	}
	t := time.NewTimer(listenEndWait)
	select {
	case <-ended:
	case <-t.C:
	case <-ctx.Done():
	case <-c.t.done():
	}
	t.Stop()
	c.mu.Lock()
	delete(c.closing, run.id.String())
	c.mu.Unlock()
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// listenParams returns the params of a subscriptions/listen for subs.
func (c *Client) listenParams(subs []string) json.RawMessage {
	if subs == nil {
		subs = []string{}
	}
	filter, _ := json.Marshal(map[string]any{
		"toolsListChanged":      true,
		"promptsListChanged":    true,
		"resourcesListChanged":  true,
		"resourceSubscriptions": subs,
	})
	params, _ := json.Marshal(map[string]json.RawMessage{"notifications": filter})
	stamped, err := stampMeta(params, c.stampFor(nil))
	if err != nil {
		return params // cannot happen: params is an object
	}
	return stamped
}

// openListen sends a subscriptions/listen for the URIs subscribed now and
// returns it while it runs.
func (c *Client) openListen(ctx context.Context) *listenRun {
	rctx, stop := context.WithCancel(ctx)
	run := &listenRun{id: jsonrpc.IntID(c.nextID.Add(1)), stop: stop, acked: make(chan struct{}), done: make(chan struct{})}
	params := c.listenParams(c.Subscriptions())
	c.mu.Lock()
	c.listens[run.id.String()] = run
	c.mu.Unlock()
	go func() {
		defer close(run.done)
		defer func() {
			c.mu.Lock()
			delete(c.listens, run.id.String())
			c.mu.Unlock()
		}()
		raw, err := c.roundTripID(rctx, run.id, "subscriptions/listen", params, "", nil, nil)
		if err == nil {
			if _, nerr := normalizeResult(c.opts.Name, raw, false, false); nerr != nil {
				err = nerr
			}
		}
		run.err = err
	}()
	return run
}

// listenNotification handles a notification of a listen stream: it
// carries our listen's id as its subscriptionId, or came on the stream
// of the listen's POST (rel). It reports whether m was one. The
// acknowledgement is logged; the rest go to OnNotification without the
// subscriptionId.
func (c *Client) listenNotification(m *jsonrpc.Message, rel related) bool {
	sid := subscriptionID(m.Params)
	c.mu.Lock()
	run := c.listens[sid]
	if run == nil && rel.IsValid() {
		run = c.listens[rel.String()]
	}
	c.mu.Unlock()
	if run == nil {
		if sid == "" {
			return false
		}
		// A listen of ours that ended, or a stranger's id: either way
		// it is not for a call.
		c.logger.Debug("dropping a notification of no open listen stream", "method", m.Method)
		return true
	}
	if m.Method == "notifications/subscriptions/acknowledged" {
		honoured, _, _ := rawjson.Get(m.Params, "notifications")
		c.logger.Debug("listen stream acknowledged", "honoured", string(honoured))
		run.ack.Do(func() { close(run.acked) })
		return true
	}
	n := *m
	n.Params = stripSubscriptionID(m.Params)
	if n.Method == "notifications/message" {
		c.tapLog(&n)
	}
	if c.opts.OnNotification != nil {
		c.opts.OnNotification(&n)
	}
	return true
}
