package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Counter counts events (requests) by a comparable key of label values,
// for an observable counter, as InFlight counts what is under way: an
// event costs an atomic add, where an SDK counter's Add would cost an
// attribute lookup, an aggregator and an exemplar filter, and the SDK
// reads the counts when it collects. At most 4096 keys are kept; the
// events of keys past them count under one series labelled
// otel.metric.overflow=true, so none is lost. (The SDK's own cardinality
// limit, 2000 series per instrument by default, folds series into that
// same overflow series first.) The zero Counter is ready; Register it
// once.
type Counter[K comparable] struct {
	counts     bounded[K, *Count]
	overflow   *Count
	registered atomic.Bool
	mu         sync.Mutex // guards reg
	reg        metric.Registration
}

// overflowAttr labels the series of the keys past a Counter's bound.
var overflowAttr = attribute.Bool("otel.metric.overflow", true)

// Get returns the Count of key, calling attrs to make its attribute set
// the first time. It returns nil (which counts nothing) when the Counter
// is not registered.
func (c *Counter[K]) Get(key K, attrs func() []attribute.KeyValue) *Count {
	if !c.registered.Load() {
		return nil
	}
	return c.counts.getOr(key, func() *Count {
		return &Count{opt: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attrs()...))}}
	}, func() *Count { return c.overflow })
}

// Register makes the observable counter name on meter and reports the
// counts through it. On an error the Counter counts nothing.
func (c *Counter[K]) Register(meter metric.Meter, name string, opts ...metric.Int64ObservableCounterOption) error {
	inst, err := meter.Int64ObservableCounter(name, opts...)
	if err != nil {
		return err
	}
	c.overflow = &Count{opt: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(overflowAttr))}}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c.counts.each(func(n *Count) { o.ObserveInt64(inst, n.n.Load(), n.opt...) })
		if n := c.overflow.n.Load(); n > 0 {
			o.ObserveInt64(inst, n, c.overflow.opt...)
		}
		return nil
	}, inst)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.reg = reg
	c.mu.Unlock()
	c.registered.Store(true)
	return nil
}

// Unregister stops the reporting, for a component that closes while its
// meter provider lives on.
func (c *Counter[K]) Unregister() {
	if c == nil {
		return
	}
	c.mu.Lock()
	reg := c.reg
	c.mu.Unlock()
	if reg != nil {
		reg.Unregister()
	}
}
