package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/oauthclient"
	"github.com/mcpgw/mcpgw/upstream"
)

// accountCredentials is the manager's CredentialProvider: a server's
// configured credentials, and for a server with oauth the OAuth client's
// transport for the caller. The OAuth client is set once the store is
// open, before the manager starts.
type accountCredentials struct {
	oc atomic.Pointer[oauthclient.Client]
}

var _ upstream.CredentialProvider = (*accountCredentials)(nil)

func (a *accountCredentials) Credentials(_ context.Context, srv config.Server, principal string) (upstream.Credentials, error) {
	cr := upstream.Credentials{APIKey: srv.APIKey, Headers: maps.Clone(srv.Headers), Env: maps.Clone(srv.Env)}
	if oc := a.oc.Load(); oc != nil && srv.OAuth != nil {
		cr.Transport = func(next http.RoundTripper) http.RoundTripper { return oc.Transport(srv, principal, next) }
	}
	return cr, nil
}

// connections serves a principal's own view of their connected accounts,
// behind the same authentication as /mcp:
//
//	GET    /oauth/connections          the per-user servers, and whether an account is connected at each
//	DELETE /oauth/connections/{server} disconnect (and revoke) this principal's account there
func connections(accounts *oauthclient.Client, mgr *upstream.Manager) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth/connections", func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		type conn struct {
			Server    string `json:"server"`
			Connected bool   `json:"connected"`
		}
		out := []conn{}
		for _, st := range mgr.Servers() {
			sc, ok := mgr.ServerConfig(st.Name)
			if !ok || !sc.PerUser() {
				continue
			}
			ok, err := accounts.Connected(r.Context(), st.Name, p.Name)
			if err != nil {
				writeRefusal(w, r, http.StatusServiceUnavailable, "the gateway could not read the accounts connected at server "+strconv.Quote(st.Name))
				return
			}
			out = append(out, conn{st.Name, ok})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"connections": out})
	})
	mux.HandleFunc("DELETE /oauth/connections/{server}", func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		server := r.PathValue("server")
		sc, ok := mgr.ServerConfig(server)
		if !ok || !sc.PerUser() {
			writeRefusal(w, r, http.StatusNotFound, "no server "+strconv.Quote(server)+" takes connected accounts")
			return
		}
		switch err := accounts.Disconnect(r.Context(), server, p.Name); {
		case accounts.NotConnected(err):
			writeRefusal(w, r, http.StatusNotFound, "you have no account connected at server "+strconv.Quote(server))
		case err != nil:
			writeRefusal(w, r, http.StatusServiceUnavailable, "disconnecting failed; try again")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}

// reviving is the gateway's Accounts: the OAuth client's Check, which also
// restarts a per-user server that gave up waiting for an account to list
// it with once a caller has one (an account connected through another
// replica, or after the server's restarts ran out).
type reviving struct {
	oc  *oauthclient.Client
	mgr *upstream.Manager

	mu   sync.Mutex
	last map[string]time.Time // server → when it was last restarted here
}

// reviveEvery bounds the restarts reviving makes of one server.
const reviveEvery = 5 * time.Second

func (r *reviving) Check(ctx context.Context, server, principal, credential string) error {
	if err := r.oc.Check(ctx, server, principal, credential); err != nil {
		return err
	}
	st, ok := r.mgr.Server(server)
	if !ok || !st.Enabled || !oauthclient.WaitsForAccount(st.Error) || (st.State != upstream.StateFailed && st.State != upstream.StateRestarting) {
		return nil
	}
	r.mu.Lock()
	due := time.Since(r.last[server]) >= reviveEvery
	if due {
		r.last[server] = time.Now()
	}
	r.mu.Unlock()
	if due {
		r.mgr.Restart(server) // its failure shows in the server's status
	}
	return nil
}
