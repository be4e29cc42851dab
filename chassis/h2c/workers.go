package h2c

import (
	"sync"
	"time"
)

// workerIdle is how long a handler goroutine may sit idle: it exits
// between workerIdle and twice that after its last work.
const workerIdle = 10 * time.Second

// workers runs a connection's handlers on reused goroutines. A goroutine per request
// starts with a small stack and grows it (copying) on every request whose
// handler goes deep (JSON decoding, the chassis client, fasthttp); a
// reused goroutine keeps its grown stack. Idle goroutines wait on their own
// channel, most recently used first.
//
// An idle goroutine waits on its channel alone: no timer per wait (a
// select on the work and a timer reset at every request took 8% of the
// CGW's CPU at 30,000 TPS). One timer per connection reaps instead: every
// workerIdle it ends the goroutines that sat idle through the whole
// period before, which are the bottom of the idle stack (idle[:low], low
// being the fewest idle since the last reap), since work is taken from
// its top.
type workers[T any] struct {
	fn      func(T)       // runs one item; set before the first run
	idleFor time.Duration // the reaping period; 0: workerIdle

	mu      sync.Mutex
	idle    []*worker[T] // most recently used last
	low     int          // fewest idle since the last reap
	reaper  *time.Timer  // started with the first goroutine
	stopped bool
	spawned int // goroutines started, for tests
}

type worker[T any] struct {
	work chan job[T]
}

// job is one item to run; ok false tells the goroutine to exit.
type job[T any] struct {
	item T
	ok   bool
}

// stop ends the idle workers, and the busy ones once their work is done.
func (p *workers[T]) stop() {
	p.mu.Lock()
	p.stopped = true
	if p.reaper != nil {
		p.reaper.Stop()
	}
	for _, w := range p.idle {
		w.work <- job[T]{} // buffered, and empty while idle: never blocks
	}
	clear(p.idle)
	p.idle = nil
	p.mu.Unlock()
}

// run runs fn(item) on an idle worker, or on a new one.
func (p *workers[T]) run(item T) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.low = min(p.low, n-1)
		p.mu.Unlock()
		w.work <- job[T]{item, true}
		return
	}
	p.spawned++
	if p.reaper == nil && !p.stopped {
		p.reaper = time.AfterFunc(p.period(), p.reap)
	}
	p.mu.Unlock()
	w := &worker[T]{work: make(chan job[T], 1)}
	go p.loop(w, item)
}

func (p *workers[T]) loop(w *worker[T], item T) {
	for {
		p.fn(item)
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		j := <-w.work
		if !j.ok {
			return
		}
		item = j.item
	}
}

// reap ends the workers idle since the last reap, and comes back a period
// later.
func (p *workers[T]) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	n := min(p.low, len(p.idle))
	for _, w := range p.idle[:n] {
		w.work <- job[T]{} // buffered, and empty while idle: never blocks
	}
	rest := copy(p.idle, p.idle[n:])
	clear(p.idle[rest:])
	p.idle = p.idle[:rest]
	p.low = rest
	if p.reaper != nil { // nil only when a test reaps by hand first
		p.reaper.Reset(p.period())
	}
}

func (p *workers[T]) period() time.Duration {
	if p.idleFor > 0 {
		return p.idleFor
	}
	return workerIdle
}
