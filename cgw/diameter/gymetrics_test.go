package diameter

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// TestGyRequestMetrics checks the per-request Gy counter and histogram,
// labelled by CC-Request-Type and Result-Code, and lints them.
func TestGyRequestMetrics(t *testing.T) {
	f := newFakeCharger()
	f.add(supi1, 100000)
	s := startServer(t, Config{}, f)
	c := dial(t, s.Addr(), "pgw1.loadgen.test")
	labels := map[string]string{"request_type": "event", "result_code": "2001"}
	before := telemetrytest.Gather(t)
	for range 3 {
		expectResult(t, do(t, c, &gy.Request{SessionID: c.NewSessionID(), Type: gy.Event, IMSI: imsi1,
			HasAction: true, Action: gy.CheckBalance}), 2001)
	}
	after := telemetrytest.Gather(t)
	for _, name := range []string{"chf_gy_requests_total", "chf_gy_request_duration_seconds"} {
		if d := telemetrytest.Value(t, after, name, labels) - telemetrytest.Value(t, before, name, labels); d != 3 {
			t.Errorf("%s{event,2001} grew by %v, want 3", name, d)
		}
	}
	telemetrytest.CheckLabels(t, after)
	telemetrytest.Promtool(t, after)
}

func TestObserveGyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	start := time.Now()
	observeGy(wire.RequestInitial, wire.ResultTooBusy, start)
	if n := testing.AllocsPerRun(1000, func() { observeGy(wire.RequestInitial, wire.ResultTooBusy, start) }); n != 0 {
		t.Fatalf("observeGy allocates %v times", n)
	}
}
