package main

import (
	"fmt"
	"io"

	"github.com/mcpgw/mcpgw/config"
)

// validateCmd checks a config file and prints every problem with its key
// path. Any problem is exit 1.
func validateCmd(args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	path, err := flags("validate", args, stderr)
	if err != nil {
		return err
	}
	cfg, problems, err := config.Load(path, lookupEnv)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(stdout, "%s: %s\n", path, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %d problem(s)", path, len(problems))
	}
	fmt.Fprintf(stdout, "%s: ok (%d servers)\n", path, len(cfg.Servers))
	return nil
}
