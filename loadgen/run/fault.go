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
	Service string        // cgw, ocp, abm or aslite: one instance of it
	At      time.Duration // offset into the measured window
	For     time.Duration // down (kill) or stopped (stop) for this long
}

func (f Fault) String() string {
	return fmt.Sprintf("%s:%s:%s:%s", f.Action, f.Service, f.At, f.For)
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
		return Fault{}, fmt.Errorf("%w %q: service %q: want cgw, ocp, abm or aslite", ErrFaultSpec, s, f.Service)
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

// faultRun is one fault as it happened, in wall-clock time.
type faultRun struct {
	f                  Fault
	instance           string
	injected, restored time.Time
	err                error
}

// injectFaults runs every fault on its own goroutine from measureStart;
// wait returns once all are done (or ctx ended) and what happened.
func injectFaults(ctx context.Context, inj Injector, faults []Fault, measureStart time.Time) (wait func() []faultRun) {
	out := make([]faultRun, len(faults))
	var wg sync.WaitGroup
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = injectOne(ctx, inj, f, measureStart)
		}()
	}
	return func() []faultRun { wg.Wait(); return out }
}

func injectOne(ctx context.Context, inj Injector, f Fault, measureStart time.Time) faultRun {
	r := faultRun{f: f}
	if !sleepUntil(ctx, measureStart.Add(f.At)) {
		r.err = fmt.Errorf("not injected: %w", ctx.Err())
		return r
	}
	r.injected = time.Now()
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
