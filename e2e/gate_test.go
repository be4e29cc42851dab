package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// gate sits in front of a service's handler: it records the trace context
// and deadline budget of the requests it sees and, while stalled, holds
// them (as a stopped process would) until released.
type gate struct {
	next fasthttp.RequestHandler
	mu   sync.Mutex
	stop chan struct{} // nil: pass; else requests wait for it to close
	seen []seen
}

type seen struct {
	traceparent string
	budget      string
}

func newGate(t *testing.T, next fasthttp.RequestHandler) *gate {
	g := &gate{next: next}
	t.Cleanup(g.release)
	return g
}

func (g *gate) serve(ctx *fasthttp.RequestCtx) {
	g.mu.Lock()
	g.seen = append(g.seen, seen{
		traceparent: string(ctx.Request.Header.Peek(telemetry.TraceparentHeader)),
		budget:      string(ctx.Request.Header.Peek(hop.DeadlineHeader)),
	})
	stop := g.stop
	g.mu.Unlock()
	if stop != nil {
		select {
		case <-stop:
		case <-time.After(10 * time.Second):
		}
	}
	g.next(ctx)
}

// stall makes requests wait until release.
func (g *gate) stall() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stop == nil {
		g.stop = make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stop != nil {
		close(g.stop)
		g.stop = nil
	}
}

// last returns the last request seen.
func (g *gate) last() seen {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.seen) == 0 {
		return seen{}
	}
	return g.seen[len(g.seen)-1]
}
