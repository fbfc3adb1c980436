package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowServer answers "ok" at /plain (any path but the two others),
// never at /slow, and at /stream starts a body it never ends (until the
// test's end); got receives the path of each request that reached a
// handler (the first 16).
func slowServer(t *testing.T) (*countedServer, chan string) {
	t.Helper()
	got := make(chan string, 16)
	release := make(chan struct{})
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case got <- r.URL.Path:
		default:
		}
		switch r.URL.Path {
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/stream":
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			io.WriteString(w, "ok")
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's Close (cleanups run last first)
	return srv, got
}

func groupRequest(t *testing.T, g *Group, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(WithGroup(context.Background(), g), http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// fallbackRequest is groupRequest with a body of unknown length, which
// the Transport hands to its Fallback (chunked).
func fallbackRequest(t *testing.T, g *Group, u string) *http.Request {
	t.Helper()
	req := groupRequest(t, g, u, io.NopCloser(strings.NewReader("{}")))
	req.ContentLength = -1
	return req
}

// readAsync reads body to its end on its own goroutine; the error comes
// on the channel.
func readAsync(body io.Reader) chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(body)
		errc <- err
	}()
	return errc
}

// roundTripAsync runs RoundTrip on its own goroutine; the error comes on
// the channel (a response's body is closed).
func roundTripAsync(tr http.RoundTripper, req *http.Request) chan error {
	errc := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// waitLimit bounds a wait for what must happen at once: a failure, not
// a measurement.
const waitLimit = 20 * time.Second

func waitErr(t *testing.T, errc chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(waitLimit):
		t.Fatal("the request did not end")
		return nil
	}
}

func TestGroup_CloseEndsItsRequests(t *testing.T) {
	ioModes(t, func(t *testing.T) {
		srv, got := slowServer(t)
		tr := newTransport(t)

		for _, tc := range []struct {
			name string
			req  func(t *testing.T, g *Group) *http.Request
		}{
			{"waiting for the answer", func(t *testing.T, g *Group) *http.Request {
				return groupRequest(t, g, srv.URL+"/slow", strings.NewReader("{}"))
			}},
			{"handed to the fallback, waiting for the answer", func(t *testing.T, g *Group) *http.Request {
				return fallbackRequest(t, g, srv.URL+"/slow")
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var g Group
				errc := roundTripAsync(tr, tc.req(t, &g))
				<-got
				g.Close()
				if err := waitErr(t, errc); !errors.Is(err, ErrGroupClosed) {
					t.Fatalf("RoundTrip after Close: %v, want ErrGroupClosed", err)
				}
			})
		}
		t.Run("reading the body", func(t *testing.T) {
			var g Group
			resp, err := tr.RoundTrip(groupRequest(t, &g, srv.URL+"/stream", strings.NewReader("{}")))
			if err != nil {
				t.Fatal(err)
			}
			<-got
			defer resp.Body.Close()
			errc := readAsync(resp.Body)
			g.Close()
			if err := waitErr(t, errc); !errors.Is(err, ErrGroupClosed) {
				t.Fatalf("Read after Close: %v, want ErrGroupClosed", err)
			}
		})
		t.Run("a fallback's body closed during a read", func(t *testing.T) {
			var g Group
			resp, err := tr.RoundTrip(fallbackRequest(t, &g, srv.URL+"/stream"))
			if err != nil {
				t.Fatal(err)
			}
			<-got
			errc := readAsync(resp.Body)
			resp.Body.Close() // does not wait for the read, and ends it
			if err := waitErr(t, errc); err == nil {
				t.Fatal("the read of a closed body returned no error")
			}
		})
		t.Run("after Close", func(t *testing.T) {
			var g Group
			g.Close()
			for _, req := range []*http.Request{
				groupRequest(t, &g, srv.URL+"/plain", strings.NewReader("{}")),
				fallbackRequest(t, &g, srv.URL+"/plain"),
			} {
				if _, err := tr.RoundTrip(req); !errors.Is(err, ErrGroupClosed) {
					t.Fatalf("RoundTrip in a closed group: %v, want ErrGroupClosed", err)
				}
			}
			select {
			case p := <-got:
				t.Fatalf("the server got %s from a closed group", p)
			default:
			}
		})
		t.Run("a connection that left the group is not cut", func(t *testing.T) {
			var g Group
			tr := newTransport(t)
			before := srv.accepted.Load()
			resp, err := tr.RoundTrip(groupRequest(t, &g, srv.URL+"/plain", strings.NewReader("{}")))
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp); body != "ok" {
				t.Fatalf("body %q", body)
			}
			<-got
			g.Close()
			// The connection went back to the pool; the next request,
			// of no group, takes it and is answered.
			if body := readAll(t, post(t, tr, context.Background(), srv.URL+"/plain", `{}`)); body != "ok" {
				t.Fatalf("next request: %q", body)
			}
			<-got
			if n := srv.accepted.Load() - before; n != 1 {
				t.Errorf("%d connections for two requests, want 1 (reused)", n)
			}
		})
	})
}

func TestGroup_CloseCancelsADial(t *testing.T) {
	dialing := make(chan struct{})
	tr := &Transport{Fallback: &http.Transport{}, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		close(dialing)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	var g Group
	errc := roundTripAsync(tr, groupRequest(t, &g, "http://127.0.0.1:1/mcp", strings.NewReader("{}")))
	<-dialing
	g.Close()
	if err := waitErr(t, errc); !errors.Is(err, ErrGroupClosed) {
		t.Fatalf("RoundTrip after Close: %v, want ErrGroupClosed", err)
	}
}

// TestGroup_CloseWhileRequestsComeAndGo runs requests of one group, each
// on a connection the others may have used, while the group closes; run
// with -race. A request ends answered or with ErrGroupClosed, and the
// transport's connections then serve requests of no group.
func TestGroup_CloseWhileRequestsComeAndGo(t *testing.T) {
	srv := newCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	tr := newTransport(t)
	var g Group
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				resp, err := tr.RoundTrip(groupRequest(t, &g, srv.URL, strings.NewReader("{}")))
				if err != nil {
					if !errors.Is(err, ErrGroupClosed) {
						errs <- err
					}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil && !errors.Is(err, ErrGroupClosed) || err == nil && string(b) != "ok" {
					errs <- errors.Join(err, errors.New("body "+string(b)))
					return
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	g.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a request failed otherwise than with ErrGroupClosed: %v", err)
	}
	for range 16 {
		if body := readAll(t, post(t, tr, context.Background(), srv.URL, `{}`)); body != "ok" {
			t.Fatalf("request of no group after Close: %q", body)
		}
	}
}
