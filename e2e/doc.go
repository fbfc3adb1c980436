// Package e2e holds mcpgw's end-to-end tests: they build the real mcpgw
// binary and the repo's demo server, start them as processes, and drive the
// gateway with the official Go SDK client and with raw HTTP, as a user's
// agent would. Nothing here imports mcpgw's packages: the gateway is a black
// box reached over its endpoints.
package e2e
