package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/abm/record"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func result() *report.Result {
	r := &report.Result{Transactions: 1_000_000, TPS: 10_000, Scenario: scenario.Default()}
	r.Scenario.Subscribers.Count = 1_000_000
	// µs/txn: cgw 40, ocp 30, abm 25, aslite 10, loadgen 50
	r.CPUSeconds = map[string]float64{"cgw": 40, "ocp": 30, "abm": 25, "aslite": 10, "loadgen": 50}
	r.Memory = map[string]cpu.Memory{"aslite": {RSS: 300 << 20}}
	r.Sessions = &report.Sessions{OpenEnd: 100_000}
	return r
}

func TestPlan(t *testing.T) {
	o := Defaults()
	o.TPS, o.Subscribers = 70_000, 20_000_000
	p, err := Make(result(), "r.json", o)
	if err != nil {
		t.Fatal(err)
	}
	// cores = 70,000 × µs / 1e6 / 0.6; pods of 2 cores, rounded up
	want := []Row{
		{"cgw", 40, 70_000 * 40 / 1e6 / 0.6, 3},
		{"ocp", 30, 70_000 * 30 / 1e6 / 0.6, 2},
		{"abm", 25, 70_000 * 25 / 1e6 / 0.6, 2},
		{"aslite", 10, 70_000 * 10 / 1e6 / 0.6, 0},
	}
	if len(p.Rows) != len(want) {
		t.Fatalf("rows %+v", p.Rows)
	}
	for i, w := range want {
		g := p.Rows[i]
		if g.Component != w.Component || abs(g.UsPerTxn-w.UsPerTxn) > 1e-9 || abs(g.Cores-w.Cores) > 1e-9 || g.Pods != w.Pods {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	if p.CHFCores != 14 {
		t.Errorf("CHF cores %v, want (3+2+2)×2", p.CHFCores)
	}
	// the default scenario's steady state at 70,000 TPS: 70 times what
	// it has open at its 1,000
	sc := scenario.Default()
	open := sc.OpenSessions() * 70
	if abs(p.OpenSessions-open) > 1e-6 || p.MeasuredOpen != 100_000 {
		t.Errorf("open sessions %v (measured %d), want %v", p.OpenSessions, p.MeasuredOpen, open)
	}
	rec := 128 + open/20e6*record.SessionRecordBytes
	if abs(p.RecordBytes-rec) > 1e-9 || abs(p.MemoryBytes-20e6*(64+rec)*2) > 1 {
		t.Errorf("record %v memory %v", p.RecordBytes, p.MemoryBytes)
	}
	if p.Nodes != 2 { // 7.6 GiB at 60% of 64 GiB: one node's worth, but two replicas
		t.Errorf("nodes %d", p.Nodes)
	}
	var b bytes.Buffer
	p.Write(&b)
	for _, s := range []string{"plan for 70000 TPS at 60%", "cgw 3, ocp 2, abm 2", "Assumptions:", "× 2 replicas"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, b.String())
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	f := func(mut func(*report.Result, *Options), field string) {
		t.Helper()
		r, o := result(), Defaults()
		o.TPS = 1000
		mut(r, &o)
		_, err := Make(r, "r.json", o)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), field) {
			t.Fatalf("error %v, want one naming %s", err, field)
		}
	}
	f(func(_ *report.Result, o *Options) { o.TPS = -1 }, "--tps")
	f(func(_ *report.Result, o *Options) { o.Utilisation = 1.5 }, "--utilisation")
	f(func(_ *report.Result, o *Options) { o.PodCores = 0 }, "--pod-cores")
	f(func(r *report.Result, _ *Options) { delete(r.CPUSeconds, "ocp") }, "ocp")
	f(func(r *report.Result, _ *Options) { r.Transactions = 0 }, "no completed transaction")
	f(func(_ *report.Result, o *Options) { o.TPS = 1e99 }, "--tps")
	f(func(_ *report.Result, o *Options) { o.Replication = 0 }, "--replication")
	f(func(_ *report.Result, o *Options) { o.Subscribers = -1 }, "--subscribers")
	f(func(_ *report.Result, o *Options) { o.NodeMemory = 0 }, "--node-memory")
	// A result with absurd figures is refused rather than planned as 2 pods.
	f(func(r *report.Result, _ *Options) { r.CPUSeconds["cgw"] = 1e300 }, "pods")
	f(func(r *report.Result, _ *Options) { r.CPUSeconds["abm"] = -5 }, "negative CPU figure for abm")
	f(func(_ *report.Result, o *Options) { o.Subscribers, o.IndexBytes, o.NodeMemory = 1e12, 1<<20, 1 }, "nodes")
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
