// Package route gives requests and calls bounded route labels
// (Default: identifier-like path segments become "{id}") and records
// their latency per route and status code in an OpenTelemetry histogram
// without allocating once a route and code have been seen. The chassis
// server and the peer client both record through it.
package route

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxRoutes bounds the number of route labels per server or client;
// further routes are counted under "other".
const maxRoutes = 256

// Stats records the latency of one route, with pre-built attribute
// options per status code so that recording does not allocate. Safe for
// concurrent use.
type Stats struct {
	// Route is the route label.
	Route string
	hist  metric.Float64Histogram
	base  []attribute.KeyValue
	codes [600]atomic.Pointer[[]metric.RecordOption]
}

// Observe records one request or call of the route answered with code
// (0 = transport error) that took d.
func (r *Stats) Observe(code int, d time.Duration) {
	if code < 0 || code >= len(r.codes) {
		code = 0
	}
	opts := r.codes[code].Load()
	if opts == nil {
		kv := append(append([]attribute.KeyValue(nil), r.base...), attribute.Int("http.response.status_code", code))
		o := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
		r.codes[code].CompareAndSwap(nil, &o)
		opts = r.codes[code].Load()
	}
	r.hist.Record(context.Background(), d.Seconds(), (*opts)...)
}

// Table maps route labels to their Stats; lookups are lock-free. Safe for
// concurrent use.
type Table struct {
	hist   metric.Float64Histogram
	base   []attribute.KeyValue // service or peer attribute
	routes atomic.Pointer[map[string]*Stats]
	mu     sync.Mutex // serialises inserts
}

// NewTable returns a Table recording into hist with the attributes base
// (the server's component or the client's peer) before the route's.
func NewTable(hist metric.Float64Histogram, base ...attribute.KeyValue) *Table {
	t := &Table{hist: hist, base: base}
	t.routes.Store(&map[string]*Stats{})
	return t
}

// Lookup returns the stats of route key; it does not allocate once the
// route has been seen.
func (t *Table) Lookup(key []byte) *Stats {
	if rs := (*t.routes.Load())[string(key)]; rs != nil {
		return rs
	}
	return t.add(string(key))
}

func (t *Table) add(route string) *Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.routes.Load()
	if rs := old[route]; rs != nil {
		return rs
	}
	if len(old) >= maxRoutes {
		route = "other"
		if rs := old[route]; rs != nil {
			return rs
		}
	}
	next := make(map[string]*Stats, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	base := append(append([]attribute.KeyValue(nil), t.base...), attribute.String("http.route", route))
	rs := &Stats{Route: route, hist: t.hist, base: base}
	next[route] = rs
	t.routes.Store(&next)
	return rs
}

// Default maps a path to a route label with bounded cardinality:
// segments that look like identifiers (containing '.', '@' or more than four
// digits, or longer than 40 bytes) become "{id}".
func Default(path []byte) string {
	var buf [128]byte
	return string(Append(buf[:0], path))
}

// Append appends Default(path) to out without allocating when out
// has room.
func Append[S ~string | ~[]byte](out []byte, path S) []byte {
	for len(path) > 0 {
		if path[0] == '/' {
			path = path[1:]
			continue
		}
		end := 0
		for end < len(path) && path[end] != '/' {
			end++
		}
		seg := path[:end]
		path = path[end:]
		out = append(out, '/')
		if isIDSegment(seg) {
			out = append(out, "{id}"...)
		} else {
			out = append(out, seg...)
		}
		if len(out) > 100 {
			break
		}
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	return out
}

func isIDSegment[S ~string | ~[]byte](seg S) bool {
	if len(seg) > 40 {
		return true
	}
	digits := 0
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case c == '.' || c == '@':
			return true
		case c >= '0' && c <= '9':
			digits++
		}
	}
	return digits > 4
}
