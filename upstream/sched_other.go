//go:build !linux

package upstream

import "os/exec"

// startCommand starts cmd. Scheduling policies are Linux's: elsewhere
// batch has no effect.
func startCommand(cmd *exec.Cmd, _ bool) error { return cmd.Start() }
