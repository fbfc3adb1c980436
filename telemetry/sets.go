package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxCachedSets bounds a Sets cache: past it, sets are made per use.
const maxCachedSets = 4096

// Sets caches the metric option of an attribute set by a comparable key
// (a struct of the label values), so that recording a measurement whose
// labels were seen before builds no set: attribute.NewSet sorts and
// copies its attributes on every call. It holds at most 4096 sets; labels
// are bounded (MethodLabel, the catalog's names), so that is rarely
// reached, and past it sets are made per use. The zero Sets is ready.
type Sets[K comparable] struct {
	mu sync.RWMutex
	m  map[K]metric.MeasurementOption
}

// Get returns the option for key, calling attrs to make its set the first
// time.
func (c *Sets[K]) Get(key K, attrs func() []attribute.KeyValue) metric.MeasurementOption {
	c.mu.RLock()
	opt, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(attrs()...))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]metric.MeasurementOption)
	}
	if len(c.m) < maxCachedSets {
		c.m[key] = opt
	}
	return opt
}
