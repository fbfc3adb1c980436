package upstream

// The HTTP+SSE transport of MCP 2024-11-05, for servers configured with
// transport: sse.
//
//	start ── GET url (r3labs/sse) ─► event: endpoint, data: /messages?session=…
//	                                 (resolved against url; same origin only)
//	                               ─► event: message, data: {JSON-RPC} ─► recv(·, zero rel)
//	send  ── POST endpoint ─► 202 (the answer comes on the event stream)
//
// The event stream is the session: when it ends, the server has forgotten
// the endpoint, so the transport ends (done, with an error) instead of
// reconnecting, and the Manager starts a new Client.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	r3sse "github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// sseTransport is the 2024-11-05 HTTP+SSE transport.
type sseTransport struct {
	peer
	recv func(*jsonrpc.Message, related)

	life       context.Context // the event stream's, and the POSTs'
	endLife    context.CancelFunc
	wg         sync.WaitGroup
	endpointCh chan struct{} // closed once the endpoint is known
	doneCh     chan struct{}
	doneOnce   sync.Once
	errv       error // set before doneCh is closed

	mu       sync.Mutex
	endpoint string // the POST URL, from the endpoint event
	started  bool
	closed   bool
}

var _ transport = (*sseTransport)(nil)

func newSSETransport(srv config.Server, opts *ClientOptions) transport {
	t := &sseTransport{
		peer:       newPeer(srv, opts, config.TransportSSE),
		endpointCh: make(chan struct{}),
		doneCh:     make(chan struct{}),
	}
	t.life, t.endLife = context.WithCancel(context.Background())
	return t
}

// start opens the event stream and returns once the server named its POST
// endpoint.
func (t *sseTransport) start(ctx context.Context, recv func(m *jsonrpc.Message, rel related)) error {
	base, err := url.Parse(t.rawURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("invalid server URL %s", t.safeURL)
	}
	t.mu.Lock()
	if t.closed || t.started {
		t.mu.Unlock()
		return errTransportClosed
	}
	t.started = true
	t.recv = recv
	t.wg.Add(1)
	t.mu.Unlock()

	// One connection only: a new one would be a new session (see above).
	c := t.newStreamClient(t.rawURL, t.headerMap("", ""), &backoff.StopBackOff{})
	c.ResponseValidator = func(_ *r3sse.Client, resp *http.Response) error {
		if resp.StatusCode == http.StatusOK && mediaType(resp) == "text/event-stream" {
			return nil
		}
		if resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("server answered with content type %q; want text/event-stream", mediaType(resp))
		}
		return t.statusError(resp)
	}
	go func() {
		defer t.wg.Done()
		err := c.SubscribeWithContext(t.life, "", func(ev *r3sse.Event) { t.handle(base, ev) })
		if t.life.Err() != nil {
			return // close ends the transport
		}
		t.mu.Lock()
		connected := t.endpoint != ""
		t.mu.Unlock()
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			t.fail(fmt.Errorf("server sent an event larger than the limit of %d bytes (max_response_body): %w", t.max, err))
		case err != nil && !connected:
			t.fail(fmt.Errorf("opening the event stream: %w", t.netError(err)))
		case err != nil:
			t.fail(fmt.Errorf("event stream lost: %w", t.netError(err)))
		default:
			t.fail(errors.New("server closed the event stream"))
		}
	}()

	select {
	case <-t.endpointCh:
		return nil
	case <-t.doneCh:
		return t.errv
	case <-ctx.Done():
		return fmt.Errorf("waiting for the endpoint event: %w", ctx.Err())
	}
}

// handle takes one event of the stream: the endpoint first, then messages.
func (t *sseTransport) handle(base *url.URL, ev *r3sse.Event) {
	switch typ := string(ev.Event); typ {
	case "endpoint":
		t.mu.Lock()
		known := t.endpoint != ""
		t.mu.Unlock()
		if known {
			t.logger.Debug("ignoring a second endpoint event")
			return
		}
		ep, err := resolveEndpoint(base, string(ev.Data))
		if err != nil {
			t.fail(err)
			return
		}
		t.mu.Lock()
		t.endpoint = ep
		t.mu.Unlock()
		close(t.endpointCh)
	case "", "message":
		t.mu.Lock()
		known := t.endpoint != ""
		t.mu.Unlock()
		if !known {
			t.logger.Warn("dropping a message sent before the endpoint event")
			return
		}
		t.deliver("", ev.Data, false, t.recv, related{})
	default:
		t.logger.Debug("ignoring an event of unknown type", "event", typ)
	}
}

// resolveEndpoint resolves the endpoint event's data against the stream's
// URL and refuses another origin: the server must not send our messages
// (and our credentials) elsewhere.
func resolveEndpoint(base *url.URL, data string) (string, error) {
	data = strings.TrimSpace(data)
	if data == "" {
		return "", errors.New("server sent an empty endpoint event")
	}
	ref, err := url.Parse(data)
	if err != nil {
		return "", errors.New("server sent an endpoint event that is not a URL")
	}
	u := base.ResolveReference(ref)
	if u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) {
		return "", fmt.Errorf("server's endpoint event names another origin (%s://%s); refusing it", u.Scheme, u.Host)
	}
	return u.String(), nil
}

// fail ends the transport with err and stops the event stream.
func (t *sseTransport) fail(err error) {
	t.finish(err)
	t.endLife()
}

func (t *sseTransport) finish(err error) {
	t.doneOnce.Do(func() {
		t.errv = err
		close(t.doneCh)
	})
}

// send POSTs m to the endpoint; the server answers on the event stream.
func (t *sseTransport) send(ctx context.Context, m *jsonrpc.Message) error {
	return t.sendForwarding(ctx, m, nil)
}

var _ headerForwarder = (*sseTransport)(nil)

// sendForwarding is send, with the client headers of h that the server's
// forward_headers name on the POST (see CallHooks.Header).
func (t *sseTransport) sendForwarding(ctx context.Context, m *jsonrpc.Message, h http.Header) error {
	body, err := jsonrpc.Encode(m)
	if err != nil {
		return err
	}
	t.mu.Lock()
	closed, endpoint := t.closed, t.endpoint
	t.mu.Unlock()
	if closed || t.life.Err() != nil {
		return errTransportClosed
	}
	if endpoint == "" {
		return errors.New("no endpoint yet")
	}
	rctx, _, cancel := followingBoth(ctx, t.life)
	defer cancel()
	req, err := t.newPost(ctx, rctx, endpoint, body, "", "", h)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if t.life.Err() != nil {
			return errTransportClosed
		}
		return t.netError(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return t.statusError(resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()
	return nil
}

// ready does nothing: 2024-11-05 has no version header and no second
// stream.
func (t *sseTransport) negotiated(string)     {}
func (t *sseTransport) ready(context.Context) {}

// close stops the event stream and waits for its goroutine within ctx.
func (t *sseTransport) close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		select {
		case <-t.doneCh:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.closed = true
	t.mu.Unlock()
	t.endLife()
	waited := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(waited)
	}()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = ctx.Err()
	}
	t.finish(nil)
	return err
}

func (t *sseTransport) done() <-chan struct{} { return t.doneCh }

func (t *sseTransport) err() error {
	select {
	case <-t.doneCh:
		return t.errv
	default:
		return nil
	}
}
