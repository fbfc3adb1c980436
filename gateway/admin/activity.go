package admin

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
)

// Sessions is what the API needs of an MCP edge to list and end its
// sessions; *legacy.Handler has it. An error says its session store
// failed: the listing is not given, the session is not ended.
type Sessions interface {
	AdminSessions(ctx context.Context) ([]gateway.SessionInfo, error)
	// EndSession reports whether there was a session with the id.
	EndSession(ctx context.Context, id string) (bool, error)
}

// Bounds of GET /admin/events.
const (
	defaultEventsLimit = 100
	maxEventsLimit     = 1000
)

// events serves GET /admin/events: the event store, oldest first, paged
// by the events' seq, filtered by server and method.
func (a *API) events(c echo.Context) error {
	limit, ok := queryCount(c, "limit", defaultEventsLimit, maxEventsLimit)
	if !ok {
		return outOfRange(c, "limit", maxEventsLimit)
	}
	var after uint64
	if s := c.QueryParam("cursor"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return c.JSON(http.StatusBadRequest, errorBody{
				Message:  "cursor must be the next_cursor of an earlier page",
				Problems: []problem{{Field: "cursor", Message: "not a cursor this API gave"}},
			})
		}
		after = v
	}
	evs, next := a.opts.Core.EventsPage(c.QueryParam("server"), c.QueryParam("method"), after, limit)
	out := map[string]any{"events": evs}
	if next != 0 {
		out["next_cursor"] = strconv.FormatUint(next, 10)
	}
	return c.JSON(http.StatusOK, out)
}

// sessions serves GET /admin/sessions.
func (a *API) sessions(c echo.Context) error {
	list := []gateway.SessionInfo{}
	if a.opts.Sessions != nil {
		var err error
		if list, err = a.opts.Sessions.AdminSessions(c.Request().Context()); err != nil {
			a.logger.Error("listing the sessions failed", "err", err)
			return fail(c, http.StatusServiceUnavailable, "listing the sessions failed: the session store did not answer; retry")
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"sessions": list})
}

// endSession serves DELETE /admin/sessions/{id}.
func (a *API) endSession(c echo.Context) error {
	id := c.Param("id")
	if a.opts.Sessions == nil {
		return fail(c, http.StatusNotFound, "unknown session "+quote(id))
	}
	found, err := a.opts.Sessions.EndSession(c.Request().Context(), id)
	switch {
	case err != nil:
		a.logger.Error("ending a session failed", "session_id", id, "err", err)
		return fail(c, http.StatusServiceUnavailable, "the session was not ended: the session store did not answer, and a session still stored would be served again after a restart; retry")
	case !found:
		return fail(c, http.StatusNotFound, "unknown session "+quote(id))
	}
	a.logger.Info("session ended through the admin API", "session_id", id)
	return c.NoContent(http.StatusNoContent)
}
