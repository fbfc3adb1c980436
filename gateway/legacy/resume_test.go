package legacy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// bubble is a Handler over the fake server "a", served in-process (no
// sockets), for tests on synctest's fake clock. The core's timeouts are a
// day, so that only the edge's clocks matter.
type bubble struct {
	t    *testing.T
	fake *fake
	h    *Handler
	e    *echo.Echo
}

func newBubble(t *testing.T, opts Options) *bubble {
	t.Helper()
	f := newFake()
	core, err := gateway.New(gateway.Options{
		Upstreams:    upstreamtest.NewManager(f.server()),
		CallTimeout:  24 * time.Hour,
		InputTimeout: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	opts.Core = core
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 24 * time.Hour
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	e := echo.New()
	h.Register(e)
	return &bubble{t: t, fake: f, h: h, e: e}
}

// start serves a request in a goroutine until ctx ends or the handler
// returns; the recorder comes on the channel once it returned.
func (b *bubble) start(ctx context.Context, method, sid, body string, hdr ...string) <-chan *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, method, "/mcp", strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(HeaderSessionID, sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		done <- rec
	}()
	return done
}

// serve serves a request to the end.
func (b *bubble) serve(method, sid, body string, hdr ...string) *httptest.ResponseRecorder {
	return <-b.start(context.Background(), method, sid, body, hdr...)
}

func (b *bubble) initialize(version, caps string) string {
	b.t.Helper()
	rec := b.serve(http.MethodPost, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	if rec.Code != http.StatusOK {
		b.t.Fatalf("initialize: %d", rec.Code)
	}
	return rec.Header().Get(HeaderSessionID)
}

const blockCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`

// TestResumeWindow checks, on a fake clock, that a call whose stream lost
// its connection is cancelled once ResumeWindow passes with no connection
// resuming it, with a cause that says so; that a resume in time stops
// that, and the window starts again when the resumed connection drops; and
// that a resume after the window comes too late even before the janitor
// looked.
func TestResumeWindow(t *testing.T) {
	// dropped starts a blocking call on a 2025-11-25 session, waits for
	// its answer to become a stream (StreamAfter), lets its POST
	// connection go, and returns the session and the call's context
	// upstream. Stream 1's priming event is "1_1". The POST's handler
	// returns once the call ends.
	dropped := func(b *bubble) (string, context.Context) {
		sid := b.initialize(V20251125, `{}`)
		ctx, drop := context.WithCancel(context.Background())
		b.start(ctx, http.MethodPost, sid, blockCall)
		callCtx := <-b.fake.started
		time.Sleep(b.h.opts.StreamAfter)
		synctest.Wait()
		drop()
		synctest.Wait()
		return sid, callCtx
	}
	cancelled := func(t *testing.T, callCtx context.Context, want bool) {
		t.Helper()
		synctest.Wait()
		if got := callCtx.Err() != nil; got != want {
			t.Fatalf("call cancelled: %v, want %v", got, want)
		}
		if want && !errors.Is(context.Cause(callCtx), errNotResumed) {
			t.Errorf("cause %v, want %v", context.Cause(callCtx), errNotResumed)
		}
	}

	t.Run("not resumed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{ResumeWindow: time.Minute, IdleTimeout: time.Hour})
			_, callCtx := dropped(b)
			time.Sleep(time.Minute - time.Second)
			cancelled(t, callCtx, false)
			time.Sleep(time.Minute)
			cancelled(t, callCtx, true)
			if got := b.h.Sessions()[0].InFlight; got != 0 {
				t.Errorf("InFlight %d after the cancel", got)
			}
		})
	})

	t.Run("resumed in time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{ResumeWindow: time.Minute, IdleTimeout: time.Hour})
			sid, callCtx := dropped(b)
			time.Sleep(30 * time.Second)
			ctx, drop := context.WithCancel(context.Background())
			get := b.start(ctx, http.MethodGet, sid, "", HeaderLastEventID, "1_1")
			time.Sleep(10 * time.Minute)
			cancelled(t, callCtx, false)

			drop() // the resumed connection goes too: a new window starts
			rec := <-get
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
				t.Fatalf("resume: status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			time.Sleep(time.Minute - time.Second)
			cancelled(t, callCtx, false)
			time.Sleep(time.Minute)
			cancelled(t, callCtx, true)
		})
	})

	t.Run("resumed too late", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The janitor looks every 30s, at 10m00s and 10m30s; the
			// window of a drop at 2s (1s, then StreamAfter) ends at
			// 10m02s.
			b := newBubble(t, Options{ResumeWindow: 10 * time.Minute, IdleTimeout: time.Hour})
			time.Sleep(time.Second)
			sid, callCtx := dropped(b)
			time.Sleep(10*time.Minute + 14*time.Second)
			cancelled(t, callCtx, false)
			rec := b.serve(http.MethodGet, sid, "", HeaderLastEventID, "1_1")
			cancelled(t, callCtx, true)
			// The stream ends with what it had: no response.
			if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "data:") {
				t.Errorf("late resume: status %d, body %q", rec.Code, rec.Body.String())
			}
		})
	})

	t.Run("pending input keeps the session", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{ResumeWindow: time.Hour, IdleTimeout: time.Minute})
			sid := b.initialize(V20251125, allCaps)
			ctx, drop := context.WithCancel(context.Background())
			post := b.start(ctx, http.MethodPost, sid, askCall("1", "elicitation/create", elicitForm))
			synctest.Wait()
			drop()
			time.Sleep(10 * time.Minute)
			synctest.Wait()
			if n := len(b.h.Sessions()); n != 1 {
				t.Fatalf("%d sessions while an input request is pending, want 1", n)
			}
			if rec := b.serve(http.MethodPost, sid, `{"jsonrpc":"2.0","id":"mcpgw-1","result":{"action":"decline"}}`); rec.Code != http.StatusAccepted {
				t.Fatalf("answer: status %d", rec.Code)
			}
			if got := <-b.fake.answered; got != `{"action":"decline"}` {
				t.Errorf("the server got %s", got)
			}
			<-post // its handler returns with the call
			synctest.Wait()
			if got := b.h.Sessions()[0].InFlight; got != 0 {
				t.Errorf("InFlight %d after the answer", got)
			}
			time.Sleep(2 * time.Minute)
			synctest.Wait()
			if n := len(b.h.Sessions()); n != 0 {
				t.Errorf("%d sessions once idle, want 0", n)
			}
		})
	})
}
