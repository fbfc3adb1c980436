package front

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"testing"
)

func TestForwardedBaseURL(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		remote  string
		trusted []netip.Prefix
		headers map[string]string
		tls     bool
		want    string
	}{
		{"trusted proxy", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"}, false, "https://mcp.example.com"},
		{"with port", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Proto": "HTTPS", "X-Forwarded-Host": "mcp.example.com:8443"}, false, "https://mcp.example.com:8443"},
		{"list: the first", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Proto": "https, http", "X-Forwarded-Host": "a.example.com, b.internal"}, false, "https://a.example.com"},
		{"IPv6 proxy", "[::1]:5000", trusted, map[string]string{"X-Forwarded-Proto": "http", "X-Forwarded-Host": "[2001:db8::1]:8080"}, false, "http://[2001:db8::1]:8080"},
		{"IPv4-mapped proxy", "[::ffff:10.0.0.9]:5000", trusted, map[string]string{"X-Forwarded-Host": "mcp.example.com"}, false, "http://mcp.example.com"},
		{"no proto: the connection's", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Host": "mcp.example.com"}, true, "https://mcp.example.com"},
		{"odd proto: the connection's", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Proto": "javascript", "X-Forwarded-Host": "mcp.example.com"}, false, "http://mcp.example.com"},
		{"untrusted peer", "192.168.1.2:5000", trusted, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}, false, ""},
		{"no trusted proxies", "10.1.2.3:5000", nil, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"}, false, ""},
		{"no host", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Proto": "https"}, false, ""},
		{"host with a path", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Host": "evil.example/x"}, false, ""},
		{"host with userinfo", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Host": "me@evil.example"}, false, ""},
		{"host with a query", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Host": "evil.example?x"}, false, ""},
		{"host with spaces", "10.1.2.3:5000", trusted, map[string]string{"X-Forwarded-Host": "a b"}, false, ""},
		{"bad remote address", "pipe", trusted, map[string]string{"X-Forwarded-Host": "mcp.example.com"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			} else {
				r.TLS = nil
			}
			if got := ForwardedBaseURL(r, tt.trusted); got != tt.want {
				t.Errorf("ForwardedBaseURL = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestForwardable(t *testing.T) {
	tests := []struct {
		name    string
		h       http.Header
		want    http.Header
		sameMap bool // no credentials: the header itself, not a copy
	}{
		{
			name: "credentials dropped",
			h:    http.Header{"Authorization": {"Bearer secret"}, "Cookie": {"a=b"}, "Proxy-Authorization": {"x"}, "X-Request-Id": {"r1"}, "Traceparent": {"00-1"}},
			want: http.Header{"X-Request-Id": {"r1"}, "Traceparent": {"00-1"}},
		},
		{
			name: "only a cookie",
			h:    http.Header{"Cookie": {"a=b"}, "Accept": {"*/*"}},
			want: http.Header{"Accept": {"*/*"}},
		},
		{
			name:    "none",
			h:       http.Header{"X-Request-Id": {"r1"}, "Accept": {"*/*"}},
			want:    http.Header{"X-Request-Id": {"r1"}, "Accept": {"*/*"}},
			sameMap: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.h.Clone()
			got := Forwardable(tt.h)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Forwardable = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.h, before) {
				t.Errorf("the client's own header was changed: %v", tt.h)
			}
			if same := reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(tt.h).UnsafePointer(); same != tt.sameMap {
				t.Errorf("returned the request's own map: %v, want %v", same, tt.sameMap)
			}
		})
	}
}

func TestAccepts(t *testing.T) {
	tests := []struct {
		accept []string
		typ    string
		want   bool
	}{
		{[]string{"application/json, text/event-stream"}, "text/event-stream", true},
		{[]string{"application/json, text/event-stream"}, "application/json", true},
		{[]string{"application/json"}, "text/event-stream", false},
		{[]string{"application/json", "text/event-stream"}, "text/event-stream", true},
		{[]string{"Application/JSON"}, "application/json", true},
		{[]string{"*/*"}, "text/event-stream", true},
		{[]string{"text/*"}, "text/event-stream", true},
		{[]string{"TEXT/*"}, "text/event-stream", true},
		{[]string{"application/*"}, "text/event-stream", false},
		{[]string{"text/event-stream;q=0"}, "text/event-stream", false},
		{[]string{"text/event-stream; q=0.0, application/json"}, "text/event-stream", false},
		{[]string{"text/event-stream;q=0.5"}, "text/event-stream", true},
		{[]string{"text/event-stream; charset=utf-8"}, "text/event-stream", true},
		{[]string{"text/event-stream; q"}, "text/event-stream", false}, // malformed parameter
		{[]string{"  text/event-stream  ,"}, "text/event-stream", true},
		{[]string{"text/event-streamx"}, "text/event-stream", false},
		{[]string{"text/"}, "text/event-stream", false},
		{nil, "application/json", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		for _, v := range tt.accept {
			r.Header.Add("Accept", v)
		}
		if got := Accepts(r, tt.typ); got != tt.want {
			t.Errorf("Accepts(%q, %q) = %v, want %v", tt.accept, tt.typ, got, tt.want)
		}
	}
}
