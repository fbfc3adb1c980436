package legacy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/upstream"
)

// batchOf returns a JSON-RPC batch of n tools/call requests of echo, with
// the ids 1 to n.
func batchOf(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"t%d"}}}`, i, i)
	}
	b.WriteByte(']')
	return b.String()
}

// countCalls replaces server "a" of e with one that counts the calls it
// gets before answering them as the fake does.
func countCalls(e *env) *atomic.Int64 {
	var n atomic.Int64
	srv := e.fake.server()
	handle := srv.Handle
	srv.Handle = func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
		if method == "tools/call" {
			n.Add(1)
		}
		return handle(ctx, method, params, hooks)
	}
	e.mgr.Set(srv)
	return &n
}

// TestBatch_EveryRequestAnswered checks that a batch answered as one event
// stream gets exactly one response per request, however far the stream's
// writer lags behind the calls: responses are never dropped from a
// stream's buffer, which here holds only two events.
func TestBatch_EveryRequestAnswered(t *testing.T) {
	const n = 400
	e := newEnv(t, Options{MaxInFlight: n, MaxStreamEvents: 2})
	calls := countCalls(e)
	sid := e.initialize(V20250326)

	resp := e.post(sid, batchOf(n))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	seen := map[string]int{}
	for _, ev := range events(t, resp) {
		m := decode(t, ev.Data)
		if m.Error != nil {
			t.Errorf("request %s: error %d %s", m.ID, m.Error.Code, m.Error.Message)
			continue
		}
		var id int
		if err := json.Unmarshal(m.ID, &id); err != nil || id < 1 || id > n {
			t.Errorf("an answer with id %s", m.ID)
			continue
		}
		if want := fmt.Sprintf(`{"content":[{"type":"text","text":"t%d"}]}`, id); string(m.Result) != want {
			t.Errorf("request %d: result %s, want %s", id, m.Result, want)
		}
		seen[string(m.ID)]++
	}
	for i := 1; i <= n; i++ {
		if c := seen[fmt.Sprint(i)]; c != 1 {
			t.Errorf("request %d answered %d times, want once", i, c)
		}
	}
	if got := calls.Load(); got != n {
		t.Errorf("the server got %d calls, want %d", got, n)
	}
}

// TestBatch_OverInFlightCap checks that a batch with more requests than a
// session may have in flight is refused whole, before anything in it runs:
// one JSON-RPC error without an id, -31003 naming the cap, in a 400.
func TestBatch_OverInFlightCap(t *testing.T) {
	e := newEnv(t, Options{MaxInFlight: 3})
	calls := countCalls(e)
	sid := e.initialize(V20250326)

	// A notification in the refused batch is not acted on either: the
	// cancel below would otherwise reach the blocked call.
	body := strings.TrimSuffix(batchOf(4), "]") + `,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}]`
	blocked := make(chan *http.Response, 1)
	go func() {
		blocked <- e.post(sid, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"mcp__a__block","arguments":{}}}`)
	}()
	callCtx := <-e.fake.started

	resp := e.post(sid, body)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, readAll(t, resp))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	m := decode(t, []byte(readAll(t, resp)))
	// -31003, the gateway's code for its limits, as a lone request over
	// the cap gets, with data naming the limit.
	if string(m.ID) != "null" || m.Error == nil || m.Error.Code != gateway.CodeRateLimited {
		t.Fatalf("answer %+v, want one error with id null and code -31003", m)
	}
	for _, want := range []string{"4 requests", "3"} {
		if !strings.Contains(m.Error.Message, want) {
			t.Errorf("message %q does not say %q", m.Error.Message, want)
		}
	}
	if got := string(m.Error.Data); got != `{"limit":3,"requests":4}` {
		t.Errorf("data %s", got)
	}
	if callCtx.Err() != nil {
		t.Error("the refused batch's cancel reached the call in flight")
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("the server got %d calls, want only the blocked one", got)
	}

	// A batch within the cap still runs.
	e.fake.release <- struct{}{}
	if m := lastMessage(t, <-blocked); m.Error != nil {
		t.Fatalf("blocked call: %+v", m.Error)
	}
	resp = e.post(sid, batchOf(3))
	got := 0
	for _, ev := range events(t, resp) {
		if m := decode(t, ev.Data); m.Error == nil {
			got++
		}
	}
	if got != 3 {
		t.Errorf("a batch of 3 got %d answers", got)
	}
}
