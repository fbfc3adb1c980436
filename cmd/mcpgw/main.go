// Command mcpgw is the MCP gateway: one streamable-HTTP MCP endpoint in
// front of many stdio and HTTP MCP servers.
//
//	mcpgw [serve] [--config mcpgw.yaml]   run the gateway (the default)
//	mcpgw validate [--config mcpgw.yaml]  check a config file, print every problem
//	mcpgw import [--admin-url URL] FILE   convert a Claude Desktop, Cursor or
//	                                      VS Code MCP config into mcpgw servers
//	mcpgw version                         print the version
//
// main is thin (STYLE.md): it parses flags, loads the config, builds the
// parts in order, runs them, and shuts them down within the configured
// grace when SIGINT or SIGTERM arrives. All logic lives in the libraries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module's build info.
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// errUsage marks a command line mistake (exit 2).
var errUsage = errors.New("usage")

// run runs the command in args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serveCmd(ctx, args, stderr, lookupEnv)
	case "validate":
		err = validateCmd(args, stdout, stderr, lookupEnv)
	case "import":
		return importCmd(ctx, args, stdout, stderr, lookupEnv)
	case "version":
		fmt.Fprintln(stdout, "mcpgw", buildVersion())
		return 0
	case "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "mcpgw: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintln(stderr, "mcpgw:", err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  mcpgw [serve] [--config FILE]   run the gateway (default command; FILE defaults to mcpgw.yaml)
  mcpgw validate [--config FILE]  check a config file and print every problem (exit 1 on any)
  mcpgw import [--admin-url URL [--admin-token-env VAR]] FILE
                                  print the servers of a Claude Desktop, Cursor or VS Code MCP config
                                  as mcpgw YAML, or register them with a running gateway (--admin-url)
  mcpgw version                   print the version
`)
}

// flags parses the flags every command takes.
func flags(name string, args []string, stderr io.Writer) (configPath string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&configPath, "config", "mcpgw.yaml", "the config file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", errUsage // the flag package has said what was wrong
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw %s: unexpected argument %q\n", name, fs.Arg(0))
		return "", errUsage
	}
	return configPath, nil
}

// buildVersion is the version to report: the -ldflags one, else the
// module version, else the VCS revision, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
}
