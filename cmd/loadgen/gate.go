package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chf-testbed/testbed/loadgen/gate"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
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

func gateCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen gate", flag.ContinueOnError)
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
	balance := fs.Int64("balance", 100_000_000, "initial balance provisioned per trial")
	tol := fs.Float64("tolerance", 0.05, "relative change tolerated for TPS and SUT CPU per transaction (0.05 = 5%)")
	p99Tol := fs.Float64("p99-tolerance", gate.P99.Tolerance, "relative change tolerated for p99 latency")
	conf := fs.Float64("confidence", 0.95, "two-sided confidence of the intervals")
	maxP99 := fs.Duration("max-p99", 0, "guardrail: the candidate's median p99 must not exceed this (0 = none)")
	minTPS := fs.Float64("min-tps", 0, "guardrail: the candidate's median TPS must reach this (0 = none)")
	mdOut := fs.String("gate-md", "", "write the Markdown summary to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen gate --baseline-chf A --candidate-chf B [--trials 12] [--rate N --duration D] [flags]\n"+
			"       loadgen gate --baseline-files a1.json,a2.json,... --candidate-files b1.json,... [--unpaired]\n\n"+
			"Compares TPS, p99 and SUT CPU per transaction over pairs of trials (the SUT CPU relative to loadgen's\n"+
			"own in the same trial is shown for information). Exit codes: 0 pass,\n"+
			"4 regression, 5 unmeasurable (noise wider than the tolerance), 1 error, 2 usage.\n"+
			"The decision rule is in loadgen/README.md (\"The gate\").\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tol <= 0 || *p99Tol <= 0 || *conf <= 0 || *conf >= 1 {
		return usageError{errors.New("--tolerance and --p99-tolerance must be positive and --confidence within (0, 1)")}
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
			return usageError{errors.New("--trials must be at least 1")}
		}
		if f.outDir == "" {
			f.outDir = filepath.Join("results", "gate-"+time.Now().UTC().Format("20060102-150405"))
		}
		if err := os.MkdirAll(f.outDir, 0o755); err != nil {
			return fmt.Errorf("cannot create %s: %w", f.outDir, err)
		}
		if f.duration == 0 {
			f.duration = 10 * time.Second
		}
		if f.rate == 0 && f.sessionsPerSec == 0 {
			f.rate = 1000
		}
		if f.progress == run.ProgressAuto {
			f.progress = run.ProgressOff
		}
		seed := *orderSeed
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		var err error
		base, cand, err = runTrials(*baseCHF, *candCHF, *trials, *accounts, *balance, seed, &f)
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
	bv, cv := series(base, cand)
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

// series extracts the gate's metrics from the trial results of both
// sides. The adjusted CPU uses the median of loadgen's CPU per transaction
// over all trials as its reference.
func series(base, cand []*report.Result) (bv, cv map[string][]float64) {
	var lg []float64
	for _, r := range append(append([]*report.Result(nil), base...), cand...) {
		lg = append(lg, r.LoadgenUsTxn)
	}
	ref := medianOf(lg)
	one := func(rs []*report.Result) map[string][]float64 {
		m := map[string][]float64{}
		for _, r := range rs {
			m[gate.TPS.Name] = append(m[gate.TPS.Name], r.TPS)
			m[gate.P99.Name] = append(m[gate.P99.Name], r.LatencyMs.P99)
			m[gate.SUTCPUTxn.Name] = append(m[gate.SUTCPUTxn.Name], r.SUTCPUUsTxn)
			m[gate.SUTCPUAdj.Name] = append(m[gate.SUTCPUAdj.Name], gate.AdjustedCPU(r.SUTCPUUsTxn, r.LoadgenUsTxn, ref))
		}
		return m
	}
	return one(base), one(cand)
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pairOrders returns, for n pairs, whether each runs the candidate first:
// in every block of two pairs one runs A B and the other B A, which of the
// two at random (seed). Balanced, a drift of the machine over the run or an
// effect of running second falls on both sides alike; random, no periodic
// pattern of other work on the machine can line up with one side (and the
// signed-rank interval's assumption, that each pair's sign is as likely
// either way under no change, holds by design).
func pairOrders(n int, seed uint64) []bool {
	rng := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909))
	out := make([]bool, n)
	for i := 0; i < n; i += 2 {
		first := rng.IntN(2) == 1
		out[i] = first
		if i+1 < n {
			out[i+1] = !first
		}
	}
	return out
}

// runTrials runs n pairs of trials, each trial on a freshly started local
// CHF, in the orders of pairOrders. Every trial's result file is kept in
// the output directory.
func runTrials(baseCHF, candCHF string, n, accounts int, balance int64, seed uint64, f *runFlags) (base, cand []*report.Result, err error) {
	ctx, stop := signalContext()
	defer stop()
	if f.subscribers == 0 || f.subscribers > accounts {
		f.subscribers = accounts
	}
	f.initialBalance = balance
	type side struct {
		name, chf string
		out       *[]*report.Result
	}
	a := side{"baseline", baseCHF, &base}
	b := side{"candidate", candCHF, &cand}
	started := time.Now()
	orders := pairOrders(n, seed)
	fmt.Printf("gate: %d pairs, order seed %d\n", n, seed)
	for i := 1; i <= n; i++ {
		order := []side{a, b}
		if orders[i-1] {
			order = []side{b, a}
		}
		for _, s := range order {
			tb, err := startTestbed(ctx, s.chf, accounts, balance, f)
			if err != nil {
				return nil, nil, err
			}
			f.balanceURL = "" // this trial's CHF
			o, err := f.options(f.localTargets(tb))
			if err != nil {
				tb.Stop()
				return nil, nil, err
			}
			o.CPU = append(o.CPU, tb.CPU()...)
			o.Label = fmt.Sprintf("%s pair %d", s.name, i)
			res, err := run.Execute(ctx, o)
			tb.Stop()
			if res == nil {
				return nil, nil, err
			}
			path := filepath.Join(f.outDir, fmt.Sprintf("%s-%d.json", s.name, i))
			if werr := res.WriteJSON(path); werr != nil {
				return nil, nil, werr
			}
			fmt.Printf("pair %2d %-9s %6.0f TPS  p99 %7.3f ms  SUT %6.1f µs/txn  loadgen %5.1f µs/txn  errors %d  audit ok=%v\n",
				i, s.name, res.TPS, res.LatencyMs.P99, res.SUTCPUUsTxn, res.LoadgenUsTxn, res.Errors, res.Audit.OK)
			*s.out = append(*s.out, res)
		}
		rb, rc := base[i-1], cand[i-1]
		fmt.Printf("pair %2d ratios: SUT CPU %.3f (adjusted %.3f)  p99 %.3f  TPS %.3f  [%s elapsed]\n", i,
			rc.SUTCPUUsTxn/rb.SUTCPUUsTxn, (rc.SUTCPUUsTxn/rc.LoadgenUsTxn)/(rb.SUTCPUUsTxn/rb.LoadgenUsTxn),
			rc.LatencyMs.P99/rb.LatencyMs.P99, rc.TPS/rb.TPS, time.Since(started).Round(time.Second))
	}
	return base, cand, nil
}
