package chassis

import (
	"context"
	"sync"
	"time"
)

// Batch defaults.
const (
	// DefaultBatchInFlight is the most batches in flight per peer
	// operation (how many are allowed at a time adapts between 1 and it,
	// see Batcher). 1 until the limit shrinks reliably for a peer that
	// serves one batch at a time (BenchmarkBatcher/serial: +52% time per
	// call with 4); --batch-inflight 4 turns the adaptive limit on.
	DefaultBatchInFlight = 1
	DefaultBatchItems    = 64
)

// Parameters of the in-flight limit (TCP Vegas on batch round trips).
const (
	// vegasAlpha and vegasBeta bound the batches estimated to wait at the
	// peer (limit × (1 − baseRTT/rtt)): below alpha the limit may grow,
	// above beta it shrinks.
	vegasAlpha = 0.5
	vegasBeta  = 1.5
	// baseWindow is how many round trips the no-queueing RTT (their
	// minimum) is taken over; the minimum of the previous window is used
	// while the next one fills, so the base follows a peer that slows.
	baseWindow = 1024
)

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
// batches in flight adapts between 1 and MaxInFlight, as TCP Vegas does
// its window: from each round trip it estimates how many of its batches
// wait at the peer, limit × (1 − base/rtt), base being the least round
// trip of the last window (1024 batches). The limit grows by one (at most
// once per limit round trips) while a full batch waits here and fewer
// than half a batch waits there — pipelining pays: the peer answers as
// fast with more out — and shrinks by one when more than one and a half
// wait there: more out only queues at the peer.
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
	queued  int // items in queue
	active  int // batches out
	limit   int // batches allowed out, 1..maxLimit
	vegas   vegas
	calls   sync.Pool
	scratch sync.Pool // *batchScratch[T]
}

// vegas is the state of the in-flight limit; guarded by Batcher.mu.
type vegas struct {
	base    time.Duration // least RTT of the last full window (0 = none yet)
	winMin  time.Duration // least RTT of the window filling
	winN    int           // RTTs in it
	since   int           // round trips since the limit last changed
	changes uint64        // limit changes, for tests and metrics
}

// sample takes the round trip of one batch, with the limit at its
// sending and whether calls were queued when it came back, and returns
// the new limit.
func (v *vegas) sample(rtt time.Duration, limit, maxLimit int, demand bool) int {
	if rtt <= 0 {
		rtt = 1
	}
	if v.winN == 0 || rtt < v.winMin {
		v.winMin = rtt
	}
	v.winN++
	if v.base == 0 || v.winMin < v.base {
		v.base = v.winMin
	}
	if v.winN >= baseWindow {
		v.base, v.winN = v.winMin, 0
	}
	v.since++
	if v.since < limit {
		return limit
	}
	// Batches waiting at the peer: limit × (1 − base/rtt).
	waiting := float64(limit) * (1 - float64(v.base)/float64(rtt))
	switch {
	case waiting > vegasBeta && limit > 1:
		limit--
	case waiting < vegasAlpha && demand && limit < maxLimit:
		limit++
	default:
		return limit
	}
	v.since = 0
	v.changes++
	return limit
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
		limit := b.limit
		b.mu.Unlock()
		sc := b.scratch.Get().(*batchScratch[T])
		sc.calls = append(sc.calls[:0], c)
		b.lead(sc, limit)
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
		b.mu.Lock()
		limit := b.limit
		b.mu.Unlock()
		b.lead(sc, limit)
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
// wakes the other callers of the batch, adapts the limit (which was limit
// when the batch left) to its round trip, and hands the next batches, if
// calls queued meanwhile, to the first caller of each.
func (b *Batcher[T]) lead(sc *batchScratch[T], limit int) {
	ctx := sc.calls[0].ctx
	earliest, has := ctx.Deadline()
	sc.items = sc.items[:0]
	for _, c := range sc.calls {
		sc.items = append(sc.items, c.items...)
		if d, ok := c.ctx.Deadline(); ok && (!has || d.Before(earliest)) {
			ctx, earliest, has = c.ctx, d, true
		}
	}
	var start time.Time
	if b.maxLimit > 1 {
		start = time.Now()
	}
	b.send(ctx, sc.items)
	var rtt time.Duration
	if b.maxLimit > 1 {
		rtt = time.Since(start)
	}
	for _, c := range sc.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	b.active--
	if b.maxLimit > 1 {
		b.limit = b.vegas.sample(rtt, limit, b.maxLimit, b.queued >= b.maxItems)
	}
	// The queued calls leave as the next batch; further full batches
	// leave too while the limit allows.
	if len(b.queue) > 0 {
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
// metrics.
func (b *Batcher[T]) InFlightLimit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}
