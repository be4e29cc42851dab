// Package live is loadgen's live telemetry: a Prometheus endpoint
// (`--metrics-listen`) that a cluster run can be watched on while it
// runs. The engine feeds it twice: its per-second Tick callback (offered,
// completed, late, dropped, in flight, phase) and its per-request Observe
// hook (latency by operation, errors by operation and class), which
// records with atomic operations only: no lock shared by the workers, no
// allocation once an (operation, class) pair has been seen.
//
// Exported, on its own registry (the process's Go and process collectors
// included):
//
//	loadgen_offered_requests_total      counter: requests due
//	loadgen_completed_requests_total    counter: answered (any outcome)
//	loadgen_late_requests_total         counter: sent later than the late threshold
//	loadgen_dropped_requests_total      counter: dropped, too late to send
//	loadgen_errors_total{operation,class}  counter
//	loadgen_request_duration_seconds{operation}  histogram, from the due time
//	loadgen_in_flight_requests          gauge
//	loadgen_phase{phase}                gauge: 1 for the current phase
//
// Tick figures are added once a second, about 1.25 s after the second
// they cover; the histogram and the error counters are live.
package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chf-testbed/testbed/chassis/telemetry"
	"github.com/chf-testbed/testbed/loadgen/engine"
)

// Phases are the values of the phase label, in run order.
var Phases = []string{"ramp-up", "warm-up", "measure", "drain", "done"}

type errKey struct {
	op    engine.Op
	class string
}

// Metrics is the live telemetry of one run. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg                               *prometheus.Registry
	offered, completed, late, dropped prometheus.Counter
	inflight                          prometheus.Gauge
	phase                             *prometheus.GaugeVec
	latency                           [engine.NumOps]prometheus.Observer
	errs                              *telemetry.Table[errKey, prometheus.Counter]
	errVec                            *prometheus.CounterVec
	srv                               *http.Server
	ln                                net.Listener
	served                            chan struct{}
}

// New returns the metrics of a run, not yet served.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{reg: reg}
	m.offered = counter("loadgen_offered_requests_total", "Requests due by the schedule (sent or dropped), added each second.")
	m.completed = counter("loadgen_completed_requests_total", "Requests answered (any outcome), added each second.")
	m.late = counter("loadgen_late_requests_total", "Requests sent later than the scenario's late threshold after their due time, added each second.")
	m.dropped = counter("loadgen_dropped_requests_total", "Requests dropped because they could not be sent within the late-drop bound, added each second.")
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "loadgen_in_flight_requests", Help: "Requests sent and not yet answered, at the end of the last second."})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loadgen_phase", Help: "1 for the phase the run is in (ramp-up, warm-up, measure, drain, done), 0 for the others."}, []string{"phase"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loadgen_request_duration_seconds",
		Help: "Latency of first attempts from their due time (coordinated omission corrected), by operation.", Buckets: telemetry.LatencyBuckets}, []string{"operation"})
	m.errVec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loadgen_errors_total", Help: "Failed requests by operation and error class."}, []string{"operation", "class"})
	reg.MustRegister(m.inflight, m.phase, lat, m.errVec)
	for op := range m.latency {
		m.latency[op] = lat.WithLabelValues(engine.Op(op).String())
	}
	for _, p := range Phases {
		m.phase.WithLabelValues(p).Set(0)
	}
	m.errs = telemetry.NewTable(func(k errKey) prometheus.Counter {
		return m.errVec.WithLabelValues(k.op.String(), k.class)
	})
	return m
}

// Registry is the registry the endpoint serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Tick adds one second of the run (engine.Config.Tick).
func (m *Metrics) Tick(t engine.Tick) {
	m.offered.Add(float64(t.Offered))
	m.completed.Add(float64(t.Completed))
	m.late.Add(float64(t.Late))
	m.dropped.Add(float64(t.Dropped))
	m.inflight.Set(float64(t.InFlight))
}

// Observe records one first attempt (engine.Config.Observe).
func (m *Metrics) Observe(op engine.Op, latency time.Duration, class string) {
	if op < 0 || op >= engine.NumOps {
		return
	}
	m.latency[op].Observe(latency.Seconds())
	if class != "" {
		m.errs.Get(errKey{op, class}).Inc()
	}
}

// Phase marks the phase the run entered (engine.Config.Phase).
func (m *Metrics) Phase(name string) {
	for _, p := range Phases {
		v := 0.0
		if p == name {
			v = 1
		}
		m.phase.WithLabelValues(p).Set(v)
	}
}

// Serve listens on addr (host:port, port 0 allowed) and serves /metrics
// in the background until Close.
func (m *Metrics) Serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on --metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	m.ln, m.served = ln, make(chan struct{})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(m.served)
		m.srv.Serve(ln)
	}()
	return nil
}

// Addr is the listening address, "" before Serve.
func (m *Metrics) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Close stops the endpoint, letting a scrape in progress finish until ctx
// ends.
func (m *Metrics) Close(ctx context.Context) error {
	if m.srv == nil {
		return nil
	}
	err := m.srv.Shutdown(ctx)
	<-m.served
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
