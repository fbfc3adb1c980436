// Command demo-server is a small MCP server, built on the official Go SDK, for
// mcpgw to front in its README and its end-to-end tests.
//
// Its tools each exercise one thing a gateway must relay faithfully: plain text
// (echo), structured output (add), an output schema with $defs and
// additionalProperties (weather), an image block (image), progress and
// cancellation (slow), the child's environment (env) and tool errors (fail).
// The media tools return binary blocks, large and small, for mcpgw's media
// rewrite: a noise PNG of about 200 KiB or any size up to 4 MiB (picture), a
// WAV tone (sound), an embedded PDF blob (document), a tiny PNG that stays
// inline (icon), and text, the picture, a resource link and the icon together
// with structured content (mixed). Each returns the same bytes on every call.
// It has no resources or prompts.
//
// It speaks stdio by default, or streamable HTTP at path /mcp with stateful
// sessions:
//
//	demo-server                      # stdio
//	demo-server -http 127.0.0.1:0    # HTTP on a free port
//	demo-server -transport http      # HTTP on 127.0.0.1:8091
//
// Over HTTP it prints "listening on http://HOST:PORT/mcp" on stderr once it
// accepts connections. It negotiates only protocol versions 2025-11-25,
// 2025-06-18 and 2025-03-26, the initialize-handshake era mcpgw speaks to its
// upstreams.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// defaultHTTPAddr is where -transport http listens unless -http says otherwise.
	defaultHTTPAddr = "127.0.0.1:8091"
	// shutdownTimeout bounds the graceful HTTP shutdown after a signal.
	shutdownTimeout = 5 * time.Second
)

// errUsage reports bad flags; the flag package has already printed why.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr, os.LookupEnv)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "demo-server: %v\n", err)
		os.Exit(1)
	}
}

// run serves until the client goes away (stdio) or ctx is done.
func run(ctx context.Context, args []string, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	fs := flag.NewFlagSet("demo-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "demo", "the server's `name` in its initialize result (serverInfo.name)")
	transport := fs.String("transport", "stdio", "`stdio` or http; -http implies http")
	httpAddr := fs.String("http", defaultHTTPAddr, "serve streamable HTTP at http://`ADDR`/mcp; use port 0 for a free port")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["http"] && !set["transport"] {
		*transport = "http"
	}

	srv, err := newServer(options{Name: *name, Stderr: stderr, LookupEnv: lookupEnv})
	if err != nil {
		return err
	}
	switch *transport {
	case "stdio":
		if set["http"] {
			fmt.Fprintln(stderr, "-http conflicts with -transport stdio")
			return errUsage
		}
		// Run returns ctx.Err() after a signal; that is a normal stop.
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("serving stdio: %w", err)
		}
		return nil
	case "http":
		return serveHTTP(ctx, srv, *httpAddr, stderr)
	default:
		fmt.Fprintf(stderr, "unknown -transport %q: want stdio or http\n", *transport)
		return errUsage
	}
}

// newHTTPHandler serves srv as streamable HTTP at /mcp, with stateful
// sessions (Mcp-Session-Id) and the SDK's default DNS-rebinding protection.
func newHTTPHandler(srv *mcp.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	return mux
}

// serveHTTP listens on addr, announces the endpoint on stderr and serves until
// ctx is done, then shuts down within shutdownTimeout.
func serveHTTP(ctx context.Context, srv *mcp.Server, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// Long-lived SSE streams (the standalone GET of every session) would hold
	// Shutdown for its whole timeout, so shutting down cancels every request
	// context, which ends them.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           newHTTPHandler(srv),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	hs.RegisterOnShutdown(cancelBase)

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// Tests and scripts wait for this line; Serve is already accepting, and
	// the listener queues connections in any case.
	fmt.Fprintf(stderr, "listening on http://%s/mcp\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
	}
	<-served // http.ErrServerClosed
	return nil
}
