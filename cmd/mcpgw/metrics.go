package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"

	"github.com/mcpgw/mcpgw/mediastore"
	"github.com/mcpgw/mcpgw/telemetry"
)

// observeMedia registers the media store's gauges and counters on mp,
// read from Stats at each collection (the store knows nothing of
// telemetry). It returns how to unregister them.
func observeMedia(mp metric.MeterProvider, media *mediastore.Store) (unregister func(), err error) {
	meter := mp.Meter(telemetry.ScopeName)
	bytes, err1 := meter.Int64ObservableGauge("mcpgw.media.stored",
		metric.WithUnit("By"), metric.WithDescription("Bytes of media the gateway holds for its media links."))
	files, err2 := meter.Int64ObservableGauge("mcpgw.media.files",
		metric.WithUnit("{file}"), metric.WithDescription("Media blobs the gateway holds for its media links."))
	writes, err3 := meter.Int64ObservableCounter("mcpgw.media.writes",
		metric.WithUnit("{file}"), metric.WithDescription("Media blobs stored since the gateway started."))
	removed, err4 := meter.Int64ObservableCounter("mcpgw.media.removals",
		metric.WithUnit("{file}"), metric.WithDescription("Media blobs removed since the gateway started, by reason (mcpgw.reason: eviction to stay under media.max_bytes, expiration after media.max_age)."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	evicted := metric.WithAttributes(telemetry.Reason.String("eviction"))
	expired := metric.WithAttributes(telemetry.Reason.String("expiration"))
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := media.Stats()
		o.ObserveInt64(bytes, st.Bytes)
		o.ObserveInt64(files, int64(st.Files))
		o.ObserveInt64(writes, int64(st.Stored))
		o.ObserveInt64(removed, int64(st.Evictions), evicted)
		o.ObserveInt64(removed, int64(st.Expirations), expired)
		return nil
	}, bytes, files, writes, removed)
	if err != nil {
		return nil, err
	}
	return func() { reg.Unregister() }, nil
}
