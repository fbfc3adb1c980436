package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSandwich_InvalidUTF8 holds the gateway to RFC 8259, section 8.1 (JSON
// text exchanged between systems is UTF-8) both ways. A client's message
// with invalid UTF-8 anywhere, its id included, is refused with 400 and
// -32700 under a null id, and reaches no upstream; an upstream's answer
// with invalid UTF-8 reaches the client with each bad byte replaced by
// U+FFFD, as encoding/json decodes it. Every answer is valid JSON text.
func TestSandwich_InvalidUTF8(t *testing.T) {
	const badText = "a\xffb\xc3(" // a lone 0xff, and 0xc3 without its continuation
	const mended = "a\ufffdb\ufffd("
	answerWith := func(reply func(f *fakeUpstream, w http.ResponseWriter, msg string)) fakeHook {
		return func(f *fakeUpstream, w http.ResponseWriter, r *http.Request, m rpcRecord) {
			var p struct{ Arguments struct{ Text string } }
			json.Unmarshal(m.Params, &p)
			switch p.Arguments.Text {
			case "error":
				reply(f, w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32000,"message":"`+badText+`"}}`)
			default:
				reply(f, w, rpcResult(m.ID, `{"content":[{"type":"text","text":"`+badText+`"}]}`))
			}
		}
	}
	asJSON := func(_ *fakeUpstream, w http.ResponseWriter, msg string) { writeJSONBody(w, msg) }
	asSSE := func(f *fakeUpstream, w http.ResponseWriter, msg string) { f.reply(w, msg) }
	jsonUp := newFake(t, fakeOptions{Hooks: map[string]fakeHook{"tools/call": answerWith(asJSON)}})
	sseUp := newFake(t, fakeOptions{Hooks: map[string]fakeHook{"tools/call": answerWith(asSSE)}})
	g := startGateway(t, gatewayYAML(t, httpServer("json", jsonUp.url), httpServer("sse", sseUp.url)))
	g.waitRunning(t, "json")
	g.waitRunning(t, "sse")
	c := g.connect(t, "2025-11-25")

	// validText fails the test unless b is valid JSON text.
	validText := func(t *testing.T, b string) {
		t.Helper()
		if !utf8.ValidString(b) || !json.Valid([]byte(b)) {
			t.Fatalf("the gateway wrote a message that is not valid JSON text: %q", b)
		}
	}

	t.Run("client", func(t *testing.T) {
		tests := []struct {
			name    string
			session bool
			body    string
		}{
			{"invalid UTF-8 in the id of initialize", false,
				`{"jsonrpc":"2.0","id":"i` + "\xff" + `","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
			{"invalid UTF-8 in the id of a call", true,
				`{"jsonrpc":"2.0","id":"c` + "\xc0\xaf" + `","method":"tools/call","params":{"name":"mcp__json__echo","arguments":{}}}`},
			{"invalid UTF-8 in the arguments", true,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__json__echo","arguments":{"text":"` + badText + `"}}}`},
			{"invalid UTF-8 in a notification", true,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + "\xed\xa0\x80" + `"}}`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(jsonUp.posts("tools/call"))
				cl := c
				if !tt.session {
					cl = &client{t: t, url: c.url, header: http.Header{}}
				}
				resp := cl.post(tt.body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				validText(t, string(b))
				var m struct {
					ID    json.RawMessage `json:"id"`
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				json.Unmarshal(b, &m)
				if resp.StatusCode != http.StatusBadRequest || m.Error.Code != -32700 || string(m.ID) != "null" || !strings.Contains(m.Error.Message, "UTF-8") {
					t.Errorf("answer %d %s, want 400 with -32700 naming UTF-8 under a null id", resp.StatusCode, b)
				}
				if n := len(jsonUp.posts("tools/call")); n != before {
					t.Errorf("the upstream received %d tools/call, want none", n-before)
				}
			})
		}
	})

	t.Run("upstream", func(t *testing.T) {
		tests := []struct {
			name, tool, text string
			want             string // the text of the result, or the error's message
		}{
			{"result as JSON", "mcp__json__echo", "ok", mended},
			{"result on an event stream", "mcp__sse__echo", "ok", mended},
			{"error as JSON", "mcp__json__echo", "error", mended},
			{"error on an event stream", "mcp__sse__echo", "error", mended},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
					"params": map[string]any{"name": tt.tool, "arguments": map[string]string{"text": tt.text}}})
				var got string
				for _, ev := range c.postCall(string(body)) {
					validText(t, ev.Data)
					var m struct {
						Result struct {
							Content []struct{ Text string }
						}
						Error struct{ Message string }
					}
					if json.Unmarshal([]byte(ev.Data), &m) != nil {
						continue
					}
					for _, ct := range m.Result.Content {
						got += ct.Text
					}
					got += m.Error.Message
				}
				if got != tt.want {
					t.Errorf("the client got %q, want %q", got, tt.want)
				}
			})
		}
	})
}
