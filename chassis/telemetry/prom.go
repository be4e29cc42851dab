package telemetry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The service-level metrics of the request paths (the Nchf and Gy fronts,
// the internal RPC, the Aerospike calls) are Prometheus client_golang
// collectors registered on Registry next to the OTel-exported ones: their
// children are resolved once per label combination and observed with
// atomic operations only, so recording allocates nothing and takes no
// lock.

// SizeBuckets are the histogram bounds of batch sizes (items per batch).
var SizeBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}

// NewHistogramVec returns the histogram vector name (a full Prometheus
// name ending in its unit, such as _seconds) with labels, registered on
// Registry; a second call with the same name returns the first vector.
// Buckets nil means LatencyBuckets.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	if buckets == nil {
		buckets = LatencyBuckets
	}
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	return register(v)
}

// NewCounterVec returns the counter vector name (ending in _total) with
// labels, registered on Registry; a second call with the same name returns
// the first vector.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

var (
	namesMu sync.Mutex
	names   = map[string]string{} // registered here: name -> type
)

// RegisteredNames returns the metric names (histograms with their
// _bucket, _sum and _count series) registered through NewHistogramVec and
// NewCounterVec, whether or not they have been observed yet, mapped to
// their type. Tests compare dashboards against it.
func RegisteredNames() map[string]string {
	namesMu.Lock()
	defer namesMu.Unlock()
	out := make(map[string]string, len(names))
	for k, v := range names {
		out[k] = v
	}
	return out
}

func register[C prometheus.Collector](c C) C {
	err := Registry().Register(c)
	if err == nil {
		namesMu.Lock()
		defer namesMu.Unlock()
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := (<-ch).String() // Desc{fqName: "name", ...}
		if i := strings.Index(d, `fqName: "`); i >= 0 {
			name := d[i+len(`fqName: "`):]
			name = name[:strings.IndexByte(name, '"')]
			if _, ok := any(c).(*prometheus.HistogramVec); ok {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					names[name+suf] = "histogram"
				}
			} else {
				names[name] = "counter"
			}
		}
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev
		}
	}
	panic(fmt.Sprintf("BUG: telemetry: cannot register collector: %v", err))
}

// maxTableEntries bounds a Table; further keys share the zero key's value.
const maxTableEntries = 1024

// Table maps label combinations (a comparable key such as a small struct)
// to their pre-resolved metric children, created by newValue on first use.
// Lookups are lock-free and allocation-free once a key has been seen; at
// most 1024 keys are kept, further ones map to the zero key. Safe for
// concurrent use.
type Table[K comparable, V any] struct {
	m        atomic.Pointer[map[K]V]
	mu       sync.Mutex // serialises inserts
	newValue func(K) V
}

// NewTable returns an empty Table whose values newValue makes.
func NewTable[K comparable, V any](newValue func(K) V) *Table[K, V] {
	t := &Table[K, V]{newValue: newValue}
	t.m.Store(&map[K]V{})
	return t
}

// Get returns the value of k, making it on first use.
func (t *Table[K, V]) Get(k K) V {
	if v, ok := (*t.m.Load())[k]; ok {
		return v
	}
	return t.add(k)
}

func (t *Table[K, V]) add(k K) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	if v, ok := old[k]; ok {
		return v
	}
	if len(old) >= maxTableEntries {
		var zero K
		if v, ok := old[zero]; ok {
			return v
		}
		k = zero
	}
	next := make(map[K]V, len(old)+1)
	for kk, vv := range old {
		next[kk] = vv
	}
	v := t.newValue(k)
	next[k] = v
	t.m.Store(&next)
	return v
}
