// Command driver is the downstream client of scripts/conformance.sh's
// client scenarios, where mcpgw is the client under test: the suite's fake
// server is mcpgw's one upstream, and the driver makes mcpgw talk to it by
// connecting to mcpgw's /mcp with the Go SDK's client, listing the tools
// and, when asked, calling one of them.
//
//	driver -url http://127.0.0.1:PORT/mcp [-tool NAME [-args JSON]] [-timeout D]
//
// It prints what it saw and exits 1, saying why, when the connection, the
// list or the call fails or the call's result is an error. It talks to
// loopback only: the conformance runs never leave the machine.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("driver", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error says what was wrong
	endpoint := fs.String("url", "", "mcpgw's MCP endpoint, on loopback")
	tool := fs.String("tool", "", "the tool to call; empty: only list the tools")
	rawArgs := fs.String("args", "{}", "the tool's arguments, a JSON object")
	timeout := fs.Duration("timeout", 20*time.Second, "bound on the whole exchange")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkLoopback(*endpoint); err != nil {
		return err
	}
	// The values are never repeated: they are a tool's arguments.
	var toolArgs map[string]any
	if err := json.Unmarshal([]byte(*rawArgs), &toolArgs); err != nil || toolArgs == nil {
		return errors.New("-args: want a JSON object")
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgw-conformance-driver", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: *endpoint}, nil)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", *endpoint, err)
	}
	defer session.Close()

	var names []string
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the tools: %w", err)
		}
		names = append(names, t.Name)
	}
	fmt.Fprintf(stdout, "tools: %s\n", strings.Join(names, ", "))
	if *tool == "" {
		return nil
	}
	found := false
	for _, n := range names {
		found = found || n == *tool
	}
	if !found {
		return fmt.Errorf("tool %q is not among the %d tools listed", *tool, len(names))
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: *tool, Arguments: toolArgs})
	if err != nil {
		return fmt.Errorf("calling tool %q: %w", *tool, err)
	}
	if res.IsError {
		return fmt.Errorf("tool %q answered with isError: true", *tool)
	}
	fmt.Fprintf(stdout, "called %s: %d content block(s)\n", *tool, len(res.Content))
	return nil
}

// checkLoopback accepts an http URL whose host is a loopback address or
// localhost.
func checkLoopback(raw string) error {
	if raw == "" {
		return errors.New("-url is required")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return errors.New("-url: want an http URL such as http://127.0.0.1:PORT/mcp")
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-url: host %q is not loopback", host)
	}
	return nil
}
