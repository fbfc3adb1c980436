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
	labels bounded[K, *Labels]
}

// Get returns the Labels of key, calling attrs to make its set the first
// time.
func (c *Sets[K]) Get(key K, attrs func() []attribute.KeyValue) *Labels {
	return c.labels.get(key, func() *Labels { return NewLabels(attrs()...) })
}

// bounded is a map of values made on a miss and read under a read lock
// after, the cache of Sets and InFlight. It keeps at most maxCachedSets
// entries; past that, values are made per use and not kept. The zero
// bounded is ready.
type bounded[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// get returns key's value, calling make the first time, under the lock,
// so that one key never gets two values (two in-flight counts would each
// hold half of it). Past maxCachedSets keys, make's value is not kept.
func (b *bounded[K, V]) get(key K, make func() V) V {
	return b.getOr(key, make, make)
}

// getOr is get, but once maxCachedSets keys are kept a new key gets
// full's value instead of one of its own.
func (b *bounded[K, V]) getOr(key K, make, full func() V) V {
	b.mu.RLock()
	v, ok := b.m[key]
	b.mu.RUnlock()
	if ok {
		return v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.m[key]; ok {
		return v
	}
	if len(b.m) >= maxCachedSets {
		return full()
	}
	v = make()
	if b.m == nil {
		b.m = map[K]V{}
	}
	b.m[key] = v
	return v
}

// each calls fn with every value kept, under the read lock.
func (b *bounded[K, V]) each(fn func(V)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, v := range b.m {
		fn(v)
	}
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
