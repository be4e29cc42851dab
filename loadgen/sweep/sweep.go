// Package sweep steps the offered load to find the highest rate a system
// sustains within its latency SLO (the knee). Each step is an ordinary
// measured run (warm-up, duration, audit) producing a report.Result; the
// sweep adds the verdict per step and the capacity curves.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// Kind marks a sweep result file.
const Kind = "sweep"

// ErrConfig is returned for an unusable sweep configuration.
var ErrConfig = errors.New("sweep: invalid config")

// SLO is what a step must meet.
type SLO struct {
	P99Ms        float64 `json:"p99_ms"`         // 0 = no latency limit
	MaxErrorRate float64 `json:"max_error_rate"` // errors / transactions
	MaxLateRate  float64 `json:"max_late_rate"`  // (late + dropped) / offered
	// MinAchieved is the smallest achieved/offered TPS ratio (default 0.95).
	MinAchieved float64 `json:"min_achieved"`
}

// Check reports whether r meets the SLO, and if not why.
func (s SLO) Check(r *report.Result) (bool, string) {
	minAch := s.MinAchieved
	if minAch <= 0 {
		minAch = 0.95
	}
	switch {
	case r.Transactions == 0:
		return false, "no transaction completed"
	case s.P99Ms > 0 && r.LatencyMs.P99 > s.P99Ms:
		return false, fmt.Sprintf("p99 %.2f ms > %.2f ms", r.LatencyMs.P99, s.P99Ms)
	case r.ErrorRate > s.MaxErrorRate:
		return false, fmt.Sprintf("error rate %.4f > %.4f (%v)", r.ErrorRate, s.MaxErrorRate, r.ErrorClasses)
	case r.Offered > 0 && float64(r.Late+r.Dropped)/float64(r.Offered) > s.MaxLateRate:
		return false, fmt.Sprintf("late+dropped %.4f of offered > %.4f", float64(r.Late+r.Dropped)/float64(r.Offered), s.MaxLateRate)
	case r.OfferedTPS > 0 && r.TPS < minAch*r.OfferedTPS:
		return false, fmt.Sprintf("achieved %.0f TPS < %.0f%% of offered %.0f", r.TPS, 100*minAch, r.OfferedTPS)
	case !r.Audit.Skipped && !r.Audit.OK:
		return false, "balance audit failed: " + r.Audit.Reason
	}
	return true, ""
}

// Config is one sweep.
type Config struct {
	Start, Step, Max float64 // offered TPS
	// UntilBreak stops at the first step that misses the SLO.
	UntilBreak bool
	// Retries is how many times a step that misses the SLO is run again
	// before it counts as failed (0: never): on a shared machine one
	// noisy step should not end the sweep. The step passes when any
	// attempt does; RunStep is called once per attempt.
	Retries int
	// MaxSteal, when > 0, voids an attempt that missed the SLO while the
	// hypervisor took more than MaxSteal percent of one core (100 = a
	// whole core) in some second of its measured window: the attempt is
	// run again without counting against Retries, up to StealRetries
	// times over the whole sweep (each attempt takes its own slice of
	// the subscribers, so a per-step allowance would shrink every
	// slice). On a shared VM such a second, not the system under test,
	// usually decides the step (docs/design/004-sweep-voids-noisy-attempts.md). An attempt
	// that met the SLO counts whatever the steal; results without the
	// host's CPU are never voided.
	MaxSteal     float64
	StealRetries int
	// MaxFreezeMs, when > 0, voids an attempt that missed the SLO while
	// the host froze one of the machine's CPUs for longer than MaxFreezeMs
	// milliseconds in its measured window (the report's host_freezes: a
	// stall steal does not show on a VM like this one), in the same way
	// and from the same StealRetries allowance as MaxSteal. Results
	// without the freeze probe are never voided by it.
	MaxFreezeMs float64
	SLO         SLO
	// RunStep performs one measured run at tps. It may return a result
	// together with an error (a failed audit): the step then fails.
	RunStep func(ctx context.Context, tps float64) (*report.Result, error)
	// Progress, when set, is told about each finished step.
	Progress func(Step)
}

// Step is one rate of the sweep.
type Step struct {
	OfferedTPS float64        `json:"offered_tps"`
	Pass       bool           `json:"pass"`
	Reason     string         `json:"reason,omitempty"`
	Result     *report.Result `json:"result"` // of the last attempt
	// Retried lists why each earlier attempt of this step missed the SLO
	// (Config.Retries); empty when the first attempt decided.
	Retried []string `json:"retried,omitempty"`
	// Voided lists the attempts voided by the host's steal or freezes
	// (Config.MaxSteal, MaxFreezeMs): why each missed the SLO and what the
	// host did.
	Voided []string `json:"voided,omitempty"`
	// PeakSteal is the steal of the worst second of the last attempt's
	// measured window, in percent of one core (absent without the host's
	// CPU).
	PeakSteal *float64 `json:"peak_steal_percent,omitempty"`
}

// Result is a whole sweep.
type Result struct {
	SchemaVersion   int     `json:"schema_version"`
	Kind            string  `json:"kind"`
	Label           string  `json:"label,omitempty"`
	SLO             SLO     `json:"slo"`
	Steps           []Step  `json:"steps"`
	KneeTPS         float64 `json:"knee_tps"` // highest offered TPS that met the SLO (0: none)
	FirstFailTPS    float64 `json:"first_fail_tps,omitempty"`
	FirstFailReason string  `json:"first_fail_reason,omitempty"`
	// Retries is Config.Retries: the extra attempts a missed step got.
	Retries int `json:"retries,omitempty"`
	// MaxSteal and StealRetries are Config's: attempts voided by the
	// host's steal.
	MaxSteal     float64 `json:"max_steal_percent,omitempty"`
	StealRetries int     `json:"steal_retries,omitempty"`
	MaxFreezeMs  float64 `json:"max_freeze_ms,omitempty"`
	// Interrupted says a signal cut the sweep short.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Knee returns the step at the knee, or nil.
func (r *Result) Knee() *Step {
	for i := range r.Steps {
		if r.Steps[i].Pass && r.Steps[i].OfferedTPS == r.KneeTPS {
			return &r.Steps[i]
		}
	}
	return nil
}

// MaxSteps bounds the number of steps of one sweep.
const MaxSteps = 1000

// MaxRetries bounds Config.Retries.
const MaxRetries = 5

// MaxStealRetries bounds Config.StealRetries.
const MaxStealRetries = 100

// Validate checks the rates and the SLO (not RunStep), so that a command
// can refuse a sweep before starting anything. Errors name the field.
func (c Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, a...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(c.Start > 0) || !finite(c.Start):
		return bad("start", "must be a positive TPS, got %v", c.Start)
	case !(c.Step > 0) || !finite(c.Step):
		return bad("step", "must be a positive TPS, got %v", c.Step)
	case !(c.Max >= c.Start) || !finite(c.Max):
		return bad("max", "must be at least start (%v), got %v", c.Start, c.Max)
	case c.Retries < 0 || c.Retries > MaxRetries:
		return bad("retries", "must be within 0..%d, got %d", MaxRetries, c.Retries)
	case !(c.MaxSteal >= 0 && c.MaxSteal <= 100*maxCores):
		return bad("max_steal", "must be a percentage of one core within 0..%d, got %v", 100*maxCores, c.MaxSteal)
	case !(c.MaxFreezeMs >= 0 && c.MaxFreezeMs <= maxFreezeMs):
		return bad("max_freeze_ms", "must be within 0..%d ms, got %v", maxFreezeMs, c.MaxFreezeMs)
	case c.StealRetries < 0 || c.StealRetries > MaxStealRetries:
		return bad("steal_retries", "must be within 0..%d, got %d", MaxStealRetries, c.StealRetries)
	case c.Steps() > MaxSteps:
		return bad("step", "%v from %v to %v makes %d steps, more than %d", c.Step, c.Start, c.Max, c.Steps(), MaxSteps)
	case c.SLO.P99Ms < 0 || !finite(c.SLO.P99Ms):
		return bad("slo.p99_ms", "must not be negative, got %v", c.SLO.P99Ms)
	case !(c.SLO.MaxErrorRate >= 0 && c.SLO.MaxErrorRate <= 1):
		return bad("slo.max_error_rate", "must be within 0..1, got %v", c.SLO.MaxErrorRate)
	case !(c.SLO.MaxLateRate >= 0 && c.SLO.MaxLateRate <= 1):
		return bad("slo.max_late_rate", "must be within 0..1, got %v", c.SLO.MaxLateRate)
	case !(c.SLO.MinAchieved >= 0 && c.SLO.MinAchieved <= 1):
		return bad("slo.min_achieved", "must be within 0..1, got %v", c.SLO.MinAchieved)
	}
	return nil
}

// maxCores bounds MaxSteal (100 per core): any machine's steal is below it.
const maxCores = 1 << 16

// maxFreezeMs bounds MaxFreezeMs: a minute.
const maxFreezeMs = 60_000

// Attempts returns the most attempts the sweep may run.
func (c Config) Attempts() int { return c.Steps()*(1+c.Retries) + c.StealRetries }

// peakSteal returns the steal of the worst second of r's measured window,
// in percent of one core; ok is false when no second has the host's CPU.
func peakSteal(r *report.Result) (peak float64, ok bool) {
	for _, p := range r.Series {
		if p.Phase != "measure" || p.HostBusy <= 0 && p.HostSteal <= 0 {
			continue
		}
		peak, ok = max(peak, p.HostSteal), true
	}
	return peak, ok
}

// Steps returns the number of steps from Start to Max (valid rates).
func (c Config) Steps() int {
	if !(c.Step > 0) || !(c.Max >= c.Start) {
		return 0
	}
	return int((c.Max-c.Start)/c.Step+1e-9) + 1
}

// Run performs the sweep.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RunStep == nil {
		return nil, fmt.Errorf("%w: no step runner", ErrConfig)
	}
	res := &Result{SchemaVersion: report.SchemaVersion, Kind: Kind, SLO: cfg.SLO, Retries: cfg.Retries,
		MaxSteal: cfg.MaxSteal, StealRetries: cfg.StealRetries, MaxFreezeMs: cfg.MaxFreezeMs}
	voided := 0 // attempts voided by steal or freezes, over the sweep
	for tps := cfg.Start; tps <= cfg.Max+1e-9; tps += cfg.Step {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var st Step
		for attempt := 0; ; {
			r, err := cfg.RunStep(ctx, tps)
			if r == nil {
				return res, fmt.Errorf("cannot run the step at %.0f TPS: %w", tps, err)
			}
			st = Step{OfferedTPS: tps, Result: r, Retried: st.Retried, Voided: st.Voided}
			st.Pass, st.Reason = cfg.SLO.Check(r)
			if err != nil && st.Pass {
				st.Pass, st.Reason = false, err.Error()
			}
			peak, measured := peakSteal(r)
			if measured {
				st.PeakSteal = &peak
			}
			if st.Pass || ctx.Err() != nil {
				break
			}
			why := ""
			if measured && cfg.MaxSteal > 0 && peak > cfg.MaxSteal {
				why = fmt.Sprintf("%s, host steal %.0f%% of a core in its worst second > %.0f%%", st.Reason, peak, cfg.MaxSteal)
			} else if f := r.HostFreezes; f != nil && cfg.MaxFreezeMs > 0 && f.WorstMs > cfg.MaxFreezeMs {
				why = fmt.Sprintf("%s, host froze a CPU for %.1f ms > %.0f ms", st.Reason, f.WorstMs, cfg.MaxFreezeMs)
			}
			if why != "" {
				if voided < cfg.StealRetries {
					voided++
					st.Voided = append(st.Voided, why)
					continue
				}
				st.Reason = why // counts, but says what it met
			}
			if attempt >= cfg.Retries {
				break
			}
			attempt++
			st.Retried = append(st.Retried, st.Reason)
		}
		res.Steps = append(res.Steps, st)
		if cfg.Progress != nil {
			cfg.Progress(st)
		}
		if st.Pass {
			if res.FirstFailTPS == 0 {
				res.KneeTPS = tps
			}
			continue
		}
		if res.FirstFailTPS == 0 {
			res.FirstFailTPS, res.FirstFailReason = tps, st.Reason
		}
		if cfg.UntilBreak {
			break
		}
	}
	return res, nil
}

// WriteMarkdown writes the sweep table.
func (r *Result) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# loadgen sweep\n\n")
	if r.Interrupted {
		fmt.Fprintf(w, "**INTERRUPTED**: the sweep was cut short; its last step covers only what ran.\n\n")
	}
	fmt.Fprintf(w, "SLO: p99 <= %.2f ms, error rate <= %.4f, late+dropped <= %.4f of offered.\n\n", r.SLO.P99Ms, r.SLO.MaxErrorRate, r.SLO.MaxLateRate)
	if r.KneeTPS > 0 {
		fmt.Fprintf(w, "Knee: **%.0f TPS** offered met the SLO", r.KneeTPS)
	} else {
		fmt.Fprintf(w, "Knee: no step met the SLO")
	}
	if r.Retries > 0 {
		fmt.Fprintf(w, " (a step that missed the SLO was run up to %d more times before it counted as failed)", r.Retries)
	}
	if r.MaxSteal > 0 && r.StealRetries > 0 {
		fmt.Fprintf(w, " (an attempt that missed the SLO while the hypervisor took more than %.0f%% of a core in some second was void and run again, up to %d times in the sweep)", r.MaxSteal, r.StealRetries)
	}
	if r.MaxFreezeMs > 0 && r.StealRetries > 0 {
		fmt.Fprintf(w, " (an attempt that missed the SLO while the host froze a CPU for more than %.0f ms was void and run again, from the same allowance)", r.MaxFreezeMs)
	}
	if r.FirstFailTPS > 0 {
		fmt.Fprintf(w, "; first failure at %.0f TPS: %s.\n\n", r.FirstFailTPS, r.FirstFailReason)
	} else {
		fmt.Fprintf(w, "; no step failed.\n\n")
	}
	if len(r.Steps) > 0 {
		r.Steps[0].Result.WriteProvenance(w) // every step ran the same command
	}
	fmt.Fprintf(w, "| offered TPS | achieved TPS | p50 ms | p99 ms | p99.9 ms | jitter | errors | late | dropped | SUT µs/txn | CPU %% (100 = one core) | machine idle %% | steal %% | host freeze worst ms | SLO |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n")
	for _, s := range r.Steps {
		x := s.Result
		v := "met"
		if !s.Pass {
			v = "**missed**: " + s.Reason
		}
		if len(s.Retried) > 0 {
			v += fmt.Sprintf(" (attempt %d; earlier: %s)", len(s.Retried)+1, strings.Join(s.Retried, "; "))
		}
		if len(s.Voided) > 0 {
			v += fmt.Sprintf(" (void attempts: %s)", strings.Join(s.Voided, "; "))
		}
		var cpus []string
		for _, c := range x.Components() {
			cpus = append(cpus, fmt.Sprintf("%s %.0f", c, x.CPUPercent[c]))
		}
		// Steal (of one core: 100 = a whole core taken by the hypervisor)
		// is next to idle because on a VM it, not the build, often decides
		// whether a step meets the SLO.
		idle, steal := "n/a", "n/a"
		if x.Host != nil {
			idle, steal = fmt.Sprintf("%.0f", x.Host.IdlePercent), fmt.Sprintf("%.1f", x.Host.StealPercent)
		}
		if s.PeakSteal != nil {
			steal += fmt.Sprintf(" (worst second %.0f)", *s.PeakSteal)
		}
		// The worst host freeze, and how many of 10 ms or more: a stall of
		// the VM that steal does not show (package freeze).
		frozen := "n/a"
		if f := x.HostFreezes; f != nil {
			frozen = fmt.Sprintf("%.1f (%d ≥ 10 ms)", f.WorstMs, f.Over10ms)
		}
		fmt.Fprintf(w, "| %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %d | %d | %d | %.1f | %s | %s | %s | %s | %s |\n",
			s.OfferedTPS, x.TPS, x.LatencyMs.P50, x.LatencyMs.P99, x.LatencyMs.P999, x.JitterCV, x.Errors, x.Late, x.Dropped, x.SUTCPUUsTxn, strings.Join(cpus, ", "), idle, steal, frozen, v)
	}
}

// Charts returns the capacity curves against offered load, the knee
// marked: achieved TPS, latency (with the SLO line), SUT CPU per
// transaction and CPU per component.
func (r *Result) Charts() []report.Chart {
	var ideal, achieved, p50, p99, p999, sut plotter.XYs
	cpu := map[string]plotter.XYs{}
	var comps []string
	for _, s := range r.Steps {
		x := s.OfferedTPS
		ideal = append(ideal, plotter.XY{X: x, Y: x})
		achieved = append(achieved, plotter.XY{X: x, Y: s.Result.TPS})
		p50 = append(p50, plotter.XY{X: x, Y: s.Result.LatencyMs.P50})
		p99 = append(p99, plotter.XY{X: x, Y: s.Result.LatencyMs.P99})
		p999 = append(p999, plotter.XY{X: x, Y: s.Result.LatencyMs.P999})
		if s.Result.SUTCPUUsTxn > 0 {
			sut = append(sut, plotter.XY{X: x, Y: s.Result.SUTCPUUsTxn})
		}
		for _, c := range s.Result.Components() {
			if _, ok := cpu[c]; !ok {
				comps = append(comps, c)
			}
			cpu[c] = append(cpu[c], plotter.XY{X: x, Y: s.Result.CPUPercent[c]})
		}
	}
	var marks []report.Mark
	if r.KneeTPS > 0 {
		marks = []report.Mark{{X: r.KneeTPS, Name: fmt.Sprintf("knee %.0f TPS", r.KneeTPS)}}
	}
	const x = "offered TPS"
	charts := []report.Chart{
		{Title: "Achieved vs offered load", X: x, Y: "achieved TPS", Marks: marks,
			Lines: []report.Series{{Name: "achieved", XY: achieved, Points: true}, {Name: "offered (ideal)", XY: ideal, Dashed: true}}},
		{Title: "Latency vs offered load", X: x, Y: "ms (log)", LogY: true, Marks: marks,
			Lines: []report.Series{{Name: "p50", XY: p50, Points: true}, {Name: "p99", XY: p99, Points: true}, {Name: "p99.9", XY: p999, Points: true}}},
	}
	if r.SLO.P99Ms > 0 && len(r.Steps) > 0 {
		slo := plotter.XYs{{X: r.Steps[0].OfferedTPS, Y: r.SLO.P99Ms}, {X: r.Steps[len(r.Steps)-1].OfferedTPS, Y: r.SLO.P99Ms}}
		charts[1].Lines = append(charts[1].Lines, report.Series{Name: fmt.Sprintf("SLO p99 %.3g ms", r.SLO.P99Ms), XY: slo, Dashed: true})
	}
	if len(sut) > 0 {
		charts = append(charts, report.Chart{Title: "SUT CPU per transaction vs offered load", X: x, Y: "SUT CPU µs / transaction", Marks: marks,
			Lines: []report.Series{{Name: "SUT µs/txn", XY: sut, Points: true}}})
	}
	if len(comps) > 0 {
		c := report.Chart{Title: "CPU per component vs offered load", X: x, Y: "% of one core", Marks: marks}
		for _, k := range comps {
			c.Lines = append(c.Lines, report.Series{Name: k, XY: cpu[k], Points: true})
		}
		charts = append(charts, c)
	}
	return charts
}

// WriteHTML writes the sweep page (offline, inline SVG).
func (r *Result) WriteHTML(w io.Writer) error {
	return report.WritePage(w, "loadgen sweep", func(md io.Writer) { r.WriteMarkdown(md) }, r.Charts())
}
