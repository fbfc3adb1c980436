package main

import (
	"fmt"
	"io"

	"github.com/mcpgw/mcpgw/config"
)

// validateCmd checks a config file and prints every problem with its line
// and key path, then the warnings (config.Config.Warnings). Any problem is
// exit 1; warnings do not change the exit code.
func validateCmd(args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	path, err := flags("validate", args, stderr)
	if err != nil {
		return err
	}
	cfg, problems, err := config.Load(path, lookupEnv)
	if err != nil {
		return err
	}
	for _, p := range append(problems, cfg.Warnings(lookupEnv)...) {
		fmt.Fprintf(stdout, "%s: %s\n", path, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %d problem(s)", path, len(problems))
	}
	fmt.Fprintf(stdout, "%s: ok (%d servers)\n", path, len(cfg.Servers))
	return nil
}
