//go:build !linux

package sched

import "errors"

// Supported reports whether this system has the policies.
const Supported = false

var errUnsupported = errors.New("scheduling policies are Linux's")

// Thread returns Other: elsewhere than Linux there are no policies.
func Thread() (int, error) { return Other, nil }

// SetThread has no effect elsewhere than Linux.
func SetThread(policy int) error { return errUnsupported }

// SetProcess has no effect elsewhere than Linux.
func SetProcess(policy int) error { return errUnsupported }

// Policies has nothing to read elsewhere than Linux.
func Policies(pid int) (map[int]int, error) { return nil, errUnsupported }
