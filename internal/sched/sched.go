// Package sched sets the Linux scheduling policy (sched(7)) of mcpgw's own
// threads and of the threads that start its stdio servers.
//
// Why: on a CPU that mcpgw shares with its stdio servers, a process that
// preempts the other each time it wakes it (its input has arrived) turns
// a batch of calls into one switch per call. The stdio servers run under
// SCHED_BATCH by default (config.Server.Scheduling), so that they do not
// preempt mcpgw; the config's top-level scheduling puts mcpgw's own
// threads there too, so that mcpgw does not preempt them either (issue
// 10, BENCHMARKS.md: a fifth less of mcpgw's CPU per call at 8 sessions
// over stdio).
//
// It is its own package because the binary sets the process's policy and
// the upstream package a forking thread's, with the same system calls.
package sched

// Policies of sched(7) that mcpgw sets.
const (
	Other = 0 // SCHED_OTHER, the normal policy
	Batch = 3 // SCHED_BATCH
)
