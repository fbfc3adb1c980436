package upstream

// PLACEHOLDER: replaced by the real transport.

import (
	"context"
	"errors"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

type httpTransport struct{ ch chan struct{} }

func newHTTPTransport(srv config.Server, opts *ClientOptions) transport {
	return &httpTransport{ch: make(chan struct{})}
}

func (t *httpTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	return errors.New("not implemented")
}
func (t *httpTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	return errors.New("not implemented")
}
func (t *httpTransport) ready(ctx context.Context, version string) {}
func (t *httpTransport) close(ctx context.Context) error           { return nil }
func (t *httpTransport) done() <-chan struct{}                     { return t.ch }
func (t *httpTransport) err() error                                { return nil }
