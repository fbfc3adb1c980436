package legacy

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/mcpgw/mcpgw/telemetry"
)

// sessionDurationBuckets are the bounds, in seconds, of the session
// duration histogram: from a one-shot session to a working day.
var sessionDurationBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400}

// meters are the edge's metric instruments. The sessions gauge is
// observed from the session table; the rest are recorded where they
// happen.
type meters struct {
	sessionDuration metric.Float64Histogram // nil: off
	rejected        metric.Int64Counter
	denied          metric.Int64Counter
	unregister      func()
}

// newMeters makes the edge's instruments on mp (nil: the global
// provider). A failure turns the failed instruments off and is returned
// for the log.
func (h *Handler) newMeters(mp metric.MeterProvider) error {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(telemetry.ScopeName)
	h.meters.rejected = telemetry.RateLimitRejections(meter)
	h.meters.denied = telemetry.AccessDenials(meter)
	h.meters.unregister = func() {}
	d, err := meter.Float64Histogram("mcp.server.session.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the client sessions that ended, by protocol version."),
		metric.WithExplicitBucketBoundaries(sessionDurationBuckets...))
	if err != nil {
		return err
	}
	h.meters.sessionDuration = d
	sessions, err := meter.Int64ObservableGauge("mcpgw.sessions",
		metric.WithUnit("{session}"),
		metric.WithDescription("Client sessions open now, by protocol version."))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for version, n := range h.sessionCounts() {
			o.ObserveInt64(sessions, int64(n), metric.WithAttributes(telemetry.ProtocolVersion.String(version)))
		}
		return nil
	}, sessions)
	if err != nil {
		return err
	}
	h.meters.unregister = func() { reg.Unregister() }
	return nil
}

// sessionCounts returns the number of live sessions by protocol version.
func (h *Handler) sessionCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, 3)
	for _, s := range h.sessions {
		out[s.version]++
	}
	return out
}

// rejected counts a request a limit refused (telemetry.RateLimitRejections).
func (h *Handler) rejected(ctx context.Context, reason string) {
	h.meters.rejected.Add(ctx, 1, metric.WithAttributes(telemetry.Reason.String(reason)))
}

// sessionEnded records the life of a session that ended.
func (h *Handler) sessionEnded(s *session) {
	if h.meters.sessionDuration != nil {
		h.meters.sessionDuration.Record(context.Background(), time.Since(s.created).Seconds(),
			metric.WithAttributeSet(attribute.NewSet(telemetry.ProtocolVersion.String(s.version))))
	}
}

// withTraceContext returns r with the remote span context of its
// traceparent header (W3C trace context), so that the core's server spans
// continue the client's trace.
func withTraceContext(r *http.Request) *http.Request {
	if r.Header.Get("Traceparent") == "" { // canonical: no key made per request
		return r
	}
	return r.WithContext(telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
}
