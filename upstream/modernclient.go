package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// defaultProbeTimeout bounds the server/discover of protocol auto
// (ClientOptions.ProbeTimeout).
const defaultProbeTimeout = 5 * time.Second

// ProbeMemory remembers, for one server across its clients, that its
// stdio child exited while it was asked server/discover: a legacy server
// that dies on a request before initialize. The next Connect of protocol
// auto then goes straight to initialize. The zero value remembers
// nothing; it is safe for concurrent use.
type ProbeMemory struct{ legacy atomic.Bool }

// Era returns the era the Client speaks, EraModern or EraLegacy, or ""
// before Connect settled it.
func (c *Client) Era() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.era
}

// errNotModern wraps the reasons a server is taken not to speak the
// modern era: what auto falls back to initialize on.
var errNotModern = errors.New("the server does not speak MCP 2026-07-28")

// handshake finds out the server's era as opts.Protocol says:
//
//	legacy ─► initialize
//	modern ─► server/discover; a server that does not list 2026-07-28 fails
//	auto   ─► server/discover ─┬─ lists 2026-07-28 ─► modern
//	                           ├─ any JSON-RPC error, HTTP 4xx but 401/403, a
//	                           │  result without 2026-07-28, no answer within
//	                           │  ProbeTimeout ─► initialize (legacy)
//	                           └─ 401/403, 5xx, connection lost ─► fail
//
// A stdio child that exits during the probe fails this start, and
// Probe remembers it so that the next start initializes at once.
func (c *Client) handshake(ctx context.Context) error {
	switch c.opts.Protocol {
	case config.ProtocolModern:
		return c.discover(ctx, false)
	case config.ProtocolAuto:
	default:
		return c.initialize(ctx)
	}
	if c.opts.Probe != nil && c.opts.Probe.legacy.Load() {
		c.lifecycle("skipping server/discover: the server exited when asked it before")
		return c.initialize(ctx)
	}
	err := c.discover(ctx, true)
	if !errors.Is(err, errNotModern) {
		return err
	}
	c.logger.Debug("server is not a 2026-07-28 server; initializing", "err", err)
	c.lifecycle("%v; falling back to initialize", err)
	c.t.negotiated("")
	return c.initialize(ctx)
}

// discoverResult is what a Client reads of server/discover's result.
type discoverResult struct {
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions"`
	Meta              struct {
		ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
}

// discover asks server/discover and, when the server speaks 2026-07-28,
// makes the client modern and opens its listen stream. probe bounds the
// wait by ProbeTimeout and reports a non-modern answer as errNotModern;
// otherwise such an answer is a plain error.
func (c *Client) discover(ctx context.Context, probe bool) error {
	params, err := stampMeta(nil, c.stampFor(nil))
	if err != nil {
		return err
	}
	// The probe itself carries the modern headers over HTTP.
	c.t.negotiated(ModernProtocolVersion)
	pctx := ctx
	if probe {
		timeout := c.opts.ProbeTimeout
		if timeout <= 0 {
			timeout = defaultProbeTimeout
		}
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	raw, err := c.roundTrip(pctx, "server/discover", params, "", nil)
	if offersModern(err) {
		// A server may refuse the first choice and name what it speaks
		// (MCP 2026-07-28, basic/versioning): when that list has our
		// version, ask once more before taking it for a legacy server.
		c.lifecycle("server/discover: the server refused the version but lists %s; asking again", ModernProtocolVersion)
		raw, err = c.roundTrip(pctx, "server/discover", params, "", nil)
	}
	if err != nil {
		return c.discoverFailed(ctx, pctx, err)
	}
	var res discoverResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("server/discover: %w: malformed result: %v", errNotModern, err)
	}
	if !slices.Contains(res.SupportedVersions, ModernProtocolVersion) {
		return fmt.Errorf("server/discover: %w: it lists the versions %q", errNotModern, res.SupportedVersions)
	}
	caps := res.Capabilities
	if !isObject(caps) {
		caps = json.RawMessage(`{}`)
	}
	init := &InitializeResult{ProtocolVersion: ModernProtocolVersion, Capabilities: caps, ServerInfo: res.Meta.ServerInfo, Instructions: res.Instructions}
	lctx, stop := context.WithCancel(context.Background())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		stop()
		return ErrClosed
	}
	c.init = init
	c.initGen++
	c.era = EraModern
	c.stopListen = stop
	c.listenDone = make(chan struct{})
	done := c.listenDone
	c.mu.Unlock()
	c.lifecycle("discovered (protocol %s, no session)", ModernProtocolVersion)
	go func() {
		defer close(done)
		c.runListen(lctx)
	}()
	return nil
}

// offersModern reports whether err is an unsupported-version error whose
// data lists ModernProtocolVersion among the versions the server speaks.
func offersModern(err error) bool {
	jerr, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok || jerr.Code != codeUnsupportedVersion || len(jerr.Data) == 0 {
		return false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	return json.Unmarshal(jerr.Data, &data) == nil && slices.Contains(data.Supported, ModernProtocolVersion)
}

// discoverFailed classifies a server/discover that got no result. ctx is
// the connect's, pctx the probe's.
func (c *Client) discoverFailed(ctx, pctx context.Context, err error) error {
	var jerr *jsonrpc.Error
	var se *statusError
	switch {
	case errors.As(err, &jerr):
		return fmt.Errorf("server/discover: %w: it answered error %d (%s)", errNotModern, jerr.Code, jerr.Message)
	case errors.As(err, &se) && se.Code >= 400 && se.Code < 500 && se.Code != http.StatusUnauthorized && se.Code != http.StatusForbidden:
		return fmt.Errorf("server/discover: %w: it answered HTTP %d", errNotModern, se.Code)
	case ctx.Err() == nil && pctx.Err() != nil:
		return fmt.Errorf("server/discover: %w: no answer within %s", errNotModern, c.probeTimeout())
	}
	select {
	case <-c.t.done():
		if c.opts.Probe != nil && c.opts.Protocol == config.ProtocolAuto {
			c.opts.Probe.legacy.Store(true)
			c.lifecycle("the server exited when asked server/discover; its next start initializes at once")
			return fmt.Errorf("server/discover: the server exited when asked (its next start goes straight to initialize): %w", err)
		}
	default:
	}
	return fmt.Errorf("server/discover: %w", err)
}

func (c *Client) probeTimeout() time.Duration {
	if c.opts.ProbeTimeout > 0 {
		return c.opts.ProbeTimeout
	}
	return defaultProbeTimeout
}

// stampFor returns the _meta members of a modern request of a call with
// hooks: the capabilities the gateway serves for its client, our client
// info, and its log level or else the one last set through the client.
func (c *Client) stampFor(hooks *CallHooks) stamp {
	s := stamp{caps: json.RawMessage(`{}`), info: c.opts.ClientInfo}
	if s.info == nil {
		s.info = defaultClientInfo
	}
	if hooks != nil {
		served := c.opts.ModernCapabilities
		if hooks.TakesInput {
			served = append(slices.Clip(served), inputCapabilities...)
		}
		s.caps = capsFor(hooks.Capabilities, served)
		if hooks.TakesTasks {
			if caps, err := rawjson.Set(s.caps, "extensions", json.RawMessage(`{"`+ExtTasks+`":{}}`)); err == nil {
				s.caps = caps
			}
		}
		s.logLevel = hooks.LogLevel
	}
	if s.logLevel == "" {
		s.logLevel = c.LogLevel()
	}
	return s
}

// modernCall is Call to a modern server. What the era has no request for
// is answered here: ping ({}), logging/setLevel (remembered, and told to
// the server on each request as logLevel), resources/subscribe and
// unsubscribe (they change the listen stream's filter). The rest is sent
// with _meta stamped, and its result made era-neutral.
func (c *Client) modernCall(ctx context.Context, method string, params json.RawMessage, progress string, hooks *CallHooks) (json.RawMessage, error) {
	switch method {
	case "ping":
		return json.RawMessage(`{}`), nil
	case "logging/setLevel":
		level, ok := rawjson.String(params, "level")
		if !ok {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "logging/setLevel needs params.level, a string")
		}
		c.mu.Lock()
		c.level = level
		c.mu.Unlock()
		return json.RawMessage(`{}`), nil
	case "resources/subscribe", "resources/unsubscribe":
		uri, ok := rawjson.String(params, "uri")
		if !ok {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s needs params.uri, a string", method)
		}
		c.mu.Lock()
		changed := c.subs[uri] != (method == "resources/subscribe")
		if method == "resources/subscribe" {
			c.subs[uri] = true
		} else {
			delete(c.subs, uri)
		}
		c.mu.Unlock()
		if changed {
			select {
			case c.subsChanged <- struct{}{}:
			default:
			}
		}
		return json.RawMessage(`{}`), nil
	}
	stamped, err := stampMeta(params, c.stampFor(hooks))
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", method, err)
	}
	var extra http.Header
	if method == "tools/call" {
		if name, ok := rawjson.String(params, "name"); ok {
			c.mu.Lock()
			bindings := c.toolHeaders[name]
			c.mu.Unlock()
			extra = paramHeaders(bindings, params)
		}
	}
	raw, err := c.roundTripID(ctx, jsonrpc.IntID(c.nextID.Add(1)), method, stamped, progress, hooks, extra)
	if err != nil {
		var jerr *jsonrpc.Error
		if errors.As(err, &jerr) && jerr.Code == codeUnsupportedVersion {
			// We sent the version the server listed in server/discover:
			// the hop is broken, not the caller's request.
			c.logger.Warn("server refused the protocol version it listed in server/discover", "method", method, "protocol_version", ModernProtocolVersion)
			c.lifecycle("the server refused protocol version %s on %s", ModernProtocolVersion, method)
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "server %q refused protocol version %s, which it had listed as supported", c.opts.Name, ModernProtocolVersion)
		}
		return nil, err
	}
	out, err := normalizeResult(c.opts.Name, raw, hooks != nil && hooks.TakesInput, hooks != nil && hooks.TakesTasks)
	if err != nil {
		return nil, err
	}
	if method == "tools/list" {
		c.learnHeaders(params, out)
	}
	return out, nil
}

// learnHeaders records the x-mcp-header bindings of the tools of a
// tools/list page: the first page (no cursor) replaces what was known,
// later pages add to it. A tool whose annotations are invalid gets none,
// and that is logged.
func (c *Client) learnHeaders(params, result json.RawMessage) {
	tools, ok, _ := rawjson.Get(result, "tools")
	if !ok {
		return
	}
	var list []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(tools, &list) != nil {
		return
	}
	found := map[string][]paramBinding{}
	for _, t := range list {
		b, err := paramBindings(t.InputSchema)
		if err != nil {
			c.logger.Warn("tool has invalid x-mcp-header annotations; its calls carry no Mcp-Param headers", "tool", t.Name, "err", err)
			continue
		}
		if len(b) > 0 {
			found[t.Name] = b
		}
	}
	first := true
	if params != nil {
		if cur, ok := rawjson.String(params, "cursor"); ok && cur != "" {
			first = false
		}
	}
	c.mu.Lock()
	if first || c.toolHeaders == nil {
		c.toolHeaders = found
	} else {
		for k, v := range found {
			c.toolHeaders[k] = v
		}
	}
	c.mu.Unlock()
}
