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
// with an error wrapping ErrAudit.
func Execute(ctx context.Context, o Options) (*report.Result, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	sc := o.Scenario
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := CheckProto(&sc, o.Proto); err != nil {
		return nil, err
	}
	if len(o.Faults) > 0 && o.Injector == nil {
		return nil, fmt.Errorf("%w: faults need a system under test this loadgen started (loadgen local)", ErrFaultSpec)
	}
	dcfg := driver.Config{Proto: o.Proto, Targets: o.Targets, Conns: o.Conns, Timeout: sc.Timeout.D(), Blocking: o.NoAsync, TLS: o.TLS,
		NotifyListen: o.NotifyListen, OnTime: o.Pacing == 0, OperatorToken: o.OperatorToken}
	if o.TariffChange != nil && dcfg.NotifyListen == "" && o.Proto != "gy" {
		// The sessions the change re-authorises are notified.
		dcfg.NotifyListen = "127.0.0.1:0"
	}
	var op *operator.Client
	if sc.Notifications.Enabled() {
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
		var err error
		if op, err = operator.New(operator.Config{Targets: targets, Token: o.OperatorToken, TLS: o.TLS}); err != nil {
			return nil, err
		}
		defer op.Close(0)
	}
	var d driver.Driver
	var err error
	// Balances are read over Nchf's HTTP API: through the load driver, or
	// for Gy through an HTTP/1.1 Nchf driver of their own.
	var reader *nchf.Driver
	charging := o.Proto == "gy"
	if charging {
		d, err = gy.New(dcfg)
	} else {
		reader, err = nchf.New(dcfg)
		d = reader
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)

	mode := o.Audit
	if mode == "" {
		mode = AuditAuto
	}
	var initial *audit.Snapshot
	auditRes := audit.Result{Skipped: true}
	doAudit := mode != AuditOff
	if mode == AuditAuto && sc.Subscribers.Count > FullAuditMax && o.InitialBalance <= 0 {
		doAudit = false
		auditRes.Reason = fmt.Sprintf("range of %d subscribers is above %d and no --initial-balance given", sc.Subscribers.Count, FullAuditMax)
	}
	if mode == AuditOff {
		auditRes.Reason = "disabled"
	}
	if doAudit && charging {
		if len(o.BalanceTargets) == 0 {
			if mode == AuditFull {
				return nil, fmt.Errorf("cannot audit a %s run: no HTTP endpoint to read balances from (--balance-url)", protoName(o.Proto))
			}
			doAudit = false
			auditRes.Reason = "no HTTP endpoint to read balances from over " + protoName(o.Proto) + " (--balance-url)"
		} else {
			hd, err := nchf.New(driver.Config{Proto: "http1", Targets: o.BalanceTargets, Timeout: sc.Timeout.D(), TLS: o.TLS,
				OperatorToken: o.OperatorToken})
			if err != nil {
				return nil, fmt.Errorf("cannot create the balance reader: %w", err)
			}
			defer hd.Close()
			reader = hd
		}
	}
	if doAudit && o.InitialBalance <= 0 {
		t0 := time.Now()
		initial, err = audit.Read(ctx, reader, first, audit.AllIndexes(sc.Subscribers.Count), o.AuditConcurrency)
		if err != nil {
			return nil, fmt.Errorf("cannot read initial balances: %w", err)
		}
		o.Log.Info("initial balances read", "accounts", sc.Subscribers.Count, "took", time.Since(t0).Round(time.Millisecond))
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
	tick, livePhase := prog.tick, func(string) {}
	var observe func(engine.Op, time.Duration, string) // nil: the engine skips it
	if o.MetricsListen != "" {
		lm := live.New()
		if err := lm.Serve(o.MetricsListen); err != nil {
			return nil, err
		}
		defer lm.Close(context.Background())
		o.Log.Info("serving live metrics", "addr", "http://"+lm.Addr()+"/metrics")
		tick = func(t engine.Tick) { prog.tick(t); lm.Tick(t) }
		observe, livePhase = lm.Observe, lm.Phase
	}

	var mu sync.Mutex
	var mem map[string]cpu.Memory
	var heapLive int64
	var cpuA, cpuB cpu.Sample
	var haveA, haveB bool
	var hopsA, hopsB hops.Snapshot
	var haveHopsA, haveHopsB bool
	snapHops := func(into *hops.Snapshot, have *bool) {
		if o.Hops == nil {
			return
		}
		h := o.Hops.Snapshot(context.Background())
		mu.Lock()
		*into, *have = h, true
		mu.Unlock()
	}
	tariff := o.Tariff
	if tariff == nil {
		if tariff, err = audit.LoadTariff(""); err != nil {
			return nil, fmt.Errorf("cannot load the built-in tariff: %w", err)
		}
	}
	var rater engine.Rater = tariff
	if o.TariffChange != nil {
		rater = o.TariffChange
	}
	var measureStart time.Time
	waitFaults := func() []faultRun { return nil }
	cfg := engine.Config{
		Scenario: sc,
		Driver:   d,
		Operator: operatorOf(op),
		Rater:    rater,
		Workers:  o.Workers,
		Pacing:   o.Pacing,
		Tick:     tick,
		Observe:  observe,
		Phase: func(name string) {
			livePhase(name)
			switch name {
			case "measure":
				mu.Lock()
				measureStart = time.Now()
				if len(o.Faults) > 0 {
					waitFaults = injectFaults(ctx, o.Injector, o.Faults, measureStart)
				}
				mu.Unlock()
				s := sampler.Sample(context.Background())
				mu.Lock()
				cpuA, haveA = s, true
				mu.Unlock()
				hp.open()
				snapHops(&hopsA, &haveHopsA)
			case "drain":
				hp.shut()
				snapHops(&hopsB, &haveHopsB)
				s := sampler.Sample(context.Background())
				m, h := sampler.Memory(context.Background(), nil), liveHeap()
				mu.Lock()
				cpuB, haveB = s, true
				mem, heapLive = m, h
				mu.Unlock()
			}
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
	var opStats *operator.Stats
	if op != nil {
		op.Close(operator.DefaultTimeout) // the calls still queued or in flight, bounded
		s := op.Stats()
		opStats = &s
	}
	mu.Lock()
	wait := waitFaults
	mu.Unlock()
	faultRuns := wait() // every instance back before the audit
	interrupted := ctx.Err() != nil
	prog.finish()
	mu.Lock()
	if !haveB {
		cpuB = sampler.Sample(context.Background())
	}
	var cpuSecs map[string]float64
	var host *report.HostCPU
	if haveA {
		cpuSecs = cpu.Delta(cpuA, cpuB)
		h, hostOK := cpu.HostDelta(cpuA, cpuB)
		// The window may have been cut short by ctx; CPU covers the same span.
		if dt := cpuB.At.Sub(cpuA.At).Seconds(); dt > 0 {
			want := st.MeasureEnd.Sub(st.MeasureStart).Seconds()
			for k, v := range cpuSecs {
				cpuSecs[k] = v * want / dt
			}
			h.Busy, h.Steal = h.Busy*want/dt, h.Steal*want/dt
		}
		if hostOK {
			host = &report.HostCPU{Cores: h.Cores, BusySeconds: h.Busy, StealSeconds: h.Steal, Local: sampler.Local()}
		}
	}
	mu.Unlock()

	if doAudit && interrupted {
		// In-flight requests were abandoned: the balances cannot reconcile
		// exactly, and the user asked to stop now.
		doAudit = false
		auditRes = audit.Result{Skipped: true, Reason: "run interrupted"}
	}
	if doAudit {
		// Reservations of sessions that ended are freed synchronously by the
		// CHF, so the final read can follow at once.
		// auto: the subscribers the run touched (untouched balances cannot
		// have moved); full: the whole range, which also proves that.
		idx := st.Ledger.TouchedList()
		if mode == AuditFull {
			idx = audit.AllIndexes(sc.Subscribers.Count)
		}
		t0 := time.Now()
		settle := time.Now().Add(o.ReservationSettle)
		for {
			final, err := audit.Read(context.Background(), reader, first, idx, o.AuditConcurrency)
			if err != nil {
				auditRes = audit.Result{Reason: err.Error()}
				break
			}
			auditRes = audit.Check(audit.Input{
				First: first, Initial: initial, InitialBalance: o.InitialBalance, Final: final,
				Ledger: st.Ledger, Expected: st.Ledger, Unresolved: st.Unresolved, NoHeader: st.MissingCharged,
				UsageLost: st.UsageLost, InitialOf: o.InitialOf, Tariff: tariff,
			})
			o.Log.Info("final balances read", "accounts", len(idx), "took", time.Since(t0).Round(time.Millisecond))
			// Only reservations can still change; mismatches cannot.
			if auditRes.Reserved == 0 || len(faultRuns) == 0 || time.Now().After(settle) || ctx.Err() != nil {
				break
			}
			o.Log.Info("waiting for the reservations of sessions cut by a fault to expire", "accounts_with_reservations", auditRes.Reserved, "until", settle.Format(time.TimeOnly))
			time.Sleep(time.Second)
		}
	}

	res, err := report.Build(st, sc, o.Targets, protoName(o.Proto), cpuSecs, auditRes, prog.points())
	if err != nil {
		return nil, err
	}
	res.Label, res.Shard = o.Label, o.Shard
	if opStats != nil {
		res.Notifications = report.BuildNotifications(&st.Notices, opStats)
	}
	mu.Lock()
	if mem == nil { // interrupted before the drain: what it holds now
		mem, heapLive = sampler.Memory(context.Background(), nil), liveHeap()
	}
	res.Memory = mem
	res.Hops, res.HopsNote = hopsOf(hopsA, hopsB, haveHopsA && haveHopsB, o)
	mu.Unlock()
	res.Host = host
	res.HostFreezes, res.HostFreezesNote = hp.stop()
	res.Sessions = &report.Sessions{
		OpenPeak: st.OpenSessionsPeak, OpenEnd: st.OpenSessionsEnd, Limited: st.SessionLimited,
		MaxOpenSessions: sc.MaxOpenSessions, LoadgenHeapBytes: heapLive, FlowBytes: engine.FlowBytes,
	}
	if st.OpenSessionsEnd > 0 {
		res.Sessions.BytesPerOpenSession = float64(heapLive) / float64(st.OpenSessionsEnd)
	}
	if err := res.Recompute(); err != nil { // the warnings of the sessions' figures
		return nil, err
	}
	if len(faultRuns) > 0 {
		res.Faults = faultResults(faultRuns, res.Series, st.Started, measureStart)
		res.StoreFaults = storeFaultResults(faultRuns, res.Series, st.Started, measureStart)
	}
	res.Interrupted = interrupted
	cpuErr := lostCPU(sampler, cpuA, cpuB, haveA, o, interrupted, &incomplete)
	return finish(res, o, incomplete, cpuErr)
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
