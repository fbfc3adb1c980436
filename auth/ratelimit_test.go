package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/config"
)

// clock is a settable time for RateLimiterOptions.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// step is one request through a RateLimiter's Middleware: after the clock
// advanced by wait, from who (a principal; "" for none) at ip.
type step struct {
	wait time.Duration
	who  string
	ip   string
	// want is the status and Retry-After: "200", or "429 2".
	want string
}

func TestRateLimiter(t *testing.T) {
	tests := []struct {
		name    string
		rate    config.Rate
		maxKeys int
		steps   []step
	}{
		{
			name: "burst, then 429 with Retry-After, then recovery",
			rate: config.Rate{Rate: 0.5, Burst: 2}, // a token every 2s
			steps: []step{
				{who: "alice", want: "200"},
				{who: "alice", want: "200"},
				{who: "alice", want: "429 2"},
				{who: "alice", want: "429 2"}, // a refusal takes no token
				{wait: 500 * time.Millisecond, who: "alice", want: "429 2"},
				{wait: time.Second, who: "alice", want: "429 1"}, // 0.5s left: at least 1
				{wait: 500 * time.Millisecond, who: "alice", want: "200"},
				{who: "alice", want: "429 2"},
				{wait: time.Hour, who: "alice", want: "200"}, // refilled to the burst, no more
				{who: "alice", want: "200"},
				{who: "alice", want: "429 2"},
			},
		},
		{
			name: "Retry-After rounds up to whole seconds",
			rate: config.Rate{Rate: 0.4, Burst: 1}, // a token every 2.5s
			steps: []step{
				{who: "alice", want: "200"},
				{who: "alice", want: "429 3"},
			},
		},
		{
			name: "principals are independent",
			rate: config.Rate{Rate: 1, Burst: 1},
			steps: []step{
				{who: "alice", ip: "10.0.0.1", want: "200"},
				{who: "alice", ip: "10.0.0.2", want: "429 1"}, // a principal is one key from anywhere
				{who: "bob", ip: "10.0.0.1", want: "200"},
				{who: "bob", want: "429 1"},
				{wait: time.Second, who: "alice", want: "200"},
			},
		},
		{
			name: "no principal and anonymous are limited by IP",
			rate: config.Rate{Rate: 1, Burst: 1},
			steps: []step{
				{ip: "10.0.0.1", want: "200"},
				{ip: "10.0.0.1", want: "429 1"},
				{who: Anonymous, ip: "10.0.0.1", want: "429 1"},
				{who: Anonymous, ip: "10.0.0.2", want: "200"},
				{ip: "10.0.0.2", want: "429 1"},
				{ip: "[::1]", want: "200"},
				{who: "alice", ip: "10.0.0.1", want: "200"}, // a principal is not its IP
			},
		},
		{
			name:    "the LRU bound drops the least recently used",
			rate:    config.Rate{Rate: 1, Burst: 1},
			maxKeys: 2,
			steps: []step{
				{who: "a", want: "200"},
				{who: "b", want: "200"},
				{who: "a", want: "429 1"}, // a is now the most recent
				{who: "c", want: "200"},   // drops b
				{who: "a", want: "429 1"}, // a was kept
				{who: "b", want: "200"},   // b starts again with a full bucket; drops c
				{who: "a", want: "429 1"},
				{who: "c", want: "200"},
			},
		},
		{
			name: "rate 0 is no limit",
			rate: config.Rate{},
			steps: []step{
				{who: "alice", want: "200"},
				{who: "alice", want: "200"},
				{ip: "10.0.0.1", want: "200"},
				{ip: "10.0.0.1", want: "200"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2025, 11, 25, 0, 0, 0, 0, time.UTC)}
			l, err := NewRateLimiter(RateLimiterOptions{Rate: tt.rate, MaxKeys: tt.maxKeys, Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			reached := 0
			h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
			var want, got []string
			passed := 0
			for i, s := range tt.steps {
				clk.t = clk.t.Add(s.wait)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, request(s.who, s.ip))
				res := fmt.Sprint(rec.Code)
				if ra := rec.Header().Get("Retry-After"); ra != "" {
					res += " " + ra
				}
				if rec.Code == http.StatusTooManyRequests && !strings.Contains(rec.Body.String(), "too many requests") {
					t.Errorf("step %d: body %q", i, rec.Body)
				}
				if rec.Code == http.StatusOK {
					passed++
				}
				want = append(want, fmt.Sprintf("%d %s", i, s.want))
				got = append(got, fmt.Sprintf("%d %s", i, res))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			if reached != passed {
				t.Errorf("next ran %d times for %d requests passed", reached, passed)
			}
		})
	}
}

// request returns a request from principal who ("" for none) at ip
// (default 192.0.2.1).
func request(who, ip string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if ip == "" {
		ip = "192.0.2.1"
	}
	r.RemoteAddr = ip + ":40000"
	if who != "" {
		r = r.WithContext(NewContext(r.Context(), Principal{Name: who}))
	}
	return r
}

func TestRateLimiter_Options(t *testing.T) {
	t.Run("OnLimit writes the answer", func(t *testing.T) {
		var gotWait time.Duration
		l, err := NewRateLimiter(RateLimiterOptions{
			Rate: config.Rate{Rate: 2, Burst: 1},
			OnLimit: func(w http.ResponseWriter, r *http.Request, retryAfter time.Duration) {
				gotWait = retryAfter
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-31003,"message":"slow down"}}`)
			},
			Now: (&clock{t: time.Unix(1000, 0)}).now,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		h.ServeHTTP(httptest.NewRecorder(), request("alice", ""))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request("alice", ""))
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "-31003") {
			t.Errorf("answer %d Retry-After %q body %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		if gotWait != 500*time.Millisecond {
			t.Errorf("OnLimit got retryAfter %v, want 500ms", gotWait)
		}
	})
	t.Run("ClientIP picks the address", func(t *testing.T) {
		l, _ := NewRateLimiter(RateLimiterOptions{
			Rate:     config.Rate{Rate: 1, Burst: 1},
			ClientIP: func(r *http.Request) string { return r.Header.Get("X-Client") },
			Now:      (&clock{t: time.Unix(1000, 0)}).now,
		})
		var got []bool
		for _, c := range []string{"x", "x", "y"} {
			r := request("", "")
			r.Header.Set("X-Client", c)
			_, ok := l.Allow(r)
			got = append(got, ok)
		}
		if diff := cmp.Diff([]bool{true, false, true}, got); diff != "" {
			t.Errorf("allowed (-want +got):\n%s", diff)
		}
	})
	t.Run("disabled is next itself", func(t *testing.T) {
		l, _ := NewRateLimiter(RateLimiterOptions{})
		next := &httputil.ReverseProxy{}
		if h := l.Middleware(next); h != http.Handler(next) || l.Enabled() {
			t.Errorf("a disabled limiter wrapped next (enabled %v)", l.Enabled())
		}
	})
	for _, bad := range []RateLimiterOptions{
		{Rate: config.Rate{Rate: -1, Burst: 1}},
		{Rate: config.Rate{Rate: 1, Burst: 0}},
		{Rate: config.Rate{Rate: 1, Burst: -1}},
		{Rate: config.Rate{Rate: 1, Burst: 1}, MaxKeys: -1},
	} {
		if _, err := NewRateLimiter(bad); err == nil {
			t.Errorf("NewRateLimiter(%+v) accepted it", bad)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "1",
		time.Nanosecond:         "1",
		time.Second:             "1",
		time.Second + 1:         "2",
		2500 * time.Millisecond: "3",
		time.Minute:             "60",
	} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %q, want %q", d, got, want)
		}
	}
}
