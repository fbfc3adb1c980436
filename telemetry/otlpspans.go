package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// tracesData turns finished spans into the OTLP message the collector
// takes: spans grouped by their resource, then by their instrumentation
// scope, each group in the order its first span came. TracesData has the
// same wire form as the collector's ExportTraceServiceRequest (field 1,
// repeated ResourceSpans), which is what lets mcpgw send it without
// linking the collector's gRPC service package.
func tracesData(spans []sdktrace.ReadOnlySpan) *tracepb.TracesData {
	type scopeKey struct {
		name, version, schemaURL string
		attrs                    attribute.Distinct
	}
	type resourceKey struct {
		attrs     attribute.Distinct
		schemaURL string
	}
	type group struct {
		rs     *tracepb.ResourceSpans
		scopes map[scopeKey]*tracepb.ScopeSpans
	}
	td := &tracepb.TracesData{}
	groups := map[resourceKey]*group{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := resourceKey{attrs: res.Equivalent(), schemaURL: res.SchemaURL()}
		g := groups[rk]
		if g == nil {
			g = &group{
				rs: &tracepb.ResourceSpans{
					Resource:  &resourcepb.Resource{Attributes: keyValues(res.Attributes())},
					SchemaUrl: res.SchemaURL(),
				},
				scopes: map[scopeKey]*tracepb.ScopeSpans{},
			}
			groups[rk] = g
			td.ResourceSpans = append(td.ResourceSpans, g.rs)
		}
		scope := s.InstrumentationScope()
		sk := scopeKey{name: scope.Name, version: scope.Version, schemaURL: scope.SchemaURL, attrs: scope.Attributes.Equivalent()}
		ss := g.scopes[sk]
		if ss == nil {
			ss = &tracepb.ScopeSpans{
				Scope: &commonpb.InstrumentationScope{
					Name:       scope.Name,
					Version:    scope.Version,
					Attributes: keyValues(scope.Attributes.ToSlice()),
				},
				SchemaUrl: scope.SchemaURL,
			}
			g.scopes[sk] = ss
			g.rs.ScopeSpans = append(g.rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, spanProto(s))
	}
	return td
}

// spanProto is one span in OTLP form.
func spanProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), s.Parent()),
		Name:                   s.Name(),
		Kind:                   spanKind(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime().UnixNano()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
		Status:                 spanStatus(s.Status()),
	}
	if parent := s.Parent(); parent.SpanID().IsValid() {
		psid := parent.SpanID()
		p.ParentSpanId = psid[:]
	}
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano:           unixNano(e.Time.UnixNano()),
			Name:                   e.Name,
			Attributes:             keyValues(e.Attributes),
			DroppedAttributesCount: uint32(max(e.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId:                ltid[:],
			SpanId:                 lsid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             keyValues(l.Attributes),
			DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	return p
}

// spanFlags is the flags field of a span or a link: its own W3C trace
// flags in the low byte, then whether its parent (for a link, the linked
// context) is remote, with the bit that says that this is known.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

// unixNano clamps a time before 1970 (a zero time.Time among them) to 0,
// OTLP's "unset".
func unixNano(ns int64) uint64 {
	return uint64(max(ns, 0))
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func spanStatus(st sdktrace.Status) *tracepb.Status {
	switch st.Code {
	case codes.Ok:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	case codes.Error:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	}
	return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_UNSET}
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

// anyValue is an attribute value in OTLP form. An EMPTY value is an
// AnyValue with nothing set, which OTLP reads as empty.
func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return arrayValue(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return arrayValue(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return arrayValue(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return arrayValue(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return arrayValue(v.AsSlice(), func(e attribute.Value) attribute.Value { return e })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

func arrayValue[E any](elems []E, value func(E) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(elems))
	for i, e := range elems {
		vals[i] = anyValue(value(e))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}
