package gateway

import (
	"encoding/json"
	"sync"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Logging (MCP 2025-11-25, server/utilities/logging). Each session sets its
// own level with logging/setLevel; the servers are set to the lowest level
// any live session asked for, so that nobody misses what they asked for. A
// server's log message that belongs to a call goes on that call's stream
// only; one that belongs to no call goes to the sessions whose level admits
// it. Every message also goes to the server's log file (the upstream
// manager writes it).

// levels are the syslog severities of MCP logging, lowest first.
var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(l string) int {
	for i, v := range levels {
		if v == l {
			return i
		}
	}
	return -1
}

// logLevels holds each session's level and sink.
type logLevels struct {
	mu       sync.Mutex
	sessions map[string]*logSession
	applied  string // the level last sent to the servers
}

type logSession struct {
	level  string
	notify func(method string, params json.RawMessage)
}

func (l *logLevels) init() { l.sessions = map[string]*logSession{} }

// setLevel serves logging/setLevel.
func (s *Server) setLevel(req *Request) (*Result, error) {
	level, ok := rawjson.String(req.Params, "level")
	if !ok || levelRank(level) < 0 {
		return nil, invalidParams("logging/setLevel needs params.level, one of debug, info, notice, warning, error, critical, alert, emergency")
	}
	if req.Session != "" {
		s.logs.mu.Lock()
		s.logs.sessions[req.Session] = &logSession{level: level, notify: req.SessionNotify}
		s.logs.mu.Unlock()
		s.applyLogLevel()
	}
	return complete(json.RawMessage(`{}`)), nil
}

// applyLogLevel sets the servers to the lowest level any session asked
// for, when that changed.
func (s *Server) applyLogLevel() {
	s.logs.mu.Lock()
	lowest := ""
	for _, ls := range s.logs.sessions {
		if lowest == "" || levelRank(ls.level) < levelRank(lowest) {
			lowest = ls.level
		}
	}
	changed := lowest != s.logs.applied && lowest != ""
	if changed {
		s.logs.applied = lowest
	}
	s.logs.mu.Unlock()
	if changed {
		s.opts.Upstreams.SetLogLevel(lowest)
	}
}

// admits reports whether session's level lets a message of level through.
// A session that never set a level gets what its own calls cause, as the
// server chose to send it, and nothing unrelated.
func (s *Server) admits(session, level string) (admitted, hasLevel bool) {
	s.logs.mu.Lock()
	ls := s.logs.sessions[session]
	s.logs.mu.Unlock()
	if ls == nil {
		return true, false
	}
	return levelRank(level) >= levelRank(ls.level), true
}

// withServerLogger names the server in a log message's logger, so that a
// client can tell the servers' messages apart.
func withServerLogger(server string, params json.RawMessage) json.RawMessage {
	logger, _ := rawjson.String(params, "logger")
	name := server
	if logger != "" {
		name = server + "/" + logger
	}
	out, err := setString(params, "logger", name)
	if err != nil {
		return params
	}
	return out
}

// logToCall relays a log message that belongs to req's call.
func (s *Server) logToCall(req *Request, server string, params json.RawMessage) {
	level, _ := rawjson.String(params, "level")
	if ok, _ := s.admits(req.Session, level); !ok || req.Notify == nil {
		return
	}
	req.Notify("notifications/message", withServerLogger(server, params))
}

// logToSessions relays a log message that belongs to no call to every
// session whose level admits it.
func (s *Server) logToSessions(server string, params json.RawMessage) {
	level, _ := rawjson.String(params, "level")
	params = withServerLogger(server, params)
	s.logs.mu.Lock()
	var sinks []func(string, json.RawMessage)
	for _, ls := range s.logs.sessions {
		if ls.notify != nil && levelRank(level) >= levelRank(ls.level) {
			sinks = append(sinks, ls.notify)
		}
	}
	s.logs.mu.Unlock()
	for _, sink := range sinks {
		sink("notifications/message", params)
	}
}

// endLogging forgets a session's level.
func (s *Server) endLogging(session string) {
	s.logs.mu.Lock()
	_, had := s.logs.sessions[session]
	delete(s.logs.sessions, session)
	s.logs.mu.Unlock()
	if had {
		s.applyLogLevel()
	}
}
