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

// service is a simulated server with capacity requests served at once in
// svc each; beyond that they queue. Its latency for a concurrency n is
// svc * max(1, n/capacity) (Little's law).
type service struct {
	capacity int
	svc      time.Duration
}

func (s service) latency(n int64) time.Duration {
	if n <= int64(s.capacity) {
		return s.svc
	}
	return time.Duration(float64(s.svc) * float64(n) / float64(s.capacity))
}

// drive offers `offered` concurrent requests per step for steps windows
// and returns the admitted share of the last quarter and the mean latency
// of the admitted requests then.
func drive(l *Limiter, c *fakeClock, s service, offered, steps int) (admitted float64, meanLat time.Duration) {
	var adm, tot int
	var lat time.Duration
	for i := 0; i < steps; i++ {
		n := 0
		for j := 0; j < offered; j++ {
			if l.Acquire() {
				n++
			}
		}
		d := s.latency(int64(n))
		c.add(l.cfg.Window)
		for j := 0; j < n; j++ {
			l.Done(d, true)
		}
		if i >= steps*3/4 {
			adm += n
			tot += offered
			lat += d * time.Duration(n)
		}
	}
	if adm == 0 {
		return 0, 0
	}
	return float64(adm) / float64(tot), lat / time.Duration(adm)
}

// TestLimiterShedsOverloadAndRecovers: offered 4x what the service
// serves without queueing, the limit converges near its capacity, so the
// admitted requests' latency stays within the tolerance of the unloaded
// one instead of growing with the offered load; when the load falls
// back under capacity, everything is admitted again within a few
// windows.
func TestLimiterShedsOverloadAndRecovers(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(Config{MinLimit: 4, MaxLimit: 4096, InitialLimit: 512, Tolerance: 2, MinSamples: 1, Now: c.now})
	s := service{capacity: 100, svc: 2 * time.Millisecond}

	// Warm up at half the capacity: latency is the unloaded one.
	if share, lat := drive(l, c, s, 50, 200); share != 1 || lat != s.svc {
		t.Fatalf("under capacity: admitted %.2f latency %s, want all at %s", share, lat, s.svc)
	}
	// 4x the capacity offered, every window.
	share, lat := drive(l, c, s, 400, 400)
	st := l.Stats()
	if share > 0.6 || share < 0.1 {
		t.Errorf("overload: admitted share %.2f (limit %d), want about the capacity's 0.25", share, st.Limit)
	}
	if lat > 3*s.svc {
		t.Errorf("overload: admitted latency %s, want at most 3x the unloaded %s (without the limit: %s)", lat, s.svc, s.latency(400))
	}
	if st.Rejected == 0 || st.Limit > 400 {
		t.Errorf("overload: %+v", st)
	}
	// Load back to half the capacity: all admitted within 20 windows.
	if share, _ := drive(l, c, s, 50, 20); share != 1 {
		t.Errorf("after overload: admitted share %.2f, want 1 (limit %d)", share, l.Stats().Limit)
	}
	if l.Stats().InFlight != 0 {
		t.Errorf("in flight %d after every request ended", l.Stats().InFlight)
	}
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
