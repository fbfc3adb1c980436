package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The test binary is also the stdio server of the direct-mode tests: run
// with fakeStdioEnv=1 it serves stdin and stdout and exits.
const (
	fakeStdioEnv = "MCPGW_BENCH_FAKE_STDIO"
	// fakeStdioDieEnv makes the fake exit, without answering, at that
	// tools/call.
	fakeStdioDieEnv = "MCPGW_BENCH_FAKE_STDIO_DIE_AT"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeStdioEnv) == "1" {
		dieAt, _ := strconv.Atoi(os.Getenv(fakeStdioDieEnv))
		fakeStdioServer(os.Stdin, os.Stdout, dieAt)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeStdioServer is a raw stdio MCP server: it answers initialize, sends a
// notification and a ping request of its own after notifications/initialized,
// and answers each tools/call (echoing the text) from its own goroutine, so
// that answers come out of order, each after a log notification. It stops
// at the end of its input, or at tools/call number dieAt if dieAt > 0.
func fakeStdioServer(in io.Reader, out io.Writer, dieAt int) {
	br := bufio.NewReaderSize(in, 64<<10)
	var mu sync.Mutex
	bw := bufio.NewWriter(out)
	write := func(lines ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
		bw.Flush()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	calls := 0
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			fmt.Fprintln(os.Stderr, "fake stdio server: bad line:", err)
			os.Exit(3)
		}
		switch m.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"starting"}}`,
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`, m.ID))
		case "notifications/initialized":
			write(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`)
		case "tools/call":
			if calls++; calls == dieAt {
				os.Exit(0)
			}
			text, _ := json.Marshal(m.Params.Arguments.Text)
			wg.Go(func() {
				write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"call"}}`,
					fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, m.ID, text))
			})
		default:
			if m.ID != nil {
				write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, m.ID))
			}
		}
	}
}

func TestDirectMode(t *testing.T) {
	tests := []struct {
		name     string
		dieAt    string
		args     []string
		wantCode int
	}{
		{name: "echo"},
		{name: "payload", args: []string{"-payload", "200000"}},
		{name: "server dies", dieAt: "40", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			t.Setenv(fakeStdioEnv, "1")
			t.Setenv(fakeStdioDieEnv, tt.dieAt)
			// A -race child would otherwise sleep a second when it exits.
			t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			args := append(append(append([]string{}, short...), tt.args...), "-direct", "--", os.Args[0])
			code, rep, output := runBench(t, args...)
			if code != tt.wantCode || rep == nil {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.wantCode, output)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the run's output:\n%s", output)
				}
			})
			if tree, err := readTree("/proc", os.Getpid()); err != nil || len(tree.desc) > 0 {
				t.Errorf("child processes left: %v %v", tree.desc, err)
			}
			if rep.Mode != modeDirect || rep.Target != os.Args[0] || rep.Sessions != 4 {
				t.Errorf("report %+v", rep)
			}
			if tt.wantCode == 1 {
				if rep.Errors == 0 || len(rep.ErrorSamples) == 0 || !strings.Contains(rep.ErrorSamples[0], "gone") {
					t.Errorf("errors %d %q, want the server gone", rep.Errors, rep.ErrorSamples)
				}
				return
			}
			if rep.Requests == 0 || rep.Errors != 0 || rep.Latency == nil {
				t.Errorf("requests %d errors %d %q", rep.Requests, rep.Errors, rep.ErrorSamples)
			}
			w := rep.Watched
			if w == nil || w.PID <= 0 || w.PeakRSSMiB <= 0 || w.CPUMs < 0 {
				t.Errorf("child not watched: %+v, notes %q", w, rep.Notes)
			}
			if !strings.Contains(strings.Join(rep.Notes, "\n"), "1 server-to-client requests were not answered") {
				t.Errorf("notes %q, want the fake's ping counted", rep.Notes)
			}
		})
	}
}
