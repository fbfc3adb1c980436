// Package telemetry sets up OpenTelemetry for mcpgw and holds what the
// instrumented packages share: the attribute keys of the OpenTelemetry MCP
// semantic conventions (plus mcpgw's own), the duration buckets and the
// trace-context propagator.
//
// It exists so that the core, the edges and the upstream clients name
// their spans and metrics the same way without depending on each other,
// and so that only cmd/mcpgw decides where telemetry goes (STYLE.md: the
// packages take providers through their options, nil meaning the global
// ones).
//
// Setup reads the standard OTEL_* environment: traces go to an OTLP/HTTP
// exporter (mcpgw's own, in otlp.go: the SDK's links the gRPC stack) when
// OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_ variant) is set, and
// nowhere otherwise (spans are then not recorded, but a client's
// traceparent still reaches the upstreams unchanged); metrics are always
// collected and served in the Prometheus text format by
// Telemetry.MetricsHandler, for GET /metrics.
package telemetry
