package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("servers:\n  - name: a\n    transport: stdio\n    command: /bin/true\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: nope\nservers:\n  - name: A_b\n    transport: stdio\n    command: x\n  - name: s\n    transport: http\n    url: http://example.com/mcp\n    api_key: ${NOT_SET}\n"), 0o600)

	indent := filepath.Join(dir, "indent.yaml")
	os.WriteFile(indent, []byte("servers:\n  - name: a\n    transport: stdio\n    command: /bin/true\n   args: [x]\n"), 0o600)
	missing := filepath.Join(dir, "missing.yaml")
	os.WriteFile(missing, []byte("servers:\n  - name: a\n    transport: stdio\n    command: mcp-not-installed\n  - name: b\n    transport: stdio\n    command: /bin/true\n"), 0o600)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("listen: 127.0.0.1:0\nservers:\n  - name: a\n    transport: stdio\n    comand: /bin/true\n"), 0o600)

	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    []string
		stderr    []string
		notStdout []string
	}{
		{"version", []string{"version"}, 0, []string{"mcpgw "}, nil, nil},
		{"unknown command", []string{"frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`, "usage:"}, nil},
		{"validate good", []string{"validate", "--config", good}, 0, []string{"ok (1 servers)"}, nil, nil},
		{"validate bad lists every problem", []string{"validate", "--config", bad}, 1,
			[]string{
				"listen: ",
				`servers[0] (name "A_b").name: `,
				`servers[1] (name "s").url: `,
				`servers[1] (name "s").api_key: environment variable NOT_SET is not set`,
			},
			[]string{"4 problem(s)"}, nil},
		{"validate says the line of a syntax error", []string{"validate", "--config", indent}, 1,
			[]string{indent + ": line 5, column 4: invalid YAML: did not find expected '-' indicator"}, []string{"1 problem(s)"}, nil},
		{"validate says the line of an unknown key", []string{"validate", "--config", unknown}, 1,
			[]string{
				unknown + `: line 5, column 5: servers[0] (name "a").comand: unknown key (did you mean "command"?)`,
				unknown + `: line 3, column 5: servers[0] (name "a").command: missing; a stdio server needs the command to run`,
			}, []string{"2 problem(s)"}, nil},
		{"validate warns of a command not on PATH", []string{"validate", "--config", missing}, 0,
			[]string{
				missing + `: warning: servers[0] (name "a").command: "mcp-not-installed" is not found in any directory of the gateway's PATH`,
				missing + ": ok (2 servers)",
			}, nil, nil},
		{"validate missing file", []string{"validate", "--config", filepath.Join(dir, "none.yaml")}, 1, nil, []string{"no such file"}, nil},
		{"validate stray argument", []string{"validate", "extra"}, 2, nil, []string{`unexpected argument "extra"`}, nil},
		{"serve refuses a fatal config", []string{"serve", "--config", bad}, 1, nil, []string{"is not usable", "listen: "}, nil},
		{"bad flag", []string{"serve", "--nope"}, 2, nil, []string{"flag provided but not defined", "usage: mcpgw [serve]", "--config FILE"}, nil},
		{"bad flag of the default command", []string{"--nope"}, 2, nil, []string{"flag provided but not defined", "--config"}, nil},
		{"stray argument of token", []string{"token", "extra"}, 2, nil, []string{`unexpected argument "extra"`}, nil},

		// Explicit help: every command and its flags on stdout, exit 0.
		{"--help", []string{"--help"}, 0, allCommands, nil, nil},
		{"-h", []string{"-h"}, 0, allCommands, nil, nil},
		{"-help", []string{"-help"}, 0, allCommands, nil, nil},
		{"help", []string{"help"}, 0, allCommands, nil, nil},
		{"help -h", []string{"help", "-h"}, 0, allCommands, nil, nil},
		{"help --help", []string{"help", "--help"}, 0, allCommands, nil, nil},
		{"help -help", []string{"help", "-help"}, 0, allCommands, nil, nil},
		{"help help", []string{"help", "help"}, 0, []string{"usage: mcpgw help [COMMAND]"}, nil, nil},
		{"serve --help", []string{"serve", "--help"}, 0, []string{"usage: mcpgw [serve] [--config FILE]", "--config FILE", `(default "mcpgw.yaml")`}, nil, []string{"--admin-url", "validate"}},
		{"help serve", []string{"help", "serve"}, 0, []string{"usage: mcpgw [serve] [--config FILE]", "--config FILE"}, nil, []string{"--admin-url"}},
		{"validate -h", []string{"validate", "-h"}, 0, []string{"usage: mcpgw validate [--config FILE]", "--config FILE", "warning"}, nil, []string{"--admin-url"}},
		{"import --help", []string{"import", "--help"}, 0, []string{"usage: mcpgw import", "--admin-url URL", "--admin-token-env VAR"}, nil, []string{"--config"}},
		{"token --help", []string{"token", "--help"}, 0, []string{"usage: mcpgw token", "admin.tokens", "auth.api_keys", "base64url"}, nil, []string{"--config"}},
		{"version --help", []string{"version", "--help"}, 0, []string{"usage: mcpgw version"}, nil, nil},
		{"help of an unknown command", []string{"help", "frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`, "commands:"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// PATH is a directory without programs.
			lookupEnv := func(k string) (string, bool) { return dir, k == "PATH" }
			code := run(context.Background(), tt.args, &stdout, &stderr, lookupEnv)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			for _, s := range tt.notStdout {
				if strings.Contains(stdout.String(), s) {
					t.Errorf("stdout has %q:\n%s", s, stdout.String())
				}
			}
		})
	}
}

// allCommands is what the help of mcpgw shows: each command, and each
// command's flags.
var allCommands = []string{
	"commands:", "\n  serve ", "\n  validate ", "\n  import ", "\n  token\n", "\n  version\n", "\n  help ",
	"--config FILE", "--admin-url URL", "--admin-token-env VAR",
}

func TestFixPublicURL(t *testing.T) {
	tests := []struct{ public, listen, bound, want string }{
		{"http://127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:43123", "http://127.0.0.1:43123"},
		{"http://127.0.0.1:8080", "127.0.0.1:8080", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://mcp.example.com", "127.0.0.1:0", "127.0.0.1:43123", "https://mcp.example.com"},
	}
	for _, tt := range tests {
		if got := fixPublicURL(tt.public, tt.listen, tt.bound); got != tt.want {
			t.Errorf("fixPublicURL(%q, %q, %q) = %q, want %q", tt.public, tt.listen, tt.bound, got, tt.want)
		}
	}
}

// lineWriter is a log sink that reports when a line containing want is
// written.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestServe_WarnsOfMissingCommand: serve logs the warnings validate
// prints, and still starts.
func TestServe_WarnsOfMissingCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgw.yaml")
	cfg := "listen: 127.0.0.1:0\ndata_dir: " + filepath.Join(dir, "data") + "\nservers:\n  - name: a\n    transport: stdio\n    command: mcp-not-installed\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lineWriter{want: `"msg":"listening"`, seen: make(chan struct{})}
	lookupEnv := func(k string) (string, bool) {
		if k == "PATH" {
			return dir, true // a directory without programs
		}
		return "", false
	}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", path}, io.Discard, stderr, lookupEnv) }()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("serve ended with %d before listening:\n%s", code, stderr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exit code = %d, want 0:\n%s", code, stderr.String())
	}
	want := `"msg":"a server entry may not start","server":"a","problem":"warning: servers[0] (name \"a\").command: \"mcp-not-installed\" is not found in any directory of the gateway's PATH`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("serve's log lacks the warning %s:\n%s", want, stderr.String())
	}
}
