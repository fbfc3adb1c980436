package upstream

// PLACEHOLDER: replaced by the real transport.

import (
	"context"
	"errors"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

type sseTransport struct{ ch chan struct{} }

func newSSETransport(srv config.Server, opts *ClientOptions) transport {
	return &sseTransport{ch: make(chan struct{})}
}

func (t *sseTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	return errors.New("not implemented")
}
func (t *sseTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	return errors.New("not implemented")
}
func (t *sseTransport) ready(ctx context.Context, version string) {}
func (t *sseTransport) close(ctx context.Context) error           { return nil }
func (t *sseTransport) done() <-chan struct{}                     { return t.ch }
func (t *sseTransport) err() error                                { return nil }
