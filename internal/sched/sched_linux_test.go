package sched

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// threadPolicies returns the policy of each thread of the process.
func threadPolicies(t *testing.T) map[int]int {
	t.Helper()
	ps, err := Policies(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return ps
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
	if p := threadPolicies(t)[os.Getpid()]; p != Other {
		t.Skipf("the test runs under policy %d, not the normal one", p)
	}
	release := make(chan struct{})
	wg := moreThreads(4, release)
	defer func() { close(release); wg.Wait() }()
	defer SetProcess(Other)

	if err := SetProcess(Batch); err != nil {
		t.Fatal(err)
	}
	for tid, p := range threadPolicies(t) {
		if p != Batch {
			t.Errorf("thread %d: policy %d after SetProcess(Batch)", tid, p)
		}
	}
	// Threads made later are made by batch threads, and are batch.
	release2 := make(chan struct{})
	wg2 := moreThreads(4, release2)
	for tid, p := range threadPolicies(t) {
		if p != Batch {
			t.Errorf("thread %d: policy %d for a thread made after SetProcess(Batch)", tid, p)
		}
	}
	close(release2)
	wg2.Wait()

	if err := SetProcess(Other); err != nil {
		t.Fatal(err)
	}
	for tid, p := range threadPolicies(t) {
		if p != Other {
			t.Errorf("thread %d: policy %d after SetProcess(Other)", tid, p)
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
	self := syscall.Gettid()
	for tid, p := range threadPolicies(t) {
		if tid != self && p != Other {
			t.Errorf("thread %d: policy %d; only the calling thread was set", tid, p)
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
