package driver

import (
	"context"
	"sync"
	"time"
)

// Exchange performs one charge at a time, blocking its caller's goroutine
// until the answer arrived or ctx ended. It fills o (which it resets
// first) when an answer arrived and returns nil; otherwise it returns an
// error (Pool classifies it with Classify and fills o with Outcome.Fail).
type Exchange interface {
	Do(ctx context.Context, c *Charge, o *Outcome) error
}

// Pool adapts a transport whose requests block a goroutine to Worker: a
// bounded set of goroutines, one per request in flight (grown on demand,
// at most MaxInFlight), each with its own Exchange, perform the queued
// charges with the timeout and feed a completion channel that Poll drains;
// the done callbacks run in Poll on the worker's goroutine. Nothing is
// allocated per request except the timeout's context.
type Pool struct {
	newEx   func() Exchange
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	work    chan *poolCall
	done    chan *poolCall
	wg      sync.WaitGroup
	gor     int // goroutines started
	busy    int // calls handed to goroutines and not yet completed
	queued  []*poolCall
	free    []*poolCall
	timer   *time.Timer
	wake    chan struct{} // Wake: ends a Poll early
	closed  bool
}

type poolCall struct {
	c    Charge // a copy, with its own buffers
	supi []byte
	sess []byte
	o    Outcome // the goroutine's
	out  *Outcome
	fn   func(error)
	err  error
}

// poolMax bounds a Pool's goroutines and requests in flight.
const poolMax = 1 << 14

// NewPool returns a Pool whose goroutines perform exchanges made by newEx
// (one per goroutine), each bounded by timeout.
func NewPool(timeout time.Duration, newEx func() Exchange) *Pool {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Pool{
		newEx: newEx, timeout: timeout, ctx: ctx, cancel: cancel,
		work: make(chan *poolCall, poolMax), done: make(chan *poolCall, poolMax), timer: t,
		wake: make(chan struct{}, 1),
	}
}

// Queue implements Worker.
func (p *Pool) Queue(c *Charge, o *Outcome, done func(error)) error {
	if p.closed {
		return ErrClosed
	}
	if p.busy+len(p.queued) >= poolMax {
		return ErrConnection
	}
	var k *poolCall
	if n := len(p.free); n > 0 {
		k = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		k = &poolCall{}
	}
	k.supi = append(k.supi[:0], c.SUPI...)
	k.sess = append(k.sess[:0], c.Session...)
	k.c = *c
	k.c.SUPI, k.c.Session = k.supi, k.sess
	k.out, k.fn, k.err = o, done, nil
	p.queued = append(p.queued, k)
	return nil
}

// Flush implements Worker: hands the queued charges to goroutines,
// starting one when every goroutine is busy.
func (p *Pool) Flush() {
	for i, k := range p.queued {
		p.queued[i] = nil
		p.busy++
		if p.busy > p.gor {
			p.gor++
			p.wg.Add(1)
			go p.run(p.newEx())
		}
		p.work <- k
	}
	p.queued = p.queued[:0]
}

// run performs charges until the pool closes.
func (p *Pool) run(ex Exchange) {
	defer p.wg.Done()
	for k := range p.work {
		ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
		err := ex.Do(ctx, &k.c, &k.o)
		cancel()
		if err != nil {
			err = Classify(err)
			k.o.Fail(err)
		}
		if k.o.Received.IsZero() {
			k.o.Received = time.Now()
		}
		k.err = err
		p.done <- k
	}
}

// Poll implements Worker.
func (p *Pool) Poll(wait time.Duration) error {
	if p.closed {
		return ErrClosed
	}
	if p.take() > 0 || wait <= 0 {
		return nil
	}
	p.timer.Reset(wait)
	select {
	case k := <-p.done:
		p.complete(k)
		p.take()
	case <-p.timer.C:
		return nil
	case <-p.wake:
	}
	p.timer.Stop() // no stale value can be received after Stop (Go 1.23+)
	return nil
}

// Wake implements Waker: safe for concurrent use.
func (p *Pool) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take completes every call waiting in the channel and returns how many.
func (p *Pool) take() int {
	n := 0
	for {
		select {
		case k := <-p.done:
			p.complete(k)
			n++
		default:
			return n
		}
	}
}

func (p *Pool) complete(k *poolCall) {
	p.busy--
	ref := k.out.Ref
	*k.out = k.o
	k.out.Ref = append(ref[:0], k.o.Ref...)
	fn, err := k.fn, k.err
	k.out, k.fn = nil, nil
	p.free = append(p.free, k)
	fn(err)
}

// Close implements Worker: cancels the requests in flight and waits for
// the goroutines.
func (p *Pool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	p.cancel()
	close(p.work)
	stop := make(chan struct{})
	go func() { p.wg.Wait(); close(stop) }()
	for {
		select {
		case <-p.done:
		case <-stop:
			return
		}
	}
}
