package diameter

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/chf-testbed/testbed/loadgen/gy"
)

func TestRegisterMetrics(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 100000)
	s := startServer(t, Config{}, f)
	// a registry of its own, exported as the chassis exports /metrics
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)).Meter("test")); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	expectResult(t, do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1,
		HasAction: true, Action: gy.CheckBalance}), 2001)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"diameter_peers": 1, "diameter_requests_total": 1, "diameter_inflight_requests": -1,
		"diameter_too_busy_total": 0, "diameter_failed_total": 0, "diameter_core_errors_total": 0,
		"diameter_rejected_peers_total": 0, "diameter_disconnects_total": 0,
	} {
		v, ok := got[name]
		if !ok {
			t.Errorf("%s missing from /metrics", name)
			continue
		}
		if want >= 0 && v != want { // -1: racy (decremented after the answer is written)
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}
