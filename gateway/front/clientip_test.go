package front

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name, remote, xff string
		trusted           []netip.Prefix
		want              string
	}{
		{"direct", "192.0.2.7:5000", "", trusted, "192.0.2.7"},
		{"untrusted peer's header ignored", "192.0.2.7:5000", "198.51.100.1", trusted, "192.0.2.7"},
		{"through a trusted proxy", "10.0.0.2:5000", "198.51.100.1", trusted, "198.51.100.1"},
		{"two trusted hops", "10.0.0.2:5000", "198.51.100.1, 10.0.0.3", trusted, "198.51.100.1"},
		{"a client's made-up hop is skipped", "10.0.0.2:5000", "203.0.113.9, 198.51.100.1", trusted, "198.51.100.1"},
		{"malformed hop", "10.0.0.2:5000", "junk", trusted, "10.0.0.2"},
		{"no proxies", "10.0.0.2:5000", "198.51.100.1", nil, "10.0.0.2"},
		{"IPv6", "[2001:db8::1]:5000", "", trusted, "2001:db8::1"},
		{"not an address", "pipe", "", trusted, "pipe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.RemoteAddr = tt.remote
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			if got := ClientIP(r, tt.trusted); got != tt.want {
				t.Errorf("ClientIP = %q, want %q", got, tt.want)
			}
		})
	}
}
