// Package archtest holds the tests that keep mcpgw's house in order: no
// package imports against the arrows of DESIGN.md's package table, and
// every package has a package doc. It has no code of its own; it exists so
// these checks run with every `go test ./...`.
package archtest
