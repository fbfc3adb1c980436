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
	for _, tt := range []struct {
		scheduling string
		want       int
	}{
		{"", schedBatch}, // the default
		{config.SchedulingBatch, schedBatch},
		{config.SchedulingNormal, schedOther},
	} {
		t.Run(fmt.Sprintf("%q", tt.scheduling), func(t *testing.T) {
			ours := schedPolicy(t, "/proc/self/stat")
			want := tt.want
			if ours != schedOther {
				// Run under another policy by whoever started the test:
				// startCommand leaves it, and the child inherits it.
				want = ours
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
			// No thread of ours was left batch by the fork.
			threads, _ := filepath.Glob("/proc/self/task/*/stat")
			for _, task := range threads {
				if p := schedPolicy(t, task); p != ours {
					t.Errorf("gateway thread %s: policy %d after the start, want %d", task, p, ours)
				}
			}
		})
	}
}
