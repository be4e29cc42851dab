package admission

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test advances.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestLimiterBounds: the limit never leaves [MinLimit, MaxLimit].
func TestLimiterBounds(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(Config{MinLimit: 8, MaxLimit: 64, InitialLimit: 1000, MinSamples: 1, Now: c.now})
	if got := l.Stats().Limit; got != 64 {
		t.Fatalf("initial limit %d, want MaxLimit 64", got)
	}
	// Latency grows without bound: the limit falls to MinLimit, not below.
	for i := 0; i < 500; i++ {
		n := 0
		for l.Acquire() {
			n++
		}
		c.add(l.cfg.Window)
		for j := 0; j < n; j++ {
			l.Done(time.Duration(i+1)*time.Millisecond, true)
		}
	}
	if got := l.Stats().Limit; got != 8 {
		t.Errorf("limit %d after ever-growing latency, want MinLimit 8", got)
	}
}

// TestLimiterConcurrent: Acquire and Done from many goroutines keep the
// in-flight count exact (run with -race).
func TestLimiterConcurrent(t *testing.T) {
	l := New(Config{MinSamples: 10, Window: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if l.Acquire() {
					l.Done(time.Microsecond*time.Duration(1+i%50), i%7 != 0)
				}
			}
		}()
	}
	wg.Wait()
	if st := l.Stats(); st.InFlight != 0 || st.Admitted+st.Rejected != 16000 {
		t.Errorf("stats %+v: want 0 in flight and 16000 decisions", st)
	}
}

// TestAcquireDoesNotAllocate locks the hot path in.
func TestAcquireDoesNotAllocate(t *testing.T) {
	l := New(Config{})
	if n := testing.AllocsPerRun(1000, func() {
		if l.Acquire() {
			l.Done(time.Millisecond, true)
		}
	}); n != 0 {
		t.Errorf("Acquire+Done allocate %.1f times, want 0", n)
	}
}

// TestAcquireNewLeavesRoomForOpenSessions: new work gets at most 4/5 of
// the limit; the rest is kept for requests of open sessions.
func TestAcquireNewLeavesRoomForOpenSessions(t *testing.T) {
	l := New(Config{MinLimit: 100, MaxLimit: 100})
	n := 0
	for l.AcquireNew() {
		n++
	}
	m := 0
	for l.Acquire() {
		m++
	}
	if n != 80 || m != 20 {
		t.Errorf("AcquireNew admitted %d, then Acquire %d; want 80 and 20", n, m)
	}
}

// TestAcquireReleaseIsNeverShed: with the limit reached, a release is
// still admitted and counted in flight, so that other work is shed.
func TestAcquireReleaseIsNeverShed(t *testing.T) {
	l := New(Config{MinLimit: 16, MaxLimit: 16})
	for l.Acquire() {
	}
	for range 10 {
		l.AcquireRelease()
	}
	if st := l.Stats(); st.InFlight != 26 || st.Admitted != 26 {
		t.Fatalf("after 16 admitted and 10 releases: %+v", st)
	}
	for range 26 {
		l.Done(time.Millisecond, true)
	}
	if !l.Acquire() {
		t.Fatal("not admitted after every release was done")
	}
}

// window runs one window on l: n requests admitted (n < 0: as many as
// the limit takes, the last one refused), all done with latency lat,
// Window of time, and the window closed. It returns the limit after it.
func window(l *Limiter, c *fakeClock, n int, lat time.Duration) int64 {
	k := 0
	for (n < 0 || k < n) && l.Acquire() {
		k++
	}
	for range k {
		l.Done(lat, true)
	}
	c.add(l.cfg.Window)
	l.update()
	return l.Stats().Limit
}

// TestShrinkNeedsAStandingDelay: a delay above the target shrinks the
// limit only once it has lasted Interval (two windows of 100 ms here),
// then every window while it stays above; one slow window (a stall) does
// nothing.
func TestShrinkNeedsAStandingDelay(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(Config{InitialLimit: 400, MaxLimit: 400, MinSamples: 1, Now: c.now})
	for range 5 {
		window(l, c, -1, time.Millisecond)
	}
	if got := window(l, c, -1, 50*time.Millisecond); got != 400 {
		t.Fatalf("limit %d after one window above the target, want 400 unchanged", got)
	}
	if got := window(l, c, -1, time.Millisecond); got != 400 {
		t.Fatalf("limit %d after a window back under the target, want 400", got)
	}
	if got := window(l, c, -1, 50*time.Millisecond); got != 400 {
		t.Fatalf("limit %d after one window above the target, want 400 unchanged", got)
	}
	if got := window(l, c, -1, 10*time.Millisecond); got != 200 {
		t.Errorf("limit %d after 200 ms at 10 ms, want 400 x max(0.5, 5/10) = 200", got)
	}
	if got := window(l, c, -1, 6250*time.Microsecond); got < 150 || got > 170 {
		t.Errorf("limit %d after a third window at 6.25 ms, want about 200 x 5/6.25 = 160", got)
	}
}

// TestNoShrinkWhenTheLimitDoesNotBind: a slow core at a concurrency far
// below the limit (no refusal, less than half of it in use) leaves the
// limit alone: it is not what queues.
func TestNoShrinkWhenTheLimitDoesNotBind(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(Config{InitialLimit: 400, MaxLimit: 400, MinSamples: 1, Now: c.now})
	for range 5 {
		window(l, c, 100, time.Millisecond)
	}
	for range 20 {
		// 100 in flight, 50 ms each, in a 100 ms window: 50 on average.
		if got := window(l, c, 100, 50*time.Millisecond); got != 400 {
			t.Fatalf("limit %d at 100 in flight of 400, want 400", got)
		}
	}
	// The same delay with the limit reached: it shrinks.
	window(l, c, -1, 50*time.Millisecond)
	if got := window(l, c, -1, 50*time.Millisecond); got >= 400 {
		t.Errorf("limit %d with the limit reached at 50 ms, want it shrunk", got)
	}
}

// TestThresholdFollowsTolerance: with an unloaded delay above Target/
// Tolerance, the threshold is Tolerance times it.
func TestThresholdFollowsTolerance(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(Config{InitialLimit: 100, MaxLimit: 100, MinSamples: 1, Now: c.now})
	for range 5 {
		window(l, c, 10, 8*time.Millisecond)
	}
	st := l.Stats()
	if st.Limit != 100 || st.ThresholdMs < 15 || st.ThresholdMs > 17 || st.DelayMs < 7.5 || st.DelayMs > 8.5 {
		t.Errorf("at a steady 8 ms: %+v, want limit 100, delay 8 ms and threshold 16 ms", st)
	}
}

// TestBuckets: every latency falls in a bucket whose middle is within
// 7% of it.
func TestBuckets(t *testing.T) {
	for ns := int64(1 << minExp); ns < 1<<maxExp; ns = ns*9/8 + 7 {
		v := bucketValue(bucketOf(ns))
		if d := v/float64(ns) - 1; d > 0.07 || d < -0.07 {
			t.Fatalf("latency %d ns: bucket %d value %.0f, %.1f%% off", ns, bucketOf(ns), v, 100*d)
		}
	}
	if bucketOf(0) != 0 || bucketOf(-5) != 0 || bucketOf(1<<62) != nBuckets-1 {
		t.Error("out-of-range latencies not in the end buckets")
	}
}
