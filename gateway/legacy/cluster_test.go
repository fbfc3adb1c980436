package legacy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
)

// fakeCluster records what a Handler forwards, and answers for the
// replica it names, or says it is gone.
type fakeCluster struct {
	mu   sync.Mutex
	sent []string // "METHOD replica body"
	gone bool
}

func (c *fakeCluster) Forward(w http.ResponseWriter, r *http.Request, body []byte, replica string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, r.Method+" "+replica+" "+string(body))
	if c.gone {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "answered by "+replica)
	return true
}

func (c *fakeCluster) Forwarded(r *http.Request) bool { return r.Header.Get("X-Test-Forwarded") != "" }

func (c *fakeCluster) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

// TestForward: in a cluster, a request for a session another replica
// issued goes to that replica, body and all, whatever its method; one
// the Handler holds, one of another principal, and one that came from a
// replica are not sent on; a replica that is gone costs its session a 404.
func TestForward(t *testing.T) {
	st := newMemStore()
	ca, cb := &fakeCluster{}, &fakeCluster{}
	a := newEnv(t, Options{Secret: testSecret, Store: st, Replica: "a", Cluster: ca})
	b := newEnv(t, Options{Secret: testSecret, Store: st, Replica: "b", Cluster: cb})
	sid := a.initialize(V20251125, principalHeader, "alice")

	// a holds it: nothing is forwarded.
	if r := a.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, principalHeader, "alice"); r.StatusCode != http.StatusOK {
		t.Fatalf("ping at the owner: %d", r.StatusCode)
	}
	// At b, each method goes to a.
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	resp := b.post(sid, ping, principalHeader, "alice")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || string(body) != "answered by a" {
		t.Errorf("POST at b: %d %q, want a's answer", resp.StatusCode, body)
	}
	b.do(b.request(http.MethodGet, sid, "", principalHeader, "alice", HeaderProtocolVersion, V20251125))
	b.do(b.request(http.MethodDelete, sid, "", principalHeader, "alice", HeaderProtocolVersion, V20251125))
	want := []string{"POST a " + ping, "GET a ", "DELETE a "}
	if diff := cmp.Diff(want, cb.all()); diff != "" {
		t.Errorf("b forwarded (-want +got):\n%s", diff)
	}
	if got := ca.all(); len(got) != 0 {
		t.Errorf("a forwarded %q", got)
	}

	// Not sent on: another principal's request, and a forwarded one.
	if r := b.post(sid, ping, principalHeader, "mallory"); r.StatusCode != http.StatusNotFound {
		t.Errorf("another principal at b: %d, want 404", r.StatusCode)
	}
	if r := b.post(sid, ping, principalHeader, "alice", "X-Test-Forwarded", "1"); r.StatusCode != http.StatusNotFound {
		t.Errorf("a request forwarded to b for a's session: %d, want 404", r.StatusCode)
	}
	if n := len(cb.all()); n != len(want) {
		t.Errorf("b forwarded %d requests, want still %d", n, len(want))
	}
	// b never serves a's session from the store.
	if n := len(b.h.Sessions()); n != 0 {
		t.Errorf("b holds %d sessions, want none", n)
	}

	// a is gone.
	cb.mu.Lock()
	cb.gone = true
	cb.mu.Unlock()
	resp = b.post(sid, ping, principalHeader, "alice")
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "replica that held it is gone") {
		t.Errorf("a request for the session of a gone replica: %d %s", resp.StatusCode, body)
	}
}

// TestForward_RateLimitOnce: a request another replica forwarded was
// counted against the principal's rate there, and is not counted again.
func TestForward_RateLimitOnce(t *testing.T) {
	limiter, err := auth.NewRateLimiter(auth.RateLimiterOptions{Rate: config.Rate{Rate: 0.001, Burst: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Secret: testSecret, Replica: "a", Cluster: &fakeCluster{}, RateLimit: limiter})
	sid := e.initialize(V20251125, principalHeader, "alice") // the one request of the burst
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i := range 3 {
		if r := e.post(sid, ping, principalHeader, "alice", "X-Test-Forwarded", "1"); r.StatusCode != http.StatusOK {
			t.Errorf("forwarded ping %d: status %d, want 200", i, r.StatusCode)
		}
	}
	if r := e.post(sid, ping, principalHeader, "alice"); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a client's own ping past the burst: status %d, want 429", r.StatusCode)
	}
}
