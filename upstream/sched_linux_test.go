package upstream

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sched"
)

// policies returns the policy of each thread of process pid.
func policies(t *testing.T, pid int) map[int]int {
	t.Helper()
	ps, err := sched.Policies(pid)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestStdioTransport_Scheduling(t *testing.T) {
	initial := policies(t, os.Getpid())[os.Getpid()]
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
				tr := newStdioTransport(srv, &ClientOptions{Name: "fake", StopGrace: testGrace, Logger: logOnFailure(t, nil)}).(*stdioTransport)
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
				for tid, p := range policies(t, tr.pid()) {
					if p != want {
						t.Errorf("child thread %d: policy %d, want %d", tid, p, want)
					}
				}
				// No thread of ours was left with the child's policy by
				// the fork.
				for tid, p := range policies(t, os.Getpid()) {
					if p != ours {
						t.Errorf("gateway thread %d: policy %d after the start, want %d", tid, p, ours)
					}
				}
			})
		}
	}
}
