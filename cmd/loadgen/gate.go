package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/gate"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/local"
)

func init() {
	register("gate", "decide whether a candidate regressed against a baseline from paired trials", gateCmd)
}

// Exit codes of gate.
const (
	exitRegression   = 4
	exitUnmeasurable = 5
)

// gateExit carries a gate verdict's exit code.
type gateExit struct {
	code int
	msg  string
}

func (g gateExit) Error() string { return g.msg }

var gateHelp = help{
	name: "gate",
	synopsis: "loadgen gate --baseline-chf A --candidate-chf B [--trials 12] [--rate N --duration D] [flags]\n" +
		"       loadgen gate --baseline-files a1.json,a2.json,... --candidate-files b1.json,... [--unpaired]",
	text: "Compares TPS, p99 and SUT CPU per transaction over pairs of trials (the SUT CPU relative to loadgen's\n" +
		"own in the same trial is shown for information). Exit codes: 0 pass,\n" +
		"4 regression, 5 unmeasurable (noise wider than the tolerance), 1 error, 2 usage.\n" +
		"The decision rule is in loadgen/README.md (\"The gate\").",
}

// GateConfig is the configuration of loadgen gate: where the trials
// come from (result files, or trials run here on two chf binaries), the
// run flags and local CHF of those trials, and the decision's tolerances.
type GateConfig struct {
	run runFlags
	chf localFlags // no --chf or --tls-dir: the trials name their binaries

	baselineFiles, candidateFiles string
	unpaired                      bool
	baselineCHF, candidateCHF     string
	trials                        int
	orderSeed                     uint64
	tolerance, p99Tolerance       float64
	confidence                    float64
	maxP99                        time.Duration
	minTPS                        float64
	mdOut                         string
}

// DefaultGateConfig returns loadgen gate's defaults.
func DefaultGateConfig() GateConfig {
	return GateConfig{
		chf: defaultLocalFlags(), trials: 12,
		tolerance: 0.05, p99Tolerance: gate.P99.Tolerance, confidence: 0.95,
	}
}

// RegisterFlags registers loadgen gate's flags on fs, c's values as the
// defaults.
func (c *GateConfig) RegisterFlags(fs *flag.FlagSet) {
	c.run.register(fs)
	fs.StringVar(&c.baselineFiles, "baseline-files", c.baselineFiles, "decide from existing results: comma-separated baseline trial JSON files")
	fs.StringVar(&c.candidateFiles, "candidate-files", c.candidateFiles, "decide from existing results: comma-separated candidate trial JSON files (the i-th pairs with the i-th baseline file unless --unpaired)")
	fs.BoolVar(&c.unpaired, "unpaired", c.unpaired, "with --baseline-files: the files are not pairs run back to back (Mann-Whitney instead of signed-rank)")
	fs.StringVar(&c.baselineCHF, "baseline-chf", c.baselineCHF, "run trials: chf binary of the baseline (each trial starts a fresh local CHF)")
	fs.StringVar(&c.candidateCHF, "candidate-chf", c.candidateCHF, "run trials: chf binary of the candidate")
	fs.IntVar(&c.trials, "trials", c.trials, "pairs of trials to run (one baseline and one candidate trial each, back to back; A B or B A, balanced in blocks of two pairs, at random); at least 6 for a 95% interval")
	fs.Uint64Var(&c.orderSeed, "order-seed", c.orderSeed, "seed of the random order of the pairs (0 = from the clock; printed, to repeat a run's order)")
	fs.IntVar(&c.chf.accounts, "accounts", c.chf.accounts, "accounts provisioned per trial")
	fs.Int64Var(&c.chf.balance, "balance", c.chf.balance, "initial balance provisioned per trial, > 0")
	c.chf.store.register(fs)
	fs.Float64Var(&c.tolerance, "tolerance", c.tolerance, "relative change tolerated for TPS and SUT CPU per transaction (0.05 = 5%)")
	fs.Float64Var(&c.p99Tolerance, "p99-tolerance", c.p99Tolerance, "relative change tolerated for p99 latency")
	fs.Float64Var(&c.confidence, "confidence", c.confidence, "two-sided confidence of the intervals")
	fs.DurationVar(&c.maxP99, "max-p99", c.maxP99, "guardrail: the candidate's median p99 must not exceed this (0 = none)")
	fs.Float64Var(&c.minTPS, "min-tps", c.minTPS, "guardrail: the candidate's median TPS must reach this (0 = none)")
	fs.StringVar(&c.mdOut, "gate-md", c.mdOut, "write the Markdown summary to this file")
}

// fromFiles reports whether the gate decides from result files.
func (c *GateConfig) fromFiles() bool { return c.baselineFiles != "" && c.candidateFiles != "" }

// Validate checks the parsed flags (a usage error naming the flag); for
// trials run here, the local CHF's and the run's flags too.
func (c *GateConfig) Validate() error {
	if !(c.tolerance > 0) || !(c.p99Tolerance > 0) || !(c.confidence > 0 && c.confidence < 1) {
		return usageError{errors.New("--tolerance and --p99-tolerance must be positive and --confidence within (0, 1)")}
	}
	if c.maxP99 < 0 || c.minTPS < 0 {
		return usageError{errors.New("--max-p99 and --min-tps must not be negative")}
	}
	switch {
	case c.fromFiles():
		return nil
	case c.baselineCHF != "" && c.candidateCHF != "":
		if c.unpaired {
			return usageError{errors.New("--unpaired applies to --baseline-files; trials run here are always paired")}
		}
		if c.trials < 1 {
			return usageError{fmt.Errorf("invalid --trials: must be at least 1, got %d", c.trials)}
		}
		return c.applyTrialDefaults()
	}
	return usageError{errors.New("give --baseline-files and --candidate-files, or --baseline-chf and --candidate-chf")}
}

// applyTrialDefaults checks the local CHF's flags and sets the run flags
// a gate's trials imply: --out results/gate-<timestamp>, --duration 10s
// and --rate 1000 unless given, no live progress, no default thresholds.
func (c *GateConfig) applyTrialDefaults() error {
	f := &c.run
	if err := c.chf.apply(f); err != nil {
		return err
	}
	if f.outDir == "" {
		f.outDir = filepath.Join("results", "gate-"+time.Now().UTC().Format("20060102-150405"))
	}
	set := setFlags(f.fs)
	if !set["duration"] {
		f.fs.Set("duration", "10s")
	}
	if !set["rate"] && !set["sessions-per-second"] && f.scenarioFile == "" {
		f.fs.Set("rate", "1000")
	}
	if f.progress == run.ProgressAuto {
		f.progress = run.ProgressOff
	}
	f.noDefThresh = true
	return nil
}

func gateCmd(args []string) error {
	c := DefaultGateConfig()
	fs := newFlagSet("gate")
	c.RegisterFlags(fs)
	if err := parseFlags(fs, gateHelp, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	base, cand, err := c.results()
	if err != nil {
		return err
	}
	rep, err := c.evaluate(base, cand)
	if err != nil {
		return err
	}
	if err := c.writeReport(rep); err != nil {
		return err
	}
	switch rep.Verdict {
	case gate.Regression:
		return gateExit{exitRegression, "regression"}
	case gate.Unmeasurable:
		return gateExit{exitUnmeasurable, "unmeasurable: noise wider than the tolerance"}
	}
	return nil
}

// results reads the trials' results from the files, or runs the trials.
func (c *GateConfig) results() (base, cand []*report.Result, err error) {
	if !c.fromFiles() {
		return gateTrials(&c.run, c.baselineCHF, c.candidateCHF, c.trials, c.orderSeed, c.chf)
	}
	if base, err = readResults(c.baselineFiles); err != nil {
		return nil, nil, err
	}
	if cand, err = readResults(c.candidateFiles); err != nil {
		return nil, nil, err
	}
	if !c.unpaired && len(base) != len(cand) {
		return nil, nil, usageError{fmt.Errorf("paired trials need as many baseline as candidate files (%d and %d); add --unpaired", len(base), len(cand))}
	}
	return base, cand, nil
}

// evaluate decides on TPS, p99 and SUT CPU per transaction (the
// loadgen-adjusted SUT CPU for information), with the guardrails.
func (c *GateConfig) evaluate(base, cand []*report.Result) (*gate.Report, error) {
	p99 := gate.P99
	p99.Tolerance = c.p99Tolerance
	adj := gate.SUTCPUAdj
	adj.Info = true
	metrics := []gate.Metric{gate.TPS, p99, gate.SUTCPUTxn, adj}
	bv, cv := gate.Series(base, cand)
	var guards []gate.Guardrail
	if c.maxP99 > 0 {
		guards = append(guards, gate.Guardrail{Metric: gate.P99, Limit: float64(c.maxP99) / 1e6})
	}
	if c.minTPS > 0 {
		guards = append(guards, gate.Guardrail{Metric: gate.TPS, Limit: c.minTPS})
	}
	return gate.Evaluate(metrics, bv, cv, guards, gate.Config{Tolerance: c.tolerance, Confidence: c.confidence, Paired: !c.unpaired})
}

// writeReport prints the decision and writes --gate-md and --json.
func (c *GateConfig) writeReport(rep *gate.Report) error {
	fmt.Println()
	rep.WriteMarkdown(os.Stdout)
	if c.mdOut != "" {
		out, err := os.Create(c.mdOut)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", c.mdOut, err)
		}
		rep.WriteMarkdown(out)
		if err := out.Close(); err != nil {
			return fmt.Errorf("cannot write %s: %w", c.mdOut, err)
		}
	}
	if c.run.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.run.jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", c.run.jsonOut, err)
		}
	}
	return nil
}

// gateTrials runs the pairs of trials of loadgen/gate, each trial on a
// freshly started local CHF; f and l are validated.
func gateTrials(f *runFlags, baseCHF, candCHF string, n int, seed uint64, l localFlags) (base, cand []*report.Result, err error) {
	o, err := f.options(nil) // every flag checked before anything starts
	if err != nil {
		return nil, nil, err
	}
	f.applyProcs(o.Scenario)
	// Every trial runs the whole scenario on a fresh CHF: the same plans.
	plans, initialOf, err := testbed.Plans(&o.Scenario, l.balance)
	if err != nil {
		return nil, nil, usageError{err}
	}
	o.InitialOf = initialOf
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("cannot create %s: %w", f.outDir, err)
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := onSignals()
	defer s.Stop()
	side := func(name, chf string) gate.Side {
		return gate.Side{Name: name, Trial: func(ctx context.Context, pair int) (*report.Result, error) {
			return gateTrial(ctx, s, f, o, l, plans, name, chf, pair)
		}}
	}
	base, cand, err = gate.RunTrials(s.Context(), gate.Trials{
		Pairs: n, Seed: seed, Baseline: side("baseline", baseCHF), Candidate: side("candidate", candCHF), OutDir: f.outDir, Out: os.Stdout,
	})
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	return base, cand, nil
}

// gateTrial runs one trial of o on a fresh local CHF (and a fresh store:
// asd in its own directory).
func gateTrial(ctx context.Context, s *stopper, f *runFlags, o run.Options, l localFlags, plans []local.Plan, name, chf string, pair int) (*report.Result, error) {
	st := l.store.config(filepath.Join(f.outDir, fmt.Sprintf("%s-%d", name, pair)))
	tb, err := startTestbed(ctx, chf, l.accounts, l.balance, o.Scenario.Subscribers.First, f, plans, st)
	if err != nil {
		return nil, err
	}
	defer tb.Stop()
	t := o
	t.Targets = f.localTargets(tb)
	if f.proto == "gy" {
		t.BalanceTargets = []string{tb.Target}
	}
	t.CPU = append(append([]cpu.Source(nil), o.CPU...), tb.CPU()...)
	localHops(tb, &t)
	t.Label = fmt.Sprintf("%s pair %d", name, pair)
	t.Provenance.CHFVersion = chfVersion(ctx, tb.CHF)
	t.Provenance.Store = storeProvenance(tb)
	res, err := run.Execute(ctx, t)
	s.mark(res)
	return res, err
}

func readResults(list string) ([]*report.Result, error) {
	var out []*report.Result
	for _, p := range strings.Split(list, ",") {
		r, err := report.ReadJSON(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
