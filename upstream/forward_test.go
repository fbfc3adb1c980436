package upstream

import (
	"strings"
	"testing"

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
