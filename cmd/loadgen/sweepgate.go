package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/sweep"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("sweep", "step the offered TPS to find the knee within a latency SLO (capacity curves)", sweepCmd)
}

// target is where runs go: a deployed CHF (--target) or local testbeds.
type target struct {
	targets []string
	local   bool
	chf     string
	tb      *testbed.Testbed
}

func sweepCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen sweep", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	tgt := fs.String("target", "", "CGW endpoints (http://HOST:PORT,... or diameter://HOST:PORT,... for Gy); empty with --local")
	local := fs.Bool("local", false, "start the local CHF once and sweep it (like loadgen local)")
	chfBin := fs.String("chf", "", "chf binary for --local")
	accounts := fs.Int("accounts", 100_000, "accounts provisioned by --local; each step uses its own slice of them")
	balance := fs.Int64("balance", 100_000_000, "initial balance provisioned by --local")
	start := fs.Float64("start", 1000, "first offered TPS")
	step := fs.Float64("step", 1000, "TPS added per step")
	maxTPS := fs.Float64("max", 20000, "highest offered TPS")
	untilBreak := fs.Bool("until-break", true, "stop at the first step that misses the SLO")
	sloP99 := fs.Duration("slo-p99", 10*time.Millisecond, "SLO: p99 latency (from the scheduled send) at most this")
	sloErr := fs.Float64("slo-error-rate", 0, "SLO: errors / transactions at most this")
	sloLate := fs.Float64("slo-late-rate", 0.01, "SLO: (late + dropped) / offered at most this")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen sweep (--target URL | --local) [--start N --step N --max N] [--slo-p99 10ms] [flags]\n\n"+
			"Each step is a full run (ramp-up, warm-up, --duration, audit) on its own slice of the subscriber range.\n"+
			"Writes sweep.json, sweep.md and sweep.html into --out (default results/sweep-<timestamp>).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.duration == 0 {
		f.duration = 10 * time.Second
	}
	if f.outDir == "" {
		f.outDir = filepath.Join("results", "sweep-"+time.Now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", f.outDir, err)
	}
	f.rate = *start // validated below; each step sets its own
	ctx, stop := signalContext()
	defer stop()
	t, err := openTarget(ctx, *tgt, *local, *chfBin, *accounts, *balance, &f)
	if err != nil {
		return err
	}
	defer t.close()
	base, err := f.options(t.targets)
	if err != nil {
		return err
	}
	base.CPU = append(base.CPU, t.cpu()...)
	if base.ProgressMode == run.ProgressAuto {
		base.ProgressMode = run.ProgressOff
	}
	nsteps := int((*maxTPS-*start) / *step) + 1
	if nsteps < 1 {
		return usageError{errors.New("need --max >= --start")}
	}
	full := base.Scenario
	i := 0
	cfg := sweep.Config{
		Start: *start, Step: *step, Max: *maxTPS, UntilBreak: *untilBreak,
		SLO: sweep.SLO{P99Ms: float64(*sloP99) / 1e6, MaxErrorRate: *sloErr, MaxLateRate: *sloLate},
		RunStep: func(ctx context.Context, tps float64) (*report.Result, error) {
			o := base
			o.Scenario = ShardScenario(full, i, nsteps) // fresh subscribers per step
			o.Scenario.Load = scenario.Load{TPS: tps}
			o.Label = fmt.Sprintf("%s%.0f TPS", labelPrefix(f.label), tps)
			i++
			base.Log.Info("sweep step", "offered_tps", tps, "subscribers_from", o.Scenario.Subscribers.First)
			return run.Execute(ctx, o)
		},
		Progress: func(s sweep.Step) {
			v := "met"
			if !s.Pass {
				v = "missed: " + s.Reason
			}
			fmt.Printf("step %6.0f TPS: achieved %6.0f p50 %7.3f ms p99 %7.3f ms errors %d late %d SUT %.1f µs/txn  SLO %s\n",
				s.OfferedTPS, s.Result.TPS, s.Result.LatencyMs.P50, s.Result.LatencyMs.P99, s.Result.Errors, s.Result.Late, s.Result.SUTCPUUsTxn, v)
		},
	}
	res, err := sweep.Run(ctx, cfg)
	if res == nil {
		return err
	}
	res.Label = f.label
	if werr := writeSweep(res, f.outDir); werr != nil && err == nil {
		err = werr
	}
	res.WriteMarkdown(os.Stdout)
	fmt.Printf("\nreports: %s\n", f.outDir)
	return err
}

func labelPrefix(l string) string {
	if l == "" {
		return ""
	}
	return l + " "
}

func writeSweep(res *sweep.Result, dir string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode sweep: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write sweep.json: %w", err)
	}
	md, err := os.Create(filepath.Join(dir, "sweep.md"))
	if err != nil {
		return fmt.Errorf("cannot create sweep.md: %w", err)
	}
	res.WriteMarkdown(md)
	md.Close()
	h, err := os.Create(filepath.Join(dir, "sweep.html"))
	if err != nil {
		return fmt.Errorf("cannot create sweep.html: %w", err)
	}
	defer h.Close()
	return res.WriteHTML(h)
}

// openTarget resolves --target or starts a local testbed.
func openTarget(ctx context.Context, tgt string, local bool, chf string, accounts int, balance int64, f *runFlags) (*target, error) {
	if local == (tgt != "") {
		return nil, usageError{errors.New("give exactly one of --target and --local")}
	}
	if !local {
		ts, err := f.parseTargets(tgt)
		if err != nil {
			return nil, err
		}
		return &target{targets: ts}, nil
	}
	if f.subscribers == 0 || f.subscribers > accounts {
		f.subscribers = accounts
	}
	if f.initialBalance == 0 {
		f.initialBalance = balance
	}
	tb, err := startTestbed(ctx, chf, accounts, balance, f)
	if err != nil {
		return nil, err
	}
	return &target{targets: f.localTargets(tb), local: true, chf: chf, tb: tb}, nil
}

func startTestbed(ctx context.Context, chf string, accounts int, balance int64, f *runFlags) (*testbed.Testbed, error) {
	log, err := newLogger(f.logLevel)
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(filepath.Join(f.outDir, "chf.log"))
	if err != nil {
		return nil, fmt.Errorf("cannot create chf.log: %w", err)
	}
	first := f.first
	if first == "" {
		first = scenario.Default().Subscribers.First
	}
	tb, err := testbed.Start(ctx, testbed.Options{CHF: chf, Accounts: accounts, Balance: balance, First: first, Logs: logs, Log: log, Diameter: f.proto == "gy"})
	if err != nil {
		logs.Close()
		return nil, err
	}
	log.Info("local CHF ready", "target", tb.Target, "pids", tb.Pids, "chf", tb.CHF)
	return tb, nil
}

func (t *target) cpu() []cpu.Source {
	if t.tb == nil {
		return nil
	}
	return t.tb.CPU()
}

func (t *target) close() {
	if t.tb != nil {
		t.tb.Stop()
	}
}
