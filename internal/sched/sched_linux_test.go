package sched

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// policyOf returns the policy of the thread whose /proc stat file is
// path: field 41 of proc(5).
func policyOf(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from field 3
	p, err := strconv.Atoi(rest[41-3])
	if err != nil {
		t.Fatalf("%s: policy field: %v", path, err)
	}
	return p
}

// threadPolicies returns the policy of each thread of the process.
func threadPolicies(t *testing.T) map[string]int {
	t.Helper()
	paths, _ := filepath.Glob("/proc/self/task/*/stat")
	out := map[string]int{}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out[p] = policyOf(t, p)
		}
	}
	return out
}

// moreThreads makes the runtime start n more threads, each held by a
// goroutine until release is closed.
func moreThreads(n int, release chan struct{}) *sync.WaitGroup {
	var wg, started sync.WaitGroup
	for range n {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started.Done()
			<-release
		}()
	}
	started.Wait()
	return &wg
}

func TestSetProcess(t *testing.T) {
	if p := policyOf(t, "/proc/self/stat"); p != Other {
		t.Skipf("the test runs under policy %d, not the normal one", p)
	}
	release := make(chan struct{})
	wg := moreThreads(4, release)
	defer func() { close(release); wg.Wait() }()
	defer SetProcess(Other)

	if err := SetProcess(Batch); err != nil {
		t.Fatal(err)
	}
	for path, p := range threadPolicies(t) {
		if p != Batch {
			t.Errorf("%s: policy %d after SetProcess(Batch)", path, p)
		}
	}
	// Threads made later are made by batch threads, and are batch.
	release2 := make(chan struct{})
	wg2 := moreThreads(4, release2)
	for path, p := range threadPolicies(t) {
		if p != Batch {
			t.Errorf("%s: policy %d for a thread made after SetProcess(Batch)", path, p)
		}
	}
	close(release2)
	wg2.Wait()

	if err := SetProcess(Other); err != nil {
		t.Fatal(err)
	}
	for path, p := range threadPolicies(t) {
		if p != Other {
			t.Errorf("%s: policy %d after SetProcess(Other)", path, p)
		}
	}
}

func TestSetThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := Thread()
	if err != nil {
		t.Fatal(err)
	}
	if before != Other {
		t.Skipf("the test runs under policy %d, not the normal one", before)
	}
	if err := SetThread(Batch); err != nil {
		t.Fatal(err)
	}
	got, err := Thread()
	if err != nil || got != Batch {
		t.Fatalf("Thread() = %d, %v after SetThread(Batch)", got, err)
	}
	// Only this thread.
	self := fmt.Sprintf("/proc/self/task/%d/stat", syscall.Gettid())
	for path, p := range threadPolicies(t) {
		if path != self && p != Other {
			t.Errorf("%s: policy %d; only the calling thread was set", path, p)
		}
	}
	if err := SetThread(Other); err != nil {
		t.Fatal(err)
	}
	if got, _ := Thread(); got != Other {
		t.Fatalf("Thread() = %d after SetThread(Other)", got)
	}
}

func TestSet_Invalid(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := SetThread(12345); err == nil {
		t.Fatal("SetThread(12345) did not fail")
	}
	if got, _ := Thread(); got != Other {
		t.Fatalf("a failed SetThread changed the policy to %d", got)
	}
}
