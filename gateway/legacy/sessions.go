package legacy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
)

// errEndedByAdmin is why a session the admin API ended is gone.
var errEndedByAdmin = errors.New("session ended through the admin API")

// maxListedStored bounds the stored sessions AdminSessions lists besides
// the live ones: a listing is one query, whatever the store holds.
const maxListedStored = 1000

// AdminSessions describes the sessions, oldest first, in the core's
// edge-neutral shape, for the admin API: the live ones (State "live"),
// then, with a Store, the sessions it holds that this process does not,
// at most maxListedStored of them: ones from before a restart that no
// request restored yet (State "stored"; their first request restores
// them). A store that fails fails the listing.
func (h *Handler) AdminSessions(ctx context.Context) ([]gateway.SessionInfo, error) {
	var recs []SessionRecord
	if h.opts.Store != nil {
		// Before the live ones are taken: a session restored meanwhile is
		// then live in both, and listed once, as live.
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		var err error
		recs, err = h.opts.Store.ListSessions(sctx, time.Now().Add(-h.idleAfter()), h.liveCount()+maxListedStored)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing the stored sessions: %w", err)
		}
	}
	live := h.Sessions()
	out := make([]gateway.SessionInfo, 0, len(live))
	held := make(map[string]bool, len(live))
	for _, s := range live {
		held[s.ID] = true
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
			State:           gateway.SessionLive,
		})
	}
	stored := 0
	for _, rec := range recs {
		if held[rec.ID] || h.ended.Contains(rec.ID) || stored == maxListedStored {
			continue
		}
		stored++
		name, version := clientOf(rec.ClientInfo)
		out = append(out, gateway.SessionInfo{
			ID:              rec.ID,
			Principal:       rec.Principal,
			ProtocolVersion: rec.Version,
			ClientName:      name,
			ClientVersion:   version,
			CreatedAt:       rec.Created,
			LastActiveAt:    rec.LastActive,
			State:           gateway.SessionStored,
		})
	}
	slices.SortStableFunc(out, func(a, b gateway.SessionInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// liveCount returns how many sessions the table holds.
func (h *Handler) liveCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// EndSession ends the session with the short id for good (its calls
// cancelled, its streams closed; the client's next request gets 404 and
// starts anew), whether this process holds it or only its Store does (a
// session from before a restart that no request restored yet). The
// record goes first: when it cannot be deleted the session goes on and
// the error says so. It reports whether there was such a session.
func (h *Handler) EndSession(ctx context.Context, id string) (bool, error) {
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		return h.endStored(ctx, id, "", errEndedByAdmin)
	}
	return true, h.endForGood(s, errEndedByAdmin)
}
