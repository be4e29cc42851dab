package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// ErrFaultSpec is wrapped by ParseFault for a malformed --fault.
var ErrFaultSpec = errors.New("run: invalid fault")

// Fault actions.
const (
	FaultKill = "kill" // kill -9, restart after For
	FaultStop = "stop" // SIGSTOP for For, then SIGCONT
)

// DefaultFaultFor is how long a fault lasts when its spec gives no FOR.
const DefaultFaultFor = 2 * time.Second

// Fault is one fault injected into the system under test during the
// measured window: ACTION:SERVICE:AT[:FOR].
type Fault struct {
	Action  string        // FaultKill or FaultStop
	Service string        // cgw, ocp, abm or aslite: one instance of it; asd, asd1.. a store node
	At      time.Duration // offset into the measured window
	For     time.Duration // down (kill) or stopped (stop) for this long
}

func (f Fault) String() string {
	return fmt.Sprintf("%s:%s:%s:%s", f.Action, f.Service, f.At, f.For)
}

// StoreNode returns the index of the asd node the fault hits ("asd" is
// node 0, "asdN" node N); ok is false for a fault on a CHF service.
func (f Fault) StoreNode() (node int, ok bool) {
	if f.Service == "asd" {
		return 0, true
	}
	rest, found := strings.CutPrefix(f.Service, "asd")
	if !found || len(rest) != 1 || rest[0] < '0' || rest[0] > '4' {
		return 0, false
	}
	return int(rest[0] - '0'), true
}

// ParseFault parses ACTION:SERVICE:AT[:FOR], e.g. "kill:ocp:10s:2s".
func ParseFault(s string) (Fault, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 {
		return Fault{}, fmt.Errorf("%w %q: want ACTION:SERVICE:AT[:FOR]", ErrFaultSpec, s)
	}
	f := Fault{Action: parts[0], Service: parts[1], For: DefaultFaultFor}
	if f.Action != FaultKill && f.Action != FaultStop {
		return Fault{}, fmt.Errorf("%w %q: action %q: want kill or stop", ErrFaultSpec, s, f.Action)
	}
	switch f.Service {
	case "cgw", "ocp", "abm", "aslite":
	default:
		if _, ok := f.StoreNode(); !ok {
			return Fault{}, fmt.Errorf("%w %q: service %q: want cgw, ocp, abm, aslite, or asd (asd node 0; asd1..asd4 the others)", ErrFaultSpec, s, f.Service)
		}
	}
	var err error
	if f.At, err = time.ParseDuration(parts[2]); err != nil || f.At < 0 {
		return Fault{}, fmt.Errorf("%w %q: AT %q: want a duration >= 0 (e.g. 10s)", ErrFaultSpec, s, parts[2])
	}
	if len(parts) == 4 {
		if f.For, err = time.ParseDuration(parts[3]); err != nil || f.For <= 0 {
			return Fault{}, fmt.Errorf("%w %q: FOR %q: want a positive duration (e.g. 2s)", ErrFaultSpec, s, parts[3])
		}
	}
	return f, nil
}

// Injector carries faults out on the system under test. Its methods may
// be called from several goroutines at once.
type Injector interface {
	// Kill kills one instance of service with SIGKILL and returns its name.
	Kill(service string) (instance string, err error)
	// Restart starts a killed instance again and returns once it is ready.
	Restart(ctx context.Context, instance string) error
	// Pause stops one instance of service with SIGSTOP and returns its name.
	Pause(service string) (instance string, err error)
	// Resume continues a paused instance.
	Resume(instance string) error
}

// MigrationSampler is an Injector whose store is a cluster that migrates
// partitions (a started asd): the run samples it every second during a
// store fault and its recovery.
type MigrationSampler interface {
	MigrationsRemaining(ctx context.Context) (int64, error)
}

// faultRun is one fault as it happened, in wall-clock time.
type faultRun struct {
	f                  Fault
	instance           string
	injected, restored time.Time
	err                error
	// For a store fault: the most migrations left, samples taken, and
	// when they were 0 again after the node was back.
	migrations       int64
	migrationSamples int
	settled          time.Time
}

// injectFaults runs every fault on its own goroutine from measureStart;
// wait, called once the load ended, returns once all are done (or ctx
// ended) and what happened.
func injectFaults(ctx context.Context, inj Injector, faults []Fault, measureStart time.Time) (wait func() []faultRun) {
	out := make([]faultRun, len(faults))
	var wg sync.WaitGroup
	// Migrations are sampled until the load ends at the latest.
	loadCtx, loadEnd := context.WithCancel(ctx)
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = injectOne(ctx, loadCtx, inj, f, measureStart)
		}()
	}
	return func() []faultRun { loadEnd(); wg.Wait(); return out }
}

// migrationsSettle is how many samples in a row of no migration left, once
// the node is back, end the sampling of a store fault.
const migrationsSettle = 3

// injectOne returns through a named result: the deferred end of the
// migration sampling writes into it.
func injectOne(ctx, loadCtx context.Context, inj Injector, f Fault, measureStart time.Time) (r faultRun) {
	r = faultRun{f: f}
	if !sleepUntil(ctx, measureStart.Add(f.At)) {
		r.err = fmt.Errorf("not injected: %w", ctx.Err())
		return r
	}
	r.injected = time.Now()
	if ms, ok := inj.(MigrationSampler); ok {
		if _, store := f.StoreNode(); store {
			var back sync.WaitGroup // r.restored is written before Done
			back.Add(1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				sampleMigrations(loadCtx, ms, &r, &back)
			}()
			defer func() { <-done }()
			defer back.Done()
		}
	}
	switch f.Action {
	case FaultKill:
		if r.instance, r.err = inj.Kill(f.Service); r.err != nil {
			return r
		}
		// The restart is not cut short by the end of the run: the SUT
		// must be whole for the audit.
		sleepUntil(ctx, r.injected.Add(f.For))
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r.err = inj.Restart(rctx, r.instance)
		cancel()
	case FaultStop:
		if r.instance, r.err = inj.Pause(f.Service); r.err != nil {
			return r
		}
		sleepUntil(ctx, r.injected.Add(f.For))
		r.err = inj.Resume(r.instance)
	}
	r.restored = time.Now()
	return r
}

// sampleMigrations samples ms every second into r until the node is back
// (back done) and no migration is left for migrationsSettle samples in a
// row, or ctx ends.
func sampleMigrations(ctx context.Context, ms MigrationSampler, r *faultRun, back *sync.WaitGroup) {
	isBack := make(chan struct{})
	go func() { back.Wait(); close(isBack) }()
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	zeros, restored := 0, false
	for {
		sctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
		n, err := ms.MigrationsRemaining(sctx)
		cancel()
		if err == nil {
			r.migrationSamples++
			r.migrations = max(r.migrations, n)
			if n == 0 && restored {
				zeros++
				if zeros == 1 {
					r.settled = time.Now()
				}
				if zeros >= migrationsSettle {
					return
				}
			} else {
				zeros, r.settled = 0, time.Time{}
			}
		}
		select {
		case <-ctx.Done():
			if zeros < migrationsSettle {
				r.settled = time.Time{}
			}
			return
		case <-isBack:
			restored, isBack = true, nil
		case <-tk.C:
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// Recovery criteria: a second counts as recovered when it completed at
// least recoverTPSShare of what it offered, with no error, and its p99 is
// no worse than recoverP99Factor times the worst per-second p99 of the
// measured seconds before the first fault (the baseline: per-second p99s
// are noisy on a shared machine, so the worst one is the honest bound);
// recovery is the first of recoverSeconds such seconds in a row.
const (
	recoverTPSShare  = 0.95
	recoverP99Factor = 1.2
	recoverSeconds   = 3
)

// faultResults turns what happened into the report's figures, from the
// per-second series (pts; Second counts from runStart).
func faultResults(runs []faultRun, pts []report.Point, runStart, measureStart time.Time) []report.Fault {
	// The baseline: measured seconds before the first fault.
	first := time.Time{}
	for _, r := range runs {
		if !r.injected.IsZero() && (first.IsZero() || r.injected.Before(first)) {
			first = r.injected
		}
	}
	sec := func(t time.Time) int { return int(t.Sub(runStart) / time.Second) }
	var base []float64
	for _, p := range pts {
		if p.Phase == "measure" && (first.IsZero() || p.Second < sec(first)) && p.Completed > 0 {
			base = append(base, p.P99)
		}
	}
	baseP99 := 0.0
	for _, v := range base {
		baseP99 = max(baseP99, v)
	}
	limit := baseP99 * recoverP99Factor
	out := make([]report.Fault, 0, len(runs))
	for _, r := range runs {
		rf := report.Fault{Spec: r.f.String(), Instance: r.instance, BaselineP99Ms: baseP99, RecoverS: -1}
		if r.err != nil {
			rf.Error = r.err.Error()
		}
		if r.injected.IsZero() {
			out = append(out, rf)
			continue
		}
		rf.AtS = r.injected.Sub(measureStart).Seconds()
		if !r.restored.IsZero() {
			rf.RestoredS = r.restored.Sub(measureStart).Seconds()
		}
		from := sec(r.injected)
		// Seconds whose tick is at or after the injection: Tick.Second n
		// covers (n-1, n].
		good := 0
		for _, p := range pts {
			if p.Second <= from {
				continue
			}
			rf.PeakP99Ms = max(rf.PeakP99Ms, p.P99)
			ok := p.Offered > 0 && float64(p.Completed) >= recoverTPSShare*float64(p.Offered) && p.Errors == 0 && p.P99 <= limit
			if ok {
				good++
				if good == 1 {
					rf.RecoverS = float64(p.Second-1) - r.injected.Sub(runStart).Seconds()
					if rf.RecoverS < 0 {
						rf.RecoverS = 0
					}
				}
				if good == recoverSeconds {
					break
				}
				continue
			}
			if good > 0 { // a relapse: start again
				good, rf.RecoverS = 0, -1
			}
			rf.Errors += p.Errors
		}
		if good < recoverSeconds {
			rf.RecoverS = -1 // not recovered before the window ended
		}
		out = append(out, rf)
	}
	return out
}

// storeFaultResults gives the store's side of the faults on asd nodes:
// errors during the fault and after, when the run was error-free again,
// and the migrations sampled.
func storeFaultResults(runs []faultRun, pts []report.Point, runStart, measureStart time.Time) []report.StoreFault {
	var out []report.StoreFault
	for _, r := range runs {
		if _, ok := r.f.StoreNode(); !ok {
			continue
		}
		sf := report.StoreFault{Spec: r.f.String(), Node: r.instance, RecoverS: -1, MigrationsSettledS: -1,
			MigrationsMax: r.migrations, MigrationSamples: r.migrationSamples}
		if r.err != nil {
			sf.Error = r.err.Error()
		}
		if r.injected.IsZero() {
			out = append(out, sf)
			continue
		}
		sf.AtS = r.injected.Sub(measureStart).Seconds()
		if !r.restored.IsZero() {
			sf.RestoredS = r.restored.Sub(measureStart).Seconds()
		}
		if !r.settled.IsZero() {
			sf.MigrationsSettledS = r.settled.Sub(measureStart).Seconds()
		}
		// Tick.Second n covers (n-1, n] seconds from runStart.
		from := int(r.injected.Sub(runStart) / time.Second)
		back := -1
		if !r.restored.IsZero() {
			back = int(r.restored.Sub(runStart) / time.Second)
		}
		lastErr, lastSecond := from, from
		for _, p := range pts {
			if p.Phase != "measure" || p.Second <= from {
				continue
			}
			lastSecond = p.Second
			if back < 0 || p.Second <= back {
				sf.ErrorsDuringFault += p.Errors
			} else {
				sf.ErrorsAfter += p.Errors
			}
			if p.Errors > 0 {
				lastErr = p.Second
			}
		}
		if lastErr < lastSecond {
			// Error-free from the start of second lastErr+1, (lastErr, ...].
			sf.RecoverS = max(0, float64(lastErr)-r.injected.Sub(runStart).Seconds())
		}
		out = append(out, sf)
	}
	return out
}
