package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// threadPolicies returns the scheduling policy of each thread of process
// pid: field 41 of proc(5)'s stat.
func threadPolicies(t *testing.T, pid int) map[string]int {
	t.Helper()
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if len(paths) == 0 {
		t.Fatalf("process %d has no threads in /proc", pid)
	}
	out := map[string]int{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from field 3
		p, err := strconv.Atoi(rest[41-3])
		if err != nil {
			t.Fatalf("%s: policy field: %v", path, err)
		}
		out[path] = p
	}
	return out
}

// TestScheduling_Batch: with the top-level scheduling: batch, every thread
// of the gateway runs under SCHED_BATCH, each stdio server under the
// policy of its own scheduling (batch by default, or normal), and calls
// are relayed as ever.
func TestScheduling_Batch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("scheduling policies are Linux's")
	}
	const other, batch = 0, 3
	if threadPolicies(t, os.Getpid())[fmt.Sprintf("/proc/%[1]d/task/%[1]d/stat", os.Getpid())] != other {
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

	for path, p := range threadPolicies(t, g.cmd.Process.Pid) {
		if p != batch {
			t.Errorf("gateway thread %s: policy %d, want SCHED_BATCH (%d)", path, p, batch)
		}
	}
	for name, w := range want {
		for path, p := range threadPolicies(t, pids[name]) {
			if p != w {
				t.Errorf("server %s thread %s: policy %d, want %d", name, path, p, w)
			}
		}
	}
}
