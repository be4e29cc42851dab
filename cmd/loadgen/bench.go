package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/bench"
	"github.com/chf-testbed/testbed/loadgen/floor"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/sweep"
)

func init() {
	register("bench", "the CHF's performance as ratios measured side by side in one session: CHF/floor, knee, busy share, overload", benchCmd)
}

var benchHelp = help{
	name:     "bench",
	synopsis: "loadgen bench [--rounds 3] [--rate 1000] [--duration 10s] [--sweep-start N --sweep-step N --sweep-max N --sweep-duration 10s] [--h2load PATH] [--out DIR]",
	text: "In one session: --rounds rounds alternating the relay floor (loadgen floor, go relays, under --runtime-profile) and\n" +
		"the local CHF at --rate (loadgen local); then a sweep of the local CHF (loadgen sweep --local; SLO p99 <= 10 ms,\n" +
		"no errors, late <= 1%) for the knee and the session's highest goodput; a run at twice the knee offered; and,\n" +
		"when h2load is found, the loadgen's CPU per request against h2load's at --rate (balance inquiries). Prints the\n" +
		"ratios with their verdicts against their targets and writes bench.json and bench.md into --out, each\n" +
		"phase's own reports in a subdirectory. Progress goes to stderr. SIGINT or SIGTERM stops the phase running,\n" +
		"stops the CHF and writes what was measured (exit 130 / 143). See loadgen/docs/bench.md.",
}

// BenchConfig is the configuration of loadgen bench.
type BenchConfig struct {
	rounds                          int
	rate                            float64
	duration, warmup, rampUp        time.Duration
	sweepStart, sweepStep, sweepMax float64
	sweepDuration, maxFreeze        time.Duration
	sweepRetries                    int
	hops, size                      int
	profile                         sched.Profile
	chf, h2load, outDir, logLevel   string
	accounts                        int
	fs                              *flag.FlagSet
}

// DefaultBenchConfig returns loadgen bench's defaults.
func DefaultBenchConfig() BenchConfig {
	return BenchConfig{rounds: 3, rate: 1000, duration: 10 * time.Second, warmup: 3 * time.Second, rampUp: 2 * time.Second,
		sweepStart: 1000, sweepStep: 1000, sweepMax: 20000, sweepDuration: 10 * time.Second, sweepRetries: 1,
		hops: 4, size: 400, profile: sched.Production, h2load: "h2load", accounts: 100_000, logLevel: "warn"}
}

// RegisterFlags registers loadgen bench's flags on fs.
func (c *BenchConfig) RegisterFlags(fs *flag.FlagSet) {
	c.fs = fs
	fs.IntVar(&c.rounds, "rounds", c.rounds, "alternated rounds of the floor and the CHF at --rate, 1..20")
	fs.Float64Var(&c.rate, "rate", c.rate, "the light rate: the CHF's TPS and the floor's exchanges a second in each round, and the h2load comparison's rate")
	fs.DurationVar(&c.duration, "duration", c.duration, "measured window of each floor, CHF round and the run at twice the knee, 1s..1h")
	fs.DurationVar(&c.warmup, "warmup", c.warmup, "warm-up of each CHF run and of the floor, 0..10m")
	fs.DurationVar(&c.rampUp, "ramp-up", c.rampUp, "ramp-up of each CHF run, 0..10m")
	fs.Float64Var(&c.sweepStart, "sweep-start", c.sweepStart, "the sweep's first offered TPS, > 0")
	fs.Float64Var(&c.sweepStep, "sweep-step", c.sweepStep, "TPS the sweep adds per step, > 0")
	fs.Float64Var(&c.sweepMax, "sweep-max", c.sweepMax, "the sweep's highest offered TPS, >= --sweep-start")
	fs.DurationVar(&c.sweepDuration, "sweep-duration", c.sweepDuration, "measured window of each sweep step, 1s..1h")
	fs.IntVar(&c.sweepRetries, "sweep-retries", c.sweepRetries, "attempts more for a step that misses the SLO (sweep --retries), 0..5")
	fs.DurationVar(&c.maxFreeze, "max-freeze", c.maxFreeze, "void a sweep attempt that missed the SLO while the host froze a CPU longer than this (sweep --max-freeze); 0 = never")
	fs.IntVar(&c.hops, "hops", c.hops, "relay processes of the floor (loadgen floor --hops)")
	fs.IntVar(&c.size, "size", c.size, "bytes of each floor exchange (loadgen floor --size)")
	fs.Var(&c.profile, sched.FlagName, "runtime profile of the CHF's services and of the floor's relays alike: production or lab")
	fs.StringVar(&c.chf, "chf", c.chf, "chf binary (as loadgen local --chf)")
	fs.IntVar(&c.accounts, "accounts", c.accounts, "accounts each local CHF provisions; the sweep's CHF provisions more when needed, so that each attempt's own slice sends no subscriber more than 5 requests a second at --sweep-max (a smaller slice measures contention on hot accounts, not capacity)")
	fs.StringVar(&c.h2load, "h2load", c.h2load, "h2load binary for the loadgen-CPU comparison; empty = skip it (also skipped, with a note, when not found)")
	fs.StringVar(&c.outDir, "out", c.outDir, "directory of bench.json, bench.md and each phase's reports (default results/bench-<timestamp>)")
	fs.StringVar(&c.logLevel, "log-level", c.logLevel, "log level of the phases: debug, info, warn, error")
}

// Validate checks the flags (a usage error naming the flag).
func (c *BenchConfig) Validate() error {
	bad := func(f string, v any, want string) error {
		return usageError{fmt.Errorf("invalid --%s %v: want %s", f, v, want)}
	}
	dur := func(d time.Duration) bool { return d >= time.Second && d <= time.Hour }
	switch {
	case c.rounds < 1 || c.rounds > 20:
		return bad("rounds", c.rounds, "1..20")
	case !(c.rate > 0) || c.rate > floor.MaxRate:
		return bad("rate", c.rate, fmt.Sprintf("> 0 and at most %d", floor.MaxRate))
	case !dur(c.duration):
		return bad("duration", c.duration, "1s..1h")
	case c.warmup < 0 || c.warmup > 10*time.Minute:
		return bad("warmup", c.warmup, "0..10m")
	case c.rampUp < 0 || c.rampUp > 10*time.Minute:
		return bad("ramp-up", c.rampUp, "0..10m")
	case !(c.sweepStart > 0):
		return bad("sweep-start", c.sweepStart, "> 0")
	case !(c.sweepStep > 0):
		return bad("sweep-step", c.sweepStep, "> 0")
	case !(c.sweepMax >= c.sweepStart):
		return bad("sweep-max", c.sweepMax, "at least --sweep-start")
	case (c.sweepMax-c.sweepStart)/c.sweepStep >= sweep.MaxSteps:
		return bad("sweep-step", c.sweepStep, fmt.Sprintf("at most %d steps from --sweep-start to --sweep-max", sweep.MaxSteps))
	case !dur(c.sweepDuration):
		return bad("sweep-duration", c.sweepDuration, "1s..1h")
	case c.sweepRetries < 0 || c.sweepRetries > sweep.MaxRetries:
		return bad("sweep-retries", c.sweepRetries, fmt.Sprintf("0..%d", sweep.MaxRetries))
	case c.maxFreeze < 0:
		return bad("max-freeze", c.maxFreeze, ">= 0")
	case c.accounts < 1 || c.accounts > 100_000_000:
		return bad("accounts", c.accounts, "1..100000000")
	}
	fo := c.floorOptions()
	if err := fo.Validate(); err != nil {
		return usageError{err}
	}
	if _, err := newLogger(c.logLevel); err != nil {
		return err
	}
	if c.outDir == "" {
		c.outDir = filepath.Join("results", "bench-"+time.Now().UTC().Format("20060102-150405"))
	}
	// The phases' own configurations, checked now so that nothing starts
	// on a flag they refuse.
	if _, err := c.localConfig(c.rate, "check"); err != nil {
		return err
	}
	if _, err := c.sweepConfig(); err != nil {
		return err
	}
	return nil
}

func (c *BenchConfig) floorOptions() floor.Options {
	o := floor.Defaults()
	o.Hops, o.Rate, o.Duration, o.Warmup, o.Size = c.hops, c.rate, c.duration, c.warmup, c.size
	o.Relays, o.Profile, o.Progress = []string{floor.RelayGo}, c.profile, os.Stderr
	return o
}

// common are the run flags every CHF phase gets.
func (c *BenchConfig) common(out string) []string {
	args := []string{"--out", filepath.Join(c.outDir, out), "--runtime-profile", string(c.profile), "--accounts", strconv.Itoa(c.accounts),
		"--warmup", c.warmup.String(), "--ramp-up", c.rampUp.String(), "--log-level", c.logLevel, "--progress", "plain", "--no-default-thresholds"}
	if c.chf != "" {
		args = append(args, "--chf", c.chf)
	}
	return args
}

// localConfig is loadgen local's configuration for one CHF run at rate,
// its reports into out under --out.
func (c *BenchConfig) localConfig(rate float64, out string, extra ...string) (*LocalConfig, error) {
	cfg := DefaultLocalConfig()
	fs := newFlagSet("local")
	cfg.RegisterFlags(fs)
	args := append(c.common(out), "--rate", fmt.Sprint(rate), "--duration", c.duration.String(), "--label", "bench "+out)
	if err := fs.Parse(append(args, extra...)); err != nil {
		return nil, usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// sweepConfig is loadgen sweep --local's configuration: the bench's SLO (p99 <= 10 ms, no errors, late <= 1%).
func (c *BenchConfig) sweepConfig() (*SweepConfig, error) {
	args := append(c.common("sweep"), "--local", "--start", fmt.Sprint(c.sweepStart), "--step", fmt.Sprint(c.sweepStep),
		"--max", fmt.Sprint(c.sweepMax), "--duration", c.sweepDuration.String(), "--retries", strconv.Itoa(c.sweepRetries),
		"--max-freeze", c.maxFreeze.String(), "--slo-p99", "10ms", "--slo-error-rate", "0", "--slo-late-rate", "0.01", "--label", "bench sweep")
	parse := func(args []string) (*SweepConfig, error) {
		cfg := DefaultSweepConfig()
		fs := newFlagSet("sweep")
		cfg.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err}
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return &cfg, nil
	}
	cfg, err := parse(args)
	if err != nil {
		return nil, err
	}
	// Every attempt runs on its own slice of the accounts: enough of
	// them that the top step is not a test of hot accounts (hotSlice).
	// --accounts also sizes the subscriber range the flags derive, so
	// the flags are read again with it rather than the field set.
	if need := sweepAccounts(c.sweepMax, cfg.sweep.Attempts()); need > c.accounts {
		return parse(append(args, "--accounts", strconv.Itoa(need)))
	}
	return cfg, nil
}

// sweepAccounts is how many accounts give each of a sweep's attempts a
// slice that the top step (maxTPS) sends at most hotSubscriberTPS requests
// a second per subscriber.
func sweepAccounts(maxTPS float64, attempts int) int {
	return int(math.Ceil(maxTPS/hotSubscriberTPS)) * attempts
}

func benchCmd(args []string) error {
	c := DefaultBenchConfig()
	fs := newFlagSet("bench")
	c.RegisterFlags(fs)
	if err := parseFlags(fs, benchHelp, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(c.outDir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", c.outDir, err)
	}
	s := onSignals()
	defer s.Stop()
	in := c.measure(s)
	prov := report.HostProvenance()
	prov.LoadgenVersion, prov.CommandLine, prov.Flags, prov.RuntimeProfile = version, os.Args, flagValues(fs), string(c.profile)
	prov.CHFVersion = chfVersion(context.Background(), c.chfBinary())
	r := bench.Build(in, prov)
	if err := c.write(r); err != nil {
		return s.wrap(err)
	}
	r.WriteMarkdown(os.Stdout)
	fmt.Printf("\nreports: %s\n", c.outDir)
	return s.wrap(nil)
}

// chfBinary is the chf the phases ran, for the provenance ("" unknown).
func (c *BenchConfig) chfBinary() string {
	if c.chf != "" {
		return c.chf
	}
	for _, p := range []string{filepath.Join(filepath.Dir(os.Args[0]), "chf"), filepath.Join("bin", "chf")} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("chf")
	return p
}

func (c *BenchConfig) write(r *bench.Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode bench.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.outDir, "bench.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write bench.json: %w", err)
	}
	md, err := os.Create(filepath.Join(c.outDir, "bench.md"))
	if err != nil {
		return fmt.Errorf("cannot create bench.md: %w", err)
	}
	r.WriteMarkdown(md)
	if err := md.Close(); err != nil {
		return fmt.Errorf("cannot write bench.md: %w", err)
	}
	return nil
}

// progress prints a phase's line on stderr.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...)
}

// measure runs the session's phases in order until a signal; the phases'
// own output (reports, sweep steps) goes to stderr, stdout keeps the
// table.
func (c *BenchConfig) measure(s *stopper) bench.Input {
	stdout := os.Stdout
	os.Stdout = os.Stderr
	defer func() { os.Stdout = stdout }()
	in := bench.Input{Started: time.Now().UTC(), LightTPS: c.rate, H2load: bench.H2load{Rate: c.rate}}
	in.Sweep.SLO, in.Sweep.Duration = "p99 <= 10 ms, no errors, late <= 1%", c.sweepDuration.String()
	stopped := func() bool {
		if sig := s.Signal(); sig != nil {
			in.Interrupt = signalName(sig)
			return true
		}
		return false
	}
	for i := 1; i <= c.rounds && !stopped(); i++ {
		var rd bench.Round
		progress("round %d/%d: the relay floor (%d go relays, %s, %.0f/s for %s)", i, c.rounds, c.hops, c.profile, c.rate, c.duration)
		rd.Floor, rd.FloorErr = c.floor(s)
		if !stopped() {
			progress("round %d/%d: the CHF at %.0f TPS for %s", i, c.rounds, c.rate, c.duration)
			rd.CHF, rd.CHFErr = c.local(s, c.rate, fmt.Sprintf("round%d-chf", i), fmt.Sprintf("round %d chf", i))
		}
		in.Rounds = append(in.Rounds, rd)
	}
	if !stopped() {
		progress("sweep: %.0f to %.0f TPS by %.0f, %s a step", c.sweepStart, c.sweepMax, c.sweepStep, c.sweepDuration)
		c.sweep(s, &in.Sweep)
	}
	if !stopped() && in.Sweep.KneeTPS > 0 {
		over := 2 * in.Sweep.KneeTPS
		progress("the CHF at twice the knee: %.0f TPS for %s", over, c.duration)
		in.Sweep.Over, in.Sweep.OverErr = c.local(s, over, "knee2x", "2x knee")
	} else if in.Sweep.KneeTPS <= 0 {
		in.Sweep.OverErr = "no knee"
	}
	if !stopped() {
		in.H2load = c.compareH2load(s)
	}
	stopped()
	return in
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// floor measures the go relays' floor once.
func (c *BenchConfig) floor(s *stopper) (*bench.Floor, string) {
	rs, err := floor.Measure(s.Context(), c.floorOptions())
	if len(rs) == 0 {
		return nil, errString(err)
	}
	r := rs[0]
	progress("floor: %.1f µs per exchange (%d hops), steal %.1f%%", r.TotalUs, r.Hops, r.StealPercent)
	return &bench.Floor{RuntimeProfile: r.RuntimeProfile, UsPerExchange: r.TotalUs, Achieved: r.Achieved,
		Host: bench.Host{StealPercent: &r.StealPercent}}, errString(err)
}

// local runs loadgen local at rate into out; the result even when the
// run failed after measuring (an audit), with the error.
func (c *BenchConfig) local(s *stopper, rate float64, out, name string) (*bench.Run, string) {
	cfg, err := c.localConfig(rate, out)
	if err != nil {
		return nil, err.Error()
	}
	err = cfg.execute(s)
	res, rerr := report.ReadJSON(filepath.Join(cfg.run.outDir, "result.json"))
	if rerr != nil {
		return nil, errString(errors.Join(err, rerr))
	}
	r := bench.FromResult(name, res)
	progress("%s: %.0f TPS achieved, SUT %.1f µs/txn, p99 %.2f ms", name, r.TPS, r.SUTUsTxn, r.P99Ms)
	return r, errString(err)
}

// sweep runs the sweep and takes its knee and steps into out.
func (c *BenchConfig) sweep(s *stopper, out *bench.Sweep) {
	cfg, err := c.sweepConfig()
	if err != nil {
		out.Err = err.Error()
		return
	}
	res, err := cfg.execute(s)
	out.Err = errString(err)
	if res == nil {
		return
	}
	out.KneeTPS = res.KneeTPS
	for _, st := range res.Steps {
		out.Steps = append(out.Steps, bench.FromResult(fmt.Sprintf("sweep %.0f TPS", st.OfferedTPS), st.Result))
	}
	if k := res.Knee(); k != nil {
		out.Knee = bench.FromResult("knee", k.Result)
	}
	progress("sweep: knee %.0f TPS", res.KneeTPS)
}

// h2loadRequests reads "requests: 10000 total, 10000 started, 10000 done,
// 10000 succeeded" of h2load's output.
var h2loadRequests = regexp.MustCompile(`requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded`)

// compareH2load starts a local CHF, runs loadgen (balance inquiries at
// --rate) and then h2load at the same rate on it, and returns each
// one's CPU per request.
func (c *BenchConfig) compareH2load(s *stopper) bench.H2load {
	out := bench.H2load{Rate: c.rate}
	if c.h2load == "" {
		out.Note = "skipped: --h2load is empty"
		return out
	}
	bin, err := exec.LookPath(c.h2load)
	if err != nil {
		out.Note = fmt.Sprintf("skipped: h2load not found (%s)", c.h2load)
		return out
	}
	scen := filepath.Join(c.outDir, "balance.yaml")
	if err := os.WriteFile(scen, []byte("mix: {data: 0, voice: 0, sms: 0, balance: 1}\n"), 0o644); err != nil {
		out.Note = fmt.Sprintf("cannot write %s: %v", scen, err)
		return out
	}
	progress("loadgen and h2load: balance inquiries at %.0f/s for %s each", c.rate, c.duration)
	cfg, err := c.localConfig(c.rate, "h2load", "--scenario", scen, "--audit", "off")
	if err != nil {
		out.Note = err.Error()
		return out
	}
	o, err := cfg.run.options(nil)
	if err != nil {
		out.Note = err.Error()
		return out
	}
	if err := os.MkdirAll(cfg.run.outDir, 0o755); err != nil {
		out.Note = err.Error()
		return out
	}
	// loadgen local's phases, holding the CHF for h2load after the run.
	r := &localRunner{cfg: cfg, f: &cfg.run, o: o}
	defer r.close()
	if err := r.prepare(); err != nil {
		out.Note = err.Error()
		return out
	}
	if err := r.start(s.Context()); err != nil {
		out.Note = "cannot start the CHF: " + err.Error()
		return out
	}
	defer r.stop()
	r.configure(s.Context())
	err = r.execute(s)
	res, rerr := report.ReadJSON(filepath.Join(cfg.run.outDir, "result.json"))
	switch {
	case rerr != nil:
		out.Note = "loadgen's run: " + errString(errors.Join(err, rerr))
		return out
	case res.Interrupted || res.Transactions == 0 || res.LoadgenUsTxn <= 0:
		out.Note = "loadgen's run measured no CPU per request"
		return out
	}
	out.LoadgenUs = &res.LoadgenUsTxn
	if s.Signal() != nil {
		return out
	}
	us, note := c.runH2load(s.Context(), bin, "http://"+r.tb.Target+"/chf/v1/accounts/"+o.Scenario.Subscribers.First)
	out.H2loadUs, out.Note = us, note
	return out
}

// runH2load runs h2load at --rate for --duration (4 clients) and returns
// its CPU (user + system, the whole process) per succeeded request.
func (c *BenchConfig) runH2load(ctx context.Context, bin, url string) (*float64, string) {
	const clients = 4
	ctx, cancel := context.WithTimeout(ctx, c.duration+30*time.Second)
	defer cancel()
	secs := max(1, int(c.duration.Seconds()))
	cmd := exec.CommandContext(ctx, bin, "-c", strconv.Itoa(clients), "-m", "64", "--rps", fmt.Sprint(c.rate/clients), "-D", strconv.Itoa(secs), url)
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Sprintf("h2load failed: %v", err)
	}
	var n float64
	if m := h2loadRequests.FindSubmatch(outb); m != nil {
		n, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if n <= 0 {
		return nil, "h2load reported no succeeded request"
	}
	st := cmd.ProcessState
	us := (st.UserTime() + st.SystemTime()).Seconds() * 1e6 / n
	progress("h2load: %.0f requests, %.1f µs CPU each (the whole process)", n, us)
	return &us, "h2load's CPU is its whole process's (start-up included); loadgen's its measured window's"
}
