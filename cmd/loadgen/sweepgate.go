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

// SweepConfig is the configuration of loadgen sweep: the run's flags,
// the local CHF's (with --local), and the sweep's steps and SLO.
type SweepConfig struct {
	run runFlags
	chf localFlags

	target                    string
	local                     bool
	start, step, max          float64
	untilBreak                bool
	retries, stealRetries     int
	maxSteal                  float64
	maxFreeze, sloP99         time.Duration
	sloErrorRate, sloLateRate float64

	// Resolved by Validate.
	sweep   sweep.Config
	targets []string
}

// DefaultSweepConfig returns loadgen sweep's defaults.
func DefaultSweepConfig() SweepConfig {
	return SweepConfig{
		chf: defaultLocalFlags(), start: 1000, step: 1000, max: 20000, untilBreak: true,
		maxSteal: 5, stealRetries: 3, sloP99: 10 * time.Millisecond, sloLateRate: 0.01,
	}
}

// RegisterFlags registers loadgen sweep's flags on fs, c's values as the
// defaults.
func (c *SweepConfig) RegisterFlags(fs *flag.FlagSet) {
	c.run.register(fs)
	fs.StringVar(&c.target, "target", c.target, "CGW endpoints (http://HOST:PORT,... or diameter://HOST:PORT,... for Gy); empty with --local")
	fs.BoolVar(&c.local, "local", c.local, "start the local CHF once and sweep it (like loadgen local)")
	fs.StringVar(&c.run.localCDRDir, "cdr-dir", c.run.localCDRDir, "with --local: the OCP writes CHF-CDRs into this directory (its --cdr-dir), to sweep with CDRs on; empty = no CDRs")
	c.chf.register(fs, "accounts provisioned by --local; each step uses its own slice of them")
	fs.Float64Var(&c.start, "start", c.start, "first offered TPS, > 0")
	fs.Float64Var(&c.step, "step", c.step, "TPS added per step, > 0")
	fs.Float64Var(&c.max, "max", c.max, "highest offered TPS, >= --start")
	fs.BoolVar(&c.untilBreak, "until-break", c.untilBreak, "stop at the first step that misses the SLO")
	fs.IntVar(&c.retries, "retries", c.retries, "run a step that misses the SLO up to this many more times (0..5) before it counts as failed: one noisy step on a shared machine does not end the sweep; each attempt is in the sweep's table")
	fs.Float64Var(&c.maxSteal, "max-steal", c.maxSteal, "void an attempt that misses the SLO while the hypervisor took more than this percentage of one core in some second of its window (host_steal_percent), and run it again; 0 = never void")
	fs.DurationVar(&c.maxFreeze, "max-freeze", c.maxFreeze, "void an attempt that misses the SLO while the host froze one of this machine's CPUs for longer than this in its window (host_freezes worst_ms, from --host-probe), and run it again, from --steal-retries' allowance; 0 = never void (on a VM whose host stalls idle vCPUs, as in loadgen/README.md, try 20ms)")
	fs.IntVar(&c.stealRetries, "steal-retries", c.stealRetries, "most attempts voided by --max-steal over the whole sweep (0..100), on top of --retries; each takes a slice of the subscribers like any attempt")
	fs.DurationVar(&c.sloP99, "slo-p99", c.sloP99, "SLO: p99 latency (from the scheduled send) at most this (0 = no limit)")
	fs.Float64Var(&c.sloErrorRate, "slo-error-rate", c.sloErrorRate, "SLO: errors / transactions at most this (0..1)")
	fs.Float64Var(&c.sloLateRate, "slo-late-rate", c.sloLateRate, "SLO: (late + dropped) / offered at most this (0..1)")
}

// Validate checks the parsed flags (a usage error naming the flag),
// builds the sweep's configuration and the targets, and sets the run
// flags a sweep implies (--duration 10s unless given, no default
// thresholds).
func (c *SweepConfig) Validate() error {
	c.sweep = sweep.Config{
		Start: c.start, Step: c.step, Max: c.max, UntilBreak: c.untilBreak, Retries: c.retries,
		MaxSteal: c.maxSteal, StealRetries: c.stealRetries, MaxFreezeMs: float64(c.maxFreeze) / 1e6,
		SLO: sweep.SLO{P99Ms: float64(c.sloP99) / 1e6, MaxErrorRate: c.sloErrorRate, MaxLateRate: c.sloLateRate},
	}
	if err := c.sweep.Validate(); err != nil {
		return usageError{sweepFlagError(err)}
	}
	if c.local == (c.target != "") {
		return usageError{errors.New("give exactly one of --target and --local")}
	}
	if c.run.localCDRDir != "" && !c.local {
		return usageError{errors.New("invalid --cdr-dir: only with --local (a remote CHF's OCP has its own --cdr-dir)")}
	}
	if err := c.run.checkFlags(); err != nil {
		return err
	}
	set := setFlags(c.run.fs)
	var err error
	switch {
	case c.local:
		err = c.chf.apply(&c.run)
	case set["aerospike"] || set["store"] || set["store-nodes"] || set["asd-binary"] || set["as-namespace"]:
		err = usageError{errors.New("invalid --aerospike/--store/--store-nodes/--asd-binary/--as-namespace: only with --local")}
	default:
		c.targets, err = c.run.parseTargets(c.target)
	}
	if err != nil {
		return err
	}
	if set["rate"] || set["sessions-per-second"] {
		return usageError{errors.New("--rate and --sessions-per-second do not apply to a sweep: each step offers its own rate (--start, --step, --max)")}
	}
	if !set["duration"] {
		c.run.fs.Set("duration", "10s")
	}
	c.run.fs.Set("rate", fmt.Sprint(c.start)) // each step sets its own
	c.run.noDefThresh = true
	return nil
}

func sweepCmd(args []string) error {
	c := DefaultSweepConfig()
	fs := newFlagSet("sweep")
	c.RegisterFlags(fs)
	if err := parseFlags(fs, sweepHelp, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	s := onSignals()
	defer s.Stop()
	_, err := c.execute(s)
	return err
}

// execute runs the validated sweep under s, writes its reports and
// returns its result (loadgen sweep, and loadgen bench's sweep).
func (c *SweepConfig) execute(s *stopper) (_ *sweep.Result, err error) {
	f := &c.run
	base, err := f.options(c.targets) // every flag checked before anything starts
	if err != nil {
		return nil, err
	}
	nsteps := c.sweep.Attempts() // every attempt its own slice
	if base.Scenario.Subscribers.Count < nsteps {
		return nil, usageError{fmt.Errorf("invalid --subscribers: %d subscribers cannot give each of the %d steps (attempts included) its own slice", base.Scenario.Subscribers.Count, nsteps)}
	}
	if n := hotSlice(c.sweep.Max, base.Scenario.Subscribers.Count, nsteps); n != "" {
		fmt.Fprintln(os.Stderr, "sweep: note: "+n)
	}
	if base.ProgressMode == run.ProgressAuto {
		base.ProgressMode = run.ProgressOff
	}
	if f.outDir == "" {
		f.outDir = filepath.Join("results", "sweep-"+time.Now().UTC().Format("20060102-150405"))
	}
	cleanup, err := resultsDir(f.outDir)
	if err != nil {
		return nil, err
	}
	defer func() { cleanup(err != nil && !errors.As(err, new(interrupted))) }()
	var initialOf []func(int32) audit.Account // per step, with account plans
	if c.local {
		tb, init, err := c.startLocal(s, &base, nsteps)
		if err != nil {
			return nil, err
		}
		defer tb.Stop()
		initialOf = init
	}
	f.applyProcs(base.Scenario)
	c.sweep.RunStep = c.stepRunner(s, base, nsteps, initialOf)
	c.sweep.Progress = printSweepStep
	res, err := sweep.Run(s.Context(), c.sweep)
	return res, c.finish(s, res, err)
}

// startLocal starts the local CHF of sweep --local and points base at
// it. Each step runs its own slice of the range: the plans give each
// slice the scenario's postpaid and bucket shares.
func (c *SweepConfig) startLocal(s *stopper, base *run.Options, nsteps int) (*testbed.Testbed, []func(int32) audit.Account, error) {
	f := &c.run
	plans, initialOf, err := testbed.ShardPlans(&base.Scenario, nsteps, c.chf.balance)
	if err != nil {
		return nil, nil, usageError{err}
	}
	tb, err := startTestbed(s.Context(), c.chf.chf, c.chf.accounts, c.chf.balance, base.Scenario.Subscribers.First, f, plans, c.chf.store.config(f.outDir))
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	base.Targets = f.localTargets(tb)
	if f.proto == "gy" {
		base.BalanceTargets = []string{tb.Target}
	}
	base.CPU = append(base.CPU, tb.CPU()...)
	localHops(tb, base)
	base.Provenance.CHFVersion = chfVersion(s.Context(), tb.CHF)
	base.Provenance.Store = storeProvenance(tb)
	return tb, initialOf, nil
}

// stepRunner returns the sweep's RunStep: each step a run of base at the
// step's rate on a fresh slice of the subscribers.
func (c *SweepConfig) stepRunner(s *stopper, base run.Options, nsteps int, initialOf []func(int32) audit.Account) func(context.Context, float64) (*report.Result, error) {
	full := base.Scenario
	i := 0
	return func(ctx context.Context, tps float64) (*report.Result, error) {
		o := base
		o.Scenario = scenario.Shard(full, i, nsteps) // fresh subscribers per step
		if initialOf != nil {
			o.InitialOf = initialOf[i]
		}
		o.Scenario.Load = scenario.Load{TPS: tps}
		o.Label = fmt.Sprintf("%s%.0f TPS", labelPrefix(c.run.label), tps)
		i++
		base.Log.Info("sweep step", "offered_tps", tps, "subscribers_from", o.Scenario.Subscribers.First)
		res, err := run.Execute(ctx, o)
		s.mark(res)
		return res, err
	}
}

// hotSubscriberTPS: above this many requests a second per subscriber a
// step measures hot records (one subscriber's requests meet on its
// account, one at a time), not the deployment's capacity: a subscriber
// sends a few a minute.
const hotSubscriberTPS = 5

// hotSlice says, when the sweep's top step would send each subscriber of
// an attempt's slice more than hotSubscriberTPS requests a second, what
// that measures and what to raise ("" otherwise).
func hotSlice(maxTPS float64, subscribers, attempts int) string {
	slice := subscribers / max(1, attempts)
	if slice < 1 || maxTPS/float64(slice) <= hotSubscriberTPS {
		return ""
	}
	return fmt.Sprintf("each attempt has its own slice of %d subscribers (%d over %d attempts), so the top step (%.0f TPS) sends each subscriber %.0f requests a second: "+
		"the steps near it measure contention on hot accounts, which lowers the knee; for capacity give at least %d (--accounts with --local, else --subscribers)",
		slice, subscribers, attempts, maxTPS, maxTPS/float64(slice), sweepAccounts(maxTPS, attempts))
}

// printSweepStep prints a step's line as the sweep goes.
func printSweepStep(st sweep.Step) {
	v := "met"
	if !st.Pass {
		v = "missed: " + st.Reason
	}
	fmt.Printf("step %6.0f TPS: achieved %6.0f p50 %7.3f ms p99 %7.3f ms errors %d late %d SUT %.1f µs/txn  SLO %s\n",
		st.OfferedTPS, st.Result.TPS, st.Result.LatencyMs.P50, st.Result.LatencyMs.P99, st.Result.Errors, st.Result.Late, st.Result.SUTCPUUsTxn, v)
}

// finish writes the sweep's reports (an interrupted sweep's too) and
// returns the command's error.
func (c *SweepConfig) finish(s *stopper, res *sweep.Result, err error) error {
	if res == nil {
		return s.wrap(err)
	}
	res.Label = c.run.label
	res.Interrupted = s.Signal() != nil
	if len(res.Steps) == 0 {
		return s.wrap(err)
	}
	if werr := writeSweep(res, c.run.outDir); werr != nil && err == nil {
		err = werr
	}
	res.WriteMarkdown(os.Stdout)
	fmt.Printf("\nreports: %s\n", c.run.outDir)
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
	cgwArgs, err := localCGWArgs(serviceArgs{}, f.operatorToken)
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
