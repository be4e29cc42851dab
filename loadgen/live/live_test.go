package live

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/loadgen/engine"
)

func TestEndpoint(t *testing.T) {
	m := New()
	if err := m.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	m.Phase("measure")
	m.Tick(engine.Tick{Offered: 100, Completed: 98, Late: 3, Dropped: 1, InFlight: 7})
	m.Tick(engine.Tick{Offered: 100, Completed: 101, InFlight: 5})
	m.Observe(engine.OpCreate, 2*time.Millisecond, "")
	m.Observe(engine.OpUpdate, 3*time.Millisecond, "timeout")
	m.Observe(engine.OpUpdate, 4*time.Millisecond, "timeout")
	text := telemetrytest.Scrape(t, "http://"+m.Addr()+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"loadgen_offered_requests_total", nil, 200},
		{"loadgen_completed_requests_total", nil, 199},
		{"loadgen_late_requests_total", nil, 3},
		{"loadgen_dropped_requests_total", nil, 1},
		{"loadgen_in_flight_requests", nil, 5},
		{"loadgen_request_duration_seconds", map[string]string{"operation": "update"}, 2},
		{"loadgen_request_duration_seconds", map[string]string{"operation": "create"}, 1},
		{"loadgen_errors_total", map[string]string{"operation": "update", "class": "timeout"}, 2},
		{"loadgen_phase", map[string]string{"phase": "measure"}, 1},
		{"loadgen_phase", map[string]string{"phase": "warm-up"}, 0},
	} {
		if got := telemetrytest.Value(t, text, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	telemetrytest.CheckLabels(t, text)
	telemetrytest.Promtool(t, text)
}

func TestObserveAllocs(t *testing.T) {
	m := New()
	m.Observe(engine.OpEvent, time.Millisecond, "http_503")
	if n := testing.AllocsPerRun(1000, func() {
		m.Observe(engine.OpEvent, time.Millisecond, "")
		m.Observe(engine.OpEvent, time.Millisecond, "http_503")
	}); n != 0 {
		t.Fatalf("Observe allocates %v times", n)
	}
}
