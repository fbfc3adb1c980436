package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"sync/atomic"

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
			if !ok || sc.GrantOf() != config.GrantAuthorizationCode {
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
		if !ok || sc.GrantOf() != config.GrantAuthorizationCode {
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
