package chassis

import (
	"context"
	"sync"
)

// Batch defaults.
const (
	DefaultBatchInFlight = 1
	DefaultBatchItems    = 64
)

// BatchConfig configures a Batcher.
type BatchConfig struct {
	// MaxInFlight bounds the batches in flight at once. A call that finds
	// fewer in flight leaves at once (alone); calls arriving while
	// MaxInFlight batches are out queue and leave together as the next
	// batch when one comes back. 0 = DefaultBatchInFlight; negative = no
	// batching (every call leaves alone, concurrently).
	MaxInFlight int
	// MaxItems bounds the items of one batch (0 = DefaultBatchItems). A
	// single call larger than MaxItems still leaves as one batch.
	MaxItems int
}

// Batcher merges concurrent calls to one peer operation into batches
// ("natural batching"): there is no timer and no added delay when the peer
// keeps up; a call waits only while MaxInFlight batches are already out,
// and then shares the next one with every other call that queued meanwhile.
// Under load this turns many small round trips (each a few system calls on
// each side) into one, which is where the CHF's CPU goes.
//
// The caller whose call starts a batch sends it from its own goroutine (no
// hand-off to a sender goroutine); when a batch returns and calls are
// queued, the first queued caller is woken to send the next one.
//
// send must fill in the outcome of every item it is given (in the items
// themselves) before returning; Do returns once its items are done. The
// batch is sent with the context of the call that has the earliest
// deadline. A Batcher is safe for concurrent use.
type Batcher[T any] struct {
	send     func(ctx context.Context, items []T)
	inFlight int // max
	maxItems int

	mu      sync.Mutex
	queue   []*batchCall[T]
	queued  int // items in queue
	active  int // batches out
	calls   sync.Pool
	scratch sync.Pool // *batchScratch[T]
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
	b := &Batcher[T]{send: send, inFlight: cfg.MaxInFlight, maxItems: cfg.MaxItems}
	if b.inFlight == 0 {
		b.inFlight = DefaultBatchInFlight
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
	if b.inFlight < 0 { // no batching
		b.send(ctx, items)
		return
	}
	c.ctx, c.items = ctx, items
	b.mu.Lock()
	if b.active < b.inFlight {
		// Invariant: calls queue only while inFlight batches are out, so
		// the queue is empty here.
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

// lead sends the batch of sc.calls (sc.calls[0] is the caller's own call),
// wakes the other callers of the batch, and hands the next batch, if calls
// queued meanwhile, to the first of them.
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
	for _, c := range sc.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.active--
		b.mu.Unlock()
	} else {
		// Take queued calls up to maxItems (at least one) as the next
		// batch; its first caller sends it.
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
		b.mu.Unlock()
		first.wake <- true
	}
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
