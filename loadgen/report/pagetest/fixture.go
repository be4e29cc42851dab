// Package pagetest makes synthetic but plausible results (a run, a sweep,
// a comparison) for the tests that render the report pages, and holds the
// headless-browser test of those pages (browser_test.go).
package pagetest

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/histogram"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/sweep"
)

// Run returns a result of a run at tps whose latency grows with load
// (base ms at low load, a knee near kneeTPS): 3 s ramp-up, 3 s warm-up,
// 15 s measured, 2 s drain, with per-second series, CPU per component,
// per-op counts, a few errors and thresholds checked.
func Run(seed uint64, label string, tps, kneeTPS, base float64) *report.Result {
	rng := rand.New(rand.NewPCG(seed, 7))
	const ramp, warm, measure, drain = 3, 3, 15, 2
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := &engine.Stats{Started: start, MeasureStart: start.Add((ramp + warm) * time.Second),
		MeasureEnd: start.Add((ramp + warm + measure) * time.Second), Errors: map[string]int64{}}
	for i := range st.Ops {
		st.Ops[i].Latency, st.Ops[i].Service, st.Ops[i].SchedLag = histogram.New(), histogram.New(), histogram.New()
	}
	load := tps / kneeTPS
	scale := base / math.Max(0.05, 1-math.Min(load, 0.97)) // queueing: grows towards the knee
	mix := []float64{0.3, 0.3, 0.2, 0.1, 0.1}
	classes := []string{"http_500", "timeout", "http_404"}
	var series []report.Point
	for sec := 0; sec < ramp+warm+measure+drain; sec++ {
		phase := "measure"
		rate := tps
		switch {
		case sec < ramp:
			phase, rate = "ramp-up", tps*float64(sec+1)/ramp
		case sec < ramp+warm:
			phase = "warm-up"
		case sec >= ramp+warm+measure:
			phase, rate = "drain", 0
		}
		n := int(rate)
		if phase == "drain" {
			n = int(tps / 20 / float64(sec-ramp-warm-measure+1))
		}
		sh, ssvc, slag := histogram.New(), histogram.New(), histogram.New()
		pt := report.Point{Tick: engine.Tick{Second: sec, Phase: phase, Offered: int64(rate), OpCompleted: map[string]int64{}, OpErrors: map[string]int64{}},
			CPU: map[string]float64{"cgw": 4 + 30*rate/1000, "ocp": 3 + 22*rate/1000, "abm": 6 + 40*rate/1000*(1+load/2), "loadgen": 2 + 12*rate/1000}}
		// record a sample of each second (1 in 10) to keep the fixture fast
		for i := 0; i < n; i++ {
			op := pick(rng, mix)
			svc := time.Duration((0.2 + rng.ExpFloat64()*scale) * float64(time.Millisecond))
			if rng.IntN(2000) == 0 {
				svc *= 20 // a rare slow answer: the tail of the spectrum
			}
			lag := time.Duration(rng.ExpFloat64() * 0.02 * float64(time.Millisecond) * (1 + 10*load*load))
			lat := svc + lag
			failed := rng.Float64() < 0.002*(1+load)
			pt.Completed++
			pt.OpCompleted[engine.Op(op).String()]++
			if failed {
				pt.Errors++
				pt.OpErrors[engine.Op(op).String()]++
				c := classes[rng.IntN(len(classes))]
				if pt.ErrorClasses == nil {
					pt.ErrorClasses = map[string]int64{}
				}
				pt.ErrorClasses[c]++
			}
			if i%10 == 0 {
				sh.Record(lat)
				ssvc.Record(svc)
				slag.Record(lag)
			}
			if phase == "measure" {
				o := &st.Ops[op]
				o.Count++
				o.Latency.Record(lat)
				o.Service.Record(svc)
				o.SchedLag.Record(lag)
				st.Offered++
				if failed {
					o.Errors++
					st.Errors[classes[rng.IntN(len(classes))]]++
				}
			}
		}
		s, sv, sl := sh.Summary(), ssvc.Summary(), slag.Summary()
		pt.P50, pt.P90, pt.P99, pt.P999, pt.Max = s.P50, s.P90, s.P99, s.P999, s.Max
		pt.ServiceP50, pt.ServiceP99, pt.SchedLagP99 = sv.P50, sv.P99, sl.P99
		series = append(series, pt)
	}
	cpuSec := map[string]float64{}
	for _, p := range series {
		if p.Phase == "measure" {
			for k, v := range p.CPU {
				cpuSec[k] += v / 100
			}
		}
	}
	sc := scenario.Default()
	sc.Load.TPS = tps
	r, err := report.Build(st, sc, []string{"127.0.0.1:8080"}, "h2c", cpuSec, audit.Result{OK: true, Checked: 500, Touched: 500, Charged: 123456, Debited: 123456}, series)
	if err != nil {
		panic("BUG: fixture: " + err.Error())
	}
	r.Label = label
	r.Provenance = report.Provenance{LoadgenVersion: "v0.9.0-test", CHFVersion: "v0.9.0-test", GoVersion: "go1.25",
		CommandLine:  []string{"loadgen", "run", "--target", "127.0.0.1:8080", "--rate", "1000", "--label", label},
		ScenarioHash: "3f2a9c1d", Host: "testhost", Kernel: "linux 6.1", CPUModel: "Test CPU @ 3.0GHz", CPUs: 8}
	var ts []scenario.Threshold
	for _, e := range []string{"p99<10ms", "errors<1%"} {
		t, err := scenario.ParseThreshold(e)
		if err != nil {
			panic("BUG: fixture: " + err.Error())
		}
		ts = append(ts, t)
	}
	r.CheckThresholds(ts)
	return r
}

func pick(rng *rand.Rand, mix []float64) int {
	x := rng.Float64()
	for i, m := range mix {
		if x < m {
			return i
		}
		x -= m
	}
	return len(mix) - 1
}

// Sweep returns a sweep from 500 to 3000 TPS in steps of 500 against a
// system whose knee is near 2600 TPS, with a 5 ms p99 SLO.
func Sweep(seed uint64, label string, base float64) *sweep.Result {
	slo := sweep.SLO{P99Ms: 5, MaxErrorRate: 0.01, MaxLateRate: 0.01}
	res := &sweep.Result{SchemaVersion: report.SchemaVersion, Kind: sweep.Kind, Label: label, SLO: slo}
	for tps := 500.0; tps <= 3000; tps += 500 {
		r := Run(seed+uint64(tps), label, tps, 2600, base)
		st := sweep.Step{OfferedTPS: tps, Result: r}
		st.Pass, st.Reason = slo.Check(r)
		res.Steps = append(res.Steps, st)
		if st.Pass && res.FirstFailTPS == 0 {
			res.KneeTPS = tps
		} else if !st.Pass && res.FirstFailTPS == 0 {
			res.FirstFailTPS, res.FirstFailReason = tps, st.Reason
		}
	}
	return res
}
