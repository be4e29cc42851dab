package chassis

import (
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxRoutes bounds the number of route labels per server; further routes
// are counted under "other".
const maxRoutes = 256

// latencyBuckets are the upper bounds (seconds) of the latency histograms.
var latencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

var latencyBucketsNs = func() (b [len(latencyBuckets)]int64) {
	for i, v := range latencyBuckets {
		b[i] = int64(v * 1e9)
	}
	return b
}()

// histogram is a lock-free fixed-bucket latency histogram.
type histogram struct {
	counts [len(latencyBuckets) + 1]atomic.Uint64
	sumNs  atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	ns := int64(d)
	i := 0
	for i < len(latencyBucketsNs) && ns > latencyBucketsNs[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(ns)
}

func (h *histogram) appendText(dst []byte, name, labels string) []byte {
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		dst = append(dst, name...)
		dst = append(dst, "_bucket{"...)
		dst = append(dst, labels...)
		dst = append(dst, `,le="`...)
		if i < len(latencyBuckets) {
			dst = strconv.AppendFloat(dst, latencyBuckets[i], 'g', -1, 64)
		} else {
			dst = append(dst, "+Inf"...)
		}
		dst = append(dst, "\"} "...)
		dst = strconv.AppendUint(dst, cum, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, name...)
	dst = append(dst, "_sum{"...)
	dst = append(dst, labels...)
	dst = append(dst, "} "...)
	dst = strconv.AppendFloat(dst, float64(h.sumNs.Load())/1e9, 'g', -1, 64)
	dst = append(dst, '\n')
	dst = append(dst, name...)
	dst = append(dst, "_count{"...)
	dst = append(dst, labels...)
	dst = append(dst, "} "...)
	dst = strconv.AppendUint(dst, cum, 10)
	return append(dst, '\n')
}

// routeStats counts requests of one route by status code and their latency.
type routeStats struct {
	route string
	codes [600]atomic.Uint64
	lat   histogram
}

func (r *routeStats) observe(code int, d time.Duration) {
	if code < 0 || code >= len(r.codes) {
		code = 0
	}
	r.codes[code].Add(1)
	r.lat.observe(d)
}

// serverMetrics holds the metrics of one Server.
type serverMetrics struct {
	service string
	routeFn func([]byte) string

	routes atomic.Pointer[map[string]*routeStats]
	mu     sync.Mutex // serialises inserts into routes
}

func newServerMetrics(service string, routeFn func([]byte) string) *serverMetrics {
	m := &serverMetrics{service: service, routeFn: routeFn}
	m.routes.Store(&map[string]*routeStats{})
	return m
}

// route returns the stats of the route of path; it does not allocate once
// the route has been seen.
func (m *serverMetrics) route(path []byte) *routeStats {
	var buf [128]byte
	var key []byte
	if m.routeFn != nil {
		key = append(buf[:0], m.routeFn(path)...)
	} else {
		key = appendRoute(buf[:0], path)
	}
	if rs := (*m.routes.Load())[string(key)]; rs != nil {
		return rs
	}
	return m.addRoute(string(key))
}

func (m *serverMetrics) addRoute(route string) *routeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.routes.Load()
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
	rs := &routeStats{route: route}
	next[route] = rs
	m.routes.Store(&next)
	return rs
}

func (m *serverMetrics) appendText(dst []byte, inflight int64) []byte {
	routes := *m.routes.Load()
	svc := `service="` + m.service + `"`
	dst = append(dst, "# HELP chf_http_server_requests_total Requests handled, by route and status code.\n# TYPE chf_http_server_requests_total counter\n"...)
	for _, rs := range routes {
		for code := range rs.codes {
			n := rs.codes[code].Load()
			if n == 0 {
				continue
			}
			dst = append(dst, "chf_http_server_requests_total{"...)
			dst = append(dst, svc...)
			dst = append(dst, `,route="`...)
			dst = append(dst, rs.route...)
			dst = append(dst, `",code="`...)
			dst = strconv.AppendInt(dst, int64(code), 10)
			dst = append(dst, "\"} "...)
			dst = strconv.AppendUint(dst, n, 10)
			dst = append(dst, '\n')
		}
	}
	dst = append(dst, "# HELP chf_http_server_request_duration_seconds Request latency, by route.\n# TYPE chf_http_server_request_duration_seconds histogram\n"...)
	for _, rs := range routes {
		dst = rs.lat.appendText(dst, "chf_http_server_request_duration_seconds", svc+`,route="`+rs.route+`"`)
	}
	dst = append(dst, "# HELP chf_http_server_inflight Requests being handled.\n# TYPE chf_http_server_inflight gauge\nchf_http_server_inflight{"...)
	dst = append(dst, svc...)
	dst = append(dst, "} "...)
	dst = strconv.AppendInt(dst, inflight, 10)
	dst = append(dst, '\n')
	dst = clientMetricsText(dst)
	return appendProcessText(dst)
}

// appendProcessText appends process CPU seconds and resident memory.
func appendProcessText(dst []byte) []byte {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		dst = append(dst, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "...)
		dst = strconv.AppendFloat(dst, cpu, 'g', -1, 64)
		dst = append(dst, '\n')
	}
	if rss := residentBytes(); rss >= 0 {
		dst = append(dst, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "...)
		dst = strconv.AppendInt(dst, rss, 10)
		dst = append(dst, '\n')
	}
	return dst
}

// residentBytes reads the resident set size from /proc/self/statm (-1 when
// unavailable).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	// size resident shared ...
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	i++
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if i >= len(b) || j == i {
		return -1
	}
	pages, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	if err != nil || pages > math.MaxInt64/int64(os.Getpagesize()) {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
