package engine

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// BenchmarkRequestPath measures the engine's own work per request of a
// session (describe the update, record its answer, schedule the next),
// without a driver: what the pooled request costs against a flow that
// held its Charge and Outcome.
func BenchmarkRequestPath(b *testing.B) {
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	cfg := Config{Scenario: sc, Driver: nopDriver{}}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	start := time.Now()
	agg := newAggregator(nil, start, 0, 0, time.Second)
	w := newWorker(0, 1, &cfg, nopWorker{}, first, start, newSchedule(100, 0), agg, 0, time.Second)
	f := w.getFlow()
	f.sub = 5
	f.ref = append(f.ref[:0], "imsi-001010000000006.0123456789abcdef"...)
	b.ReportAllocs()
	for b.Loop() {
		f.kind, f.op, f.step, f.due = scenario.KindData, OpUpdate, 1, 0
		w.send(f, 0)
		r := f.r
		r.out.Reset()
		r.out.Resolved, r.out.HasCharged, r.out.Charged = true, true, 3
		w.completed(f)
		w.heap.pop()
	}
}
