package upstream

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
)

// TestForwardable_NeverForwarded checks that the HTTP client drops every
// header of the one list config validation refuses in forward_headers, in
// any spelling, and keeps the others.
func TestForwardable_NeverForwarded(t *testing.T) {
	never := config.NeverForwardedHeaders()
	for _, name := range []string{"Connection", "Proxy-Authenticate", "Te", "Authorization", "Mcp-Session-Id", "Traceparent"} {
		if !containsFold(never, name) {
			t.Errorf("config.NeverForwardedHeaders() lacks %s", name)
		}
	}
	for _, name := range never {
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if got := forwardable([]string{spelling, "X-Tenant"}); len(got) != 1 || got[0] != "X-Tenant" {
				t.Errorf("forwardable([%s X-Tenant]) = %q, want [X-Tenant]", spelling, got)
			}
		}
	}
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// TestForwarded_ConnectionOptions: a header the client's Connection header
// names is for the gateway's hop only and is not forwarded, even when
// forward_headers names it.
func TestForwarded_ConnectionOptions(t *testing.T) {
	p := &peer{forward: forwardable([]string{"X-Tenant", "X-Trace"})}
	for _, tt := range []struct {
		name   string
		client http.Header
		want   http.Header
	}{
		{"no Connection", http.Header{"X-Tenant": {"a"}, "X-Trace": {"t"}}, http.Header{"X-Tenant": {"a"}, "X-Trace": {"t"}}},
		{"named", http.Header{"Connection": {"x-tenant"}, "X-Tenant": {"a"}, "X-Trace": {"t"}}, http.Header{"X-Trace": {"t"}}},
		{"in a list", http.Header{"Connection": {"keep-alive, X-Trace ,x-tenant"}, "X-Tenant": {"a"}, "X-Trace": {"t"}}, nil},
		{"in a second value", http.Header{"Connection": {"keep-alive", "X-Trace"}, "X-Tenant": {"a"}, "X-Trace": {"t"}}, http.Header{"X-Tenant": {"a"}}},
		{"other options", http.Header{"Connection": {"close, X-Other"}, "X-Tenant": {"a"}}, http.Header{"X-Tenant": {"a"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, p.forwarded(tt.client)); diff != "" {
				t.Errorf("forwarded (-want +got):\n%s", diff)
			}
		})
	}
}
