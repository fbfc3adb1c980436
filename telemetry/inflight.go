package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// InFlight counts what is under way (requests, calls) by a comparable key
// of label values, for an observable up-down counter: a call in flight
// costs two atomic adds, and the SDK reads the counts when it collects.
// An Int64UpDownCounter did the same with two SDK measurements per call
// (an attribute lookup, an aggregator under a lock and an exemplar
// filter each), about 4% of a relayed call's CPU. A key once seen is
// reported until Unregister, at 0 when idle, as the up-down counter's
// series was. At most 4096 keys are kept; past that, counts are not
// reported (labels are bounded: MethodLabel, the catalog's names). The
// zero InFlight is ready; Register it once.
type InFlight[K comparable] struct {
	counts     bounded[K, *Count]
	registered atomic.Bool
	mu         sync.Mutex // guards reg
	reg        metric.Registration
}

// Count is the number in flight of one key.
type Count struct {
	n   atomic.Int64
	opt []metric.ObserveOption
}

// Add adds d (1 when something starts, -1 when it ends). A nil Count
// (InFlight not registered) counts nothing.
func (c *Count) Add(d int64) {
	if c != nil {
		c.n.Add(d)
	}
}

// Get returns the Count of key, calling attrs to make its attribute set
// the first time. It returns nil when the InFlight is not registered.
func (f *InFlight[K]) Get(key K, attrs func() []attribute.KeyValue) *Count {
	if !f.registered.Load() {
		return nil
	}
	return f.counts.get(key, func() *Count {
		return &Count{opt: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attrs()...))}}
	})
}

// Register makes the observable up-down counter name on meter and
// reports the counts through it. On an error the InFlight counts nothing.
func (f *InFlight[K]) Register(meter metric.Meter, name string, opts ...metric.Int64ObservableUpDownCounterOption) error {
	inst, err := meter.Int64ObservableUpDownCounter(name, opts...)
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		f.counts.each(func(c *Count) { o.ObserveInt64(inst, c.n.Load(), c.opt...) })
		return nil
	}, inst)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.reg = reg
	f.mu.Unlock()
	f.registered.Store(true)
	return nil
}

// Unregister stops the reporting, for a component that closes while its
// meter provider lives on.
func (f *InFlight[K]) Unregister() {
	if f == nil {
		return
	}
	f.mu.Lock()
	reg := f.reg
	f.mu.Unlock()
	if reg != nil {
		reg.Unregister()
	}
}
