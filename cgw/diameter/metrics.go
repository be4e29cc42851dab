package diameter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/flight"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// RegisterMetrics exports Stats on m (the chassis meter, served on the
// CGW's /metrics) as
//
//	diameter_peers, diameter_inflight_requests (gauges)
//	diameter_requests_total, diameter_too_busy_total,
//	diameter_failed_total, diameter_core_errors_total,
//	diameter_rejected_peers_total, diameter_disconnects_total (counters)
//
// The values are read when /metrics is scraped; nothing is recorded per
// message. Safe to call once per Server.
func (s *Server) RegisterMetrics(m metric.Meter) error {
	fail := func(err error) error { return fmt.Errorf("cannot register diameter metrics: %w", err) }
	gauge := func(name, desc string) (metric.Int64ObservableGauge, error) {
		return m.Int64ObservableGauge(name, metric.WithDescription(desc))
	}
	counter := func(name, desc string) (metric.Int64ObservableCounter, error) {
		return m.Int64ObservableCounter(name, metric.WithDescription(desc))
	}
	peers, err := gauge("diameter.peers", "Diameter peers connected (capabilities exchanged).")
	if err != nil {
		return fail(err)
	}
	inflight, err := gauge("diameter.inflight_requests", "Credit-Control-Requests being charged now.")
	if err != nil {
		return fail(err)
	}
	var counters [6]metric.Int64ObservableCounter
	for i, c := range []struct{ name, desc string }{
		{"diameter.requests", "Credit-Control-Requests received."},
		{"diameter.too_busy", "Credit-Control-Requests answered 3004 DIAMETER_TOO_BUSY because MaxInFlight were being charged."},
		{"diameter.failed", "Credit-Control-Requests refused before the charging core (5004, 5005, 5014, ...)."},
		{"diameter.core_errors", "Credit-Control-Requests whose charging call failed (answered 3004)."},
		{"diameter.rejected_peers", "Connections refused at the capabilities exchange (unknown peer, no Credit-Control)."},
		{"diameter.disconnects", "Peer connections closed."},
	} {
		if counters[i], err = counter(c.name, c.desc); err != nil {
			return fail(err)
		}
	}
	insts := []metric.Observable{peers, inflight}
	for _, c := range counters {
		insts = append(insts, c)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(peers, st.Peers)
		o.ObserveInt64(inflight, st.InFlight)
		for i, v := range []uint64{st.Requests, st.TooBusy, st.Failed, st.CoreErrors, st.Rejected, st.Disconnects} {
			o.ObserveInt64(counters[i], int64(v))
		}
		return nil
	}, insts...)
	if err != nil {
		return fail(err)
	}
	return nil
}

// The Gy request metrics, recorded per CCA (no allocation once a
// combination has been seen):
//
//	chf_gy_requests_total{request_type,result_code}  counter
//	chf_gy_request_duration_seconds{request_type,result_code}  histogram
//
// request_type is initial, update, termination, event or other (absent or
// invalid CC-Request-Type); result_code the CCA's Result-Code. Latency runs
// from the CCR's dispatch to its CCA being encoded (3004 DIAMETER_TOO_BUSY
// answers included).
var (
	gyRequests = telemetry.NewCounterVec("chf_gy_requests_total",
		"Gy Credit-Control-Requests answered, by CC-Request-Type and the CCA's Result-Code.",
		"request_type", "result_code")
	gyLatency = telemetry.NewHistogramVec("chf_gy_request_duration_seconds",
		"Time from a Credit-Control-Request's dispatch to its answer, by CC-Request-Type and Result-Code.",
		nil, "request_type", "result_code")
	gyTable = telemetry.NewTable(func(k gyKey) gySeries {
		rt, rc := gyTypeNames[k.reqType], strconv.FormatUint(uint64(k.result), 10)
		return gySeries{gyRequests.WithLabelValues(rt, rc), gyLatency.WithLabelValues(rt, rc)}
	})
)

var gyTypeNames = [...]string{"other", "initial", "update", "termination", "event"}

type gyKey struct {
	reqType uint8
	result  uint32
}

type gySeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

func observeGy(reqType, result uint32, start time.Time) {
	if reqType >= uint32(len(gyTypeNames)) {
		reqType = 0
	}
	if result > 9999 {
		result = 0
	}
	g := gyTable.Get(gyKey{uint8(reqType), result})
	g.requests.Inc()
	d := time.Since(start)
	g.latency.Observe(d.Seconds())
	flight.Observe(d)
}
