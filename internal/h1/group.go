package h1

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// A Group ends the requests whose context carries it (WithGroup) when it
// is closed, as the end of each one's context would: their exchanges
// under way are cut, their dials and the requests handed to the Fallback
// are cancelled, and later requests fail with ErrGroupClosed. It is for
// requests that must end when either of two things ends, their caller
// (the context) or a client they belong to (the group): the context of
// each request may then be the caller's own, where otherwise each would
// need one of its own that follows both, and the caller's context one
// more child. For mcpgw's calls to an HTTP upstream that context and its
// links were 9 of the 71 allocations of a call (BenchmarkClient_CallHTTP)
// and 2-4 µs, 4-8%, of mcpgw's CPU per call at 64 sessions (issue 10,
// BENCHMARKS.md).
//
// The zero Group is ready to use. A Group must not be copied after first
// use.
type Group struct {
	mu     sync.Mutex
	closed bool
	conns  map[*conn]struct{}               // exchanges under way
	held   map[*context.CancelFunc]struct{} // dials, and requests to the Fallback
}

// ErrGroupClosed is the error of a request whose group was closed.
var ErrGroupClosed = errors.New("the client the request belongs to was closed")

type groupKey struct{}

// WithGroup returns ctx carrying g: the requests made with it end when g
// is closed.
func WithGroup(ctx context.Context, g *Group) context.Context {
	return context.WithValue(ctx, groupKey{}, g)
}

func groupOf(ctx context.Context) *Group {
	g, _ := ctx.Value(groupKey{}).(*Group)
	return g
}

// Close ends g's requests under way, and fails its later ones.
func (g *Group) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	// Under mu: a connection whose exchange has left g (and may be idle
	// in the pool, or carrying another request) is never cut.
	for c := range g.conns {
		c.cut()
	}
	for cancel := range g.held {
		(*cancel)()
	}
	clear(g.conns)
	clear(g.held)
}

// isClosed reports whether g was closed.
func (g *Group) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// groupErr is the error of a request of g (nil when it has none) that
// failed with err: ErrGroupClosed when g was closed, which is why.
func groupErr(g *Group, err error) error {
	if g != nil && g.isClosed() {
		return ErrGroupClosed
	}
	return err
}

// join records the exchange that c is about to carry, unless g is closed.
func (g *Group) join(c *conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if g.conns == nil {
		g.conns = make(map[*conn]struct{})
	}
	g.conns[c] = struct{}{}
	c.group = g
	return true
}

// leave forgets c's exchange, which is over.
func (c *conn) leave() {
	g := c.group
	if g == nil {
		return
	}
	c.group = nil
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// hold returns a context of ctx that g's Close cancels, and the func that
// lets it go, unless g is closed.
func (g *Group) hold(ctx context.Context) (context.Context, func(), bool) {
	ctx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		cancel()
		return nil, nil, false
	}
	if g.held == nil {
		g.held = make(map[*context.CancelFunc]struct{})
	}
	key := &cancel
	g.held[key] = struct{}{}
	g.mu.Unlock()
	return ctx, func() {
		g.mu.Lock()
		delete(g.held, key)
		g.mu.Unlock()
		cancel()
	}, true
}

// fallback hands req to the Fallback, held by its group if it has one.
func (t *Transport) fallback(req *http.Request) (*http.Response, error) {
	g := groupOf(req.Context())
	if g == nil {
		return t.Fallback.RoundTrip(req)
	}
	ctx, release, ok := g.hold(req.Context())
	if !ok {
		closeBody(req)
		return nil, ErrGroupClosed
	}
	resp, err := t.Fallback.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, groupErr(g, err)
	}
	resp.Body = &heldBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// heldBody is the body of a response from the Fallback to a request of a
// group, which it lets go when closed.
type heldBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
