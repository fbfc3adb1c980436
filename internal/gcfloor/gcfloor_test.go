package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		floor, live uint64
		want        int
	}{
		{"before the first collection", 8 * mib, 0, 200},
		{"tiny live heap: the runtime's minimum at 200 is the floor", 8 * mib, 1 * mib, 200},
		{"live heap near half the floor", 8 * mib, 3 * mib, 167},
		{"live heap at half the floor: the default", 8 * mib, 4 * mib, 100},
		{"live heap above the floor", 8 * mib, 100 * mib, 100},
		{"floor at the runtime's minimum", 4 * mib, 1 * mib, 100},
		{"floor below the runtime's minimum", 1 * mib, 0, 100},
		{"larger floor", 32 * mib, 2 * mib, 800},
		{"larger floor, larger heap", 32 * mib, 10 * mib, 220},
		{"one byte live", 8 * mib, 1, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.floor, tc.live)
			if got != tc.want {
				t.Fatalf("Percent(%d, %d) = %d, want %d", tc.floor, tc.live, got, tc.want)
			}
			// The runtime's goal with it is the floor, the default's twice
			// the live heap, or the runtime's minimum, whichever is largest
			// (to within rounding).
			goal := max(tc.live*uint64(100+got)/100, runtimeMinimum*uint64(got)/100)
			want := max(tc.floor, 2*tc.live, runtimeMinimum)
			if goal < want || goal > want+want/100 {
				t.Fatalf("goal %d, want %d", goal, want)
			}
		})
	}
}

// gcPercent reads the process's GC percent.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// waitPercent collects until the tuner has set want, or fails.
func waitPercent(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d, want %d", gcPercent(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

var keep [][]byte

func TestStart(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	const floor = 64 << 20
	stop, started := Start(floor, noEnv)
	if !started {
		t.Fatal("Start did not start without GOGC")
	}
	// Small live heap: the percent that puts the runtime's minimum at the
	// floor.
	waitPercent(t, 1600)

	// A live heap past half the floor: the default.
	for range 48 {
		keep = append(keep, make([]byte, 1<<20))
	}
	waitPercent(t, 100)

	// Dropped again: back to the floor.
	keep = nil
	waitPercent(t, 1600)

	stop()
	if p := gcPercent(); p != 100 {
		t.Fatalf("after stop the GC percent is %d, want the 100 Start found", p)
	}
	// Stopped, it sets nothing more, and a second stop is harmless.
	debug.SetGCPercent(150)
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := gcPercent(); p != 150 {
		t.Fatalf("a stopped tuner set the GC percent to %d", p)
	}
	stop()
	if p := gcPercent(); p != 150 {
		t.Fatalf("a second stop set the GC percent to %d", p)
	}
}

func TestStart_GOGCSet(t *testing.T) {
	before := debug.SetGCPercent(123)
	defer debug.SetGCPercent(before)
	stop, started := Start(64<<20, func(k string) (string, bool) { return "123", k == "GOGC" })
	defer stop()
	if started {
		t.Fatal("Start started although GOGC is set")
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 123 {
		t.Fatalf("GC percent %d, want the operator's 123", p)
	}
}
