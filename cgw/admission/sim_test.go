package admission

import (
	"slices"
	"testing"
	"time"
)

// core is a simulated charging core behind a Limiter, on a fake clock, in
// steps of simStep. Requests arrive at a steady rate; admitted ones queue
// for one server that serves them in batches, as every hop of the CHF
// does (natural batching): a batch leaves when the previous one returns,
// carrying every request that queued meanwhile, up to maxItems, and a
// batch of k takes perBatch + k*perItem. So latency rises with the rate
// although nothing stands in a queue (the batches grow), and beyond the
// capacity (maxItems per perBatch + maxItems*perItem) requests queue.
// With perBatch 0 and maxItems 1 it is a plain queue in front of a server
// of capacity 1/perItem.
type core struct {
	l                 *Limiter
	c                 *fakeClock
	perBatch, perItem time.Duration
	maxItems          int
	// stalled, when set, stops the server while it returns true (a busy
	// machine: nothing is served, nothing returns).
	stalled func(t time.Duration) bool

	t      time.Duration   // simulated time since the start
	queue  []time.Duration // arrival times of the admitted requests waiting
	batch  []time.Duration // arrival times of the batch in flight
	done   time.Duration   // when the batch in flight returns
	credit float64
}

const simStep = 20 * time.Microsecond

// capacity is the most requests per second the core serves.
func (s *core) capacity() float64 {
	return float64(s.maxItems) / (s.perBatch + time.Duration(s.maxItems)*s.perItem).Seconds()
}

// outcome is what a run at one offered rate gave.
type outcome struct {
	offered, admitted, shed int
	lat                     []time.Duration // of the requests completed
	secs                    float64
}

// goodput is the completed requests per second.
func (o outcome) goodput() float64 { return float64(len(o.lat)) / o.secs }

// shedShare is the share of the offered requests refused.
func (o outcome) shedShare() float64 { return float64(o.shed) / float64(o.offered) }

// p returns the q quantile (0..1) of the completed requests' latency.
func (o outcome) p(q float64) time.Duration {
	if len(o.lat) == 0 {
		return 0
	}
	s := slices.Clone(o.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// run offers rate requests per second for d.
func (s *core) run(rate float64, d time.Duration) outcome {
	o := outcome{secs: d.Seconds()}
	for end := s.t + d; s.t < end; {
		s.t += simStep
		s.c.add(simStep)
		stopped := s.stalled != nil && s.stalled(s.t)
		start := s.t // when a batch leaves in this step
		if len(s.batch) > 0 && s.t >= s.done && !stopped {
			start = max(s.done, s.t-simStep) // the server is free since then
			for _, arr := range s.batch {
				lat := s.t - arr
				o.lat = append(o.lat, lat)
				s.l.Done(lat, true)
			}
			s.batch = s.batch[:0]
		}
		for s.credit += rate * simStep.Seconds(); s.credit >= 1; s.credit-- {
			o.offered++
			if s.l.Acquire() {
				o.admitted++
				s.queue = append(s.queue, s.t)
			} else {
				o.shed++
			}
		}
		if len(s.batch) == 0 && len(s.queue) > 0 && !stopped {
			k := min(len(s.queue), s.maxItems)
			s.batch = append(s.batch, s.queue[:k]...)
			s.queue = s.queue[:copy(s.queue, s.queue[k:])]
			s.done = start + s.perBatch + time.Duration(k)*s.perItem
		}
	}
	return o
}

// batchingCore is the shape measured on this machine: latency doubles
// from light load to three quarters of the capacity without a standing
// queue (about 0.55 ms alone, 1.9 ms at 15,000/s), capacity about 20,900/s.
func batchingCore(l *Limiter, c *fakeClock) *core {
	return &core{l: l, c: c, perBatch: 500 * time.Microsecond, perItem: 40 * time.Microsecond, maxItems: 64}
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(0, 0)} }

// cgwConfig is the configuration the CGW gives the limiter (MaxInFlight
// 4096), on clock c.
func cgwConfig(c *fakeClock) Config {
	return Config{MaxLimit: 4096, InitialLimit: 1024, Now: c.now}
}

// TestBatchingCollapse reproduces the previous rule's failure and shows
// the new one keeps goodput at capacity. Offered 1.5x the capacity of a
// batching core, a limiter whose only threshold is Tolerance times the
// lowest delay (Target ~0, the previous gradient rule) shrinks the limit
// where latency has doubled, which batching reaches at about half the
// capacity; with the delay target the limit settles where requests
// queue, and goodput stays at capacity.
func TestBatchingCollapse(t *testing.T) {
	run := func(target time.Duration) (*Limiter, outcome, float64) {
		c := newClock()
		cfg := cgwConfig(c)
		cfg.Target = target
		l := New(cfg)
		s := batchingCore(l, c)
		s.run(0.1*s.capacity(), 2*time.Second) // learn the unloaded latency
		s.run(1.5*s.capacity(), 5*time.Second)
		return l, s.run(1.5*s.capacity(), 10*time.Second), s.capacity()
	}
	l, old, capacity := run(time.Nanosecond)
	if old.goodput() > 0.75*capacity {
		t.Errorf("tolerance only: goodput %.0f/s of a capacity of %.0f/s; the collapse did not reproduce (limit %d)", old.goodput(), capacity, l.Stats().Limit)
	}
	t.Logf("tolerance only: goodput %.0f/s (%.0f%% of capacity), shed %.0f%%, p99 %s, limit %d",
		old.goodput(), 100*old.goodput()/capacity, 100*old.shedShare(), old.p(0.99), l.Stats().Limit)

	l, o, _ := run(5 * time.Millisecond)
	st := l.Stats()
	t.Logf("target 5ms: goodput %.0f/s (%.0f%% of capacity), shed %.0f%%, p10 %s p50 %s p99 %s, %+v",
		o.goodput(), 100*o.goodput()/capacity, 100*o.shedShare(), o.p(0.1), o.p(0.5), o.p(0.99), st)
	if o.goodput() < 0.95*capacity {
		t.Errorf("target 5ms: goodput %.0f/s, want at least 95%% of the capacity %.0f/s", o.goodput(), capacity)
	}
	if p99 := o.p(0.99); p99 > 10*time.Millisecond {
		t.Errorf("target 5ms: admitted p99 %s, want at most twice the target", p99)
	}
	if st.Limit >= 1024 || o.shed == 0 {
		t.Errorf("target 5ms at 1.5x the capacity: limit %d, %d shed; want it shrunk and the excess shed", st.Limit, o.shed)
	}
}

// TestNoShedWhileTheCoreKeepsUp: at rates the batching core carries, up
// to 90% of its capacity where its latency has grown fivefold, nothing
// is shed.
func TestNoShedWhileTheCoreKeepsUp(t *testing.T) {
	c := newClock()
	l := New(cgwConfig(c))
	s := batchingCore(l, c)
	for _, share := range []float64{0.05, 0.3, 0.6, 0.9, 0.3, 0.9} {
		o := s.run(share*s.capacity(), 3*time.Second)
		if o.shed != 0 {
			t.Errorf("at %.0f%% of the capacity: %d shed (p50 %s, limit %d)", 100*share, o.shed, o.p(0.5), l.Stats().Limit)
		}
	}
}

// TestNoShedOnANoisyMachine: at 60% of the capacity, with the server
// stalled for 40 ms every 400 ms and once for 70 ms (a busy neighbour, a
// GC pause), every request waits out the stalls but none is shed, and
// the limit stays where it was. (A stall long enough to pile up
// InitialLimit requests, 80 ms here, sheds whatever the rule.)
func TestNoShedOnANoisyMachine(t *testing.T) {
	c := newClock()
	l := New(cgwConfig(c))
	s := batchingCore(l, c)
	s.stalled = func(t time.Duration) bool {
		return t%(400*time.Millisecond) < 40*time.Millisecond ||
			t > 5*time.Second && t < 5*time.Second+70*time.Millisecond
	}
	o := s.run(0.6*s.capacity(), 10*time.Second)
	if st := l.Stats(); o.shed != 0 || st.Limit < 1024 {
		t.Errorf("%d of %d shed; p99 %s, %+v", o.shed, o.offered, o.p(0.99), st)
	}
	if o.p(0.99) < 40*time.Millisecond {
		t.Errorf("p99 %s: the stalls did not reach the requests", o.p(0.99))
	}
}

// TestQueueingOverloadShrinksAndRecovers: a plain queue in front of a
// server of 20,000/s, offered twice that: the limit shrinks to about
// capacity x Target, the admitted requests wait about the target instead
// of up to InitialLimit / capacity, goodput stays at capacity; when the
// load falls to half the capacity, nothing is shed after the first
// windows and the limit is back at InitialLimit within 3 s.
func TestQueueingOverloadShrinksAndRecovers(t *testing.T) {
	c := newClock()
	l := New(cgwConfig(c))
	s := &core{l: l, c: c, perItem: 50 * time.Microsecond, maxItems: 1}
	capacity := s.capacity()
	if o := s.run(0.5*capacity, 2*time.Second); o.shed != 0 {
		t.Fatalf("at half the capacity: %d shed", o.shed)
	}
	s.run(2*capacity, 2*time.Second)
	o := s.run(2*capacity, 5*time.Second)
	st := l.Stats()
	t.Logf("2x capacity: goodput %.0f/s, shed %.0f%%, p10 %s p50 %s p99 %s, %+v", o.goodput(), 100*o.shedShare(), o.p(0.1), o.p(0.5), o.p(0.99), st)
	if o.goodput() < 0.95*capacity {
		t.Errorf("goodput %.0f/s at twice the capacity %.0f/s, want at least 95%%", o.goodput(), capacity)
	}
	if share := o.shedShare(); share < 0.4 || share > 0.6 {
		t.Errorf("shed share %.2f at twice the capacity, want about half", share)
	}
	// capacity x target = 100 requests in flight
	if st.Limit < 50 || st.Limit > 200 {
		t.Errorf("limit %d at twice the capacity, want about 100 (capacity x target)", st.Limit)
	}
	if p99 := o.p(0.99); p99 > 10*time.Millisecond {
		t.Errorf("admitted p99 %s at twice the capacity, want at most twice the 5ms target (%s without the limit)", p99, time.Duration(float64(time.Second)*1024/capacity))
	}

	after := s.run(0.5*capacity, 300*time.Millisecond)
	if rest := s.run(0.5*capacity, 2700*time.Millisecond); rest.shed != 0 {
		t.Errorf("after the overload: %d shed past the first 300 ms (%d in them)", rest.shed, after.shed)
	}
	if got := l.Stats().Limit; got < 1024 {
		t.Errorf("limit %d 3 s after the overload, want back at InitialLimit 1024", got)
	}
	if l.Stats().InFlight != int64(len(s.queue)+len(s.batch)) {
		t.Errorf("in flight %d, want %d", l.Stats().InFlight, len(s.queue)+len(s.batch))
	}
}

// TestBatchingOverloadRecovers: at twice a batching core's capacity and
// back, the limit is at InitialLimit again within 3 s and nothing is shed
// after the first windows.
func TestBatchingOverloadRecovers(t *testing.T) {
	c := newClock()
	l := New(cgwConfig(c))
	s := batchingCore(l, c)
	o := s.run(2*s.capacity(), 5*time.Second)
	if o.shed == 0 || l.Stats().Limit >= 1024 {
		t.Fatalf("at twice the capacity: %d shed, limit %d; want the limit shrunk", o.shed, l.Stats().Limit)
	}
	s.run(0.5*s.capacity(), 300*time.Millisecond)
	if rest := s.run(0.5*s.capacity(), 2700*time.Millisecond); rest.shed != 0 {
		t.Errorf("after the overload: %d shed past the first 300 ms", rest.shed)
	}
	if got := l.Stats().Limit; got < 1024 {
		t.Errorf("limit %d 3 s after the overload, want back at InitialLimit 1024", got)
	}
}

// TestSlowDeploymentNotShedToMinimum: a core whose unloaded latency (8
// ms, a remote store) is above Target is not shed at a rate it carries
// with the limit bound (half of it in use): the threshold follows
// Tolerance times its lowest delay.
func TestSlowDeploymentNotShedToMinimum(t *testing.T) {
	c := newClock()
	l := New(cgwConfig(c))
	s := &core{l: l, c: c, perBatch: 8 * time.Millisecond, perItem: 2 * time.Microsecond, maxItems: 4096}
	s.run(1000, time.Second)
	// 50,000/s: batches of about 450 in 9 ms, 650 in flight.
	o := s.run(50000, 5*time.Second)
	if o.shed != 0 {
		t.Errorf("%d of %d shed at 50,000/s (p10 %s), %+v", o.shed, o.offered, o.p(0.1), l.Stats())
	}
	if st := l.Stats(); st.ThresholdMs < 10 {
		t.Errorf("threshold %.1f ms, want Tolerance x the unloaded 8 ms", st.ThresholdMs)
	}
}

// TestOverloadWithStalls: a batching core stalled 30 ms every 700 ms,
// started straight into an overload (no light load to learn from first)
// at its capacity and at 1.5 times it. Goodput stays at capacity, the
// admitted requests' median stays near the target, and their p99 is the
// target plus the stalls, not the queue a limit of InitialLimit would
// hold (p50 60-75 ms when the lowest delay was learnt from any window).
func TestOverloadWithStalls(t *testing.T) {
	for _, share := range []float64{1, 1.5} {
		c := newClock()
		l := New(cgwConfig(c))
		s := batchingCore(l, c)
		s.stalled = func(t time.Duration) bool { return t%(700*time.Millisecond) < 30*time.Millisecond }
		s.run(share*s.capacity(), 3*time.Second)
		o := s.run(share*s.capacity(), 10*time.Second)
		st := l.Stats()
		t.Logf("%.1fx capacity: goodput %.0f/s (%.0f%%), shed %.1f%%, p50 %s p99 %s, %+v", share, o.goodput(), 100*o.goodput()/s.capacity(), 100*o.shedShare(), o.p(0.5), o.p(0.99), st)
		if o.goodput() < 0.9*s.capacity() {
			t.Errorf("%.1fx capacity: goodput %.0f/s, want at least 90%% of %.0f/s", share, o.goodput(), s.capacity())
		}
		if p50, p99 := o.p(0.5), o.p(0.99); p50 > 10*time.Millisecond || p99 > 50*time.Millisecond {
			t.Errorf("%.1fx capacity: admitted p50 %s p99 %s, want at most 10 and 50 ms", share, p50, p99)
		}
	}
}
