package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/nchf"
)

// h2cDriver ("h2c") uses the project's lean HTTP/2 client (chassis/h2c):
// pre-encoded header templates, one reader goroutine per connection.
// Connections per target are dialed lazily: a request goes to the next
// connection round robin, moves on when that one is at the server's
// stream limit, and a new connection is dialed (up to maxConns) only
// when every existing one is full.
type h2cDriver struct {
	targets     []*h2Target
	maxConns    int
	opts        h2c.ClientOptions
	dialTimeout time.Duration
	noLoop      bool // "h2c-async": NewLoop fails, callers use the connections' goroutines
}

type h2Target struct {
	addr  string
	post  *h2c.RequestTemplate
	get   *h2c.RequestTemplate
	conns atomic.Pointer[[]*h2c.Conn] // immutable snapshot
	next  atomic.Uint32
	mu    sync.Mutex // serialises dialing
}

func newH2C(cfg Config) (*h2cDriver, error) {
	n := cfg.Conns
	if n <= 0 {
		n = 64
	}
	d := &h2cDriver{maxConns: n, dialTimeout: cfg.Timeout, opts: h2c.ClientOptions{CaptureHeaders: []string{"location", "x-chf-charged"}}}
	for _, a := range cfg.Targets {
		t := &h2Target{
			addr: a,
			post: h2c.NewRequestTemplate("POST", a, "application/json", "accept", "application/json"),
			get:  h2c.NewRequestTemplate("GET", a, "", "accept", "application/json"),
		}
		t.conns.Store(&[]*h2c.Conn{})
		d.targets = append(d.targets, t)
	}
	return d, nil
}

func (d *h2cDriver) Targets() int { return len(d.targets) }

func (d *h2cDriver) Close() {
	for _, t := range d.targets {
		t.mu.Lock()
		for _, c := range *t.conns.Load() {
			c.Close()
		}
		t.conns.Store(&[]*h2c.Conn{})
		t.mu.Unlock()
	}
}

// retryable reports errors after which the request was not processed and
// another connection may take it.
func retryable(err error) bool {
	return errors.Is(err, h2c.ErrStreamLimit) || errors.Is(err, h2c.ErrGoAway) ||
		errors.Is(err, h2c.ErrConnExhausted) || errors.Is(err, h2c.ErrRefused)
}

func (d *h2cDriver) Do(ctx context.Context, req *Request, resp *Response) error {
	resp.Reset()
	t := d.targets[req.Target%len(d.targets)]
	cr := h2c.ClientRequest{Template: t.post, Path: req.Path, Body: req.Body}
	if req.Method == "GET" {
		cr.Template = t.get
	}
	hr := &resp.h2
	hr.Body = resp.Body[:0]
	for attempt := 0; attempt < 3; attempt++ {
		conns := *t.conns.Load()
		start := int(t.next.Add(1))
		var err error = h2c.ErrStreamLimit
		for i := range conns {
			c := conns[(start+i)%len(conns)]
			if c.Err() != nil {
				continue
			}
			err = c.Do(ctx, &cr, hr)
			if err == nil || !retryable(err) {
				break
			}
		}
		if err == nil {
			resp.fill(hr)
			return nil
		}
		if !retryable(err) {
			return classify(err)
		}
		if err := d.grow(ctx, t, len(conns)); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: every connection to %s is at its stream limit", ErrConnection, t.addr)
}

// Batcher is implemented by Async drivers that can hold started requests
// in a buffer and send them together: a scheduler that starts every
// request due in one tick calls Queue for each and Flush once, so they
// share one write system call and one wake-up of the writer.
type Batcher interface {
	Async
	// Queue is Start, except that the request may wait until Flush.
	Queue(req *Request, resp *Response, done func(error)) error
	// Flush sends every queued request.
	Flush()
}

// Loop is a set of connections driven by one goroutine, the caller's: it
// queues requests (Batcher) and calls Poll to wait for and handle network
// events; the done callbacks run inside Poll (or Flush, Close) on the
// caller's goroutine. No other goroutine is involved in a round trip, so
// one loop costs a fraction of the wake-ups and system calls of Async
// connections with their reader and writer goroutines. A Loop is not safe
// for concurrent use.
type Loop interface {
	Batcher
	// Poll waits at most d for network events (d <= 0: only looks) and
	// handles them: responses arrive, blocked writes continue. With wake
	// it returns at the first event (or earlier than d without one);
	// without, it sleeps d whatever arrives and then handles everything
	// that did: one wake-up per call. Either way a response's
	// Response.Received is when its data reached the socket (where the
	// platform reports it), not when Poll handled it.
	Poll(d time.Duration, wake bool) error
	// Close closes the loop's connections; requests still in flight fail.
	Close()
}

// Looper is implemented by drivers that can give a goroutine its own
// connections and event loop. NewLoop fails with ErrNoLoop where the
// driver cannot (other platforms, or loops disabled).
type Looper interface {
	NewLoop() (Loop, error)
}

// ErrNoLoop is returned by NewLoop where event loops are not available.
var ErrNoLoop = errors.New("driver: no event loop on this platform")

// Start implements Async.
func (d *h2cDriver) Start(req *Request, resp *Response, done func(error)) error {
	return d.start(req, resp, done, false)
}

// Queue implements Batcher.
func (d *h2cDriver) Queue(req *Request, resp *Response, done func(error)) error {
	return d.start(req, resp, done, true)
}

// Flush implements Batcher.
func (d *h2cDriver) Flush() {
	for _, t := range d.targets {
		for _, c := range *t.conns.Load() {
			c.Flush()
		}
	}
}

// prepare sets up resp for an asynchronous h2c round trip of req to t.
func (d *h2cDriver) prepare(t *h2Target, req *Request, resp *Response, done func(error)) (*h2c.ClientRequest, *h2c.ClientResponse) {
	resp.Reset()
	cr := &resp.h2req
	cr.Template, cr.Path, cr.Body = t.post, req.Path, req.Body
	if req.Method == "GET" {
		cr.Template = t.get
	}
	hr := &resp.h2
	hr.Body = resp.Body[:0]
	resp.h2done = done
	if resp.h2cb == nil {
		resp.h2cb = func(hr *h2c.ClientResponse, err error) {
			if err != nil {
				resp.h2done(classify(err))
				return
			}
			resp.fill(hr)
			resp.h2done(nil)
		}
	}
	return cr, hr
}

func (d *h2cDriver) start(req *Request, resp *Response, done func(error), queue bool) error {
	t := d.targets[req.Target%len(d.targets)]
	cr, hr := d.prepare(t, req, resp, done)
	for attempt := 0; attempt < 3; attempt++ {
		conns := *t.conns.Load()
		start := int(t.next.Add(1))
		var err error = h2c.ErrStreamLimit
		for i := range conns {
			c := conns[(start+i)%len(conns)]
			if c.Err() != nil {
				continue
			}
			if queue {
				err = c.RoundTripQueued(cr, hr, resp.h2cb)
			} else {
				err = c.RoundTrip(cr, hr, resp.h2cb)
			}
			if err == nil || !retryable(err) {
				break
			}
		}
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return classify(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.dialTimeout)
		err = d.grow(ctx, t, len(conns))
		cancel()
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: every connection to %s is at its stream limit", ErrConnection, t.addr)
}

// fill copies a completed h2c response into r.
func (r *Response) fill(hr *h2c.ClientResponse) {
	r.Status = hr.Status
	r.Body = hr.Body
	if len(hr.Headers) > 0 {
		r.Location = append(r.Location, hr.Headers[0]...)
	}
	if len(hr.Headers) > 1 && len(hr.Headers[1]) > 0 {
		r.Charged, r.HasCharged = nchf.ParseCharged(hr.Headers[1])
	}
}

// grow drops dead connections and dials one more when the snapshot still
// has seen connections (another caller may have grown it already).
func (d *h2cDriver) grow(ctx context.Context, t *h2Target, seen int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := *t.conns.Load()
	live := make([]*h2c.Conn, 0, len(cur)+1)
	for _, c := range cur {
		if c.Err() == nil {
			live = append(live, c)
		} else {
			c.Close()
		}
	}
	if len(live) == len(cur) && len(cur) != seen {
		return nil // grown meanwhile
	}
	if len(live) >= d.maxConns {
		t.conns.Store(&live)
		return nil
	}
	c, err := h2c.Dial(ctx, t.addr, &d.opts)
	if err != nil {
		t.conns.Store(&live)
		return classify(fmt.Errorf("cannot dial %s: %w", t.addr, err))
	}
	live = append(live, c)
	t.conns.Store(&live)
	return nil
}
