package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestParseLine checks which stdout lines are parsed into a pooled buffer
// that the caller may adopt: one successful response of minPooledAnswer
// bytes or more, and nothing else.
func TestParseLine(t *testing.T) {
	big := strings.Repeat("z", minPooledAnswer)
	tests := []struct {
		name       string
		line       string
		wantPooled bool
		wantErr    bool
	}{
		{name: "large result", line: `{"jsonrpc":"2.0","id":1,"result":{"text":"` + big + `"}}`, wantPooled: true},
		{name: "small result", line: `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{name: "large error", line: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"` + big + `"}}`},
		{name: "large notification", line: `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`},
		{name: "large request", line: `{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"x":"` + big + `"}}`},
		{name: "large batch", line: `[{"jsonrpc":"2.0","id":1,"result":{"text":"` + big + `"}}]`},
		{name: "large broken line", line: `{"jsonrpc":"2.0","id":1,"result":{"text":"` + big + `"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The line, then another that the reader reads over it.
			next := `{"jsonrpc":"2.0","id":9,"result":{"text":"` + strings.Repeat("#", len(tt.line)) + `"}}`
			lr := newLineReader(strings.NewReader(tt.line+"\n"+next+"\n"), 1<<20)
			line, err := lr.readLine()
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := parseLine(lr, line)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseLine accepted %.60s...", tt.line)
				}
				return
			}
			if err != nil || len(msgs) != 1 {
				t.Fatalf("parseLine = %d messages, %v", len(msgs), err)
			}
			if again, err := lr.readLine(); err != nil || string(again) != next {
				t.Fatalf("the next line read %.60q, %v", again, err)
			}
			m := msgs[0]
			raw := m.Result
			if raw == nil {
				raw = m.Params
			}
			if m.Error != nil {
				raw = json.RawMessage(m.Error.Message)
			}
			if strings.Contains(string(raw), "#") || !strings.Contains(tt.line, string(raw)) {
				t.Fatalf("the message changed when the reader went on: %.60s", raw)
			}
			release := m.TakeRelease()
			if (release != nil) != tt.wantPooled {
				t.Fatalf("pooled %v, want %v", release != nil, tt.wantPooled)
			}
			if release != nil {
				if m.TakeRelease() != nil {
					t.Fatal("the release was taken twice")
				}
				release()
			}
		})
	}
}

// TestClient_AdoptsResult checks that a call hands the pooled buffer of a
// successful result to hooks.Adopt, once, and only then: not without
// Adopt, not for an error.
func TestClient_AdoptsResult(t *testing.T) {
	var released atomic.Int64
	errorAnswer := false
	f := newFake(basicServe("2025-11-25", func(f *fakeTransport, m *jsonrpc.Message) error {
		answer := jsonrpc.NewResult(m.ID, json.RawMessage(`{"content":[]}`))
		if errorAnswer {
			answer = jsonrpc.NewErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeInternalError, "no", nil))
		}
		answer.SetRelease(func() { released.Add(1) })
		f.recv(answer, m.ID)
		return nil
	}))
	c := connect(t, f, ClientOptions{Name: "x"})

	var adopted []func()
	hooks := &CallHooks{Adopt: func(release func()) { adopted = append(adopted, release) }}
	res, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"t"}`), hooks)
	if err != nil || string(res) != `{"content":[]}` {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if len(adopted) != 1 || released.Load() != 0 {
		t.Fatalf("%d adopted, %d released before the caller gave it back; want 1, 0", len(adopted), released.Load())
	}
	adopted[0]()
	if released.Load() != 1 {
		t.Fatalf("%d released, want 1", released.Load())
	}

	// Without Adopt the buffer is left to the garbage collector.
	if _, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"t"}`), &CallHooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"t"}`), nil); err != nil {
		t.Fatal(err)
	}
	errorAnswer = true
	if _, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"t"}`), hooks); err == nil {
		t.Fatal("the error answer was a success")
	}
	if len(adopted) != 1 || released.Load() != 1 {
		t.Fatalf("%d adopted, %d released after calls that adopt nothing; want 1, 1", len(adopted), released.Load())
	}
}
