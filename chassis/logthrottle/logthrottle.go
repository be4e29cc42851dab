// Package logthrottle bounds the log lines written on a hot path: at most
// one line per interval for each kind of event, with the count of events
// since the last line.
package logthrottle

import (
	"sync"
	"sync/atomic"
	"time"
)

// Throttle bounds log lines written on a hot path: at most one line per
// interval for each kind of event, carrying how many events of that kind
// happened since the previous line. Allow costs one map lookup and two
// atomic operations and does not allocate once a kind has been seen. Safe
// for concurrent use.
//
//	if n, ok := t.Allow("charging core failed: pool exhausted"); ok {
//		log.Warn("charging core failed", "err", err, "count", n)
//	}
type Throttle struct {
	every time.Duration
	now   func() time.Time
	kinds sync.Map // string → *throttleKind
}

type throttleKind struct {
	next  atomic.Int64  // Unix ns before which lines are suppressed
	count atomic.Uint64 // events since the last line written
}

// New returns a Throttle allowing one line per kind every interval
// (default one second when interval <= 0).
func New(every time.Duration) *Throttle {
	if every <= 0 {
		every = time.Second
	}
	return &Throttle{every: every, now: time.Now}
}

// Allow counts one event of kind and reports whether a line may be written
// now, with the number of events of kind since the last line (this one
// included). Kinds should be few (constant strings or error classes).
func (t *Throttle) Allow(kind string) (count uint64, ok bool) {
	v, found := t.kinds.Load(kind)
	if !found {
		v, _ = t.kinds.LoadOrStore(kind, new(throttleKind))
	}
	k := v.(*throttleKind)
	k.count.Add(1)
	now := t.now().UnixNano()
	next := k.next.Load()
	if now < next || !k.next.CompareAndSwap(next, now+int64(t.every)) {
		return 0, false
	}
	return k.count.Swap(0), true
}
