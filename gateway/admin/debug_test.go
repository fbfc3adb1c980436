package admin

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// gunzip returns the profile inside body, which must be gzipped as pprof
// writes it.
func gunzip(t *testing.T, body []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the profile's gzip stream is broken: %v", err)
	}
	return raw
}

func TestProfile(t *testing.T) {
	ev := newEnv(t, envOptions{})
	for _, c := range []struct {
		query   string
		status  int
		message string // in a 4xx body
	}{
		{"?seconds=1", 200, ""},
		{"?seconds=0", 400, "from 1 to 300"},
		{"?seconds=301", 400, "from 1 to 300"},
		{"?seconds=1.5", 400, "from 1 to 300"},
	} {
		path := "/admin/debug/pprof/profile" + c.query
		status, body := ev.do(t, http.MethodGet, path, "", token)
		if status != c.status {
			t.Errorf("GET %s = %d %.200q, want %d", path, status, body, c.status)
			continue
		}
		if status != 200 {
			if !strings.Contains(string(body), c.message) || !strings.Contains(string(body), `"field":"seconds"`) {
				t.Errorf("GET %s = %d %s, want a message with %q naming seconds", path, status, body, c.message)
			}
			continue
		}
		if raw := gunzip(t, body); len(raw) == 0 {
			t.Errorf("GET %s: an empty profile", path)
		}
	}
	if !strings.Contains(ev.log.String(), "cpu profile taken") {
		t.Errorf("the CPU profile was not logged:\n%s", ev.log)
	}
}

// TestProfile_OneAtATime checks that a CPU profile asked for while another
// runs is refused with 409, and that the first one is not disturbed.
func TestProfile_OneAtATime(t *testing.T) {
	ev := newEnv(t, envOptions{})
	var other bytes.Buffer
	if err := pprof.StartCPUProfile(&other); err != nil {
		t.Fatalf("starting the test's own profile: %v", err)
	}
	status, body := ev.do(t, http.MethodGet, "/admin/debug/pprof/profile?seconds=1", "", token)
	pprof.StopCPUProfile()
	if status != http.StatusConflict || !strings.Contains(string(body), "already being taken") {
		t.Errorf("a second CPU profile = %d %s, want 409", status, body)
	}
	if raw := gunzip(t, other.Bytes()); len(raw) == 0 {
		t.Error("the running profile was disturbed: it is empty")
	}
}

// TestProfile_ClientGone checks that a CPU profile ends when its client
// goes away, rather than running on for its seconds and blocking the next.
func TestProfile_ClientGone(t *testing.T) {
	ev := newEnv(t, envOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func() (chan struct{}, *httptest.ResponseRecorder) {
		req := newRequest(http.MethodGet, "/admin/debug/pprof/profile?seconds=300", "", token).WithContext(ctx)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ev.e.ServeHTTP(rec, req)
		}()
		return done, rec
	}
	done, rec := start()
	// Wait until the profile runs: the runtime then refuses another. If
	// the probe held the profiler just as the handler began, the handler
	// answered 409: ask again.
	for running := false; !running; {
		select {
		case <-done:
			if rec.Code != http.StatusConflict {
				t.Fatalf("the profile ended before its client went away: %d %.200q", rec.Code, rec.Body)
			}
			done, rec = start()
		default:
		}
		if err := pprof.StartCPUProfile(io.Discard); err != nil {
			running = true
		} else {
			pprof.StopCPUProfile()
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the profile ran on after its client went away")
	}
	if !strings.Contains(ev.log.String(), "cpu profile abandoned") {
		t.Errorf("the abandoned profile was not logged:\n%s", ev.log)
	}
	status, body := ev.do(t, http.MethodGet, "/admin/debug/pprof/profile?seconds=1", "", token)
	if status != 200 {
		t.Errorf("the profile after an abandoned one = %d %.200q, want 200", status, body)
	}
}
