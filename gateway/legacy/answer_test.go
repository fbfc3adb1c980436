package legacy

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// TestAnswerKind checks, on a fake clock, when a forwarded request is
// answered as JSON and when as an event stream: JSON when its response is
// in first and within StreamAfter; a stream once StreamAfter passes (with
// its priming event on 2025-11-25 only) or at once when the call has a
// notification for the client; an empty stream for a call cancelled while
// its answer was still to be JSON.
func TestAnswerKind(t *testing.T) {
	const after = 200 * time.Millisecond
	// streams returns how many POST streams s holds and the events of
	// stream 1.
	streams := func(b *bubble, sid string) (int, []event) {
		s := b.session(sid)
		s.mu.Lock()
		defer s.mu.Unlock()
		var evs []event
		if st := s.streams[1]; st != nil {
			evs = append(evs, st.events...)
		}
		return len(s.streams), evs
	}
	body := func(t *testing.T, rec interface{ Result() *http.Response }) (string, []sse.Event) {
		t.Helper()
		resp := rec.Result()
		ct := resp.Header.Get("Content-Type")
		if ct != "text/event-stream" {
			return ct, nil
		}
		return ct, events(t, resp)
	}

	t.Run("quick: JSON", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{StreamAfter: after})
			sid := b.initialize(V20251125, `{}`)
			start := time.Now()
			rec := b.serve(http.MethodPost, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"hi"}}}`)
			if ct, _ := body(t, rec); ct != "application/json" || rec.Code != http.StatusOK {
				t.Fatalf("status %d, type %q, want 200 JSON", rec.Code, ct)
			}
			want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"text":"hi"}}}`
			if got := rec.Body.String(); got != want {
				t.Errorf("body %s, want %s", got, want)
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("answered after %v of fake time, want at once", d)
			}
			if n, _ := streams(b, sid); n != 0 {
				t.Errorf("%d streams left in the session, want 0", n)
			}
		})
	})

	for _, v := range []string{V20251125, V20250618} {
		t.Run("slow: a stream after StreamAfter, "+v, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBubble(t, Options{StreamAfter: after})
				sid := b.initialize(v, `{}`)
				post := b.start(context.Background(), http.MethodPost, sid, blockCall)
				<-b.fake.started
				time.Sleep(after - time.Millisecond)
				synctest.Wait()
				if n, _ := streams(b, sid); n != 0 {
					t.Fatalf("%d streams before StreamAfter, want 0", n)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				n, evs := streams(b, sid)
				wantEvents := 0
				if v == V20251125 {
					wantEvents = 1 // the priming event
				}
				if n != 1 || len(evs) != wantEvents {
					t.Fatalf("after StreamAfter: %d streams, %d events; want 1 stream, %d events", n, len(evs), wantEvents)
				}
				b.fake.release <- struct{}{}
				ct, got := body(t, <-post)
				if ct != "text/event-stream" || len(got) != wantEvents+1 {
					t.Fatalf("type %q, %d events; want a stream of %d", ct, len(got), wantEvents+1)
				}
				if v == V20251125 && (got[0].ID != "1_1" || len(got[0].Data) != 0) {
					t.Errorf("first event %+v, want the priming event 1_1", got[0])
				}
				if m := decode(t, got[len(got)-1].Data); string(m.ID) != "1" || !bytes.Contains(m.Result, []byte("released")) {
					t.Errorf("last event %+v, want the response", m)
				}
				if n, _ := streams(b, sid); n != 0 {
					t.Errorf("%d streams once written, want 0", n)
				}
			})
		})
	}

	t.Run("notification: a stream at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{StreamAfter: after})
			sid := b.initialize(V20251125, `{}`)
			start := time.Now()
			rec := b.serve(http.MethodPost, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__notify","arguments":{},"_meta":{"progressToken":"p"}}}`)
			if d := time.Since(start); d != 0 {
				t.Errorf("answered after %v of fake time, want at once", d)
			}
			ct, evs := body(t, rec)
			if ct != "text/event-stream" || len(evs) != 4 {
				t.Fatalf("type %q, %d events; want priming, 2 progress and the response", ct, len(evs))
			}
			if m := decode(t, evs[1].Data); m.Method != "notifications/progress" {
				t.Errorf("second event %+v, want progress", m)
			}
		})
	})

	t.Run("cancelled before StreamAfter: an empty stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBubble(t, Options{StreamAfter: after})
			sid := b.initialize(V20251125, `{}`)
			post := b.start(context.Background(), http.MethodPost, sid, blockCall)
			ctx := <-b.fake.started
			if rec := b.serve(http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`); rec.Code != http.StatusAccepted {
				t.Fatalf("cancel: status %d", rec.Code)
			}
			<-ctx.Done()
			rec := <-post
			if ct, evs := body(t, rec); ct != "text/event-stream" || len(evs) != 0 || rec.Code != http.StatusOK {
				t.Errorf("status %d, type %q, %d events; want an empty stream", rec.Code, ct, len(evs))
			}
		})
	})
}

// session returns the live session whose token is sid.
func (b *bubble) session(sid string) *session {
	b.t.Helper()
	s := (&env{t: b.t, h: b.h}).session(sid)
	if s == nil {
		b.t.Fatal("no live session for the token")
	}
	return s
}
