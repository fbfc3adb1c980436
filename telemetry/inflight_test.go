package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// inFlightPoints collects reader and returns the points of the sum name,
// by the value of the server attribute.
func inFlightPoints(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
				t.Fatalf("%s is %T (monotonic %v), want a cumulative non-monotonic sum", name, m.Data, ok && sum.IsMonotonic)
			}
			for _, p := range sum.DataPoints {
				v, _ := p.Attributes.Value(Server)
				out[v.AsString()] = p.Value
			}
		}
	}
	return out
}

// TestInFlight checks the counts an InFlight reports: by key, back to 0
// when idle, none once unregistered, and nothing counted before Register.
func TestInFlight(t *testing.T) {
	var unregistered InFlight[string]
	unregistered.Get("x", nil).Add(1) // a nil Count: no panic, nothing counted

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	var f InFlight[string]
	if err := f.Register(mp.Meter("test"), "calls.in_flight"); err != nil {
		t.Fatal(err)
	}
	made := 0
	get := func(server string) *Count {
		return f.Get(server, func() []attribute.KeyValue {
			made++
			return []attribute.KeyValue{Server.String(server)}
		})
	}
	a, b := get("a"), get("b")
	a.Add(1)
	get("a").Add(1)
	b.Add(1)
	if got := inFlightPoints(t, reader, "calls.in_flight"); got["a"] != 2 || got["b"] != 1 || len(got) != 2 {
		t.Errorf("in flight: %v, want a=2 b=1", got)
	}
	a.Add(-1)
	a.Add(-1)
	b.Add(-1)
	if got := inFlightPoints(t, reader, "calls.in_flight"); got["a"] != 0 || got["b"] != 0 || len(got) != 2 {
		t.Errorf("idle: %v, want a=0 b=0", got)
	}
	if made != 2 {
		t.Errorf("%d attribute sets made for 2 keys, want 2", made)
	}
	f.Unregister()
	if got := inFlightPoints(t, reader, "calls.in_flight"); len(got) != 0 {
		t.Errorf("after Unregister: %v, want nothing", got)
	}
	if n := testing.AllocsPerRun(100, func() { c := get("a"); c.Add(1); c.Add(-1) }); n != 0 {
		t.Errorf("a call in flight allocates %v times, want 0", n)
	}
}
