// Package gate decides whether a candidate regressed against a baseline
// from repeated trials of each (run interleaved, A B A B ..., at a fixed
// offered load, so that drift on a shared machine hits both alike).
//
// For each metric the statistic is the ratio of the candidate's median to
// the baseline's, oriented so that above 1 is worse ("badness"), with a
// percentile-bootstrap confidence interval. A metric regresses only when
// the regression is both statistically clear (the interval lies above 1)
// and beyond the tolerance (the point estimate exceeds 1 + tolerance). A
// metric whose interval is wider than the tolerance on either side, and
// which did not regress, is unmeasurable: the noise hides any change the
// gate is meant to catch. Improvements pass.
package gate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Verdict of a metric or of the whole gate.
type Verdict int

// Verdicts, in increasing severity of what they block.
const (
	Pass Verdict = iota
	Unmeasurable
	Regression
)

func (v Verdict) String() string {
	return [...]string{"pass", "unmeasurable", "regression"}[v]
}

// ErrTrials is returned when there are too few trials to decide.
var ErrTrials = errors.New("gate: too few trials")

// Metric names one compared figure.
type Metric struct {
	Name           string
	HigherIsBetter bool
}

// Standard metrics of a load run.
var (
	TPS       = Metric{Name: "tps", HigherIsBetter: true}
	P99       = Metric{Name: "p99_ms"}
	SUTCPUTxn = Metric{Name: "sut_cpu_us_per_txn"}
)

// Config tunes the decision.
type Config struct {
	Tolerance  float64 // relative, default 0.05
	Confidence float64 // two-sided, default 0.95
	Resamples  int     // bootstrap resamples, default 4000
	MinTrials  int     // per side, default 3
	Seed       uint64
}

func (c *Config) defaults() {
	if c.Tolerance <= 0 {
		c.Tolerance = 0.05
	}
	if c.Confidence <= 0 || c.Confidence >= 1 {
		c.Confidence = 0.95
	}
	if c.Resamples <= 0 {
		c.Resamples = 4000
	}
	if c.MinTrials <= 0 {
		c.MinTrials = 3
	}
}

// Decision is the outcome for one metric.
type Decision struct {
	Metric    string    `json:"metric"`
	Baseline  []float64 `json:"baseline"`
	Candidate []float64 `json:"candidate"`
	// Ratio is median(candidate)/median(baseline); Low and High bound it.
	Ratio float64 `json:"ratio"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// Badness is Ratio oriented so that above 1 is worse.
	Badness float64 `json:"badness"`
	Verdict Verdict `json:"-"`
	Result  string  `json:"verdict"`
	Reason  string  `json:"reason"`
}

// Decide judges one metric.
func Decide(m Metric, base, cand []float64, cfg Config) (Decision, error) {
	cfg.defaults()
	if len(base) < cfg.MinTrials || len(cand) < cfg.MinTrials {
		return Decision{}, fmt.Errorf("%w: %s has %d baseline and %d candidate trials, need %d each", ErrTrials, m.Name, len(base), len(cand), cfg.MinTrials)
	}
	d := Decision{Metric: m.Name, Baseline: base, Candidate: cand}
	mb, mc := median(base), median(cand)
	if mb == 0 {
		mb = math.SmallestNonzeroFloat64
	}
	d.Ratio = mc / mb
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	ratios := make([]float64, cfg.Resamples)
	bs, cs := make([]float64, len(base)), make([]float64, len(cand))
	for i := range ratios {
		for j := range bs {
			bs[j] = base[rng.IntN(len(base))]
		}
		for j := range cs {
			cs[j] = cand[rng.IntN(len(cand))]
		}
		b := median(bs)
		if b == 0 {
			b = math.SmallestNonzeroFloat64
		}
		ratios[i] = median(cs) / b
	}
	slices.Sort(ratios)
	alpha := (1 - cfg.Confidence) / 2
	d.Low = quantile(ratios, alpha)
	d.High = quantile(ratios, 1-alpha)
	bad, badLo, badHi := d.Ratio, d.Low, d.High
	if m.HigherIsBetter {
		bad, badLo, badHi = inv(d.Ratio), inv(d.High), inv(d.Low)
	}
	d.Badness = bad
	tol := cfg.Tolerance
	switch {
	case badLo > 1 && bad > 1+tol:
		d.Verdict = Regression
		d.Reason = fmt.Sprintf("%.1f%% worse (interval %.1f%%..%.1f%%), beyond the %.0f%% tolerance", 100*(bad-1), 100*(badLo-1), 100*(badHi-1), 100*tol)
	case badHi-badLo > 2*tol:
		d.Verdict = Unmeasurable
		d.Reason = fmt.Sprintf("noise too wide: interval %.1f%%..%.1f%% spans more than ±%.0f%%", 100*(badLo-1), 100*(badHi-1), 100*tol)
	default:
		d.Verdict = Pass
		d.Reason = fmt.Sprintf("%+.1f%% (interval %+.1f%%..%+.1f%%)", 100*(bad-1), 100*(badLo-1), 100*(badHi-1))
	}
	d.Result = d.Verdict.String()
	return d, nil
}

func inv(x float64) float64 {
	if x == 0 {
		return math.Inf(1)
	}
	return 1 / x
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// Guardrail is an absolute limit on the candidate's median.
type Guardrail struct {
	Metric Metric
	Limit  float64 // max for lower-is-better metrics, min for higher-is-better
}

// Report is the whole gate.
type Report struct {
	Verdict    Verdict    `json:"-"`
	Result     string     `json:"verdict"`
	Tolerance  float64    `json:"tolerance"`
	Decisions  []Decision `json:"decisions"`
	Guardrails []string   `json:"guardrail_failures,omitempty"`
}

// Evaluate decides every metric; series maps metric name to the baseline
// and candidate trial values.
func Evaluate(metrics []Metric, base, cand map[string][]float64, guards []Guardrail, cfg Config) (*Report, error) {
	cfg.defaults()
	r := &Report{Tolerance: cfg.Tolerance}
	for _, m := range metrics {
		d, err := Decide(m, base[m.Name], cand[m.Name], cfg)
		if err != nil {
			return nil, err
		}
		r.Decisions = append(r.Decisions, d)
		if d.Verdict > r.Verdict {
			r.Verdict = d.Verdict
		}
	}
	for _, g := range guards {
		v := median(cand[g.Metric.Name])
		if g.Metric.HigherIsBetter && v < g.Limit || !g.Metric.HigherIsBetter && v > g.Limit {
			r.Guardrails = append(r.Guardrails, fmt.Sprintf("%s median %.3f beyond the limit %.3f", g.Metric.Name, v, g.Limit))
			r.Verdict = Regression
		}
	}
	r.Result = r.Verdict.String()
	return r, nil
}

// WriteMarkdown writes the gate's summary.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Performance gate: **%s**\n\n", strings.ToUpper(r.Result))
	fmt.Fprintf(w, "Tolerance %.0f%%; ratio = median(candidate) / median(baseline) with a bootstrap confidence interval.\n\n", 100*r.Tolerance)
	fmt.Fprintf(w, "| metric | baseline median | candidate median | ratio | interval | verdict | why |\n|---|---:|---:|---:|---|---|---|\n")
	for _, d := range r.Decisions {
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %.3f..%.3f | %s | %s |\n", d.Metric, median(d.Baseline), median(d.Candidate), d.Ratio, d.Low, d.High, d.Result, d.Reason)
	}
	for _, g := range r.Guardrails {
		fmt.Fprintf(w, "\n- guardrail: %s\n", g)
	}
}
