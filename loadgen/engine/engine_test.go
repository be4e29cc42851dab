package engine

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// balanceOnly is a scenario of single-request flows at tps for d.
func balanceOnly(tps float64, d time.Duration, inflight int) scenario.Scenario {
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Balance: 1}
	sc.Subscribers.Count = 100
	sc.Load = scenario.Load{TPS: tps}
	sc.Phases = scenario.Phases{Duration: scenario.Duration(d)}
	sc.MaxInFlight = inflight
	return sc
}

func startFake(t *testing.T, opts fakechf.Options) *fakechf.Server {
	t.Helper()
	if opts.Accounts == 0 {
		opts.Accounts = 100
		opts.Balance = 1_000_000
	}
	s, err := fakechf.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newDriver(t *testing.T, proto string, addr string) driver.Driver {
	t.Helper()
	return newDriverTimeout(t, proto, addr, 5*time.Second)
}

// newDriverTimeout returns a driver whose requests time out after timeout
// (the scenario's: the driver enforces it).
func newDriverTimeout(t *testing.T, proto string, addr string, timeout time.Duration) driver.Driver {
	t.Helper()
	d, err := nchf.New(driver.Config{Proto: proto, Targets: []string{addr}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// goroutines returns the stacks of live goroutines except fasthttp's
// package-level dialer cleaner and idle connection cleaners, which outlive
// every client by design (they exit on their own after an idle period).
func goroutines() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "startTCPAddrsClean") || strings.Contains(g, "connsCleaner") {
			continue
		}
		out = append(out, g)
	}
	return out
}

// checkGoroutines fails when goroutines started by the test outlive it.
// Call it first so that its cleanup runs last.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := len(goroutines())
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		g := goroutines()
		for len(g) > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			g = goroutines()
		}
		if len(g) > before {
			t.Errorf("%d goroutines leaked:\n%s", len(g)-before, strings.Join(g, "\n\n"))
		}
	})
}

func runWithTimeout(t *testing.T, cfg Config) *Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A server stall must show up in the latency of every request that was
// due during it, not only in the few in flight (coordinated omission):
// with two requests in flight at most, the requests due during the stall
// cannot even leave, and are counted late.
// h2c runs on the worker's event loop, h2c-async on the connections'
// goroutines (driver.Pool).
func TestStallAppearsInLatency(t *testing.T) {
	for _, proto := range []string{"h2c", "h2c-async"} {
		for _, pacing := range []time.Duration{0, time.Millisecond} {
			t.Run(proto+"/pacing="+pacing.String(), func(t *testing.T) { testStall(t, proto, pacing) })
		}
	}
}

func testStall(t *testing.T, proto string, pacing time.Duration) {
	checkGoroutines(t)
	fake := startFake(t, fakechf.Options{})
	d := newDriver(t, proto, fake.Addr())
	const rate, stall = 400.0, 300 * time.Millisecond
	go func() {
		time.Sleep(500 * time.Millisecond)
		fake.Stall(stall)
	}()
	st := runWithTimeout(t, Config{Scenario: balanceOnly(rate, 1500*time.Millisecond, 2), Driver: d, Workers: 1, Pacing: pacing})
	lat, svc := st.Latency(), st.Service()
	slowLat := lat.CountAtOrAbove(stall / 2)
	slowSvc := svc.CountAtOrAbove(stall / 2)
	// About rate*stall requests fall due during the stall; the older half
	// of them waited more than stall/2.
	if want := int64(rate * stall.Seconds() / 2 * 0.7); slowLat < want {
		t.Errorf("%d requests with latency >= %v, want at least %d (stall hidden: coordinated omission)", slowLat, stall/2, want)
	}
	if slowSvc*4 > slowLat {
		t.Errorf("service time shows the stall as often as latency (%d vs %d): latency is not measured from the schedule", slowSvc, slowLat)
	}
	_, _, late, _ := st.Totals()
	if late < slowLat/2 {
		t.Errorf("late = %d, want the requests held back by the stall counted (>= %d)", late, slowLat/2)
	}
	if lat.Summary().Max < float64(stall.Milliseconds())*0.8 {
		t.Errorf("max latency %.1f ms does not show the %v stall", lat.Summary().Max, stall)
	}
}

// New flows that cannot leave within late_drop are dropped and counted;
// every request due in the window is either completed or dropped.
func TestDropsAreCounted(t *testing.T) {
	checkGoroutines(t)
	fake := startFake(t, fakechf.Options{})
	d := newDriver(t, "http1", fake.Addr())
	go func() {
		time.Sleep(300 * time.Millisecond)
		fake.Stall(300 * time.Millisecond)
	}()
	sc := balanceOnly(300, time.Second, 1)
	sc.LateDrop = scenario.Duration(20 * time.Millisecond)
	sc.LateThreshold = scenario.Duration(5 * time.Millisecond)
	st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Workers: 1})
	count, _, _, dropped := st.Totals()
	if dropped == 0 {
		t.Fatalf("no request dropped during a 300 ms stall with one request in flight")
	}
	if count+dropped != st.Offered {
		t.Fatalf("completed %d + dropped %d != offered %d: requests skipped silently", count, dropped, st.Offered)
	}
}

// Whole sessions over both protocols: every operation runs, without
// errors, and what the CHF charged is in the ledger.
func TestSessions(t *testing.T) {
	for _, proto := range []string{"h2c", "h2c-async", "http1", "h2c-std"} {
		t.Run(proto, func(t *testing.T) {
			checkGoroutines(t)
			fake := startFake(t, fakechf.Options{})
			d := newDriver(t, proto, fake.Addr())
			sc := scenario.Default()
			sc.Subscribers.Count = 100
			sc.Load = scenario.Load{TPS: 300}
			sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
			sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
			sc.Phases = scenario.Phases{RampUp: scenario.Duration(100 * time.Millisecond), WarmUp: scenario.Duration(100 * time.Millisecond), Duration: scenario.Duration(1200 * time.Millisecond)}
			var ticks int
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Tick: func(Tick) { ticks++ }, Pacing: time.Millisecond})
			for op := range NumOps {
				if st.Ops[op].Count == 0 {
					t.Errorf("no %s completed", op)
				}
			}
			if _, errs, _, _ := st.Totals(); errs != 0 || st.ErrorsOutside != 0 {
				t.Fatalf("errors: %v (outside window %d)", st.Errors, st.ErrorsOutside)
			}
			if st.Ledger.Total == 0 || st.Unresolved != 0 || st.MissingCharged != 0 {
				t.Fatalf("ledger total %d unresolved %d missing header %d", st.Ledger.Total, st.Unresolved, st.MissingCharged)
			}
			if len(st.Series) == 0 || ticks == 0 {
				t.Fatalf("no time series (%d points, %d ticks)", len(st.Series), ticks)
			}
		})
	}
}

func TestScheduleRamp(t *testing.T) {
	s := newSchedule(100, 2*time.Second)
	// 100 flows/s ramped over 2 s: 100 flows in the ramp, then 100/s.
	if at := time.Duration(s.at(100)); at < 1990*time.Millisecond || at > 2010*time.Millisecond {
		t.Fatalf("flow 100 at %v, want 2s", at)
	}
	if at := time.Duration(s.at(200)); at < 2990*time.Millisecond || at > 3010*time.Millisecond {
		t.Fatalf("flow 200 at %v, want 3s", at)
	}
	flat := newSchedule(1000, 0)
	if at := time.Duration(flat.at(500)); at != 500*time.Millisecond {
		t.Fatalf("flow 500 at %v", at)
	}
}

// Requests beyond the timeout are counted as timeouts, their outcome as
// unresolved, and the run still ends (sessions released).
func TestTimeouts(t *testing.T) {
	for _, proto := range []string{"h2c", "h2c-async", "http1"} {
		t.Run(proto, func(t *testing.T) {
			checkGoroutines(t)
			fake := startFake(t, fakechf.Options{Delay: func() time.Duration { return 150 * time.Millisecond }})
			d := newDriverTimeout(t, proto, fake.Addr(), 40*time.Millisecond)
			sc := scenario.Default()
			sc.Subscribers.Count = 100
			sc.Load = scenario.Load{TPS: 100}
			sc.Timeout = scenario.Duration(40 * time.Millisecond)
			sc.Data.ThinkTime = scenario.Duration(20 * time.Millisecond)
			sc.Voice.ThinkTime = scenario.Duration(20 * time.Millisecond)
			sc.Phases = scenario.Phases{Duration: scenario.Duration(500 * time.Millisecond)}
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d})
			if st.Errors["timeout"] == 0 || st.Unresolved == 0 {
				t.Fatalf("errors %v, unresolved %d", st.Errors, st.Unresolved)
			}
			if count, _, _, dropped := st.Totals(); count+dropped != st.Offered {
				t.Fatalf("completed %d + dropped %d != offered %d", count, dropped, st.Offered)
			}
		})
	}
}

// Paced sends leave in batches but never before they are due, and the
// latency (from the due time) includes the wait for the tick. The event
// loop takes the responses at the next tick too, but stamps them with
// their arrival: the service time does not include that wait.
func TestPacingNeverEarly(t *testing.T) {
	checkGoroutines(t)
	fake := startFake(t, fakechf.Options{})
	d := newDriver(t, "h2c", fake.Addr())
	const pacing = 5 * time.Millisecond
	// A modest rate: the fake CHF shares this process (and, under the
	// race detector on a busy machine, is slow); its queueing would
	// drown the tick in the service time.
	st := runWithTimeout(t, Config{Scenario: balanceOnly(400, 500*time.Millisecond, 100), Driver: d, Workers: 1, Pacing: pacing})
	count, errs, _, dropped := st.Totals()
	if count == 0 || errs != 0 || count+dropped != st.Offered {
		t.Fatalf("completed %d, errors %d (%v), dropped %d, offered %d", count, errs, st.Errors, dropped, st.Offered)
	}
	// Sends wait for the next tick: on average half the pacing interval
	// more than service time.
	lat, svc := st.Latency().Summary(), st.Service().Summary()
	if lat.Mean-svc.Mean < float64(pacing.Milliseconds())/4 {
		t.Errorf("mean latency %.3f ms vs service %.3f ms: the wait for the %v tick is not in the latency", lat.Mean, svc.Mean, pacing)
	}
	if svc.P50 > float64(pacing.Milliseconds())/2 {
		t.Errorf("median service time %.3f ms (latency %.3f ms) with %v ticks: responses are timed when handled, not when they arrived", svc.P50, lat.P50, pacing)
	}
}

func TestDefaultWorkers(t *testing.T) {
	for _, c := range []struct {
		tps   float64
		procs int
		want  int
	}{{10, 8, 1}, {2000, 2, 1}, {TxnPerWorker, 8, 1}, {TxnPerWorker + 1, 8, 2}, {1e6, 8, 8}, {1e6, 1, 1}} {
		if got := defaultWorkers(c.tps, c.procs); got != c.want {
			t.Errorf("defaultWorkers(%v, %d) = %d, want %d", c.tps, c.procs, got, c.want)
		}
	}
}

// fakechf.Fast, the canned-answer server that isolates the load
// generator, answers every operation of the default mix as the engine
// expects: every kind completes, no error, every charge resolved.
func TestFastFake(t *testing.T) {
	checkGoroutines(t)
	fake, err := fakechf.StartFast("")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	d := newDriver(t, "h2c", fake.Addr())
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	sc.Load = scenario.Load{TPS: 1000}
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{Duration: scenario.Duration(time.Second)}
	st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Workers: 1})
	for op := range NumOps {
		if st.Ops[op].Count == 0 {
			t.Errorf("no %s completed", op)
		}
	}
	if count, errs, _, _ := st.Totals(); errs != 0 || st.Unresolved != 0 || st.MissingCharged != 0 || fake.Requests.Load() < count {
		t.Fatalf("completed %d, errors %v, unresolved %d, missing X-Chf-Charged %d, served %d", count, st.Errors, st.Unresolved, st.MissingCharged, fake.Requests.Load())
	}
}

// TestAdmittedLatencyExcludesShed: a server that sheds a fifth of the
// requests slowly (200 ms) and answers the rest at once: the shed ones are
// counted apart and the admitted latency shows only the others.
func TestAdmittedLatencyExcludesShed(t *testing.T) {
	checkGoroutines(t)
	var n atomic.Int64
	fake := startFake(t, fakechf.Options{Shed: func() bool { return n.Add(1)%5 == 0 }, ShedDelay: 200 * time.Millisecond})
	d := newDriver(t, "h2c", fake.Addr())
	st := runWithTimeout(t, Config{Scenario: balanceOnly(200, time.Second, 64), Driver: d, Workers: 1})
	o := st.Ops[OpBalance]
	if o.Count < 150 || o.Shed < o.Count/6 || o.Shed > o.Count/4 {
		t.Fatalf("count %d, shed %d: want about a fifth shed", o.Count, o.Shed)
	}
	if o.Admitted.Count() != o.Count-o.Shed {
		t.Fatalf("admitted histogram holds %d, want %d", o.Admitted.Count(), o.Count-o.Shed)
	}
	// Every shed answer took at least 200 ms from its due time: all of
	// them are in the latency of all requests, none in the admitted one
	// (whatever else the machine's load adds to both).
	slow := 199 * time.Millisecond
	if d := o.Latency.CountAtOrAbove(slow) - o.Admitted.CountAtOrAbove(slow); d != o.Shed {
		t.Fatalf("requests of at least %s: %d in all, %d admitted; want the %d shed ones to make the difference",
			slow, o.Latency.CountAtOrAbove(slow), o.Admitted.CountAtOrAbove(slow), o.Shed)
	}
}
