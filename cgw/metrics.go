package cgw

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/chassis/flight"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// The CGW's Nchf metrics, on the chassis registry (served on /metrics of
// the HTTP/1.1 front):
//
//	chf_cgw_requests_total{front,operation,code,cause}  counter
//	chf_cgw_request_duration_seconds{front,operation,code}  histogram
//	chf_cgw_shed_total{reason}  counter
//
// front is "h2c" or "http1"; operation is create, update, release, event,
// balance or other (a path or method the CGW refuses); code is the HTTP
// status answered and cause the ProblemDetails cause ("" on success). A
// timeout of the charging core is code 504, cause TIMED_OUT_REQUEST.
// Latency runs from the request's arrival at the front to its answer being
// ready. Recording allocates nothing once a (front, operation, code,
// cause) combination has been seen.

// front is the protocol front a request came in on.
type front uint8

const (
	frontH2C front = iota
	frontHTTP1
)

var frontNames = [...]string{frontH2C: "h2c", frontHTTP1: "http1"}

// operation is the Nchf (or balance) operation of a request, for metrics.
type operation uint8

const (
	opOther operation = iota
	opCreate
	opUpdate
	opRelease
	opEvent
	opBalance
)

var opNames = [...]string{opOther: "other", opCreate: "create", opUpdate: "update", opRelease: "release", opEvent: "event", opBalance: "balance"}

type nchfKey struct {
	front front
	op    operation
	code  uint16
	cause string
}

type nchfSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

var (
	nchfRequests = telemetry.NewCounterVec("chf_cgw_requests_total",
		"Nchf and balance requests answered by the CGW, by front (h2c, http1), operation, HTTP status code and ProblemDetails cause.",
		"front", "operation", "code", "cause")
	nchfLatency = telemetry.NewHistogramVec("chf_cgw_request_duration_seconds",
		"Time from a request's arrival at a CGW front to its answer, by front, operation and HTTP status code.",
		nil, "front", "operation", "code")
	nchfSeriesTable = telemetry.NewTable(func(k nchfKey) nchfSeries {
		code := strconv.Itoa(int(k.code))
		return nchfSeries{
			requests: nchfRequests.WithLabelValues(frontNames[k.front], opNames[k.op], code, k.cause),
			latency:  nchfLatency.WithLabelValues(frontNames[k.front], opNames[k.op], code),
		}
	})
	shedTotal = telemetry.NewCounterVec("chf_cgw_shed_total",
		"Nchf requests the CGW refused at admission (503 NF_CONGESTION) without charging them, by reason.",
		"reason")
)

// ShedCounter returns the counter of Nchf requests shed for reason (a
// short constant such as "inflight" or "queue"): resolve it once, then
// call Inc per shed request (no allocation, no lock).
func ShedCounter(reason string) prometheus.Counter { return shedTotal.WithLabelValues(reason) }

// observe records x's answer on fr, begun at start.
func observe(fr front, x *Exchange, start time.Time) {
	code := x.Status
	if code < 0 || code > 999 {
		code = 0
	}
	s := nchfSeriesTable.Get(nchfKey{front: fr, op: x.op, code: uint16(code), cause: x.cause})
	s.requests.Inc()
	d := time.Since(start)
	s.latency.Observe(d.Seconds())
	flight.Observe(d)
}

// The adaptive admission limit's state (package admission), shared by
// the Nchf and Gy fronts:
//
//	chf_cgw_admission_limit  gauge    the current concurrency limit
//	chf_cgw_admission_inflight  gauge    requests admitted and not done
//	chf_cgw_admission_shed_total  counter  requests the limit refused (Nchf 503, Gy 3004)
//
// They are read from the limiter at scrape time (no cost per request)
// and exist once a Handler with a Limiter is built (--admission
// adaptive); the last such Handler's limiter is the one shown.
var (
	admissionLimiter atomic.Pointer[admission.Limiter]
	admissionOnce    sync.Once
)

// exposeAdmission makes lim the limiter the admission metrics read.
func exposeAdmission(lim *admission.Limiter) {
	admissionLimiter.Store(lim)
	admissionOnce.Do(func() {
		stat := func() admission.Stats {
			if l := admissionLimiter.Load(); l != nil {
				return l.Stats()
			}
			return admission.Stats{}
		}
		telemetry.Registry().MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chf_cgw_admission_limit",
				Help: "Current concurrency limit of the CGW's adaptive admission (Nchf and Gy requests charged at once)."},
				func() float64 { return float64(stat().Limit) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chf_cgw_admission_inflight",
				Help: "Requests the CGW's adaptive admission has admitted and that are not done yet."},
				func() float64 { return float64(stat().InFlight) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chf_cgw_admission_shed_total",
				Help: "Requests the CGW's adaptive admission limit refused (Nchf 503 NF_CONGESTION, Gy 3004 DIAMETER_TOO_BUSY)."},
				func() float64 { return float64(stat().Rejected) }),
		)
	})
}
