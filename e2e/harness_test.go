package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// binDir holds the binaries TestMain builds.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpgw-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "../cmd/mcpgw", "../examples/demo-server", "./fixtures/catalogserver", "./fixtures/relayserver", "./fixtures/taskserver",
		"./fixtures/serverrequests")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binaries:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Main(m) // the replicas' tests share a PostgreSQL
	os.RemoveAll(dir)
	os.Exit(code)
}

func bin(name string) string { return filepath.Join(binDir, name) }

// trackSources opens every Go and C source file and go.mod of the module,
// so that go test's result cache, which notes the files a test opens (once
// the tests run, not in TestMain), runs these tests again when the code of
// the binaries they build changes (TestCRelay's is built by cc, whose
// opening of it the cache does not see). start calls it.
var trackSources = sync.OnceFunc(func() {
	filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "bin" || n == "data" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".c") || d.Name() == "go.mod" || d.Name() == "go.sum" {
			if f, err := os.Open(path); err == nil {
				f.Close()
			}
		}
		return nil
	})
})

// runOutput runs cmd to its end and returns its stdout, and both its
// stdout and its stderr for the test to show if it fails.
func runOutput(cmd *exec.Cmd) (stdout []byte, shown string, err error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), fmt.Sprintf("%s stdout:\n%s\n%s stderr:\n%s", filepath.Base(cmd.Path), out.Bytes(), filepath.Base(cmd.Path), errOut.Bytes()), err
}

// syncBuffer is a bytes.Buffer safe for concurrent use, for a child's
// stderr that a test shows if it fails.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// process is a started binary with its stderr captured.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string // stderr lines, for waiting on one
	done   chan struct{}
}

func (p *process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// start runs a binary; t.Cleanup stops it with SIGTERM and, after a grace,
// SIGKILL, and always reaps it.
func start(t testing.TB, env []string, name string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin(name), args...)
	cmd.Env = env
	return startCmd(t, name, cmd)
}

// startCmd is start for a command made elsewhere, such as a binary a test
// built; name is for the test's log.
func startCmd(t testing.TB, name string, cmd *exec.Cmd) *process {
	t.Helper()
	trackSources()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.Stderr())
		}
	})
	return p
}

// waitLine returns the first stderr line for which match returns a non-empty
// string, or fails the test after a minute.
func (p *process) waitLine(t testing.TB, what string, match func(string) string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l := <-p.lines:
			if v := match(l); v != "" {
				return v
			}
		case <-p.done:
			t.Fatalf("process exited before %s:\n%s", what, p.Stderr())
		case <-timeout:
			t.Fatalf("no %s within a minute:\n%s", what, p.Stderr())
		}
	}
}

// baseEnv is a small environment for the processes under test.
func baseEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if v := os.Getenv("TMPDIR"); v != "" {
		env = append(env, "TMPDIR="+v)
	}
	return append(env, extra...)
}

// startDemoHTTP runs the demo server over streamable HTTP and returns its
// MCP endpoint URL.
func startDemoHTTP(t testing.TB, name string) (string, *process) {
	t.Helper()
	p := start(t, baseEnv(), "demo-server", "-http", "127.0.0.1:0", "-name", name)
	url := p.waitLine(t, "the demo server's address", func(l string) string {
		if u, ok := strings.CutPrefix(l, "listening on "); ok {
			return strings.TrimSpace(u)
		}
		return ""
	})
	return url, p
}

// gateway is a running mcpgw.
type gateway struct {
	*process
	URL     string // base URL, no trailing slash
	Admin   string // admin bearer token
	DataDir string
}

// adminToken is the admin token of every test gateway; its hash is in the
// config below.
const adminToken = "e2e-admin-token-not-a-secret"

// startGateway writes config (YAML, without listen/data_dir/admin, which it
// adds) and runs mcpgw serve on a free port.
func startGateway(t testing.TB, env []string, config string) *gateway {
	t.Helper()
	dir := t.TempDir()
	full := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nadmin:\n  tokens: [%q]\nlog:\n  level: debug\n%s",
		filepath.Join(dir, "data"), hashToken(adminToken), config)
	path := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, env, "mcpgw", "serve", "--config", path)
	addr := p.waitLine(t, "the gateway's listening line", func(l string) string {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
		return ""
	})
	return &gateway{process: p, URL: "http://" + addr, Admin: adminToken, DataDir: filepath.Join(dir, "data")}
}

// serverStatus is the part of GET /admin/servers/{name} the tests read.
type serverStatus struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	Error      string `json:"error"`
	PID        int    `json:"pid"`
	ToolCount  int    `json:"tool_count"`
	Protocol   string `json:"protocol_version"`
	LastStderr string `json:"last_stderr"`
}

func (g *gateway) status(t testing.TB, name string) serverStatus {
	t.Helper()
	var st serverStatus
	g.adminGet(t, "/admin/servers/"+name, &st)
	return st
}

// waitState polls the admin API until the server is in state. A server
// that runs with tools is waited for until they are merged too (see
// waitMerged), so that a test can list or call them at once.
func (g *gateway) waitState(t testing.TB, name, state string) serverStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := g.status(t, name)
		if st.State == state {
			if state == "running" && st.ToolCount > 0 {
				g.waitMerged(t, name, st.ToolCount)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s is %s (%s), not %s, after a minute", name, st.State, st.Error, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMerged waits until the merged catalog has tools of the server name,
// which has count of its own. A server's state and lists are published
// before the core has merged them (the Manager's watchers rebuild the
// catalog right after), so a list sent as soon as it runs can come a
// moment too early. A server whose tools a filter hides entirely would
// never be merged: none of the tests has one.
func (g *gateway) waitMerged(t testing.TB, name string, count int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var body struct {
			Tools []json.RawMessage `json:"tools"`
		}
		g.adminGet(t, "/admin/servers/"+name+"/tools", &body)
		if len(body.Tools) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the merged catalog has no tools of server %s after 30s (it has %d of its own)", name, count)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
