package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgw/mcpgw/auth"
	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/oauthclient"
	"github.com/mcpgw/mcpgw/upstream"
)

// Accounts are the accounts principals connect at per-user servers (the
// OAuth client, oauthclient.Client), as the core needs them.
type Accounts interface {
	// Check returns an *oauthclient.ConnectRequired when principal must
	// connect an account at server before a request reaches it, and for
	// a server that exchanges the caller's token (credential, see
	// Request.Credential) makes the exchange; nil when the request may
	// go. It may be called concurrently.
	Check(ctx context.Context, server, principal, credential string) error
}

var _ Accounts = (*oauthclient.Client)(nil)

// CodeConnectRequired is the error of a request to a per-user server for a
// principal that has not connected an account there, for a client that
// cannot be asked to open a URL (it declared no URL-mode elicitation): its
// message and data hold the URL.
const CodeConnectRequired = -31007

// ConnectTool is the one tool a per-user server lists while the gateway
// cannot list it (no principal has connected an account to list it with
// yet, that account was refused, or the server is down): calling it
// brings the connect URL, or says the caller is connected.
const ConnectTool = "connect"

// connectTool is ConnectTool's definition.
func connectTool(server string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"name":        ConnectTool,
		"title":       "Connect your " + server + " account",
		"description": fmt.Sprintf("Connect your account at %s through the gateway: call it to get a link to open in a browser (or, where the gateway exchanges your own sign-in for one of the server's, to connect at once). Once connected, the server's own tools are listed.", server),
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		"annotations": map[string]any{"readOnlyHint": true, "openWorldHint": true},
	})
	return b
}

// checkAccount returns the error a request of req's principal to a
// per-user server gets before it is sent: the link to connect an account,
// or why their token could not be exchanged.
func (s *Server) checkAccount(ctx context.Context, req *Request, sc config.Server) error {
	if s.opts.Accounts == nil || !sc.PerUser() {
		return nil
	}
	if req.Principal == auth.Anonymous || req.Principal == "" {
		// Anonymous callers share one name: an account connected under
		// it would be everyone's.
		return jsonrpc.NewError(CodeForbidden,
			fmt.Sprintf("server %q acts for each user's own account, and this gateway does not know who you are (no API key or token); connect with credentials", sc.Name),
			errorData{Server: sc.Name})
	}
	err := s.opts.Accounts.Check(ctx, sc.Name, req.Principal, req.Credential)
	var cr *oauthclient.ConnectRequired
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cr):
		return s.connectError(req, sc.Name, cr)
	case errors.Is(err, oauthclient.ErrNoCredential):
		return jsonrpc.NewError(CodeForbidden, err.Error(), errorData{Server: sc.Name})
	}
	s.logger.Warn("getting a token for a caller failed", "server", sc.Name, "principal", req.Principal, "err", err)
	return jsonrpc.NewError(CodeUpstreamUnavailable, fmt.Sprintf("server %q could not be given a token for you: %v", sc.Name, err), errorData{Server: sc.Name})
}

// connectError answers a request whose principal must connect an account
// first: URL-mode elicitation required (-32042) for a client that declared
// URL-mode elicitation (a 2026-07-28 client gets it as input_required);
// CodeConnectRequired with the URL in its message for any other.
func (s *Server) connectError(req *Request, server string, err error) error {
	var cr *oauthclient.ConnectRequired
	if !errors.As(err, &cr) {
		return err
	}
	if missingCapability(req.Client.Capabilities, "elicitation/create", json.RawMessage(`{"mode":"url"}`)) == "" {
		data, _ := json.Marshal(map[string]any{"elicitations": []map[string]string{{
			"mode": "url", "elicitationId": cr.ElicitationID, "url": cr.URL, "message": cr.Message(),
		}}})
		return s.urlElicitationRequired(req, server, &jsonrpc.Error{Code: CodeURLElicitationRequired, Message: cr.Message(), Data: data})
	}
	return jsonrpc.NewError(CodeConnectRequired, cr.Error(), struct {
		Server string `json:"server"`
		URL    string `json:"url"`
	}{server, cr.URL})
}

// AccountConnected tells the session that was asked to connect (by the
// elicitation id of its link) that the principal did: its client gets
// notifications/elicitation/complete.
func (s *Server) AccountConnected(server, elicitationID string) {
	if elicitationID == "" {
		return
	}
	params, _ := json.Marshal(map[string]string{"elicitationId": elicitationID})
	s.elicitationComplete(server, params)
}

// waitsForAccount reports whether st is a per-user server that lists only
// ConnectTool: one that is not running (its tools stay routable, as any
// down server's): for want of an account to list it with, because the
// one it had was refused, or for any other reason, where connecting is
// still what a user can do.
func (s *Server) waitsForAccount(st upstream.Status) bool {
	if s.opts.Accounts == nil || st.State == upstream.StateRunning || !st.Enabled {
		return false
	}
	sc := s.serverConfig(st.Name)
	return sc.PerUser()
}

// callConnectTool serves a call of a per-user server's ConnectTool: the
// connect URL while the principal has no account there, and once they
// have, a result saying so.
func (s *Server) callConnectTool(ctx context.Context, req *Request, server string) (*Result, error) {
	if err := s.checkAccount(ctx, req, s.serverConfig(server)); err != nil {
		if modernClient(req) {
			body, err := s.urlInputRequired(req, server, "tools/call", nil, err)
			if err != nil {
				return nil, err
			}
			return &Result{Type: ResultInputRequired, Body: body}, nil
		}
		return nil, err
	}
	text := fmt.Sprintf("Your account at %s is connected. The gateway lists the server's own tools as soon as it has read them; list the tools again.", server)
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}})
	return complete(b), nil
}
