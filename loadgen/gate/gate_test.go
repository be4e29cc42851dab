package gate

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// trials draws n values around mean with relative noise sd.
func trials(rng *rand.Rand, n int, mean, sd float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean * (1 + sd*rng.NormFloat64())
	}
	return out
}

// pairedTrials draws n pairs sharing a per-pair machine factor (drift of
// relative size drift) with independent noise sd on each trial.
func pairedTrials(rng *rand.Rand, n int, base, cand, drift, sd float64) (b, c []float64) {
	for range n {
		m := 1 + drift*rng.NormFloat64()
		b = append(b, base*m*(1+sd*rng.NormFloat64()))
		c = append(c, cand*m*(1+sd*rng.NormFloat64()))
	}
	return b, c
}

func TestDecisions(t *testing.T) {
	cases := []struct {
		name       string
		m          Metric
		base, cand float64 // means
		noise      float64
		n          int
		want       Verdict
	}{
		{"clear 15% p99 regression", Metric{Name: "p99_ms"}, 10, 11.5, 0.01, 7, Regression},
		{"clear 15% TPS regression", TPS, 10000, 8500, 0.01, 7, Regression},
		{"clear 15% CPU regression", SUTCPUTxn, 100, 115, 0.01, 7, Regression},
		{"pure noise", SUTCPUTxn, 100, 100, 0.01, 7, Pass},
		{"noise wider than the tolerance", Metric{Name: "p99_ms"}, 10, 10, 0.15, 7, Unmeasurable},
		{"improvement", P99, 10, 8, 0.01, 7, Pass},
		{"TPS improvement", TPS, 10000, 12000, 0.01, 7, Pass},
		{"small regression within tolerance", SUTCPUTxn, 100, 102, 0.005, 7, Pass},
		{"noisy improvement", SUTCPUTxn, 100, 80, 0.1, 12, Pass},
	}
	for i, c := range cases {
		for _, paired := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: " unpaired", true: " paired"}[paired], func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(i), 42))
				d, err := Decide(c.m, trials(rng, c.n, c.base, c.noise), trials(rng, c.n, c.cand, c.noise), Config{Tolerance: 0.05, Paired: paired})
				if err != nil {
					t.Fatal(err)
				}
				if d.Verdict != c.want {
					t.Fatalf("verdict %s (%s), want %s; ratio %.3f [%.3f, %.3f]", d.Verdict, d.Reason, c.want, d.Ratio, d.Low, d.High)
				}
			})
		}
	}
}

// Pure noise must never fail, whatever the draw, paired or not, with or
// without a drift shared by the members of a pair.
func TestNoiseNeverFails(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		b, c := pairedTrials(rng, 12, 800, 800, 0.1, 0.03)
		for _, paired := range []bool{false, true} {
			d, err := Decide(SUTCPUTxn, b, c, Config{Paired: paired})
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict == Regression {
				t.Fatalf("seed %d paired=%v: noise judged a regression: %s", seed, paired, d.Reason)
			}
		}
	}
}

// Pairing cancels a drift the two members of a pair share: with 10%
// trial-to-trial drift and 2% noise of its own, the paired interval is
// less than half as wide as the unpaired one, a 10% regression is caught
// and no change passes.
func TestPairingCancelsDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	b, c := pairedTrials(rng, 12, 800, 880, 0.1, 0.02)
	un, err := Decide(SUTCPUTxn, b, c, Config{})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := Decide(SUTCPUTxn, b, c, Config{Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	if pd.Noise > un.Noise/2 {
		t.Fatalf("paired noise ±%.3f, unpaired ±%.3f: pairing did not cancel the drift", pd.Noise, un.Noise)
	}
	if pd.Verdict != Regression || math.Abs(pd.Ratio-1.10) > 0.03 {
		t.Fatalf("paired: %s ratio %.3f (%s), want a regression near 1.10", pd.Verdict, pd.Ratio, pd.Reason)
	}
	b, c = pairedTrials(rng, 12, 800, 800, 0.1, 0.02)
	pd, err = Decide(SUTCPUTxn, b, c, Config{Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	if pd.Verdict != Pass {
		t.Fatalf("paired, no change: %s (%s), want pass", pd.Verdict, pd.Reason)
	}
}

// One wild pair (a trial hit by a burst of other work) moves a rank-based
// interval by one rank only: a clean 12% regression is still caught and
// no change still passes.
func TestOutlierPair(t *testing.T) {
	for _, cand := range []float64{800, 896} {
		rng := rand.New(rand.NewPCG(3, 3))
		b, c := pairedTrials(rng, 12, 800, cand, 0.05, 0.02)
		c[4] *= 1.6 // the candidate's 5th trial ran beside a compiler
		d, err := Decide(SUTCPUTxn, b, c, Config{Paired: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Pass
		if cand > 800 {
			want = Regression
		}
		if d.Verdict != want {
			t.Fatalf("candidate %v: %s (%s), want %s", cand, d.Verdict, d.Reason, want)
		}
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		b, lo, hi float64
		want      Verdict
	}{
		{1.12, 1.06, 1.18, Regression},   // clear, beyond 5%
		{1.12, 1.01, 1.30, Regression},   // clear and beyond, even if noisy
		{1.04, 1.02, 1.06, Pass},         // clear but within the tolerance, narrow
		{1.00, 0.92, 1.09, Unmeasurable}, // ±8.5% around no change
		{0.97, 0.90, 1.04, Pass},         // wide, but a regression beyond 5% is ruled out
		{0.85, 0.75, 0.95, Pass},         // improvement
		{1.06, 0.98, 1.14, Unmeasurable}, // beyond the tolerance but not clear
		{1.03, 0.99, 1.08, Pass},         // reaches past 5% but the noise is narrower than it
	}
	for _, c := range cases {
		if v, why := judge(c.b, c.lo, c.hi, 0.05); v != c.want {
			t.Errorf("judge(%v, [%v, %v]) = %s (%s), want %s", c.b, c.lo, c.hi, v, why, c.want)
		}
	}
}

// A metric that clearly regressed fails the gate even when another is
// unmeasurable; an unmeasurable metric makes the gate unmeasurable only
// when nothing regressed; informational metrics never decide.
func TestEvaluateRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	noisyB, noisyC := pairedTrials(rng, 12, 5, 5, 0, 0.4)
	cpuB, cpuC := pairedTrials(rng, 12, 800, 900, 0.05, 0.01)
	flatB, flatC := pairedTrials(rng, 12, 800, 800, 0.05, 0.01)
	p99 := Metric{Name: "p99_ms", Tolerance: 0.05}
	cfg := Config{Paired: true}

	r, err := Evaluate([]Metric{p99, SUTCPUTxn}, map[string][]float64{"p99_ms": noisyB, "sut_cpu_us_per_txn": cpuB},
		map[string][]float64{"p99_ms": noisyC, "sut_cpu_us_per_txn": cpuC}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Decisions[0].Verdict != Unmeasurable || r.Verdict != Regression {
		t.Fatalf("p99 %s, gate %s; want p99 unmeasurable and the gate a regression", r.Decisions[0].Verdict, r.Verdict)
	}

	r, err = Evaluate([]Metric{p99, SUTCPUTxn}, map[string][]float64{"p99_ms": noisyB, "sut_cpu_us_per_txn": flatB},
		map[string][]float64{"p99_ms": noisyC, "sut_cpu_us_per_txn": flatC}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Unmeasurable {
		t.Fatalf("gate %s, want unmeasurable", r.Verdict)
	}

	info := p99
	info.Info = true
	r, err = Evaluate([]Metric{info, SUTCPUTxn}, map[string][]float64{"p99_ms": noisyB, "sut_cpu_us_per_txn": flatB},
		map[string][]float64{"p99_ms": noisyC, "sut_cpu_us_per_txn": flatC}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Pass {
		t.Fatalf("gate %s with the noisy metric informational, want pass", r.Verdict)
	}
	var md strings.Builder
	r.WriteMarkdown(&md)
	for _, want := range []string{"PASS", "p99_ms (info)", "Per-pair ratios", "signed-rank"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// The same noise is unmeasurable at a 5% tolerance and passes at a wider
// per-metric one.
func TestPerMetricTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	b, c := pairedTrials(rng, 12, 5, 5, 0.1, 0.15)
	narrow, err := Decide(Metric{Name: "p99_ms"}, b, c, Config{Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	wide, err := Decide(Metric{Name: "p99_ms", Tolerance: 0.25}, b, c, Config{Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	if narrow.Verdict != Unmeasurable || wide.Verdict != Pass || wide.Tolerance != 0.25 {
		t.Fatalf("5%%: %s (%s); 25%%: %s (%s); want unmeasurable then pass", narrow.Verdict, narrow.Reason, wide.Verdict, wide.Reason)
	}
}

func TestEvaluate(t *testing.T) {
	base := map[string][]float64{"tps": {100, 101, 99, 100, 100, 101}, "p99_ms": {5, 5.1, 4.9, 5, 5, 5}}
	cand := map[string][]float64{"tps": {100, 100, 101, 100, 99, 100}, "p99_ms": {5, 5, 5.1, 5, 4.9, 5}}
	r, err := Evaluate([]Metric{TPS, P99}, base, cand, []Guardrail{{Metric: P99, Limit: 4}}, Config{Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Regression || len(r.Guardrails) != 1 {
		t.Fatalf("guardrail not applied: %+v", r)
	}
	// Five pairs cannot give a 95% signed-rank interval (2/2⁵ > 5%).
	short := map[string][]float64{"tps": {1, 1, 1, 1, 1}}
	if _, err := Evaluate([]Metric{TPS}, short, short, nil, Config{Paired: true}); !errors.Is(err, ErrTrials) {
		t.Fatalf("err = %v, want ErrTrials", err)
	}
	if _, err := Decide(TPS, []float64{1, 0, 1, 1, 1, 1}, []float64{1, 1, 1, 1, 1, 1}, Config{Paired: true}); err == nil {
		t.Fatal("a zero trial value was accepted")
	}
}
