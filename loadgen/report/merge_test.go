package report

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// sample is one synthetic completed request.
type sample struct {
	op       engine.Op
	lat, svc time.Duration
	err      bool
}

func statsOf(samples []sample, dur time.Duration) *engine.Stats {
	start := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	st := &engine.Stats{Started: start, MeasureStart: start, MeasureEnd: start.Add(dur), Errors: map[string]int64{}}
	for i := range st.Ops {
		st.Ops[i].Latency, st.Ops[i].Service = histogram.New(), histogram.New()
	}
	for _, s := range samples {
		o := &st.Ops[s.op]
		o.Count++
		o.Latency.Record(s.lat)
		o.Service.Record(s.svc)
		if s.err {
			o.Errors++
			st.Errors["http_500"]++
		}
		st.Offered++
	}
	return st
}

func TestMergeEqualsUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var all []sample
	shards := make([][]sample, 3)
	for i := 0; i < 20000; i++ {
		s := sample{op: engine.Op(rng.IntN(int(engine.NumOps))), lat: time.Duration(rng.ExpFloat64() * 2e6), err: rng.IntN(100) == 0}
		s.svc = s.lat / 2
		all = append(all, s)
		shards[i%3] = append(shards[i%3], s)
	}
	sc := scenario.Default()
	mk := func(ss []sample, cpu map[string]float64) *Result {
		r, err := Build(statsOf(ss, 10*time.Second), sc, []string{"a:1"}, "h2c", cpu, audit.Result{OK: true, Checked: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var parts []*Result
	for _, ss := range shards {
		parts = append(parts, mk(ss, map[string]float64{"cgw": 5, LoadgenComponent: 1}))
	}
	merged, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	union := mk(all, map[string]float64{"cgw": 5, LoadgenComponent: 3})
	if merged.LatencyMs != union.LatencyMs || merged.ServiceMs != union.ServiceMs || merged.JitterCV != union.JitterCV {
		t.Fatalf("latency: merged %+v, union %+v", merged.LatencyMs, union.LatencyMs)
	}
	if merged.Transactions != union.Transactions || merged.Errors != union.Errors || merged.TPS != union.TPS || merged.Offered != union.Offered {
		t.Fatalf("counts: merged %d/%d/%v, union %d/%d/%v", merged.Transactions, merged.Errors, merged.TPS, union.Transactions, union.Errors, union.TPS)
	}
	for name, o := range union.Ops {
		if merged.Ops[name] != o {
			t.Fatalf("op %s: merged %+v, union %+v", name, merged.Ops[name], o)
		}
	}
	if merged.SUTCPUUsTxn != union.SUTCPUUsTxn || merged.LoadgenUsTxn != union.LoadgenUsTxn {
		t.Fatalf("CPU per txn: merged %v/%v, union %v/%v", merged.SUTCPUUsTxn, merged.LoadgenUsTxn, union.SUTCPUUsTxn, union.LoadgenUsTxn)
	}
	if !merged.Audit.OK || merged.Audit.Checked != 3 {
		t.Fatalf("audit %+v", merged.Audit)
	}
}
