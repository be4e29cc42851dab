// Package run executes one measured load run end to end and returns its
// report: it reads the initial balances for the audit, samples CPU of the
// system under test and of the load generator, drives the open-loop engine
// with live progress, reads the final balances, reconciles them and builds
// the report.Result. Every loadgen command that produces results (run,
// local, sweep, gate) goes through Execute.
package run

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/loadgen/audit"
	"github.com/chf-testbed/testbed/loadgen/cpu"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/driver/gy"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/hops"
	"github.com/chf-testbed/testbed/loadgen/live"
	"github.com/chf-testbed/testbed/loadgen/operator"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// ErrAudit is returned (with the result) when the balance audit failed.
var ErrAudit = errors.New("run: audit failed")

// ErrThresholds is returned (with the result) when a threshold failed
// and the audit did not.
var ErrThresholds = errors.New("run: thresholds failed")

// ErrCPU is returned for a CPU source that is missing at the start, or
// (with the result) that disappeared during the run, unless
// Options.CPUOptional.
var ErrCPU = errors.New("run: CPU source unavailable")

// Audit modes.
const (
	// AuditAuto reads the initial balances of the whole range when it is
	// at most FullAuditMax (or trusts InitialBalance), and the final
	// balances of the subscribers the run touched.
	AuditAuto = "auto"
	// AuditFull reads every balance of the range before and after.
	AuditFull = "full"
	AuditOff  = "off"
)

// FullAuditMax is the largest subscriber range the auto mode reads in full.
const FullAuditMax = 200_000

// Progress modes.
const (
	ProgressAuto  = "auto"  // a refreshed line on a terminal, plain lines otherwise
	ProgressLine  = "line"  // a refreshed line
	ProgressPlain = "plain" // one line per second
	ProgressJSON  = "json"  // one JSON object per second
	ProgressOff   = "off"
)

// Options describe one run.
type Options struct {
	Scenario scenario.Scenario
	Targets  []string // host:port
	// StartAt, when set, is a wall-clock start barrier: the load starts
	// then (after the audit's reads and CPU checks), so that the shards of
	// a distributed run start together.
	StartAt time.Time
	Proto   string // driver.Config.Proto: h2c, h2c-std, http1 or gy
	// BalanceTargets are the CGW HTTP host:ports the audit reads balances
	// from (GET /chf/v1/accounts/{supi}, over HTTP/1.1) when Proto is gy,
	// whose targets are Diameter peers. Without them a Gy run's audit is
	// skipped (auto) or fails (full).
	BalanceTargets []string
	Conns          int
	Workers        int
	// TLS, when set, sends Nchf (and the audit's balance reads) over TLS
	// to https:// targets (driver.Config.TLS).
	TLS *tls.Config
	// Pacing tunes the engine (see engine.Config); NoAsync sends h2c
	// through a goroutine per request in flight (driver.Config.Blocking).
	Pacing  time.Duration
	NoAsync bool
	// CPU lists the components of the system under test to sample; the
	// load generator itself is always sampled as report.LoadgenComponent.
	CPU []cpu.Source
	// Hops, when set, scrapes the services' /metrics when the window
	// opens and closes for the report's per-hop latency (package hops);
	// HopsNote says why there is none otherwise.
	Hops     *hops.Scraper
	HopsNote string
	// Audit is AuditAuto, AuditFull or AuditOff.
	Audit string
	// InitialBalance, when positive, is the known starting balance of
	// every account (freshly provisioned): the initial read is skipped.
	InitialBalance   int64
	AuditConcurrency int
	// MetricsListen, when set, is the host:port of the live Prometheus
	// endpoint served during the run (loadgen/live).
	MetricsListen string
	// Progress goes to ProgressOut (default os.Stderr) in ProgressMode.
	ProgressOut  io.Writer
	ProgressMode string
	Label        string
	Shard        string
	Log          *slog.Logger
	// CPUOptional turns a CPU source that is missing at the start or lost
	// during the run from an error into a loud warning and a result marked
	// incomplete.
	CPUOptional bool
	// Thresholds are checked against the result (see
	// scenario.EffectiveThresholds); nil checks none.
	Thresholds []scenario.Threshold
	// Provenance is stored in the result; an empty ScenarioHash becomes
	// the scenario's own.
	Provenance report.Provenance
	// Tariff rates every charge the CHF answered as charged, for the
	// audit's independent check (the OCP's tariff file, read by the
	// audit's own code); nil = the built-in default tariff.
	Tariff *audit.Tariff
	// TariffChange, when set, is a tariff change during the run (loadgen
	// local --tariff-change): the audit rates each request on the tariff
	// in force when it was sent (audit.Change); Tariff is then its Old.
	TariffChange *audit.Change
	// Faults are injected through Injector at their offsets into the
	// measured window; each is undone (restart, continue) before the
	// audit, and its figures go to the result's Faults.
	Faults   []Fault
	Injector Injector
	// ReservationSettle, with Faults, is how long the final audit waits
	// for reservations left by sessions whose release failed during a
	// fault to expire (the CHF frees them at their validity time): the
	// final balances are read again every second until none is left or
	// the time is up. 0 = no wait.
	ReservationSettle time.Duration
	// NotifyListen is the host:port the Nchf driver serves its notifyUri
	// on (driver.Config.NotifyListen); with scenario notifications and
	// none given, 127.0.0.1:0 (a CHF on this host).
	NotifyListen string
	// OperatorToken is the bearer token of the operator API calls the
	// scenario's notifications make, and of every balance read over Nchf
	// (the audit's, and the scenario's balance inquiries: a CGW with an
	// operator token guards them with it); OperatorTargets the CGW HTTP
	// host:ports the operator calls go to (default: the Nchf targets, or
	// for Gy the balance targets).
	OperatorToken   string
	OperatorTargets []string
	// InitialOf, when set, is each subscriber's provisioned initial state
	// (the scenario's postpaid and bucket shares, loadgen local): the
	// audit uses it instead of InitialBalance.
	InitialOf func(i int32) audit.Account
	// HostProbe is the executable run as `HostProbe freeze-probe` to
	// measure how long the host froze this machine's CPUs (package
	// freeze): the result's HostFreezes and each second's host_freeze_ms.
	// "" = not measured.
	HostProbe string
}

// CheckProto refuses what a scenario asks that protocol proto cannot
// carry: an offline share on Gy. Gy (RFC 4006, TS 32.299 Ro) is online
// credit control only: it has no per-service mark like Nchf's
// quotaManagementIndicator, because a PGW charged offline reports over
// Rf/Gz (ACR/ACA to a CDF), which the CHF does not serve, and the PCRF
// picks online or offline per rule over Gx. A CCR without
// Requested-Service-Unit, or an MSCC with only Used-Service-Unit, is an
// online usage report (every CCR-T is one), so reading it as offline
// would stop debiting what a real PGW reports online.
func CheckProto(sc *scenario.Scenario, proto string) error {
	if sc.Accounts.Offline > 0 && proto == "gy" {
		return fmt.Errorf("%w: accounts.offline must be 0 with protocol gy, got %v: Gy is online credit control only "+
			"(offline usage goes over Rf/Gz, which the CHF does not serve); use an Nchf protocol (quotaManagementIndicator OFFLINE_CHARGING)",
			scenario.ErrInvalid, sc.Accounts.Offline)
	}
	return nil
}

// Execute performs the run. A failed audit returns the result together
// with an error wrapping ErrAudit. Its phases: check the options, set up
// the drivers (and the operator client of the scenario's notifications),
// read the initial balances, start the CPU sampling, progress and live
// metrics, run the engine (the window's edges measured by window), then
// read the final balances and build the result.
func Execute(ctx context.Context, o Options) (*report.Result, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	sc := o.Scenario
	if err := checkOptions(&sc, o); err != nil {
		return nil, err
	}
	dcfg := driverConfig(o)
	op, err := newOperator(o, &dcfg)
	if err != nil {
		return nil, err
	}
	if op != nil {
		defer op.Close(0)
	}
	d, reader, err := newDriver(dcfg)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	au := newAuditor(o, &sc, reader)
	defer au.close()
	if err := au.start(ctx); err != nil {
		return nil, err
	}

	sampler := cpu.NewSampler(o.CPU...)
	sampler.Add(cpu.Self(report.LoadgenComponent))
	var incomplete []string
	if note, err := checkCPU(ctx, sampler, o); err != nil {
		return nil, err
	} else if note != "" {
		incomplete = append(incomplete, note)
	}
	hp := startHostProbe(ctx, o)
	defer hp.stop()
	prog := newProgress(o, sampler, hp)
	hooks, closeLive, err := startLive(o, prog)
	if err != nil {
		return nil, err
	}
	defer closeLive()
	tariff, rater, err := raterOf(o)
	if err != nil {
		return nil, err
	}
	win := &window{ctx: ctx, o: &o, sampler: sampler, hp: hp, waitFaults: func() []faultRun { return nil }}
	cfg := engine.Config{
		Scenario: sc,
		Driver:   d,
		Operator: operatorOf(op),
		Rater:    rater,
		Workers:  o.Workers,
		Pacing:   o.Pacing,
		Tick:     hooks.tick,
		Observe:  hooks.observe,
		Phase: func(name string) {
			hooks.phase(name)
			win.phase(name)
			prog.phase(name)
		},
	}
	if err := waitStart(ctx, o); err != nil {
		return nil, err
	}
	st, err := engine.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opStats := closeOperator(op)
	faultRuns := win.faults() // every instance back before the audit
	interrupted := ctx.Err() != nil
	prog.finish()
	cpuSecs, host := win.cpu(st)
	auditRes := au.final(ctx, st, interrupted, len(faultRuns) > 0, tariff)

	res, err := report.Build(st, sc, o.Targets, protoName(o.Proto), cpuSecs, auditRes, prog.points())
	if err != nil {
		return nil, err
	}
	res.Label, res.Shard = o.Label, o.Shard
	if opStats != nil {
		res.Notifications = report.BuildNotifications(&st.Notices, opStats)
	}
	heapLive := win.memory(res)
	res.Host = host
	res.HostFreezes, res.HostFreezesNote = hp.stop()
	res.Sessions = sessionsOf(st, sc, heapLive)
	if err := res.Recompute(); err != nil { // the warnings of the sessions' figures
		return nil, err
	}
	if len(faultRuns) > 0 {
		res.Faults = faultResults(faultRuns, res.Series, st.Started, win.measureStart())
		res.StoreFaults = storeFaultResults(faultRuns, res.Series, st.Started, win.measureStart())
	}
	res.Interrupted = interrupted
	cpuErr := lostCPU(sampler, win.cpuA, win.cpuB, win.haveA, o, interrupted, &incomplete)
	return finish(res, o, incomplete, cpuErr)
}

// checkOptions refuses a run the scenario, the protocol or the faults
// asked cannot make.
func checkOptions(sc *scenario.Scenario, o Options) error {
	if err := sc.Validate(); err != nil {
		return err
	}
	if err := CheckProto(sc, o.Proto); err != nil {
		return err
	}
	if len(o.Faults) > 0 && o.Injector == nil {
		return fmt.Errorf("%w: faults need a system under test this loadgen started (loadgen local)", ErrFaultSpec)
	}
	return nil
}

// driverConfig is the load driver's configuration of o. A tariff change
// needs the Nchf notifyUri served (the sessions it re-authorises are
// notified).
func driverConfig(o Options) driver.Config {
	dcfg := driver.Config{Proto: o.Proto, Targets: o.Targets, Conns: o.Conns, Timeout: o.Scenario.Timeout.D(), Blocking: o.NoAsync, TLS: o.TLS,
		NotifyListen: o.NotifyListen, OnTime: o.Pacing == 0, OperatorToken: o.OperatorToken}
	if o.TariffChange != nil && dcfg.NotifyListen == "" && o.Proto != "gy" {
		dcfg.NotifyListen = "127.0.0.1:0"
	}
	return dcfg
}

// newOperator returns the operator API client that triggers the
// scenario's notifications (nil when it has none), and makes dcfg serve
// the Nchf notifyUri they arrive on.
func newOperator(o Options, dcfg *driver.Config) (*operator.Client, error) {
	if !o.Scenario.Notifications.Enabled() {
		return nil, nil
	}
	if dcfg.NotifyListen == "" && o.Proto != "gy" {
		dcfg.NotifyListen = "127.0.0.1:0"
	}
	targets := o.OperatorTargets
	if len(targets) == 0 {
		targets = o.Targets
		if o.Proto == "gy" {
			targets = o.BalanceTargets
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("cannot trigger the scenario's notifications over %s: no HTTP endpoint for the operator API (--balance-url)", protoName(o.Proto))
	}
	return operator.New(operator.Config{Targets: targets, Token: o.OperatorToken, TLS: o.TLS})
}

// closeOperator waits (bounded) for the operator calls still queued or in
// flight and returns their figures; nil without an operator.
func closeOperator(op *operator.Client) *operator.Stats {
	if op == nil {
		return nil
	}
	op.Close(operator.DefaultTimeout)
	s := op.Stats()
	return &s
}

// newDriver returns the load driver of dcfg and, for the Nchf
// protocols, the same driver as the balance reader (nil for Gy, whose
// balances are read over an HTTP driver of the auditor's own).
func newDriver(dcfg driver.Config) (driver.Driver, *nchf.Driver, error) {
	if dcfg.Proto == "gy" {
		d, err := gy.New(dcfg)
		if err != nil {
			return nil, nil, err
		}
		return d, nil, nil
	}
	d, err := nchf.New(dcfg)
	if err != nil {
		return nil, nil, err
	}
	return d, d, nil
}

// liveHooks are the engine's callbacks of progress and live metrics.
type liveHooks struct {
	tick    func(engine.Tick)
	observe func(engine.Op, time.Duration, string) // nil: the engine skips it
	phase   func(string)
}

// startLive serves the live Prometheus metrics when o.MetricsListen is
// set and returns the hooks that feed them and prog, and what stops the
// server.
func startLive(o Options, prog *progress) (liveHooks, func(), error) {
	h := liveHooks{tick: prog.tick, phase: func(string) {}}
	if o.MetricsListen == "" {
		return h, func() {}, nil
	}
	lm := live.New()
	if err := lm.Serve(o.MetricsListen); err != nil {
		return h, nil, err
	}
	o.Log.Info("serving live metrics", "addr", "http://"+lm.Addr()+"/metrics")
	h.tick = func(t engine.Tick) { prog.tick(t); lm.Tick(t) }
	h.observe, h.phase = lm.Observe, lm.Phase
	return h, func() { lm.Close(context.Background()) }, nil
}

// raterOf returns the tariff the audit checks charges against (the
// built-in one unless o.Tariff) and the engine's rater: the tariff, or
// the tariff change when the run has one.
func raterOf(o Options) (*audit.Tariff, engine.Rater, error) {
	tariff := o.Tariff
	if tariff == nil {
		var err error
		if tariff, err = audit.LoadTariff(""); err != nil {
			return nil, nil, fmt.Errorf("cannot load the built-in tariff: %w", err)
		}
	}
	if o.TariffChange != nil {
		return tariff, o.TariffChange, nil
	}
	return tariff, tariff, nil
}

// sessionsOf is the result's open-session figures of st.
func sessionsOf(st *engine.Stats, sc scenario.Scenario, heapLive int64) *report.Sessions {
	s := &report.Sessions{
		OpenPeak: st.OpenSessionsPeak, OpenEnd: st.OpenSessionsEnd, Limited: st.SessionLimited,
		MaxOpenSessions: sc.MaxOpenSessions, LoadgenHeapBytes: heapLive, FlowBytes: engine.FlowBytes,
	}
	if st.OpenSessionsEnd > 0 {
		s.BytesPerOpenSession = float64(heapLive) / float64(st.OpenSessionsEnd)
	}
	return s
}

// hopsOf is the report's per-hop latency from the two snapshots, and a
// note when it is missing or left services out.
func hopsOf(a, b hops.Snapshot, both bool, o Options) ([]report.Hop, string) {
	switch {
	case o.Hops == nil:
		return nil, o.HopsNote
	case !both:
		return nil, "not measured: the window did not open and close"
	}
	h := hops.Delta(a, b)
	var notes []string
	if err := errors.Join(a.Err, b.Err); err != nil {
		notes = append(notes, fmt.Sprintf("not every service scraped: %v", err))
	}
	if len(h) == 0 {
		notes = append(notes, "no hop histogram counted anything in the window")
	}
	return h, strings.Join(notes, "; ")
}

// checkCPU samples every CPU source before the run: one that cannot be
// read is an error, or with o.CPUOptional a warning and the note
// returned for the result's Incomplete.
func checkCPU(ctx context.Context, s *cpu.Sampler, o Options) (string, error) {
	smp := s.Sample(ctx)
	if smp.Err == nil {
		return "", nil
	}
	if !o.CPUOptional {
		return "", fmt.Errorf("%w: %v (fix --cpu, or pass --cpu-optional to run without it)", ErrCPU, smp.Err)
	}
	note := fmt.Sprintf("no CPU figure for %s: %v", strings.Join(smp.Failed, ", "), smp.Err)
	o.Log.Warn("CPU SOURCE MISSING: the result will be incomplete", "components", smp.Failed, "err", smp.Err)
	return note, nil
}

// lostCPU checks that every CPU source was read at both ends of the
// measured window. A lost source is noted in incomplete; it is an error
// (wrapping ErrCPU) unless o.CPUOptional or the run was interrupted (a
// signal may have stopped the components too).
func lostCPU(s *cpu.Sampler, a, b cpu.Sample, haveA bool, o Options, interrupted bool, incomplete *[]string) error {
	if !haveA {
		return nil
	}
	var lost []string
	for _, n := range s.Names() {
		_, inA := a.Seconds[n]
		_, inB := b.Seconds[n]
		if !inA || !inB {
			lost = append(lost, n)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	err := errors.Join(a.Err, b.Err)
	*incomplete = append(*incomplete, fmt.Sprintf("CPU of %s not measured over the whole window (%v): CPU figures and SUT CPU per transaction leave it out",
		strings.Join(lost, ", "), err))
	if o.CPUOptional || interrupted {
		o.Log.Warn("CPU SOURCE LOST during the run: the result is incomplete", "components", lost, "err", err)
		return nil
	}
	return fmt.Errorf("%w: lost during the run: %s: %v (pass --cpu-optional to accept an incomplete result)", ErrCPU, strings.Join(lost, ", "), err)
}

// finish completes the result (provenance, incomplete notes,
// thresholds) and returns the error the run ends with, the worst first:
// a lost CPU source, a failed audit, a failed threshold.
func finish(res *report.Result, o Options, incomplete []string, cpuErr error) (*report.Result, error) {
	res.Provenance = o.Provenance
	if res.Provenance.ScenarioHash == "" {
		res.Provenance.ScenarioHash = o.Scenario.Hash()
	}
	res.Incomplete = append(res.Incomplete, incomplete...)
	failed := res.CheckThresholds(o.Thresholds)
	for _, w := range res.Warnings {
		o.Log.Warn(w)
	}
	switch {
	case cpuErr != nil:
		return res, cpuErr
	case !res.Audit.OK && !res.Audit.Skipped:
		return res, fmt.Errorf("%w: %s", ErrAudit, res.Audit.Reason)
	case len(failed) > 0:
		parts := make([]string, len(failed))
		for i, v := range failed {
			parts[i] = v.String()
		}
		return res, fmt.Errorf("%w: %s", ErrThresholds, strings.Join(parts, "; "))
	}
	return res, nil
}

// operatorOf returns op as an engine.Operator (nil stays nil).
func operatorOf(op *operator.Client) engine.Operator {
	if op == nil {
		return nil
	}
	return op
}

func protoName(p string) string {
	if p == "" {
		return "h2c"
	}
	return p
}

// progress prints live figures and collects the time series.
type progress struct {
	out     io.Writer
	mode    string
	sampler *cpu.Sampler
	mu      sync.Mutex
	last    cpu.Sample
	pts     []report.Point
	onLine  bool
	probe   *hostProbe
}

func newProgress(o Options, s *cpu.Sampler, hp *hostProbe) *progress {
	p := &progress{out: o.ProgressOut, mode: o.ProgressMode, sampler: s, probe: hp}
	if p.out == nil {
		p.out = os.Stderr
	}
	if p.mode == "" || p.mode == ProgressAuto {
		p.mode = ProgressPlain
		if f, ok := p.out.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				p.mode = ProgressLine
			}
		}
	}
	p.last = s.Sample(context.Background())
	return p
}

func (p *progress) tick(t engine.Tick) {
	s := p.sampler.Sample(context.Background())
	fz, haveFz := p.probe.read()
	p.mu.Lock()
	defer p.mu.Unlock()
	pt := report.Point{Tick: t, CPU: cpu.Percent(p.last, s)}
	if w, ok := cpu.HostDelta(p.last, s); ok {
		dt := s.At.Sub(p.last.At).Seconds()
		pt.HostBusy, pt.HostSteal = 100*w.Busy/dt, 100*w.Steal/dt
	}
	if haveFz {
		w := fz.Total().WorstMs
		pt.HostFreezeMs = &w
	}
	p.last = s
	p.pts = append(p.pts, pt)
	switch p.mode {
	case ProgressOff:
	case ProgressJSON:
		b, _ := json.Marshal(pt)
		fmt.Fprintf(p.out, "%s\n", b)
	case ProgressLine:
		fmt.Fprintf(p.out, "\r\033[K%s", line(pt))
		p.onLine = true
	default:
		fmt.Fprintln(p.out, line(pt))
	}
}

func (p *progress) phase(name string) {
	if p.mode != ProgressPlain && p.mode != ProgressLine {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onLine {
		fmt.Fprintln(p.out)
		p.onLine = false
	}
	fmt.Fprintf(p.out, "-- %s\n", name)
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onLine {
		fmt.Fprintln(p.out)
		p.onLine = false
	}
}

func (p *progress) points() []report.Point {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pts
}

func line(pt report.Point) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4ds %-8s offered %6d/s done %6d/s p50 %7.2fms p99 %7.2fms err %d late %d drop %d inflight %d",
		pt.Second, pt.Phase, pt.Offered, pt.Completed, pt.P50, pt.P99, pt.Errors, pt.Late, pt.Dropped, pt.InFlight)
	if len(pt.CPU) > 0 {
		names := make([]string, 0, len(pt.CPU))
		for k := range pt.CPU {
			names = append(names, k)
		}
		sort.Strings(names)
		b.WriteString(" cpu")
		for _, k := range names {
			fmt.Fprintf(&b, " %s %.0f%%", k, pt.CPU[k])
		}
	}
	return b.String()
}

// waitStart waits until o.StartAt (zero: not at all) or ctx ends.
func waitStart(ctx context.Context, o Options) error {
	d := time.Until(o.StartAt)
	if o.StartAt.IsZero() || d <= 0 {
		return nil
	}
	o.Log.Info("waiting for the start barrier", "start_at", o.StartAt.Format(time.RFC3339Nano), "in", d.Round(time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot wait for the start time: %w", ctx.Err())
	}
}

// liveHeap returns the Go heap's live bytes as of the last GC.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
