package legacy

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
)

// released counts the bodies given back by releaseBody.
var released atomic.Int64

// Every test of this package runs with releaseBody scribbling over a body
// instead of pooling it: a session, a call or the core that kept any part
// of a body it was done with sees '#'s in it, and -race reports the write.
func init() {
	releaseBody = func(b []byte) {
		for i := range b {
			b[i] = '#'
		}
		released.Add(1)
	}
}

// TestPost_ReleasesBody checks which bodies are released: a lone
// request's, once it is answered (its answer, which echoes the argument,
// is whole), large or small (the pool keeps those within its bounds);
// not a notification's.
func TestPost_ReleasesBody(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	big := strings.Repeat("x", 1<<10) // a body large enough for the pool
	for _, tc := range []struct {
		name, body string
		released   int64
	}{
		{"large request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"` + big + `"}}}`, 1},
		{"small request", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"x"}}}`, 1},
		{"large notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"` + big + `","progress":1}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := released.Load()
			resp := e.post(sid, tc.body)
			answer := readAll(t, resp)
			if got := released.Load() - before; got != tc.released {
				t.Errorf("%d bodies released, want %d", got, tc.released)
			}
			if !strings.Contains(tc.name, "request") {
				return
			}
			var m struct {
				Result struct {
					Content []struct{ Text string }
				}
			}
			if err := json.Unmarshal([]byte(answer), &m); err != nil || len(m.Result.Content) != 1 {
				t.Fatalf("answer %.200s: %v", answer, err)
			}
			if text := m.Result.Content[0].Text; text != big && text != "x" {
				t.Errorf("echoed text of %d bytes (%.20q...), want the argument", len(text), text)
			}
		})
	}
}

// TestRun_ReleasesResults checks that a call's result, which the core
// relays in the buffer the upstream read it into, is given back once its
// answer is written, on a JSON answer and on a stream, and that the
// answer is whole (the fake scribbles over what is given back); an error
// is not adopted.
func TestRun_ReleasesResults(t *testing.T) {
	e := newEnv(t, Options{})
	sid := e.initialize(V20251125)
	big := strings.Repeat("y", 8<<10)
	for _, tc := range []struct {
		name, body, want string
		released         int64
	}{
		{"JSON answer", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"` + big + `"}}}`, `"text":"` + big + `"`, 1},
		{"stream", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__notify","arguments":{},"_meta":{"progressToken":"p"}}}`, `"result":{"content":[]}`, 1},
		{"error", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__nosuch"}}`, `"error":`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.mgr.Released()
			answer := readAll(t, e.post(sid, tc.body))
			if !strings.Contains(answer, tc.want) || strings.Contains(answer, "###") {
				t.Errorf("answer %.300s, want it whole with %.60s", answer, tc.want)
			}
			if got := e.mgr.Released() - before; got != tc.released {
				t.Errorf("%d results given back, want %d", got, tc.released)
			}
		})
	}
}
