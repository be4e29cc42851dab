// Package gate decides whether a candidate regressed against a baseline
// from repeated trials of each, run at a fixed offered load.
//
// Trials come in pairs (one baseline and one candidate trial run back to
// back, the order alternating A B, B A, ...) so that slow drift of a shared
// machine hits both members of a pair alike and cancels in their ratio.
// For each metric the statistic is the candidate/baseline ratio, estimated
// in log space by Hodges-Lehmann with the exact distribution-free
// confidence interval of the Wilcoxon signed-rank test over the pairs
// (Mann-Whitney when the trials are not paired). It is oriented so that
// above 1 is worse ("badness": the ratio, or its inverse for metrics where
// higher is better).
//
// The decision, per metric with tolerance t (Metric.Tolerance, else
// Config.Tolerance) and the badness estimate b in [lo, hi]:
//
//   - regression: lo > 1 and b > 1 + t (statistically clear and beyond the
//     tolerance);
//   - unmeasurable: not a regression, hi > 1 + t (a regression beyond the
//     tolerance is not ruled out) and the interval's half-width
//     (hi - lo) / 2 exceeds t (the noise is wider than the tolerance);
//   - pass otherwise (no change, a change within the tolerance measured
//     with noise narrower than it, or an improvement).
//
// The gate is a regression when any deciding metric regressed or a
// guardrail failed, whatever the other metrics say; else unmeasurable when
// any deciding metric is unmeasurable; else pass. Informational metrics
// are reported the same way but never decide.
package gate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/chf-testbed/testbed/loadgen/report"
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
	// Tolerance is this metric's relative tolerance; 0 = Config.Tolerance.
	Tolerance float64
	// Info marks a metric that is reported but never decides the gate.
	Info bool
}

// Standard metrics of a load run. P99's default tolerance is wider than
// the others': on a shared machine the p99 of one trial varies far more
// between adjacent trials than CPU or throughput do (loadgen/docs/gate.md;
// docs/design/005-perf-gate-paired-trials.md).
var (
	TPS = Metric{Name: "tps", HigherIsBetter: true}
	P99 = Metric{Name: "p99_ms", Tolerance: 0.25}
	// SUTCPUTxn is the SUT's CPU µs per transaction as measured.
	SUTCPUTxn = Metric{Name: "sut_cpu_us_per_txn"}
	// SUTCPUAdj is the SUT's CPU per transaction relative to loadgen's own
	// in the same trial (see AdjustedCPU); loadgen gate shows it for
	// information only.
	SUTCPUAdj = Metric{Name: "sut_cpu_adj"}
)

// AdjustedCPU is the SUT's CPU per transaction divided by loadgen's CPU
// per transaction in the same trial, times ref (a fixed reference, so the
// figure keeps µs units). loadgen does the same work in every trial of a
// gate (same scenario, rate and seed), so its CPU per transaction tracks
// how slow the shared machine's cores are during the trial; dividing by it
// removes the part of the SUT's variation that all processes share. But
// loadgen's CPU per transaction also depends on the SUT's latency (slower
// answers coalesce into fewer reads): against a slowed-down candidate it
// fell by a quarter, so the adjusted figure exaggerates a regression and
// could hide one that comes with lower latency. It is a diagnostic, not a
// deciding metric.
func AdjustedCPU(sutUsTxn, loadgenUsTxn, ref float64) float64 {
	if loadgenUsTxn <= 0 {
		return math.NaN()
	}
	return sutUsTxn / loadgenUsTxn * ref
}

// Config tunes the decision.
type Config struct {
	Tolerance  float64 // relative, for metrics without their own; default 0.05
	Confidence float64 // two-sided, default 0.95
	// Paired says baseline[i] and candidate[i] ran back to back: the
	// interval is then the signed-rank interval of the per-pair log
	// ratios, else the Mann-Whitney interval of the two samples.
	Paired bool
}

func (c *Config) defaults() {
	if c.Tolerance <= 0 {
		c.Tolerance = 0.05
	}
	if c.Confidence <= 0 || c.Confidence >= 1 {
		c.Confidence = 0.95
	}
}

// Decision is the outcome for one metric.
type Decision struct {
	Metric    string    `json:"metric"`
	Info      bool      `json:"informational,omitempty"`
	Baseline  []float64 `json:"baseline"`
	Candidate []float64 `json:"candidate"`
	// PairRatios are candidate[i]/baseline[i] when paired.
	PairRatios []float64 `json:"pair_ratios,omitempty"`
	Method     string    `json:"method"`
	// Ratio is the Hodges-Lehmann estimate of candidate/baseline; Low and
	// High bound it with the achieved Confidence.
	Ratio      float64 `json:"ratio"`
	Low        float64 `json:"low"`
	High       float64 `json:"high"`
	Confidence float64 `json:"confidence"`
	// Badness is Ratio oriented so that above 1 is worse, in
	// [BadLow, BadHigh]; Noise is that interval's half-width.
	Badness   float64 `json:"badness"`
	BadLow    float64 `json:"badness_low"`
	BadHigh   float64 `json:"badness_high"`
	Noise     float64 `json:"noise"`
	Tolerance float64 `json:"tolerance"`
	Verdict   Verdict `json:"-"`
	Result    string  `json:"verdict"`
	Reason    string  `json:"reason"`
}

// Decide judges one metric.
func Decide(m Metric, base, cand []float64, cfg Config) (Decision, error) {
	cfg.defaults()
	d := Decision{Metric: m.Name, Info: m.Info, Baseline: base, Candidate: cand, Tolerance: m.Tolerance}
	if d.Tolerance <= 0 {
		d.Tolerance = cfg.Tolerance
	}
	lb, lc, err := logs(m.Name, base, cand)
	if err != nil {
		return d, err
	}
	var iv interval
	if cfg.Paired {
		if len(base) != len(cand) {
			return d, fmt.Errorf("gate: %s: paired trials need as many baseline as candidate trials (%d and %d)", m.Name, len(base), len(cand))
		}
		diff := make([]float64, len(base))
		d.PairRatios = make([]float64, len(base))
		for i := range diff {
			diff[i] = lc[i] - lb[i]
			d.PairRatios[i] = math.Exp(diff[i])
		}
		d.Method = "signed-rank"
		iv = signedRank(diff, cfg.Confidence)
	} else {
		d.Method = "mann-whitney"
		iv = mannWhitney(lb, lc, cfg.Confidence)
	}
	if !iv.ok {
		return d, fmt.Errorf("%w: %s has %d baseline and %d candidate trials (%s), too few for a %.0f%% interval", ErrTrials, m.Name, len(base), len(cand), d.Method, 100*cfg.Confidence)
	}
	d.Ratio, d.Low, d.High, d.Confidence = math.Exp(iv.est), math.Exp(iv.lo), math.Exp(iv.hi), iv.conf
	d.Badness, d.BadLow, d.BadHigh = d.Ratio, d.Low, d.High
	if m.HigherIsBetter {
		d.Badness, d.BadLow, d.BadHigh = 1/d.Ratio, 1/d.High, 1/d.Low
	}
	d.Noise = (d.BadHigh - d.BadLow) / 2
	d.Verdict, d.Reason = judge(d.Badness, d.BadLow, d.BadHigh, d.Tolerance)
	d.Result = d.Verdict.String()
	return d, nil
}

// judge applies the package's rule to one metric's oriented estimate.
func judge(b, lo, hi, tol float64) (Verdict, string) {
	span := fmt.Sprintf("%+.1f%% (interval %+.1f%%..%+.1f%%)", 100*(b-1), 100*(lo-1), 100*(hi-1))
	noise := (hi - lo) / 2
	switch {
	case lo > 1 && b > 1+tol:
		return Regression, fmt.Sprintf("%s: worse, clearly and beyond the %.0f%% tolerance", span, 100*tol)
	case hi > 1+tol && noise > tol:
		return Unmeasurable, fmt.Sprintf("%s: noise ±%.1f%% wider than the %.0f%% tolerance", span, 100*noise, 100*tol)
	case lo > 1:
		return Pass, fmt.Sprintf("%s: worse, but within the %.0f%% tolerance", span, 100*tol)
	case hi < 1:
		return Pass, span + ": better"
	}
	return Pass, fmt.Sprintf("%s: no clear change", span)
}

// logs takes the logarithms of both samples, refusing values a ratio
// cannot use.
func logs(name string, base, cand []float64) (lb, lc []float64, err error) {
	conv := func(v []float64) ([]float64, error) {
		out := make([]float64, len(v))
		for i, x := range v {
			if !(x > 0) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("gate: %s: trial value %v is not a positive number", name, x)
			}
			out[i] = math.Log(x)
		}
		return out, nil
	}
	if lb, err = conv(base); err != nil {
		return nil, nil, err
	}
	lc, err = conv(cand)
	return lb, lc, err
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
	Confidence float64    `json:"confidence"`
	Paired     bool       `json:"paired"`
	Decisions  []Decision `json:"decisions"`
	Guardrails []string   `json:"guardrail_failures,omitempty"`
}

// Evaluate decides every metric; base and cand map a metric's name to its
// trial values (in pair order when cfg.Paired).
func Evaluate(metrics []Metric, base, cand map[string][]float64, guards []Guardrail, cfg Config) (*Report, error) {
	cfg.defaults()
	r := &Report{Tolerance: cfg.Tolerance, Confidence: cfg.Confidence, Paired: cfg.Paired}
	for _, m := range metrics {
		d, err := Decide(m, base[m.Name], cand[m.Name], cfg)
		if err != nil {
			return nil, err
		}
		r.Decisions = append(r.Decisions, d)
		if !d.Info && d.Verdict > r.Verdict {
			r.Verdict = d.Verdict
		}
	}
	for _, g := range guards {
		v := report.Median(cand[g.Metric.Name])
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
	how := "trials in pairs (A B, B A, ...), ratio per pair, Hodges-Lehmann estimate with the exact Wilcoxon signed-rank interval"
	if !r.Paired {
		how = "unpaired trials, Hodges-Lehmann estimate of the ratio with the exact Mann-Whitney interval"
	}
	fmt.Fprintf(w, "Ratio = candidate / baseline; %s (%.0f%% requested). "+
		"A metric regresses when its interval lies above no-change on the bad side and the estimate is beyond its tolerance; "+
		"it is unmeasurable when, without regressing, its interval reaches beyond the tolerance and is wider than ±tolerance.\n\n", how, 100*r.Confidence)
	fmt.Fprintf(w, "| metric | baseline median | candidate median | ratio | interval (conf.) | tolerance | verdict | why |\n|---|---:|---:|---:|---|---:|---|---|\n")
	for _, d := range r.Decisions {
		name := d.Metric
		if d.Info {
			name += " (info)"
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %.3f..%.3f (%.1f%%) | %.0f%% | %s | %s |\n", name, report.Median(d.Baseline), report.Median(d.Candidate),
			d.Ratio, d.Low, d.High, 100*d.Confidence, 100*d.Tolerance, d.Result, d.Reason)
	}
	if r.Paired && len(r.Decisions) > 0 {
		fmt.Fprintf(w, "\nPer-pair ratios (candidate / baseline):\n\n")
		for _, d := range r.Decisions {
			parts := make([]string, len(d.PairRatios))
			for i, x := range d.PairRatios {
				parts[i] = fmt.Sprintf("%.3f", x)
			}
			fmt.Fprintf(w, "- %s: %s\n", d.Metric, strings.Join(parts, " "))
		}
	}
	for _, g := range r.Guardrails {
		fmt.Fprintf(w, "\n- guardrail: %s\n", g)
	}
}
