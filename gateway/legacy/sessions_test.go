package legacy

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
)

func TestAdminSessions(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.initialize(V20251125)
	b := e.initialize(V20250618)
	infos, err := e.h.AdminSessions(t.Context())
	if err != nil || len(infos) != 2 || infos[0].ID != e.session(a).key || infos[1].ID != e.session(b).key ||
		infos[1].ProtocolVersion != V20250618 || infos[0].State != gateway.SessionLive {
		t.Fatalf("AdminSessions = %+v, %v", infos, err)
	}
	if found, err := e.h.EndSession(t.Context(), "no-such-session"); found || err != nil {
		t.Errorf("EndSession of an unknown id = %v, %v; want false", found, err)
	}
	if found, err := e.h.EndSession(t.Context(), infos[0].ID); !found || err != nil {
		t.Fatalf("EndSession of a live session = %v, %v", found, err)
	}
	if got, _ := e.h.AdminSessions(t.Context()); len(got) != 1 || got[0].ID != infos[1].ID {
		t.Errorf("after EndSession: %+v", got)
	}
	// The ended session's client is told it is gone, and may start anew.
	if r := e.post(a, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("a request of the ended session: %d, want 404", r.StatusCode)
	}
}

// TestEndSession_StoreFails: an admin end whose record cannot be deleted
// fails and changes nothing: the session goes on, here and after a
// restart, whether this process held it or only the store did. Reporting
// it ended would leave a session a restarted gateway serves again.
func TestEndSession_StoreFails(t *testing.T) {
	for _, stored := range []bool{false, true} {
		name := "live"
		if stored {
			name = "stored"
		}
		t.Run(name, func(t *testing.T) {
			st := newMemStore()
			opts := Options{Secret: testSecret, Store: st}
			e := newEnv(t, opts)
			sid := e.initialize(V20251125)
			key := keyOf(t, e.h, sid)
			if stored {
				e = restart(t, e, opts)
			}
			st.setFail(errors.New("disk on fire"))
			if _, err := e.h.EndSession(t.Context(), key); err == nil {
				t.Error("EndSession with a failing store reported no error")
			}
			st.setFail(nil)
			if _, ok := st.get(key); !ok {
				t.Fatal("the record went")
			}
			if r := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
				t.Errorf("the session after a failed end: status %d, want 200", r.StatusCode)
			}
			b := restart(t, e, opts)
			if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
				t.Errorf("the session after a failed end and a restart: status %d, want 200", r.StatusCode)
			}
		})
	}
}

// TestEndSession_Stored: after a restart, the sessions the store holds and
// no request restored yet are listed as stored (not idle ones), and the
// admin API ends one for good by its short id, without restoring it.
func TestEndSession_Stored(t *testing.T) {
	st := newMemStore()
	opts := Options{Secret: testSecret, Store: st, IdleTimeout: time.Hour}
	a := newEnv(t, opts)
	sid := a.initialize(V20251125, principalHeader, "alice")
	key := keyOf(t, a.h, sid)
	idle := keyOf(t, a.h, a.initialize(V20251125))
	st.edit(idle, func(rec *SessionRecord) { rec.LastActive = time.Now().Add(-2 * time.Hour) })
	b := restart(t, a, opts)
	liveKey := keyOf(t, b.h, b.initialize(V20250618))

	infos, err := b.h.AdminSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]gateway.SessionInfo{}
	for _, in := range infos {
		got[in.ID] = in
	}
	if in := got[key]; len(infos) != 2 || in.State != gateway.SessionStored || in.Principal != "alice" || in.ClientName != "test" || in.ProtocolVersion != V20251125 {
		t.Errorf("AdminSessions after the restart: %+v; want the stored session and the live one", infos)
	}
	if got[liveKey].State != gateway.SessionLive {
		t.Errorf("the session started after the restart: %+v, want it live", got[liveKey])
	}
	if n := len(b.h.Sessions()); n != 1 {
		t.Errorf("listing restored sessions: %d live, want 1", n)
	}

	if found, err := b.h.EndSession(t.Context(), key); !found || err != nil {
		t.Fatalf("EndSession of the stored session = %v, %v", found, err)
	}
	if _, ok := st.get(key); ok {
		t.Error("the ended session kept its record")
	}
	if r := b.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, principalHeader, "alice"); r.StatusCode != http.StatusNotFound {
		t.Errorf("the ended session: status %d, want 404", r.StatusCode)
	}
	if infos, _ := b.h.AdminSessions(t.Context()); len(infos) != 1 || infos[0].ID != liveKey {
		t.Errorf("AdminSessions after the end: %+v, want only the live one", infos)
	}
	for _, id := range []string{key, idle, "no-such-session"} {
		if found, err := b.h.EndSession(t.Context(), id); found || err != nil {
			t.Errorf("EndSession(%s) = %v, %v; want nothing found", id, found, err)
		}
	}

	st.setFail(errors.New("disk on fire"))
	if infos, err := b.h.AdminSessions(t.Context()); err == nil {
		t.Errorf("AdminSessions with a failing store = %+v, want an error", infos)
	}
}

// TestRestore_RacesEnd: a restore that read the record before the session
// ended (a client DELETE of it restored by another request, or the admin
// API) does not bring the session back.
func TestRestore_RacesEnd(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(t *testing.T, e *env, sid string)
	}{
		{"DELETE", func(t *testing.T, e *env, sid string) {
			if r := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.StatusCode != http.StatusOK {
				t.Fatalf("a second request: status %d", r.StatusCode)
			}
			if r := e.do(e.request(http.MethodDelete, sid, "")); r.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: status %d", r.StatusCode)
			}
		}},
		{"admin API", func(t *testing.T, e *env, sid string) {
			if found, err := e.h.EndSession(t.Context(), keyOf(t, e.h, sid)); !found || err != nil {
				t.Fatalf("EndSession = %v, %v", found, err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore()
			opts := Options{Secret: testSecret, Store: st}
			a := newEnv(t, opts)
			sid := a.initialize(V20251125)
			b := restart(t, a, opts)

			// The first restore reads the record, then waits.
			held, release := make(chan struct{}), make(chan struct{})
			var released sync.Once
			t.Cleanup(func() { released.Do(func() { close(release) }) }) // before b closes
			var first atomic.Bool
			st.setAfterGet(func(string) {
				if first.CompareAndSwap(false, true) {
					close(held)
					<-release
				}
			})
			req := b.request(http.MethodPost, sid, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
			restored := make(chan int, 1)
			go func() {
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					restored <- 0
					return
				}
				r.Body.Close()
				restored <- r.StatusCode
			}()
			<-held
			tt.end(t, b, sid)
			released.Do(func() { close(release) })
			if status := <-restored; status != http.StatusNotFound {
				t.Errorf("the restore that read the record before the end: status %d, want 404", status)
			}
			if n := len(b.h.Sessions()); n != 0 {
				t.Errorf("%d sessions after the end, want none", n)
			}
		})
	}
}
