package gateway

import "testing"

func TestNamespacedURI(t *testing.T) {
	tests := []struct {
		server, uri string
	}{
		{"files", "file:///srv/a.txt"},
		{"git-2", "git+ssh://host/repo"},
		{"x", "no-scheme"},
		{"x", "mcp+y+file:///nested"},
		{"x", ""},
	}
	for _, tt := range tests {
		e := namespacedURI("mcp", tt.server, tt.uri)
		s, o, ok := parseNamespaced("mcp", e)
		if !ok || s != tt.server || o != tt.uri {
			t.Errorf("round trip of (%q, %q) via %q gave (%q, %q, %v)", tt.server, tt.uri, e, s, o, ok)
		}
	}
	for _, bad := range []string{"file:///a", "mcp+file:///a", "mcp+UPPER+x", "mcp++x", "mcpx+a+b"} {
		if s, o, ok := parseNamespaced("mcp", bad); ok {
			t.Errorf("parseNamespaced(%q) = %q, %q; want not namespaced", bad, s, o)
		}
	}
}

func TestScheme(t *testing.T) {
	tests := map[string]string{
		"file:///a": "file", "HTTPS://x": "https", "git+ssh://h": "git+ssh", "demo://r/1": "demo",
		"nocolon": "", ":x": "", "1a:b": "", "c:\\path": "c",
	}
	for in, want := range tests {
		if got := scheme(in); got != want {
			t.Errorf("scheme(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		tmpl, uri string
		want      bool
	}{
		{"demo://resource/dynamic/text/{id}", "demo://resource/dynamic/text/42", true},
		{"demo://resource/dynamic/text/{id}", "demo://resource/dynamic/text/4/2", false},
		{"demo://resource/dynamic/text/{id}", "demo://resource/dynamic/blob/42", false},
		{"file:///{+path}", "file:///srv/a/b.txt", true},
		{"test://template/{id}/data", "test://template/123/data", true},
		{"test://template/{id}/data", "test://template/123/other", false},
		{"x://a{/seg}", "x://a/b/c", true},
		{"x://s{?q,r}", "x://s?q=1&r=2", true},
		{"x://s{?q,r}", "x://s", true},
		{"x://{a.b}", "x://y", true},
		{"x://{broken", "x://anything", false},
		{"x://a.b/{id}", "x://aXb/1", false},
	}
	for _, tt := range tests {
		if got := compileTemplate(tt.tmpl).match(tt.uri); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.tmpl, tt.uri, got, tt.want)
		}
	}
}

func FuzzNamespacedURI(f *testing.F) {
	f.Add("files", "file:///a")
	f.Fuzz(func(t *testing.T, server, uri string) {
		if server == "" || !validServerName(server) {
			return
		}
		s, o, ok := parseNamespaced("mcp", namespacedURI("mcp", server, uri))
		if !ok || s != server || o != uri {
			t.Fatalf("(%q, %q) did not round-trip: %q %q %v", server, uri, s, o, ok)
		}
	})
}
