package telemetry

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Keys of the trace context in a request's params._meta (MCP 2026-07-28,
// basic/index § _meta, OpenTelemetry trace context; the MCP semantic
// conventions ask the same of every revision).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// ExtractMeta returns ctx with the remote span context that meta, a
// request's params._meta object, carries in traceparent (and tracestate),
// or ctx unchanged when meta carries none or an invalid one.
func ExtractMeta(ctx context.Context, meta json.RawMessage) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if json.Unmarshal(meta, &tc) != nil || tc.Traceparent == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{MetaTraceparent: tc.Traceparent}
	if tc.Tracestate != "" {
		carrier[MetaTracestate] = tc.Tracestate
	}
	out := Propagator.Extract(ctx, carrier)
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx
	}
	return out
}

// InjectMeta returns the _meta members that carry ctx's span context
// (traceparent, and tracestate when there is one), or nil when ctx has
// no valid span context.
func InjectMeta(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	if carrier[MetaTraceparent] == "" {
		return nil
	}
	return carrier
}
