package abm

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/chf"
)

// TestAerospikeMetrics checks that the charging path's Aerospike calls
// are counted by operation and result, and lints the exposition.
func TestAerospikeMetrics(t *testing.T) {
	cl := startStore(t)
	svc := New(cl, Config{})
	get := map[string]string{"operation": "get", "result": "key_not_found"}
	before := telemetrytest.Gather(t)
	var resp chf.ChargeResponse
	req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001019999999998", Session: "x", Seq: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Apply(ctx, &req, &resp); err != nil {
		t.Fatal(err)
	}
	after := telemetrytest.Gather(t)
	if d := telemetrytest.Value(t, after, "chf_abm_aerospike_duration_seconds", get) -
		telemetrytest.Value(t, before, "chf_abm_aerospike_duration_seconds", get); d != 1 {
		t.Errorf("get/key_not_found grew by %v, want 1", d)
	}
	telemetrytest.CheckLabels(t, after)
	telemetrytest.Promtool(t, after)
}

func TestObserveASAllocs(t *testing.T) {
	resolveASMetrics()
	start := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		observeAS(asPut, nil, start)
		asBatch[asBatchGet].Observe(3)
	}); n != 0 {
		t.Fatalf("observeAS allocates %v times", n)
	}
}
