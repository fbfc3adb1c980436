package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// maxCachedSets bounds a Sets cache: past it, sets are made per use.
const maxCachedSets = 4096

// Labels is an attribute set as the options the instruments take, each
// in a slice of its own, so that a measurement passes them on with
// Add(ctx, n, l.Add...) and allocates nothing: an option list written at
// the call (Add(ctx, n, opt)) is a new slice, which escapes to the heap
// since the instruments are interfaces.
type Labels struct {
	Add    []metric.AddOption
	Record []metric.RecordOption
}

// NewLabels returns the Labels of the attribute set of attrs.
func NewLabels(attrs ...attribute.KeyValue) *Labels {
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return &Labels{Add: []metric.AddOption{opt}, Record: []metric.RecordOption{opt}}
}

// Sets caches the Labels of an attribute set by a comparable key
// (a struct of the label values), so that recording a measurement whose
// labels were seen before builds no set: attribute.NewSet sorts and
// copies its attributes on every call. It holds at most 4096 sets; labels
// are bounded (MethodLabel, the catalog's names), so that is rarely
// reached, and past it sets are made per use. The zero Sets is ready.
type Sets[K comparable] struct {
	mu sync.RWMutex
	m  map[K]*Labels
}

// Get returns the Labels of key, calling attrs to make its set the first
// time.
func (c *Sets[K]) Get(key K, attrs func() []attribute.KeyValue) *Labels {
	c.mu.RLock()
	opt, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	opt = NewLabels(attrs()...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]*Labels)
	}
	if len(c.m) < maxCachedSets {
		c.m[key] = opt
	}
	return opt
}

// Tracing reports whether tp may record spans: false for the no-op
// provider that Setup installs when tracing is off. A caller that gets
// false skips starting its spans (and the context and option allocations
// a no-op Start still makes) and uses noop.Span{}: the context it passes
// on carries the remote parent it had, which is all a no-op span would
// carry, so the trace context propagated to upstreams is the same.
func Tracing(tp trace.TracerProvider) bool {
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}
