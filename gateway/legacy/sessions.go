package legacy

import (
	"errors"

	"github.com/mcpgw/mcpgw/gateway"
)

// errEndedByAdmin is why a session the admin API ended is gone.
var errEndedByAdmin = errors.New("session ended through the admin API")

// AdminSessions describes the live sessions, oldest first, in the core's
// edge-neutral shape, for the admin API.
func (h *Handler) AdminSessions() []gateway.SessionInfo {
	out := []gateway.SessionInfo{}
	for _, s := range h.Sessions() {
		out = append(out, gateway.SessionInfo{
			ID:              s.ID,
			Principal:       s.Principal,
			ProtocolVersion: s.ProtocolVersion,
			ClientName:      s.ClientName,
			ClientVersion:   s.ClientVersion,
			CreatedAt:       s.Created,
			LastActiveAt:    s.LastActive,
			InFlight:        s.InFlight,
			Stream:          s.Stream,
		})
	}
	return out
}

// EndSession ends the session with the short id (its calls cancelled, its
// streams closed; the client's next request gets 404 and starts anew). It
// reports whether there was such a session.
func (h *Handler) EndSession(id string) bool {
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		return false
	}
	h.end(s, errEndedByAdmin)
	return true
}
