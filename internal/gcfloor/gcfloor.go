// Package gcfloor keeps the Go garbage collector from starting a cycle
// before the heap has reached a floor, while the live heap is small.
//
// Why: the runtime starts a collection when the heap has grown by GOGC
// percent of what the last one left live, and not before it reaches 4 MiB
// × GOGC/100. Under load mcpgw's live heap is 1–2 MiB while each relayed
// call allocates a few KiB, so with the defaults it collects every few
// hundred calls (about 20 times a second at 64 sessions), and every cycle
// scans the stack of each call waiting on its upstream. Measured with
// GODEBUG=gctrace=1 at 64 sessions over stdio (issue 10, BENCHMARKS.md),
// an 8 MiB floor took a 5 s run's collections from 110 to 42 and their
// CPU from about 7.6 to 2.5 µs per call, for about 4 MiB more resident
// memory (24.3 -> 28.3 MiB). Above the floor nothing changes: once the live
// heap is half the floor or more, the runtime's default (GOGC=100) holds,
// so a gateway holding 10,000 sessions keeps the default's memory bound.
//
// The only lever the runtime offers is the GC percent, which also scales
// its 4 MiB minimum. After each cycle Start's tuner sets the percent that
// puts the next goal at the floor: floor/live - 1, but at least 100 and at
// most floor/4 MiB (above which the runtime's own minimum would pass the
// floor).
//
// It is its own package because it is process-wide state that only the
// binary's serve command sets, and its tests change the process's GC
// percent, which no other package's tests should see.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the floor mcpgw serves with when GOGC is not set.
const DefaultFloor = 8 << 20

// runtimeMinimum is the runtime's least heap goal at GOGC=100.
const runtimeMinimum = 4 << 20

// Percent returns the GC percent that puts the heap goal after a cycle
// that left live bytes to scan (the live heap, stacks and globals) at
// floor, within [100, floor/4 MiB × 100].
func Percent(floor, live uint64) int {
	hi := floor * 100 / runtimeMinimum
	if hi <= 100 {
		return 100
	}
	if live == 0 {
		return int(hi)
	}
	// goal = live × (1 + p/100) >= floor
	need := (floor*100 + live - 1) / live // 100 + p
	if need <= 200 {
		return 100
	}
	return int(min(need-100, hi))
}

// tuner is one Start's state, shared with the cleanup that runs after
// each collection.
type tuner struct {
	floor uint64

	mu      sync.Mutex // serializes cycle and stop, and guards:
	stopped bool
	percent int // what the tuner last set
	before  int // the percent it found

	samples []metrics.Sample
}

// sentinel is allocated for each cycle to be collected by the next: its
// cleanup is the tuner's hook. It holds a pointer so that it is not
// tiny-allocated (tiny objects share a block and may never be collected
// alone).
type sentinel struct {
	_ *byte
	_ [8]byte
}

// Start keeps the heap goal at floor or above until stop is called, which
// puts back the GC percent Start found. If the environment sets GOGC (looked
// up with lookupEnv), the operator's choice stands: Start does nothing and
// reports false.
func Start(floor uint64, lookupEnv func(string) (string, bool)) (stop func(), started bool) {
	if _, set := lookupEnv("GOGC"); set {
		return func() {}, false
	}
	t := &tuner{floor: floor, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	t.mu.Lock()
	t.percent = Percent(floor, t.live())
	t.before = debug.SetGCPercent(t.percent)
	t.mu.Unlock()
	t.arm()
	return t.stop, true
}

// arm asks for a call of cycle after the next collection.
func (t *tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*tuner).cycle, t)
}

// cycle runs after a collection: it sets the percent for the next one and
// asks to be called after it.
func (t *tuner) cycle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if p := Percent(t.floor, t.live()); p != t.percent {
		t.percent = p
		debug.SetGCPercent(p)
	}
	t.arm()
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.before)
}

// live returns what the last collection left for the next to scan: the
// live heap, the stacks and the globals (0 before the first collection).
func (t *tuner) live() uint64 {
	metrics.Read(t.samples)
	var n uint64
	for _, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}
