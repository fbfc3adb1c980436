package sched

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
			done[tid] = true
			if err := set(tid, policy); err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: the thread ended
				return fmt.Errorf("setting thread %d's scheduling policy: %w", tid, err)
			}
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

// Policies returns the policy of each thread of process pid, by thread
// id, from field 41 of each thread's /proc stat (proc(5)). A thread that
// ends while it reads is left out.
func Policies(pid int) (map[int]int, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("process %d has no threads in /proc", pid)
	}
	out := map[int]int{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from field 3
		if len(rest) <= 41-3 {
			return nil, fmt.Errorf("%s: no policy field", path)
		}
		p, err1 := strconv.Atoi(rest[41-3])
		tid, err2 := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: not a thread's stat", path)
		}
		out[tid] = p
	}
	return out, nil
}
