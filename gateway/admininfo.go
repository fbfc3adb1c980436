package gateway

import (
	"encoding/json"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// ToolInfo is one tool of the merged catalog, for the admin API: the name
// clients see, the server it comes from and that server's own name for it.
type ToolInfo struct {
	Name     string          `json:"name"`   // exposed
	Server   string          `json:"server"` // origin
	Original string          `json:"original_name"`
	Tool     json.RawMessage `json:"tool"` // the Tool object as clients get it
}

// Tools returns the merged catalog's tools, sorted by exposed name; with
// server != "", only that server's.
func (s *Server) Tools(server string) []ToolInfo {
	cat := s.cat.Load()
	out := []ToolInfo{}
	for _, it := range cat.tools.items {
		if server != "" && it.server != server {
			continue
		}
		name, _ := rawjson.String(it.raw, "name")
		ti := ToolInfo{Name: name, Server: it.server, Original: name, Tool: it.raw}
		if ref, ok := cat.toolNames.Lookup(name); ok {
			ti.Original = ref.Name
		}
		out = append(out, ti)
	}
	return out
}

// ServerConfigs is the optional interface of Upstreams whose servers
// change while the gateway runs (the admin API adds, replaces and removes
// them): the core then reads a server's options from it rather than from
// Options.Servers. *upstream.Manager has it.
type ServerConfigs interface {
	ServerConfig(name string) (config.Server, bool)
}

// SessionInfo describes a downstream session, for the admin API. Its ID is
// the session's short id (not the Mcp-Session-Id token, which stays the
// client's).
type SessionInfo struct {
	ID              string    `json:"id"`
	Principal       string    `json:"principal"`
	ProtocolVersion string    `json:"protocol_version"`
	ClientName      string    `json:"client_name,omitempty"`
	ClientVersion   string    `json:"client_version,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	LastActiveAt    time.Time `json:"last_active_at"`
	InFlight        int       `json:"in_flight"` // requests being answered
	Stream          bool      `json:"stream"`    // a GET stream is connected
	// State is SessionLive or SessionStored.
	State string `json:"state"`
}

// The states of a SessionInfo.
const (
	// SessionLive is a session this process serves.
	SessionLive = "live"
	// SessionStored is a session only the session store holds: one from
	// before a restart that no request restored yet. Its first request
	// restores it; until then InFlight is 0, Stream false, and
	// LastActiveAt as recorded (at most a janitor round behind).
	SessionStored = "stored"
)
