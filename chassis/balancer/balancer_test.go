package balancer

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ ns atomic.Int64 }

func (c *clock) now() int64                  { return c.ns.Load() }
func (c *clock) advance(d time.Duration)     { c.ns.Add(int64(d)) }
func seeded(seed uint64) func(uint64) uint64 { return rand.New(rand.NewPCG(seed, seed)).Uint64N }

func newBalancer(t *testing.T, cfg Config, n int) (*Balancer[int], []*Endpoint[int], *clock) {
	t.Helper()
	clk := &clock{}
	clk.ns.Store(1e9)
	cfg.Now = clk.now
	if cfg.Rand == nil {
		cfg.Rand = seeded(1)
	}
	b, err := New[int](cfg)
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]*Endpoint[int], n)
	for i := range eps {
		eps[i] = NewEndpoint(string(rune('a'+i)), i)
	}
	b.Update(eps)
	return b, eps, clk
}

func pickCounts(t *testing.T, b *Balancer[int], n, calls int) []int {
	t.Helper()
	counts := make([]int, n)
	for i := 0; i < calls; i++ {
		e, err := b.Pick()
		if err != nil {
			t.Fatal(err)
		}
		counts[e.Conn]++
		b.Done(e, true)
	}
	return counts
}

func TestFairness(t *testing.T) {
	for _, policy := range []string{PolicyP2C, PolicyRoundRobin} {
		t.Run(policy, func(t *testing.T) {
			b, _, _ := newBalancer(t, Config{Policy: policy}, 4)
			counts := pickCounts(t, b, 4, 40000)
			for i, c := range counts {
				if math.Abs(float64(c)-10000) > 500 {
					t.Errorf("endpoint %d picked %d times of 40000, want ~10000 (%v)", i, c, counts)
				}
			}
		})
	}
}

// TestP2CPrefersLessLoaded checks outstanding requests steer P2C away from
// a busy endpoint.
func TestP2CPrefersLessLoaded(t *testing.T) {
	b, eps, _ := newBalancer(t, Config{}, 4)
	for i := 0; i < 100; i++ { // endpoint 0 has 100 calls outstanding
		eps[0].outstanding.Add(1)
	}
	counts := pickCounts(t, b, 4, 3000)
	if counts[0] != 0 {
		t.Errorf("busy endpoint picked %d times (%v)", counts[0], counts)
	}
}

func TestEjectionAndRecovery(t *testing.T) {
	var ejected []string
	b, eps, clk := newBalancer(t, Config{ConsecutiveFailures: 3, BaseEjection: time.Second, OnEject: func(a string) { ejected = append(ejected, a) }}, 4)
	fail := func(e *Endpoint[int], n int) {
		for i := 0; i < n; i++ {
			e.outstanding.Add(1)
			b.Done(e, false)
		}
	}
	fail(eps[1], 2)
	b.Done(func() *Endpoint[int] { eps[1].outstanding.Add(1); return eps[1] }(), true) // success resets the count
	fail(eps[1], 2)
	if b.Ejected() != 0 {
		t.Fatalf("ejected after non-consecutive failures")
	}
	fail(eps[1], 1)
	if b.Ejected() != 1 || !eps[1].Ejected() || len(ejected) != 1 || ejected[0] != "b" {
		t.Fatalf("not ejected after 3 consecutive failures (ejected=%d, %v)", b.Ejected(), ejected)
	}
	if c := pickCounts(t, b, 4, 1000); c[1] != 0 {
		t.Fatalf("ejected endpoint picked %d times", c[1])
	}
	clk.advance(1100 * time.Millisecond)
	if c := pickCounts(t, b, 4, 1000); c[1] == 0 || b.Ejected() != 0 {
		t.Fatalf("endpoint not readmitted after its ejection time (%v, ejected=%d)", c, b.Ejected())
	}
	// A second ejection lasts twice as long.
	fail(eps[1], 3)
	clk.advance(1100 * time.Millisecond)
	if c := pickCounts(t, b, 4, 1000); c[1] != 0 {
		t.Fatalf("second ejection ended after one base time")
	}
	clk.advance(time.Second)
	if c := pickCounts(t, b, 4, 1000); c[1] == 0 {
		t.Fatalf("second ejection did not end after two base times")
	}
}

func TestMaxEjectedShare(t *testing.T) {
	b, eps, _ := newBalancer(t, Config{ConsecutiveFailures: 1, MaxEjectedPercent: 50}, 4)
	for _, e := range eps {
		e.outstanding.Add(1)
		b.Done(e, false)
	}
	if b.Ejected() != 2 {
		t.Fatalf("ejected %d of 4 with a 50%% cap", b.Ejected())
	}
}

// TestPanicThreshold: when too few endpoints are healthy, ejection is
// ignored and traffic spreads over all endpoints.
func TestPanicThreshold(t *testing.T) {
	b, eps, _ := newBalancer(t, Config{ConsecutiveFailures: 1, MaxEjectedPercent: 100, PanicThreshold: 50}, 4)
	fail := func(e *Endpoint[int]) { e.outstanding.Add(1); b.Done(e, false) }
	fail(eps[0])
	if c := pickCounts(t, b, 4, 1000); c[0] != 0 {
		t.Fatalf("1 of 4 ejected (above panic threshold): ejected endpoint picked %d times", c[0])
	}
	fail(eps[1])
	fail(eps[2])
	if b.Ejected() != 3 {
		t.Fatalf("ejected = %d, want 3", b.Ejected())
	}
	c := pickCounts(t, b, 4, 4000)
	for i, n := range c {
		if n < 500 {
			t.Errorf("panic mode: endpoint %d picked %d of 4000 (%v)", i, n, c)
		}
	}
}

func TestPickOtherAndEmpty(t *testing.T) {
	b, eps, _ := newBalancer(t, Config{}, 2)
	for i := 0; i < 100; i++ {
		e, _ := b.PickOther(eps[0])
		if e != eps[1] {
			t.Fatalf("PickOther returned the avoided endpoint")
		}
		b.Done(e, true)
	}
	b.Update(nil)
	if _, err := b.Pick(); err != ErrNoEndpoints {
		t.Fatalf("Pick on empty set err = %v", err)
	}
	if _, err := New[int](Config{Policy: "random"}); err == nil {
		t.Fatalf("unknown policy accepted")
	}
}

func BenchmarkPick(b *testing.B) {
	for _, policy := range []string{PolicyP2C, PolicyRoundRobin} {
		b.Run(policy, func(b *testing.B) {
			bal, _ := New[int](Config{Policy: policy})
			eps := make([]*Endpoint[int], 8)
			for i := range eps {
				eps[i] = NewEndpoint("x", i)
			}
			bal.Update(eps)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e, _ := bal.Pick()
					bal.Done(e, true)
				}
			})
		})
	}
}
