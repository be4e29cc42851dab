// Package admission decides, per request and without queueing, whether
// the CGW takes a request on or sheds it: an adaptive concurrency limit
// driven by the latency it measures, in the manner of Netflix's
// concurrency-limits Gradient2 and Envoy's adaptive concurrency filter.
//
// The limit is the number of requests allowed in flight at once. Every
// admitted request reports its latency on Done; once per window (at least
// MinSamples completions or Window of time) the limiter compares the
// window's mean latency (short) with the lowest window latency seen,
// which creeps up slowly (long, the latency the service has when not
// queueing):
//
//	gradient = clamp(Tolerance * long / short, 0.5, 1)
//	limit    = limit*(1-Smoothing) + (limit*gradient + sqrt(limit))*Smoothing
//
// so the limit grows by about sqrt(limit) per window while latency stays
// at its usual level and shrinks as soon as requests start queueing
// behind the core (short > Tolerance * long). A request beyond the limit
// is rejected at once: the caller answers it 503 with Retry-After (Nchf)
// or DIAMETER_TOO_BUSY 3004 (Gy). The limit lives between MinLimit and
// MaxLimit, so memory is bounded by MaxLimit requests whatever is
// offered. When the overload ends, latency drops, the gradient is 1 and
// the limit climbs back within a few windows.
//
// Acquire and Done are lock-free on the fast path (atomics); the window
// update takes a mutex once per window. A Limiter is safe for concurrent
// use.
package admission

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Limiter. Zero values pick the defaults.
type Config struct {
	// MinLimit and MaxLimit bound the limit (defaults 16 and 4096);
	// InitialLimit is where it starts (default 256).
	MinLimit, MaxLimit, InitialLimit int
	// Tolerance is how much slower than usual (long) a window may be
	// before the limit shrinks (default 2: twice the usual latency).
	Tolerance float64
	// Smoothing weighs each window's new limit (default 0.2).
	Smoothing float64
	// Window is the shortest time between limit updates (default 100ms);
	// MinSamples the fewest completions a window needs (default 50).
	Window     time.Duration
	MinSamples int
	// LongWindow sets how fast the long latency may creep up: by a factor
	// of 2 in about 7*LongWindow windows (default 1000: 70 s at 100 ms).
	LongWindow int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Limiter is an adaptive concurrency limit. The zero value is not usable;
// call New.
//
// The limit adapts only while at least half of it is in use.
type Limiter struct {
	cfg      Config
	limit    atomic.Int64 // current limit, rounded
	inflight atomic.Int64

	// the window being filled
	sumNs   atomic.Int64
	samples atomic.Int64

	mu        sync.Mutex
	winStart  time.Time
	limitF    float64
	long      float64 // ns
	admitted  atomic.Uint64
	rejected  atomic.Uint64
	lastShort atomic.Int64
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
	if cfg.Tolerance < 1 {
		cfg.Tolerance = 2
	}
	if cfg.Smoothing <= 0 || cfg.Smoothing > 1 {
		cfg.Smoothing = 0.2
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
	if l.samples.Add(1) >= int64(l.cfg.MinSamples) {
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
	if now.Sub(l.winStart) < l.cfg.Window {
		return
	}
	n := l.samples.Swap(0)
	sum := l.sumNs.Swap(0)
	l.winStart = now
	if n <= 0 {
		return
	}
	short := float64(sum) / float64(n)
	l.lastShort.Store(int64(short))
	// long is the lowest window latency seen, creeping up by a factor
	// of 2 over about LongWindow*7 windows so that a lasting change of
	// the service (a slower core) is learnt, but never so fast that a
	// sustained overload passes for the usual latency.
	if l.long == 0 || short < l.long {
		l.long = short
	} else {
		l.long *= 1 + 0.1/float64(l.cfg.LongWindow)
	}
	// Adapt only while the limit binds (half of it in use): a latency
	// spike at low concurrency (a pause, a busy neighbour) is no sign
	// that the limit is too high, and an idle service says nothing about
	// what more load would do.
	lim := l.limitF
	if float64(l.inflight.Load()) < lim/2 {
		return
	}
	gradient := math.Max(0.5, math.Min(1, l.cfg.Tolerance*l.long/short))
	next := lim*gradient + math.Sqrt(lim)
	lim = lim*(1-l.cfg.Smoothing) + next*l.cfg.Smoothing
	lim = math.Max(float64(l.cfg.MinLimit), math.Min(float64(l.cfg.MaxLimit), lim))
	l.limitF = lim
	l.limit.Store(int64(lim))
}

// Stats are a Limiter's counters.
type Stats struct {
	Limit, InFlight    int64
	Admitted, Rejected uint64
	// ShortMs and LongMs are the last window's mean latency and the long
	// average, in milliseconds.
	ShortMs, LongMs float64
}

// Stats returns the current counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	long := l.long
	l.mu.Unlock()
	return Stats{
		Limit: l.limit.Load(), InFlight: l.inflight.Load(),
		Admitted: l.admitted.Load(), Rejected: l.rejected.Load(),
		ShortMs: float64(l.lastShort.Load()) / 1e6, LongMs: long / 1e6,
	}
}
