package chassis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// maxRoutes bounds the number of route labels per server or client;
// further routes are counted under "other".
const maxRoutes = 256

// instruments are the chassis' OpenTelemetry instruments, created once per
// process on the telemetry meter and exported on /metrics as
//
//	http_server_request_duration_seconds{component,http_route,http_response_status_code}
//	http_server_active_requests{component}
//	http_client_request_duration_seconds{peer_service,http_route,http_response_status_code}
//	http_client_active_requests{peer_service}
//	chf_client_retries_total{peer_service}
//	chf_client_ejections_total{peer_service}
//	chf_client_endpoints{peer_service,state}
//	chf_discovery_staleness_seconds{peer_service}
//	process_cpu_seconds_total, process_resident_memory_bytes
type instruments struct {
	serverDuration metric.Float64Histogram
	serverActive   metric.Int64ObservableUpDownCounter
	clientDuration metric.Float64Histogram
	clientActive   metric.Int64ObservableUpDownCounter
	retries        metric.Int64Counter
	ejections      metric.Int64Counter
	endpoints      metric.Int64ObservableGauge
	staleness      metric.Float64ObservableGauge
}

var (
	instOnce sync.Once
	inst     *instruments
)

func getInstruments() *instruments {
	instOnce.Do(func() {
		m := telemetry.Meter()
		must := func(err error) {
			if err != nil {
				panic(fmt.Sprintf("BUG: cannot create chassis instrument: %v", err))
			}
		}
		i := &instruments{}
		var err error
		bounds := metric.WithExplicitBucketBoundaries(telemetry.LatencyBuckets...)
		i.serverDuration, err = m.Float64Histogram("http.server.request.duration", metric.WithUnit("s"), bounds,
			metric.WithDescription("Requests served, by route and status code, and their latency."))
		must(err)
		i.serverActive, err = m.Int64ObservableUpDownCounter("http.server.active_requests",
			metric.WithDescription("Requests being served."))
		must(err)
		i.clientDuration, err = m.Float64Histogram("http.client.request.duration", metric.WithUnit("s"), bounds,
			metric.WithDescription("Calls to peer services (retries included), by peer, route and status code (0 = transport error), and their latency."))
		must(err)
		i.clientActive, err = m.Int64ObservableUpDownCounter("http.client.active_requests",
			metric.WithDescription("Calls in progress to a peer service."))
		must(err)
		i.retries, err = m.Int64Counter("chf.client.retries", metric.WithDescription("Calls retried on another endpoint."))
		must(err)
		i.ejections, err = m.Int64Counter("chf.client.ejections", metric.WithDescription("Endpoints ejected as outliers."))
		must(err)
		i.endpoints, err = m.Int64ObservableGauge("chf.client.endpoints",
			metric.WithDescription("Endpoints of a peer service by state (healthy, ejected)."))
		must(err)
		i.staleness, err = m.Float64ObservableGauge("chf.discovery.staleness", metric.WithUnit("s"),
			metric.WithDescription("How long the discovery source of a peer has been failing while the last known endpoint set stays in use (0 = fresh)."))
		must(err)
		inst = i
	})
	return inst
}

// routeStats records the latency of one route, with pre-built attribute
// options per status code so that recording does not allocate.
type routeStats struct {
	route string
	hist  metric.Float64Histogram
	base  []attribute.KeyValue
	codes [600]atomic.Pointer[[]metric.RecordOption]
}

func (r *routeStats) observe(code int, d time.Duration) {
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

// routeTable maps route labels to their stats; lookups are lock-free.
type routeTable struct {
	hist   metric.Float64Histogram
	base   []attribute.KeyValue // service or peer attribute
	routes atomic.Pointer[map[string]*routeStats]
	mu     sync.Mutex // serialises inserts
}

func newRouteTable(hist metric.Float64Histogram, base ...attribute.KeyValue) *routeTable {
	t := &routeTable{hist: hist, base: base}
	t.routes.Store(&map[string]*routeStats{})
	return t
}

// lookup returns the stats of route key; it does not allocate once the
// route has been seen.
func (t *routeTable) lookup(key []byte) *routeStats {
	if rs := (*t.routes.Load())[string(key)]; rs != nil {
		return rs
	}
	return t.add(string(key))
}

func (t *routeTable) add(route string) *routeStats {
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
	next := make(map[string]*routeStats, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	base := append(append([]attribute.KeyValue(nil), t.base...), attribute.String("http.route", route))
	rs := &routeStats{route: route, hist: t.hist, base: base}
	next[route] = rs
	t.routes.Store(&next)
	return rs
}
