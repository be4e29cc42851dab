// Package admission decides, per request and without queueing, whether
// the CGW takes a request on or sheds it: an adaptive concurrency limit
// driven by the queueing delay it measures, in the manner of CoDel (a
// delay target held over an interval) applied to a concurrency limit as
// Netflix's concurrency-limits and Envoy's adaptive concurrency filter do.
//
// The limit is the number of requests allowed in flight at once. Every
// admitted request reports its latency on Done. Once per window (at least
// MinSamples completions and Window of time) the limiter takes the
// window's delay: a low quantile (the 10th percentile) of the latencies
// of the requests that completed in it. A low quantile, not the mean,
// because it tells a standing queue from everything else: while the core
// keeps up, some requests always get through at the service's own speed
// (they find no batch ahead of them), however much batching, a GC pause
// or a busy neighbour stretch the others; once requests queue behind the
// core, every request waits, the fastest included (CoDel's insight, with
// the minimum sojourn time over an interval). It compares the delay with
//
//	threshold = max(Target, Tolerance * long)
//
// Target is the delay the operator accepts (default 5 ms); long is the
// lowest delay of the lightly loaded windows (no refusal, less than an
// eighth of the limit in use), creeping up
// slowly (the latency of the service when it does not queue), so that a
// deployment whose unloaded latency is above Target is not shed to
// MinLimit.
//
//   - delay <= threshold: the core keeps up. When the limit binds (a request
//     was refused in the window, or half the limit was in use on average)
//     it grows by the headroom the delay shows, smoothed:
//     limit *= 1 + Smoothing*(min(2, threshold/delay) - 1), plus
//     Smoothing*sqrt(limit) to probe. When it does not bind, an unused limit
//     says nothing about capacity: it returns towards InitialLimit (by
//     1+Smoothing per window) if it is below, so that a limit left low by
//     an overload does not shed the bursts of normal load afterwards. Growth
//     is slow (x1.1 per window by default: from a tenth of InitialLimit back
//     to it in about 2.5 s) because near the capacity a burst that fills a
//     large limit drains slowly: every stall of the machine would then
//     leave a standing queue of InitialLimit requests.
//   - delay > threshold since Interval (default 200 ms) and the limit binds:
//     a standing queue. limit *= max(0.25, threshold/delay) at once, every
//     window while the delay stays above (by Little's law, at the same
//     throughput that concurrency gives a delay of threshold). A burst
//     shorter than Interval (a stall of the machine, a GC pause) sheds
//     nothing, and neither does a slow core at a concurrency far below the
//     limit (the limit is not what queues there).
//
// So under overload the delay of admitted requests is held near the
// threshold: their latency is about Target plus the service's own spread
// at that load, whatever is offered, and throughput stays at what the
// core carries at that delay. A request beyond the limit is rejected at
// once: the caller answers it 503 with Retry-After (Nchf) or
// DIAMETER_TOO_BUSY 3004 (Gy). The limit lives between MinLimit and
// MaxLimit, so memory is bounded by MaxLimit requests whatever is offered.
// When the overload ends the delay drops, and the limit is back at
// InitialLimit within a few seconds (TestQueueingOverloadShrinksAndRecovers).
//
// Why not the gradient against the lowest latency seen (Gradient2, this
// package's previous rule: shrink when the mean latency exceeds Tolerance
// times its minimum): latency rises with load without any queueing,
// since every hop batches and a batch carries more as the rate grows.
// With Tolerance 2 the limit settled where latency had doubled, far below
// what the CPU carries, with part of the CPU idle
// (TestBatchingCollapse reproduces it; figures in
// docs/measurements/2026-12-02-cgw-admission.md).
//
// Acquire and Done are lock-free and allocate nothing (atomics and a
// fixed histogram); the window update takes a mutex once per window. A
// Limiter is safe for concurrent use.
package admission

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Limiter. Zero values pick the defaults.
type Config struct {
	// MinLimit and MaxLimit bound the limit (defaults 16 and 4096);
	// InitialLimit is where it starts and where it returns to when load
	// is light (default 256).
	MinLimit, MaxLimit, InitialLimit int
	// Target is the window delay (10th percentile latency) above which
	// the limit shrinks (default 5ms).
	Target time.Duration
	// Interval is how long the delay must stay above the threshold before
	// the limit shrinks (default 200ms; negative: at the first window
	// above it).
	Interval time.Duration
	// Tolerance: the threshold is at least Tolerance times the lowest
	// window delay seen (default 2).
	Tolerance float64
	// Smoothing weighs the growth of the limit (default 0.1: at most
	// x1.1 per window; 1 = grow by the whole headroom at once).
	Smoothing float64
	// Window is the shortest time between limit updates (default 100ms);
	// MinSamples the fewest completions a window needs (default 50).
	Window     time.Duration
	MinSamples int
	// LongWindow sets how fast the lowest delay may creep up: by a factor
	// of 2 in about 7*LongWindow windows (default 1000: 70 s at 100 ms).
	LongWindow int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// delayQuantile is the quantile of a window's latencies taken as its delay.
const delayQuantile = 0.1

// The latency histogram: 8 buckets per power of two (±6%) from 1 µs to
// 69 s, one more below and one above.
const (
	subBits  = 3
	minExp   = 10 // 2^10 ns, about 1 µs
	maxExp   = 36 // 2^36 ns, about 69 s
	nBuckets = (maxExp-minExp)<<subBits + 2
)

// bucketOf is the histogram bucket of a latency of ns nanoseconds.
func bucketOf(ns int64) int {
	if ns < 1<<minExp {
		return 0
	}
	e := bits.Len64(uint64(ns)) - 1
	if e >= maxExp {
		return nBuckets - 1
	}
	m := int(ns>>(e-subBits)) & (1<<subBits - 1)
	return (e-minExp)<<subBits + m + 1
}

// bucketValue is the middle of bucket i, in nanoseconds.
func bucketValue(i int) float64 {
	switch {
	case i <= 0:
		return 1 << minExp / 2
	case i >= nBuckets-1:
		return 1 << maxExp
	}
	i--
	e, m := i>>subBits+minExp, i&(1<<subBits-1)
	width := int64(1) << (e - subBits)
	return float64(int64(1<<subBits+m)*width) + float64(width)/2
}

// Limiter is an adaptive concurrency limit. The zero value is not usable;
// call New.
type Limiter struct {
	cfg      Config
	limit    atomic.Int64 // current limit, rounded
	inflight atomic.Int64
	admitted atomic.Uint64
	rejected atomic.Uint64

	// the window being filled
	sumNs   atomic.Int64
	samples atomic.Int64
	hist    [nBuckets]atomic.Int64

	mu           sync.Mutex
	winStart     time.Time
	aboveSince   time.Time // start of the first window of a run above the threshold; zero when below
	limitF       float64
	long         float64 // ns
	lastRejected uint64
	// the last window, for Stats
	lastDelay, lastMean, lastThreshold atomic.Int64 // ns
}

// New returns a Limiter for cfg.
func New(cfg Config) *Limiter {
	if cfg.MinLimit <= 0 {
		cfg.MinLimit = 16
	}
	if cfg.MaxLimit <= 0 {
		cfg.MaxLimit = 4096
	}
	if cfg.MaxLimit < cfg.MinLimit {
		cfg.MaxLimit = cfg.MinLimit
	}
	if cfg.InitialLimit <= 0 {
		cfg.InitialLimit = 256
	}
	cfg.InitialLimit = min(max(cfg.InitialLimit, cfg.MinLimit), cfg.MaxLimit)
	if cfg.Target <= 0 {
		cfg.Target = 5 * time.Millisecond
	}
	switch {
	case cfg.Interval == 0:
		cfg.Interval = 200 * time.Millisecond
	case cfg.Interval < 0:
		cfg.Interval = 0
	}
	if cfg.Tolerance < 1 {
		cfg.Tolerance = 2
	}
	if cfg.Smoothing <= 0 || cfg.Smoothing > 1 {
		cfg.Smoothing = 0.1
	}
	if cfg.Window <= 0 {
		cfg.Window = 100 * time.Millisecond
	}
	if cfg.MinSamples <= 0 {
		cfg.MinSamples = 50
	}
	if cfg.LongWindow <= 0 {
		cfg.LongWindow = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Limiter{cfg: cfg, limitF: float64(cfg.InitialLimit), winStart: cfg.Now()}
	l.limit.Store(int64(cfg.InitialLimit))
	return l
}

// Acquire admits a request when fewer than the limit are in flight, and
// returns false (the request must be shed, and Done not called)
// otherwise. An admitted request must call Done exactly once.
func (l *Limiter) Acquire() bool {
	if l.inflight.Add(1) > l.limit.Load() {
		l.inflight.Add(-1)
		l.rejected.Add(1)
		return false
	}
	l.admitted.Add(1)
	return true
}

// AcquireNew is Acquire for work that opens something new (a session
// create, an event, a balance inquiry): it is admitted only below
// NewShare of the limit, so that under overload the requests of sessions
// already open (updates and releases, which hold reservations) are
// served first and new sessions are shed first.
func (l *Limiter) AcquireNew() bool {
	lim := l.limit.Load()
	if l.inflight.Add(1) > lim-lim/newReserve {
		l.inflight.Add(-1)
		l.rejected.Add(1)
		return false
	}
	l.admitted.Add(1)
	return true
}

// AcquireRelease admits work that frees what the service holds (a
// session release, a CCR-T): always, so that no reservation of a shed
// release stays held until it expires. It is counted in flight (its
// latency feeds the limit), so that other work is shed sooner instead.
// The caller bounds it by its own hard cap. Done must be called.
func (l *Limiter) AcquireRelease() {
	l.inflight.Add(1)
	l.admitted.Add(1)
}

// newReserve: AcquireNew leaves 1/newReserve of the limit to Acquire.
const newReserve = 5

// Done ends an admitted request that took latency. sample false leaves
// the latency out of the limit (a request that failed before reaching
// the core says nothing about its queueing).
func (l *Limiter) Done(latency time.Duration, sample bool) {
	l.inflight.Add(-1)
	if !sample {
		return
	}
	l.sumNs.Add(int64(latency))
	l.hist[bucketOf(int64(latency))].Add(1)
	// Past MinSamples, look at the clock every 8 completions only.
	if n := l.samples.Add(1); n >= int64(l.cfg.MinSamples) && (n == int64(l.cfg.MinSamples) || n&7 == 0) {
		l.update()
	}
}

// update closes the window when it is old enough.
func (l *Limiter) update() {
	if !l.mu.TryLock() {
		return // another goroutine is updating
	}
	defer l.mu.Unlock()
	now := l.cfg.Now()
	dur := now.Sub(l.winStart)
	if dur < l.cfg.Window {
		return
	}
	start := l.winStart
	l.winStart = now
	l.samples.Store(0)
	sum := l.sumNs.Swap(0)
	var counts [nBuckets]int64
	var n int64
	for i := range l.hist {
		counts[i] = l.hist[i].Swap(0)
		n += counts[i]
	}
	rejected := l.rejected.Load()
	refused := rejected != l.lastRejected
	l.lastRejected = rejected
	if n <= 0 {
		return
	}
	rank := int64(math.Ceil(delayQuantile * float64(n)))
	var delay float64
	for i, c := range counts {
		if rank -= c; rank <= 0 {
			delay = bucketValue(i)
			break
		}
	}
	lim := l.limitF
	// The limit binds when it refused a request in the window or half of
	// it was in use on average (Little's law: the latencies completed in
	// the window over its length).
	avg := float64(sum) / float64(dur)
	binds := refused || avg >= lim/2
	// long is the lowest delay of the lightly loaded windows (no refusal,
	// less than an eighth of the limit in use on average): a service
	// started into an overload, or a queue building up slowly, would
	// otherwise pass for its usual latency. It creeps up by a factor of 2 over
	// about LongWindow*7 windows so that a lasting change of the service
	// (a slower core) is learnt, but never so fast that a sustained
	// overload passes for the usual latency.
	if !refused && avg < lim/8 {
		if l.long == 0 || delay < l.long {
			l.long = delay
		} else {
			l.long *= 1 + 0.1/float64(l.cfg.LongWindow)
		}
	}
	threshold := math.Max(float64(l.cfg.Target), l.cfg.Tolerance*l.long)
	l.lastDelay.Store(int64(delay))
	l.lastMean.Store(sum / n)
	l.lastThreshold.Store(int64(threshold))
	if delay <= threshold {
		l.aboveSince = time.Time{}
		switch {
		case binds:
			g := math.Min(2, threshold/delay)
			lim = lim*(1+l.cfg.Smoothing*(g-1)) + l.cfg.Smoothing*math.Sqrt(lim)
		case lim < float64(l.cfg.InitialLimit):
			lim = math.Min(float64(l.cfg.InitialLimit), lim*(1+l.cfg.Smoothing))
		}
	} else {
		if l.aboveSince.IsZero() {
			l.aboveSince = start
		}
		if binds && now.Sub(l.aboveSince) >= l.cfg.Interval {
			lim *= math.Max(0.25, threshold/delay)
		}
	}
	lim = math.Max(float64(l.cfg.MinLimit), math.Min(float64(l.cfg.MaxLimit), lim))
	l.limitF = lim
	l.limit.Store(int64(lim))
}

// Stats are a Limiter's counters.
type Stats struct {
	Limit, InFlight    int64
	Admitted, Rejected uint64
	// DelayMs, MeanMs and ThresholdMs are the last window's delay (10th
	// percentile latency), mean latency and threshold; LongMs is the
	// lowest window delay seen. In milliseconds.
	DelayMs, MeanMs, ThresholdMs, LongMs float64
}

// Stats returns the current counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	long := l.long
	l.mu.Unlock()
	return Stats{
		Limit: l.limit.Load(), InFlight: l.inflight.Load(),
		Admitted: l.admitted.Load(), Rejected: l.rejected.Load(),
		DelayMs: float64(l.lastDelay.Load()) / 1e6, MeanMs: float64(l.lastMean.Load()) / 1e6,
		ThresholdMs: float64(l.lastThreshold.Load()) / 1e6, LongMs: long / 1e6,
	}
}
