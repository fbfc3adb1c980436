package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// netHTTPRequest is what net/http makes of the request header hdr: its
// http.ReadRequest, then its server's checks. It returns nil when either
// rejects the request.
func netHTTPRequest(hdr []byte) *http.Request {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(hdr)))
	if err != nil {
		return nil
	}
	// ReadRequest took Host out of the header; the server checks it as
	// it was sent.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(hdr)))
	tp.ReadLine()
	sent, _ := tp.ReadMIMEHeader()
	if hosts := sent["Host"]; len(hosts) != 1 || !httpguts.ValidHostHeader(hosts[0]) {
		return nil
	}
	for k, vv := range r.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil
			}
		}
	}
	return r
}

// sameRequest reports how got differs from net/http's want, or "".
func sameRequest(got, want *http.Request) string {
	type fields struct {
		Method, Proto, Host, RequestURI string
		ProtoMajor, ProtoMinor          int
		URL                             any
		Header                          http.Header
		ContentLength                   int64
		TransferEncoding                []string
		Close                           bool
		Trailer                         http.Header
	}
	of := func(r *http.Request) fields {
		return fields{r.Method, r.Proto, r.Host, r.RequestURI, r.ProtoMajor, r.ProtoMinor,
			*r.URL, r.Header, r.ContentLength, r.TransferEncoding, r.Close, r.Trailer}
	}
	g, w := of(got), of(want)
	if reflect.DeepEqual(g, w) {
		return ""
	}
	return fmt.Sprintf("got  %+v\nwant %+v", g, w)
}

// checkParse parses hdr with parseRequest and, when it takes it, holds
// the result to net/http's. It reports whether parseRequest took it.
func checkParse(t *testing.T, hdr []byte) bool {
	t.Helper()
	in := bytes.Clone(hdr)
	got, ok := parseRequest(in)
	if !ok {
		return false
	}
	// Nothing of the request may point into the connection's buffer,
	// which the next request overwrites.
	for i := range in {
		in[i] = 'x'
	}
	want := netHTTPRequest(hdr)
	if want == nil {
		t.Fatalf("parseRequest took %q, which net/http rejects", hdr)
	}
	if d := sameRequest(got, want); d != "" {
		t.Fatalf("parseRequest(%q):\n%s", hdr, d)
	}
	return true
}

func TestParseRequest(t *testing.T) {
	const mcp = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: abc\r\nContent-Length: 42\r\n"
	tests := []struct {
		name string
		hdr  string
		take bool
	}{
		{"an MCP client's POST", mcp + "\r\n", true},
		{"bare line ends", strings.ReplaceAll(mcp, "\r\n", "\n") + "\n", true},
		{"names in lower case", "POST /mcp HTTP/1.1\r\nhost: h\r\ncontent-type: a/b\r\nmcp-protocol-version: 2025-11-25\r\nx-odd-NAME: 1\r\ncontent-length: 2\r\n\r\n", true},
		{"no body", "POST /mcp HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"a query", "POST /mcp?x=1&y=%20 HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"an escaped path", "POST /a%2Fb/%7E HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"sub-delims in the path", "POST /a;b=c,d HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"dot segments and a double slash", "POST //mcp/./a/../b_c-d~e HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"a fragment", "POST /mcp#x HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"values trimmed", "POST / HTTP/1.1\r\nHost: \t h \t\r\nA:  b c \t\r\nB:\r\n\r\n", true},
		{"a name twice", "POST / HTTP/1.1\r\nHost: h\r\nAccept: a\r\naccept: b\r\nAccept: c\r\n\r\n", true},
		{"Content-Length twice, same", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length:  5 \r\n\r\n", true},
		{"Connection: close", "POST / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n", true},
		{"Pragma: no-cache", "POST / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n", true},
		{"Pragma with Cache-Control", "POST / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\nCache-Control: max-age=1\r\n\r\n", true},
		{"Trailer without chunks", "POST / HTTP/1.1\r\nHost: h\r\nTrailer: X\r\n\r\n", true},
		{"a long name", "POST / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("ab-", 40) + ": v\r\n\r\n", true},
		{"obs-text in a value", "POST / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n", true},

		{"GET", "GET / HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"HTTP/1.0", "POST / HTTP/1.0\r\nHost: h\r\n\r\n", false},
		{"absolute form", "POST http://h/ HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"asterisk", "POST * HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"space in the target", "POST /a b HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"empty Host", "POST / HTTP/1.1\r\nHost:\r\n\r\n", true},
		{"no Host", "POST / HTTP/1.1\r\n\r\n", false},
		{"two Hosts", "POST / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n", false},
		{"bad Host", "POST / HTTP/1.1\r\nHost: h/x\r\n\r\n", false},
		{"folded line", "POST / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", false},
		{"space before colon", "POST / HTTP/1.1\r\nHost: h\r\nX : a\r\n\r\n", false},
		{"empty name", "POST / HTTP/1.1\r\nHost: h\r\n: a\r\n\r\n", false},
		{"no colon", "POST / HTTP/1.1\r\nHost: h\r\nXa\r\n\r\n", false},
		{"control byte", "POST / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n", false},
		{"CR in a value", "POST / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", false},
		{"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"Expect", "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", false},
		{"Upgrade", "POST / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n", false},
		{"Content-Lengths differ", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false},
		{"empty Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", false},
		{"signed Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n", false},
		{"huge Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775808\r\n\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []byte(tt.hdr)
			if n := headerEnd(hdr); n != len(hdr) {
				t.Fatalf("test header ends at %d of %d", n, len(hdr))
			}
			if took := checkParse(t, hdr); took != tt.take {
				t.Errorf("parseRequest took it: %v, want %v", took, tt.take)
			}
		})
	}
}

// TestPlainPath holds plainPath to url.ParseRequestURI on the targets it
// takes, and checks that it leaves the others to it.
func TestPlainPath(t *testing.T) {
	tests := []struct {
		uri   string
		plain bool
	}{
		{"/", true},
		{"/mcp", true},
		{"//mcp/./a/../b_c-d~e.F9", true},
		{"/a%2Fb", false},
		{"/mcp?x=1", false},
		{"/mcp?", false},
		{"/mcp#f", false},
		{"/a;b", false},
		{"/a:b", false},
		{"/caf\xc3\xa9", false},
	}
	for _, tt := range tests {
		u := plainPath(tt.uri)
		if (u != nil) != tt.plain {
			t.Errorf("plainPath(%q) = %v, want plain %v", tt.uri, u, tt.plain)
			continue
		}
		if u == nil {
			continue
		}
		want, err := url.ParseRequestURI(tt.uri)
		if err != nil {
			t.Fatalf("ParseRequestURI(%q): %v", tt.uri, err)
		}
		if *u != *want {
			t.Errorf("plainPath(%q) = %#v, ParseRequestURI gives %#v", tt.uri, *u, *want)
		}
	}
}

func TestParseRequest_InternsNames(t *testing.T) {
	r, ok := parseRequest([]byte("POST / HTTP/1.1\r\nhost: h\r\ncontent-type: a\r\nmcp-session-id: s\r\n\r\n"))
	if !ok {
		t.Fatal("not taken")
	}
	for k := range r.Header {
		if commonKeys[k] != k {
			t.Errorf("header %q not interned", k)
		}
	}
}

// FuzzParseRequest holds every request parseRequest takes to what net/http
// makes of it, field by field.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"POST /mcp HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
		"POST /mcp HTTP/1.1\nhost: h\ncontent-length: 2\ncontent-length: 2\n\n",
		"POST /?a=b HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\nConnection: close\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nX:\t a \t\r\nX: b\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n",
		"POST /%zz HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headerEnd(b)
		if n < 0 {
			return
		}
		checkParse(t, b[:n])
	})
}

func BenchmarkParseRequest(b *testing.B) {
	hdr := []byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: 120\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n" +
		"Mcp-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: 5YV3ZQ4NKXJ2MHDUX2CQW6PAKA\r\nAccept-Encoding: gzip\r\n\r\n")
	b.Run("parseRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseRequest(hdr); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("http.ReadRequest", func(b *testing.B) {
		b.ReportAllocs()
		br := bufio.NewReader(nil)
		rd := bytes.NewReader(nil)
		for b.Loop() {
			rd.Reset(hdr)
			br.Reset(rd)
			if _, err := http.ReadRequest(br); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// responseRead is what a client reads of a response: the response, its
// body (read to its end), whether that read failed, and what the stream
// holds after it.
type responseRead struct {
	resp    *http.Response
	body    string
	bodyErr bool
	rest    string
}

// readFast reads stream as the client's fast path does, or returns nil
// when parseResponse does not take it.
func readFast(stream []byte, req *http.Request) *responseRead {
	br := bufio.NewReaderSize(bytes.NewReader(stream), 4096)
	b, _ := br.Peek(min(len(stream), br.Size()))
	n := headerEnd(b)
	if n < 0 {
		return nil
	}
	hdr := bytes.Clone(b[:n])
	resp, chunked, ok := parseResponse(hdr, req)
	if !ok {
		return nil
	}
	// Nothing of the response may point into the connection's buffer,
	// which its body and the next response overwrite.
	for i := range hdr {
		hdr[i] = 'x'
	}
	br.Discard(n)
	resp.Body = fastBody(br, resp, chunked)
	return finishRead(resp, br)
}

// readNetHTTP reads stream with http.ReadResponse, or returns nil when it
// rejects the response.
func readNetHTTP(stream []byte, req *http.Request) *responseRead {
	br := bufio.NewReaderSize(bytes.NewReader(stream), 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil
	}
	return finishRead(resp, br)
}

func finishRead(resp *http.Response, br *bufio.Reader) *responseRead {
	body, err := io.ReadAll(resp.Body)
	rest, _ := io.ReadAll(br)
	return &responseRead{resp: resp, body: string(body), bodyErr: err != nil, rest: string(rest)}
}

// sameResponse reports how got differs from net/http's want, or "".
func sameResponse(got, want *responseRead) string {
	type fields struct {
		Status, Proto          string
		StatusCode, Major, Min int
		Header, Trailer        http.Header
		ContentLength          int64
		TransferEncoding       []string
		Close, Uncompressed    bool
		Body                   string
		BodyErr                bool
		Rest                   string
	}
	of := func(r *responseRead) fields {
		p := r.resp
		f := fields{p.Status, p.Proto, p.StatusCode, p.ProtoMajor, p.ProtoMinor, p.Header, p.Trailer,
			p.ContentLength, p.TransferEncoding, p.Close, p.Uncompressed, r.body, r.bodyErr, r.rest}
		if r.bodyErr {
			f.Rest = "" // what is left after a failed body is no one's
		}
		return f
	}
	g, w := of(got), of(want)
	if reflect.DeepEqual(g, w) {
		return ""
	}
	return fmt.Sprintf("got  %+v\nwant %+v", g, w)
}

// checkResponse reads stream both ways and, when the fast path takes it,
// holds it to net/http. It reports whether the fast path took it.
func checkResponse(t *testing.T, stream []byte, method string) bool {
	t.Helper()
	req := &http.Request{Method: method}
	got := readFast(stream, req)
	if got == nil {
		return false
	}
	want := readNetHTTP(stream, req)
	if want == nil {
		t.Fatalf("parseResponse took %q, which http.ReadResponse rejects", stream)
	}
	if got.resp.Request != req {
		t.Fatalf("parseResponse(%q) did not keep its request", stream)
	}
	if d := sameResponse(got, want); d != "" {
		t.Fatalf("response %q:\n%s", stream, d)
	}
	return true
}

func TestParseResponse(t *testing.T) {
	const sse = "HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-transform\r\nConnection: keep-alive\r\n" +
		"Content-Type: text/event-stream\r\nMcp-Session-Id: S\r\nDate: Tue, 01 Dec 2026 18:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n"
	tests := []struct {
		name   string
		stream string
		method string
		take   bool
	}{
		{"an SSE answer, chunked", sse + "1c\r\nevent: message\r\ndata: {}\r\n\r\n\r\n0\r\n\r\nNEXT", "POST", true},
		{"a JSON answer", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}NEXT", "POST", true},
		{"202, empty", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\nNEXT", "POST", true},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx", "POST", true},
		{"bare line ends", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", "POST", true},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 1\r\n\r\nx", "POST", true},
		{"Content-Length twice, same", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", "POST", true},
		{"chunked with a Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: Chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", "POST", true},
		{"trailer fields", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nA: b\r\nc: d\r\n\r\nNEXT", "POST", true},
		{"a short body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nxy", "POST", true},
		{"a cut chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nxy", "POST", true},
		{"no end after the last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n", "POST", true},
		{"Pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", "POST", true},

		{"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", false},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", "POST", false},
		{"404", "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", "POST", false},
		{"100 Continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "POST", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", "POST", false},
		{"no length", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", "POST", false},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "POST", false},
		{"a Kelvin sign in chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chun\u212aed\r\n\r\n0\r\n\r\n", "POST", false},
		{"Trailer declared", "HTTP/1.1 200 OK\r\nTrailer: A\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: b\r\n\r\n", "POST", false},
		{"Content-Lengths differ", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", "POST", false},
		{"a folded line", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", "POST", false},
		{"status 2000", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "POST", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if took := checkResponse(t, []byte(tt.stream), tt.method); took != tt.take {
				t.Errorf("parseResponse took it: %v, want %v", took, tt.take)
			}
		})
	}
}

// FuzzParseResponse holds every response parseResponse takes to what
// http.ReadResponse makes of it: its fields, its body as read to the end,
// and where the next response starts.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive, close\r\n\r\nabcdef",
		"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX: y\r\n\r\n",
		"HTTP/1.1 201 \r\nContent-Length:  2 \r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, stream []byte, head bool) {
		method := "POST"
		if head {
			method = "HEAD"
		}
		checkResponse(t, stream, method)
	})
}

func BenchmarkParseResponse(b *testing.B) {
	stream := []byte("HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-transform\r\nConnection: keep-alive\r\n" +
		"Content-Type: text/event-stream\r\nMcp-Session-Id: 5YV3ZQ4NKXJ2MHDUX2CQW6PAKA\r\n" +
		"Date: Tue, 01 Dec 2026 18:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n")
	req := &http.Request{Method: http.MethodPost}
	b.Run("parseResponse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := parseResponse(stream, req); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("http.ReadResponse", func(b *testing.B) {
		b.ReportAllocs()
		br := bufio.NewReader(nil)
		rd := bytes.NewReader(nil)
		for b.Loop() {
			rd.Reset(stream)
			br.Reset(rd)
			if _, err := http.ReadResponse(br, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// parseRequest is parseRequestInto into a new request, for the tests.
func parseRequest(hdr []byte) (*http.Request, bool) {
	r := new(http.Request)
	if !parseRequestInto(hdr, r) {
		return nil, false
	}
	return r, true
}
