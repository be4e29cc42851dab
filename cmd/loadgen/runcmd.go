package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
	"github.com/chf-testbed/testbed/loadgen/testbed"
)

func init() {
	register("run", "one measured load run against a deployed CHF", runCmd)
}

// runFlags are the flags shared by run, local and (later) sweep and gate.
type runFlags struct {
	scenarioFile   string
	rate           float64
	sessionsPerSec float64
	duration       time.Duration
	warmup         time.Duration
	rampUp         time.Duration
	subscribers    int
	first          string
	maxInFlight    int
	timeout        time.Duration
	workers        int
	pacing         time.Duration
	procs          int
	noAsync        bool
	conns          int
	proto          string
	balanceURL     string
	cpus           multiFlag
	auditMode      string
	initialBalance int64
	auditConc      int
	progress       string
	jsonOut        string
	csvOut         string
	mdOut          string
	htmlOut        string
	outDir         string
	label          string
	shard          string
	seed           int64
	logLevel       string
	cpuProfile     string
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.scenarioFile, "scenario", "", "scenario YAML file (see loadgen/README.md); empty = the built-in default mix")
	fs.Float64Var(&f.rate, "rate", 0, "offered load in transactions per second (each create, update, release, event and inquiry is one); overrides the scenario")
	fs.Float64Var(&f.sessionsPerSec, "sessions-per-second", 0, "offered load in flow starts (sessions, events, inquiries) per second; overrides the scenario")
	fs.DurationVar(&f.duration, "duration", 0, "measured duration (after ramp-up and warm-up); overrides the scenario (default 30s)")
	fs.DurationVar(&f.warmup, "warmup", -1, "warm-up at full rate before measuring, excluded from results; overrides the scenario (default 3s)")
	fs.DurationVar(&f.rampUp, "ramp-up", -1, "linear ramp from 0 to the full rate at the start, excluded from results; overrides the scenario (default 2s)")
	fs.IntVar(&f.subscribers, "subscribers", 0, "number of subscribers in the range; overrides the scenario (default 100000)")
	fs.StringVar(&f.first, "first", "", "first SUPI of the range; overrides the scenario (default imsi-001010000000001)")
	fs.IntVar(&f.maxInFlight, "max-inflight", 0, "bound on requests in flight; overrides the scenario (default 4096)")
	fs.DurationVar(&f.timeout, "timeout", 0, "per-request timeout; overrides the scenario (default 2s)")
	fs.IntVar(&f.workers, "workers", 0, "scheduler goroutines (0 = GOMAXPROCS)")
	fs.DurationVar(&f.pacing, "pacing", time.Millisecond, "wake the scheduler on multiples of this and send every request due by then together (fewer wake-ups and system calls per request; sends up to this late, which the latency, measured from the due time, includes); 0 = each request at its own time")
	fs.IntVar(&f.procs, "procs", 0, "GOMAXPROCS of the load generator; 0 = with --proto h2c one per scheduler worker the offered rate needs (1 up to 25,000 TPS: the cheapest per request), else Go's default (one per CPU)")
	fs.BoolVar(&f.noAsync, "no-async", false, "h2c: send through a goroutine per request in flight instead of the connection's callbacks (for comparison)")
	fs.IntVar(&f.conns, "conns", 0, "connections per target: h2c at most this many (dialed as streams fill, default 64), h2c-std exactly this many (default 2), http1 pool size (default 1024), gy Diameter peers each with its own Origin-Host (default 4)")
	fs.StringVar(&f.proto, "proto", "h2c", "protocol: h2c (HTTP/2 cleartext, prior knowledge, chassis/h2c; on Linux one event loop per scheduler worker), h2c-async (the same client with a reader and a writer goroutine per connection), h2c-std (golang.org/x/net/http2.Transport), http1 (HTTP/1.1, fasthttp) or gy (Diameter Gy credit control; implied by --target diameter://...)")
	fs.StringVar(&f.proto, "protocol", "h2c", "alias of --proto")
	fs.Var(&f.cpus, "cpu", "CPU source of a SUT component, repeatable: NAME=pid:PID[,PID], NAME=proc:PROCESS, NAME=http://HOST:PORT/metrics (process_cpu_seconds_total), or a bare process name")
	fs.StringVar(&f.auditMode, "audit", run.AuditAuto, "balance audit: auto (initial balances of the range read first when it has at most 200000 subscribers or --initial-balance states them; final balances of the touched subscribers), full (the whole range before and after), off")
	fs.StringVar(&f.balanceURL, "balance-url", "", "with --proto gy: the CGW's HTTP endpoint(s), http://HOST:PORT[,...], the audit reads balances from (GET /chf/v1/accounts/{supi}); empty skips the audit of a Gy run (loadgen local and sweep --local know it)")
	fs.Int64Var(&f.initialBalance, "initial-balance", 0, "known initial balance of every account in minor units (freshly provisioned); skips reading balances before the run")
	fs.IntVar(&f.auditConc, "audit-concurrency", 128, "balance reads in flight during the audit")
	fs.StringVar(&f.progress, "progress", run.ProgressAuto, "live progress on stderr: auto (refreshed line on a terminal, else plain), line, plain, json (JSON lines), off")
	fs.StringVar(&f.jsonOut, "json", "", "write the JSON result to this file")
	fs.StringVar(&f.csvOut, "csv", "", "write the per-second CSV time series to this file")
	fs.StringVar(&f.mdOut, "md", "", "write the Markdown report to this file")
	fs.StringVar(&f.htmlOut, "html", "", "write the HTML report (offline, inline SVG charts) to this file")
	fs.StringVar(&f.outDir, "out", "", "write every report file (result.json, series.csv, report.md, report.html) into this directory")
	fs.StringVar(&f.label, "label", "", "label stored in the result (e.g. the network model)")
	fs.StringVar(&f.shard, "shard", "", "i/n: run shard i of n (0-based): its slice of the subscriber range and 1/n of the rate")
	fs.Int64Var(&f.seed, "seed", 0, "random seed (0 = the scenario's)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the load generator to this file")
}

// scenario builds the scenario from the file and the overriding flags.
func (f *runFlags) scenario() (scenario.Scenario, error) {
	sc := scenario.Default()
	if f.scenarioFile != "" {
		var err error
		if sc, err = scenario.LoadFile(f.scenarioFile); err != nil {
			return sc, err
		}
	}
	if f.rate > 0 {
		sc.Load = scenario.Load{TPS: f.rate}
	}
	if f.sessionsPerSec > 0 {
		sc.Load = scenario.Load{SessionsPerSecond: f.sessionsPerSec}
	}
	if f.duration > 0 {
		sc.Phases.Duration = scenario.Duration(f.duration)
	}
	if f.warmup >= 0 {
		sc.Phases.WarmUp = scenario.Duration(f.warmup)
	}
	if f.rampUp >= 0 {
		sc.Phases.RampUp = scenario.Duration(f.rampUp)
	}
	if f.subscribers > 0 {
		sc.Subscribers.Count = f.subscribers
	}
	if f.first != "" {
		sc.Subscribers.First = f.first
	}
	if f.maxInFlight > 0 {
		sc.MaxInFlight = f.maxInFlight
	}
	if f.timeout > 0 {
		sc.Timeout = scenario.Duration(f.timeout)
	}
	if f.seed != 0 {
		sc.Seed = f.seed
	}
	if f.shard != "" {
		i, n, err := parseShard(f.shard)
		if err != nil {
			return sc, err
		}
		sc = ShardScenario(sc, i, n)
	}
	if err := sc.Validate(); err != nil {
		return sc, err
	}
	return sc, nil
}

// parseTargets reads --target for the protocol: diameter://HOST:PORT
// targets select gy (and need it), the others are Nchf URLs.
func (f *runFlags) parseTargets(s string) ([]string, error) {
	if driver.IsDiameterTarget(s) {
		if f.proto != "h2c" && f.proto != "gy" {
			return nil, usageError{fmt.Errorf("cannot use --proto %s with diameter:// targets", f.proto)}
		}
		f.proto = "gy"
	}
	var ts []string
	var err error
	if f.proto == "gy" {
		ts, err = driver.ParseDiameterTargets(s)
	} else {
		ts, err = driver.ParseTargets(s)
	}
	if err != nil {
		return nil, usageError{err}
	}
	return ts, nil
}

// localTargets returns the targets of a local testbed for the protocol,
// and sets --balance-url for a Gy run.
func (f *runFlags) localTargets(tb *testbed.Testbed) []string {
	if f.proto == "gy" {
		if f.balanceURL == "" {
			f.balanceURL = "http://" + tb.Target
		}
		return []string{tb.Diameter}
	}
	return []string{tb.Target}
}

// parseShard reads "i/n".
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, usageError{fmt.Errorf("cannot parse --shard %q: want i/n with 0 <= i < n", s)}
	}
	return i, n, nil
}

// ShardScenario returns shard i of n: a contiguous slice of the subscriber
// range, 1/n of the offered load and its own seed.
func ShardScenario(sc scenario.Scenario, i, n int) scenario.Scenario {
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	lo := sc.Subscribers.Count * i / n
	hi := sc.Subscribers.Count * (i + 1) / n
	sc.Subscribers.First = first.String(lo)
	sc.Subscribers.Count = hi - lo
	sc.Load.TPS /= float64(n)
	sc.Load.SessionsPerSecond /= float64(n)
	sc.Seed += int64(i) * 7919
	return sc
}

func (f *runFlags) options(targets []string) (run.Options, error) {
	sc, err := f.scenario()
	if err != nil {
		return run.Options{}, err
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return run.Options{}, err
	}
	if procs := f.gomaxprocs(sc); procs > 0 {
		runtime.GOMAXPROCS(procs)
	}
	o := run.Options{
		Scenario: sc, Targets: targets, Proto: f.proto, Conns: f.conns, Workers: f.workers, Pacing: f.pacing, NoAsync: f.noAsync,
		Audit: f.auditMode, InitialBalance: f.initialBalance, AuditConcurrency: f.auditConc,
		ProgressMode: f.progress, Label: f.label, Shard: f.shard, Log: log,
	}
	if f.balanceURL != "" {
		if o.BalanceTargets, err = driver.ParseTargets(f.balanceURL); err != nil {
			return o, usageError{fmt.Errorf("cannot use --balance-url: %w", err)}
		}
	}
	switch f.auditMode {
	case run.AuditAuto, run.AuditFull, run.AuditOff:
	default:
		return o, usageError{fmt.Errorf("cannot use --audit %q: want auto, full or off", f.auditMode)}
	}
	switch f.progress {
	case run.ProgressAuto, run.ProgressLine, run.ProgressPlain, run.ProgressJSON, run.ProgressOff:
	default:
		return o, usageError{fmt.Errorf("cannot use --progress %q: want auto, line, plain, json or off", f.progress)}
	}
	for _, spec := range f.cpus {
		src, err := cpu.ParseSpec(spec)
		if err != nil {
			return o, usageError{err}
		}
		o.CPU = append(o.CPU, src)
	}
	return o, nil
}

// gomaxprocs returns the GOMAXPROCS to set, 0 for Go's default. h2c
// workers run event loops that keep their P between ticks (see
// loadgen/driver.Loop): with one P per worker a loop yields it cheaply
// before each wait, where spare Ps would cost a thread wake-up (futex)
// at every yield, or a preemption signal every 10 ms without yields.
func (f *runFlags) gomaxprocs(sc scenario.Scenario) int {
	if f.procs > 0 {
		return f.procs
	}
	if f.proto != "h2c" {
		return 0
	}
	n := f.workers
	if n <= 0 {
		n = int(math.Ceil(sc.OfferedTPS() / engine.TxnPerWorker))
	}
	return max(1, min(n, runtime.NumCPU()))
}

// writeReports prints the summary and writes the requested files.
func (f *runFlags) writeReports(res *report.Result) error {
	res.WriteSummary(os.Stdout)
	if f.outDir != "" {
		files, err := res.WriteAll(f.outDir)
		if err != nil {
			return err
		}
		fmt.Printf("\nreports: %s %s %s %s\n", files.JSON, files.CSV, files.Markdown, files.HTML)
	}
	if f.jsonOut != "" {
		if err := res.WriteJSON(f.jsonOut); err != nil {
			return err
		}
	}
	writeFile := func(path string, fn func(*os.File) error) error {
		if path == "" {
			return nil
		}
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", path, err)
		}
		if err := fn(out); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	if err := writeFile(f.csvOut, func(w *os.File) error { return res.WriteCSV(w) }); err != nil {
		return err
	}
	if err := writeFile(f.mdOut, func(w *os.File) error { res.WriteMarkdown(w); return nil }); err != nil {
		return err
	}
	return writeFile(f.htmlOut, func(w *os.File) error { return res.WriteHTML(w) })
}

// startProfile starts the CPU profile when asked; the returned function
// stops it.
func (f *runFlags) startProfile() (func(), error) {
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	out, err := os.Create(f.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("cannot create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("cannot start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// signalContext is cancelled by SIGINT/SIGTERM: the run stops starting
// flows, releases live sessions and reports what it measured.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("loadgen run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	target := fs.String("target", "", "CGW endpoints, comma-separated: Nchf http://HOST:PORT, or Diameter Gy diameter://HOST:PORT (selects --proto gy; --conns peers each); flows are balanced over them client-side")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		return usageError{errors.New("--target is required")}
	}
	targets, err := f.parseTargets(*target)
	if err != nil {
		return err
	}
	o, err := f.options(targets)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	stopProfile, err := f.startProfile()
	if err != nil {
		return err
	}
	res, err := run.Execute(ctx, o)
	stopProfile()
	if res != nil {
		if werr := f.writeReports(res); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}
