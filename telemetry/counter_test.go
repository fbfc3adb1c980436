package telemetry

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// counterPoints collects reader and returns the points of the counter
// name, by the value of the server attribute ("overflow" for the overflow
// series).
func counterPoints(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
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
			if !ok || !sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
				t.Fatalf("%s is %T (monotonic %v), want a cumulative monotonic sum", name, m.Data, ok && sum.IsMonotonic)
			}
			for _, p := range sum.DataPoints {
				key := "overflow"
				if v, ok := p.Attributes.Value(Server); ok {
					key = v.AsString()
				} else if v, ok := p.Attributes.Value(overflowAttr.Key); !ok || !v.AsBool() {
					t.Fatalf("a point with neither a server nor the overflow label: %v", p.Attributes)
				}
				out[key] = p.Value
			}
		}
	}
	return out
}

// TestCounter checks the counts a Counter reports: by key, cumulative,
// nothing before Register or after Unregister, the keys past its bound
// under the overflow series, and no allocation per event.
func TestCounter(t *testing.T) {
	var unregistered Counter[string]
	unregistered.Get("x", nil).Add(1) // a nil Count: no panic, nothing counted

	reader := sdkmetric.NewManualReader()
	// Without the SDK's own limit (2000 series), which would fold the
	// series into its overflow first.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithCardinalityLimit(0))
	defer mp.Shutdown(context.Background())
	var c Counter[string]
	if err := c.Register(mp.Meter("test"), "requests"); err != nil {
		t.Fatal(err)
	}
	made := 0
	get := func(server string) *Count {
		return c.Get(server, func() []attribute.KeyValue {
			made++
			return []attribute.KeyValue{Server.String(server)}
		})
	}
	get("a").Add(1)
	get("a").Add(1)
	get("b").Add(1)
	if got := counterPoints(t, reader, "requests"); got["a"] != 2 || got["b"] != 1 || len(got) != 2 {
		t.Errorf("counts: %v, want a=2 b=1", got)
	}
	get("a").Add(1)
	if got := counterPoints(t, reader, "requests"); got["a"] != 3 || got["b"] != 1 {
		t.Errorf("counts: %v, want a=3 b=1 (cumulative)", got)
	}
	if made != 2 {
		t.Errorf("%d attribute sets made for 2 keys, want 2", made)
	}
	if n := testing.AllocsPerRun(100, func() { get("a").Add(1) }); n != 0 {
		t.Errorf("an event allocates %v times, want 0", n)
	}

	// Past the bound, new keys count together, and none is lost.
	for i := range maxCachedSets {
		get(fmt.Sprint("k", i)).Add(1)
	}
	got := counterPoints(t, reader, "requests")
	// a: 3, and AllocsPerRun's 101 runs.
	if len(got) != maxCachedSets+1 || got["overflow"] != 2 || got["a"] != 104 {
		t.Errorf("%d series, overflow %d, a %d; want %d series, overflow 2 (the last two keys), a 104", len(got), got["overflow"], got["a"], maxCachedSets+1)
	}

	c.Unregister()
	if got := counterPoints(t, reader, "requests"); len(got) != 0 {
		t.Errorf("after Unregister: %d series, want none", len(got))
	}
}
