//go:build race

package e2e

// raceEnabled makes the binaries under test race-instrumented too when the
// tests run with -race, so a data race in the gateway fails the run.
const raceEnabled = true
