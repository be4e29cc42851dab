// Package batcher merges the concurrent calls to one peer operation into
// batches (Batcher): natural batching with no timer, the caller that
// opens a batch sends it, and only full batches pipeline. chassis/rpc
// sends its batches over a chassis/peer Client; this package links
// neither.
package batcher

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Batch defaults.
const (
	// DefaultInFlight is the most batches in flight per peer
	// operation (only full batches pipeline; see Batcher).
	// --batch-inflight 1 keeps one batch at a time.
	DefaultInFlight = 4
	// DefaultItems bounds a batch. Natural batching makes batches
	// only as large as what queued during one round trip, so the bound
	// matters only under pressure, where it is the hop's capacity: a
	// peer that spends f per round trip and c per item carries at most
	// MaxItems / (f + c·MaxItems) items a second per batch out: too
	// small a bound leaves a queue formed by a transient unable to drain
	// (why 512: docs/design/006-batcher.md).
	DefaultItems = 512
)

// Config configures a Batcher.
type Config struct {
	// MaxInFlight bounds the batches in flight at once: full batches
	// leave while fewer than this are out, a partial batch only when none
	// is (see Batcher). 1 = one batch at a time; 0 = DefaultInFlight;
	// negative = no batching (every call leaves alone, concurrently).
	MaxInFlight int
	// MaxItems bounds the items of one batch (0 = DefaultItems). A
	// single call larger than MaxItems still leaves as one batch.
	MaxItems int
}

// Batcher merges concurrent calls to one peer operation into batches
// ("natural batching"): there is no timer and no added delay when the peer
// keeps up; a call that finds no batch out leaves at once (after one
// yield when the peer was idle, below), alone; one that
// finds a batch out waits and shares the next one with every other call
// that queued meanwhile. So the batch size follows the queueing: a batch
// carries what arrived during the round trip before it.
// Under load this turns many small round trips (each a few system calls on
// each side) into one, which is where the CHF's CPU goes.
//
// Only full batches (MaxItems) are pipelined: one leaves as soon as it is
// full while fewer than MaxInFlight batches are out. A partial batch
// leaves only when no batch is out, so the number in flight also follows
// the queueing: it exceeds one only while more than a full batch waits.
// For a peer that serves one batch at a time, a second batch out then
// only waits there, but every batch stays full, so it costs the peer no
// extra round trips (BenchmarkBatcher/serial); a peer with room serves
// them at once (BenchmarkBatcher/parallel). Pipelining partial batches
// too (one leaving beside a loaded batch half a round trip after it) was
// measured and not kept: each extra batch is a write that wakes the
// peer, which below the knee cost more CPU than the shorter waits saved
// (docs/design/006-batcher.md).
//
// A call that finds no batch out and the peer idle for batchIdleGap
// yields its P once before it sends (runtime.Gosched), and takes with it
// the calls queued meanwhile: a burst that arrives together (the
// requests of one read, one handler goroutine each) leaves as one batch
// instead of one alone and the rest a round trip later: fewer round
// trips, and so less CPU per transaction, at moderate load, where bursts
// form and the peer still idles between them; at high load the peer is
// never idle and nothing changes (docs/design/006-batcher.md). The gate
// costs every call that leads a batch two clock reads
// (BenchmarkBatcherLone), and a call that yields the yield.
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
	active  atomic.Int32 // batches out; changed under mu, read by InFlight without it
	back    atomic.Int64 // when the last batch returned, ns since batchEpoch
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

// New returns a Batcher that sends batches with send.
func New[T any](cfg Config, send func(ctx context.Context, items []T)) *Batcher[T] {
	b := &Batcher[T]{send: send, maxLimit: cfg.MaxInFlight, maxItems: cfg.MaxItems}
	if b.maxLimit == 0 {
		b.maxLimit = DefaultInFlight
	}
	if b.maxItems <= 0 {
		b.maxItems = DefaultItems
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
	if b.active.Load() == 0 {
		// Invariant: calls queue only while a batch is out, so the queue
		// is empty here: a lone call leaves at once.
		b.active.Add(1)
		b.mu.Unlock()
		sc := b.scratch.Get().(*batchScratch[T])
		sc.calls = append(sc.calls[:0], c)
		if int64(time.Since(batchEpoch))-b.back.Load() > int64(batchIdleGap) {
			// The peer was idle: this call may be the first of a burst
			// (the requests of one read of a connection, one handler
			// goroutine each, runnable on this P). It yields the P once
			// and takes what the others queued meanwhile, instead of
			// leaving alone with them waiting for its round trip. A lone
			// call finds nothing else runnable and leaves at once.
			runtime.Gosched()
			b.mu.Lock()
			sc.calls = b.takeLocked(sc.calls, len(items), false)
			b.mu.Unlock()
		}
		b.lead(sc)
		c.ctx, c.items = nil, nil
		return
	}
	b.queue = append(b.queue, c)
	b.queued += len(items)
	// A full batch waiting and a slot free: it leaves now (possibly with
	// this call as its sender) instead of waiting for a batch to return.
	b.startReadyLocked()
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

// batchIdleGap is how long after the last batch returned a call that
// finds no batch out yields to gather its burst (see Batcher). Right
// after a batch returned, the runnable goroutines are mostly that
// batch's callers writing their answers, and a yield would put the new
// batch behind all of them (measured: p99 up at 12,000–24,000 TPS).
const batchIdleGap = 200 * time.Microsecond

// batchEpoch is the origin of Batcher.back (monotonic).
var batchEpoch = time.Now()

// takeLocked moves calls from the head of the queue onto dst, whole and
// in order, while the batch they join (n items before them) stays within
// maxItems, and at least one when atLeastOne (a single call larger than
// maxItems still leaves); it returns dst. Called with mu held.
func (b *Batcher[T]) takeLocked(dst []*batchCall[T], n int, atLeastOne bool) []*batchCall[T] {
	k := 0
	for k < len(b.queue) && (atLeastOne && k == 0 || n+len(b.queue[k].items) <= b.maxItems) {
		n += len(b.queue[k].items)
		b.queued -= len(b.queue[k].items)
		k++
	}
	dst = append(dst, b.queue[:k]...)
	rest := copy(b.queue, b.queue[k:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return dst
}

// startReadyLocked starts the batches that may leave now: full ones while
// fewer than maxLimit are out, and what is left, a partial batch, when
// none is. Called with mu held.
func (b *Batcher[T]) startReadyLocked() {
	for len(b.queue) > 0 {
		out := int(b.active.Load())
		if out >= b.maxLimit || b.queued < b.maxItems && out > 0 {
			return
		}
		b.startLocked()
	}
}

// startLocked takes queued calls up to maxItems (at least one) as the
// next batch and wakes its first caller to send it. Called with mu held
// and the queue not empty.
func (b *Batcher[T]) startLocked() {
	first := b.queue[0]
	first.next = b.takeLocked(first.next[:0], 0, true)
	b.active.Add(1)
	first.wake <- true // buffered: never blocks
}

// lead sends the batch of sc.calls (sc.calls[0] is the caller's own call),
// wakes the other callers of the batch, and hands the next batches, if
// calls queued meanwhile, to the first caller of each.
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
	b.back.Store(int64(time.Since(batchEpoch)))
	for _, c := range sc.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	b.active.Add(-1)
	b.startReadyLocked()
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

// InFlight returns how many batches are out now, for metrics; it takes
// no lock.
func (b *Batcher[T]) InFlight() int {
	return int(b.active.Load())
}
