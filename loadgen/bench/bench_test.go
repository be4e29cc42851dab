package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/report"
)

func run(tps, sut float64, busy *float64) *Run {
	return &Run{OfferedTPS: tps, TPS: tps, SUTUsTxn: sut, BusyShare: busy, Host: Host{Run: "r", StealPercent: ptr(0.5)}}
}

// session is a complete, healthy session: CHF/floor per round 1.2, 1.5,
// 1.4; knee 4000 at 85% busy; highest 5000; 2x knee 3800.
func session() Input {
	fl := func(us float64) *Floor {
		return &Floor{RuntimeProfile: "production", UsPerExchange: us, Achieved: 1000}
	}
	return Input{
		Started: time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC), LightTPS: 1000,
		Rounds: []Round{{Floor: fl(100), CHF: run(1000, 120, nil)}, {Floor: fl(100), CHF: run(1000, 150, nil)}, {Floor: fl(100), CHF: run(1000, 140, nil)}},
		Sweep: Sweep{KneeTPS: 4000, Knee: run(4000, 100, ptr(0.85)),
			Steps: []*Run{run(3000, 110, nil), run(4000, 100, ptr(0.85)), {OfferedTPS: 5000, TPS: 5000, ErrorRate: 0.005}, {OfferedTPS: 6000, TPS: 5900, ErrorRate: 0.02}},
			Over:  &Run{OfferedTPS: 8000, TPS: 3800, SUTUsTxn: 90}, SLO: "p99 <= 10 ms"},
		H2load: H2load{Rate: 1000, LoadgenUs: ptr(30), H2loadUs: ptr(20)},
	}
}

func byName(r *Report) map[string]Ratio {
	m := map[string]Ratio{}
	for _, x := range r.Ratios {
		m[x.Name] = x
	}
	return m
}

func TestBuildSession(t *testing.T) {
	in := session()
	r := byName(Build(in, report.Provenance{}))
	want := map[string]struct {
		median  float64
		verdict string
	}{
		CHFOverFloor:      {1.4, Fail},
		BusyAtKnee:        {0.85, Pass},
		KneeOverHighest:   {0.8, Pass}, // 4000 / 5000: the 6000 step has 2% errors
		OverloadOverKnee:  {0.95, Pass},
		SUTKneeOverLight:  {100.0 / 140, Info},
		LoadgenOverH2load: {1.5, Info},
	}
	for name, w := range want {
		x := r[name]
		if x.Median == nil || !close(*x.Median, w.median) || x.Verdict != w.verdict {
			t.Errorf("%s: median %v verdict %s (%s), want %v %s", name, deref(x.Median), x.Verdict, x.Reason, w.median, w.verdict)
		}
	}
	c := r[CHFOverFloor]
	if !close(*c.Min, 1.2) || !close(*c.Max, 1.5) || len(c.PerRound) != 3 || len(c.Host) != 6 {
		t.Errorf("chf/floor spread %v..%v, %d values, %d hosts", *c.Min, *c.Max, len(c.PerRound), len(c.Host))
	}
}

func close(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestVerdictsAroundThresholds(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64
		want string
	}{
		{CHFOverFloor, 1.29, Pass}, {CHFOverFloor, 1.3, Pass}, {CHFOverFloor, 1.31, Fail},
		{BusyAtKnee, 0.79, Fail}, {BusyAtKnee, 0.80, Pass}, {BusyAtKnee, 0.81, Pass},
		{KneeOverHighest, 0.74, Fail}, {KneeOverHighest, 0.75, Pass}, {KneeOverHighest, 0.76, Pass},
		{OverloadOverKnee, 0.89, Fail}, {OverloadOverKnee, 0.90, Pass}, {OverloadOverKnee, 0.91, Pass},
		{SUTKneeOverLight, 5, Info}, {LoadgenOverH2load, 0.1, Info},
	} {
		x := finish(Ratio{Name: tc.name, PerRound: []*float64{ptr(tc.v)}})
		if x.Verdict != tc.want {
			t.Errorf("%s = %v: %s, want %s", tc.name, tc.v, x.Verdict, tc.want)
		}
	}
}

// TestCHFOverFloorRounds: the median is of the rounds, so one round's
// outlier does not decide; thresholds are met at and around 1.3.
func TestCHFOverFloorRounds(t *testing.T) {
	for _, tc := range []struct {
		sut  []float64
		want string
	}{
		{[]float64{129, 130, 200}, Pass},
		{[]float64{131, 131, 100}, Fail},
		{[]float64{130, 130}, Pass}, // even count: the mean of the middle two
		{[]float64{120, 141}, Fail}, // (1.2 + 1.41) / 2 = 1.305
	} {
		in := Input{LightTPS: 1000}
		for _, s := range tc.sut {
			in.Rounds = append(in.Rounds, Round{Floor: &Floor{UsPerExchange: 100}, CHF: run(1000, s, nil)})
		}
		if x := chfOverFloor(in); x.Verdict != tc.want {
			t.Errorf("%v: %s (median %v), want %s", tc.sut, x.Verdict, deref(x.Median), tc.want)
		}
	}
}

func TestUnmeasurable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratio  string
		change func(*Input)
		reason string
	}{
		{"no rounds", CHFOverFloor, func(in *Input) { in.Rounds = nil }, "no round ran"},
		{"floor failed", CHFOverFloor, func(in *Input) {
			for i := range in.Rounds {
				in.Rounds[i].Floor, in.Rounds[i].FloorErr = nil, "relay died"
			}
		}, "relay died"},
		{"zero floor", CHFOverFloor, func(in *Input) {
			for i := range in.Rounds {
				in.Rounds[i].Floor.UsPerExchange = 0
			}
		}, "the floor is zero"},
		{"interrupted", CHFOverFloor, func(in *Input) {
			for i := range in.Rounds {
				in.Rounds[i].CHF.Interrupted = true
			}
		}, "interrupted"},
		{"no knee", BusyAtKnee, func(in *Input) { in.Sweep.KneeTPS, in.Sweep.Knee = 0, nil }, "no knee"},
		{"no host cpu", BusyAtKnee, func(in *Input) { in.Sweep.Knee.BusyShare = nil }, "host_cpu"},
		{"sweep failed", KneeOverHighest, func(in *Input) { in.Sweep.Knee, in.Sweep.Err = nil, "boom" }, "the sweep failed: boom"},
		{"no 2x run", OverloadOverKnee, func(in *Input) { in.Sweep.Over, in.Sweep.OverErr = nil, "CHF did not start" }, "CHF did not start"},
		{"no light SUT", SUTKneeOverLight, func(in *Input) {
			for i := range in.Rounds {
				in.Rounds[i].CHF = nil
			}
		}, "light rate"},
		{"no h2load", LoadgenOverH2load, func(in *Input) { in.H2load = H2load{Note: "h2load not found in PATH"} }, "h2load not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := session()
			tc.change(&in)
			x := byName(Build(in, report.Provenance{}))[tc.ratio]
			if x.Verdict != Unmeasurable || x.Median != nil || !strings.Contains(x.Reason, tc.reason) {
				t.Errorf("%s: verdict %s median %v reason %q, want unmeasurable with %q", tc.ratio, x.Verdict, deref(x.Median), x.Reason, tc.reason)
			}
		})
	}
}

// TestPartialRounds: a round that failed does not hide the others'.
func TestPartialRounds(t *testing.T) {
	in := session()
	in.Rounds[1].CHF, in.Rounds[1].CHFErr = nil, "audit failed"
	x := chfOverFloor(in)
	if x.Verdict != Pass || x.PerRound[1] != nil || !close(*x.Median, 1.3) || !strings.Contains(x.Reason, "round 2: no CHF run: audit failed") {
		t.Errorf("got %s median %v reason %q", x.Verdict, deref(x.Median), x.Reason)
	}
}

func TestFromResult(t *testing.T) {
	res := &report.Result{OfferedTPS: 1000, TPS: 990, ErrorRate: 0.001, SUTCPUUsTxn: 200, LoadgenUsTxn: 30,
		Host:        &report.HostCPU{Cores: 2, BusyPercent: 150, StealPercent: 1.5},
		HostFreezes: &freeze.Summary{WorstMs: 12, FrozenPercent: 0.3}}
	r := FromResult("knee", res)
	if *r.BusyShare != 0.75 || *r.Host.StealPercent != 1.5 || *r.Host.FreezeWorstMs != 12 || r.Host.Run != "knee" || r.SUTUsTxn != 200 {
		t.Errorf("got %+v", r)
	}
	if r := FromResult("x", &report.Result{}); r.BusyShare != nil || r.Host.StealPercent != nil || r.Host.FreezeWorstMs != nil {
		t.Errorf("without host figures: %+v", r)
	}
	if FromResult("x", nil) != nil {
		t.Error("nil result: want nil")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	in := session()
	in.Rounds[2].Floor = nil
	in.H2load = H2load{Note: "h2load not found in PATH"}
	r := Build(in, report.Provenance{LoadgenVersion: "test", RuntimeProfile: "production"})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, &back) {
		t.Errorf("round trip differs:\n%+v\n%+v", r, &back)
	}
	for _, field := range []string{`"schema_version":1`, `"kind":"bench"`, `"ratios"`, `"verdict":"unmeasurable"`, `"provenance"`, `"highest_goodput_tps":5000`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("JSON lacks %s", field)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	in := session()
	in.H2load = H2load{Note: "h2load not found | skipped"}
	var b bytes.Buffer
	Build(in, report.Provenance{}).WriteMarkdown(&b)
	out := b.String()
	for _, want := range []string{"| chf_over_floor | 1.200, 1.500, 1.400 | 1.400 (1.200–1.500) | <= 1.3 | fail |", "busy_share_at_knee", "unmeasurable: h2load not found \\| skipped", "knee 4000 TPS"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, "\n| "); got != 1+len(Targets)+2 {
		t.Errorf("%d rows, want header + 6:\n%s", got, out)
	}
}
