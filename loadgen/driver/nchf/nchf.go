// Package nchf is the load generator's Nchf_ConvergedCharging driver: it
// turns driver.Charges into Nchf requests (paths, JSON bodies, see
// codec.go), sends them over one of three transports and classifies the
// answers into driver.Outcomes (HTTP status, per rating group resultCode,
// the ChargingDataRef from Location, X-Chf-Charged).
//
// Transports (driver.Config.Proto):
//   - "h2c" (default): the project's lean HTTP/2 client (chassis/h2c),
//     pre-encoded header templates. On Linux each engine worker gets its
//     own event loop with its own connections (loop_linux.go): no other
//     goroutine takes part in a round trip. Elsewhere, or with
//     Config.Blocking, as "h2c-async".
//   - "h2c-async": the same client with a reader and a writer goroutine per
//     connection, shared by the workers, each request on a goroutine of
//     the worker's driver.Pool.
//   - "h2c-std": golang.org/x/net/http2.Transport (for comparison).
//   - "http1": HTTP/1.1, fasthttp.
//
// With driver.Config.TLS (https:// targets) every transport runs over
// TLS, negotiating h2 or http/1.1 with ALPN; h2c then runs as h2c-async,
// the h2c client on a tls.Conn (the event loop polls raw sockets).
//
// Balance reads for the audit use ReadAccount.
package nchf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// DefaultNFName is the nfConsumerIdentification.nFName sent when
// driver.Config.NFName is empty.
const DefaultNFName = "6b4f6e1c-2d3a-4c5b-9e8f-0a1b2c3d4e5f"

// Driver sends Nchf over HTTP. It implements driver.Driver.
type Driver struct {
	proto   string
	nfName  string
	timeout time.Duration
	targets int
	h2      *h2Conns     // h2c and h2c-async
	loop    bool         // h2c workers get event loops where the platform has them
	loops   atomic.Int32 // event loops open (see loop.Poll's yield)
	onTime  bool         // driver.Config.OnTime: loops anticipate wake-ups
	http1   *http1Transport
	std     *stdTransport
	notify  *notifyServer // nil without Config.NotifyListen
	// auth is the Authorization value of balance inquiries ("Bearer " +
	// Config.OperatorToken), nil without a token; read-only once built.
	auth []byte
}

// New builds the Nchf driver for cfg.Proto: h2c (default), h2c-async,
// h2c-std or http1. Connections are dialed when requests need them.
func New(cfg driver.Config) (*Driver, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = driver.DefaultTimeout
	}
	if len(cfg.Targets) == 0 {
		return nil, errors.New("cannot create the nchf driver: no target")
	}
	d := &Driver{proto: cfg.Proto, nfName: cfg.NFName, timeout: cfg.Timeout, targets: len(cfg.Targets), onTime: cfg.OnTime}
	if d.nfName == "" {
		d.nfName = DefaultNFName
	}
	if cfg.OperatorToken != "" {
		if err := checkToken(cfg.OperatorToken); err != nil {
			return nil, fmt.Errorf("cannot create the nchf driver: %w", err)
		}
		d.auth = []byte("Bearer " + cfg.OperatorToken)
	}
	switch cfg.Proto {
	case "", "h2c":
		d.proto = "h2c"
		d.h2 = newH2Conns(cfg)
		d.loop = !cfg.Blocking && cfg.TLS == nil // the event loop polls raw sockets
	case "h2c-async":
		d.h2 = newH2Conns(cfg)
	case "h2c-std":
		d.std = newStd(cfg)
	case "http1":
		d.http1 = newHTTP1(cfg)
	default:
		return nil, fmt.Errorf("%w %q (want h2c, h2c-async, h2c-std, http1 or gy)", driver.ErrProto, cfg.Proto)
	}
	if cfg.NotifyListen != "" {
		ns, err := startNotify(cfg.NotifyListen, cfg.Timeout)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.notify = ns
	}
	return d, nil
}

// AuthorizationHeader is the header that carries the operator token on
// balance inquiries.
const AuthorizationHeader = "authorization"

// checkToken refuses an operator token a header value cannot carry as
// it is: anything but visible ASCII (RFC 6750's b64token is a subset).
func checkToken(t string) error {
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return fmt.Errorf("the operator token has a character an HTTP header cannot carry (byte %#x at %d): want visible ASCII", t[i], i)
		}
	}
	return nil
}

// MaxRspTimeHeader is TS 29.500's 3gpp-Sbi-Max-Rsp-Time, which every
// request carries: how long, in milliseconds, the CHF may take to answer.
const MaxRspTimeHeader = "3gpp-sbi-max-rsp-time"

// MaxRspTime is the budget every request announces for a driver timeout:
// three quarters of it (at most a second less), so that the CHF's answer —
// its result, or 504 when its core stalled — arrives before the request
// times out here. A request the CHF charged but whose answer came after
// the timeout would be counted unresolved although it was charged.
func MaxRspTime(timeout time.Duration) time.Duration {
	return timeout - min(timeout/4, time.Second)
}

// maxRspTimeValue is MaxRspTime(timeout) as the header's value.
func maxRspTimeValue(timeout time.Duration) string {
	return strconv.FormatInt(max(MaxRspTime(timeout).Milliseconds(), 1), 10)
}

// Targets implements driver.Driver.
func (d *Driver) Targets() int { return d.targets }

// Close implements driver.Driver.
func (d *Driver) Close() {
	if d.notify != nil {
		d.notify.close()
	}
	switch {
	case d.h2 != nil:
		d.h2.close()
	case d.http1 != nil:
		d.http1.close()
	case d.std != nil:
		d.std.close()
	}
}

// NewWorker implements driver.Driver: an event loop for h2c on Linux, a
// driver.Pool otherwise.
func (d *Driver) NewWorker() (driver.Worker, error) {
	if d.loop {
		w, err := d.newLoop()
		if err == nil {
			return w, nil
		}
		if !errors.Is(err, errNoLoop) {
			return nil, err
		}
	}
	return driver.NewPool(d.timeout, func() driver.Exchange { return &exchange{d: d} }), nil
}

// message is one Nchf request and its answer, reused across requests.
type message struct {
	get  bool // GET (balance inquiry) or POST
	path []byte
	body []byte
	nreq Request
	used chf.Units
	// the answer
	status     int
	rbody      []byte
	location   []byte
	charged    int64
	hasCharged bool
	retryAfter []byte // the Retry-After header's value, when any
	wantGrant  bool   // parse the grant into the outcome
	// sent is the 3gpp-Sbi-Sender-Timestamp value of the request (owned
	// by stamp, valid until the next build)
	sent  []byte
	stamp stamp
	// auth is the Authorization value this request carries (the
	// driver's, on a balance inquiry), nil for none; not owned.
	auth []byte
	// fields are the h2c request's own header fields (the timestamp, and
	// auth when set)
	fields [2]h2c.Field
}

// resetAnswer clears the answer fields, keeping the buffers.
func (m *message) resetAnswer() {
	m.status, m.charged, m.hasCharged = 0, 0, false
	m.rbody, m.location, m.retryAfter = m.rbody[:0], m.location[:0], m.retryAfter[:0]
}

// build encodes c into m.
func (d *Driver) build(m *message, c *driver.Charge) {
	m.resetAnswer()
	m.get, m.auth = false, nil
	m.wantGrant = c.WantGrant
	m.sent = m.stamp.at(time.Now())
	m.body = m.body[:0]
	switch c.Op {
	case driver.ChargeBalance:
		m.get, m.auth = true, d.auth
		m.path = AppendAccountPath(m.path[:0], c.SUPI)
		return
	case driver.ChargeCreate, driver.ChargeEvent:
		m.path = append(m.path[:0], PathCreate...)
	case driver.ChargeUpdate:
		m.path = AppendUpdatePath(m.path[:0], c.Session)
	case driver.ChargeRelease:
		m.path = AppendReleasePath(m.path[:0], c.Session)
	}
	r := &m.nreq
	*r = Request{SUPI: c.SUPI, NFName: d.nfName, Seq: c.Seq, Now: c.Invoked, Retransmit: c.Retransmit,
		Line: Line{RatingGroup: c.RatingGroup, Request: c.Request, Requested: c.Requested, Offline: c.Offline, Reauthorized: c.Reauthorized}}
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	if c.Op == driver.ChargeCreate && d.notify != nil {
		r.NotifyBase, r.NotifyFlow = d.notify.base, c.Flow
	}
	switch {
	case c.Op == driver.ChargeEvent:
		r.OneTime, r.Node = true, "SMSF"
	case c.Op == driver.ChargeUpdate || c.Op == driver.ChargeRelease && !c.Used.IsZero():
		m.used = c.Used
		r.Line.Used = &m.used
	}
	if c.Op == driver.ChargeRelease {
		r.Line.Request = false
	}
	m.body = AppendBody(m.body, r)
}

// Error class of an answer without the expected Location.
const classNoLocation = "no_location"

var statusClasses = func() map[int]string {
	m := map[int]string{}
	for s := 100; s < 600; s++ {
		m[s] = "http_" + strconv.Itoa(s)
	}
	return m
}()

// classify fills o from m's answer to a request of op.
func classify(op driver.ChargeOp, m *message, o *driver.Outcome) {
	rx := o.Received
	o.Reset()
	o.Received = rx
	o.Charged, o.HasCharged = m.charged, m.hasCharged
	// A server error may or may not have applied the charge; a 503
	// (NF_CONGESTION: shed, or the core refused it for overload) did not:
	// the CHF answers it only for a request none of its instances
	// processed (peer.Client keeps an earlier attempt's doubt over a
	// later refusal). That holds for this attempt only: the engine does
	// not let a refusal of a retry resolve a request whose earlier
	// attempt is in doubt.
	o.Resolved = m.status < 500 || m.status == http.StatusServiceUnavailable
	var ok bool
	switch op {
	case driver.ChargeBalance, driver.ChargeUpdate:
		ok = m.status == http.StatusOK
	case driver.ChargeCreate, driver.ChargeEvent:
		ok = m.status == http.StatusCreated || m.status == http.StatusOK
	case driver.ChargeRelease:
		ok = m.status == http.StatusNoContent || m.status == http.StatusOK
	}
	if !ok {
		if c, found := statusClasses[m.status]; found {
			o.Class = c
		} else {
			o.Class = "http_other"
		}
		o.Gone = m.status == http.StatusNotFound
		o.Barred = m.status == http.StatusForbidden
		o.Shed = m.status == http.StatusServiceUnavailable
		if o.Shed && len(m.retryAfter) > 0 {
			o.RetryAfter, _ = ParseRetryAfter(m.retryAfter, time.Now())
		}
		return
	}
	if op == driver.ChargeCreate {
		ref := RefFromLocation(m.location)
		if len(ref) == 0 {
			o.Class = classNoLocation
			return
		}
		o.Ref = append(o.Ref, ref...)
	}
	if op != driver.ChargeBalance {
		FailedResultCodes(m.rbody, func(code []byte) {
			if o.Class == "" {
				o.Class = "rg_" + string(code)
				o.RatingGroupRefused = true
			}
		})
	}
	if m.wantGrant {
		ScanGrant(m.rbody, &o.Grant)
	}
}

// ErrStatus is returned by ReadAccount for an answer that is not an
// account.
var ErrStatus = errors.New("nchf: unexpected answer")

// ErrUnauthorized is returned by ReadAccount for a 401: the CGW guards
// the balance inquiry with its operator token and the driver sent none
// (Config.OperatorToken) or another one. Retrying cannot help.
var ErrUnauthorized = errors.New("nchf: the balance inquiry was refused (401)")

// exchange performs charges one at a time on a goroutine of a
// driver.Pool (every transport but the event loop).
type exchange struct {
	d  *Driver
	m  message
	hr h2c.ClientResponse // h2c's
}

// Do implements driver.Exchange.
func (e *exchange) Do(ctx context.Context, c *driver.Charge, o *driver.Outcome) error {
	e.d.build(&e.m, c)
	if err := e.send(ctx, c.Target); err != nil {
		return err
	}
	o.Received = time.Now()
	classify(c.Op, &e.m, o)
	return nil
}

// send sends e.m to target over the driver's transport and waits for the
// answer.
func (e *exchange) send(ctx context.Context, target int) error {
	var err error
	switch d := e.d; {
	case d.h2 != nil:
		err = d.h2.do(ctx, target, &e.m, &e.hr)
	case d.http1 != nil:
		err = d.http1.do(ctx, target, &e.m)
	default:
		err = d.std.do(ctx, target, &e.m)
	}
	return driver.Classify(err)
}
