package admin

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/store"
)

// TestServers_Replicas: in a cluster, a server's status says its state on
// each replica, as each recorded it; alone, it says nothing of replicas.
func TestServers_Replicas(t *testing.T) {
	ev := newEnv(t, envOptions{replicas: func() []store.Replica {
		return []store.Replica{
			{ID: "r1", Servers: json.RawMessage(`{"files":"running","weather":"starting"}`)},
			{ID: "r2", Servers: json.RawMessage(`{"files":"failed"}`)},
			{ID: "r3"}, // recorded none yet
		}
	}})
	for name, want := range map[string]map[string]string{
		"files":   {"r1": "running", "r2": "failed"},
		"weather": {"r1": "starting"},
		"git":     {},
	} {
		status, body := ev.do(t, http.MethodGet, "/admin/servers/"+name, "", token)
		var got struct {
			Replicas map[string]string `json:"replicas"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &got) != nil {
			t.Fatalf("GET %s: %d %s", name, status, body)
		}
		if diff := cmp.Diff(want, got.Replicas); diff != "" {
			t.Errorf("%s's replicas (-want +got):\n%s", name, diff)
		}
	}
	alone := newEnv(t, envOptions{})
	_, body := alone.do(t, http.MethodGet, "/admin/servers/files", "", token)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["replicas"]; ok {
		t.Errorf("a gateway alone shows replicas: %s", body)
	}
}
