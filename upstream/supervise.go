package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// A server's base client, from Start to Close (DESIGN decision 9):
//
//	         ┌──────────────────────────────────────────────────────────┐
//	         ▼                                                          │
//	starting ── connect, restore, lists ──► running ── connection ends ─┤
//	   │                                                                │
//	   └── fails or times out ─► (attempts left?) ── yes ─► restarting ─┘
//	                                  │                 waits InitialBackoff·2ⁿ⁻¹,
//	                                  no                at most MaxBackoff
//	                                  ▼
//	                         failed (or exited, with restarts off)
//
// A start that reaches running resets the count of attempts in a row. The
// move from starting or running to restarting (or failed) is one step
// under the manager's lock, so no reader sees the server down with no
// decision taken.
// Each distinct error is logged once at error level, its repeats at
// debug, so that a crash loop does not flood the gateway's log; the
// server's log file gets every one. The last lists stay in Status while
// the server is down, and a restarted client gets the subscriptions and
// log level of the one before it.

// restartPolicy is a server's Restart config with its defaults.
type restartPolicy struct {
	max     int // restarts in a row; negative: none
	initial time.Duration
	maxWait time.Duration
}

func policyOf(r config.Restart) restartPolicy {
	p := restartPolicy{max: r.MaxAttempts, initial: time.Duration(r.InitialBackoff), maxWait: time.Duration(r.MaxBackoff)}
	if p.max == 0 {
		p.max = config.DefaultRestartAttempts
	}
	if p.initial <= 0 {
		p.initial = config.DefaultRestartBackoff
	}
	if p.maxWait <= 0 {
		p.maxWait = config.DefaultRestartMaxBackoff
	}
	p.maxWait = max(p.maxWait, p.initial)
	return p
}

// wait is the pause before restart number attempt (1-based) of a run.
func (p restartPolicy) wait(attempt int) time.Duration {
	d := p.initial
	for i := 1; i < attempt && d < p.maxWait; i++ {
		d *= 2
	}
	return min(d, p.maxWait)
}

// supervise runs e's base client until Close or e's stop: start, wait for
// its end, restart with backoff while attempts are left. It runs in a
// goroutine of e (goEntry).
func (m *Manager) supervise(e *entry) {
	m.mu.Lock()
	seed := e.seed // the last client that connected: its subscriptions and level
	m.mu.Unlock()
	for {
		c, connected, wait, again := m.runOnce(e, seed)
		if connected {
			seed = c
			m.mu.Lock()
			e.seed = c
			m.mu.Unlock()
		}
		if !again || !sleep(e.ctx, wait) {
			return
		}
		m.mu.Lock()
		if m.goneLocked(e) {
			m.mu.Unlock()
			return
		}
		e.status.Restarts++
		e.status.NextRestart = time.Time{}
		attempt, max := e.failures, policyOf(e.cfg.Restart).max
		m.mu.Unlock()
		e.log.write(TagLifecycle, fmt.Sprintf("restarting (attempt %d of %d)", attempt, max))
	}
}

// downLocked records that e's base client is down, after it ran or not,
// with errText, and decides in the same step what comes next: a restart
// after wait (again), or none. m.mu is held.
func (m *Manager) downLocked(e *entry, ran bool, errText string) (wait time.Duration, again bool) {
	pol := policyOf(e.cfg.Restart)
	e.client = nil
	e.status.Error = errText
	if ran {
		e.failures = 0
	}
	switch {
	case pol.max < 0:
		e.status.State = StateFailed
		if ran {
			e.status.State = StateExited
		}
		return 0, false
	case e.failures >= pol.max:
		e.status.State = StateFailed
		return 0, false
	}
	e.failures++
	wait = pol.wait(e.failures)
	e.status.State = StateRestarting
	e.status.NextRestart = time.Now().Add(wait)
	return wait, true
}

// afterDown logs what downLocked decided.
func (m *Manager) afterDown(e *entry, cl *clientLog, wait time.Duration, again bool) {
	pol := policyOf(e.cfg.Restart)
	switch {
	case again:
		m.mu.Lock()
		attempt := e.failures
		m.mu.Unlock()
		cl.lifecycle("restart %d of %d scheduled in %s", attempt, pol.max, wait)
	case pol.max >= 0:
		m.logger.Error("server failed; no restarts left", "server", e.cfg.Name, "restarts", pol.max)
		cl.lifecycle("giving up after %d restarts in a row", pol.max)
	}
	m.changedEntry(e)
}

// runOnce starts a base client of e and, when it reaches running, waits
// for its end. It returns the client (nil if none was made), whether it
// connected (so that it seeds the next one), and whether to start again
// after wait.
func (m *Manager) runOnce(e *entry, seed *Client) (c *Client, connected bool, wait time.Duration, again bool) {
	name := e.cfg.Name
	m.mu.Lock()
	if m.goneLocked(e) {
		m.mu.Unlock()
		return nil, false, 0, false
	}
	e.status.State = StateStarting
	m.mu.Unlock()
	m.changedEntry(e)
	e.log.write(TagLifecycle, "starting ("+describe(e.cfg)+")")

	ctx, cancel := context.WithTimeout(e.ctx, m.opts.StartTimeout)
	defer cancel()
	c, cl, err := m.dial(ctx, e, Caller{}, "", nil)
	var lists serverLists
	managerLevel := ""
	if err == nil {
		m.mu.Lock()
		if m.goneLocked(e) {
			m.mu.Unlock()
			m.closeNow(c)
			return nil, false, 0, false
		}
		e.client = c
		m.mu.Unlock()
		if err = c.Connect(ctx); err == nil {
			connected = true
			managerLevel = m.restore(ctx, e, c, cl, seed)
			if lists, err = readLists(ctx, c, allKinds, e.cfg.PerUser()); err != nil {
				m.closeNow(c)
			}
		}
	}
	if err != nil {
		timedOut := errors.Is(err, context.DeadlineExceeded) && e.ctx.Err() == nil
		if timedOut {
			err = fmt.Errorf("did not start within %s: %w", m.opts.StartTimeout, err)
		}
		errText := cl.redact(err.Error())
		m.mu.Lock()
		if m.goneLocked(e) {
			m.mu.Unlock()
			return c, connected, 0, false
		}
		if c != nil {
			e.status.LastStderr = cl.redact(c.LastStderr())
		}
		wait, again = m.downLocked(e, false, errText)
		m.mu.Unlock()
		m.logFailure(e, "server failed to start", errText)
		if timedOut {
			cl.lifecycle("start timed out: %s", errText)
		} else {
			cl.lifecycle("start failed: %s", errText)
		}
		m.afterDown(e, cl, wait, again)
		return c, connected, wait, again
	}

	init := c.Initialized()
	m.mu.Lock()
	if m.goneLocked(e) {
		m.mu.Unlock()
		return c, connected, 0, false
	}
	e.status.ProtocolVersion = init.ProtocolVersion
	e.status.Era = c.Era()
	e.status.ServerInfo = init.ServerInfo
	e.status.Capabilities = init.Capabilities
	e.status.Instructions = init.Instructions
	for k := range allKinds {
		lists.apply(e, k)
	}
	e.status.PID = c.PID()
	m.mu.Unlock()
	// Publish the lists first and the state after, so that whoever sees
	// "running" can also route to every tool: the watchers (the core's
	// merged catalog) are told before the state changes.
	m.changedEntry(e)
	m.mu.Lock()
	if m.goneLocked(e) {
		m.mu.Unlock()
		return c, connected, 0, false
	}
	e.status.State = StateRunning
	e.status.Error = ""
	e.status.StartedAt = time.Now()
	if m.level != "" && m.level != managerLevel {
		// SetLogLevel ran while the client was connecting.
		m.setLevelLocked(e, c, m.level)
	}
	m.mu.Unlock()
	m.logger.Info("server running", "server", name, "era", c.Era(), "protocol_version", init.ProtocolVersion,
		"tools", len(lists.tools), "prompts", len(lists.prompts), "resources", len(lists.resources), "pid", c.PID())
	running := fmt.Sprintf("running: %d tools, %d prompts, %d resources", len(lists.tools), len(lists.prompts), len(lists.resources))
	if pid := c.PID(); pid != 0 {
		running += fmt.Sprintf(", pid %d", pid)
	}
	cl.lifecycle("%s", running)
	m.changedEntry(e)

	select {
	case <-c.Done():
	case <-e.ctx.Done():
		return c, connected, 0, false // Close or e's stop closes the client
	}
	errText := "connection closed"
	if cerr := c.Err(); cerr != nil {
		errText = cl.redact(cerr.Error())
	}
	m.mu.Lock()
	if m.goneLocked(e) { // stopped by the gateway
		m.mu.Unlock()
		return c, connected, 0, false
	}
	e.status.LastStderr = cl.redact(c.LastStderr())
	wait, again = m.downLocked(e, true, errText)
	m.mu.Unlock()
	m.logFailure(e, "server connection ended", errText)
	cl.lifecycle("disconnected: %s", errText)
	// The transport has ended; Close releases what is left (answers to
	// server requests in flight) and makes late calls fail with ErrClosed.
	m.closeNow(c)
	m.afterDown(e, cl, wait, again)
	return c, connected, wait, again
}

// closeNow closes c within the stop bound.
func (m *Manager) closeNow(c *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), m.stopBound())
	defer cancel()
	c.Close(ctx)
}

// describe says how a server is reached, without secrets: the transport
// and the command, or the URL without its query.
func describe(srv config.Server) string {
	switch srv.Transport {
	case config.TransportStdio:
		return "stdio: " + srv.Command
	default:
		u, err := url.Parse(srv.URL)
		if err != nil {
			return srv.Transport
		}
		return srv.Transport + ": " + safeURL(u)
	}
}

// dial makes a client of e's server for who (the principal's credentials
// from the provider; zero for the base client), not yet connected, and
// the client's view of the server's log. label names a pooled client in
// the server's log. mirror, when not nil, are the capabilities of a
// mirrored session (mirror.go), which is legacy.
func (m *Manager) dial(ctx context.Context, e *entry, who Caller, label string, mirror json.RawMessage) (*Client, *clientLog, error) {
	cr, err := m.creds.Credentials(ctx, e.cfg, who.Principal)
	if err != nil {
		return nil, newClientLog(e.log, label, Credentials{}), fmt.Errorf("getting credentials for server %q: %w", e.cfg.Name, err)
	}
	cl := newClientLog(e.log, label, cr)
	name := e.cfg.Name
	caps, protocol := m.capsFor(e.cfg, who), ""
	if mirror != nil {
		caps, protocol = mirror, config.ProtocolLegacy
	}
	hc := m.opts.HTTPClient
	if cr.Transport != nil {
		base := hc
		if base == nil {
			base = defaultHTTPClient
		}
		wrapped := *base
		wrapped.Transport = cr.Transport(base.Transport)
		hc = &wrapped
	}
	c, err := m.opts.newClient(withCredentials(e.cfg, cr), ClientOptions{
		Name:            name,
		Logger:          m.logger,
		ClientInfo:      m.opts.ClientInfo,
		Capabilities:    caps,
		MaxMessageBytes: m.opts.MaxMessageBytes,
		HTTPClient:      hc,
		StopGrace:       m.opts.StopGrace,
		OnNotification:  func(n *jsonrpc.Message) { m.onNotification(e, who, n) },
		OnRequest:       m.requestHandler(e, who),
		Protocol:        protocol,
		OnLog:           cl.sink(),
		Probe:           &e.probe,
	})
	return c, cl, err
}

// clientLog is how one client writes to its server's log: its lines
// prefixed with its label (pooled clients), and without its credentials,
// which a server may echo on stderr and so in its exit error.
type clientLog struct {
	l     *serverLog
	label string
	r     *strings.Replacer // nil without secrets
}

func newClientLog(l *serverLog, label string, cr Credentials) *clientLog {
	cl := &clientLog{l: l, label: label}
	if secrets := cr.secrets(); len(secrets) > 0 {
		// Longest first, so that a secret containing another is
		// replaced whole.
		slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
		pairs := make([]string, 0, 2*len(secrets))
		for _, s := range secrets {
			pairs = append(pairs, s, "[redacted]")
		}
		cl.r = strings.NewReplacer(pairs...)
	}
	return cl
}

// redact returns s without the client's credentials.
func (cl *clientLog) redact(s string) string {
	if cl.r == nil {
		return s
	}
	return cl.r.Replace(s)
}

// write writes a line to the server's log. A nil clientLog drops it.
func (cl *clientLog) write(tag, text string) {
	if cl == nil {
		return
	}
	cl.l.write(tag, labelled(cl.label, cl.redact(text)))
}

// lifecycle writes a lifecycle line.
func (cl *clientLog) lifecycle(format string, args ...any) {
	cl.write(TagLifecycle, fmt.Sprintf(format, args...))
}

// sink is the client's OnLog, nil without a log file.
func (cl *clientLog) sink() func(tag, text string) {
	if cl.l == nil {
		return nil
	}
	return cl.write
}

// restore replays on a new client c what the session it replaces held:
// seed's subscriptions and log level, or the manager's level (SetLogLevel)
// when seed set none, sent only to a server that declared logging. It
// returns the manager's level as it read it, so that the caller can tell
// whether SetLogLevel ran meanwhile.
func (m *Manager) restore(ctx context.Context, e *entry, c *Client, cl *clientLog, seed *Client) (managerLevel string) {
	m.mu.Lock()
	managerLevel = m.level
	m.mu.Unlock()
	level := managerLevel
	var subs []string
	if seed != nil {
		subs = seed.Subscriptions()
		if l := seed.LogLevel(); l != "" {
			level = l
		}
	}
	if !hasCapability(c, "logging") {
		level = ""
	}
	if len(subs) == 0 && level == "" {
		return managerLevel
	}
	if err := c.Restore(ctx, subs, level); err != nil {
		m.logger.Warn("restoring subscriptions and log level failed", "server", e.cfg.Name, "err", cl.redact(err.Error()))
		cl.lifecycle("restoring subscriptions and log level failed: %v", err)
		return managerLevel
	}
	cl.lifecycle("restored %d subscriptions and log level %q", len(subs), level)
	return managerLevel
}

// hasCapability reports whether c's server declared capability in
// initialize.
func hasCapability(c *Client, capability string) bool {
	init := c.Initialized()
	if init == nil {
		return false
	}
	v, ok, _ := rawjson.Get(init.Capabilities, capability)
	return ok && string(v) != "null"
}

// logFailure logs a server's error on the gateway log: at error level the
// first time its text is seen, at debug after that.
func (m *Manager) logFailure(e *entry, msg, errText string) {
	m.mu.Lock()
	seen := slices.Contains(e.errsSeen, errText)
	if !seen {
		if len(e.errsSeen) == maxErrsSeen {
			e.errsSeen = slices.Delete(e.errsSeen, 0, 1)
		}
		e.errsSeen = append(e.errsSeen, errText)
	}
	m.mu.Unlock()
	if seen {
		m.logger.Debug(msg, "server", e.cfg.Name, "err", errText, "repeated", true)
		return
	}
	m.logger.Error(msg, "server", e.cfg.Name, "err", errText)
}

// listKind is one of the lists a server may offer.
type listKind string

const (
	kindTools     listKind = "tools"
	kindPrompts   listKind = "prompts"
	kindResources listKind = "resources" // resources and resource templates
)

// onNotification handles the notifications of e's server that belong to
// no call: list changes refresh that list; the rest go to the watchers,
// naming the upstream session they came on (who: zero for the shared
// one). Those of an entry out of service are dropped.
func (m *Manager) onNotification(e *entry, who Caller, n *jsonrpc.Message) {
	var kind listKind
	switch n.Method {
	case "notifications/tools/list_changed":
		kind = kindTools
	case "notifications/prompts/list_changed":
		kind = kindPrompts
	case "notifications/resources/list_changed":
		kind = kindResources
	default:
		m.emitFor(e, Event{Server: e.cfg.Name, Who: who, Notification: n})
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.goneLocked(e) {
		return
	}
	if e.refreshing[kind] {
		e.dirty[kind] = true
		return
	}
	e.refreshing[kind] = true
	m.goEntry(e, func() { m.refresh(e, kind) })
}

// refresh reads one of a running server's lists again and publishes it,
// once more for every change notice that came in meanwhile.
func (m *Manager) refresh(e *entry, kind listKind) {
	for {
		m.mu.Lock()
		e.dirty[kind] = false
		var c *Client
		if e.status.State == StateRunning {
			c = e.client
		}
		m.mu.Unlock()
		if c == nil {
			break
		}
		ctx, cancel := context.WithTimeout(e.ctx, m.opts.StartTimeout)
		lists, err := readLists(ctx, c, map[listKind]bool{kind: true}, e.cfg.PerUser())
		cancel()
		m.mu.Lock()
		if e.client == c {
			if err != nil {
				e.listErrs[kind] = err.Error()
				m.logger.Warn("reading a list after list_changed failed", "server", e.cfg.Name, "list", string(kind), "err", err)
			} else {
				lists.apply(e, kind)
			}
			e.status.Problems = listProblems(e)
		}
		m.mu.Unlock()
		m.changedEntry(e)
		m.mu.Lock()
		again := e.dirty[kind] && e.ctx.Err() == nil
		m.mu.Unlock()
		if !again {
			break
		}
	}
	m.mu.Lock()
	e.refreshing[kind] = false
	m.mu.Unlock()
}

// allKinds are the lists read at start.
var allKinds = map[listKind]bool{kindTools: true, kindPrompts: true, kindResources: true}

// serverLists are lists read from a server; a nil list was not read.
type serverLists struct {
	read                                 map[listKind]bool
	errs                                 map[listKind]string
	tools, prompts, resources, templates []json.RawMessage
}

// readLists reads the lists of kinds that the server declared a capability
// for (a server without the tools capability has no tools). A tools list
// that cannot be read is an error; the other lists are optional features,
// so their errors only leave them empty (and are reported in
// Status.Problems).
func readLists(ctx context.Context, c *Client, kinds map[listKind]bool, perUser bool) (serverLists, error) {
	l := serverLists{read: map[listKind]bool{}, errs: map[listKind]string{}}
	init := c.Initialized()
	has := func(capability string) bool {
		if init == nil {
			return false
		}
		v, ok, _ := rawjson.Get(init.Capabilities, capability)
		return ok && string(v) != "null"
	}
	if kinds[kindTools] {
		l.read[kindTools] = true
		if has("tools") {
			tools, err := c.ListTools(ctx)
			if err != nil {
				return l, err
			}
			l.tools = tools
		}
	}
	if kinds[kindPrompts] {
		l.read[kindPrompts] = true
		if has("prompts") {
			var err error
			if l.prompts, err = c.ListPrompts(ctx); err != nil {
				l.errs[kindPrompts] = err.Error()
			}
		}
	}
	if kinds[kindResources] {
		l.read[kindResources] = true
		if has("resources") {
			var errs []error
			var err error
			// A per-user server's resources are one account's data
			// (its documents, say): they are read by URI, never listed
			// to everyone from the account the gateway lists with.
			if !perUser {
				if l.resources, err = c.ListResources(ctx); err != nil {
					errs = append(errs, err)
				}
			}
			if l.templates, err = c.ListResourceTemplates(ctx); err != nil {
				errs = append(errs, err)
			}
			if len(errs) > 0 {
				l.errs[kindResources] = errors.Join(errs...).Error()
			}
		}
	}
	return l, nil
}

// apply stores the lists of kind into e's status (m.mu held).
func (l serverLists) apply(e *entry, kind listKind) {
	if !l.read[kind] {
		return
	}
	delete(e.listErrs, kind)
	if msg := l.errs[kind]; msg != "" {
		e.listErrs[kind] = msg
	}
	switch kind {
	case kindTools:
		e.status.Tools, e.status.ToolCount = l.tools, len(l.tools)
	case kindPrompts:
		e.status.Prompts, e.status.PromptCount = l.prompts, len(l.prompts)
	case kindResources:
		e.status.Resources, e.status.ResourceCount = l.resources, len(l.resources)
		e.status.Templates, e.status.TemplateCount = l.templates, len(l.templates)
	}
	e.status.Problems = listProblems(e)
}

func listProblems(e *entry) []string {
	var out []string
	for _, k := range []listKind{kindTools, kindPrompts, kindResources} {
		if msg := e.listErrs[k]; msg != "" {
			out = append(out, fmt.Sprintf("reading %s: %s", k, msg))
		}
	}
	return out
}

// Event tells a watcher what happened at one server.
