package upstream

// PLACEHOLDER: replaced by the real transport.

import (
	"context"
	"errors"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

type stdioTransport struct{ ch chan struct{} }

func newStdioTransport(srv config.Server, opts *ClientOptions) transport {
	return &stdioTransport{ch: make(chan struct{})}
}

func (t *stdioTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	return errors.New("not implemented")
}
func (t *stdioTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	return errors.New("not implemented")
}
func (t *stdioTransport) ready(ctx context.Context, version string) {}
func (t *stdioTransport) close(ctx context.Context) error           { return nil }
func (t *stdioTransport) done() <-chan struct{}                     { return t.ch }
func (t *stdioTransport) err() error                                { return nil }
