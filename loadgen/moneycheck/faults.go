package moneycheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/local"
)

// Fault is one kind of fault the checker injects: Action "kill" (SIGKILL,
// then a restart with the same flags and address) or "stop" (SIGSTOP for
// a while, then SIGCONT) of Service (cgw, ocp, abm or aslite).
type Fault struct {
	Action, Service string
}

func (f Fault) String() string { return f.Action + ":" + f.Service }

// Services the checker can fault, and the actions.
var (
	FaultServices = []string{"cgw", "ocp", "abm", "aslite"}
	FaultActions  = []string{"kill", "stop"}
)

// ParseFaults parses --faults: "on" (every action on every service),
// "off" (none), or a comma-separated list of ACTION, SERVICE or
// ACTION:SERVICE ("kill", "aslite", "stop:cgw").
func ParseFaults(s string) ([]Fault, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "off", "none", "":
		return nil, nil
	case "on", "all":
		s = strings.Join(FaultActions, ",")
	}
	var out []Fault
	add := func(f Fault) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		action, svc, pair := strings.Cut(term, ":")
		switch {
		case pair && slices.Contains(FaultActions, action) && slices.Contains(FaultServices, svc):
			add(Fault{action, svc})
		case !pair && slices.Contains(FaultActions, term):
			for _, svc := range FaultServices {
				add(Fault{term, svc})
			}
		case !pair && slices.Contains(FaultServices, term):
			for _, a := range FaultActions {
				add(Fault{a, term})
			}
		default:
			return nil, fmt.Errorf("cannot parse fault %q: want on, off, or a list of kill, stop, %s or ACTION:SERVICE", term, strings.Join(FaultServices, ", "))
		}
	}
	return out, nil
}

// settleMargin is how long after the last fault healed a request sent
// before it may still land (the CGW's deadline is at most 2 s).
const settleMargin = 3 * time.Second

// injector injects faults one at a time into a local CHF.
type injector struct {
	chf      *local.CHF
	faults   []Fault
	interval time.Duration
	rng      *rand.Rand
	restart  time.Duration // bounds a restart

	mu       sync.Mutex
	cond     *sync.Cond
	faulty   bool      // a fault is in progress
	healedAt time.Time // when the last fault healed
	settling int       // accounts waiting for a quiet window: no new fault meanwhile
	counts   map[string]int
	start    time.Time
	log      []string // the faults, with their times since start
}

func newInjector(c *local.CHF, faults []Fault, interval time.Duration, seed uint64) *injector {
	in := &injector{chf: c, faults: faults, interval: interval, rng: rand.New(rand.NewPCG(seed, 0x5eed)),
		restart: 2 * time.Minute, counts: map[string]int{}, start: time.Now()}
	in.cond = sync.NewCond(&in.mu)
	return in
}

// run injects faults until ctx ends, then heals the last one. It returns
// an error when a service cannot be restarted.
func (in *injector) run(ctx context.Context) error {
	if len(in.faults) == 0 {
		return nil
	}
	for {
		gap := in.interval/2 + time.Duration(in.rng.Int64N(int64(in.interval)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(gap):
		}
		in.mu.Lock()
		if in.settling > 0 {
			in.mu.Unlock()
			continue
		}
		in.faulty = true
		in.mu.Unlock()
		f := in.faults[in.rng.IntN(len(in.faults))]
		t0 := time.Now()
		err := in.inject(ctx, f)
		in.mu.Lock()
		in.faulty, in.healedAt = false, time.Now()
		in.log = append(in.log, fmt.Sprintf("%.3fs %s, healed at %.3fs", t0.Sub(in.start).Seconds(), f, in.healedAt.Sub(in.start).Seconds()))
		if err == nil {
			in.counts[f.String()]++
		}
		in.cond.Broadcast()
		in.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// inject applies f and heals it (whatever ctx says: nothing is left
// killed or stopped).
func (in *injector) inject(ctx context.Context, f Fault) error {
	names := in.chf.Names(f.Service)
	if len(names) == 0 {
		return fmt.Errorf("cannot inject %s: no instance", f)
	}
	name := names[0]
	switch f.Action {
	case "kill":
		if err := in.chf.Kill(name); err != nil {
			return fmt.Errorf("cannot kill %s: %w", name, err)
		}
		sleep(ctx, time.Duration(in.rng.Int64N(int64(800*time.Millisecond))))
		rctx, cancel := context.WithTimeout(context.Background(), in.restart)
		defer cancel()
		if err := in.chf.Restart(rctx, name); err != nil {
			return fmt.Errorf("cannot restart %s after kill -9: %w", name, err)
		}
	case "stop":
		if err := in.chf.Pause(name); err != nil {
			return fmt.Errorf("cannot stop %s: %w", name, err)
		}
		sleep(ctx, 200*time.Millisecond+time.Duration(in.rng.Int64N(int64(2300*time.Millisecond))))
		if err := in.chf.Resume(name); err != nil {
			return fmt.Errorf("cannot continue %s: %w", name, err)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// quiet waits, holding off new faults, until no fault is in progress and
// settleMargin has passed since the last one healed and since since: a
// request sent before then has landed or never will.
func (in *injector) quiet(ctx context.Context, since time.Time) error {
	in.mu.Lock()
	in.settling++
	defer func() {
		in.mu.Lock()
		in.settling--
		in.mu.Unlock()
	}()
	for in.faulty {
		if ctx.Err() != nil {
			in.mu.Unlock()
			return ctx.Err()
		}
		waitCond(in.cond, 100*time.Millisecond)
	}
	until := in.healedAt
	in.mu.Unlock()
	if since.After(until) {
		until = since
	}
	if d := time.Until(until.Add(settleMargin)); d > 0 {
		sleep(ctx, d)
	}
	return ctx.Err()
}

// waitCond waits on c (its lock held) at most d.
func waitCond(c *sync.Cond, d time.Duration) {
	t := time.AfterFunc(d, c.Broadcast)
	c.Wait()
	t.Stop()
}

// Log returns the faults injected with their times.
func (in *injector) Log() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.log...)
}

// Counts returns the faults injected, by kind.
func (in *injector) Counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps(in.counts)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
