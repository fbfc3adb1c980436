package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The hardening tests drive the real binary from raw TCP and HTTP
// clients: request framing (no Transfer-Encoding, so no request can be
// smuggled behind a body), and the Host and Origin checks of /admin and
// /media.

// answer is one HTTP response read from a raw connection.
type answer struct {
	status int
	close  bool // the response said Connection: close
	body   string
}

// exchange writes raw to a new connection to addr, reads every response
// until the server ends the connection, and returns them and whether the
// server closed it (a read gave EOF or a reset). A connection the server
// keeps open ends the reading after a while and counts as not closed:
// that is the failure the tests look for, never a pass.
func exchange(t *testing.T, addr, raw string) (answers []answer, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	// Only a server that wrongly keeps the connection waits for this.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return answers, false
			}
			// EOF before a response, or a reset: the server closed the
			// connection. (Closing a socket whose receive buffer still
			// holds unread bytes sends a reset instead of a FIN.)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return answers, true
			}
			t.Fatalf("reading a response: %v (after %d)", err, len(answers))
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, answer{status: resp.StatusCode, close: resp.Close, body: string(b)})
	}
}

// chunked frames body as one chunk and the last chunk.
func chunked(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// mcpPost is a POST /mcp head for host, without the framing headers and
// the blank line.
func mcpPost(host string) string {
	return "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
}

// disableWeb is a complete PATCH that switches server web off: the
// request a client smuggles, whose effect shows in the server's state.
func disableWeb(host string) string {
	body := `{"enabled":false}`
	return fmt.Sprintf("PATCH /admin/servers/web HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		host, adminToken, len(body), body)
}

// startAdminListener runs a gateway with admin.listen and the server web
// at url, waits until web runs, and returns the gateway twice: with the
// main listener's URL, and with the admin listener's (for its admin API).
func startAdminListener(t *testing.T, url string) (main, admin *gateway) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgw.yaml")
	config := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nadmin:\n  listen: 127.0.0.1:0\n  tokens: [%q]\nservers:\n  - {name: web, transport: http, url: %s}\n",
		filepath.Join(dir, "data"), hashToken(adminToken), url)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, baseEnv(), "mcpgw", "serve", "--config", path)
	addrOf := func(msg string) string {
		return p.waitLine(t, "the "+msg+" line", func(l string) string {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == msg {
				return rec.Addr
			}
			return ""
		})
	}
	main = &gateway{process: p, URL: "http://" + addrOf("listening"), Admin: adminToken}
	admin = &gateway{process: p, URL: "http://" + addrOf("admin API listening"), Admin: adminToken}
	admin.waitState(t, "web", "running")
	return main, admin
}

// TestHardening_TransferEncoding sends requests whose body is framed by
// Transfer-Encoding, alone or beside a Content-Length, to both listeners
// and down both of the main listener's paths (a connection's first
// request, and one after a plain POST that took the fast path): each gets
// one 400 with Connection: close and the connection ends, so the request
// smuggled behind a chunked body is never read (RFC 9112, section 6.1).
// The 400 is a JSON-RPC error on /mcp and the admin API's {"message"}
// elsewhere.
func TestHardening_TransferEncoding(t *testing.T) {
	httpURL, _ := startDemoHTTP(t, "demo-http")
	g := startGateway(t, baseEnv(), fmt.Sprintf("servers:\n  - {name: web, transport: http, url: %s}\n", httpURL))
	g.waitState(t, "web", "running")
	main := strings.TrimPrefix(g.URL, "http://")
	_, ag := startAdminListener(t, httpURL)
	adminAddr := strings.TrimPrefix(ag.URL, "http://")

	plain := mcpPost(main) + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(initBody), initBody)
	smuggling := func(host, head string) string {
		body := chunked(initBody) + disableWeb(host)
		// CL.TE: a front end that reads Content-Length forwards the
		// smuggled request as part of this one's body.
		return head + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)) + body
	}
	tests := []struct {
		name string
		addr string
		raw  string
		// want are the statuses of the answers before the connection
		// ends; the last is the 400 with Connection: close.
		want []int
		// rpc: the 400 is a JSON-RPC error (on /mcp), else the admin
		// API's {"message"}.
		rpc bool
	}{
		{
			name: "Content-Length and Transfer-Encoding on /mcp, smuggling a PATCH",
			addr: main,
			raw:  smuggling(main, mcpPost(main)),
			want: []int{400},
			rpc:  true,
		},
		{
			name: "the same after a plain POST on the connection",
			addr: main,
			raw:  plain + smuggling(main, mcpPost(main)),
			want: []int{200, 400},
			rpc:  true,
		},
		{
			name: "Transfer-Encoding alone on /mcp",
			addr: main,
			raw:  mcpPost(main) + "Transfer-Encoding: chunked\r\n\r\n" + chunked(initBody),
			want: []int{400},
			rpc:  true,
		},
		{
			name: "Content-Length and Transfer-Encoding on /admin, smuggling a PATCH",
			addr: main,
			raw:  smuggling(main, "POST /admin/reload HTTP/1.1\r\nHost: "+main+"\r\nAuthorization: Bearer "+adminToken+"\r\n"),
			want: []int{400},
		},
		{
			name: "Transfer-Encoding on a GET of /healthz",
			addr: main,
			raw:  "GET /healthz HTTP/1.1\r\nHost: " + main + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + disableWeb(main),
			want: []int{400},
		},
		{
			name: "Content-Length and Transfer-Encoding on the admin listener, smuggling a PATCH",
			addr: adminAddr,
			raw:  smuggling(adminAddr, "POST /admin/reload HTTP/1.1\r\nHost: "+adminAddr+"\r\nAuthorization: Bearer "+adminToken+"\r\n"),
			want: []int{400},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answers, closed := exchange(t, tt.addr, tt.raw)
			var got []int
			for _, a := range answers {
				got = append(got, a.status)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || !closed {
				t.Fatalf("answers %v (closed %v), want %v and the connection closed: %+v", got, closed, tt.want, answers)
			}
			last := answers[len(answers)-1]
			if !last.close || !strings.Contains(last.body, "Transfer-Encoding is not accepted") {
				t.Errorf("the 400 = %+v, want Connection: close and a message naming Transfer-Encoding", last)
			}
			shape := "message"
			if tt.rpc {
				shape = "jsonrpc"
			}
			if got := refusalShape(last.body); got != shape {
				t.Errorf("the 400's body %q is %s; want %s, the shape of its route", last.body, got, shape)
			}
		})
	}
	// The smuggled PATCHes never ran: web is still on, on both gateways
	// (ag is the second one's admin listener).
	for _, gw := range []*gateway{g, ag} {
		if st := gw.status(t, "web"); st.State != "running" {
			t.Errorf("server web is %s after the smuggling attempts, want running", st.State)
		}
	}
}

// refusalShape names the shape of a refusal's body: "jsonrpc" for a
// JSON-RPC error with a null id, "message" for the admin API's
// {"message"}, else "not JSON" or "other".
func refusalShape(body string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return "not JSON"
	}
	switch {
	case string(m["jsonrpc"]) == `"2.0"` && string(m["id"]) == "null" && m["error"] != nil && m["message"] == nil:
		return "jsonrpc"
	case m["message"] != nil && m["jsonrpc"] == nil:
		return "message"
	}
	return "other"
}

// hostOriginRequest sends method url with the admin token and, when not
// empty, a Host and an Origin of its own, and returns the status and
// body.
func hostOriginRequest(t *testing.T, method, url, host, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHardening_HostAndOrigin checks the Host and Origin rules of the
// routes beside /mcp, on the main listener and on admin.listen: /admin
// refuses a foreign Host or Origin as /mcp does, /media a foreign Host
// only, and /healthz, /readyz and /metrics neither.
func TestHardening_HostAndOrigin(t *testing.T) {
	httpURL, _ := startDemoHTTP(t, "demo-http")
	g := startGateway(t, baseEnv(), fmt.Sprintf("servers:\n  - {name: web, transport: http, url: %s}\n", httpURL))
	g.waitState(t, "web", "running")
	_, ag := startAdminListener(t, httpURL)
	adminPort := ag.URL[strings.LastIndexByte(ag.URL, ':')+1:]

	const (
		evilHost   = "evil.example.com"
		evilOrigin = "http://evil.com"
	)
	tests := []struct {
		name         string
		method, url  string
		host, origin string
		want         int
		msg          string // in the body of a refusal
	}{
		{name: "admin: foreign origin", method: "POST", url: g.URL + "/admin/reload", origin: evilOrigin, want: 403, msg: `origin \"http://evil.com\" is not allowed`},
		{name: "admin: foreign host", method: "POST", url: g.URL + "/admin/reload", host: evilHost, want: 403, msg: `host \"evil.example.com\" is not allowed`},
		{name: "admin: foreign host on a GET", method: "GET", url: g.URL + "/admin/servers", host: evilHost, want: 403, msg: "allowed_hosts"},
		{name: "admin: own origin", method: "POST", url: g.URL + "/admin/reload", origin: g.URL, want: 200},
		{name: "admin: no origin", method: "POST", url: g.URL + "/admin/reload", want: 200},
		{name: "admin: localhost", method: "GET", url: g.URL + "/admin/servers", host: "localhost", want: 200},
		{name: "media: foreign host", method: "GET", url: g.URL + "/media/none.png", host: evilHost, want: 403, msg: "allowed_hosts"},
		{name: "media: foreign origin", method: "GET", url: g.URL + "/media/none.png", origin: evilOrigin, want: 404},
		{name: "healthz: foreign host and origin", method: "GET", url: g.URL + "/healthz", host: evilHost, origin: evilOrigin, want: 200},
		{name: "readyz: foreign host and origin", method: "GET", url: g.URL + "/readyz", host: evilHost, origin: evilOrigin, want: 200},
		{name: "metrics: foreign host and origin", method: "GET", url: g.URL + "/metrics", host: evilHost, origin: evilOrigin, want: 200},

		{name: "admin listener: foreign origin", method: "POST", url: ag.URL + "/admin/reload", origin: evilOrigin, want: 403, msg: "allowed_origins"},
		{name: "admin listener: foreign host", method: "POST", url: ag.URL + "/admin/reload", host: evilHost, want: 403, msg: "allowed_hosts"},
		{name: "admin listener: its own address", method: "POST", url: ag.URL + "/admin/reload", origin: ag.URL, want: 200},
		{name: "admin listener: localhost", method: "POST", url: ag.URL + "/admin/reload", host: "localhost:" + adminPort, origin: "http://localhost:" + adminPort, want: 200},
		{name: "admin listener: metrics by any host", method: "GET", url: ag.URL + "/metrics", host: evilHost, origin: evilOrigin, want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := hostOriginRequest(t, tt.method, tt.url, tt.host, tt.origin)
			if status != tt.want || (tt.msg != "" && !strings.Contains(body, tt.msg)) {
				t.Errorf("%s %s (Host %q, Origin %q) = %d %s, want %d %s", tt.method, tt.url, tt.host, tt.origin, status, body, tt.want, tt.msg)
			}
			if shape := refusalShape(body); status == 403 && shape != "message" {
				t.Errorf("the refusal %s is %s; want the admin API's {\"message\"}", body, shape)
			}
		})
	}
}
