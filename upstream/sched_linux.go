package upstream

import (
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"
)

// Scheduling policies (sched(7)).
const (
	schedOther = 0
	schedBatch = 3
)

// startCommand starts cmd; with batch, its process runs under SCHED_BATCH
// (config.SchedulingBatch): it does not preempt the gateway when the
// gateway writes to it, so that on a CPU they share the gateway finishes
// its turn, often writing more requests, before the server reads them.
// Fairness between the two is unchanged.
//
// A new process has the policy of the thread that forked it, and its
// threads have the policy of the thread that made them. So the forking
// thread, locked to this goroutine, is set to batch for the fork and set
// back after; the child is batch from its first instruction, and no thread
// of the gateway stays batch. A gateway thread under any other policy than
// the normal one (set by an operator) is left alone, and so is its child.
func startCommand(cmd *exec.Cmd, batch bool) error {
	if !batch {
		return cmd.Start()
	}
	runtime.LockOSThread()
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 || policy != schedOther || setScheduler(schedBatch) != nil {
		runtime.UnlockOSThread()
		return cmd.Start()
	}
	err := cmd.Start()
	if setScheduler(schedOther) == nil {
		runtime.UnlockOSThread()
	}
	// Else the thread stays locked to this goroutine, and ends with it,
	// rather than run other goroutines as batch.
	return err
}

// setScheduler sets the calling thread's policy, at priority 0.
func setScheduler(policy int) error {
	var param struct{ priority int32 } // struct sched_param
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, uintptr(policy), uintptr(unsafe.Pointer(&param)))
	if errno != 0 {
		return errno
	}
	return nil
}
