package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// limitPeer is a fakePeer that counts the tools/call requests reaching
// it: a tool "hold" is answered only when release is sent to, the rest at
// once.
type limitPeer struct {
	*fakePeer
	release chan struct{}

	mu      sync.Mutex
	arrived int
}

func newLimitPeer() *limitPeer {
	lp := &limitPeer{release: make(chan struct{})}
	lp.fakePeer = &fakePeer{handle: func(f *fakeTransport, m *jsonrpc.Message) bool {
		if m.Method != "tools/call" {
			return false
		}
		lp.mu.Lock()
		lp.arrived++
		lp.mu.Unlock()
		if !strings.Contains(string(m.Params), `"hold"`) {
			return false
		}
		go func() {
			<-lp.release
			f.recv(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)), m.ID)
		}()
		return true
	}}
	return lp
}

func (lp *limitPeer) calls() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.arrived
}

// limitScript runs steps against server "s" of m, inside a synctest
// bubble, and returns what each gave:
//
//	call [who]  a tools/call for who (default alice): "ok", "rate <retry after>",
//	            "concurrency", or the error
//	hold        a tools/call the peer holds, in the background: "held", or
//	            what the limit said at once
//	release     the peer answers the oldest held call: "released <its result>"
//	sleep <d>   the bubble's clock advances by d
func limitScript(t *testing.T, m *Manager, lp *limitPeer, steps []string) []string {
	t.Helper()
	var got []string
	var held []chan error
	call := func(ctx context.Context, who, tool string) error {
		_, err := m.Call(ctx, "s", Caller{Principal: who}, "tools/call", json.RawMessage(`{"name":"`+tool+`"}`), nil)
		return err
	}
	for _, s := range steps {
		verb, arg, _ := strings.Cut(s, " ")
		switch verb {
		case "call":
			who := arg
			if who == "" {
				who = "alice"
			}
			got = append(got, outcome(call(context.Background(), who, "t")))
		case "hold":
			errc := make(chan error, 1)
			go func() { errc <- call(context.Background(), "alice", "hold") }()
			synctest.Wait()
			select {
			case err := <-errc:
				got = append(got, outcome(err))
			default:
				held = append(held, errc)
				got = append(got, "held")
			}
		case "release":
			lp.release <- struct{}{}
			got = append(got, "released "+outcome(<-held[0]))
			held = held[1:]
		case "sleep":
			d, err := time.ParseDuration(arg)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
		default:
			t.Fatalf("unknown step %q", s)
		}
	}
	return got
}

// outcome describes the result of a call: "ok", "rate <RetryAfter>",
// "concurrency", or the error.
func outcome(err error) string {
	var rerr *RateLimitedError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &rerr) && rerr.Server != "s":
		return fmt.Sprintf("limited, naming server %q", rerr.Server)
	case errors.As(err, &rerr) && rerr.Reason == ReasonRate:
		return "rate " + rerr.RetryAfter.String()
	case errors.As(err, &rerr):
		return rerr.Reason + " " + rerr.RetryAfter.String()
	}
	return err.Error()
}

// TestManager_RateLimit checks each server's rate_limit: a call over its
// rate or its concurrency fails at once with a *RateLimitedError and never
// reaches the server (nor connects a pooled session for it), a refused
// call takes neither a token nor a slot, and slots free when calls end.
func TestManager_RateLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit config.ServerLimit
		mode  string
		steps []string
		want  []string
		// wantCalls is the tools/call requests the server got, and
		// wantConns the clients made of it.
		wantCalls, wantConns int
	}{
		{
			name:      "rate: burst, then refused until a token is back",
			limit:     config.ServerLimit{Rate: 2, Burst: 2},
			steps:     []string{"call", "call", "call", "call", "sleep 250ms", "call", "sleep 250ms", "call", "call", "sleep 1h", "call", "call", "call"},
			want:      []string{"ok", "ok", "rate 500ms", "rate 500ms", "rate 250ms", "ok", "rate 500ms", "ok", "ok", "rate 500ms"},
			wantCalls: 5, wantConns: 1,
		},
		{
			name:      "concurrency: refused while max_concurrent calls are in flight",
			limit:     config.ServerLimit{MaxConcurrent: 2},
			steps:     []string{"hold", "hold", "call", "hold", "release", "call", "hold", "call", "release", "release", "call"},
			want:      []string{"held", "held", "concurrency 0s", "concurrency 0s", "released ok", "ok", "held", "concurrency 0s", "released ok", "released ok", "ok"},
			wantCalls: 5, wantConns: 1,
		},
		{
			name:      "a concurrency refusal takes no token, a rate refusal no slot",
			limit:     config.ServerLimit{Rate: 1, Burst: 2, MaxConcurrent: 1},
			steps:     []string{"hold", "call", "release", "call", "call", "sleep 1s", "hold", "call", "release"},
			want:      []string{"held", "concurrency 0s", "released ok", "ok", "rate 1s", "held", "concurrency 0s", "released ok"},
			wantCalls: 3, wantConns: 1,
		},
		{
			name:  "per principal: a refused call connects no session",
			limit: config.ServerLimit{Rate: 1, Burst: 1},
			mode:  config.SessionPerPrincipal,
			steps: []string{"call alice", "call bob", "sleep 1s", "call bob"},
			want:  []string{"ok", "rate 1s", "ok"},
			// The base client, alice's, then bob's only once allowed.
			wantCalls: 2, wantConns: 3,
		},
		{
			name:      "no limit",
			steps:     []string{"call", "call", "call", "hold", "hold", "call", "release", "release"},
			want:      []string{"ok", "ok", "ok", "held", "held", "ok", "released ok", "released ok"},
			wantCalls: 6, wantConns: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lp := newLimitPeer()
				srv := fakeConfig("s")
				srv.RateLimit, srv.SessionMode = tt.limit, tt.mode
				m := newFakeManager(t, map[string]*fakePeer{"s": lp.fakePeer}, []config.Server{srv}, ManagerOptions{})
				synctest.Wait()
				got := limitScript(t, m, lp, tt.steps)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				if n := lp.calls(); n != tt.wantCalls {
					t.Errorf("the server got %d tools/call, want %d", n, tt.wantCalls)
				}
				if n := lp.count(); n != tt.wantConns {
					t.Errorf("%d clients were made of the server, want %d", n, tt.wantConns)
				}
			})
		})
	}
}

// TestManager_RateLimitReplace checks that the limits follow the server's
// configuration: Replace applies the new one, and its counts start anew.
func TestManager_RateLimitReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := newLimitPeer()
		srv := fakeConfig("s")
		srv.RateLimit = config.ServerLimit{Rate: 1, Burst: 1}
		m := newFakeManager(t, map[string]*fakePeer{"s": lp.fakePeer}, []config.Server{srv}, ManagerOptions{})
		synctest.Wait()
		var got []string
		run := func(steps ...string) { got = append(got, limitScript(t, m, lp, steps)...) }
		replace := func(l config.ServerLimit) {
			srv.RateLimit = l
			if err := m.Replace(srv); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			got = append(got, fmt.Sprintf("replaced: %+v", l))
		}

		run("call", "call")
		replace(config.ServerLimit{MaxConcurrent: 1})
		run("call", "call", "hold", "call", "release")
		replace(config.ServerLimit{Rate: 1, Burst: 2})
		run("call", "call", "call")
		replace(config.ServerLimit{})
		run("call", "call", "call", "hold", "hold", "release", "release")

		want := []string{
			"ok", "rate 1s",
			"replaced: {Rate:0 Burst:0 MaxConcurrent:1}",
			"ok", "ok", "held", "concurrency 0s", "released ok",
			"replaced: {Rate:1 Burst:2 MaxConcurrent:0}",
			"ok", "ok", "rate 1s",
			"replaced: {Rate:0 Burst:0 MaxConcurrent:0}",
			"ok", "ok", "ok", "held", "held", "released ok", "released ok",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
	})
}

// headerProbe are the names whose values TestForwardHeaders reports.
var headerProbe = []string{"X-Request-Id", "X-Tenant", "X-Other", "Cookie", "Proxy-Authorization", "Traceparent", "Tracestate"}

// TestForwardHeaders checks that the client headers a server's
// forward_headers name reach it on the call's POST, over the real http and
// sse transports, and nothing else: not another header, not another
// request, never the client's credentials (the fakes fail a request whose
// Authorization is not the server's own key, or whose X-Test is not the
// configured value; the legacy fake one with a session id).
func TestForwardHeaders(t *testing.T) {
	client := http.Header{
		"X-Request-Id":        {"req-1"},
		"X-Tenant":            {"acme", "beta"},
		"X-Other":             {"not listed"},
		"Authorization":       {"Bearer client-token"},
		"Cookie":              {"session=client"},
		"Proxy-Authorization": {"Basic eA=="},
		"X-Test":              {"from the client"},
		"Mcp-Session-Id":      {"forged"},
		"Traceparent":         {otherTraceparent},
		"Tracestate":          {"client=1"},
	}
	// Everything a config could list, the refused names too: the
	// transports check again. The trace context is never forwarded raw:
	// a call under a span carries its own (TestManager_TracePropagation),
	// these calls under none carry none.
	all := []string{"x-request-id", "X-TENANT", "Authorization", "cookie", "Proxy-Authorization", "X-Test", "Mcp-Session-Id", "X-Request-Id", "traceparent", "tracestate"}
	tests := []struct {
		name      string
		transport string
		via       string // "client" or "manager"
		forward   []string
		header    http.Header
		want      map[string][]string // of headerProbe, on the call's POST
	}{
		{
			name: "http: the listed names", transport: config.TransportHTTP, via: "client",
			forward: all, header: client,
			want: map[string][]string{"X-Request-Id": {"req-1"}, "X-Tenant": {"acme", "beta"}},
		},
		{
			name: "sse: the listed names", transport: config.TransportSSE, via: "client",
			forward: all, header: client,
			want: map[string][]string{"X-Request-Id": {"req-1"}, "X-Tenant": {"acme", "beta"}},
		},
		{
			name: "http through the manager", transport: config.TransportHTTP, via: "manager",
			forward: []string{"X-Tenant"}, header: client,
			want: map[string][]string{"X-Tenant": {"acme", "beta"}},
		},
		{
			name: "a header map with other spellings", transport: config.TransportHTTP, via: "client",
			forward: []string{"X-Request-Id"}, header: http.Header{"x-request-id": {"req-2"}, "cookie": {"c=1"}},
			want: map[string][]string{"X-Request-Id": {"req-2"}},
		},
		{
			name: "no forward_headers", transport: config.TransportHTTP, via: "client",
			header: client,
			want:   map[string][]string{},
		},
		{
			name: "no client headers", transport: config.TransportSSE, via: "client",
			forward: all,
			want:    map[string][]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []http.Header // of every POST, in order; nil for a call's
			var calls []http.Header
			record := func(r *http.Request, body []byte) {
				m, err := jsonrpc.ParseOne(body)
				mu.Lock()
				defer mu.Unlock()
				if err == nil && m.Method == "tools/call" {
					calls = append(calls, r.Header.Clone())
				} else {
					seen = append(seen, r.Header.Clone())
				}
			}
			cfg := testServer(tt.transport, recordingURL(t, tt.transport, record))
			cfg.ForwardHeaders = tt.forward

			var call func(hooks *CallHooks) error
			switch tt.via {
			case "client":
				c := newTestClient(t, cfg, ClientOptions{})
				mustConnect(t, c)
				call = func(hooks *CallHooks) error {
					_, err := c.Call(callCtx(t), "tools/call", json.RawMessage(`{"name":"echo"}`), hooks)
					return err
				}
			case "manager":
				checkNoLeaks(t)
				m := NewManager(ManagerOptions{Servers: []config.Server{cfg}})
				m.Start()
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
					defer cancel()
					if err := m.Close(ctx); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				waitStatus(t, m, "fake", isRunning)
				call = func(hooks *CallHooks) error {
					_, err := m.Call(callCtx(t), "fake", Caller{Principal: "alice"}, "tools/call", json.RawMessage(`{"name":"echo"}`), hooks)
					return err
				}
			}
			if err := call(&CallHooks{Header: tt.header}); err != nil {
				t.Fatalf("call with headers: %v", err)
			}
			if err := call(nil); err != nil {
				t.Fatalf("call without headers: %v", err)
			}

			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 2 {
				t.Fatalf("the server got %d tools/call POSTs, want 2", len(calls))
			}
			if diff := cmp.Diff(tt.want, probe(calls[0])); diff != "" {
				t.Errorf("headers of the call (-want +got):\n%s", diff)
			}
			if got := probe(calls[1]); len(got) != 0 {
				t.Errorf("a call without hooks carried %v", got)
			}
			for _, h := range seen {
				if got := probe(h); len(got) != 0 {
					t.Errorf("another POST carried %v", got)
				}
			}
		})
	}
}

// recordingURL starts a fake server of transport whose POSTs go to
// record first, and returns the URL to configure for it.
func recordingURL(t *testing.T, transport string, record func(r *http.Request, body []byte)) string {
	t.Helper()
	switch transport {
	case config.TransportHTTP:
		srv := httptest.NewServer(recordPOST(newFakeHTTP(t), record))
		t.Cleanup(srv.Close)
		return srv.URL
	case config.TransportSSE:
		f := newFakeLegacy(t)
		srv := httptest.NewServer(recordPOST(f, record))
		t.Cleanup(srv.Close)
		f.mu.Lock()
		f.url = srv.URL
		f.mu.Unlock()
		return srv.URL + "/sse"
	}
	t.Fatalf("no recording fake for transport %q", transport)
	return ""
}

// recordPOST calls record with each POST and its body, then serves it with
// next.
func recordPOST(next http.Handler, record func(r *http.Request, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			record(r, body)
		}
		next.ServeHTTP(w, r)
	})
}

// probe returns the values of headerProbe in h.
func probe(h http.Header) map[string][]string {
	out := map[string][]string{}
	for _, k := range headerProbe {
		if vs := h.Values(k); len(vs) > 0 {
			out[k] = vs
		}
	}
	return out
}
