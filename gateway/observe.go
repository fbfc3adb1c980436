package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/telemetry"
)

// Telemetry of downstream requests (OpenTelemetry MCP semantic
// conventions, gen-ai/mcp.md). Each request the core answers, and each an
// edge answers itself through Observe (initialize), gets:
//
//	client ──traceparent──▶ [server span "tools/call mcp__fs__read"]
//	                              │ parent of
//	                              ▼
//	                        [client span "tools/call read"] ──traceparent──▶ server
//
// The server span continues the client's trace: params._meta.traceparent
// when the request carries one, else the HTTP traceparent header the edge
// put into ctx. The client spans are upstream's, started under the server
// span's context. Metrics: the mcp.server.operation.duration histogram by
// method and outcome, the mcpgw.requests counter by method, outcome, error
// type, server and tool or prompt, the requests in flight, and the access
// denials and rate-limit rejections the core decides. Only the counter has
// the catalog's names: a histogram is a line per bucket, and one per tool
// made /metrics megabytes long. At debug, each request also leaves one log line
// (logAnswered).

// instruments are the core's tracer and metric instruments.
type instruments struct {
	tracer    trace.Tracer
	tracing   bool // false: tracer is the no-op one, spans are skipped
	duration  metric.Float64Histogram
	requests  *telemetry.Counter[requestLabels]
	inFlight  *telemetry.InFlight[string] // by method label
	rejected  metric.Int64Counter
	denied    metric.Int64Counter
	available bool // false: the instruments could not be made; metrics are off
	// durations are the attribute sets of the duration histogram.
	durations *telemetry.Sets[durationLabels]
}

// durationLabels are the label values of one duration measurement.
type durationLabels struct {
	method, outcome string
}

func (l durationLabels) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{telemetry.MethodName.String(l.method), telemetry.Outcome.String(l.outcome)}
}

// requestLabels are what is known of a request once answered: the label
// values of its count (errType bounded by telemetry.ErrorTypeLabel), and
// of its span and log line (errType as it is).
type requestLabels struct {
	durationLabels
	server, tool, prompt, errType string
}

// attrs returns the labels as attributes, in the order the span gets
// them too.
func (l requestLabels) attrs() []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, 5)
	out = append(out, l.durationLabels.attrs()...)
	if l.server != "" {
		out = append(out, telemetry.Server.String(l.server))
	}
	switch {
	case l.tool != "":
		out = append(out, telemetry.ToolName.String(l.tool))
	case l.prompt != "":
		out = append(out, telemetry.PromptName.String(l.prompt))
	}
	if l.errType != "" {
		out = append(out, telemetry.ErrorType.String(l.errType))
	}
	return out
}

// newInstruments makes the core's instruments from the providers (nil: the
// global ones).
func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) (instruments, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(telemetry.ScopeName)
	in := instruments{
		tracer:   tp.Tracer(telemetry.ScopeName),
		tracing:  telemetry.Tracing(tp),
		rejected: telemetry.RateLimitRejections(meter),
		denied:   telemetry.AccessDenials(meter),
	}
	var err1, err2, err3 error
	in.duration, err1 = meter.Float64Histogram("mcp.server.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the MCP requests the gateway answered, from receipt to answer, by method and outcome."),
		metric.WithExplicitBucketBoundaries(telemetry.DurationBuckets...))
	in.requests = new(telemetry.Counter[requestLabels])
	err2 = in.requests.Register(meter, "mcpgw.requests",
		metric.WithUnit("{request}"),
		metric.WithDescription("MCP requests the gateway answered, by method, outcome, error type, and the server and tool or prompt they went to."))
	in.inFlight = new(telemetry.InFlight[string])
	err3 = in.inFlight.Register(meter, "mcpgw.requests.in_flight",
		metric.WithUnit("{request}"),
		metric.WithDescription("MCP requests the gateway is answering now, by method."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return in, err
	}
	in.available = true
	in.durations = new(telemetry.Sets[durationLabels])
	return in, nil
}

// Observe runs fn as the answer to req under the request's server span
// and records its metrics. Handle observes itself; an edge calls Observe
// for the requests it answers alone (initialize), with a Request that has
// at least Method, Session (which fn may set) and Client.ProtocolVersion.
// ctx may carry the remote span context of the HTTP request's
// traceparent; a traceparent in req.Params._meta takes precedence.
func (s *Server) Observe(ctx context.Context, req *Request, fn func(ctx context.Context) (*Result, error)) (*Result, error) {
	if meta, ok := req.member(req.Params, "_meta"); ok {
		if _, has, _ := rawjson.Get(meta, telemetry.MetaTraceparent); has {
			ctx = telemetry.ExtractMeta(ctx, meta)
		}
	}
	method := telemetry.MethodLabel(req.Method)
	var span trace.Span = noop.Span{}
	if s.ins.tracing {
		ctx, span = s.ins.tracer.Start(ctx, req.Method, spanKindServer...)
		defer span.End()
	}
	var inFlight *telemetry.Count
	if s.ins.available {
		inFlight = s.ins.inFlight.Get(method, func() []attribute.KeyValue {
			return []attribute.KeyValue{telemetry.MethodName.String(method)}
		})
		inFlight.Add(1)
	}
	start := time.Now()

	res, err := fn(ctx)

	elapsed := time.Since(start).Seconds()
	outcome, errType := outcomeOf(req, res, err)
	// The labels, known only now (the route), go on the metrics and the
	// span; the span gets more when it is recorded.
	labels := requestLabels{durationLabels: durationLabels{method: method, outcome: outcome},
		server: req.server, tool: req.toolName, prompt: req.promptName, errType: errType}
	if span.IsRecording() {
		s.annotate(span, req, labels.attrs(), err, errType)
	}
	if s.ins.available {
		inFlight.Add(-1)
		d := labels.durationLabels
		s.ins.duration.Record(ctx, elapsed, s.ins.durations.Get(d, d.attrs).Record...)
		counted := labels
		counted.errType = telemetry.ErrorTypeLabel(errType)
		s.ins.requests.Get(counted, counted.attrs).Add(1)
		if code, _ := errorCode(err); code == CodeForbidden {
			s.ins.denied.Add(ctx, 1, aclReason.Add...)
		}
	}
	if s.logger.Enabled(ctx, slog.LevelDebug) {
		s.logAnswered(ctx, req, labels, elapsed)
	}
	return res, err
}

// logAnswered logs a request the core answered, at debug: what the
// metrics have (the bounded method, the route, the outcome) and who asked,
// with the duration. Never the params or the result, nor an error's
// message (an upstream's may quote the arguments), nor a resource URI
// (a client fills a template's with its own data).
func (s *Server) logAnswered(ctx context.Context, req *Request, l requestLabels, seconds float64) {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("method", l.method))
	if l.server != "" {
		attrs = append(attrs, slog.String("server", l.server))
	}
	switch {
	case l.tool != "":
		attrs = append(attrs, slog.String("tool", l.tool))
	case l.prompt != "":
		attrs = append(attrs, slog.String("prompt", l.prompt))
	}
	if req.Session != "" {
		attrs = append(attrs, slog.String("session_id", req.Session))
	}
	if req.Principal != "" {
		attrs = append(attrs, slog.String("principal", req.Principal))
	}
	attrs = append(attrs, slog.Float64("duration_ms", math.Round(seconds*1e6)/1e3), slog.String("outcome", l.outcome))
	if l.errType != "" {
		attrs = append(attrs, slog.String("error_type", l.errType))
	}
	s.logger.LogAttrs(ctx, slog.LevelDebug, "request answered", attrs...)
}

var (
	spanKindServer = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	aclReason      = telemetry.NewLabels(telemetry.Reason.String("acl"))
)

// annotate names a recorded server span and gives it its attributes:
// labels, with the request's own method (labels have the bounded one),
// and what only spans carry (ids, the protocol version, the JSON-RPC error
// code).
func (s *Server) annotate(span trace.Span, req *Request, labels []attribute.KeyValue, err error, errType string) {
	name := req.Method
	switch {
	case req.toolName != "":
		name += " " + req.toolName
	case req.promptName != "":
		name += " " + req.promptName
	}
	span.SetName(name)
	attrs := append(labels, telemetry.MethodName.String(req.Method)) // wins over the label's
	if v := req.Client.ProtocolVersion; v != "" {
		attrs = append(attrs, telemetry.ProtocolVersion.String(v))
	}
	if req.ID != "" {
		attrs = append(attrs, telemetry.RequestID.String(req.ID))
	}
	if req.Session != "" {
		attrs = append(attrs, telemetry.SessionID.String(req.Session))
	}
	if req.toolName != "" {
		attrs = append(attrs, telemetry.OperationName.String(telemetry.ExecuteTool))
	}
	if errType != "" {
		span.SetStatus(codes.Error, errType)
		if code, ok := errorCode(err); ok {
			attrs = append(attrs, telemetry.StatusCode.String(strconv.Itoa(code)))
		}
	}
	span.SetAttributes(attrs...)
}

// outcomeOf classifies how a request ended, with the error.type of a
// failure ("" on success).
func outcomeOf(req *Request, res *Result, err error) (outcome, errType string) {
	if err != nil {
		if code, ok := errorCode(err); ok {
			return telemetry.OutcomeError, strconv.Itoa(code)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return telemetry.OutcomeError, telemetry.ErrorTimeout
		}
		if errors.Is(err, context.Canceled) {
			return telemetry.OutcomeCancelled, telemetry.ErrorCancelled
		}
		return telemetry.OutcomeError, telemetry.ErrorInternal
	}
	if req.Method == "tools/call" && res != nil && res.Type == ResultComplete {
		if v, ok, _ := rawjson.Get(res.Body, "isError"); ok && string(v) == "true" {
			return telemetry.OutcomeToolError, telemetry.ErrorToolError
		}
	}
	return telemetry.OutcomeOK, ""
}

// errorCode returns the JSON-RPC code of err, if it is a *jsonrpc.Error.
func errorCode(err error) (int, bool) {
	if jerr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return jerr.Code, true
	}
	return 0, false
}

// rejected counts a request a limit refused (see
// telemetry.RateLimitRejections for the reasons).
func (s *Server) rejected(ctx context.Context, reason string) {
	if s.ins.available {
		s.ins.rejected.Add(ctx, 1, metric.WithAttributes(telemetry.Reason.String(reason)))
	}
}

// routed records the server (and, for a tools/call or prompts/get, the
// exposed name) a request goes to, for its span and metrics. Only the
// goroutine answering req calls it, before Handle returns.
func (req *Request) routed(server string) { req.server = server }
