// Command mcpgw is the MCP gateway: one streamable-HTTP MCP endpoint in
// front of many stdio and HTTP MCP servers.
//
//	mcpgw [serve] [--config mcpgw.yaml]   run the gateway (the default)
//	mcpgw validate [--config mcpgw.yaml]  check a config file, print every problem
//	mcpgw import [--admin-url URL] FILE   convert a Claude Desktop, Cursor or
//	                                      VS Code MCP config into mcpgw servers
//	mcpgw token                           print a new random token and its sha256: hash
//	mcpgw version                         print the version
//	mcpgw help [COMMAND]                  print every command and its flags
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
	"strings"
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

// errUsage marks a command line mistake (exit 2); what was wrong has been
// printed.
var errUsage = errors.New("usage")

// A command is one of mcpgw's commands, as its help shows it.
type command struct {
	name    string
	usage   string // after "usage: "
	summary string // one line, in the list of commands
	about   string // more, in the command's own help; may be ""
	// flags defines the command's flags on fs, for its help; the command
	// parses its arguments with the same definitions. Nil: it takes none.
	flags func(fs *flag.FlagSet)
}

// commands are mcpgw's commands, in the order help lists them.
var commands = []command{
	{
		name:    "serve",
		usage:   "mcpgw [serve] [--config FILE]",
		summary: "run the gateway (the default command)",
		about: `Runs the gateway until SIGINT or SIGTERM, then turns /readyz unready, lets
in-flight calls finish within shutdown_grace, stops every server and exits 0.
SIGHUP reloads the servers of the config file.
`,
		flags: func(fs *flag.FlagSet) { configFlag(fs) },
	},
	{
		name:    "validate",
		usage:   "mcpgw validate [--config FILE]",
		summary: "check a config file and print every problem (exit 1 on any)",
		about: `Prints each problem of the config file with its line and key path, and exits 1
on any problem. Then prints a warning for each stdio server whose command the
gateway would not find (looked up in PATH, as the gateway does), which does
not change the exit code: the gateway may run where PATH differs.
`,
		flags: func(fs *flag.FlagSet) { configFlag(fs) },
	},
	{
		name:    "import",
		usage:   "mcpgw import [--admin-url URL [--admin-token-env VAR]] FILE",
		summary: "convert a Claude Desktop, Cursor or VS Code MCP config into mcpgw servers",
		about: `Reads the MCP servers of a Claude Desktop or Cursor config ("mcpServers") or
of a VS Code mcp.json ("servers"; comments and trailing commas allowed) and
prints them as mcpgw's "servers:" YAML. With --admin-url it registers them
with a running gateway instead (POST URL/admin/servers).

Renamed and skipped entries are reported on stderr. Exit 0: every entry
converted (and registered); 1: some were skipped or not registered; 2: the
file is unreadable, not a client config, or has no servers.
`,
		flags: func(fs *flag.FlagSet) { importFlags(fs) },
	},
	{
		name:    "token",
		usage:   "mcpgw token",
		summary: "print a new random token and the sha256: line that admits it, for admin.tokens or auth.api_keys",
		about:   tokenAbout,
	},
	{
		name:    "version",
		usage:   "mcpgw version",
		summary: "print the version",
	},
	{
		name:    "help",
		usage:   "mcpgw help [COMMAND]",
		summary: "print this help, or one command's",
	},
}

// run runs the command in args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	name := "serve"
	switch {
	case len(args) > 0 && isHelpFlag(args[0]):
		usage(stdout)
		return 0
	case len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-':
		name, args = args[0], args[1:]
	}
	var err error
	switch name {
	case "serve":
		err = serveCmd(ctx, args, stderr, lookupEnv)
	case "validate":
		err = validateCmd(args, stdout, stderr, lookupEnv)
	case "import":
		return importCmd(ctx, args, stdout, stderr, lookupEnv)
	case "token":
		err = tokenCmd(args, stdout, stderr)
	case "version":
		if err = noFlags("version", args, stderr); err == nil {
			fmt.Fprintln(stdout, "mcpgw", buildVersion())
		}
	case "help":
		err = helpCmd(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "mcpgw: unknown command %q\n", name)
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		commandHelp(stdout, name)
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "mcpgw:", err)
		return 1
	}
}

func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// usage prints every command with its flags.
func usage(w io.Writer) {
	fmt.Fprint(w, "mcpgw is an MCP gateway: one streamable-HTTP MCP endpoint in front of many MCP servers.\n\n")
	fmt.Fprint(w, "usage: mcpgw [COMMAND] [FLAGS]\n\ncommands:\n")
	for _, c := range commands {
		line := strings.TrimPrefix(c.usage, "mcpgw ")
		if c.name == "serve" {
			line = "serve [--config FILE]"
		}
		fmt.Fprintf(w, "  %s\n        %s\n", line, c.summary)
		if c.flags != nil {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			printFlags(w, fs, "        ")
		}
	}
	fmt.Fprint(w, "\n\"mcpgw COMMAND --help\" shows one command's help.\n")
}

// commandHelp prints the help of the command name.
func commandHelp(w io.Writer, name string) {
	for _, c := range commands {
		if c.name != name {
			continue
		}
		fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, c.summary)
		if c.about != "" {
			fmt.Fprintf(w, "\n%s", c.about)
		}
		if c.flags != nil {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			fmt.Fprint(w, "\nflags:\n")
			printFlags(w, fs, "  ")
		}
		return
	}
}

// printFlags prints the flags of fs one a line, each after indent:
// "--name VALUE   what it is (default ...)".
func printFlags(w io.Writer, fs *flag.FlagSet, indent string) {
	type line struct{ flag, usage string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		value, text := flag.UnquoteUsage(f)
		l := line{flag: "--" + f.Name, usage: text}
		if value != "" {
			l.flag += " " + value
		}
		if f.DefValue != "" {
			l.usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		width = max(width, len(l.flag))
		lines = append(lines, l)
	})
	for _, l := range lines {
		fmt.Fprintf(w, "%s%-*s  %s\n", indent, width, l.flag, l.usage)
	}
}

// helpCmd prints the help, or one command's. "help -h" asks for help
// about help: the general help says it.
func helpCmd(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0, len(args) == 1 && isHelpFlag(args[0]):
		usage(stdout)
		return nil
	case len(args) > 1:
		fmt.Fprintf(stderr, "mcpgw help: unexpected argument %q\n", args[1])
		return errUsage
	}
	for _, c := range commands {
		if c.name == args[0] {
			commandHelp(stdout, c.name)
			return nil
		}
	}
	fmt.Fprintf(stderr, "mcpgw: unknown command %q\n", args[0])
	usage(stderr)
	return errUsage
}

// newFlagSet returns the flag set of the command name, whose errors go
// to stderr; parse prints the command's help.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parse parses args with fs, the flag set of the command name. For -h it
// returns flag.ErrHelp, and the caller prints the command's help on
// stdout; for a bad flag it prints the help on stderr, after the flag
// package's message, and returns errUsage.
func parse(fs *flag.FlagSet, name string, args []string, stderr io.Writer) error {
	err := fs.Parse(args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return err
	default:
		commandHelp(stderr, name)
		return errUsage
	}
}

// configFlag defines --config, the flag of serve and validate.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "mcpgw.yaml", "read the config from `FILE`")
}

// flags parses the flags of serve and validate.
func flags(name string, args []string, stderr io.Writer) (configPath string, err error) {
	fs := newFlagSet(name, stderr)
	path := configFlag(fs)
	if err := parse(fs, name, args, stderr); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw %s: unexpected argument %q\n", name, fs.Arg(0))
		return "", errUsage
	}
	return *path, nil
}

// noFlags parses the arguments of a command that takes none, for -h.
func noFlags(name string, args []string, stderr io.Writer) error {
	fs := newFlagSet(name, stderr)
	if err := parse(fs, name, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw %s: unexpected argument %q\n", name, fs.Arg(0))
		return errUsage
	}
	return nil
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
