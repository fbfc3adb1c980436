package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

func raws(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func newCore(t *testing.T, m *upstreamtest.Manager, opts Options) *Server {
	t.Helper()
	opts.Upstreams = m
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestToolsList(t *testing.T) {
	schema := `{"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"x":{"type":"string"}},"additionalProperties":false}`
	m := upstreamtest.NewManager(
		&upstreamtest.Server{Name: "zeta", Tools: raws(`{"name":"b","inputSchema":{"type":"object"}}`)},
		&upstreamtest.Server{Name: "alpha", Tools: raws(
			`{"name":"z","description":"last", "inputSchema":`+schema+`,"annotations":{"readOnlyHint":true},"_meta":{"k":1.50}}`,
			`{"name":"a","inputSchema":{"type":"object"}}`,
		)},
		&upstreamtest.Server{Name: "down", State: upstream.StateExited, Err: "signal: killed", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)},
	)
	s := newCore(t, m, Options{})
	res, err := s.Handle(context.Background(), &Request{Method: "tools/list"})
	if err != nil {
		t.Fatal(err)
	}
	// The server that is down is left out of the list (its tools stay
	// routable: TestToolsCall).
	// Every byte of a tool is kept but its name and execution.taskSupport
	// (optional: the gateway hosts tasks for tools without their own).
	want := `{"tools":[` +
		`{"name":"mcp__alpha__a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},` +
		`{"name":"mcp__alpha__z","description":"last", "inputSchema":` + schema + `,"annotations":{"readOnlyHint":true},"_meta":{"k":1.50},"execution":{"taskSupport":"optional"}},` +
		`{"name":"mcp__zeta__b","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`
	if diff := cmp.Diff(want, string(res.Body)); diff != "" {
		t.Errorf("tools/list (-want +got):\n%s", diff)
	}
	if res.Type != ResultComplete {
		t.Errorf("Type = %q", res.Type)
	}

	_, err = s.Handle(context.Background(), &Request{Method: "tools/list", Params: json.RawMessage(`{"cursor":"abc"}`)})
	assertCode(t, err, jsonrpc.CodeInvalidParams, "invalid cursor")
}

func assertCode(t *testing.T, err error, code int, substr string) *jsonrpc.Error {
	t.Helper()
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		t.Fatalf("error = %v, want a *jsonrpc.Error", err)
	}
	if jerr.Code != code || !strings.Contains(jerr.Message, substr) {
		t.Fatalf("error = %d %q, want %d containing %q", jerr.Code, jerr.Message, code, substr)
	}
	return jerr
}

func TestToolsCall(t *testing.T) {
	var gotParams atomic.Value
	echo := func(ctx context.Context, method string, params json.RawMessage, hooks *upstream.CallHooks) (json.RawMessage, error) {
		gotParams.Store(string(params))
		meta, _, _ := rawjson.Get(params, "_meta")
		token, _, _ := rawjson.Get(meta, "progressToken")
		if hooks != nil && hooks.Notify != nil {
			hooks.Notify(jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":`+string(token)+`,"progress":1}`)))
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1},"isError":false}`), nil
	}
	m := upstreamtest.NewManager(
		&upstreamtest.Server{Name: "files", Tools: raws(`{"name":"read__all","inputSchema":{"type":"object"}}`), Handle: echo},
		&upstreamtest.Server{Name: "down", State: upstream.StateExited, Err: "exit status 1", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)},
		&upstreamtest.Server{Name: "rpcerr", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`), Handle: func(context.Context, string, json.RawMessage, *upstream.CallHooks) (json.RawMessage, error) {
			return nil, &jsonrpc.Error{Code: -32602, Message: "bad arguments", Data: json.RawMessage(`{"field":"x"}`)}
		}},
		&upstreamtest.Server{Name: "slow", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`), Handle: func(ctx context.Context, _ string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	)
	s := newCore(t, m, Options{Servers: []config.Server{{Name: "slow", Timeout: config.Duration(20 * time.Millisecond)}}})

	var notes []string
	res, err := s.Handle(context.Background(), &Request{
		Method: "tools/call",
		Params: json.RawMessage(`{"name":"mcp__files__read__all","arguments":{"p":"/x"},"_meta":{"progressToken":"p"}}`),
		Notify: func(method string, params json.RawMessage) { notes = append(notes, method+" "+string(params)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1},"isError":false}`; string(res.Body) != want {
		t.Errorf("result = %s, want %s", res.Body, want)
	}
	// The server sees a progress token of the gateway's, not the client's.
	if want := `{"name":"read__all","arguments":{"p":"/x"},"_meta":{"progressToken":"mcpgw-p-1"}}`; gotParams.Load() != want {
		t.Errorf("upstream params = %s, want %s", gotParams.Load(), want)
	}
	if diff := cmp.Diff([]string{`notifications/progress {"progressToken":"p","progress":1}`}, notes); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}

	tests := []struct {
		name   string
		params string
		code   int
		substr string
		data   string
	}{
		{"unknown tool", `{"name":"mcp__files__nope"}`, jsonrpc.CodeInvalidParams, `unknown tool "mcp__files__nope"`, ""},
		{"no name", `{"arguments":{}}`, jsonrpc.CodeInvalidParams, "params.name", ""},
		{"no params", ``, jsonrpc.CodeInvalidParams, "needs params", ""},
		{"server down", `{"name":"mcp__down__t"}`, CodeUpstreamUnavailable, `server "down" is unavailable (state: exited): exit status 1`, `{"server":"down","state":"exited"}`},
		{"upstream error relayed", `{"name":"mcp__rpcerr__t"}`, -32602, "bad arguments", `{"field":"x"}`},
		{"timeout", `{"name":"mcp__slow__t"}`, CodeUpstreamTimeout, `server "slow" did not answer tools/call within 20ms`, `{"server":"slow","timeout":"20ms"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Handle(context.Background(), &Request{Method: "tools/call", Params: json.RawMessage(tt.params)})
			jerr := assertCode(t, err, tt.code, tt.substr)
			if string(jerr.Data) != tt.data {
				t.Errorf("data = %s, want %s", jerr.Data, tt.data)
			}
		})
	}
}

func TestClientCancelIsNotAnError(t *testing.T) {
	started := make(chan struct{})
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`),
		Handle: func(ctx context.Context, _ string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}})
	s := newCore(t, m, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := s.Handle(ctx, &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"mcp__s__t"}`)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestUnknownMethodAndPing(t *testing.T) {
	s := newCore(t, upstreamtest.NewManager(), Options{})
	res, err := s.Handle(context.Background(), &Request{Method: "ping"})
	if err != nil || string(res.Body) != `{}` {
		t.Fatalf("ping = %v, %v", res, err)
	}
	_, err = s.Handle(context.Background(), &Request{Method: "resources/frobnicate"})
	assertCode(t, err, jsonrpc.CodeMethodNotFound, `"resources/frobnicate"`)
}

func TestWatchOnChange(t *testing.T) {
	m := upstreamtest.NewManager(&upstreamtest.Server{Name: "s"})
	s := newCore(t, m, Options{ListChangedDebounce: time.Millisecond})
	changes := make(chan Change, 10)
	stop := s.Watch(func(c Change) { changes <- c })
	defer stop()

	m.Set(&upstreamtest.Server{Name: "s"}) // nothing exposed changed
	m.Set(&upstreamtest.Server{Name: "s", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)})
	if c := <-changes; c.List != "tools" || c.Version != 2 {
		t.Fatalf("change = %+v, want tools at version 2", c)
	}
	res, _ := s.Handle(context.Background(), &Request{Method: "tools/list"})
	if !strings.Contains(string(res.Body), "mcp__s__t") {
		t.Errorf("tools/list after change = %s", res.Body)
	}
	// A server going down leaves the list, and comes back with it.
	m.Set(&upstreamtest.Server{Name: "s", State: upstream.StateExited, Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)})
	if c := <-changes; c.List != "tools" {
		t.Errorf("change = %+v, want tools (the server went down)", c)
	}
	if res, _ := s.Handle(context.Background(), &Request{Method: "tools/list"}); string(res.Body) != `{"tools":[]}` {
		t.Errorf("tools/list while the server is down = %s", res.Body)
	}
	m.Set(&upstreamtest.Server{Name: "s", Tools: raws(`{"name":"t","inputSchema":{"type":"object"}}`)})
	if c := <-changes; c.List != "tools" {
		t.Errorf("change = %+v, want tools (the server came back)", c)
	}
}
