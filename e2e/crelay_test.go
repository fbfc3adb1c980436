package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCRelay checks scripts/bench.sh's C relay floor
// (fixtures/crelay/crelay.c): the load tool's traffic through it reaches
// the lean echo server and comes back checked, with one session and with
// several on connections of their own, so that the p50 it gives beside
// mcpgw is that of calls that worked.
func TestCRelay(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal("a C compiler (cc) builds fixtures/crelay; go test -race needs one too:", err)
	}
	crelay := filepath.Join(t.TempDir(), "crelay")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-o", crelay, "fixtures/crelay/crelay.c").CombinedOutput(); err != nil {
		t.Fatalf("building crelay: %v\n%s", err, out)
	}
	cmd := exec.Command(crelay, "0", bin("leanecho"))
	cmd.Env = baseEnv()
	p := startCmd(t, "crelay", cmd)
	url := p.waitLine(t, "crelay's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sessions := range []int{1, 4} {
		out, err := exec.CommandContext(ctx, bin("mcpgw-bench"), "-json", "-url", url, "-tool", "echo",
			"-sessions", strconv.Itoa(sessions), "-warmup", "0s", "-requests", "200").Output()
		if err != nil {
			t.Fatalf("%d sessions: mcpgw-bench: %v\n%s", sessions, err, out)
		}
		var rep struct {
			Requests, Errors int64
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%d sessions: the report: %v\n%s", sessions, err, out)
		}
		if rep.Errors != 0 || rep.Requests != 200 {
			t.Errorf("%d sessions: %d requests and %d errors, want 200 and none\n%s", sessions, rep.Requests, rep.Errors, out)
		}
	}
}
