package legacy

import (
	"net/http"
	"testing"
)

func TestAdminSessions(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.initialize(V20251125)
	b := e.initialize(V20250618)
	infos := e.h.AdminSessions()
	if len(infos) != 2 || infos[0].ID != e.session(a).key || infos[1].ID != e.session(b).key || infos[1].ProtocolVersion != V20250618 {
		t.Fatalf("AdminSessions = %+v", infos)
	}
	if e.h.EndSession("no-such-session") {
		t.Error("EndSession of an unknown id reported true")
	}
	if !e.h.EndSession(infos[0].ID) {
		t.Fatal("EndSession of a live session reported false")
	}
	if got := e.h.AdminSessions(); len(got) != 1 || got[0].ID != infos[1].ID {
		t.Errorf("after EndSession: %+v", got)
	}
	// The ended session's client is told it is gone, and may start anew.
	if r := e.post(a, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("a request of the ended session: %d, want 404", r.StatusCode)
	}
}
