// Command record re-records the tool search benchmark's catalog: for each
// server of its table it installs the pinned npm package into a temporary
// directory, starts the server over stdio with dummy credentials, and
// writes the tools array of its tools/list answer, as the server sent it
// but for the temporary paths it ran in (replaced by /home/user and
// /opt/mcp-server), to <out>/<server>.json. It then rewrites <out>/SOURCES.md from the table
// and the generated servers (gen-*.json) present.
//
//	go run ./bench/toolsearch/record [-out bench/toolsearch/catalog] [-only a,b]
//
// It needs npm and node, and the npm registry. Packages are installed with
// --ignore-scripts (no install hooks run, so no browser is downloaded) and
// each server runs in its own process group with only PATH, LANG, a
// temporary HOME and TMPDIR, and the dummy variables of its entry: none of
// the caller's environment, which may hold real tokens. It is still the
// packages' code, run as the caller with the machine's network: record
// where that is acceptable (a container, a throwaway machine). A server
// that fails is reported, with its stderr, and the others go on; the exit
// code is 1 then.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	installTimeout = 5 * time.Minute
	listTimeout    = 90 * time.Second
	// stderrTail is how much of a failed server's stderr is shown.
	stderrTail = 4 << 10
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/toolsearch/catalog", "the catalog `dir` to write")
	only := fs.String("only", "", "record only these comma-separated `servers`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	todo, err := pick(servers, *only)
	if err != nil {
		fmt.Fprintln(stderr, "record:", err)
		return 2
	}
	failed := 0
	for _, s := range todo {
		n, err := record(ctx, s, *out)
		if err != nil {
			fmt.Fprintf(stderr, "record: %s (%s@%s): %v\n", s.Name, s.Package, s.Version, err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "%s: %d tools\n", s.Name, n)
	}
	if err := writeSources(*out); err != nil {
		fmt.Fprintln(stderr, "record:", err)
		return 1
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// pick returns the servers named in only (all when it is empty), refusing
// names the table does not have.
func pick(all []server, only string) ([]server, error) {
	if only == "" {
		return all, nil
	}
	var out []server
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(all, func(s server) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("-only: no server %q in the table", name)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// record installs and lists one server and writes its file; it returns the
// number of tools.
func record(ctx context.Context, s server, out string) (int, error) {
	dir, err := os.MkdirTemp("", "toolsearch-record-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := install(ctx, dir, s); err != nil {
		return 0, err
	}
	tools, err := list(ctx, dir, s)
	if err != nil {
		return 0, err
	}
	var els []json.RawMessage
	if err := json.Unmarshal(tools, &els); err != nil {
		return 0, fmt.Errorf("the tools array: %w", err)
	}
	if len(els) == 0 {
		return 0, errors.New("the server lists no tools")
	}
	if err := os.WriteFile(filepath.Join(out, s.Name+".json"), tools, 0o644); err != nil {
		return 0, err
	}
	return len(els), nil
}

func install(ctx context.Context, dir string, s server) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error", s.Package+"@"+s.Version)
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install: %w\n%s", err, tail(outBuf.Bytes()))
	}
	return nil
}

// list runs the installed server and returns its tools array.
func list(ctx context.Context, dir string, s server) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	for name, content := range s.Files {
		if err := os.WriteFile(filepath.Join(home, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	bin, err := binPath(dir, s)
	if err != nil {
		return nil, err
	}
	args := make([]string, len(s.Args))
	for i, a := range s.Args {
		args[i] = strings.ReplaceAll(a, "{home}", home)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + home, "TMPDIR=" + home}
	for _, kv := range s.Env {
		cmd.Env = append(cmd.Env, strings.ReplaceAll(kv, "{home}", home))
	}
	// The server and whatever it starts go in one group, stopped together.
	// A child the server detaches into a session of its own escapes it
	// (one server's npm lookup did while recording, and wrote into HOME
	// after the directory was removed); the machine is the sandbox, see
	// the doc.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	errBuf := &capped{max: 64 << 10}
	cmd.Stderr = errBuf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sess := newSession(stdin, stdout)
	tools, err := sess.listTools(ctx)
	// Done either way: end the server's whole group, then reap it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("%w\nstderr:\n%s", err, tail(errBuf.Bytes()))
	}
	return scrubPaths(tools, dir, home), nil
}

// Where a server's list names the temporary directories it ran in, the
// catalog says these instead: a recording must not carry this machine's
// paths, and must be the same from one run to the next.
const (
	homeStandIn = "/home/user"
	dirStandIn  = "/opt/mcp-server"
)

// scrubPaths replaces home, then dir (home's parent, where the package
// is installed), in the recorded bytes with their stand-ins.
func scrubPaths(tools []byte, dir, home string) []byte {
	tools = bytes.ReplaceAll(tools, []byte(home), []byte(homeStandIn))
	return bytes.ReplaceAll(tools, []byte(dir), []byte(dirStandIn))
}

// binPath returns the server's program: its entry's Bin, or the one
// program the package declares.
func binPath(dir string, s server) (string, error) {
	name := s.Bin
	if name == "" {
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", s.Package, "package.json"))
		if err != nil {
			return "", err
		}
		var pkg struct {
			Bin json.RawMessage `json:"bin"`
		}
		if err := json.Unmarshal(data, &pkg); err != nil {
			return "", fmt.Errorf("%s package.json: %w", s.Package, err)
		}
		var one string
		var many map[string]string
		switch {
		case json.Unmarshal(pkg.Bin, &one) == nil && one != "":
			name = s.Package[strings.LastIndex(s.Package, "/")+1:]
		case json.Unmarshal(pkg.Bin, &many) == nil && len(many) == 1:
			for k := range many {
				name = k
			}
		default:
			return "", fmt.Errorf("%s declares %d programs: name one in the table", s.Package, len(many))
		}
	}
	return filepath.Join(dir, "node_modules", ".bin", name), nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

func tail(b []byte) []byte {
	if len(b) > stderrTail {
		return b[len(b)-stderrTail:]
	}
	return b
}
