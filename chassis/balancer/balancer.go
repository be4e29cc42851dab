// Package balancer picks one endpoint of a peer service per call.
//
// A Balancer holds an immutable snapshot of endpoints published with Update
// and read by Pick without locks. Policies are chosen by name:
//
//   - "p2c" (default): power of two choices on outstanding requests;
//   - "round_robin": strict rotation.
//
// Passive outlier ejection removes an endpoint from picking after a number of
// consecutive failures, for a time that grows with each ejection. At most a
// configured share of endpoints is ejected at once, and when the healthy
// share falls below the panic threshold the balancer picks over all
// endpoints, ejected or not.
package balancer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Policy names accepted by Config.Policy.
const (
	PolicyP2C        = "p2c"
	PolicyRoundRobin = "round_robin"
)

// ErrNoEndpoints is returned by Pick when the snapshot is empty.
var ErrNoEndpoints = errors.New("balancer: no endpoints")

// Config configures a Balancer. The zero value is usable: p2c, ejection
// after 5 consecutive failures for 5s (growing to 60s), at most 50% of
// endpoints ejected, panic threshold 50%.
type Config struct {
	// Policy is "p2c" (default) or "round_robin".
	Policy string
	// ConsecutiveFailures ejects an endpoint after that many failed calls in a
	// row (default 5; negative disables ejection).
	ConsecutiveFailures int
	// BaseEjection is the first ejection time; the n-th ejection in a row
	// lasts n times as long, up to MaxEjection (defaults 5s, 60s). An
	// endpoint that stays in rotation for MaxEjection starts over at 1.
	BaseEjection time.Duration
	MaxEjection  time.Duration
	// MaxEjectedPercent caps the share of endpoints ejected at once
	// (default 50; at least one endpoint can always be ejected).
	MaxEjectedPercent int
	// PanicThreshold: when fewer than this percentage of endpoints are
	// healthy, ejection is ignored and all endpoints are picked from
	// (default 50; negative disables panic mode).
	PanicThreshold int
	// Now returns the current time in Unix nanoseconds (tests inject a
	// clock); default time.Now.
	Now func() int64
	// Rand returns a uniform number in [0, n) (tests inject it); default
	// math/rand/v2.
	Rand func(n uint64) uint64
	// OnEject, if set, is called (synchronously, keep it cheap) when an
	// endpoint is ejected.
	OnEject func(addr string)
}

// Endpoint is one pickable endpoint carrying a connection value of type T
// (for example a connection pool). Its counters persist across snapshots as
// long as the caller passes the same *Endpoint to Update.
type Endpoint[T any] struct {
	Addr string
	Conn T

	outstanding  atomic.Int64
	consecFail   atomic.Int32
	ejections    atomic.Int32 // consecutive ejections, for back-off
	ejectedUntil atomic.Int64 // Unix ns; 0 = in rotation
	readmitted   atomic.Int64 // Unix ns of the last readmission
}

// NewEndpoint returns an endpoint for addr carrying conn.
func NewEndpoint[T any](addr string, conn T) *Endpoint[T] {
	return &Endpoint[T]{Addr: addr, Conn: conn}
}

// Outstanding returns the number of calls in progress on the endpoint.
func (e *Endpoint[T]) Outstanding() int64 { return e.outstanding.Load() }

// Ejected reports whether the endpoint is currently out of rotation.
func (e *Endpoint[T]) Ejected() bool { return e.ejectedUntil.Load() != 0 }

type snapshot[T any] struct {
	eps []*Endpoint[T]
}

// Balancer picks endpoints. All methods are safe for concurrent use; Pick
// and Done never block and do not allocate.
type Balancer[T any] struct {
	cfg     Config
	rr      bool
	snap    atomic.Pointer[snapshot[T]]
	ejected atomic.Int32 // endpoints of the current snapshot ejected
	next    atomic.Uint64
}

// New returns a Balancer for cfg.
func New[T any](cfg Config) (*Balancer[T], error) {
	b := &Balancer[T]{cfg: cfg}
	switch cfg.Policy {
	case "", PolicyP2C:
	case PolicyRoundRobin:
		b.rr = true
	default:
		return nil, fmt.Errorf("balancer: unknown policy %q (want %q or %q)", cfg.Policy, PolicyP2C, PolicyRoundRobin)
	}
	if b.cfg.ConsecutiveFailures == 0 {
		b.cfg.ConsecutiveFailures = 5
	}
	if b.cfg.BaseEjection <= 0 {
		b.cfg.BaseEjection = 5 * time.Second
	}
	if b.cfg.MaxEjection <= 0 {
		b.cfg.MaxEjection = 60 * time.Second
	}
	if b.cfg.MaxEjectedPercent == 0 {
		b.cfg.MaxEjectedPercent = 50
	}
	if b.cfg.PanicThreshold == 0 {
		b.cfg.PanicThreshold = 50
	}
	if b.cfg.Now == nil {
		b.cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if b.cfg.Rand == nil {
		b.cfg.Rand = rand.Uint64N
	}
	b.snap.Store(&snapshot[T]{})
	return b, nil
}

// Update publishes a new endpoint set. eps must not be modified afterwards.
// Endpoints kept from the previous set keep their counters and ejection
// state. Update must not be called concurrently with itself.
func (b *Balancer[T]) Update(eps []*Endpoint[T]) {
	var n int32
	for _, e := range eps {
		if e.ejectedUntil.Load() != 0 {
			n++
		}
	}
	b.snap.Store(&snapshot[T]{eps: eps})
	b.ejected.Store(n)
}

// Endpoints returns the current snapshot (read only).
func (b *Balancer[T]) Endpoints() []*Endpoint[T] { return b.snap.Load().eps }

// Pick returns an endpoint and counts a call on it as outstanding; the
// caller must call Done exactly once with the outcome.
func (b *Balancer[T]) Pick() (*Endpoint[T], error) {
	return b.PickOther(nil)
}

// PickOther is Pick avoiding the endpoint avoid (the one a call just failed
// on) when another one is available.
func (b *Balancer[T]) PickOther(avoid *Endpoint[T]) (*Endpoint[T], error) {
	eps := b.snap.Load().eps
	n := len(eps)
	if n == 0 {
		return nil, ErrNoEndpoints
	}
	var e *Endpoint[T]
	if n == 1 {
		e = eps[0]
	} else {
		skip := false
		if ej := b.ejected.Load(); ej > 0 {
			skip = b.readmit(eps)
		}
		if b.rr {
			e = b.pickRR(eps, skip)
		} else {
			e = b.pickP2C(eps, skip)
		}
		if e == avoid {
			e = nextAfter(eps, avoid, skip)
		}
	}
	e.outstanding.Add(1)
	return e, nil
}

// nextAfter returns the endpoint after avoid in eps (skipping ejected ones
// when skip), or avoid when there is none.
func nextAfter[T any](eps []*Endpoint[T], avoid *Endpoint[T], skip bool) *Endpoint[T] {
	i := 0
	for i < len(eps) && eps[i] != avoid {
		i++
	}
	for k := 1; k < len(eps); k++ {
		if e := eps[(i+k)%len(eps)]; !skip || e.ejectedUntil.Load() == 0 {
			return e
		}
	}
	return avoid
}

// readmit returns endpoints whose ejection has expired to rotation and
// reports whether ejected endpoints must be skipped (false in panic mode).
func (b *Balancer[T]) readmit(eps []*Endpoint[T]) bool {
	now := b.cfg.Now()
	for _, e := range eps {
		if u := e.ejectedUntil.Load(); u != 0 && now >= u && e.ejectedUntil.CompareAndSwap(u, 0) {
			e.consecFail.Store(0)
			e.readmitted.Store(now)
			b.ejected.Add(-1)
		}
	}
	ej := int(b.ejected.Load())
	if ej <= 0 {
		return false
	}
	healthy := len(eps) - ej
	if b.cfg.PanicThreshold > 0 && healthy*100 < len(eps)*b.cfg.PanicThreshold {
		return false // panic: balance over all endpoints
	}
	return healthy > 0
}

func (b *Balancer[T]) pickRR(eps []*Endpoint[T], skip bool) *Endpoint[T] {
	n := uint64(len(eps))
	i := b.next.Add(1) - 1
	if !skip {
		return eps[i%n]
	}
	for k := uint64(0); k < n; k++ {
		if e := eps[(i+k)%n]; e.ejectedUntil.Load() == 0 {
			if k > 0 {
				b.next.Add(k)
			}
			return e
		}
	}
	return eps[i%n]
}

func (b *Balancer[T]) pickP2C(eps []*Endpoint[T], skip bool) *Endpoint[T] {
	n := uint64(len(eps))
	i := b.cfg.Rand(n)
	j := b.cfg.Rand(n - 1)
	if j >= i {
		j++
	}
	a, c := eps[i], eps[j]
	if skip {
		aOK, cOK := a.ejectedUntil.Load() == 0, c.ejectedUntil.Load() == 0
		switch {
		case aOK && !cOK:
			return a
		case cOK && !aOK:
			return c
		case !aOK && !cOK:
			for k := uint64(0); k < n; k++ {
				if e := eps[(i+k)%n]; e.ejectedUntil.Load() == 0 {
					return e
				}
			}
			return a
		}
	}
	if c.outstanding.Load() < a.outstanding.Load() {
		return c
	}
	return a
}

// Done ends a call started by Pick. ok=false counts a failure towards
// ejection (connection errors, timeouts, 5xx); ok=true resets the count.
func (b *Balancer[T]) Done(e *Endpoint[T], ok bool) {
	e.outstanding.Add(-1)
	if ok {
		if e.consecFail.Load() != 0 {
			e.consecFail.Store(0)
		}
		return
	}
	if b.cfg.ConsecutiveFailures < 0 {
		return
	}
	if int(e.consecFail.Add(1)) < b.cfg.ConsecutiveFailures {
		return
	}
	b.eject(e)
}

func (b *Balancer[T]) eject(e *Endpoint[T]) {
	if e.ejectedUntil.Load() != 0 {
		return
	}
	eps := b.snap.Load().eps
	limit := len(eps) * b.cfg.MaxEjectedPercent / 100
	if limit < 1 {
		limit = 1
	}
	if int(b.ejected.Load()) >= limit {
		return
	}
	now := b.cfg.Now()
	if r := e.readmitted.Load(); r != 0 && now-r > int64(b.cfg.MaxEjection) {
		e.ejections.Store(0) // healthy long enough: back-off starts over
	}
	k := time.Duration(e.ejections.Add(1))
	d := b.cfg.BaseEjection * k
	if d > b.cfg.MaxEjection || d <= 0 {
		d = b.cfg.MaxEjection
	}
	if !e.ejectedUntil.CompareAndSwap(0, now+int64(d)) {
		return
	}
	e.consecFail.Store(0)
	b.ejected.Add(1)
	if b.cfg.OnEject != nil {
		b.cfg.OnEject(e.Addr)
	}
}

// Ejected returns the number of endpoints currently ejected.
func (b *Balancer[T]) Ejected() int { return int(b.ejected.Load()) }
