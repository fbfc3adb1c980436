package upstream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sched"
)

// schedPolicy returns the scheduling policy of the thread or process whose
// /proc stat file is path: field 41 of proc(5).
func schedPolicy(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // after comm, from field 3
	p, err := strconv.Atoi(rest[41-3])
	if err != nil {
		t.Fatalf("%s: policy field: %v", path, err)
	}
	return p
}

func TestStdioTransport_Scheduling(t *testing.T) {
	initial := schedPolicy(t, "/proc/self/stat")
	for _, gateway := range []int{sched.Other, sched.Batch} {
		for _, tt := range []struct {
			scheduling string
			want       int
		}{
			{"", sched.Batch}, // the default
			{config.SchedulingBatch, sched.Batch},
			{config.SchedulingNormal, sched.Other},
		} {
			t.Run(fmt.Sprintf("gateway %d, %q", gateway, tt.scheduling), func(t *testing.T) {
				want, ours := tt.want, gateway
				switch {
				case initial != sched.Other:
					// Run under another policy by whoever started the
					// test: startCommand leaves it, and the child
					// inherits it.
					if gateway != sched.Other {
						t.Skip("the test does not run under the normal policy")
					}
					want, ours = initial, initial
				case gateway != sched.Other:
					// The gateway's own threads batch (the config's
					// top-level scheduling).
					if err := sched.SetProcess(gateway); err != nil {
						t.Fatal(err)
					}
					defer sched.SetProcess(sched.Other)
				}
				srv := fakeServerConfig(t, "")
				srv.Scheduling = tt.scheduling
				tr := newStdioTransport(srv, &ClientOptions{Name: "fake", StopGrace: testGrace}).(*stdioTransport)
				t.Cleanup(func() { tr.close(context.Background()) })
				got := make(chan *jsonrpc.Message, 1)
				if err := tr.start(context.Background(), func(m *jsonrpc.Message, _ related) { got <- m }); err != nil {
					t.Fatal(err)
				}
				// The child answers: it runs, and so do the threads it made.
				if err := tr.send(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(1), "ping", nil)); err != nil {
					t.Fatal(err)
				}
				<-got
				tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", tr.pid()))
				if len(tasks) == 0 {
					t.Fatal("the child has no threads in /proc")
				}
				for _, task := range tasks {
					if p := schedPolicy(t, task); p != want {
						t.Errorf("child thread %s: policy %d, want %d", task, p, want)
					}
				}
				// No thread of ours was left with the child's policy by
				// the fork.
				threads, _ := filepath.Glob("/proc/self/task/*/stat")
				for _, task := range threads {
					if _, err := os.Stat(task); err != nil {
						continue // ended since
					}
					if p := schedPolicy(t, task); p != ours {
						t.Errorf("gateway thread %s: policy %d after the start, want %d", task, p, ours)
					}
				}
			})
		}
	}
}
