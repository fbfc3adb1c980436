package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestRunExample runs scripts/run-example.sh, what make run runs, with the
// binaries the tests built, a config of its own and the demo server on a
// free port, and stops it as a terminal's Ctrl-C does (SIGINT to its whole
// process group) or as a supervisor does (a signal to the script alone). It
// must end the demo server and mcpgw (and so mcpgw's stdio child), wait for
// them, and exit 0, so that make reports no error.
func TestRunExample(t *testing.T) {
	tests := []struct {
		name  string
		sig   syscall.Signal
		group bool
	}{
		{"ctrl-c", syscall.SIGINT, true},
		{"SIGINT to the script", syscall.SIGINT, false},
		{"SIGTERM to the script", syscall.SIGTERM, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			config := filepath.Join(dir, "mcpgw.yaml")
			yaml := fmt.Sprintf(`listen: 127.0.0.1:0
data_dir: %q
servers:
  - {name: demo, transport: stdio, command: %q, args: ["-name", "demo"]}
  - {name: demo-http, transport: http, url: "${DEMO_HTTP_URL}"}
`, filepath.Join(dir, "data"), bin("demo-server"))
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join("..", "scripts", "run-example.sh"))
			cmd.Env = baseEnv("MCPGW_BIN="+bin("mcpgw"), "DEMO_BIN="+bin("demo-server"), "MCPGW_CONFIG="+config, "DEMO_ADDR=127.0.0.1:0")
			p := startCmd(t, "run-example.sh", cmd)

			// Both servers run once mcpgw says so; the stdio one names its pid.
			running := regexp.MustCompile(`"msg":"server running","server":"(demo|demo-http)".*"pid":([0-9]+)`)
			pids := map[string]int{}
			for len(pids) < 2 {
				p.waitLine(t, "both servers running", func(l string) string {
					if m := running.FindStringSubmatch(l); m != nil {
						pids[m[1]], _ = strconv.Atoi(m[2])
						return m[1]
					}
					return ""
				})
			}

			target := cmd.Process.Pid
			if tt.group {
				target = -target // startCmd made the script a group leader
			}
			if err := syscall.Kill(target, tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.done:
			case <-time.After(time.Minute):
				t.Fatalf("run-example.sh did not exit within a minute of %v", tt.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("run-example.sh exited with %v, want 0", cmd.ProcessState)
			}
			// Nothing of the script's group is left (the demo server,
			// mcpgw), nor mcpgw's stdio child, which has a group of its own.
			if err := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("a process of the script's group is left: kill -0 gave %v", err)
			}
			if err := syscall.Kill(pids["demo"], 0); pids["demo"] <= 0 || !errors.Is(err, syscall.ESRCH) {
				t.Errorf("mcpgw's stdio child %d is left: kill -0 gave %v", pids["demo"], err)
			}
		})
	}
}
