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

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/sweep"
	"github.com/chf-testbed/testbed/loadgen/testbed"
	"github.com/chf-testbed/testbed/local"
)

func init() {
	register("sweep", "step the offered TPS to find the knee within a latency SLO (capacity curves)", sweepCmd)
}

var sweepHelp = help{
	name:     "sweep",
	synopsis: "loadgen sweep (--target URL | --local) [--start N --step N --max N] [--slo-p99 10ms] [flags]",
	text: "Each step is a full run (ramp-up, warm-up, --duration, audit) on its own slice of the subscriber range.\n" +
		"Writes sweep.json, sweep.md and sweep.html into --out (default results/sweep-<timestamp>).\n" +
		"Every argument is checked before anything starts. --threshold adds to each step's SLO (the default\n" +
		"thresholds do not apply to a sweep's steps). SIGINT or SIGTERM stops the sweep after writing what it has.",
}

func sweepCmd(args []string) (err error) {
	fs := newFlagSet("sweep")
	var f runFlags
	f.register(fs)
	tgt := fs.String("target", "", "CGW endpoints (http://HOST:PORT,... or diameter://HOST:PORT,... for Gy); empty with --local")
	local := fs.Bool("local", false, "start the local CHF once and sweep it (like loadgen local)")
	fs.StringVar(&f.localCDRDir, "cdr-dir", "", "with --local: the OCP writes CHF-CDRs into this directory (its --cdr-dir), to sweep with CDRs on; empty = no CDRs")
	var l localFlags
	l.register(fs, "accounts provisioned by --local; each step uses its own slice of them")
	start := fs.Float64("start", 1000, "first offered TPS, > 0")
	step := fs.Float64("step", 1000, "TPS added per step, > 0")
	maxTPS := fs.Float64("max", 20000, "highest offered TPS, >= --start")
	untilBreak := fs.Bool("until-break", true, "stop at the first step that misses the SLO")
	retries := fs.Int("retries", 0, "run a step that misses the SLO up to this many more times (0..5) before it counts as failed: one noisy step on a shared machine does not end the sweep; each attempt is in the sweep's table")
	maxSteal := fs.Float64("max-steal", 5, "void an attempt that misses the SLO while the hypervisor took more than this percentage of one core in some second of its window (host_steal_percent), and run it again; 0 = never void")
	maxFreeze := fs.Duration("max-freeze", 0, "void an attempt that misses the SLO while the host froze one of this machine's CPUs for longer than this in its window (host_freezes worst_ms, from --host-probe), and run it again, from --steal-retries' allowance; 0 = never void (on a VM whose host stalls idle vCPUs, as in loadgen/README.md, try 20ms)")
	stealRetries := fs.Int("steal-retries", 3, "most attempts voided by --max-steal over the whole sweep (0..100), on top of --retries; each takes a slice of the subscribers like any attempt")
	sloP99 := fs.Duration("slo-p99", 10*time.Millisecond, "SLO: p99 latency (from the scheduled send) at most this (0 = no limit)")
	sloErr := fs.Float64("slo-error-rate", 0, "SLO: errors / transactions at most this (0..1)")
	sloLate := fs.Float64("slo-late-rate", 0.01, "SLO: (late + dropped) / offered at most this (0..1)")
	if err := parseFlags(fs, sweepHelp, args); err != nil {
		return err
	}
	cfg := sweep.Config{
		Start: *start, Step: *step, Max: *maxTPS, UntilBreak: *untilBreak, Retries: *retries,
		MaxSteal: *maxSteal, StealRetries: *stealRetries, MaxFreezeMs: float64(*maxFreeze) / 1e6,
		SLO: sweep.SLO{P99Ms: float64(*sloP99) / 1e6, MaxErrorRate: *sloErr, MaxLateRate: *sloLate},
	}
	if err := cfg.Validate(); err != nil {
		return usageError{sweepFlagError(err)}
	}
	if *local == (*tgt != "") {
		return usageError{errors.New("give exactly one of --target and --local")}
	}
	if f.localCDRDir != "" && !*local {
		return usageError{errors.New("invalid --cdr-dir: only with --local (a remote CHF's OCP has its own --cdr-dir)")}
	}
	if err := f.checkFlags(); err != nil {
		return err
	}
	var targets []string
	if *local {
		if err := l.apply(&f); err != nil {
			return err
		}
	} else if setFlags(fs)["aerospike"] || setFlags(fs)["store"] || setFlags(fs)["store-nodes"] || setFlags(fs)["asd-binary"] || setFlags(fs)["as-namespace"] {
		return usageError{errors.New("invalid --aerospike/--store/--store-nodes/--asd-binary/--as-namespace: only with --local")}
	} else if targets, err = f.parseTargets(*tgt); err != nil {
		return err
	}
	if setFlags(fs)["rate"] || setFlags(fs)["sessions-per-second"] {
		return usageError{errors.New("--rate and --sessions-per-second do not apply to a sweep: each step offers its own rate (--start, --step, --max)")}
	}
	if !setFlags(fs)["duration"] {
		fs.Set("duration", "10s")
	}
	fs.Set("rate", fmt.Sprint(*start)) // each step sets its own
	f.noDefThresh = true
	base, err := f.options(targets) // every flag checked before anything starts
	if err != nil {
		return err
	}
	nsteps := cfg.Attempts() // every attempt its own slice
	if base.Scenario.Subscribers.Count < nsteps {
		return usageError{fmt.Errorf("invalid --subscribers: %d subscribers cannot give each of the %d steps (attempts included) its own slice", base.Scenario.Subscribers.Count, nsteps)}
	}
	if base.ProgressMode == run.ProgressAuto {
		base.ProgressMode = run.ProgressOff
	}
	if f.outDir == "" {
		f.outDir = filepath.Join("results", "sweep-"+time.Now().UTC().Format("20060102-150405"))
	}
	cleanup, err := resultsDir(f.outDir)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil && !errors.As(err, new(interrupted))) }()
	s := onSignals()
	defer s.Stop()
	var initialOf []func(int32) audit.Account // per step, with account plans
	if *local {
		// Each step runs its own slice of the range: the plans give each
		// slice the scenario's postpaid and bucket shares.
		plans, init, err := testbed.ShardPlans(&base.Scenario, nsteps, *l.balance)
		if err != nil {
			return usageError{err}
		}
		initialOf = init
		tb, err := startTestbed(s.Context(), *l.chf, *l.accounts, *l.balance, base.Scenario.Subscribers.First, &f, plans, l.store.config(f.outDir))
		if err != nil {
			return s.wrap(err)
		}
		defer tb.Stop()
		base.Targets = f.localTargets(tb)
		if f.proto == "gy" {
			base.BalanceTargets = []string{tb.Target}
		}
		base.CPU = append(base.CPU, tb.CPU()...)
		localHops(tb, &base)
		base.Provenance.CHFVersion = chfVersion(s.Context(), tb.CHF)
		base.Provenance.Store = storeProvenance(tb)
	}
	f.applyProcs(base.Scenario)
	full := base.Scenario
	i := 0
	cfg.RunStep = func(ctx context.Context, tps float64) (*report.Result, error) {
		o := base
		o.Scenario = scenario.Shard(full, i, nsteps) // fresh subscribers per step
		if initialOf != nil {
			o.InitialOf = initialOf[i]
		}
		o.Scenario.Load = scenario.Load{TPS: tps}
		o.Label = fmt.Sprintf("%s%.0f TPS", labelPrefix(f.label), tps)
		i++
		base.Log.Info("sweep step", "offered_tps", tps, "subscribers_from", o.Scenario.Subscribers.First)
		res, err := run.Execute(ctx, o)
		s.mark(res)
		return res, err
	}
	cfg.Progress = func(st sweep.Step) {
		v := "met"
		if !st.Pass {
			v = "missed: " + st.Reason
		}
		fmt.Printf("step %6.0f TPS: achieved %6.0f p50 %7.3f ms p99 %7.3f ms errors %d late %d SUT %.1f µs/txn  SLO %s\n",
			st.OfferedTPS, st.Result.TPS, st.Result.LatencyMs.P50, st.Result.LatencyMs.P99, st.Result.Errors, st.Result.Late, st.Result.SUTCPUUsTxn, v)
	}
	res, err := sweep.Run(s.Context(), cfg)
	if res == nil {
		return s.wrap(err)
	}
	res.Label = f.label
	res.Interrupted = s.Signal() != nil
	if len(res.Steps) == 0 {
		return s.wrap(err)
	}
	if werr := writeSweep(res, f.outDir); werr != nil && err == nil {
		err = werr
	}
	res.WriteMarkdown(os.Stdout)
	fmt.Printf("\nreports: %s\n", f.outDir)
	return s.wrap(err)
}

// sweepFlagError renames a sweep.Config field in err after its flag.
func sweepFlagError(err error) error {
	msg := err.Error()
	for field, flag := range map[string]string{
		"start": "start", "step": "step", "max": "max", "slo.p99_ms": "slo-p99",
		"slo.max_error_rate": "slo-error-rate", "slo.max_late_rate": "slo-late-rate", "retries": "retries",
		"max_steal": "max-steal", "steal_retries": "steal-retries", "max_freeze_ms": "max-freeze",
	} {
		prefix := sweep.ErrConfig.Error() + ": " + field + ": "
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			return fmt.Errorf("invalid --%s: %s", flag, rest)
		}
	}
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
	if err := res.WriteHTML(h); err != nil {
		h.Close()
		return err
	}
	if err := h.Close(); err != nil {
		return fmt.Errorf("cannot write sweep.html: %w", err)
	}
	printIndex(dir)
	return nil
}

// startTestbed starts a local CHF for sweep and gate on store st, its
// logs into chf.log of the results directory.
func startTestbed(ctx context.Context, chf string, accounts int, balance int64, first string, f *runFlags, plans []local.Plan, st local.StoreConfig) (*testbed.Testbed, error) {
	log, err := newLogger(f.logLevel)
	if err != nil {
		return nil, err
	}
	logs, err := os.OpenFile(filepath.Join(f.outDir, "chf.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create chf.log: %w", err)
	}
	var ocpArgs []string
	if f.localCDRDir != "" {
		ocpArgs = []string{"--cdr-dir", f.localCDRDir}
	}
	cgwArgs, err := localCGWArgs(nil, f.operatorToken)
	if err != nil {
		logs.Close()
		return nil, err
	}
	tb, err := testbed.Start(ctx, testbed.Options{CHF: chf, Accounts: accounts, Balance: balance, First: first, Logs: logs, Log: log, Diameter: f.proto == "gy", TLSDir: f.localTLSDir,
		CGWArgs: cgwArgs, OCPArgs: ocpArgs, Plans: plans, Store: st, RuntimeProfile: sched.Profile(f.runtimeProfile)})
	if err != nil {
		logs.Close()
		return nil, err
	}
	log.Info("local CHF ready", "target", tb.Target, "pids", tb.Pids, "chf", tb.CHF, "store", tb.Store().Kind, "store_build", tb.Store().Build)
	return tb, nil
}
