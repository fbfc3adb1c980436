package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	defaultURL = "http://127.0.0.1:8080/mcp"
	// protocolVersion is the MCP revision the tool asks for.
	protocolVersion = "2025-11-25"
	// modernVersion is the MCP revision of -task's sessionless client.
	modernVersion = "2026-07-28"
	// tasksExtension is the extension -task declares.
	tasksExtension = "io.modelcontextprotocol/tasks"
	// maxMessage bounds one JSON-RPC message the tool reads.
	maxMessage = 64 << 20
	// callGrace is how long after the end of the measured period a request
	// still in flight may take before it is given up and counted as an error.
	callGrace = 10 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage marks a command line mistake (exit 2); what was wrong has been
// printed.
var errUsage = errors.New("usage")

// run runs one benchmark and returns the exit code: 0, or 1 when a request
// failed, none succeeded or the run could not be made, or 2 for a usage
// error. The report goes to stdout even when the code is 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	raiseNoFile()
	var rep *report
	switch {
	case c.direct:
		rep, err = runDirect(ctx, c, stderr)
	case c.idle > 0:
		rep, err = runIdle(ctx, c)
	case c.task:
		rep, err = runTask(ctx, c)
	default:
		rep, err = runHTTP(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw-bench:", err)
		return 1
	}
	if err := rep.write(stdout, c.json); err != nil {
		fmt.Fprintln(stderr, "mcpgw-bench: writing the report:", err)
		return 1
	}
	if rep.Errors > 0 || (rep.Mode != modeIdle && rep.Requests == 0) {
		return 1
	}
	return 0
}

// config is the parsed and checked command line.
type config struct {
	url      string
	initURL  string // -init-url: where sessions are initialized, if not url
	sessions int
	duration time.Duration
	requests int64
	warmup   time.Duration
	method   string
	tool     string
	payload  int
	header   http.Header
	idle     int
	watch    []int // -watch, in order
	json     bool
	direct   bool
	task     bool
	command  []string // the stdio server of -direct

	request requestTemplate // the request every session sends
	check   checker         // what every answer must satisfy
}

const usageText = `usage:
  mcpgw-bench [flags]                    load the streamable-HTTP MCP endpoint -url
  mcpgw-bench -idle N [flags]            hold N idle sessions open and report the server's RSS per session
  mcpgw-bench -task [flags]              load -url with hosted tasks of a 2026-07-28 client, each polled to its result
  mcpgw-bench -direct [flags] -- CMD...  spawn the stdio MCP server CMD and load it over its stdin/stdout

The target must be on this machine (loopback). Exit status 1 when a request
failed or none succeeded (after the report), 2 for a usage error.

flags:
`

// parseFlags parses and checks the command line. It prints what is wrong
// and returns errUsage, or flag.ErrHelp after printing the usage for -h.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("mcpgw-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	c := &config{header: http.Header{}}
	var (
		argsJSON  string
		expect    string
		expectSet bool
	)
	fs.StringVar(&c.url, "url", defaultURL, "the streamable-HTTP MCP endpoint to load; it must resolve to loopback addresses only")
	fs.IntVar(&c.sessions, "sessions", 1, "concurrent sessions (http) or workers (-direct), each with one request in flight")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "the measured period; with -idle, how long the sessions are held open")
	fs.Int64Var(&c.requests, "requests", 0, "end after this many measured requests in all; 0 means no limit (the run ends at -duration or -requests, whichever comes first)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "a period before the measured one whose requests are sent but not counted")
	fs.StringVar(&c.method, "method", "tools/call", "the request to send: tools/call, or tools/list (the first page; the report counts its tools)")
	fs.StringVar(&c.tool, "tool", "echo", "the `name` of the tool tools/call calls")
	fs.StringVar(&argsJSON, "args", `{"text":"hello"}`, "the tool's arguments, a JSON `object`")
	fs.IntVar(&c.payload, "payload", 0, "if > 0, the arguments are {\"text\": `N` bytes of 'x'} and each result's text must be exactly those N bytes")
	fs.Func("expect", "a `substring` every result must contain (default: for tools/call, the \"text\" member of -args, if it has one)", func(s string) error {
		expect, expectSet = s, true
		return nil
	})
	fs.Func("header", "an HTTP header `K:V` sent with every request, e.g. \"Authorization: Bearer ...\" (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want K:V")
		}
		c.header.Add(k, strings.TrimSpace(v))
		return nil
	})
	fs.IntVar(&c.idle, "idle", 0, "idle-sessions mode: open `N` sessions, each with its GET stream, hold them for -duration and report the watched process's RSS per session")
	fs.StringVar(&c.initURL, "init-url", "", "initialize each session at this `URL` and send the rest to -url (a replica that does not hold the session forwards it); loopback only, as -url")
	fs.Func("watch", "report the CPU time and memory of process `PID` and of its descendants over the measured period (implied for the child with -direct); repeat it to watch several, each reported", func(s string) error {
		pid, err := strconv.Atoi(s)
		if err != nil || pid < 1 {
			return errors.New("want a process id, a whole number of 1 or more")
		}
		c.watch = append(c.watch, pid)
		return nil
	})
	fs.BoolVar(&c.task, "task", false, "each request is a hosted task of a 2026-07-28 client declaring the tasks extension: tools/call, answered with a task, then tasks/get until it is completed")
	fs.BoolVar(&c.json, "json", false, "print the report as one JSON object instead of text")
	fs.BoolVar(&c.direct, "direct", false, "spawn the stdio MCP server given after -- and load it over its stdin/stdout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage // the flag package has said what was wrong
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.command = fs.Args()
	if err := c.finish(argsJSON, expect, expectSet, set); err != nil {
		fmt.Fprintf(stderr, "mcpgw-bench: %v\n(mcpgw-bench -h lists the flags)\n", err)
		return nil, errUsage
	}
	return c, nil
}

// finish checks the flags against each other and builds the request and
// the checks from them.
func (c *config) finish(argsJSON, expect string, expectSet bool, set map[string]bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case c.sessions < 1:
		bad("-sessions must be at least 1")
	case c.duration <= 0:
		bad("-duration must be positive")
	case c.warmup < 0, c.requests < 0, c.payload < 0, c.idle < 0:
		bad("-warmup, -requests, -payload and -idle may not be negative")
	case c.method != "tools/call" && c.method != "tools/list":
		bad("-method must be tools/call or tools/list, not %q", c.method)
	case c.payload > 0 && (set["args"] || c.method != "tools/call"):
		bad("-payload sets the arguments of tools/call: it goes with neither -args nor -method tools/list")
	}
	if c.direct {
		switch {
		case len(c.command) == 0:
			bad("-direct needs the server's command after --")
		case c.idle > 0 || len(c.watch) > 0 || len(c.header) > 0 || set["url"] || set["init-url"]:
			bad("-direct loads a child over stdio: -url, -init-url, -header, -idle and -watch do not apply (the child is watched)")
		}
	} else if len(c.command) > 0 {
		bad("unexpected arguments %q (a server command needs -direct)", c.command)
	}
	switch {
	case c.task && (c.direct || c.idle > 0):
		bad("-task goes with neither -direct nor -idle")
	case c.task && c.method != "tools/call":
		bad("-task runs tools/call, not -method %s", c.method)
	case set["init-url"] && (c.task || c.idle > 0):
		bad("-init-url goes with neither -task (it has no sessions) nor -idle")
	case c.idle > 0 && len(c.watch) > 1:
		bad("-idle watches one process, not %d", len(c.watch))
	}
	if !c.direct {
		if err := checkURLShape("-url", c.url); err != nil {
			errs = append(errs, err)
		}
		if set["init-url"] {
			if err := checkURLShape("-init-url", c.initURL); err != nil {
				errs = append(errs, err)
			}
		}
	}
	args, err := c.arguments(argsJSON)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.request, c.check = c.build(args, expect, expectSet)
	return nil
}

// arguments returns the tool arguments: -args, compacted, or the -payload
// text.
func (c *config) arguments(argsJSON string) (json.RawMessage, error) {
	if c.payload > 0 {
		return json.Marshal(map[string]string{"text": strings.Repeat("x", c.payload)})
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(argsJSON), &obj); err != nil || obj == nil {
		return nil, errors.New("-args must be a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(argsJSON)); err != nil {
		return nil, fmt.Errorf("-args: %w", err)
	}
	return b.Bytes(), nil
}

// build returns the request template and the checks of every answer.
func (c *config) build(args json.RawMessage, expect string, expectSet bool) (requestTemplate, checker) {
	chk := checker{method: c.method}
	if c.method == "tools/list" {
		if expectSet && expect != "" {
			chk.expect = []byte(expect)
		}
		return newTemplate(c.method, json.RawMessage(`{}`)), chk
	}
	var meta json.RawMessage
	if c.task {
		meta = taskMeta
	}
	params, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta,omitempty"`
	}{c.tool, args, meta}) // cannot fail: a string and valid JSON
	switch {
	case expectSet:
		if expect != "" {
			chk.expect = []byte(expect)
		}
	case c.payload > 0:
		chk.textLen = c.payload
	default:
		var a struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(args, &a) == nil && a.Text != nil && *a.Text != "" {
			chk.expect = []byte(*a.Text)
		}
	}
	return newTemplate(c.method, params), chk
}

// checkURLShape checks that the URL of the flag name is an absolute http
// or https URL; where it points is checked when the run starts
// (checkLoopback).
func checkURLShape(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q is not an http:// or https:// URL", name, raw)
	}
	return nil
}

// raiseNoFile raises this process's open-file limit to its hard limit: each
// session of -idle holds a connection.
func raiseNoFile() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= lim.Max {
		return
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) // best effort: the limit is reported if opening fails
}

// noFileLimit returns this process's open-file limit, for error messages.
func noFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}
