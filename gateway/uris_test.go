package gateway

import (
	"net/url"
	"path"
	"strings"
	"testing"
)

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
	// The prefix and the server are part of a scheme: any case.
	for in, want := range map[string][2]string{
		"mcp+UPPER+x":            {"upper", "x"},
		"MCP+files+FILE:///a":    {"files", "FILE:///a"},
		"Mcp+Git-2+git+ssh://h/": {"git-2", "git+ssh://h/"},
	} {
		if s, o, ok := parseNamespaced("mcp", in); !ok || s != want[0] || o != want[1] {
			t.Errorf("parseNamespaced(%q) = %q, %q, %v; want %q, %q", in, s, o, ok, want[0], want[1])
		}
	}
	for _, bad := range []string{"file:///a", "mcp+file:///a", "mcp++x", "mcpx+a+b", "mcp+a_b+x", "mcp", "mcp+", "MCP+", "mc"} {
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

// FuzzNamespacedURI checks that the namespaced form round-trips with the
// prefix and server in any case, and that whether a URI is namespaced,
// and whose, depends on its normalized form only.
func FuzzNamespacedURI(f *testing.F) {
	f.Add("files", "file:///a", "MCP+Files+FILE:///a")
	f.Add("x", "mcp+y+z", "mcp+fil%65s+foo")
	f.Fuzz(func(t *testing.T, server, uri, any string) {
		if server != "" && validServerName(server) {
			for _, p := range []string{"mcp", "MCP", "Mcp"} {
				e := namespacedURI(p, strings.ToUpper(server), uri)
				s, o, ok := splitNamespaced("mcp", e)
				if !ok || s != server || o != uri {
					t.Fatalf("(%q, %q) did not round-trip via %q: %q %q %v", server, uri, e, s, o, ok)
				}
			}
		}
		s1, _, ok1 := splitNamespaced("mcp", any)
		s2, _, ok2 := parseNamespaced("mcp", normalizeURI(any))
		s3, _, ok3 := splitNamespaced("mcp", normalizeURI(any))
		if ok1 != ok2 || s1 != s2 || ok1 != ok3 || s1 != s3 {
			t.Fatalf("%q: split as (%q, %v), its normalized form %q as (%q, %v) and (%q, %v)", any, s1, ok1, normalizeURI(any), s2, ok2, s3, ok3)
		}
	})
}

func TestNormalizeURI(t *testing.T) {
	tests := []struct {
		name, in, want, key string // key "": the same as want
		// unsafe is in unsafeURI's problem with the normalized URI; ""
		// when it has none.
		unsafe string
	}{
		// Opaque URIs and URIs without a path to normalize stay as they are.
		{name: "custom scheme", in: "demo://resource/static/1", want: "demo://resource/static/1"},
		{name: "file", in: "file:///srv/x", want: "file:///srv/x"},
		{name: "no path", in: "memo://insights", want: "memo://insights"},
		{name: "urn", in: "urn:isbn:0451450523", want: "urn:isbn:0451450523"},
		{name: "urn with dots", in: "urn:x:./a/../b", want: "urn:x:./a/../b", unsafe: "dot segment"},
		{name: "data", in: "data:text/plain;base64,SGk=", want: "data:text/plain;base64,SGk="},
		{name: "mailto", in: "mailto:A@Example.COM", want: "mailto:A@Example.COM"},
		{name: "template", in: "demo://resource/dynamic/text/{resourceId}", want: "demo://resource/dynamic/text/{resourceId}"},
		{name: "template with operators", in: "file:///{+path}{?q,r}", want: "file:///{+path}{?q,r}"},
		{name: "empty", in: "", want: ""},
		{name: "no scheme", in: "a/./b", want: "a/./b", unsafe: "dot segment"},
		{name: "no scheme, percent", in: "a%7eb%2f", want: "a~b%2F", unsafe: `encoded "/"`},
		{name: "no scheme, no scheme made", in: "A0%2e:0%2e", want: "A0%2E:0."},
		// Case of scheme and host.
		{name: "scheme case", in: "FILE:///Srv/X", want: "file:///Srv/X"},
		{name: "host case", in: "HTTPS://User:PW@Example.COM:443/Path?Q=A#F", want: "https://User:PW@example.com:443/Path?Q=A#F"},
		{name: "custom host case", in: "demo://RESOURCE/Static", want: "demo://resource/Static"},
		{name: "ip literal", in: "http://[FE80::1]:80/", want: "http://[fe80::1]:80/", key: "http://[fe80::1]:80"},
		// Percent-encodings.
		{name: "hex case", in: "file:///a%2fb%c3%a9", want: "file:///a%2Fb%C3%A9", unsafe: `encoded "/"`},
		{name: "unreserved decoded", in: "file:///%73ecret/%7Euser/%2D%2E%5F", want: "file:///secret/~user/-._"},
		{name: "reserved kept", in: "file:///a%2Fb%3Fc%23d%25", want: "file:///a%2Fb%3Fc%23d%25", unsafe: `encoded "/"`},
		{name: "host percent", in: "demo://%41B%43/x", want: "demo://abc/x"},
		{name: "query and fragment", in: "x://h/p?a=%7e%2f#%7E", want: "x://h/p?a=~%2F#~"},
		{name: "stray percent", in: "file:///100%/x%", want: "file:///100%25/x%25"},
		{name: "stray percent then encoded hex", in: "file:///%%34%31", want: "file:///%2541"},
		{name: "bad hex", in: "file:///%zz", want: "file:///%25zz"},
		// Dot segments, after decoding.
		{name: "dot", in: "file:///secret/./key", want: "file:///secret/key"},
		{name: "dot dot", in: "file:///docs/../secret/key", want: "file:///secret/key"},
		{name: "encoded dots", in: "file:///docs/%2E%2e/secret/key", want: "file:///secret/key"},
		{name: "above the root", in: "file:///../../etc", want: "file:///etc"},
		{name: "trailing dot", in: "demo://x/a/.", want: "demo://x/a/", key: "demo://x/a"},
		{name: "trailing dot dot", in: "demo://x/a/b/..", want: "demo://x/a/", key: "demo://x/a"},
		{name: "rfc example", in: "http://a/b/c/./../../g", want: "http://a/g"},
		{name: "dots in names", in: "file:///a/.b/..c/...", want: "file:///a/.b/..c/..."},
		{name: "dot in query", in: "x://h/a?b/../c", want: "x://h/a?b/../c"},
		{name: "no authority", in: "file:/a/./b", want: "file:/a/b"},
		{name: "no authority, path left with //", in: "file:/.//x", want: "file:/.//x", key: "file:/x", unsafe: "dot segment"},
		{name: "no authority, dot dot to //", in: "file:/a/..//x", want: "file:/.//x", key: "file:/x", unsafe: "dot segment"},
		// Repeated and trailing slashes: not RFC equivalences, only
		// the key drops them.
		{name: "double slash", in: "file:///secret//key", want: "file:///secret//key", key: "file:///secret/key"},
		{name: "double slash first", in: "file:////secret/key", want: "file:////secret/key", key: "file:///secret/key"},
		{name: "trailing slash", in: "file:///secret/key/", want: "file:///secret/key/", key: "file:///secret/key"},
		{name: "trailing slashes", in: "file:///secret/key//", want: "file:///secret/key//", key: "file:///secret/key"},
		{name: "root", in: "demo://x/", want: "demo://x/", key: "demo://x"},
		{name: "slashes before the query", in: "demo://x/a//?q=//", want: "demo://x/a//?q=//", key: "demo://x/a?q=//"},
		{name: "namespaced form", in: "mcp+files+file:///a/./b", want: "mcp+files+file:///a/b"},
		// What a server could decode into another path: refused unless
		// listed (unsafeURI).
		{name: "encoded slash", in: "file:///public/..%2Fsecret%2Fkey", want: "file:///public/..%2Fsecret%2Fkey", unsafe: `encoded "/"`},
		{name: "encoded slash, no dots", in: "file:///public/a%2fb", want: "file:///public/a%2Fb", unsafe: `encoded "/"`},
		{name: "encoded slash encoded again", in: "file:///public/..%252Fsecret", want: "file:///public/..%252Fsecret", unsafe: `encoded "/"`},
		{name: "encoded dots encoded again", in: "file:///public/%252E%252E/secret", want: "file:///public/%252E%252E/secret", unsafe: "dot segment"},
		{name: "encoded dots encoded three times", in: "file:///p/%25252e%25252E/s", want: "file:///p/%25252e%25252E/s", unsafe: "dot segment"},
		{name: "encoded backslash", in: "file:///public/..%5csecret", want: "file:///public/..%5Csecret", unsafe: `encoded "\"`},
		{name: "backslash", in: "file:///public/..\\secret", want: "file:///public/..\\secret", unsafe: `a "\"`},
		{name: "backslash, no dots", in: "file:///public\\secret", want: "file:///public\\secret", unsafe: `a "\"`},
		{name: "encoded slash in the authority", in: "memo://..%2Fsecret", want: "memo://..%2Fsecret", unsafe: `encoded "/"`},
		{name: "dot dot authority", in: "memo://../x", want: "memo://../x", unsafe: "dot segment"},
		{name: "dot dot in an opaque path", in: "notes:public/../secret", want: "notes:public/../secret", unsafe: "dot segment"},
		{name: "encoded dot dot in an opaque path", in: "notes:public/%2e%2E/secret", want: "notes:public/../secret", unsafe: "dot segment"},
		{name: "encoded slash in the namespaced form", in: "MCP+files+file:///a/..%2Fb", want: "mcp+files+file:///a/..%2Fb", unsafe: `encoded "/"`},
		{name: "encoded slash in the query", in: "file:///a?p=..%2F..%5C", want: "file:///a?p=..%2F..%5C"},
		{name: "encoded slash in the fragment", in: "file:///a#..%2F", want: "file:///a#..%2F"},
		{name: "encoded percent", in: "file:///100%25/%2541", want: "file:///100%25/%2541"},
		{name: "encoded nine times", in: "file:///%" + strings.Repeat("25", 8) + "41", want: "file:///%" + strings.Repeat("25", 8) + "41", unsafe: "more than 8 times"},
		{name: "encoded eight times", in: "file:///%" + strings.Repeat("25", 7) + "41", want: "file:///%" + strings.Repeat("25", 7) + "41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeURI(tt.in); got != tt.want {
				t.Errorf("normalizeURI(%q) = %q, want %q", tt.in, got, tt.want)
			}
			key := tt.key
			if key == "" {
				key = tt.want
			}
			if got := aclKey(tt.in); got != key {
				t.Errorf("aclKey(%q) = %q, want %q", tt.in, got, key)
			}
			got := unsafeURI(tt.want)
			if tt.unsafe == "" && got != "" || !strings.Contains(got, tt.unsafe) {
				t.Errorf("unsafeURI(%q) = %q, want %q", tt.want, got, tt.unsafe)
			}
		})
	}
}

// FuzzNormalizeURI checks that the normal forms never panic, are fixed
// points, agree with each other, and keep the scheme (a namespaced URI's
// server among it) of a URI that has one.
func FuzzNormalizeURI(f *testing.F) {
	for _, s := range []string{
		"file:///secret/./key", "mcp+files+FILE:///a//b/", "demo://RESOURCE/%7e/../x", "file:/.//x",
		"http://[FE80::1]:80/a?b#c", "urn:x:%41", "%%34%31", "x://h/%2E%2E/%2e/", "", "a:", "a://", "a:/..//",
		"file:///public/..%2Fsecret%2Fkey", "file:///p/%252E%252E/s", "file:///p/..%5Cs", "memo://..%2F",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		n := normalizeURI(uri)
		if n2 := normalizeURI(n); n2 != n {
			t.Fatalf("normalizeURI is not idempotent: %q -> %q -> %q", uri, n, n2)
		}
		k := aclKey(uri)
		if k2 := aclKey(k); k2 != k {
			t.Fatalf("aclKey is not idempotent: %q -> %q -> %q", uri, k, k2)
		}
		if kn := aclKey(n); kn != k {
			t.Fatalf("aclKey(normalizeURI(%q)) = %q, aclKey = %q", uri, kn, k)
		}
		if sch := scheme(uri); sch != scheme(n) || sch != scheme(k) {
			t.Fatalf("the scheme of %q changed: %q, %q, %q", uri, sch, scheme(n), scheme(k))
		}
		if unsafeURI(n) == "" {
			checkDecodedPrefixes(t, n)
		}
	})
}

// checkDecodedPrefixes checks, for a URI that unsafeURI lets through,
// what makes allow rules hold: a server that percent-decodes its path
// (with net/url, as many times as it decodes) and resolves it (path.Clean)
// reads a path under every prefix of it that ends in "/", decoded and
// resolved alike. So a rule for file:///public/* covers what the server
// reads of any such URI it matches.
func checkDecodedPrefixes(t *testing.T, uri string) {
	hier := uri
	if sch := scheme(uri); sch != "" {
		hier = uri[len(sch)+1:]
	}
	if i := strings.IndexAny(hier, "?#"); i >= 0 {
		hier = hier[:i]
	}
	// The decodings of the whole path that net/url accepts.
	levels := []string{hier}
	for {
		next, err := url.PathUnescape(levels[len(levels)-1])
		if err != nil || next == levels[len(levels)-1] {
			break
		}
		levels = append(levels, next)
	}
	full := levels[len(levels)-1]
	if strings.ContainsRune(full, '\\') || strings.Count(full, "/") != strings.Count(hier, "/") {
		t.Fatalf("unsafeURI let %q through, which decodes to %q", uri, full)
	}
	resolved := path.Clean(full) + "/"
	for i := 0; i < len(hier); i++ {
		if hier[i] != '/' {
			continue
		}
		prefix := hier[:i+1]
		for range len(levels) - 1 {
			var err error
			if prefix, err = url.PathUnescape(prefix); err != nil {
				t.Fatalf("%q decodes but its prefix %q does not: %v", hier, hier[:i+1], err)
			}
		}
		want := strings.TrimSuffix(path.Clean(prefix), "/") + "/"
		if !strings.HasPrefix(resolved, want) {
			t.Fatalf("unsafeURI let %q through: a server reads %q, outside %q (of %q)", uri, resolved, want, hier[:i+1])
		}
	}
}
