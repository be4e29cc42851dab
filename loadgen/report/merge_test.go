package report

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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
	shed     bool // refused for overload (an error too)
}

func statsOf(samples []sample, dur time.Duration) *engine.Stats {
	start := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	st := &engine.Stats{Started: start, MeasureStart: start, MeasureEnd: start.Add(dur), Errors: map[string]int64{}}
	for i := range st.Ops {
		st.Ops[i].Latency, st.Ops[i].Service, st.Ops[i].Admitted = histogram.New(), histogram.New(), histogram.New()
	}
	for _, s := range samples {
		o := &st.Ops[s.op]
		o.Count++
		o.Latency.Record(s.lat)
		o.Service.Record(s.svc)
		switch {
		case s.shed:
			o.Errors++
			o.Shed++
			st.Errors["http_503"]++
		case s.err:
			o.Errors++
			st.Errors["http_500"]++
		}
		if !s.shed {
			o.Admitted.Record(s.lat)
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
		if rng.IntN(10) == 0 { // shed, and slow: the admitted p99 must leave it out
			s.shed, s.lat = true, 500*time.Millisecond+s.lat
		}
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
	for i, ss := range shards {
		r := mk(ss, map[string]float64{"cgw": 5, LoadgenComponent: 1})
		r.Shard = fmt.Sprintf("%d/3", i)
		r.Hops = []Hop{{Service: "cgw", Hop: "request", Count: int64(100 * (i + 1)), P99Ms: float64(i + 1)}}
		parts = append(parts, r)
	}
	merged, err := Merge(MergeOptions{}, parts...)
	if err != nil {
		t.Fatal(err)
	}
	// The shards' hops (quantiles of the services' histograms, each
	// over its own window) are not merged, and the merge says so.
	if len(merged.Hops) != 0 || !strings.Contains(merged.HopsNote, "each shard") {
		t.Fatalf("merged hops %+v, note %q", merged.Hops, merged.HopsNote)
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
	if merged.AdmittedLatencyMs == nil || union.AdmittedLatencyMs == nil || *merged.AdmittedLatencyMs != *union.AdmittedLatencyMs ||
		merged.Shed != union.Shed || merged.ShedShare != union.ShedShare {
		t.Fatalf("admitted: merged %+v shed %d, union %+v shed %d", merged.AdmittedLatencyMs, merged.Shed, union.AdmittedLatencyMs, union.Shed)
	}
	if share := union.ShedShare; share < 0.08 || share > 0.12 || union.AdmittedLatencyMs.P99 >= 500 || union.LatencyMs.P99 < 500 {
		t.Fatalf("shed share %.3f, admitted p99 %.1f ms, all p99 %.1f ms: want about 0.1, the slow shed answers in the second only",
			share, union.AdmittedLatencyMs.P99, union.LatencyMs.P99)
	}
	var text strings.Builder
	union.WriteSummary(&text)
	if !strings.Contains(text.String(), "admitted ms (shed excluded)") {
		t.Fatalf("summary lacks the admitted latency:\n%s", text.String())
	}
	if merged.SUTCPUUsTxn != union.SUTCPUUsTxn || merged.LoadgenUsTxn != union.LoadgenUsTxn {
		t.Fatalf("CPU per txn: merged %v/%v, union %v/%v", merged.SUTCPUUsTxn, merged.LoadgenUsTxn, union.SUTCPUUsTxn, union.LoadgenUsTxn)
	}
	if !merged.Audit.OK || merged.Audit.Checked != 3 {
		t.Fatalf("audit %+v", merged.Audit)
	}
}

// Merge refuses inputs that are not the distinct shards of one run, and
// notes a missing shard as incomplete.
func TestMergeRefuses(t *testing.T) {
	sc := scenario.Default()
	mk := func(shard string, hash string, started time.Duration) *Result {
		t.Helper()
		st := statsOf([]sample{{op: engine.OpCreate, lat: time.Millisecond, svc: time.Millisecond}}, 10*time.Second)
		st.Started = st.Started.Add(started)
		r, err := Build(st, sc, []string{"a:1"}, "h2c", nil, audit.Result{Skipped: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Shard, r.Provenance.ScenarioHash = shard, hash
		return r
	}
	refuse := func(what, want string, opts MergeOptions, in ...*Result) {
		t.Helper()
		_, err := Merge(opts, in...)
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err = %v, want ErrMerge saying %q", what, err, want)
		}
	}
	a, b := mk("0/2", "h1", 0), mk("1/2", "h1", time.Second)
	refuse("the same shard twice", "both shard 0/2", MergeOptions{}, a, mk("0/2", "h1", 0))
	refuse("the same file twice", "both shard 0/2", MergeOptions{}, a, a)
	refuse("different shard counts", "one of 2 shards", MergeOptions{}, a, mk("1/3", "h1", 0))
	refuse("different scenarios", "different scenarios", MergeOptions{}, a, mk("1/2", "h2", 0))
	refuse("not a shard", "not a shard result", MergeOptions{}, a, mk("", "h1", 0))
	refuse("start times 6s apart", "apart", MergeOptions{}, a, mk("1/2", "h1", 6*time.Second))
	refuse("start times 2s apart, 1s tolerated", "tolerance 1s", MergeOptions{StartTolerance: time.Second}, a, mk("1/2", "h1", 2*time.Second))
	m, err := Merge(MergeOptions{}, a, b)
	if err != nil || len(m.Incomplete) != 0 || m.Transactions != 2 {
		t.Fatalf("two shards of one run: %v, incomplete %v, %d transactions", err, m.Incomplete, m.Transactions)
	}
	m, err = Merge(MergeOptions{}, a)
	if err != nil || len(m.Incomplete) != 1 || !strings.Contains(m.Incomplete[0], "missing 1/2") {
		t.Fatalf("one of two shards: %v, incomplete %v", err, m.Incomplete)
	}
	b.Interrupted, b.InterruptedBy = true, "SIGINT"
	if m, err = Merge(MergeOptions{}, a, b); err != nil || !m.Interrupted {
		t.Fatalf("an interrupted shard: %v, merged interrupted=%v", err, m.Interrupted)
	}
}

// Thresholds judge the result's figures; a run without answers fails
// every figure it lacks; the defaults catch a run with no transaction
// and one with 2% errors.
func TestCheckThresholds(t *testing.T) {
	sc := scenario.Default()
	var ss []sample
	for i := range 1000 {
		ss = append(ss, sample{op: engine.OpCreate, lat: time.Duration(1+i%10) * time.Millisecond, svc: time.Millisecond, err: i%50 == 0})
	}
	r, err := Build(statsOf(ss, 10*time.Second), sc, nil, "h2c", nil, audit.Result{Skipped: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(r *Result, expr string, pass bool) {
		t.Helper()
		th, err := scenario.ParseThreshold(expr)
		if err != nil {
			t.Fatal(err)
		}
		failed := r.CheckThresholds([]scenario.Threshold{th})
		if got := len(failed) == 0; got != pass || r.ThresholdsOK != pass || r.Thresholds[0].Pass != pass {
			t.Fatalf("%s on p99 %.3f ms, errors %.4f, %v TPS of %v offered: pass %v, want %v", expr, r.LatencyMs.P99, r.ErrorRate, r.TPS, r.OfferedTPS, got, pass)
		}
	}
	check(r, "p99<11ms", true)
	check(r, "p99<9ms", false)
	check(r, "errors<1%", false) // 2%
	check(r, "errors<3%", true)
	check(r, "tps>=0.97*offered", true) // 98 of 100 offered per second
	check(r, "tps>=0.99*offered", false)
	check(r, "late<1%", true)
	defaults := sc.EffectiveThresholds(false)
	if failed := r.CheckThresholds(defaults); len(failed) != 1 || failed[0].Metric != "errors" {
		t.Fatalf("defaults on 2%% errors: failed %v", failed)
	}
	empty, err := Build(statsOf(nil, 10*time.Second), sc, nil, "h2c", nil, audit.Result{Skipped: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	failed := empty.CheckThresholds(defaults)
	if len(failed) != 2 || !failed[1].NA {
		t.Fatalf("defaults on a run without transactions: failed %v", failed)
	}
	check(empty, "p99<1s", false)
	var md strings.Builder
	empty.CheckThresholds(defaults)
	empty.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| `errors<=1%` | n/a | 1.000% | **FAIL** |") {
		t.Fatalf("markdown lacks the verdict:\n%s", md.String())
	}
}

// Answers saying the subscriber is unknown are counted, and a warning
// naming the flags appears once they are 10% of the transactions.
func TestUnknownSubscriberWarning(t *testing.T) {
	sc := scenario.Default()
	var ss []sample
	for i := range 100 {
		ss = append(ss, sample{op: engine.OpCreate, lat: time.Millisecond, svc: time.Millisecond, err: i < 95})
	}
	st := statsOf(ss, time.Second)
	st.Errors = map[string]int64{"http_404": 90, "timeout": 5}
	r, err := Build(st, sc, nil, "h2c", nil, audit.Result{Skipped: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.UnknownSubscriber != 90 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "--subscribers") || !strings.Contains(r.Warnings[0], "--accounts") {
		t.Fatalf("unknown %d, warnings %q", r.UnknownSubscriber, r.Warnings)
	}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "WARNING: 90 of 100 transactions (90.0%)") {
		t.Fatalf("summary lacks the warning:\n%s", sum.String())
	}
	st.Errors = map[string]int64{"gy_5030": 5, "timeout": 90}
	if r, _ = Build(st, sc, nil, "gy", nil, audit.Result{Skipped: true}, nil); r.UnknownSubscriber != 5 || len(r.Warnings) != 0 {
		t.Fatalf("5%% unknown: %d, warnings %q", r.UnknownSubscriber, r.Warnings)
	}
}

func TestMergeChecksStartAt(t *testing.T) {
	sc := scenario.Default()
	mk := func(shard, at string) *Result {
		r, err := Build(statsOf([]sample{{op: engine.OpBalance, lat: time.Millisecond, svc: time.Millisecond}}, time.Second), sc, []string{"a:1"}, "h2c", nil, audit.Result{Skipped: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Shard, r.Provenance.ScenarioHash = shard, "h"
		if at != "" {
			r.Provenance.Flags = map[string]string{StartAtFlag: at}
		}
		return r
	}
	const at = "2026-12-01T10:00:00Z"
	m, err := Merge(MergeOptions{}, mk("0/2", at), mk("1/2", at))
	if err != nil || len(m.Incomplete) != 0 || len(m.Warnings) != 0 {
		t.Errorf("same --start-at: %v, incomplete %q, warnings %q", err, m.Incomplete, m.Warnings)
	}
	if _, err := Merge(MergeOptions{}, mk("0/2", at), mk("1/2", "2026-12-01T10:05:00Z")); !errors.Is(err, ErrMerge) {
		t.Errorf("different --start-at merged: %v", err)
	}
	m, err = Merge(MergeOptions{}, mk("0/2", at), mk("1/2", ""))
	if err != nil || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "without --start-at") {
		t.Errorf("a shard without --start-at: %v, warnings %q", err, m.Warnings)
	}
}

// TestMergeRuntimeProfile: merged shards keep the CHF runtime profile
// they agree on (a shard stating none does not disagree); different ones
// are listed and warned about. The summary and the provenance table show
// it.
func TestMergeRuntimeProfile(t *testing.T) {
	sc := scenario.Default()
	mk := func(shard, profile string) *Result {
		r, err := Build(statsOf([]sample{{op: engine.OpBalance, lat: time.Millisecond, svc: time.Millisecond}}, time.Second), sc, []string{"a:1"}, "h2c", nil, audit.Result{Skipped: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Shard, r.Provenance.ScenarioHash, r.Provenance.RuntimeProfile = shard, "h", profile
		r.Provenance.Flags = map[string]string{StartAtFlag: "2026-12-01T10:00:00Z"}
		return r
	}
	f := func(want string, warn bool, profiles ...string) {
		t.Helper()
		var in []*Result
		for i, p := range profiles {
			in = append(in, mk(fmt.Sprintf("%d/%d", i, len(profiles)), p))
		}
		m, err := Merge(MergeOptions{}, in...)
		if err != nil {
			t.Fatal(err)
		}
		warned := len(m.Warnings) == 1 && strings.Contains(m.Warnings[0], "different CHF runtime profiles")
		if m.Provenance.RuntimeProfile != want || warned != warn || !warn && len(m.Warnings) != 0 {
			t.Errorf("%q: merged %q, warnings %q; want %q, warning %v", profiles, m.Provenance.RuntimeProfile, m.Warnings, want, warn)
		}
		var sum, md strings.Builder
		m.WriteSummary(&sum)
		m.WriteProvenance(&md)
		if want != "" && !strings.Contains(sum.String(), "chf runtime profile "+want+"\n") {
			t.Errorf("summary lacks the profile %q:\n%s", want, sum.String())
		}
		if row := "| chf runtime profile | " + orNA(want) + " |"; !strings.Contains(md.String(), row) {
			t.Errorf("provenance lacks %q:\n%s", row, md.String())
		}
	}
	f("lab", false, "lab", "lab")
	f("production", false, "production", "", "production")
	f("", false, "", "")
	f("production,lab", true, "production", "lab", "production")
}
