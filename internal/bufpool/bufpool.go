// Package bufpool keeps the byte buffers of per-call messages for reuse:
// a large message (a tool call's arguments, a result) would otherwise cost
// a new buffer of its size, zeroed, per call, and the garbage collector's
// work grows with the bytes allocated.
//
// It is its own package because the core (gateway), the edge
// (gateway/legacy) and the stdio client (upstream, for the large answers
// it reads) all hold such messages, and a leaf under internal/ is what
// each may import.
package bufpool

import "sync"

// Pool keeps buffers whose capacity is within [min, max]; smaller ones
// cost less to allocate than to pool, and larger ones would hold memory
// that most calls never need.
type Pool struct {
	min, max int
	p        sync.Pool // of *[]byte
}

// New returns a pool of buffers of min to max bytes.
func New(min, max int) *Pool {
	return &Pool{min: min, max: max}
}

// Get returns an empty buffer with room for n bytes: a kept one that has
// the room, else a new one. A kept one that is too small is dropped. A
// need below the pool's minimum always gets a new buffer of its size, so
// that a small message that is never given back takes no kept buffer
// with it.
func (p *Pool) Get(n int) []byte {
	if p.min <= n && n <= p.max {
		if bp, _ := p.p.Get().(*[]byte); bp != nil && cap(*bp) >= n {
			return (*bp)[:0]
		}
	}
	return make([]byte, 0, n)
}

// Put gives b back for reuse. Nothing may hold b, or any part of its
// array, once it is given back. A buffer outside the pool's bounds is
// left to the garbage collector.
func (p *Pool) Put(b []byte) {
	if c := cap(b); c >= p.min && c <= p.max {
		p.put(b)
	}
}

// put keeps b. It is Put's own function so that only a buffer kept costs
// the slice header sync.Pool holds (&b escapes): one left to the garbage
// collector costs nothing.
func (p *Pool) put(b []byte) { p.p.Put(&b) }
