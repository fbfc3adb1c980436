package sched

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Supported reports whether this system has the policies.
const Supported = true

// Thread returns the calling thread's policy. The caller locks its
// goroutine to the thread (runtime.LockOSThread) for the answer to mean
// anything.
func Thread() (int, error) {
	p, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(p), nil
}

// SetThread sets the calling thread's policy, at priority 0. A thread it
// then makes, and a process it then starts, have that policy.
func SetThread(policy int) error {
	return set(0, policy)
}

// SetProcess sets the policy of every thread of the process. The runtime
// makes new threads from existing ones, which pass their policy on, so
// every later thread has it too. A thread made while it works, by one
// not yet set, is found by the next look at the thread list; it is done
// when a look finds no thread it has not set.
func SetProcess(policy int) error {
	done := map[int]bool{}
	for range 100 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing the process's threads: %w", err)
		}
		found := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			found = true
			if err := set(tid, policy); err != nil {
				if errors.Is(err, syscall.ESRCH) {
					continue // the thread ended
				}
				return fmt.Errorf("setting thread %d's scheduling policy: %w", tid, err)
			}
			done[tid] = true
		}
		if !found {
			return nil
		}
	}
	return errors.New("setting the scheduling policy: the process keeps making threads")
}

// set sets thread tid's policy (0: the calling thread's), at priority 0.
func set(tid, policy int) error {
	var param struct{ priority int32 } // struct sched_param
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&param)))
	if errno != 0 {
		return errno
	}
	return nil
}
