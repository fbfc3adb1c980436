package admin

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/gateway"
)

// Sessions is what the API needs of an MCP edge to list and end its
// sessions; *legacy.Handler has it.
type Sessions interface {
	AdminSessions() []gateway.SessionInfo
	EndSession(id string) bool
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
		list = a.opts.Sessions.AdminSessions()
	}
	return c.JSON(http.StatusOK, map[string]any{"sessions": list})
}

// endSession serves DELETE /admin/sessions/{id}.
func (a *API) endSession(c echo.Context) error {
	id := c.Param("id")
	if a.opts.Sessions == nil || !a.opts.Sessions.EndSession(id) {
		return fail(c, http.StatusNotFound, "unknown session "+quote(id))
	}
	a.logger.Info("session ended through the admin API", "session_id", id)
	return c.NoContent(http.StatusNoContent)
}
