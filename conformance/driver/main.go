// Command driver is the downstream client of scripts/conformance.sh's
// client scenarios, where mcpgw is the client under test: the suite's fake
// server is mcpgw's one upstream, and the driver makes mcpgw talk to it by
// connecting to mcpgw's /mcp with the Go SDK's client, listing the tools
// and, when asked, calling one of them.
//
//	driver -url http://127.0.0.1:PORT/mcp [-tool NAME [-args JSON]] [-timeout D]
//	       [-protocol VERSION] [-elicit-url] [-bearer-env VAR]
//	       [-connect [-connect-tool NAME] [-connect-max N] [-connect-wait D]]
//
// It prints what it saw and exits 1, saying why, when the connection, the
// list or the call fails or the call's result is an error. It talks to
// loopback only: the conformance runs never leave the machine. With
// -bearer-env it sends mcpgw the token in that environment variable (an API
// key: a server each user connects to needs to know who the user is); the
// token is never on the command line.
//
// With -connect it also plays the user of an upstream that needs an OAuth
// connection (the auth/* scenarios). mcpgw answers such a call with a URL
// to open, in one of three shapes: a JSON-RPC error -32042 whose
// data.elicitations hold URL elicitations (a 2025-11-25 client that
// declared elicitation.url, -elicit-url), an input_required result whose
// inputRequests hold URL elicitations (a 2026-07-28 client that declared
// it), or a JSON-RPC error -31007 with data.url (any other client). The driver opens the URL
// as a browser would (a GET that follows redirects, with a cookie jar) and
// wants a 2xx at the end; then, for -32042, it waits for
// notifications/elicitation/complete, and retries the call (for
// input_required, with the requestState and an accept for each request).
// When the tool named by -tool is not listed, it first calls the server's
// connect tool (-connect-tool) and lists again, waiting for
// notifications/tools/list_changed while the tool is still missing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The JSON-RPC error codes that carry a connect URL.
const (
	codeURLElicitationRequired = -32042 // MCP 2025-11-25
	codeConnectRequired        = -31007 // mcpgw's own, for clients without URL elicitation
)

// protocols are the versions -protocol accepts.
var protocols = []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

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
	protocol := fs.String("protocol", "", "the protocol version to ask for; empty: the SDK's latest")
	elicitURL := fs.Bool("elicit-url", false, "declare elicitation.url (mcpgw then answers -32042, or input_required at 2026-07-28)")
	bearerEnv := fs.String("bearer-env", "", "the environment variable holding the token to send mcpgw")
	connect := fs.Bool("connect", false, "open the connect URLs mcpgw answers with, and retry")
	connectTool := fs.String("connect-tool", "connect", "the server's connect tool, as listed")
	connectMax := fs.Int("connect-max", 5, "how many connect URLs one call may bring")
	connectWait := fs.Duration("connect-wait", 10*time.Second, "bound on waiting for a notification after a connect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkLoopback("-url", *endpoint); err != nil {
		return err
	}
	if *protocol != "" && !slices.Contains(protocols, *protocol) {
		return fmt.Errorf("-protocol: %q is not one of %s", *protocol, strings.Join(protocols, ", "))
	}
	if *connectMax < 1 {
		return errors.New("-connect-max: want at least 1")
	}
	var mcpClient *http.Client // nil: the SDK's default
	if *bearerEnv != "" {
		token := os.Getenv(*bearerEnv)
		if token == "" {
			return fmt.Errorf("-bearer-env: $%s is empty", *bearerEnv)
		}
		mcpClient = &http.Client{Transport: &bearer{token: token, next: http.DefaultTransport}}
	}
	// The values are never repeated: they are a tool's arguments.
	var toolArgs map[string]any
	if err := json.Unmarshal([]byte(*rawArgs), &toolArgs); err != nil || toolArgs == nil {
		return errors.New("-args: want a JSON object")
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d := &driver{
		out:         stdout,
		connect:     *connect,
		connectMax:  *connectMax,
		connectWait: *connectWait,
		completed:   newSignals(),
		listChanged: make(chan struct{}, 1),
	}
	opts := &mcp.ClientOptions{
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			d.completed.note(req.Params.ElicitationID)
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case d.listChanged <- struct{}{}:
			default:
			}
		},
	}
	if *connect {
		// input_required results come back to us: we open their URLs.
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	if *elicitURL {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgw-conformance-driver", Version: "1.0.0"}, opts)
	transport := &mcp.StreamableClientTransport{Endpoint: *endpoint, HTTPClient: mcpClient}
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: *protocol})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", *endpoint, err)
	}
	defer session.Close()
	d.session = session
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	d.browser = &http.Client{Jar: jar, CheckRedirect: checkRedirect}

	names, err := d.list(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tools: %s\n", strings.Join(names, ", "))
	if *tool == "" {
		return nil
	}
	if !slices.Contains(names, *tool) {
		if !*connect {
			return fmt.Errorf("tool %q is not among the %d tools listed", *tool, len(names))
		}
		if !slices.Contains(names, *connectTool) {
			return fmt.Errorf("tool %q is not among the %d tools listed, nor is the connect tool %q", *tool, len(names), *connectTool)
		}
		if err := d.connectFirst(ctx, *connectTool, *tool); err != nil {
			return err
		}
	}
	res, err := d.call(ctx, *tool, toolArgs)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool %q answered with isError: true", *tool)
	}
	fmt.Fprintf(stdout, "called %s: %d content block(s)\n", *tool, len(res.Content))
	return nil
}

// bearer sends a token on every request to mcpgw's MCP endpoint (never to
// the browser's URLs).
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// A driver holds one session with mcpgw and the "browser" that opens the
// connect URLs.
type driver struct {
	out         io.Writer
	session     *mcp.ClientSession
	browser     *http.Client
	connect     bool
	connectMax  int
	connectWait time.Duration
	completed   *signals      // elicitation ids of notifications/elicitation/complete
	listChanged chan struct{} // a notifications/tools/list_changed came
}

// list lists the tools' names. With -connect, a list answered with a
// connect URL (-32042 or -31007) is listed again after opening it.
func (d *driver) list(ctx context.Context) ([]string, error) {
	for connects := 0; ; connects++ {
		var names []string
		var err error
		for t, e := range d.session.Tools(ctx, nil) {
			if e != nil {
				err = e
				break
			}
			names = append(names, t.Name)
		}
		if err == nil {
			return names, nil
		}
		ask, askErr := connectRequestOf(nil, err)
		switch {
		case askErr != nil:
			return nil, fmt.Errorf("listing the tools: %w", askErr)
		case ask == nil:
			return nil, fmt.Errorf("listing the tools: %w", err)
		case !d.connect:
			return nil, fmt.Errorf("listing the tools asks for a connection (%s); run with -connect to open it", ask.shape)
		case connects == d.connectMax:
			return nil, fmt.Errorf("listing the tools still asks for a connection after %d connects", connects)
		}
		if err := d.open(ctx, ask); err != nil {
			return nil, err
		}
	}
}

// connectFirst calls the connect tool, opens the URL it brings, and lists
// the tools until tool is among them. A connect call is not retried (once
// connected, mcpgw may no longer list the tool); but when tool has not come
// within connectWait and the connect tool is still listed, the user
// connects again, as a person would (the server may have refused the new
// account: its authorization server changed), at most connectMax times.
func (d *driver) connectFirst(ctx context.Context, connectTool, tool string) error {
	for round := 1; ; round++ {
		d.drainListChanged() // a notification from now on may be the one that brings tool
		if err := d.connectOnce(ctx, connectTool); err != nil {
			return err
		}
		names, err := d.waitForTool(ctx, tool)
		if err != nil {
			return err
		}
		if slices.Contains(names, tool) {
			return nil
		}
		if !slices.Contains(names, connectTool) || round == d.connectMax {
			return fmt.Errorf("tool %q is not listed after %d connect(s), and no notifications/tools/list_changed came within %v", tool, round, d.connectWait)
		}
		fmt.Fprintf(d.out, "%s is still not listed: connecting again\n", tool)
	}
}

// connectOnce calls the connect tool and opens the URL it brings.
func (d *driver) connectOnce(ctx context.Context, connectTool string) error {
	res, err := d.session.CallTool(ctx, &mcp.CallToolParams{Name: connectTool, Arguments: map[string]any{}})
	ask, askErr := connectRequestOf(res, err)
	switch {
	case askErr != nil:
		return fmt.Errorf("calling the connect tool %q: %w", connectTool, askErr)
	case ask != nil:
		return d.open(ctx, ask)
	case err != nil:
		return fmt.Errorf("calling the connect tool %q: %w", connectTool, err)
	case res.IsError:
		return fmt.Errorf("the connect tool %q answered with isError: true", connectTool)
	}
	fmt.Fprintf(d.out, "called %s: no URL to open\n", connectTool)
	return nil
}

// waitForTool lists the tools until tool is among them, listing again on
// each notifications/tools/list_changed; it returns the last list when
// none comes within connectWait.
func (d *driver) waitForTool(ctx context.Context, tool string) ([]string, error) {
	t := time.NewTimer(d.connectWait)
	defer t.Stop()
	for {
		names, err := d.list(ctx)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(d.out, "tools after connecting: %s\n", strings.Join(names, ", "))
		if slices.Contains(names, tool) {
			return names, nil
		}
		select {
		case <-d.listChanged:
		case <-t.C:
			return names, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for tool %q after connecting: %w", tool, ctx.Err())
		}
	}
}

func (d *driver) drainListChanged() {
	select {
	case <-d.listChanged:
	default:
	}
}

// call calls tool; while the answer is a connect URL, it opens the URL and
// retries, at most connectMax times.
func (d *driver) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	for connects := 0; ; connects++ {
		res, err := d.session.CallTool(ctx, params)
		ask, askErr := connectRequestOf(res, err)
		if askErr != nil {
			return nil, fmt.Errorf("calling tool %q: %w", tool, askErr)
		}
		if ask == nil {
			if err != nil {
				return nil, fmt.Errorf("calling tool %q: %w", tool, err)
			}
			return res, nil
		}
		if !d.connect {
			return nil, fmt.Errorf("tool %q asks for a connection (%s); run with -connect to open it", tool, ask.shape)
		}
		if connects == d.connectMax {
			return nil, fmt.Errorf("tool %q still asks for a connection after %d connects", tool, connects)
		}
		if err := d.open(ctx, ask); err != nil {
			return nil, err
		}
		params = &mcp.CallToolParams{Name: tool, Arguments: args}
		if ask.requestState != "" || len(ask.inputKeys) > 0 {
			// As a 2026-07-28 client answers: the state back, and an
			// accept for each URL elicitation it has opened.
			params.RequestState = ask.requestState
			params.InputResponses = mcp.InputResponseMap{}
			for _, k := range ask.inputKeys {
				params.InputResponses[k] = &mcp.ElicitResult{Action: "accept"}
			}
		}
	}
}

// open opens each URL of ask as the user's browser would, then, for URL
// elicitations with ids (-32042), waits until mcpgw says each is complete.
func (d *driver) open(ctx context.Context, ask *connectRequest) error {
	for _, u := range ask.urls {
		if err := d.get(ctx, u); err != nil {
			return err
		}
	}
	for _, id := range ask.elicitationIDs {
		if err := d.completed.wait(ctx, id, d.connectWait); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.out, "connected (%s, %d URL(s))\n", ask.shape, len(ask.urls))
	return nil
}

// get GETs a connect URL, following redirects on loopback, and wants a 2xx
// at the end. Errors name hosts and statuses, never the URLs: they carry
// sealed state and authorization codes.
func (d *driver) get(ctx context.Context, raw string) error {
	if err := checkLoopback("connect URL", raw); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return errors.New("connect URL: not a valid URL")
	}
	resp, err := d.browser.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err // url.Error repeats the URL
		}
		return fmt.Errorf("connect URL: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("connect URL: the last answer was %s (from host %s)", resp.Status, resp.Request.URL.Host)
	}
	return nil
}

// checkRedirect follows at most 10 redirects, all to loopback http URLs.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("more than 10 redirects")
	}
	if err := checkLoopback("connect URL", req.URL.String()); err != nil {
		return fmt.Errorf("redirected to host %q, which is not loopback", req.URL.Hostname())
	}
	return nil
}

// A connectRequest is a connect URL mcpgw answered a call with.
type connectRequest struct {
	shape          string   // "-32042", "input_required" or "-31007", for messages
	urls           []string // to open, in order
	elicitationIDs []string // -32042: to wait for notifications/elicitation/complete of
	inputKeys      []string // input_required: the keys to answer
	requestState   string   // input_required: to send back
}

// connectRequestOf returns the connect URL a call's outcome carries, nil
// when it carries none (a plain result or another error), or an error when
// it has a connect shape but not what the shape needs.
func connectRequestOf(res *mcp.CallToolResult, callErr error) (*connectRequest, error) {
	var rpcErr *jsonrpc.Error
	if callErr != nil {
		if !errors.As(callErr, &rpcErr) {
			return nil, nil
		}
		switch rpcErr.Code {
		case codeURLElicitationRequired:
			var data struct {
				Elicitations []*mcp.ElicitParams `json:"elicitations"`
			}
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) == 0 {
				return nil, errors.New("error -32042 without data.elicitations")
			}
			ask := &connectRequest{shape: "-32042"}
			for i, e := range data.Elicitations {
				if e == nil || e.Mode != "url" || e.URL == "" || e.ElicitationID == "" {
					return nil, fmt.Errorf("error -32042: elicitation %d is not a URL elicitation with an elicitationId", i)
				}
				ask.urls = append(ask.urls, e.URL)
				ask.elicitationIDs = append(ask.elicitationIDs, e.ElicitationID)
			}
			return ask, nil
		case codeConnectRequired:
			var data struct {
				URL string `json:"url"`
			}
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil || data.URL == "" {
				return nil, errors.New("error -31007 without data.url")
			}
			return &connectRequest{shape: "-31007", urls: []string{data.URL}}, nil
		}
		return nil, nil
	}
	if res == nil || !res.NeedsInput() {
		return nil, nil
	}
	if len(res.InputRequests) == 0 {
		return nil, errors.New("an input_required result without inputRequests")
	}
	ask := &connectRequest{shape: "input_required", requestState: res.RequestState}
	keys := make([]string, 0, len(res.InputRequests))
	for k := range res.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys) // opened in a fixed order
	for _, k := range keys {
		e, ok := res.InputRequests[k].(*mcp.ElicitParams)
		if !ok || e.Mode != "url" || e.URL == "" {
			return nil, fmt.Errorf("input request %q is not a URL elicitation", k)
		}
		ask.urls = append(ask.urls, e.URL)
		ask.inputKeys = append(ask.inputKeys, k)
	}
	return ask, nil
}

// signals records the ids of notifications as they come, for one waiter
// at a time.
type signals struct {
	mu   sync.Mutex
	seen map[string]bool
	c    chan struct{}
}

func newSignals() *signals { return &signals{seen: map[string]bool{}, c: make(chan struct{}, 1)} }

func (s *signals) note(id string) {
	s.mu.Lock()
	s.seen[id] = true
	s.mu.Unlock()
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// wait returns once id has come, or an error after bound.
func (s *signals) wait(ctx context.Context, id string, bound time.Duration) error {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok := s.seen[id]
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-s.c:
		case <-t.C:
			return fmt.Errorf("no notifications/elicitation/complete for elicitation %s within %v", id, bound)
		case <-ctx.Done():
			return fmt.Errorf("waiting for notifications/elicitation/complete: %w", ctx.Err())
		}
	}
}

// checkLoopback accepts an http URL whose host is a loopback address or
// localhost; what names the URL in the error.
func checkLoopback(what, raw string) error {
	if raw == "" {
		return fmt.Errorf("%s is required", what)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%s: want an http URL such as http://127.0.0.1:PORT/mcp", what)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: host %q is not loopback", what, host)
	}
	return nil
}
