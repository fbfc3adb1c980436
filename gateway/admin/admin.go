// Package admin serves mcpgw's management API under /admin: JSON only,
// guarded by admin bearer tokens that are separate from client credentials.
//
// This first slice is read-only: the status of every upstream server. The
// admin issue adds registration, enable/disable, logs, events, sessions and
// the OpenAPI document on the same group and the same guard.
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
)

// Options configures the admin API.
type Options struct {
	// Core is the gateway core whose servers the API reports. Required.
	Core *gateway.Server
	// Tokens are the accepted bearer tokens' SHA-256 hashes, each written
	// "sha256:<hex>" (config.Admin.Tokens). With none, every request is
	// refused with 403: the API is off.
	Tokens []string
	// Logger receives the API's logs. Nil discards them.
	Logger *slog.Logger
}

// API is the admin HTTP API.
type API struct {
	core   *gateway.Server
	hashes [][]byte
	logger *slog.Logger
}

// New returns the admin API for opts.
func New(opts Options) (*API, error) {
	if opts.Core == nil {
		return nil, errors.New("admin: Options.Core is required")
	}
	a := &API{core: opts.Core, logger: opts.Logger}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	for _, t := range opts.Tokens {
		h, err := hex.DecodeString(strings.TrimPrefix(t, "sha256:"))
		if err != nil || len(h) != sha256.Size || !strings.HasPrefix(t, "sha256:") {
			return nil, errors.New(`admin: a token hash must be "sha256:" and 64 hex digits`)
		}
		a.hashes = append(a.hashes, h)
	}
	return a, nil
}

// Register mounts the API's routes on e under /admin.
func (a *API) Register(e *echo.Echo) {
	g := e.Group("/admin", a.guard)
	g.GET("/servers", a.listServers)
	g.GET("/servers/:name", a.getServer)
}

// errorBody is every admin error's JSON shape.
type errorBody struct {
	Error string `json:"error"`
}

// guard lets through requests that carry one of the configured tokens.
func (a *API) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(a.hashes) == 0 {
			return c.JSON(http.StatusForbidden, errorBody{"the admin API is off: set admin.tokens in the config to enable it"})
		}
		token, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="mcpgw admin"`)
			return c.JSON(http.StatusUnauthorized, errorBody{"missing admin bearer token"})
		}
		sum := sha256.Sum256([]byte(token))
		match := 0
		for _, h := range a.hashes {
			match |= subtle.ConstantTimeCompare(sum[:], h)
		}
		if match != 1 {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="mcpgw admin", error="invalid_token"`)
			return c.JSON(http.StatusUnauthorized, errorBody{"invalid admin bearer token"})
		}
		return next(c)
	}
}

func (a *API) listServers(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"servers": a.core.Servers()})
}

func (a *API) getServer(c echo.Context) error {
	name := c.Param("name")
	for _, st := range a.core.Servers() {
		if st.Name == name {
			return c.JSON(http.StatusOK, st)
		}
	}
	return c.JSON(http.StatusNotFound, errorBody{"unknown server " + quote(name)})
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
