package nchf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// h2Conns are the h2c transport's targets: header templates, and the
// connections shared by the goroutines of every worker's driver.Pool
// ("h2c-async"; event loops have their own). Connections per target are
// dialed lazily: a request goes to the next connection round robin,
// moves on when that one is at the server's stream limit, and a new
// connection is dialed (up to maxConns) only when every existing one is
// full.
type h2Conns struct {
	targets  []*h2Target
	maxConns int
	opts     h2c.ClientOptions
	timeout  time.Duration
	tls      *tls.Config // nil = cleartext
}

type h2Target struct {
	addr  string
	post  *h2c.RequestTemplate
	get   *h2c.RequestTemplate
	conns atomic.Pointer[[]*h2c.Conn] // immutable snapshot
	next  atomic.Uint32
	mu    sync.Mutex // serialises dialing
}

func newH2Conns(cfg driver.Config) *h2Conns {
	n := cfg.Conns
	if n <= 0 {
		n = 64
	}
	newTemplate := h2c.NewRequestTemplate
	var tcfg *tls.Config
	if cfg.TLS != nil {
		tcfg = cfg.TLS.Clone()
		tcfg.NextProtos = []string{"h2"}
		newTemplate = h2c.NewTLSRequestTemplate
	}
	d := &h2Conns{maxConns: n, timeout: cfg.Timeout, tls: tcfg, opts: h2c.ClientOptions{
		CaptureHeaders:   []string{"location", "x-chf-charged", "retry-after"},
		HandshakeTimeout: cfg.Timeout,
	}}
	for _, a := range cfg.Targets {
		t := &h2Target{
			addr: a,
			post: newTemplate("POST", a, "application/json", "accept", "application/json", MaxRspTimeHeader, maxRspTimeValue(cfg.Timeout)),
			get:  newTemplate("GET", a, "", "accept", "application/json", MaxRspTimeHeader, maxRspTimeValue(cfg.Timeout)),
		}
		t.conns.Store(&[]*h2c.Conn{})
		d.targets = append(d.targets, t)
	}
	return d
}

func (d *h2Conns) close() {
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

// fill copies a completed h2c response into m.
func (m *message) fill(hr *h2c.ClientResponse) {
	m.status = hr.Status
	m.rbody = hr.Body
	if len(hr.Headers) > 0 {
		m.location = append(m.location[:0], hr.Headers[0]...)
	}
	if len(hr.Headers) > 1 && len(hr.Headers[1]) > 0 {
		m.charged, m.hasCharged = ParseCharged(hr.Headers[1])
	}
	if len(hr.Headers) > 2 {
		m.retryAfter = append(m.retryAfter[:0], hr.Headers[2]...)
	}
}

// request returns the h2c request of m to t.
func (t *h2Target) request(m *message) h2c.ClientRequest {
	m.fields[0] = h2c.Field{Name: SenderTimestampHeader, Value: m.sent}
	cr := h2c.ClientRequest{Template: t.post, Path: m.path, Body: m.body, Fields: m.fields[:1]}
	if m.get {
		cr.Template, cr.Body = t.get, nil
	}
	if m.auth != nil {
		// A never-indexed literal (as Fields are): a credential stays out
		// of the HPACK tables (RFC 7541 §7.1.3).
		m.fields[1] = h2c.Field{Name: AuthorizationHeader, Value: m.auth}
		cr.Fields = m.fields[:2]
	}
	return cr
}

// do sends m to target and waits for the answer.
func (d *h2Conns) do(ctx context.Context, target int, m *message, hr *h2c.ClientResponse) error {
	t := d.targets[uint(target)%uint(len(d.targets))]
	cr := t.request(m)
	hr.Body = m.rbody[:0]
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
			m.fill(hr)
			return nil
		}
		if !retryable(err) {
			return driver.Classify(err)
		}
		if err := d.grow(ctx, t, len(conns)); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: every connection to %s is at its stream limit", driver.ErrConnection, t.addr)
}

// grow drops dead connections and dials one more when the snapshot still
// has seen connections (another caller may have grown it already).
func (d *h2Conns) grow(ctx context.Context, t *h2Target, seen int) error {
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
	c, err := d.dial(ctx, t.addr)
	if err != nil {
		t.conns.Store(&live)
		return driver.Classify(fmt.Errorf("cannot dial %s: %w", t.addr, err))
	}
	live = append(live, c)
	t.conns.Store(&live)
	return nil
}

// dial opens one connection to addr: h2c (prior knowledge) in cleartext,
// or TLS with ALPN h2 and the h2c client on the tls.Conn.
func (d *h2Conns) dial(ctx context.Context, addr string) (*h2c.Conn, error) {
	if d.tls == nil {
		return h2c.Dial(ctx, addr, &d.opts)
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	td := &tls.Dialer{NetDialer: &net.Dialer{}, Config: d.tls}
	nc, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot dial %s over TLS: %w", addr, err)
	}
	if p := nc.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
		nc.Close()
		return nil, fmt.Errorf("cannot use %s: the server did not negotiate h2 with ALPN (got %q)", addr, p)
	}
	c, err := h2c.NewConn(ctx, nc, &d.opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}
