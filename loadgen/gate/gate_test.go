package gate

import (
	"errors"
	"math/rand/v2"
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

func TestDecisions(t *testing.T) {
	cfg := Config{Tolerance: 0.05, Seed: 1}
	cases := []struct {
		name       string
		m          Metric
		base, cand float64 // means
		noise      float64
		n          int
		want       Verdict
	}{
		{"clear 15% p99 regression", P99, 10, 11.5, 0.01, 7, Regression},
		{"clear 15% TPS regression", TPS, 10000, 8500, 0.01, 7, Regression},
		{"pure noise", SUTCPUTxn, 100, 100, 0.01, 7, Pass},
		{"noise wider than the tolerance", P99, 10, 10, 0.15, 5, Unmeasurable},
		{"improvement", P99, 10, 8, 0.01, 7, Pass},
		{"TPS improvement", TPS, 10000, 12000, 0.01, 7, Pass},
		{"small regression within tolerance", SUTCPUTxn, 100, 102, 0.005, 7, Pass},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			d, err := Decide(c.m, trials(rng, c.n, c.base, c.noise), trials(rng, c.n, c.cand, c.noise), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s; ratio %.3f [%.3f, %.3f]", d.Verdict, d.Reason, c.want, d.Ratio, d.Low, d.High)
			}
		})
	}
}

// Pure noise must never fail, whatever the draw.
func TestNoiseNeverFails(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		d, err := Decide(P99, trials(rng, 5, 10, 0.02), trials(rng, 5, 10, 0.02), Config{Seed: seed, Resamples: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if d.Verdict == Regression {
			t.Fatalf("seed %d: noise judged a regression: %s", seed, d.Reason)
		}
	}
}

func TestEvaluate(t *testing.T) {
	base := map[string][]float64{"tps": {100, 101, 99}, "p99_ms": {5, 5.1, 4.9}}
	cand := map[string][]float64{"tps": {100, 100, 101}, "p99_ms": {5, 5, 5.1}}
	r, err := Evaluate([]Metric{TPS, P99}, base, cand, []Guardrail{{Metric: P99, Limit: 4}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Regression || len(r.Guardrails) != 1 {
		t.Fatalf("guardrail not applied: %+v", r)
	}
	if _, err := Evaluate([]Metric{TPS}, map[string][]float64{"tps": {1}}, cand, nil, Config{}); !errors.Is(err, ErrTrials) {
		t.Fatalf("err = %v, want ErrTrials", err)
	}
}
