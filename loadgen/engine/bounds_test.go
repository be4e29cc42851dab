package engine

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// silentServer accepts TCP connections and never answers (nor closes
// them until the test ends).
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A server that accepts and never answers yields timeouts (or connection
// errors while a failed handshake is retried), counted as errors, in a
// wall time bounded by the duration and the timeout: never a hang.
func TestSilentServer(t *testing.T) {
	for _, proto := range []string{"h2c", "h2c-async", "http1"} {
		t.Run(proto, func(t *testing.T) {
			checkGoroutines(t)
			const timeout, dur = 200 * time.Millisecond, time.Second
			d := newDriverTimeout(t, proto, silentServer(t), timeout)
			sc := balanceOnly(50, dur, 100)
			sc.Timeout = scenario.Duration(timeout)
			t0 := time.Now()
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d})
			wall := time.Since(t0)
			count, errs, _, dropped := st.Totals()
			if limit := dur + timeout + time.Second; wall > limit {
				t.Errorf("run took %v, want at most %v", wall, limit)
			}
			if errs == 0 || errs != count || st.Errors["timeout"] == 0 {
				t.Errorf("%d completed, %d errors %v: want every request an error, some timeouts", count, errs, st.Errors)
			}
			if count+dropped != st.Offered {
				t.Errorf("completed %d + dropped %d != offered %d", count, dropped, st.Offered)
			}
			// A request that timed out took about the timeout, not more.
			if max := st.Latency().Summary().Max; max > float64((timeout + 300*time.Millisecond).Milliseconds()) {
				t.Errorf("max latency %.0f ms with a %v timeout", max, timeout)
			}
		})
	}
}

// A server that stops answering mid-run: the requests in flight and those
// sent during the stall time out, and the run ends on time.
func TestStallMidStream(t *testing.T) {
	for _, proto := range []string{"h2c", "http1"} {
		t.Run(proto, func(t *testing.T) {
			checkGoroutines(t)
			fake := startFake(t, fakechf.Options{})
			const timeout, dur = 150 * time.Millisecond, time.Second
			d := newDriverTimeout(t, proto, fake.Addr(), timeout)
			go func() {
				time.Sleep(300 * time.Millisecond)
				fake.Stall(2 * time.Second) // beyond the run's end
			}()
			sc := balanceOnly(200, dur, 100)
			sc.Timeout = scenario.Duration(timeout)
			t0 := time.Now()
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d})
			wall := time.Since(t0)
			count, errs, _, dropped := st.Totals()
			if limit := dur + timeout + time.Second; wall > limit {
				t.Errorf("run took %v, want at most %v", wall, limit)
			}
			if st.Errors["timeout"] < 50 || errs == count {
				t.Errorf("%d completed, %d errors %v: want the stalled requests timed out, the others answered", count, errs, st.Errors)
			}
			if count+dropped != st.Offered {
				t.Errorf("completed %d + dropped %d != offered %d", count, dropped, st.Offered)
			}
		})
	}
}

// Cancelling the context stops the run within a second, even with
// requests in flight that would wait much longer: they are abandoned and
// counted, and the stats say the run was interrupted.
func TestInterrupt(t *testing.T) {
	checkGoroutines(t)
	d := newDriverTimeout(t, "h2c", silentServer(t), 10*time.Second)
	sc := balanceOnly(200, 30*time.Second, 1000)
	sc.Timeout = scenario.Duration(10 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	t0 := time.Now()
	st, err := Run(ctx, Config{Scenario: sc, Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if wall := time.Since(t0); wall > 1500*time.Millisecond {
		t.Errorf("run took %v after a cancel at 500ms, want it ended within a second", wall)
	}
	if !st.Interrupted || st.Abandoned == 0 {
		t.Errorf("interrupted %v, abandoned %d: want the run marked interrupted and its requests in flight counted", st.Interrupted, st.Abandoned)
	}
}

// An offered rate the machine cannot produce, against a closed port, is
// dropped and counted, not buffered: memory stays under a fixed ceiling
// and the run ends on time.
func TestAbsurdRateMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3 s at full CPU")
	}
	checkGoroutines(t)
	d := newDriverTimeout(t, "h2c", closedPort(t), time.Second)
	sc := balanceOnly(1e9, 3*time.Second, 4096)
	sc.Subscribers.Count = 1000
	const ceiling = 256 << 20
	stopPeak := heapPeak()
	t0 := time.Now()
	st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Workers: 1})
	wall := time.Since(t0)
	peak := stopPeak()
	count, errs, _, dropped := st.Totals()
	t.Logf("wall %v, peak heap in use %d MiB, offered %d, completed %d (errors %d), dropped %d", wall, peak>>20, st.Offered, count, errs, dropped)
	if p := peak; p > ceiling {
		t.Errorf("peak heap in use %d MiB, want under %d MiB", p>>20, ceiling>>20)
	}
	if wall > 6*time.Second {
		t.Errorf("run took %v for 3 s", wall)
	}
	if dropped == 0 || errs != count || count+dropped != st.Offered || st.Offered < 1e9 {
		t.Errorf("offered %d, completed %d, errors %d, dropped %d: want 3e9 offered, the unsendable dropped and counted", st.Offered, count, errs, dropped)
	}
}

// Retries obey the bounds of first sends. At a rate the machine cannot
// offer, with the default mix (sessions and events, every request
// retried), against a closed port (every attempt fails at once, in
// doubt) and against a CHF that sheds everything with Retry-After: the
// retry queue is bounded, so memory stays under a fixed ceiling, and the
// run ends within its drain bound; the retries that do not fit are
// dropped, not queued, and their requests' usage is counted lost.
func TestRetryBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 2 × 6 s at full CPU")
	}
	for _, c := range []struct {
		name     string
		addr     func(t *testing.T) string
		shed     bool
		inflight int
	}{
		{"closed port", closedPort, false, 4096},
		// fewer in flight: the fake (net/http, in this process) answers
		// them before they time out, even under the race detector
		{"503 with Retry-After to everything", func(t *testing.T) string {
			return startFake(t, fakechf.Options{Shed: func() bool { return true }, RetryAfter: "1"}).Addr()
		}, true, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			const timeout, dur = time.Second, 3 * time.Second
			d := newDriverTimeout(t, "h2c", c.addr(t), timeout)
			sc := scenario.Default()
			sc.Load = scenario.Load{TPS: 1e9}
			sc.Phases = scenario.Phases{Duration: scenario.Duration(dur)}
			sc.Subscribers.Count = 1000
			sc.Timeout = scenario.Duration(timeout)
			sc.MaxInFlight = c.inflight
			const ceiling = 128 << 20
			stop := heapPeak()
			t0 := time.Now()
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Workers: 1})
			wall := time.Since(t0)
			p := stop()
			count, errs, _, dropped := st.Totals()
			l := st.UsageLost
			t.Logf("wall %v, peak heap in use %d MiB, offered %d, completed %d (errors %d), dropped %d, retried %d, retries dropped %d, usage lost %+v",
				wall, p>>20, st.Offered, count, errs, dropped, st.Retried, st.RetriesDropped, l)
			if p > ceiling {
				t.Errorf("peak heap in use %d MiB, want under %d MiB", p>>20, ceiling>>20)
			}
			// the drain bound: the think time, two timeouts and a second,
			// and with retries one timeout more; a second of slack
			if limit := dur + sc.Data.ThinkTime.D() + 3*timeout + 2*time.Second; wall > limit {
				t.Errorf("run took %v, want at most %v", wall, limit)
			}
			if st.Retried == 0 || st.RetriesDropped == 0 || count+dropped != st.Offered || errs != count {
				t.Errorf("retried %d, retries dropped %d, completed %d + dropped %d, offered %d: want retries made and the excess dropped",
					st.Retried, st.RetriesDropped, count, dropped, st.Offered)
			}
			// (the fake, overloaded, also lets requests time out: in doubt)
			if c.shed && l.Refused == 0 || !c.shed && (l.InDoubt == 0 || l.Refused != 0) || l.Requests != l.Refused+l.InDoubt+l.Abandoned {
				t.Errorf("usage lost %+v: want it counted, refused when shed, only in doubt when the port is closed", l)
			}
		})
	}
}

// heapPeak samples the heap in use every 50 ms until the function it
// returns is called, which returns the highest sample.
func heapPeak() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}
