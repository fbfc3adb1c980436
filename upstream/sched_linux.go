package upstream

import (
	"os/exec"
	"runtime"

	"github.com/mcpgw/mcpgw/internal/sched"
)

// startCommand starts cmd; with batch, its process runs under SCHED_BATCH
// (config.SchedulingBatch), else under the normal policy: a batch server
// does not preempt the gateway when the gateway writes to it, so that on
// a CPU they share the gateway finishes its turn, often writing more
// requests, before the server reads them. Fairness between the two is
// unchanged.
//
// A new process has the policy of the thread that forked it, and its
// threads have the policy of the thread that made them. So the forking
// thread, locked to this goroutine, is set to the server's policy for the
// fork and set back after; the child has it from its first instruction,
// and the gateway's threads keep theirs (normal, or batch with the
// config's top-level scheduling). A gateway thread under any other policy
// (set by an operator: real-time, idle) is left alone, and so is its
// child.
func startCommand(cmd *exec.Cmd, batch bool) error {
	want := sched.Other
	if batch {
		want = sched.Batch
	}
	runtime.LockOSThread()
	policy, err := sched.Thread()
	if err != nil || policy == want || (policy != sched.Other && policy != sched.Batch) || sched.SetThread(want) != nil {
		runtime.UnlockOSThread()
		return cmd.Start()
	}
	err = cmd.Start()
	if sched.SetThread(policy) == nil {
		runtime.UnlockOSThread()
	}
	// Else the thread stays locked to this goroutine, and ends with it,
	// rather than run other goroutines under the server's policy.
	return err
}
