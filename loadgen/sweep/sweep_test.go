package sweep

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/report"
	"github.com/chf-testbed/testbed/loadgen/run"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// The knee of a fake CHF that serves at most 200 requests per second is
// found within one step. Beyond capacity the queue grows by the excess
// every second, so the overloaded steps miss the SLO by far more than the
// noise of a shared machine.
func TestKneeOfKnownCapacity(t *testing.T) {
	const capacity = 200.0
	fake, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1000, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Balance: 1}
	sc.Subscribers.Count = 100
	sc.Phases = scenario.Phases{WarmUp: scenario.Duration(500 * time.Millisecond), Duration: scenario.Duration(1500 * time.Millisecond)}
	step := func(ctx context.Context, tps float64) (*report.Result, error) {
		s := sc
		s.Load = scenario.Load{TPS: tps}
		return run.Execute(ctx, run.Options{Scenario: s, Targets: []string{fake.Addr()}, Audit: run.AuditOff, Workers: 1,
			ProgressMode: run.ProgressOff, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Start: 50, Step: 50, Max: 450, UntilBreak: true, RunStep: step,
		SLO: SLO{P99Ms: 300, MaxErrorRate: 0, MaxLateRate: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if res.KneeTPS < capacity-50 || res.KneeTPS > capacity {
		var b bytes.Buffer
		res.WriteMarkdown(&b)
		t.Fatalf("knee %.0f TPS, want within one step below %.0f\n%s", res.KneeTPS, capacity, b.String())
	}
	if res.FirstFailTPS != res.KneeTPS+50 || res.FirstFailReason == "" {
		t.Fatalf("first failure %.0f (%s)", res.FirstFailTPS, res.FirstFailReason)
	}
	// The table gives each step's CPU per component and how idle the
	// machine was.
	var md bytes.Buffer
	res.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| SUT µs/txn | CPU % (100 = one core) | machine idle % | steal % | host freeze worst ms | SLO |") || !strings.Contains(md.String(), "| loadgen ") {
		t.Errorf("sweep table lacks the CPU, idle and steal columns:\n%s", md.String())
	}
	if _, err := os.Stat("/proc/stat"); err == nil {
		for _, s := range res.Steps {
			if h := s.Result.Host; h == nil || h.Cores < 1 || h.IdlePercent < 0 || h.IdlePercent > 100 || h.BusyPercent <= 0 {
				t.Errorf("step %.0f TPS: host CPU %+v, want the machine's busy and idle shares", s.OfferedTPS, h)
			}
		}
	}
	var html bytes.Buffer
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if strings.Count(html.String(), "<svg") != 3 { // throughput, latency and CPU (loadgen) curves
		t.Fatalf("sweep page has %d charts", strings.Count(html.String(), "<svg"))
	}
}

// stepResult is a step's result with every transaction on time, the audit
// skipped and the given p99 (ms).
func stepResult(tps, p99 float64) *report.Result {
	r := &report.Result{Transactions: 100, Offered: 100, OfferedTPS: tps, TPS: tps}
	r.LatencyMs.P99 = p99
	r.Audit.Skipped = true
	return r
}

// A step that misses the SLO is run again up to Retries times: a pass on
// a retry continues the sweep (the step records why the earlier attempts
// missed), and the knee is declared only at a step whose every attempt
// missed.
func TestRetries(t *testing.T) {
	// attempts[tps] is the p99 (ms) of each successive attempt at tps.
	attempts := map[float64][]float64{100: {1}, 200: {50, 1}, 300: {50, 50, 50}, 400: {1}}
	calls := map[float64]int{}
	step := func(ctx context.Context, tps float64) (*report.Result, error) {
		i := calls[tps]
		calls[tps]++
		p := attempts[tps]
		r := stepResult(tps, p[min(i, len(p)-1)])
		if tps == 100 {
			r.Host = &report.HostCPU{Cores: 2, BusyPercent: 104.7, IdlePercent: 41.6, StealPercent: 12.3}
		}
		return r, nil
	}
	res, err := Run(context.Background(), Config{Start: 100, Step: 100, Max: 400, UntilBreak: true, Retries: 2, RunStep: step,
		SLO: SLO{P99Ms: 10, MaxLateRate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.KneeTPS != 200 || res.FirstFailTPS != 300 || len(res.Steps) != 3 {
		t.Fatalf("knee %v, first failure %v, %d steps; want 200, 300, 3", res.KneeTPS, res.FirstFailTPS, len(res.Steps))
	}
	if calls[100] != 1 || calls[200] != 2 || calls[300] != 3 || calls[400] != 0 {
		t.Fatalf("attempts per step %v, want 100:1 200:2 300:3", calls)
	}
	if s := res.Steps[1]; !s.Pass || len(s.Retried) != 1 || !strings.Contains(s.Retried[0], "p99 50.00 ms") {
		t.Fatalf("step 200: pass %v, retried %q", s.Pass, s.Retried)
	}
	if s := res.Steps[2]; s.Pass || len(s.Retried) != 2 {
		t.Fatalf("step 300: pass %v, retried %q", s.Pass, s.Retried)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	for _, want := range []string{"up to 2 more times", "|  | n/a | n/a | n/a | met (attempt 2; earlier: p99 50.00 ms > 10.00 ms)", "|  | 42 | 12.3 | n/a | met |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("sweep.md lacks %q:\n%s", want, b.String())
		}
	}
	if err := (Config{Start: 1, Step: 1, Max: 1, Retries: MaxRetries + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "retries") {
		t.Errorf("too many retries accepted: %v", err)
	}
}

// An attempt that misses the SLO while the hypervisor took more than
// MaxSteal of a core in some second of its measured window is void: run
// again without using a retry, up to StealRetries times in the sweep. Steal outside
// the window, steal on a met attempt and results without the host's CPU
// void nothing; once the voids are used up the attempt counts and says
// what it met.
func TestStealVoidsAttempts(t *testing.T) {
	type attempt struct {
		p99   float64
		steal []float64 // per measured second; nil: no host CPU
	}
	quiet, stolen := []float64{0, 1, 0}, []float64{0, 30, 2}
	attempts := map[float64][]attempt{
		100: {{50, stolen}, {1, quiet}},                // void, then met
		200: {{1, stolen}},                             // met under steal: counts
		300: {{50, stolen}, {50, stolen}, {50, quiet}}, // two voids, then a retry (met below)
		400: {{50, nil}, {50, nil}},                    // no host CPU: never void
	}
	attempts[300] = append(attempts[300], attempt{1, quiet})
	calls := map[float64]int{}
	step := func(ctx context.Context, tps float64) (*report.Result, error) {
		a := attempts[tps][calls[tps]]
		calls[tps]++
		r := stepResult(tps, a.p99)
		// A stolen warm-up second never voids.
		r.Series = append(r.Series, report.Point{Tick: engine.Tick{Phase: "warm-up"}, HostBusy: 90, HostSteal: 80})
		for _, s := range a.steal {
			r.Series = append(r.Series, report.Point{Tick: engine.Tick{Phase: "measure"}, HostBusy: 100, HostSteal: s})
		}
		if a.steal == nil {
			r.Series = append(r.Series, report.Point{Tick: engine.Tick{Phase: "measure"}})
		}
		return r, nil
	}
	cfg := Config{Start: 100, Step: 100, Max: 400, Retries: 1, MaxSteal: 5, StealRetries: 3, RunStep: step,
		SLO: SLO{P99Ms: 10, MaxLateRate: 1}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[float64]int{100: 2, 200: 1, 300: 4, 400: 2}
	for tps, n := range want {
		if calls[tps] != n {
			t.Errorf("step %.0f: %d attempts, want %d (all: %v)", tps, calls[tps], n, calls)
		}
	}
	s := res.Steps
	if len(s) != 4 || !s[0].Pass || !s[1].Pass || !s[2].Pass || s[3].Pass || res.KneeTPS != 300 {
		t.Fatalf("steps %+v, knee %v; want 100-300 met, 400 missed", s, res.KneeTPS)
	}
	if len(s[0].Voided) != 1 || len(s[0].Retried) != 0 || !strings.Contains(s[0].Voided[0], "p99 50.00 ms > 10.00 ms, host steal 30% of a core in its worst second > 5%") {
		t.Errorf("step 100: voided %q retried %q", s[0].Voided, s[0].Retried)
	}
	if s[1].PeakSteal == nil || *s[1].PeakSteal != 30 || len(s[1].Voided) != 0 {
		t.Errorf("step 200: peak steal %v, voided %q; want 30 and none", s[1].PeakSteal, s[1].Voided)
	}
	if len(s[2].Voided) != 2 || len(s[2].Retried) != 1 || strings.Contains(s[2].Retried[0], "steal") {
		t.Errorf("step 300: voided %q retried %q; want 2 voids, then one plain retry", s[2].Voided, s[2].Retried)
	}
	if len(s[3].Voided) != 0 || len(s[3].Retried) != 1 || s[3].PeakSteal != nil {
		t.Errorf("step 400 (no host CPU): voided %q retried %q peak %v", s[3].Voided, s[3].Retried, s[3].PeakSteal)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	for _, w := range []string{"more than 5% of a core in some second was void and run again, up to 3 times in the sweep", "(worst second 30)", "void attempts: p99 50.00 ms"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("sweep.md lacks %q:\n%s", w, b.String())
		}
	}

	// The allowance is the sweep's: once used up, a stolen attempt counts
	// and its reason names the steal.
	attempts = map[float64][]attempt{100: {{50, stolen}, {1, quiet}}, 200: {{50, stolen}, {1, quiet}}}
	calls = map[float64]int{}
	cfg.Max, cfg.Retries, cfg.StealRetries, cfg.UntilBreak = 200, 0, 1, false
	if got := cfg.Attempts(); got != 3 {
		t.Fatalf("Attempts %d, want 2 steps + 1 void", got)
	}
	res, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Steps; !st[0].Pass || len(st[0].Voided) != 1 || st[1].Pass || calls[200] != 1 || !strings.Contains(st[1].Reason, "host steal 30%") {
		t.Fatalf("allowance used up: steps %+v, attempts %v", st, calls)
	}
	for _, bad := range []Config{{MaxSteal: -1}, {MaxSteal: math.NaN()}, {StealRetries: MaxStealRetries + 1}} {
		bad.Start, bad.Step, bad.Max = 1, 1, 1
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// An attempt that misses the SLO while the host froze a CPU for longer
// than MaxFreezeMs is void like a stolen one, from the same allowance; a
// met attempt, a short freeze and a result without the probe void
// nothing; the table shows each step's worst freeze.
func TestFreezeVoidsAttempts(t *testing.T) {
	type attempt struct {
		p99   float64
		worst float64 // < 0: no probe
	}
	attempts := map[float64][]attempt{
		100: {{50, 40}, {1, 3}},   // void, then met
		200: {{1, 90}},            // met through a freeze: counts
		300: {{50, 8}, {1, 8}},    // a short freeze: a plain retry
		400: {{50, -1}, {50, -1}}, // no probe: never void
	}
	calls := map[float64]int{}
	step := func(ctx context.Context, tps float64) (*report.Result, error) {
		a := attempts[tps][calls[tps]]
		calls[tps]++
		r := stepResult(tps, a.p99)
		if a.worst >= 0 {
			r.HostFreezes = freeze.Summarize(freeze.Stats{{CPU: 0, Wakeups: 2000, Count: 1, Over10ms: 1, WorstMs: a.worst, FrozenMs: a.worst}}, 0)
		}
		return r, nil
	}
	cfg := Config{Start: 100, Step: 100, Max: 400, Retries: 1, MaxFreezeMs: 20, StealRetries: 3, RunStep: step,
		SLO: SLO{P99Ms: 10, MaxLateRate: 1}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for tps, n := range map[float64]int{100: 2, 200: 1, 300: 2, 400: 2} {
		if calls[tps] != n {
			t.Errorf("step %.0f: %d attempts, want %d (all: %v)", tps, calls[tps], n, calls)
		}
	}
	s := res.Steps
	if len(s) != 4 || !s[0].Pass || !s[1].Pass || !s[2].Pass || s[3].Pass || res.KneeTPS != 300 {
		t.Fatalf("steps %+v, knee %v; want 100-300 met, 400 missed", s, res.KneeTPS)
	}
	if len(s[0].Voided) != 1 || !strings.Contains(s[0].Voided[0], "p99 50.00 ms > 10.00 ms, host froze a CPU for 40.0 ms > 20 ms") {
		t.Errorf("step 100: voided %q", s[0].Voided)
	}
	if len(s[2].Voided) != 0 || len(s[2].Retried) != 1 || len(s[3].Voided) != 0 {
		t.Errorf("step 300 voided %q retried %q, step 400 voided %q: want a plain retry and no voids", s[2].Voided, s[2].Retried, s[3].Voided)
	}
	var b bytes.Buffer
	res.WriteMarkdown(&b)
	for _, w := range []string{"host froze a CPU for more than 20 ms was void and run again", "| 90.0 (1 ≥ 10 ms) |", "| n/a | **missed**"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("sweep.md lacks %q:\n%s", w, b.String())
		}
	}
	for _, v := range []float64{-1, math.NaN(), maxFreezeMs + 1} {
		bad := Config{Start: 1, Step: 1, Max: 1, MaxFreezeMs: v}
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "max_freeze_ms") {
			t.Errorf("MaxFreezeMs %v: %v", v, err)
		}
	}
}
