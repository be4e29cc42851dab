package h2c

import (
	"sync"
	"time"
)

// workerIdle is how long an idle handler goroutine waits for work before
// it exits.
const workerIdle = 10 * time.Second

// workers runs a connection's handlers on reused goroutines. A goroutine per request
// starts with a small stack and grows it (copying) on every request whose
// handler goes deep (JSON decoding, the chassis client, fasthttp); a
// reused goroutine keeps its grown stack. Idle goroutines wait on their own
// channel, most recently used first, and exit after workerIdle.
type workers struct {
	mu      sync.Mutex
	idle    []*worker
	stopped bool
	spawned int // goroutines started, for tests
}

type worker struct {
	work chan func() // nil: exit
}

// stop ends the idle workers, and the busy ones once their work is done.
func (p *workers) stop() {
	p.mu.Lock()
	p.stopped = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.work <- nil
	}
}

// run runs fn on an idle worker, or on a new one.
func (p *workers) run(fn func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.work <- fn
		return
	}
	p.spawned++
	p.mu.Unlock()
	w := &worker{work: make(chan func(), 1)}
	go p.loop(w, fn)
}

func (p *workers) loop(w *worker, fn func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		fn()
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		t.Reset(workerIdle)
		select {
		case fn = <-w.work:
			if fn == nil {
				return
			}
			continue
		case <-t.C:
		}
		// Leave unless work was handed over meanwhile.
		p.mu.Lock()
		for i, x := range p.idle {
			if x == w {
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				p.mu.Unlock()
				return
			}
		}
		p.mu.Unlock()
		if fn = <-w.work; fn == nil {
			return
		}
	}
}
