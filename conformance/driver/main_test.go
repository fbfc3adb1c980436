package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeServer is an MCP server over streamable HTTP on loopback with two
// tools: add_numbers, which records the arguments it got, and broken, whose
// result is an error.
type fakeServer struct {
	url string

	mu  sync.Mutex
	got []map[string]any
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "add_numbers", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			f.mu.Lock()
			f.got = append(f.got, args)
			f.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "8"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "broken", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewUnstartedServer(h)
	ts.Start() // httptest listens on 127.0.0.1:0
	t.Cleanup(ts.Close)
	f.url = ts.URL + "/mcp"
	return f
}

func (f *fakeServer) calls() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.got...)
}

func TestRun(t *testing.T) {
	f := newFakeServer(t)
	tests := []struct {
		name      string
		args      []string
		wantErr   string // empty: run succeeds
		wantOut   string // in stdout when it succeeds
		wantCalls int    // calls of add_numbers the fake saw
	}{
		{name: "list only", args: []string{"-url", f.url}, wantOut: "tools: add_numbers, broken"},
		{name: "call", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `{"a":5,"b":3}`}, wantOut: "called add_numbers: 1 content block(s)", wantCalls: 1},
		{name: "unknown tool", args: []string{"-url", f.url, "-tool", "nope"}, wantErr: `tool "nope" is not among the 2 tools listed`},
		{name: "error result", args: []string{"-url", f.url, "-tool", "broken"}, wantErr: `tool "broken" answered with isError: true`},
		{name: "args not an object", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `[1]`}, wantErr: "-args: want a JSON object"},
		{name: "args not JSON", args: []string{"-url", f.url, "-tool", "add_numbers", "-args", `{"secret":`}, wantErr: "-args: want a JSON object"},
		{name: "no url", args: nil, wantErr: "-url is required"},
		{name: "not loopback", args: []string{"-url", "http://192.0.2.1/mcp"}, wantErr: `-url: host "192.0.2.1" is not loopback`},
		{name: "not http", args: []string{"-url", "file:///etc/passwd"}, wantErr: "-url: want an http URL"},
		{name: "extra argument", args: []string{"-url", f.url, "more"}, wantErr: `unexpected argument "more"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.calls())
			var out bytes.Buffer
			err := run(t.Context(), tt.args, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run() error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("run() error %q repeats the tool arguments", err)
				}
			} else {
				if err != nil {
					t.Fatalf("run() error = %v", err)
				}
				if !strings.Contains(out.String(), tt.wantOut) {
					t.Errorf("run() printed %q, want it to contain %q", out.String(), tt.wantOut)
				}
			}
			calls := f.calls()[before:]
			if len(calls) != tt.wantCalls {
				t.Fatalf("the fake got %d calls of add_numbers, want %d", len(calls), tt.wantCalls)
			}
			for _, c := range calls {
				if c["a"] != 5.0 || c["b"] != 3.0 {
					t.Errorf("the fake got arguments %v, want a=5, b=3", c)
				}
			}
		})
	}
}
