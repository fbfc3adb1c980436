package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// parseRequestInto parses hdr, a request's header up to and with its
// empty line (headerEnd's bytes), into r, which must be zero, as the
// request that http.ReadRequest and then net/http's server would give a
// handler: its Host taken out of the header into r.Host, duplicate
// Content-Lengths merged, Pragma's no-cache copied to Cache-Control,
// Close from the Connection header. Its Body, context and RemoteAddr are
// the caller's to set.
//
// It takes only the requests the fast path serves, the ones that MCP
// clients send: a POST over HTTP/1.1 to an origin-form target, one valid
// Host, and a Content-Length or no body. It reports false for anything
// else, and for any request that either of net/http's parsers would
// reject or read otherwise (a folded line, a space before a colon, an
// empty name, a Transfer-Encoding, Expect or Upgrade): such a request
// goes to net/http. FuzzParseRequest holds every request it takes to
// what net/http makes of it.
//
// It costs one string for the whole header, which the target and the
// values are cut from, one map and one slice of values; a name is cut
// from the header as well when it is sent in canonical form, and a
// common one is interned when it is not. The server's connections parse
// into a template of their own, which answer copies once it has the
// request's context (http.Request.WithContext copies anyway, so the fast
// path allocates one Request, not two).
func parseRequestInto(hdr []byte, r *http.Request) bool {
	// The request line: "POST " target " HTTP/1.1".
	eol := bytes.IndexByte(hdr, '\n')
	if eol < 0 {
		return false
	}
	line := hdr[:eol]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	const method, proto = "POST ", " HTTP/1.1"
	if len(line) < len(method)+1+len(proto) ||
		string(line[:len(method)]) != method || string(line[len(line)-len(proto):]) != proto {
		return false
	}
	target := line[len(method) : len(line)-len(proto)]
	if target[0] != '/' {
		return false // "*", or absolute form: its authority is net/http's to judge
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	s := string(hdr) // what every string below is cut from
	rest := s[eol+1:]
	uri := s[len(method) : len(method)+len(target)]
	u := plainPath(uri)
	if u == nil {
		var err error
		if u, err = url.ParseRequestURI(uri); err != nil {
			return false
		}
	}

	var host string
	hosts := 0
	special := false // one of the names looked up below was sent
	h, ok := parseFields(rest, max(bytes.Count(hdr[eol+1:], []byte{'\n'})-1, 0), func(key, v string) (store, ok bool) {
		switch key {
		case "Host":
			host = v
			hosts++
			return false, true
		case "Transfer-Encoding", "Expect", "Upgrade":
			return false, false
		case "Content-Length", "Pragma", "Connection":
			special = true
		}
		return true, true
	})
	if !ok {
		return false
	}
	if hosts != 1 || !httpguts.ValidHostHeader(host) {
		return false
	}
	r.Method = http.MethodPost
	r.URL = u
	r.Proto = "HTTP/1.1"
	r.ProtoMajor, r.ProtoMinor = 1, 1
	r.Header = h
	r.Host = host
	r.RequestURI = uri
	if !special {
		return true
	}
	if r.ContentLength, ok = contentLength(h); !ok {
		return false
	}
	fixPragma(h)
	r.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	return true
}

// plainPath returns the URL url.ParseRequestURI gives uri when uri is a
// path of unreserved characters and slashes alone, such as "/mcp": no
// escapes, query or fragment to parse, so the URL is the path. It returns
// nil for any other target. (At one session it was about 1% of mcpgw's
// CPU per call, issue 10.)
func plainPath(uri string) *url.URL {
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '/', c == '-', c == '.', c == '_', c == '~':
		default:
			return nil
		}
	}
	return &url.URL{Path: uri}
}

// parseFields parses the header fields of rest, which ends with the empty
// line, as textproto's reader does, into a header with room for lines
// fields. field sees each name (canonical) and value (trimmed), and says
// whether to store it, or that the message is not the fast path's. It
// reports false, too, for a line that either of net/http's parsers would
// reject or read otherwise: a folded line, no colon or an empty name, a
// name that is not a token (a space before the colon), a control byte in
// a value.
func parseFields(rest string, lines int, field func(key, v string) (store, ok bool)) (http.Header, bool) {
	h := make(http.Header, lines)
	strs := make([]string, lines) // one value per name, as most are
	for {
		eol := strings.IndexByte(rest, '\n')
		if eol < 0 {
			return nil, false
		}
		line := rest[:eol]
		rest = rest[eol+1:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if line == "" {
			return h, true
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
			return nil, false // no name, or a line folded into the one before
		}
		key, ok := canonicalKey(line[:colon])
		if !ok {
			return nil, false
		}
		v := line[colon+1:]
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return nil, false
			}
		}
		v = trimSpace(v)
		store, ok := field(key, v)
		if !ok {
			return nil, false
		}
		if !store {
			continue
		}
		vv := h[key]
		if vv == nil && len(strs) > 0 {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = v
		} else {
			vv = append(vv, v)
		}
		h[key] = vv
	}
}

// contentLength reads h's Content-Length as net/http's fixLength does:
// copies of one value merge into one, and no value is 0 here (for a
// request; a response's caller tells the two apart). It reports false for
// what net/http rejects: differing values, an empty one, anything but
// decimal digits.
func contentLength(h http.Header) (int64, bool) {
	cl := h["Content-Length"]
	if len(cl) == 0 {
		return 0, true
	}
	first := textproto.TrimString(cl[0])
	for _, v := range cl[1:] {
		if textproto.TrimString(v) != first {
			return 0, false
		}
	}
	if len(cl) > 1 {
		h["Content-Length"] = []string{first}
	}
	if first == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(first, 10, 63)
	if err != nil {
		return 0, false
	}
	return int64(n), true
}

// fixPragma copies Pragma's no-cache to Cache-Control, as net/http does.
func fixPragma(h http.Header) {
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
}

// canonicalKey returns k in canonical form, as textproto's reader gives
// it, or false when k is not a token (net/http then either rejects the
// line or keeps the name as it was sent, for its server to reject).
func canonicalKey(k string) (string, bool) {
	canonical := true
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !httpguts.IsTokenRune(rune(c)) {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return k, true
	}
	if len(k) > 64 {
		return textproto.CanonicalMIMEHeaderKey(k), true
	}
	var buf [64]byte
	b := buf[:len(k)]
	upper = true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
		upper = c == '-'
	}
	if v, ok := commonKeys[string(b)]; ok {
		return v, true
	}
	return string(b), true
}

// commonKeys interns the names MCP clients send, for those that send them
// in lower case (as fetch does).
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type",
		"Cookie", "Host", "Last-Event-Id", "Mcp-Method", "Mcp-Name",
		"Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Pragma", "Referer",
		"Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Traceparent",
		"Tracestate", "Baggage", "User-Agent", "X-Forwarded-For",
		"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// trimSpace trims spaces and tabs, as textproto does a header value.
func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}

// parseResponse parses hdr, a response's status line and header up to and
// with its empty line, into the response that http.ReadResponse gives for
// req, but for its Body: chunked says which of fastBody's framings it
// has. It takes only the answers the client gets most: HTTP/1.1, a 2xx
// status other than 204, to a request other than HEAD, with a
// Content-Length or a chunked body and no Trailer header. It reports
// false for anything else, and for what http.ReadResponse would reject
// or read otherwise; http.ReadResponse then reads it. FuzzParseResponse
// holds every response it takes, and its body, to what http.ReadResponse
// makes of them.
func parseResponse(hdr []byte, req *http.Request) (resp *http.Response, chunked, ok bool) {
	if req != nil && req.Method == http.MethodHead {
		return nil, false, false
	}
	eol := bytes.IndexByte(hdr, '\n')
	if eol < 0 {
		return nil, false, false
	}
	line := hdr[:eol]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	// "HTTP/1.1 2xx", and a reason phrase after a space, if any.
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+3 || string(line[:len(proto)]) != proto ||
		len(line) > len(proto)+3 && line[len(proto)+3] != ' ' {
		return nil, false, false
	}
	code := line[len(proto) : len(proto)+3]
	if code[0] != '2' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9' || string(code) == "204" {
		return nil, false, false
	}
	s := string(hdr)
	status := s[len(proto):len(line)]
	var te []string
	special := false // one of the names looked up below was sent
	h, ok := parseFields(s[eol+1:], max(bytes.Count(hdr[eol+1:], []byte{'\n'})-1, 0), func(key, v string) (store, ok bool) {
		switch key {
		case "Trailer":
			return false, false
		case "Transfer-Encoding":
			te = append(te, v)
			special = true
		case "Content-Length", "Pragma", "Connection":
			special = true
		}
		return true, true
	})
	if !ok || !special {
		return nil, false, false // no Content-Length: a body that ends with the connection
	}
	resp = &http.Response{
		Status:     status,
		StatusCode: int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0'),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Request:    req,
	}
	fixPragma(h)
	if httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		resp.Close = true
		delete(h, "Connection")
	}
	if te != nil {
		if len(te) != 1 || !asciiEqualFold(te[0], "chunked") {
			return nil, false, false
		}
		delete(h, "Transfer-Encoding")
		chunked = true
	}
	n, ok := contentLength(h)
	switch {
	case !ok:
		return nil, false, false
	case chunked:
		delete(h, "Content-Length")
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
	case h["Content-Length"] == nil:
		return nil, false, false // a body that ends with the connection
	default:
		resp.ContentLength = n
	}
	return resp, chunked, true
}

// fastBody is the body of resp, which parseResponse took, read from br as
// net/http reads it.
func fastBody(br *bufio.Reader, resp *http.Response, chunked bool) io.ReadCloser {
	switch {
	case chunked:
		return &chunkedBody{br: br, cr: httputil.NewChunkedReader(br), resp: resp}
	case resp.ContentLength == 0:
		return http.NoBody
	}
	return &lengthBody{br: br, n: resp.ContentLength}
}

// lengthBody is a body of a known length, read as net/http reads it: the
// read that takes its last byte returns io.EOF with it, and an end of the
// connection before it is io.ErrUnexpectedEOF. The server's requestBody
// reads a request's body with it too.
type lengthBody struct {
	br *bufio.Reader
	n  int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	switch {
	case b.n == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// chunkedBody is a chunked body, read as net/http reads it: after the
// last chunk come the trailer's fields, which go to resp.Trailer, and the
// empty line that ends the message.
type chunkedBody struct {
	br   *bufio.Reader
	cr   io.Reader
	resp *http.Response
	end  bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.end {
		return 0, io.EOF
	}
	n, err := b.cr.Read(p)
	if err == io.EOF {
		b.end = true
		if terr := readTrailer(b.br, b.resp); terr != nil {
			err = terr
		}
	}
	return n, err
}

func (b *chunkedBody) Close() error { return nil }

var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

// readTrailer reads what follows a chunked body's last chunk as
// net/http's body does: the empty line alone, or trailer fields, kept in
// resp.Trailer, and the empty line after them.
func readTrailer(br *bufio.Reader, resp *http.Response) error {
	buf, err := br.Peek(2)
	if string(buf) == "\r\n" {
		br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	// A bound on the trailer's size: its end must be in the buffer.
	for size := 4; ; size++ {
		buf, err := br.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			break
		}
		if err != nil {
			return errors.New("http: suspiciously long trailer after chunked body")
		}
	}
	hdr, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	if resp.Trailer == nil {
		resp.Trailer = http.Header(hdr)
	} else {
		for k, vv := range hdr {
			resp.Trailer[k] = vv
		}
	}
	return nil
}

// asciiEqualFold reports whether s and t are equal under ASCII case
// folding, as net/http compares a Transfer-Encoding (strings.EqualFold
// would also fold the Kelvin sign into a k).
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
