package e2e

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/sched"
)

// threadPolicies returns the policy of each thread of process pid.
func threadPolicies(t *testing.T, pid int) map[int]int {
	t.Helper()
	ps, err := sched.Policies(pid)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestScheduling_Batch: with the top-level scheduling: batch, every thread
// of the gateway runs under SCHED_BATCH, each stdio server under the
// policy of its own scheduling (batch by default, or normal), and calls
// are relayed as ever.
func TestScheduling_Batch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("scheduling policies are Linux's")
	}
	const other, batch = sched.Other, sched.Batch
	if threadPolicies(t, os.Getpid())[os.Getpid()] != other {
		t.Skip("the test does not run under the normal policy")
	}
	g := startGateway(t, baseEnv(), fmt.Sprintf(`scheduling: batch
servers:
  - name: dflt
    transport: stdio
    command: %[1]s
  - name: norm
    transport: stdio
    command: %[1]s
    scheduling: normal
`, bin("demo-server")))
	want := map[string]int{"dflt": batch, "norm": other}
	pids := map[string]int{}
	for name := range want {
		pids[name] = g.waitState(t, name, "running").PID
	}

	cs := connect(t, g.URL+"/mcp", "")
	for name := range want {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp__" + name + "__echo", Arguments: map[string]any{"text": "hello " + name}})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(res); got != "hello "+name {
			t.Errorf("echo via %s = %q", name, got)
		}
	}

	for tid, p := range threadPolicies(t, g.cmd.Process.Pid) {
		if p != batch {
			t.Errorf("gateway thread %d: policy %d, want SCHED_BATCH (%d)", tid, p, batch)
		}
	}
	for name, w := range want {
		for tid, p := range threadPolicies(t, pids[name]) {
			if p != w {
				t.Errorf("server %s thread %d: policy %d, want %d", name, tid, p, w)
			}
		}
	}
}
