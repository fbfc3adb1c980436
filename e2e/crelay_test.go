package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCRelay checks scripts/bench.sh's C relay floor
// (fixtures/crelay/crelay.c) in front of each lean upstream: the load
// tool's traffic through it reaches the echo server, over stdio or over
// HTTP, and comes back checked, with one session and with several on
// connections of their own, so that the p50 it gives beside mcpgw is that
// of calls that worked. Over HTTP the floor server is restarted on its
// address between the runs, so that the relay meets its connection
// closed, as it does when a server's timeout closes it between the
// benchmark's cases, and must dial again. The bench's lean HTTP upstream
// at one session is leanecho behind the C relay: mcpgw, and a second C
// relay, in front of it answer every call too.
func TestCRelay(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal("a C compiler (cc) builds fixtures/crelay; go test -race needs one too:", err)
	}
	crelay := filepath.Join(t.TempDir(), "crelay")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-o", crelay, "fixtures/crelay/crelay.c").CombinedOutput(); err != nil {
		t.Fatalf("building crelay: %v\n%s", err, out)
	}
	address := func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	}
	// floor starts the floor server on addr and returns its URL.
	floor := func(t *testing.T, addr string) (*process, string) {
		cmd := exec.Command(bin("floorserver"), "-http", addr)
		cmd.Env = baseEnv()
		p := startCmd(t, "floorserver", cmd)
		return p, p.waitLine(t, "the floor server's address", address)
	}
	load := func(t *testing.T, ctx context.Context, url, tool string, sessions int) {
		t.Helper()
		out, shown, err := runOutput(exec.CommandContext(ctx, bin("mcpgw-bench"), "-json", "-url", url, "-tool", tool,
			"-sessions", strconv.Itoa(sessions), "-warmup", "0s", "-requests", "200"))
		if err != nil {
			t.Fatalf("%d sessions: mcpgw-bench: %v\n%s", sessions, err, shown)
		}
		var rep struct {
			Requests, Errors int64
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%d sessions: the report: %v\n%s", sessions, err, shown)
		}
		if rep.Errors != 0 || rep.Requests != 200 {
			t.Errorf("%d sessions: %d requests and %d errors, want 200 and none\n%s", sessions, rep.Requests, rep.Errors, shown)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(crelay, "0", bin("leanecho"))
		cmd.Env = baseEnv()
		url := startCmd(t, "crelay", cmd).waitLine(t, "crelay's address", address)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		load(t, ctx, url, "echo", 1)
		load(t, ctx, url, "echo", 4)
	})
	// The bench's lean HTTP upstream at one session: leanecho behind the C
	// relay, reached by mcpgw and by a second C relay over HTTP.
	t.Run("stdio behind http", func(t *testing.T) {
		cmd := exec.Command(crelay, "0", bin("leanecho"))
		cmd.Env = baseEnv()
		upstream := startCmd(t, "crelay", cmd).waitLine(t, "crelay's address", address)
		g := startGateway(t, baseEnv(), fmt.Sprintf("servers:\n  - {name: demo, transport: http, url: %q}\n", upstream))
		g.waitState(t, "demo", "running")
		cmd = exec.Command(crelay, "0", upstream)
		cmd.Env = baseEnv()
		front := startCmd(t, "crelay", cmd).waitLine(t, "the second crelay's address", address)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		load(t, ctx, g.URL+"/mcp", "mcp__demo__echo", 1)
		load(t, ctx, g.URL+"/mcp", "mcp__demo__echo", 4)
		load(t, ctx, front, "echo", 1)
	})
	t.Run("http", func(t *testing.T) {
		fp, furl := floor(t, "127.0.0.1:0")
		cmd := exec.Command(crelay, "0", furl)
		cmd.Env = baseEnv()
		url := startCmd(t, "crelay", cmd).waitLine(t, "crelay's address", address)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		load(t, ctx, url, "echo", 1)
		fp.stopWith(t, syscall.SIGTERM)
		floor(t, strings.TrimSuffix(strings.TrimPrefix(furl, "http://"), "/mcp"))
		load(t, ctx, url, "echo", 4)
	})
}
