package modern

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/front"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// listenQueue bounds the notifications waiting for one listen stream's
// writer; a client that falls this far behind loses the stream, and
// reconnects (a dropped listen means "reconnect", and a client then lists
// again).
const listenQueue = 64

// maxListenResources bounds the resources one listen follows: each is a
// subscription upstream.
const maxListenResources = 64

// filter is what a subscriptions/listen asks for (MCP 2026-07-28,
// basic/patterns/subscriptions).
type filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen is one open subscriptions/listen stream.
type listen struct {
	id        jsonrpc.ID
	principal string
	groups    []string
	filter    filter // what was honoured
	// views are the fingerprints of the lists as the listener last saw
	// them, by list, kept only when access rules shape what each caller
	// sees (gateway.Server.ViewOf).
	views map[string]uint64
	queue chan []byte
	// lost is closed when a notification did not fit in the queue.
	lost     chan struct{}
	lostOnce bool
}

// send queues a notification for the stream, tagged with its
// subscription id. It never blocks; the caller holds h.mu.
func (l *listen) sendLocked(method string, params map[string]any) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]json.RawMessage{front.MetaSubscriptionID: l.id.Raw()}
	select {
	case l.queue <- notification(method, mustJSON(params)):
	default:
		if !l.lostOnce {
			l.lostOnce = true
			close(l.lost)
		}
	}
}

// listen serves subscriptions/listen: an acknowledgement with what is
// honoured, then the list changes and resource updates the client asked
// for, until it closes the stream or the gateway shuts down (then the
// listen's result ends it).
func (h *Handler) listen(w http.ResponseWriter, r *http.Request, req *request) {
	var p struct {
		Notifications *filter `json:"notifications"`
	}
	if err := json.Unmarshal(req.params, &p); err != nil || p.Notifications == nil {
		writeError(w, http.StatusOK, req.id, jsonrpc.NewError(jsonrpc.CodeInvalidParams,
			"subscriptions/listen needs params.notifications: an object with toolsListChanged, promptsListChanged, resourcesListChanged (booleans) and resourceSubscriptions (an array of URIs)", nil))
		return
	}
	want := *p.Notifications
	if len(want.ResourceSubscriptions) > maxListenResources {
		writeError(w, http.StatusOK, req.id, jsonrpc.NewError(jsonrpc.CodeInvalidParams,
			fmt.Sprintf("resourceSubscriptions names %d resources; one listen may follow at most %d: open another for the rest", len(want.ResourceSubscriptions), maxListenResources), nil))
		return
	}
	l := &listen{
		id:        req.id,
		principal: req.principal,
		groups:    req.groups,
		filter: filter{
			ToolsListChanged:     want.ToolsListChanged,
			PromptsListChanged:   want.PromptsListChanged,
			ResourcesListChanged: want.ResourcesListChanged,
		},
		queue: make(chan []byte, listenQueue),
		lost:  make(chan struct{}),
	}
	if h.core.ListsVaryByPrincipal() {
		l.views = make(map[string]uint64)
		for _, list := range []string{"tools", "prompts", "resources"} {
			l.views[list] = h.core.ViewOf(l.principal, l.groups, list)
		}
	}
	h.mu.Lock()
	switch {
	case len(h.listens) >= h.opts.MaxListens:
		h.mu.Unlock()
		writeError(w, http.StatusOK, req.id, jsonrpc.NewError(gateway.CodeRateLimited,
			fmt.Sprintf("the gateway has %d listen streams open, its limit; retry later", h.opts.MaxListens), nil))
		return
	case h.listening[req.principal] >= h.opts.MaxListensPerPrincipal:
		h.mu.Unlock()
		writeError(w, http.StatusOK, req.id, jsonrpc.NewError(gateway.CodeRateLimited,
			fmt.Sprintf("you have %d listen streams open, the limit for one caller; close one first", h.opts.MaxListensPerPrincipal),
			map[string]int{"limit": h.opts.MaxListensPerPrincipal}))
		return
	}
	h.listens[l] = struct{}{}
	h.listening[req.principal]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.listens, l)
		if h.listening[req.principal]--; h.listening[req.principal] <= 0 {
			delete(h.listening, req.principal)
		}
		h.mu.Unlock()
	}()

	// Resource subscriptions go through the core as a session of their
	// own, which ends with the stream.
	if len(want.ResourceSubscriptions) > 0 {
		key := listenKey()
		defer h.core.EndSession(key)
		for _, uri := range want.ResourceSubscriptions {
			if h.subscribe(r.Context(), req, key, l, uri) {
				l.filter.ResourceSubscriptions = append(l.filter.ResourceSubscriptions, uri)
			}
		}
	}

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	ack := map[string]any{
		"notifications": l.filter,
		"_meta":         map[string]json.RawMessage{front.MetaSubscriptionID: l.id.Raw()},
	}
	if !write(sseEvent(notification("notifications/subscriptions/acknowledged", mustJSON(ack)))) {
		return
	}
	keepAlive := time.NewTicker(h.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case msg := <-l.queue:
			if !write(sseEvent(msg)) {
				return
			}
		case <-keepAlive.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-l.lost:
			h.logger.Debug("ended a listen stream whose client fell behind", "principal", req.principal)
			return
		case <-r.Context().Done():
			return
		case <-h.closed:
			// A graceful end: what is queued, then the listen's result.
			for len(l.queue) > 0 {
				if !write(sseEvent(<-l.queue)) {
					return
				}
			}
			res := map[string]any{
				"resultType": gateway.ResultComplete,
				"_meta":      map[string]json.RawMessage{front.MetaSubscriptionID: l.id.Raw()},
			}
			write(sseEvent(resultResponse(req.id, mustJSON(res))))
			return
		}
	}
}

// subscribe subscribes the listen to one resource through the core and
// reports whether that was honoured. A URI the caller may not read or
// that no server has is left out of the acknowledgement.
func (h *Handler) subscribe(ctx context.Context, req *request, key string, l *listen, uri string) bool {
	greq := &gateway.Request{
		Method:    "resources/subscribe",
		Params:    mustJSON(map[string]string{"uri": uri}),
		Principal: req.principal,
		Groups:    req.groups,
		Session:   key,
		Client:    gateway.Client{ProtocolVersion: req.version, Capabilities: req.caps, Info: req.info},
		SessionNotify: func(method string, params json.RawMessage) {
			var p map[string]any
			if json.Unmarshal(params, &p) != nil {
				return
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.listens[l]; ok {
				l.sendLocked(method, p)
			}
		},
	}
	if _, err := h.core.Handle(ctx, greq); err != nil {
		h.logger.Debug("a listen's resource subscription was not honoured", "principal", req.principal, "err", err)
		return false
	}
	return true
}

// listChanged tells the listen streams that asked for it that a merged
// list changed: all of them, or, when access rules shape what each caller
// sees, those whose view of the list changed.
func (h *Handler) listChanged(ch gateway.Change) {
	method := "notifications/" + ch.List + "/list_changed"
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listens {
		var wanted bool
		switch ch.List {
		case "tools":
			wanted = l.filter.ToolsListChanged
		case "prompts":
			wanted = l.filter.PromptsListChanged
		case "resources":
			wanted = l.filter.ResourcesListChanged
		}
		if !wanted {
			continue
		}
		if l.views != nil {
			// Only a change of what this caller sees is news to it.
			v := h.core.ViewOf(l.principal, l.groups, ch.List)
			if v == l.views[ch.List] {
				continue
			}
			l.views[ch.List] = v
		}
		l.sendLocked(method, nil)
	}
}

// foundTools tells principal's listen streams that asked for tools
// list_changed that their tools/list changed: in search mode, one of
// their clients found tools.
func (h *Handler) foundTools(principal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listens {
		if l.principal == principal && l.filter.ToolsListChanged {
			l.sendLocked("notifications/tools/list_changed", nil)
		}
	}
}

// listenKey returns a fresh name for a listen's session in the core.
func listenKey() string {
	var b [12]byte
	rand.Read(b[:])
	return "listen-" + hex.EncodeToString(b[:])
}
