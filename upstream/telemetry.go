package upstream

// Telemetry of upstream calls (OpenTelemetry MCP semantic conventions,
// gen-ai/mcp.md). Each call that Manager.Call sends to a server, once the
// server's limits, pool and serialize slot let it through, gets a client
// span, child of whatever span ctx carries (the gateway's server span):
//
//	[server span "tools/call mcp__fs__read"]     (gateway)
//	      │ parent of
//	      ▼
//	[client span "tools/call read"] ── traceparent header (http, sse) ──▶ server
//	                                └─ params._meta.traceparent, where the
//	                                   revision defines it (metaTraceContext)
//
// Metrics: the mcp.client.operation.duration histogram by method, server
// and outcome, the calls in flight per server, and, observed at each
// collection, every server's state and restart count. Their labels are
// bounded: no session or request ids, arguments or URIs, and no tool
// either (a histogram is a line per bucket; the gateway's request counter
// has the tools).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/telemetry"
)

// instruments are the Manager's tracer and metric instruments.
type instruments struct {
	tracer   trace.Tracer
	tracing  bool // false: tracer is the no-op one, spans are skipped
	duration metric.Float64Histogram
	inFlight *telemetry.InFlight[string] // by server
	state    metric.Int64ObservableGauge
	restarts metric.Int64ObservableCounter
	// reg is the registration of the observable instruments' callback,
	// unregistered by Close; nil when it failed.
	reg metric.Registration
	// durations are the attribute sets of the duration histogram.
	durations *telemetry.Sets[callLabels]
}

// callLabels are the label values of one call's duration.
type callLabels struct {
	method, server, outcome string
}

func (l callLabels) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{telemetry.MethodName.String(l.method), telemetry.Server.String(l.server), telemetry.Outcome.String(l.outcome)}
}

// newInstruments makes m's instruments from the providers of its options
// (nil: the global ones) and registers the callback that observes the
// servers, which may run at once: m must be complete. An instrument the
// meter cannot make is a no-op one, logged.
func (m *Manager) newInstruments() instruments {
	tp := m.opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := m.opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(telemetry.ScopeName)
	in := instruments{tracer: tp.Tracer(telemetry.ScopeName), tracing: telemetry.Tracing(tp), durations: new(telemetry.Sets[callLabels])}
	var errs [5]error
	in.duration, errs[0] = meter.Float64Histogram("mcp.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received."),
		metric.WithExplicitBucketBoundaries(telemetry.DurationBuckets...))
	in.inFlight = new(telemetry.InFlight[string])
	errs[1] = in.inFlight.Register(meter, "mcpgw.upstream.calls.in_flight",
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls to upstream servers waiting for their answer now, by server."))
	in.state, errs[2] = meter.Int64ObservableGauge("mcpgw.upstream.state",
		metric.WithDescription("1 for each server's current state (mcpgw.state)."))
	in.restarts, errs[3] = meter.Int64ObservableCounter("mcpgw.upstream.restarts",
		metric.WithUnit("{restart}"),
		metric.WithDescription("Restarts of each upstream server since the gateway started."))
	if errs[0] != nil {
		in.duration = noopmetric.Float64Histogram{}
	}
	if errs[2] == nil && errs[3] == nil {
		state, restarts := in.state, in.restarts
		in.reg, errs[4] = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			m.observe(o, state, restarts)
			return nil
		}, state, restarts)
	}
	if err := errors.Join(errs[:]...); err != nil {
		m.logger.Warn("creating the upstream metrics failed; some are off", "err", err)
	}
	return in
}

// observe reports each server's state and restarts, from a snapshot taken
// under m.mu (the observer is called without it).
func (m *Manager) observe(o metric.Observer, state metric.Int64ObservableGauge, restarts metric.Int64ObservableCounter) {
	type server struct {
		name     string
		state    State
		restarts int
	}
	m.mu.Lock()
	snap := make([]server, 0, len(m.servers))
	for name, e := range m.servers {
		snap = append(snap, server{name: name, state: e.status.State, restarts: e.status.Restarts})
	}
	m.mu.Unlock()
	for _, s := range snap {
		name := telemetry.Server.String(s.name)
		o.ObserveInt64(state, 1, metric.WithAttributes(name, telemetry.State.String(string(s.state))))
		o.ObserveInt64(restarts, int64(s.restarts), metric.WithAttributes(name))
	}
}

// unregister stops observing the servers; Close calls it once.
func (in *instruments) unregister() {
	if in.reg != nil {
		in.reg.Unregister()
	}
	in.inFlight.Unregister()
}

// upstreamCall is the telemetry of one call under way: its span and what
// its metrics need when it ends.
type upstreamCall struct {
	m      *Manager
	span   trace.Span
	start  time.Time
	method string // the method as a metric label (known, or OtherMethod)
	server attribute.KeyValue
	// inFlight is the server's attribute set, made once for both Adds.
	inFlight *telemetry.Count
}

// startCall starts the client span of a call of method to c, a client of
// e, and counts it in flight. target is the tool or prompt it names (see
// callMembers), or "". The returned ctx carries the span, for the
// transports to propagate.
func (m *Manager) startCall(ctx context.Context, e *entry, c *Client, method, target string) (context.Context, *upstreamCall) {
	server := telemetry.Server.String(e.cfg.Name)
	uc := &upstreamCall{m: m, method: telemetry.MethodLabel(method), server: server}
	uc.span = noop.Span{}
	if m.ins.tracing {
		name := method
		if target != "" {
			name = method + " " + target
		}
		ctx, uc.span = m.ins.tracer.Start(ctx, name, spanKindClient...)
	}
	if uc.span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, telemetry.MethodName.String(method), server)
		switch {
		case method == "tools/call":
			if target != "" {
				attrs = append(attrs, telemetry.ToolName.String(target))
			}
			attrs = append(attrs, telemetry.OperationName.String(telemetry.ExecuteTool))
		case method == "prompts/get" && target != "":
			attrs = append(attrs, telemetry.PromptName.String(target))
		}
		if init := c.Initialized(); init != nil && init.ProtocolVersion != "" {
			attrs = append(attrs, telemetry.ProtocolVersion.String(init.ProtocolVersion))
		}
		if sid := c.sessionID(); sid != "" {
			attrs = append(attrs, telemetry.SessionID.String(sid))
		}
		if nt := networkTransport(e.cfg.Transport); nt != "" {
			attrs = append(attrs, telemetry.NetworkTransport.String(nt))
		}
		uc.span.SetAttributes(attrs...)
	}
	uc.inFlight = m.ins.inFlight.Get(e.cfg.Name, func() []attribute.KeyValue { return []attribute.KeyValue{server} })
	uc.inFlight.Add(1)
	uc.start = time.Now()
	return ctx, uc
}

var spanKindClient = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// end ends the call's span and records its metrics, given what the call
// returned and its ctx (to tell a cancellation from a failure).
func (uc *upstreamCall) end(ctx context.Context, res json.RawMessage, err error) {
	elapsed := time.Since(uc.start).Seconds()
	outcome, errType, code := classify(ctx, uc.method, res, err)
	labels := callLabels{method: uc.method, server: uc.server.Value.AsString(), outcome: outcome}
	if errType != "" {
		uc.span.SetAttributes(telemetry.ErrorType.String(errType))
		if code != "" {
			uc.span.SetAttributes(telemetry.StatusCode.String(code))
		}
		// A fixed description: the error's text may quote the call's
		// arguments, or what a server said about its credentials.
		uc.span.SetStatus(codes.Error, statusDescription(errType, code))
	}
	uc.span.End()
	m := uc.m
	uc.inFlight.Add(-1)
	m.ins.duration.Record(ctx, elapsed, m.ins.durations.Get(labels, labels.attrs).Record...)
}

// classify says how a call ended: its outcome, its error.type ("" on
// success), and the JSON-RPC error code as a string when the server
// answered with an error. A timeout or a lost connection is an error of
// the call, not a cancellation: only the caller going away is.
func classify(ctx context.Context, method string, res json.RawMessage, err error) (outcome, errType, code string) {
	if err == nil {
		if method == "tools/call" {
			if v, ok, _ := rawjson.Get(res, "isError"); ok && string(v) == "true" {
				return telemetry.OutcomeToolError, telemetry.ErrorToolError, ""
			}
		}
		return telemetry.OutcomeOK, "", ""
	}
	if jerr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		code := strconv.Itoa(jerr.Code)
		return telemetry.OutcomeError, code, code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return telemetry.OutcomeError, telemetry.ErrorTimeout, ""
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return telemetry.OutcomeCancelled, telemetry.ErrorCancelled, ""
	}
	return telemetry.OutcomeError, telemetry.ErrorUnavailable, ""
}

// statusDescription is the span status description of a failure.
func statusDescription(errType, code string) string {
	switch errType {
	case telemetry.ErrorToolError:
		return "the tool returned isError"
	case telemetry.ErrorTimeout:
		return "the call timed out"
	case telemetry.ErrorCancelled:
		return "the call was cancelled"
	case telemetry.ErrorUnavailable:
		return "the server could not be reached or answered wrongly"
	}
	return "the server answered JSON-RPC error " + code
}

// networkTransport is the network.transport of a server's transport.
func networkTransport(transport string) string {
	switch transport {
	case config.TransportStdio:
		return "pipe"
	case config.TransportHTTP, config.TransportSSE:
		return "tcp"
	}
	return ""
}

// metaTraceContext reports whether protocol revision version defines the
// trace context in a request's params._meta (traceparent, tracestate):
// 2026-07-28 and later (SEP-414). Revisions are dates, so they compare as
// strings; none of the legacy revisions a Client speaks does.
func metaTraceContext(version string) bool {
	return version >= "2026-07-28"
}

// withTraceMeta returns params with params._meta.traceparent (and
// tracestate) set to those of tc (telemetry.InjectMeta's), when defined
// (the negotiated revision has them, see metaTraceContext) or when
// params._meta already has a traceparent: a client put one there for the
// server, and ours, the child of the client's span, keeps the trace
// right. A tracestate of the client's without one of ours goes with its
// traceparent. Otherwise, or when tc is empty or params cannot take it,
// params is returned as it is. Every other byte of params is kept, and
// params itself is never changed: the result is a copy.
func withTraceMeta(params json.RawMessage, tc map[string]string, defined bool) json.RawMessage {
	tp := tc[telemetry.MetaTraceparent]
	if tp == "" {
		return params
	}
	empty := len(params) == 0 || string(params) == "null"
	var meta json.RawMessage
	hasMeta := false
	if !empty {
		var err error
		if meta, hasMeta, err = rawjson.Get(params, "_meta"); err != nil {
			return params
		}
	}
	if !defined {
		if !hasMeta {
			return params
		}
		if _, ok, _ := rawjson.Get(meta, telemetry.MetaTraceparent); !ok {
			return params
		}
	}
	if !hasMeta {
		meta = json.RawMessage(`{}`)
	}
	set := func(obj []byte, key, val string) ([]byte, error) {
		v, _ := json.Marshal(val)
		return rawjson.Set(obj, key, v)
	}
	out, err := set(meta, telemetry.MetaTraceparent, tp)
	if err != nil {
		return params // _meta is not an object
	}
	if ts := tc[telemetry.MetaTracestate]; ts != "" {
		out, err = set(out, telemetry.MetaTracestate, ts)
	} else {
		out, err = rawjson.Delete(out, telemetry.MetaTracestate)
	}
	if err != nil {
		return params
	}
	if empty {
		params = json.RawMessage(`{}`)
	}
	res, err := rawjson.Set(params, "_meta", out)
	if err != nil {
		return params
	}
	return res
}

// injectTraceContext writes ctx's span context into the headers of a
// request to a server (W3C traceparent and tracestate), replacing any
// that the configured or forwarded headers put there: the client's trace
// context reaches the server as the parent of ours, never raw.
func injectTraceContext(ctx context.Context, h http.Header) {
	h.Del("Traceparent")
	h.Del("Tracestate")
	telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}
