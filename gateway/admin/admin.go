// Package admin serves mcpgw's management API under /admin: JSON only,
// guarded by admin bearer tokens that are separate from client credentials.
//
// Operators register, replace, enable, disable, restart and delete upstream
// servers while the gateway runs, and read their status, tools and logs.
// A server registered here is kept in the store and comes back after a
// restart; a server of the config file is the file's, so the API may only
// switch it on or off (kept too) and restart it.
//
// An admin token must not become a way to read the gateway's secrets or to
// run a program: a registered server may expand only environment variables
// with the configured prefix, and may be a stdio server only for a command
// on the configured list, with arguments its entry allows, a working
// directory of the configured list and variables of the configured list
// that are not loader or interpreter hooks
// (config.Admin.CheckRegistration).
//
// Every route is in the OpenAPI document of package openapi, served at
// /admin/openapi.json; the tests check each request and response against it.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/openapi"
	"github.com/mcpgw/mcpgw/store"
)

// ServerManager is what the API needs of the upstream manager to change
// the servers live; *upstream.Manager has it. Its methods are safe for
// concurrent use.
type ServerManager interface {
	Add(srv config.Server) error
	Replace(srv config.Server) error
	Remove(name string) error
	SetEnabled(name string, enabled bool) error
	Restart(name string) error
	ServerConfig(name string) (config.Server, bool)
	LogPath(name string) string
}

// ServerStore keeps the servers registered through the API, and the
// enabled switch of the config file's servers; *store.SQLite has it.
type ServerStore interface {
	PutServer(ctx context.Context, srv store.Server) (created bool, err error)
	GetServer(ctx context.Context, name string) (store.Server, error)
	ListServers(ctx context.Context) ([]store.Server, error)
	DeleteServer(ctx context.Context, name string) error
}

// Accounts are what the API needs of the OAuth client
// (*oauthclient.Client). Neither method returns a token.
type Accounts interface {
	Count(ctx context.Context, server string) (int, error)
	// Disconnect revokes and forgets principal's token at server, or
	// returns an error that wraps a not-connected sentinel the API
	// recognizes through NotConnected.
	Disconnect(ctx context.Context, server, principal string) error
	NotConnected(err error) bool
	// Forget drops every token and registration kept for a server (it
	// was deleted).
	Forget(ctx context.Context, server string) error
}

// Options configures the admin API.
type Options struct {
	// Core is the gateway core whose servers and catalog the API reports.
	// Required.
	Core *gateway.Server
	// Servers changes the servers. Required.
	Servers ServerManager
	// Replicas, if not nil, returns the live replicas of the cluster, each
	// with its view of its servers: a server's status then says its state
	// on each ("replicas").
	Replicas func() []store.Replica
	// Store keeps registrations. Required.
	Store ServerStore
	// ConfigServers are the names of the config file's servers (see
	// SetConfigServers for a reload).
	ConfigServers []string
	// Tokens are the accepted bearer tokens' SHA-256 hashes, each written
	// "sha256:<hex>" (config.Admin.Tokens). With none, every request is
	// refused with 403: the API is off.
	Tokens []string
	// Naming is the gateway's naming, which registered entries are
	// validated against, as entries of the file are.
	Naming config.Naming
	// EnvPrefix is the prefix of the environment variables a registered
	// server may expand. If empty, config.DefaultAdminEnvPrefix.
	EnvPrefix string
	// StdioCommands are the commands a registered stdio server may run,
	// with the arguments each may pass. Empty: none.
	StdioCommands []config.StdioCommand
	// StdioEnv are the variables a registered stdio server may set. Empty:
	// none.
	StdioEnv []string
	// StdioCwd are the working directories a registered stdio server may
	// give as its cwd (config.Admin.StdioCwd). Empty: none, it starts in
	// the gateway's.
	StdioCwd []string
	// LookupEnv reads the gateway's environment for ${VAR} in registered
	// entries (only names with EnvPrefix are asked). If nil, every
	// variable is unset.
	LookupEnv func(string) (string, bool)
	// Sessions lists and ends the MCP edge's sessions. If nil, there are
	// none to show.
	Sessions Sessions
	// Accounts are the accounts principals connected at servers with
	// oauth: a server's view shows how many (oauth_connected), and
	// DELETE /admin/servers/{name}/oauth/{principal} disconnects one. If
	// nil, neither.
	Accounts Accounts
	// Logger receives the API's logs. Nil discards them.
	Logger *slog.Logger
}

// API is the admin HTTP API.
type API struct {
	opts   Options
	hashes [][]byte
	logger *slog.Logger
	// limits are what a registered stdio server may run and be given.
	limits config.Admin

	// mu serializes the changes of servers, so that the manager and the
	// store never disagree.
	mu       sync.Mutex
	reloader Reloader
	// fromCfg holds the names of the config file's servers. It is read
	// without mu, by handlers that hold mu.
	fromCfg atomic.Pointer[map[string]bool]
}

// New returns the admin API for opts.
func New(opts Options) (*API, error) {
	if opts.Core == nil || opts.Servers == nil || opts.Store == nil {
		return nil, errors.New("admin: Options.Core, Servers and Store are required")
	}
	if opts.EnvPrefix == "" {
		opts.EnvPrefix = config.DefaultAdminEnvPrefix
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	a := &API{opts: opts, logger: opts.Logger}
	a.limits = config.Admin{StdioCommands: opts.StdioCommands, StdioEnv: opts.StdioEnv, StdioCwd: opts.StdioCwd}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	for _, t := range opts.Tokens {
		h, ok := config.ParseTokenHash(t)
		if !ok {
			return nil, errors.New(`admin: a token hash must be "sha256:" and 64 hex digits`)
		}
		a.hashes = append(a.hashes, h[:])
	}
	a.SetConfigServers(opts.ConfigServers)
	return a, nil
}

// SetConfigServers replaces the names of the config file's servers (after
// a reload).
func (a *API) SetConfigServers(names []string) {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	a.fromCfg.Store(&m)
}

// Serialize runs f while no change of servers through this API is under
// way, as another replica's changes are applied here.
func (a *API) Serialize(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
}

// isConfig reports whether name is a server of the config file.
func (a *API) isConfig(name string) bool {
	return (*a.fromCfg.Load())[name]
}

// Register mounts the API's routes on e under /admin.
func (a *API) Register(e *echo.Echo) {
	g := e.Group("/admin", a.guard)
	g.GET("/servers", a.listServers)
	g.POST("/servers", a.postServer)
	g.GET("/servers/:name", a.getServer)
	g.PUT("/servers/:name", a.putServer)
	g.PATCH("/servers/:name", a.patchServer)
	g.DELETE("/servers/:name", a.deleteServer)
	g.POST("/servers/:name/restart", a.restartServer)
	g.DELETE("/servers/:name/oauth/:principal", a.disconnect)
	g.GET("/servers/:name/tools", a.serverTools)
	g.GET("/servers/:name/logs", a.serverLogs)
	g.GET("/tools", a.tools)
	g.GET("/events", a.events)
	g.GET("/sessions", a.sessions)
	g.DELETE("/sessions/:id", a.endSession)
	g.POST("/reload", a.reload)
	g.GET("/debug/pprof/profile", a.cpuProfile)
	g.GET("/openapi.json", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.Admin())
	})
}

// errorBody is every admin error's JSON shape: a message that names the
// field or the reason, and for an invalid server entry every problem.
type errorBody struct {
	Message  string    `json:"message"`
	Problems []problem `json:"problems,omitempty"`
}

// problem is one thing wrong with a field of a request body.
type problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func fail(c echo.Context, status int, msg string) error {
	return c.JSON(status, errorBody{Message: msg})
}

// WriteRefusal writes a refusal of a request made before the API reads it
// (a foreign Host or Origin, a body framed by Transfer-Encoding): status
// and the API's error shape, {"message": msg}. Its signature is
// auth.HostCheck's OnRefuse.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	body, _ := json.Marshal(errorBody{Message: msg})
	w.Header().Set("Content-Type", echo.MIMEApplicationJSON)
	w.WriteHeader(status)
	w.Write(body)
}

// guard lets through requests that carry one of the configured tokens.
func (a *API) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(a.hashes) == 0 {
			return fail(c, http.StatusForbidden, "the admin API is off: set admin.tokens in the config to enable it")
		}
		// The scheme is case-insensitive (RFC 9110, section 11.1).
		scheme, token, _ := strings.Cut(c.Request().Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="mcpgw admin"`)
			return fail(c, http.StatusUnauthorized, "missing admin bearer token (Authorization: Bearer <token>)")
		}
		sum := sha256.Sum256([]byte(token))
		match := 0
		for _, h := range a.hashes {
			match |= subtle.ConstantTimeCompare(sum[:], h)
		}
		if match != 1 {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="mcpgw admin", error="invalid_token"`)
			return fail(c, http.StatusUnauthorized, "invalid admin bearer token")
		}
		return next(c)
	}
}

// queryCount reads the query parameter name as a whole number from 1 to
// max, def when it is absent; ok is false when it is anything else, and
// outOfRange then makes the answer.
func queryCount(c echo.Context, name string, def, max int) (n int, ok bool) {
	s := c.QueryParam(name)
	if s == "" {
		return def, true
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > max {
		return 0, false
	}
	return v, true
}

// outOfRange answers 400 for a query parameter that queryCount refused.
func outOfRange(c echo.Context, name string, max int) error {
	return c.JSON(http.StatusBadRequest, errorBody{
		Message:  fmt.Sprintf("%s must be a whole number from 1 to %d", name, max),
		Problems: []problem{{Field: name, Message: fmt.Sprintf("must be from 1 to %d", max)}},
	})
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// source returns where a server comes from: "config" or "api".
func (a *API) source(name string) string {
	if a.isConfig(name) {
		return store.ServerSourceConfig
	}
	return store.ServerSourceAPI
}
