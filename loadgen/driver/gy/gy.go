// Package gy is the load generator's Diameter Gy driver (RFC 4006 credit
// control through loadgen/gy): it turns driver.Charges into CCRs and
// classifies CCAs into driver.Outcomes.
//
// Config.Conns peer connections per target, each its own Origin-Host, as
// that many PGWs; Charge.Target picks the connection (targets × conns of
// them), so all the requests of a flow leave on one peer, as a PGW's
// would. A connection that fails is dialed again in the background; until
// then its requests fail as connection errors. create/update/release →
// CCR INITIAL/UPDATE/TERMINATION (CC-Request-Number = Charge.Seq), event
// → EVENT DIRECT_DEBITING, inquiry → EVENT CHECK_BALANCE; one MSCC per
// request. The Session-Id of a create, event or inquiry is
// "<Origin-Host>;<start>;<Charge.Flow>": a retransmission (T flag when
// Charge.Retransmit, and on every retry: Charge.Retry) repeats it. Error
// classes are gy_<Result-Code> and rg_<MSCC Result-Code>; 3004 (too busy)
// leaves the outcome unresolved (the engine retries it with the same
// identity), 5002/5030 end the session.
package gy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/loadgen/driver"
	gyc "github.com/chf-testbed/testbed/loadgen/gy"
)

// OriginRealm is the Origin-Realm of the load generator's Diameter peers;
// each connection's Origin-Host is "lg<pid>-<n>.loadgen.test" (n counts
// the connections of the process), so CGW allow-lists can match
// "*.loadgen.test".
const OriginRealm = "loadgen.test"

// DefaultConns is the number of Diameter peer connections per target
// when Config.Conns is 0.
const DefaultConns = 4

// Driver sends Gy. It implements driver.Driver.
type Driver struct {
	slots   []*slot
	timeout time.Duration
	mu      sync.Mutex     // orders starting redials against Close
	wg      sync.WaitGroup // redial goroutines
	closed  bool           // under mu
	stop    chan struct{}
	sink    atomic.Pointer[driver.NoticeSink]
}

// slot is one peer connection, replaced when it fails.
type slot struct {
	cfg      gyc.Config
	conn     atomic.Pointer[gyc.Conn] // nil while redialing
	sessBase string                   // "<Origin-Host>;<start>;"
}

var connSeq atomic.Uint32

// New dials every peer (CER/CEA), bounded by the timeout plus a second.
func New(cfg driver.Config) (*Driver, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = driver.DefaultTimeout
	}
	n := cfg.Conns
	if n <= 0 {
		n = DefaultConns
	}
	if len(cfg.Targets) == 0 {
		return nil, errors.New("cannot create the gy driver: no target")
	}
	d := &Driver{timeout: cfg.Timeout, stop: make(chan struct{})}
	onServer := func(abort bool, sid string) { d.serverRequest(abort, sid) }
	start := strconv.FormatInt(time.Now().Unix(), 10)
	pid := strconv.Itoa(os.Getpid())
	for _, addr := range cfg.Targets {
		for range n {
			host := "lg" + pid + "-" + strconv.FormatUint(uint64(connSeq.Add(1)), 10) + ".loadgen.test"
			d.slots = append(d.slots, &slot{
				cfg: gyc.Config{
					Addr: addr, OriginHost: host, OriginRealm: OriginRealm,
					// each request is bounded by its context; the
					// connection forgets it a little later
					Timeout:         cfg.Timeout + time.Second,
					OnServerRequest: onServer,
				},
				sessBase: host + ";" + start + ";",
			})
		}
	}
	// The CGW's Diameter listener may come up just after its HTTP port:
	// retry the first dial for a second more than the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second+cfg.Timeout)
	defer cancel()
	errs := make([]error, len(d.slots))
	var wg sync.WaitGroup
	for i, s := range d.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := gyc.DialConfig(ctx, s.cfg)
				if err == nil {
					s.conn.Store(c)
					return
				}
				if errors.Is(err, gyc.ErrRejected) || ctx.Err() != nil {
					errs[i] = err
					return
				}
				select {
				case <-ctx.Done():
					errs[i] = err
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		d.Close()
		return nil, fmt.Errorf("%w: %v", driver.ErrConnection, err)
	}
	return d, nil
}

// SetNoticeSink implements driver.Notifiable: the RARs and ASRs the CHF
// sends (answered by the peer connection at once) become notices for the
// flow named by their Session-Id's last field.
func (d *Driver) SetNoticeSink(sink driver.NoticeSink) bool {
	d.sink.Store(&sink)
	return true
}

// serverRequest hands a RAR (abort false) or ASR to the sink. The
// answer has been sent (DIAMETER_SUCCESS) already: a notice the sink has
// no room for, or a Session-Id this driver did not make, is dropped.
func (d *Driver) serverRequest(abort bool, sid string) {
	sink := d.sink.Load()
	if sink == nil {
		return
	}
	i := strings.LastIndexByte(sid, ';')
	flow, err := strconv.ParseUint(sid[i+1:], 10, 64)
	if i < 0 || err != nil {
		return
	}
	(*sink)(driver.Notice{Flow: flow, Abort: abort, Received: time.Now()})
}

// Targets implements driver.Driver: the peer connections.
func (d *Driver) Targets() int { return len(d.slots) }

// NewWorker implements driver.Driver: a driver.Pool of exchanges.
func (d *Driver) NewWorker() (driver.Worker, error) {
	return driver.NewPool(d.timeout, func() driver.Exchange { return &exchange{d: d} }), nil
}

// Close disconnects every peer (DPR/DPA) and stops redialing.
func (d *Driver) Close() {
	d.mu.Lock()
	closed := d.closed
	d.closed = true
	d.mu.Unlock()
	if closed {
		return
	}
	close(d.stop)
	d.wg.Wait()
	var wg sync.WaitGroup
	for _, s := range d.slots {
		if c := s.conn.Swap(nil); c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// exchange is one goroutine's CCR/CCA state, reused across requests.
type exchange struct {
	d   *Driver
	req gyc.Request
	svc [1]gyc.Service
	ans gyc.Answer
	sid []byte // Session-Id of an event, inquiry or create
}

var (
	supiIMSI   = []byte("imsi-")
	supiMSISDN = []byte("msisdn-")
)

// bytesString returns b as a string without copying; b must not change
// while the string is in use.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// prepare builds c's CCR into e.req.
func (e *exchange) prepare(s *slot, c *driver.Charge) error {
	r := &e.req
	svc := &e.svc[0]
	*svc = gyc.Service{RatingGroup: c.RatingGroup, Request: c.Request, Requested: c.Requested, Used: c.Used}
	if c.Reauthorized {
		svc.Reason, svc.HasReason = wire.ReasonForcedReauth, true
	}
	// The Session-Id and CC-Request-Number identify the request, so a
	// retry carries the T flag whatever the operation (RFC 4006 8.1).
	*r = gyc.Request{Number: c.Seq, Services: e.svc[:1], Retransmit: c.Retransmit || c.Retry}
	// Strings alias bytes owned by the caller or by e: the client copies
	// them while encoding, before Do returns.
	switch {
	case bytes.HasPrefix(c.SUPI, supiIMSI):
		r.IMSI = bytesString(c.SUPI[len(supiIMSI):])
	case bytes.HasPrefix(c.SUPI, supiMSISDN):
		r.MSISDN = bytesString(c.SUPI[len(supiMSISDN):])
	default:
		r.IMSI = bytesString(c.SUPI)
	}
	switch c.Op {
	case driver.ChargeCreate, driver.ChargeEvent, driver.ChargeBalance:
		e.sid = append(e.sid[:0], s.sessBase...)
		e.sid = strconv.AppendUint(e.sid, c.Flow, 10)
		r.SessionID = bytesString(e.sid)
	default:
		if len(c.Session) == 0 {
			return fmt.Errorf("%w: gy update or release without a session", driver.ErrProto)
		}
		r.SessionID = bytesString(c.Session)
	}
	switch c.Op {
	case driver.ChargeCreate:
		r.Type = gyc.Initial
	case driver.ChargeUpdate:
		r.Type = gyc.Update
	case driver.ChargeRelease:
		r.Type = gyc.Termination
		svc.Request = false
	case driver.ChargeEvent:
		r.Type, r.HasAction, r.Action = gyc.Event, true, gyc.DirectDebiting
	case driver.ChargeBalance:
		r.Type, r.HasAction, r.Action = gyc.Event, true, gyc.CheckBalance
		r.Services = nil
	default:
		return fmt.Errorf("%w: unknown charging operation %d", driver.ErrProto, c.Op)
	}
	return nil
}

// Do implements driver.Exchange.
func (e *exchange) Do(ctx context.Context, c *driver.Charge, o *driver.Outcome) error {
	d := e.d
	s := d.slots[uint(c.Target)%uint(len(d.slots))]
	conn := s.conn.Load()
	if conn == nil {
		return fmt.Errorf("%w: gy peer %s to %s is being redialed", driver.ErrConnection, s.cfg.OriginHost, s.cfg.Addr)
	}
	if err := e.prepare(s, c); err != nil {
		return err
	}
	if err := conn.Do(ctx, &e.req, &e.ans); err != nil {
		return d.failed(s, conn, err)
	}
	o.Reset()
	o.Received = time.Now()
	e.classify(c.Op, o)
	if c.WantGrant && len(e.ans.Grants) > 0 {
		g := &e.ans.Grants[0]
		o.Grant = driver.Grant{Has: true, Granted: g.Granted, Threshold: uint64(g.Threshold), Validity: g.ValidityTime}
	}
	return nil
}

// classify maps the decoded CCA onto o.
func (e *exchange) classify(op driver.ChargeOp, o *driver.Outcome) {
	a := &e.ans
	o.Charged, o.HasCharged = a.Charged, a.HasCost
	o.Resolved = true
	if a.ResultCode == wire.ResultSuccess && !a.ErrorBit {
		if op == driver.ChargeCreate {
			o.Ref = append(o.Ref[:0], e.sid...)
		}
		for i := range a.Grants {
			if c := a.Grants[i].ResultCode; c != 0 && c != wire.ResultSuccess {
				o.Class = class(rgClasses, "rg_other", c)
				o.Barred = c == wire.ResultEndUserServiceDenied
				o.RatingGroupRefused = true
				break
			}
		}
		return
	}
	o.Class = class(resultClasses, "gy_other", a.ResultCode)
	switch a.ResultCode {
	case wire.ResultEndUserServiceDenied:
		o.Barred = true
	case wire.ResultTooBusy:
		o.Resolved = false // the charge may or may not have been applied
		o.Shed = true
	case wire.ResultUnknownSessionID, wire.ResultUserUnknown:
		o.Gone = true
	}
}

// failed classifies a request's error and starts redialing a connection
// that closed.
func (d *Driver) failed(s *slot, conn *gyc.Conn, err error) error {
	if errors.Is(err, gyc.ErrClosed) && s.conn.CompareAndSwap(conn, nil) {
		d.mu.Lock()
		if d.closed {
			go conn.Close()
		} else {
			d.wg.Add(1)
			go d.redial(s, conn)
		}
		d.mu.Unlock()
	}
	if errors.Is(err, gyc.ErrTimeout) {
		return fmt.Errorf("%w: %v", driver.ErrTimeout, err)
	}
	return driver.Classify(err)
}

// redial closes the failed connection and dials its slot again until it
// succeeds or the driver closes.
func (d *Driver) redial(s *slot, old *gyc.Conn) {
	defer d.wg.Done()
	old.Close()
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout+time.Second)
		c, err := gyc.DialConfig(ctx, s.cfg)
		cancel()
		if err == nil {
			s.conn.Store(c) // Close waits for this goroutine, then closes c
			return
		}
		select {
		case <-d.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Error classes of Diameter answers ("gy_<Result-Code>") and of MSCCs
// ("rg_<Result-Code>") for the codes RFC 6733 and RFC 4006 use, built
// once so that classifying does not allocate; others are "gy_other" and
// "rg_other".
var resultClasses, rgClasses = func() (map[uint32]string, map[uint32]string) {
	res, rg := map[uint32]string{}, map[uint32]string{}
	for _, r := range [][2]uint32{{1000, 1020}, {2000, 2020}, {3000, 3020}, {4000, 4020}, {5000, 5050}} {
		for c := r[0]; c < r[1]; c++ {
			s := strconv.FormatUint(uint64(c), 10)
			res[c], rg[c] = "gy_"+s, "rg_"+s
		}
	}
	return res, rg
}()

func class(m map[uint32]string, other string, code uint32) string {
	if s, ok := m[code]; ok {
		return s
	}
	return other
}
