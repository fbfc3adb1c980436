package bufpool

import (
	"sync"
	"testing"
)

func TestPool(t *testing.T) {
	for _, tc := range []struct {
		name     string
		put, get int  // the capacity given back, the room asked for
		reused   bool // whether Get may return the buffer given back
	}{
		{name: "within bounds", put: 4096, get: 4000, reused: true},
		{name: "exactly the room", put: 4096, get: 4096, reused: true},
		{name: "too small for the next call", put: 2048, get: 4096},
		{name: "below min", put: 512, get: 100},
		{name: "a small need takes no kept buffer", put: 4096, get: 100},
		{name: "above max", put: 1 << 20, get: 4096},
		{name: "room above max", put: 64 << 10, get: 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(1<<10, 256<<10)
			given := make([]byte, 10, tc.put)
			p.Put(given)
			// sync.Pool may drop what it was given at any time (and does
			// so at random under -race), so a miss is allowed; a hit of
			// a buffer that should not be kept is not.
			got := p.Get(tc.get)
			if len(got) != 0 || cap(got) < tc.get {
				t.Fatalf("Get(%d) = len %d cap %d, want an empty buffer with room for %d", tc.get, len(got), cap(got), tc.get)
			}
			if same := &got[:1][0] == &given[:1][0]; same && !tc.reused {
				t.Fatalf("Get(%d) returned the buffer of capacity %d given back", tc.get, tc.put)
			}
		})
	}
}

// TestPool_Concurrent has goroutines take, fill, check and give back
// buffers: each buffer is its holder's alone between Get and Put (run
// with -race).
func TestPool_Concurrent(t *testing.T) {
	p := New(1<<10, 256<<10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := 1<<10 + (g*200+i)%(8<<10)
				b := p.Get(n)
				for j := 0; j < n; j++ {
					b = append(b, byte(g))
				}
				for j, c := range b {
					if c != byte(g) {
						t.Errorf("goroutine %d: byte %d is %d: the buffer was shared", g, j, c)
						return
					}
				}
				p.Put(b)
			}
		})
	}
	wg.Wait()
}

// TestPool_PutDropsWithoutAllocating: a buffer the pool does not keep
// costs nothing to give back (only a kept one costs sync.Pool's slice
// header).
func TestPool_PutDropsWithoutAllocating(t *testing.T) {
	p := New(1<<10, 256<<10)
	small, large := make([]byte, 100), make([]byte, 0, 1<<20)
	if n := testing.AllocsPerRun(100, func() {
		p.Put(small)
		p.Put(large)
	}); n != 0 {
		t.Errorf("Put of buffers outside the bounds allocates %v times, want 0", n)
	}
}
