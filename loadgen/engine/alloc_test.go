package engine

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// nopDriver is a Driver whose workers are never called.
type nopDriver struct{}

func (nopDriver) NewWorker() (driver.Worker, error) { return nopWorker{}, nil }
func (nopDriver) Targets() int                      { return 1 }
func (nopDriver) Close()                            {}

type nopWorker struct{}

func (nopWorker) Queue(*driver.Charge, *driver.Outcome, func(error)) error { return nil }
func (nopWorker) Flush()                                                   {}
func (nopWorker) Poll(time.Duration) error                                 { return nil }
func (nopWorker) Close()                                                   {}

// Describing a request and recording its outcome allocate nothing once
// the flow's buffers have grown: the engine's per-request path (the
// driver's is tested in its package).
func TestRequestPathAllocs(t *testing.T) {
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	cfg := Config{Scenario: sc, Driver: nopDriver{}}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	start := time.Now()
	agg := newAggregator(nil, start, 0, 0, time.Second)
	w := newWorker(0, 1, &cfg, nopWorker{}, first, start, newSchedule(100, 0), agg, 0, time.Second)
	f := w.getFlow()
	f.sub = 5
	ref := []byte("imsi-001010000000006.0123456789abcdef")
	for _, c := range []struct {
		kind scenario.Kind
		op   Op
	}{
		{scenario.KindData, OpCreate}, {scenario.KindData, OpUpdate}, {scenario.KindVoice, OpRelease},
		{scenario.KindSMS, OpEvent}, {scenario.KindBalance, OpBalance},
	} {
		one := func() {
			f.kind, f.op, f.step, f.due = c.kind, c.op, 1, 0
			f.ref = append(f.ref[:0], ref...)
			r := w.getReq(f)
			w.fillCharge(f)
			w.inflight++
			r.out.Reset()
			r.out.Resolved, r.out.HasCharged, r.out.Charged = true, true, 3
			if c.op == OpCreate {
				r.out.Ref = append(r.out.Ref, ref...)
			}
			w.completed(f)
			if r.out.Class != "" {
				t.Fatalf("%s: class %q", c.op, r.out.Class)
			}
			if f.r != nil {
				t.Fatalf("%s: the flow kept its request after the answer", c.op)
			}
			if len(w.heap) > 0 {
				w.heap.pop()
			} else if w.getFlow() != f {
				t.Fatal("the flow did not end")
			}
		}
		one()
		if n := testing.AllocsPerRun(200, one); n > 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", c.op, n)
		}
	}
}
