package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/store"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// replica is one Cluster with an HTTP server in front of handler.
type replica struct {
	*Cluster
	srv *httptest.Server
}

func newReplica(t *testing.T, reg Registry, id string, handler http.Handler) *replica {
	t.Helper()
	r := &replica{}
	r.srv = httptest.NewUnstartedServer(nil)
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	c, err := New(Options{ID: id, URL: r.srv.URL, Secret: secret, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	r.Cluster = c
	r.srv.Config.Handler = c.Middleware(handler)
	if err := c.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// seen is what the owner's handler saw of a forwarded request.
type seen struct {
	Method, Path, Host, Session, Body string
	Forwarded                         bool
}

func echoHandler(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := seen{r.Method, r.URL.Path, r.Host, r.Header.Get("Mcp-Session-Id"), string(body), Forwarded(r)}
		if r.Method == http.MethodGet {
			// An event stream: the first event must reach the client
			// before the second is written.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			b, _ := json.Marshal(s)
			io.WriteString(w, "data: "+string(b)+"\n\n")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "data: second\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s)
	})
}

// front forwards every request to the replica named by the X-Owner header.
func front(t *testing.T, c *Cluster) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodGet {
			body = nil
		}
		if !c.Forward(w, r, body, r.Header.Get("X-Owner")) {
			http.Error(w, "not forwarded", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestForward(t *testing.T) {
	reg := store.NewMemory()
	release := make(chan struct{})
	a := newReplica(t, reg, "a", echoHandler(release))
	b := newReplica(t, reg, "b", echoHandler(release)) // knows a from the registry
	fb := front(t, b.Cluster)

	t.Run("a POST, as it came", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, fb.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = "gateway.example.com"
		req.Header.Set("Mcp-Session-Id", "sess-1")
		req.Header.Set("X-Owner", "a")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var got seen
		if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
			t.Fatalf("status %d: %v", res.StatusCode, err)
		}
		want := seen{"POST", "/mcp", "gateway.example.com", "sess-1", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, true}
		if got != want {
			t.Errorf("the owner saw %+v, want %+v", got, want)
		}
	})

	t.Run("a GET stream, event by event", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, fb.URL+"/mcp", nil)
		req.Header.Set("Mcp-Session-Id", "sess-2")
		req.Header.Set("X-Owner", "a")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		rd := bufio.NewReader(res.Body)
		first, err := rd.ReadString('\n')
		if err != nil || !strings.Contains(first, `"Forwarded":true`) || !strings.Contains(first, `"Session":"sess-2"`) {
			t.Fatalf("first event %q, %v", first, err)
		}
		close(release) // only now: the first event came through alone
		rest, _ := io.ReadAll(rd)
		if !strings.Contains(string(rest), "data: second") {
			t.Errorf("the rest of the stream: %q", rest)
		}
	})

	t.Run("an unknown replica", func(t *testing.T) {
		w := httptest.NewRecorder()
		if b.Forward(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), nil, "nobody") || w.Body.Len() > 0 {
			t.Errorf("forwarded to a replica that is not registered: %d %q", w.Code, w.Body)
		}
		if b.Forward(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), nil, "b") {
			t.Error("forwarded to itself")
		}
	})

	t.Run("a replica that is gone", func(t *testing.T) {
		a.srv.Close()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
		if b.Forward(w, r, []byte("{}"), "a") || w.Body.Len() > 0 {
			t.Errorf("forwarding to a closed replica reported success: %d %q", w.Code, w.Body)
		}
	})
}

func TestForward_Lapsed(t *testing.T) {
	reg := store.NewMemory()
	a := newReplica(t, reg, "a", echoHandler(nil))
	b := newReplica(t, reg, "b", echoHandler(nil))
	// a's record, last renewed a minute ago.
	if err := reg.PutReplica(context.Background(), store.Replica{ID: "a", URL: a.srv.URL, StartedAt: a.started, SeenAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := b.read(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if b.Forward(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), []byte("{}"), "a") {
		t.Error("forwarded to a replica whose record lapsed")
	}
}

func TestVerify(t *testing.T) {
	reg := store.NewMemory()
	a := newReplica(t, reg, "a", echoHandler(nil))
	b := newReplica(t, reg, "b", echoHandler(nil))
	token := func(c *Cluster, tok forwardToken) string {
		raw, _ := json.Marshal(tok)
		return c.sealer.Seal(raw)
	}
	sess := func(id string) string {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Mcp-Session-Id", id)
		return sessionHash(r)
	}
	later := time.Now().Add(time.Minute).Unix()
	other, _ := New(Options{ID: "b", URL: "http://x:1", Secret: []byte("another secret, 32 bytes or more!"), Registry: reg})
	for _, tc := range []struct {
		name string
		tok  string
		want bool
		err  error
	}{
		{"none", "", false, nil},
		{"from b to a", token(b.Cluster, forwardToken{From: "b", To: "a", Session: sess("s"), Expires: later}), true, nil},
		{"garbage", "not a token", false, ErrBadToken},
		{"for another replica", token(b.Cluster, forwardToken{From: "a", To: "b", Session: sess("s"), Expires: later}), false, ErrBadToken},
		{"for another session", token(b.Cluster, forwardToken{From: "b", To: "a", Session: sess("t"), Expires: later}), false, ErrBadToken},
		{"expired", token(b.Cluster, forwardToken{From: "b", To: "a", Session: sess("s"), Expires: time.Now().Add(-time.Second).Unix()}), false, ErrBadToken},
		{"another cluster's secret", token(other, forwardToken{From: "b", To: "a", Session: sess("s"), Expires: later}), false, ErrBadToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Mcp-Session-Id", "s")
			if tc.tok != "" {
				r.Header.Set(HeaderToken, tc.tok)
			}
			got, err := a.Verify(r)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("Verify = %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
			// The middleware refuses what Verify does not take.
			w := httptest.NewRecorder()
			a.Middleware(echoHandler(nil)).ServeHTTP(w, r)
			if wantCode := map[bool]int{true: 403, false: 200}[tc.err != nil]; w.Code != wantCode {
				t.Errorf("middleware answered %d, want %d", w.Code, wantCode)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	reg := store.NewMemory()
	a := newReplica(t, reg, "a", echoHandler(nil))
	// Another process under a's name at another URL, while a renews its
	// record, is refused.
	dup, err := New(Options{ID: "a", URL: "http://127.0.0.1:1", Secret: secret, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := dup.Join(context.Background()); err == nil || !strings.Contains(err.Error(), `replica id "a" is in use`) {
		t.Errorf("Join of a second replica named a = %v", err)
	}
	// a restarted at its URL is welcome at once.
	again, _ := New(Options{ID: "a", URL: a.srv.URL, Secret: secret, Registry: reg})
	if err := again.Join(context.Background()); err != nil {
		t.Errorf("Join of a restarted a = %v", err)
	}
	// a restarted at another URL waits for its old record to lapse.
	if err := reg.PutReplica(context.Background(), store.Replica{ID: "b", URL: "http://127.0.0.1:2", StartedAt: time.Now(), SeenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	moved, _ := New(Options{ID: "b", URL: "http://127.0.0.1:3", Secret: secret, Registry: reg, Lapse: 200 * time.Millisecond})
	if err := moved.Join(context.Background()); err != nil {
		t.Errorf("Join of b at a new URL = %v", err)
	}
	live, _ := reg.ListReplicas(context.Background(), time.Time{})
	for _, r := range live {
		if r.ID == "b" && r.URL != "http://127.0.0.1:3" {
			t.Errorf("b's record after the Join: %+v", r)
		}
	}
}

func TestRun_Leaves(t *testing.T) {
	reg := store.NewMemory()
	a := newReplica(t, reg, "a", echoHandler(nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	cancel()
	<-done
	live, err := reg.ListReplicas(context.Background(), time.Time{})
	if err != nil || len(live) != 0 {
		t.Errorf("after Run ended the registry holds %v, %v", live, err)
	}
}

func TestNew_Refuses(t *testing.T) {
	reg := store.NewMemory()
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no id", Options{URL: "http://a:1", Secret: secret, Registry: reg}, "needs an ID"},
		{"relative url", Options{ID: "a", URL: "/x", Secret: secret, Registry: reg}, "absolute http or https URL"},
		{"short secret", Options{ID: "a", URL: "http://a:1", Secret: []byte("short"), Registry: reg}, "secret must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestForward_NewReplica: a replica that joined after this one read the
// registry is found at the first request for it.
func TestForward_NewReplica(t *testing.T) {
	reg := store.NewMemory()
	a := newReplica(t, reg, "a", echoHandler(nil))
	newReplica(t, reg, "b", echoHandler(nil)) // after a's last read
	// a read the registry at Join, 150 ms before the request.
	a.mu.Lock()
	a.readAt = time.Now().Add(-150 * time.Millisecond)
	a.mu.Unlock()
	fa := front(t, a.Cluster)
	req, _ := http.NewRequest(http.MethodPost, fa.URL+"/mcp", strings.NewReader("{}"))
	req.Header.Set("X-Owner", "b")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("forwarding to a replica that joined after the last read: %d", res.StatusCode)
	}
}

// TestForward_StoreDown: when the registry cannot be read, the replicas
// known at the last read are still reached, however long ago it was.
func TestForward_StoreDown(t *testing.T) {
	reg := store.NewMemory()
	newReplica(t, reg, "a", echoHandler(nil))
	b := newReplica(t, reg, "b", echoHandler(nil))
	// b's last read, a minute ago; the store has been down since.
	b.mu.Lock()
	b.readAt = b.readAt.Add(-time.Minute)
	for id, r := range b.peers {
		r.SeenAt = r.SeenAt.Add(-time.Minute)
		b.peers[id] = r
	}
	b.mu.Unlock()
	b.opts.Registry = downRegistry{}
	fb := front(t, b.Cluster)
	req, _ := http.NewRequest(http.MethodPost, fb.URL+"/mcp", strings.NewReader("{}"))
	req.Header.Set("X-Owner", "a")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("forwarding while the store is down: %d, want a's answer", res.StatusCode)
	}
}

// downRegistry is a store that does not answer.
type downRegistry struct{}

func (downRegistry) PutReplica(context.Context, store.Replica) error { return errors.New("store down") }
func (downRegistry) ListReplicas(context.Context, time.Time) ([]store.Replica, error) {
	return nil, errors.New("store down")
}
func (downRegistry) DeleteReplica(context.Context, string, time.Time) error {
	return errors.New("store down")
}
