package chassis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Batch defaults.
const (
	// DefaultBatchInFlight is the most batches in flight per peer
	// operation; how many are allowed at a time adapts between 1 and it
	// (see Batcher). --batch-inflight 1 keeps one batch at a time.
	DefaultBatchInFlight = 4
	DefaultBatchItems    = 64
)

// Parameters of the in-flight limit: a hill climb on the items per
// second the peer carries, each step tried and kept only if it paid.
const (
	// probeGain: limit k is kept over k−1 only if the items per second
	// carried at k reach probeGain times those at k−1. A peer that serves
	// one batch at a time carries no more with a second batch out (it
	// only waits there, and the batches get smaller), so its limit stays
	// at 1; a peer with room carries about k times as much.
	probeGain = 1.1
	// holdMin and holdMax bound the round trips during which a step in
	// the same direction is not tried again after one that did not pay
	// (or, after a step was kept, before the step back is tried); the
	// hold doubles with each step in a row that did not pay.
	holdMin = 128
	holdMax = 16384
)

// rateWindow is how many round trips items per second are measured over
// at a limit, after skipping as many as the limit (batches sent before it
// changed).
func rateWindow(limit int) int { return 16*limit + 32 }

// BatchConfig configures a Batcher.
type BatchConfig struct {
	// MaxInFlight bounds the batches in flight at once; the Batcher
	// allows from 1 up to this many, chosen from the measured round trips
	// (see Batcher). 1 = one batch at a time (the limit does not adapt);
	// 0 = DefaultBatchInFlight; negative = no batching (every call leaves
	// alone, concurrently).
	MaxInFlight int
	// MaxItems bounds the items of one batch (0 = DefaultBatchItems). A
	// single call larger than MaxItems still leaves as one batch.
	MaxItems int
}

// Batcher merges concurrent calls to one peer operation into batches
// ("natural batching"): there is no timer and no added delay when the peer
// keeps up; a call that finds no batch out leaves at once, alone; one that
// finds a batch out waits and shares the next one with every other call
// that queued meanwhile, which leaves when a batch returns — or at once,
// when it is full (MaxItems) and the in-flight limit allows another.
// Under load this turns many small round trips (each a few system calls on
// each side) into one, which is where the CHF's CPU goes.
//
// So only full batches are pipelined: below that, a batch per round trip
// carries everything (the fewest system calls per call, which is where
// the CPU goes), and more in flight would only split it. The limit of
// batches in flight adapts between 1 and MaxInFlight by a hill climb on
// the items per second the peer carries (see inflight): a step up is
// tried while full batches wait here, a step down while none do, and a
// step is kept only if it paid — for a peer that serves one batch at a
// time a second batch out only waits there, so its limit stays at 1.
//
// The caller whose call starts a batch sends it from its own goroutine (no
// hand-off to a sender goroutine); when a batch returns and calls are
// queued, the first queued caller of each next batch is woken to send it.
//
// send must fill in the outcome of every item it is given (in the items
// themselves) before returning; Do returns once its items are done. The
// batch is sent with the context of the call that has the earliest
// deadline. A Batcher is safe for concurrent use; Do and DoMany allocate
// nothing in the steady state.
type Batcher[T any] struct {
	send     func(ctx context.Context, items []T)
	maxLimit int // MaxInFlight
	maxItems int

	mu      sync.Mutex
	queue   []*batchCall[T]
	queued  int          // items in queue
	active  int          // batches out
	limit   int          // batches allowed out, 1..maxLimit
	limitA  atomic.Int32 // limit, for InFlightLimit without the lock
	probe   inflight
	calls   sync.Pool
	scratch sync.Pool // *batchScratch[T]
}

// inflight is the state of the in-flight limit; guarded by Batcher.mu.
//
// The limit is measured in items per second over windows of round trips
// at each limit. After a window at limit k, if full batches were waiting
// here in at least an eighth of its round trips (more out could carry
// them), k+1 is tried; otherwise, if k > 1, k−1 is tried. The window at
// the new limit decides: the step is kept if k+1 carried at least
// probeGain times what k did, or k−1 more than 1/probeGain of it; else the
// limit goes back to k, and the same step is not tried for a hold that
// doubles each time it fails. A step kept starts the hold of the step
// back at holdMin. So a peer that serves one batch at a time keeps 1, a
// peer with room climbs while each added batch pays, and a limit no
// longer needed (demand fell, the peer saturated) comes back down.
type inflight struct {
	n      int       // round trips in the window filling (< 0: skipping)
	start  time.Time // the window's start (the return of its first round trip)
	items  int       // items returned since then
	demand int       // round trips in it that came back with a full batch queued

	probe    int     // the step being tried: +1, −1, or 0 for none
	before   float64 // items/s at the limit the step left
	hold     [2]int  // round trips before a step up [0] or down [1] may be tried
	backoff  [2]int  // the next hold after a failed step up or down (0 = holdMin)
	changes  uint64  // limit changes, for tests
	tried    uint64  // steps tried
	undone   uint64  // steps undone because they did not pay
	lastRate float64 // items/s of the last full window, for tests
}

// sample takes one batch of items that returned at end, with the limit
// now and whether a full batch was queued when it came back, and returns
// the new limit.
func (v *inflight) sample(items int, end time.Time, limit, maxLimit int, demand bool) int {
	for i := range v.hold {
		if v.hold[i] > 0 {
			v.hold[i]--
		}
	}
	switch v.n++; {
	case v.n <= 0: // a batch sent before the limit changed
		return limit
	case v.n == 1:
		v.start, v.items, v.demand = end, 0, 0
		return limit
	}
	v.items += items
	if demand {
		v.demand++
	}
	if v.n <= rateWindow(limit) {
		return limit
	}
	el := end.Sub(v.start)
	if el <= 0 {
		el = 1
	}
	rate := float64(v.items) / el.Seconds()
	v.lastRate = rate
	v.n, v.start, v.items = 1, end, 0
	waiting := v.demand*8 >= rateWindow(limit)
	v.demand = 0
	if p := v.probe; p != 0 {
		v.probe = 0
		dir := 0
		if p < 0 {
			dir = 1
		}
		// k = the larger of the two limits compared.
		var paid bool
		if p > 0 {
			paid = rate >= probeGain*v.before
		} else {
			paid = rate*probeGain > v.before
		}
		if !paid {
			if v.backoff[dir] == 0 {
				v.backoff[dir] = holdMin
			}
			v.hold[dir] = v.backoff[dir]
			v.backoff[dir] = min(2*v.backoff[dir], holdMax)
			v.undone++
			return v.set(limit - p)
		}
		v.backoff[dir] = 0
		v.hold[1-dir] = max(v.hold[1-dir], holdMin)
		return limit
	}
	switch {
	case waiting && limit < maxLimit && v.hold[0] == 0:
		v.probe = 1
	case !waiting && limit > 1 && v.hold[1] == 0:
		v.probe = -1
	default:
		return limit
	}
	v.before = rate
	v.tried++
	return v.set(limit + v.probe)
}

// set changes the limit to l and restarts the measurement at it.
func (v *inflight) set(l int) int {
	v.changes++
	v.n = -l
	return l
}

type batchCall[T any] struct {
	ctx   context.Context
	items []T
	one   [1]T
	// wake receives true when this call must send next (its batch is in
	// next), false when its items are done.
	wake chan bool
	next []*batchCall[T]
}

type batchScratch[T any] struct {
	calls []*batchCall[T]
	items []T
}

// NewBatcher returns a Batcher that sends batches with send.
func NewBatcher[T any](cfg BatchConfig, send func(ctx context.Context, items []T)) *Batcher[T] {
	b := &Batcher[T]{send: send, maxLimit: cfg.MaxInFlight, maxItems: cfg.MaxItems, limit: 1}
	b.limitA.Store(1)
	if b.maxLimit == 0 {
		b.maxLimit = DefaultBatchInFlight
	}
	if b.maxItems <= 0 {
		b.maxItems = DefaultBatchItems
	}
	b.calls.New = func() any { return &batchCall[T]{wake: make(chan bool, 1)} }
	b.scratch.New = func() any { return new(batchScratch[T]) }
	return b
}

// Do runs item in a batch and returns when it is done.
func (b *Batcher[T]) Do(ctx context.Context, item T) {
	c := b.calls.Get().(*batchCall[T])
	c.one[0] = item
	b.do(ctx, c, c.one[:])
	var zero T
	c.one[0] = zero
	b.calls.Put(c)
}

// DoMany runs items in one batch (with whatever else is queued) and
// returns when they are all done.
func (b *Batcher[T]) DoMany(ctx context.Context, items []T) {
	if len(items) == 0 {
		return
	}
	c := b.calls.Get().(*batchCall[T])
	b.do(ctx, c, items)
	b.calls.Put(c)
}

func (b *Batcher[T]) do(ctx context.Context, c *batchCall[T], items []T) {
	if b.maxLimit < 0 { // no batching
		b.send(ctx, items)
		return
	}
	c.ctx, c.items = ctx, items
	b.mu.Lock()
	if b.active == 0 {
		// Invariant: calls queue only while a batch is out, so the queue
		// is empty here: a lone call leaves at once.
		b.active++
		b.mu.Unlock()
		sc := b.scratch.Get().(*batchScratch[T])
		sc.calls = append(sc.calls[:0], c)
		b.lead(sc)
		c.ctx, c.items = nil, nil
		return
	}
	b.queue = append(b.queue, c)
	b.queued += len(items)
	// A full batch waiting and a slot free: it leaves now (possibly with
	// this call as its sender) instead of waiting for a batch to return.
	for b.active < b.limit && b.queued >= b.maxItems {
		b.startLocked()
	}
	b.mu.Unlock()
	if <-c.wake {
		sc := b.scratch.Get().(*batchScratch[T])
		sc.calls = append(sc.calls[:0], c.next...)
		clear(c.next)
		c.next = c.next[:0]
		b.lead(sc)
	}
	c.ctx, c.items = nil, nil
}

// startLocked takes queued calls up to maxItems (at least one) as the
// next batch and wakes its first caller to send it. Called with mu held
// and the queue not empty.
func (b *Batcher[T]) startLocked() {
	n, items := 0, 0
	for n < len(b.queue) && (n == 0 || items+len(b.queue[n].items) <= b.maxItems) {
		items += len(b.queue[n].items)
		n++
	}
	first := b.queue[0]
	first.next = append(first.next[:0], b.queue[:n]...)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.queued -= items
	b.active++
	first.wake <- true // buffered: never blocks
}

// lead sends the batch of sc.calls (sc.calls[0] is the caller's own call),
// wakes the other callers of the batch, feeds the in-flight limit, and
// hands the next batches, if calls queued meanwhile, to the first caller
// of each.
func (b *Batcher[T]) lead(sc *batchScratch[T]) {
	ctx := sc.calls[0].ctx
	earliest, has := ctx.Deadline()
	sc.items = sc.items[:0]
	for _, c := range sc.calls {
		sc.items = append(sc.items, c.items...)
		if d, ok := c.ctx.Deadline(); ok && (!has || d.Before(earliest)) {
			ctx, earliest, has = c.ctx, d, true
		}
	}
	b.send(ctx, sc.items)
	var end time.Time
	if b.maxLimit > 1 {
		end = time.Now()
	}
	for _, c := range sc.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	b.active--
	if b.maxLimit > 1 {
		if l := b.probe.sample(len(sc.items), end, b.limit, b.maxLimit, b.queued >= b.maxItems); l != b.limit {
			b.limit = l
			b.limitA.Store(int32(l))
		}
	}
	// The queued calls leave as the next batch, unless the limit shrank
	// below the batches still out (one of them starts it when it returns;
	// with none out, active < limit); further full batches leave too
	// while the limit allows.
	if len(b.queue) > 0 && b.active < b.limit {
		b.startLocked()
	}
	for b.active < b.limit && b.queued >= b.maxItems {
		b.startLocked()
	}
	b.mu.Unlock()
	var zero T
	for i := range sc.items {
		sc.items[i] = zero
	}
	clear(sc.calls)
	sc.calls = sc.calls[:0]
	b.scratch.Put(sc)
}

// Queued returns the number of items waiting for a batch, for metrics.
func (b *Batcher[T]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued
}

// InFlightLimit returns how many batches may be out at once now, for
// metrics; it takes no lock.
func (b *Batcher[T]) InFlightLimit() int {
	return int(b.limitA.Load())
}
