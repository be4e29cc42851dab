package main

import (
	"context"
	"encoding/json"
	"errors"
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

func gateCmd(args []string) error {
	fs := newFlagSet("gate")
	var f runFlags
	f.register(fs)
	baseFiles := fs.String("baseline-files", "", "decide from existing results: comma-separated baseline trial JSON files")
	candFiles := fs.String("candidate-files", "", "decide from existing results: comma-separated candidate trial JSON files (the i-th pairs with the i-th baseline file unless --unpaired)")
	unpaired := fs.Bool("unpaired", false, "with --baseline-files: the files are not pairs run back to back (Mann-Whitney instead of signed-rank)")
	baseCHF := fs.String("baseline-chf", "", "run trials: chf binary of the baseline (each trial starts a fresh local CHF)")
	candCHF := fs.String("candidate-chf", "", "run trials: chf binary of the candidate")
	trials := fs.Int("trials", 12, "pairs of trials to run (one baseline and one candidate trial each, back to back; A B or B A, balanced in blocks of two pairs, at random); at least 6 for a 95% interval")
	orderSeed := fs.Uint64("order-seed", 0, "seed of the random order of the pairs (0 = from the clock; printed, to repeat a run's order)")
	accounts := fs.Int("accounts", 100_000, "accounts provisioned per trial")
	balance := fs.Int64("balance", 100_000_000, "initial balance provisioned per trial, > 0")
	var store storeFlags
	store.register(fs)
	tol := fs.Float64("tolerance", 0.05, "relative change tolerated for TPS and SUT CPU per transaction (0.05 = 5%)")
	p99Tol := fs.Float64("p99-tolerance", gate.P99.Tolerance, "relative change tolerated for p99 latency")
	conf := fs.Float64("confidence", 0.95, "two-sided confidence of the intervals")
	maxP99 := fs.Duration("max-p99", 0, "guardrail: the candidate's median p99 must not exceed this (0 = none)")
	minTPS := fs.Float64("min-tps", 0, "guardrail: the candidate's median TPS must reach this (0 = none)")
	mdOut := fs.String("gate-md", "", "write the Markdown summary to this file")
	if err := parseFlags(fs, gateHelp, args); err != nil {
		return err
	}
	if !(*tol > 0) || !(*p99Tol > 0) || !(*conf > 0 && *conf < 1) {
		return usageError{errors.New("--tolerance and --p99-tolerance must be positive and --confidence within (0, 1)")}
	}
	if *maxP99 < 0 || *minTPS < 0 {
		return usageError{errors.New("--max-p99 and --min-tps must not be negative")}
	}
	paired := !*unpaired
	var base, cand []*report.Result
	switch {
	case *baseFiles != "" && *candFiles != "":
		var err error
		if base, err = readResults(*baseFiles); err != nil {
			return err
		}
		if cand, err = readResults(*candFiles); err != nil {
			return err
		}
		if paired && len(base) != len(cand) {
			return usageError{fmt.Errorf("paired trials need as many baseline as candidate files (%d and %d); add --unpaired", len(base), len(cand))}
		}
	case *baseCHF != "" && *candCHF != "":
		if *unpaired {
			return usageError{errors.New("--unpaired applies to --baseline-files; trials run here are always paired")}
		}
		if *trials < 1 {
			return usageError{fmt.Errorf("invalid --trials: must be at least 1, got %d", *trials)}
		}
		var err error
		base, cand, err = gateTrials(&f, fs.Set, *baseCHF, *candCHF, *trials, *orderSeed, localFlags{chf: new(string), accounts: accounts, balance: balance, store: store})
		if err != nil {
			return err
		}
	default:
		return usageError{errors.New("give --baseline-files and --candidate-files, or --baseline-chf and --candidate-chf")}
	}
	p99 := gate.P99
	p99.Tolerance = *p99Tol
	adj := gate.SUTCPUAdj
	adj.Info = true
	metrics := []gate.Metric{gate.TPS, p99, gate.SUTCPUTxn, adj}
	bv, cv := gate.Series(base, cand)
	var guards []gate.Guardrail
	if *maxP99 > 0 {
		guards = append(guards, gate.Guardrail{Metric: gate.P99, Limit: float64(*maxP99) / 1e6})
	}
	if *minTPS > 0 {
		guards = append(guards, gate.Guardrail{Metric: gate.TPS, Limit: *minTPS})
	}
	rep, err := gate.Evaluate(metrics, bv, cv, guards, gate.Config{Tolerance: *tol, Confidence: *conf, Paired: paired})
	if err != nil {
		return err
	}
	fmt.Println()
	rep.WriteMarkdown(os.Stdout)
	if *mdOut != "" {
		out, err := os.Create(*mdOut)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", *mdOut, err)
		}
		rep.WriteMarkdown(out)
		if err := out.Close(); err != nil {
			return fmt.Errorf("cannot write %s: %w", *mdOut, err)
		}
	}
	if f.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(f.jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", f.jsonOut, err)
		}
	}
	switch rep.Verdict {
	case gate.Regression:
		return gateExit{exitRegression, "regression"}
	case gate.Unmeasurable:
		return gateExit{exitUnmeasurable, "unmeasurable: noise wider than the tolerance"}
	}
	return nil
}

// gateTrials checks the run flags, then runs the pairs of trials of
// loadgen/gate, each trial on a freshly started local CHF.
func gateTrials(f *runFlags, set func(name, value string) error, baseCHF, candCHF string, n int, seed uint64, l localFlags) (base, cand []*report.Result, err error) {
	if err := l.apply(f); err != nil {
		return nil, nil, err
	}
	if f.outDir == "" {
		f.outDir = filepath.Join("results", "gate-"+time.Now().UTC().Format("20060102-150405"))
	}
	if !setFlags(f.fs)["duration"] {
		set("duration", "10s")
	}
	if !setFlags(f.fs)["rate"] && !setFlags(f.fs)["sessions-per-second"] && f.scenarioFile == "" {
		set("rate", "1000")
	}
	if f.progress == run.ProgressAuto {
		f.progress = run.ProgressOff
	}
	f.noDefThresh = true
	o, err := f.options(nil) // every flag checked before anything starts
	if err != nil {
		return nil, nil, err
	}
	f.applyProcs(o.Scenario)
	// Every trial runs the whole scenario on a fresh CHF: the same plans.
	plans, initialOf, err := testbed.Plans(&o.Scenario, *l.balance)
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
			// A fresh store per trial too (asd in its own directory).
			st := l.store.config(filepath.Join(f.outDir, fmt.Sprintf("%s-%d", name, pair)))
			tb, err := startTestbed(ctx, chf, *l.accounts, *l.balance, o.Scenario.Subscribers.First, f, plans, st)
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
