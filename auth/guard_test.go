package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHostCheck(t *testing.T) {
	hosts := func(h string) bool { return h == "gw.example.com" || strings.HasPrefix(h, "127.0.0.1:") }
	origins := func(o string) bool { return o == "https://gw.example.com" }
	tests := []struct {
		name   string
		check  HostCheck
		host   string
		origin string
		msg    string // of the refusal; "": passes
	}{
		{name: "allowed host, no origin", check: HostCheck{AllowHost: hosts, AllowOrigin: origins}, host: "127.0.0.1:8080"},
		{name: "allowed host and origin", check: HostCheck{AllowHost: hosts, AllowOrigin: origins}, host: "gw.example.com", origin: "https://gw.example.com"},
		{
			name: "foreign host", check: HostCheck{AllowHost: hosts, AllowOrigin: origins}, host: "evil.example.com",
			msg: `host "evil.example.com" is not allowed: reach the gateway by its public address (see allowed_hosts)`,
		},
		{
			name: "foreign origin", check: HostCheck{AllowHost: hosts, AllowOrigin: origins}, host: "gw.example.com", origin: "http://evil.com",
			msg: `origin "http://evil.com" is not allowed to use this gateway (see allowed_origins)`,
		},
		{
			name: "foreign host and origin: the host is named", check: HostCheck{AllowHost: hosts, AllowOrigin: origins}, host: "evil.example.com", origin: "http://evil.com",
			msg: `host "evil.example.com" is not allowed: reach the gateway by its public address (see allowed_hosts)`,
		},
		{name: "host only: any origin passes", check: HostCheck{AllowHost: hosts}, host: "gw.example.com", origin: "http://evil.com"},
		{
			name: "host only: a foreign host does not", check: HostCheck{AllowHost: hosts}, host: "evil.example.com", origin: "https://gw.example.com",
			msg: `host "evil.example.com" is not allowed: reach the gateway by its public address (see allowed_hosts)`,
		},
		{name: "zero check", host: "evil.example.com", origin: "http://evil.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/admin/reload", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			err := tt.check.Check(r)
			if got := fmt.Sprint(err); (err == nil) != (tt.msg == "") || (err != nil && got != tt.msg) {
				t.Fatalf("Check = %v, want %q", err, tt.msg)
			}
			var called bool
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
			rec := httptest.NewRecorder()
			tt.check.OnRefuse = func(w http.ResponseWriter, r *http.Request, status int, msg string) {
				w.WriteHeader(status)
				io.WriteString(w, "refused: "+msg)
			}
			tt.check.Middleware(next).ServeHTTP(rec, r)
			if tt.msg == "" {
				if !called || rec.Code != 200 {
					t.Errorf("Middleware: called %v, status %d; want the request passed on", called, rec.Code)
				}
				rec = httptest.NewRecorder()
				if !tt.check.Admit(rec, r) || rec.Body.Len() > 0 {
					t.Errorf("Admit: false or an answer %q; want true and nothing written", rec.Body.String())
				}
				return
			}
			if called || rec.Code != http.StatusForbidden || rec.Body.String() != "refused: "+tt.msg {
				t.Errorf("Middleware: called %v, %d %q; want 403 %q", called, rec.Code, rec.Body.String(), "refused: "+tt.msg)
			}
			// Admit is the same check and the same refusal.
			rec = httptest.NewRecorder()
			if tt.check.Admit(rec, r) || rec.Code != http.StatusForbidden || rec.Body.String() != "refused: "+tt.msg {
				t.Errorf("Admit: %d %q; want false and 403 %q", rec.Code, rec.Body.String(), "refused: "+tt.msg)
			}
		})
	}
}

// TestRequireContentLength sends raw requests to net/http behind the
// middleware: one framed by Transfer-Encoding, with or without a
// Content-Length, gets a 400 with Connection: close and the connection
// ends, so a request after its body is never read; one with
// Content-Length keeps its connection.
func TestRequireContentLength(t *testing.T) {
	var served atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "served "+r.URL.Path)
	})
	srv := httptest.NewServer(RequireContentLength(nil)(next))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	second := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name string
		raw  string
		want []string // "status body" of each answer before the connection ends
		// closed: the connection ended after them; served: how many
		// requests reached next.
		closed bool
		served int32
	}{
		{
			name:   "Content-Length and Transfer-Encoding, and a request after the chunks",
			raw:    "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + second,
			want:   []string{"400 " + TransferEncodingRefused + "\n"},
			closed: true,
		},
		{
			name:   "Transfer-Encoding alone",
			raw:    "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + second,
			want:   []string{"400 " + TransferEncodingRefused + "\n"},
			closed: true,
		},
		{
			name:   "Transfer-Encoding on a GET",
			raw:    "GET /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + second,
			want:   []string{"400 " + TransferEncodingRefused + "\n"},
			closed: true,
		},
		{
			name:   "Content-Length: the connection serves the next request",
			raw:    "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + second + "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			want:   []string{"200 served /a", "200 served /smuggled", "200 served /b"},
			closed: true, // by the last request's Connection: close
			served: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(0)
			got, closed := rawExchange(t, addr, tt.raw)
			if diff := cmp.Diff(tt.want, got); diff != "" || closed != tt.closed {
				t.Errorf("answers (-want +got):\n%s\nclosed %v, want %v", diff, closed, tt.closed)
			}
			if n := served.Load(); n != tt.served {
				t.Errorf("%d requests reached the handler, want %d", n, tt.served)
			}
		})
	}
}

// rawExchange writes raw to a new connection to addr and reads the
// answers until the server ends the connection; one it keeps open ends
// the reading after a while and counts as not closed.
func rawExchange(t *testing.T, addr, raw string) (answers []string, closed bool) {
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
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				return answers, false
			}
			// A reset instead of a FIN: the server closed with bytes of
			// ours unread.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return answers, true
			}
			t.Fatalf("reading an answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest && !resp.Close {
			t.Errorf("the 400 does not say Connection: close")
		}
		answers = append(answers, fmt.Sprintf("%d %s", resp.StatusCode, b))
	}
}
