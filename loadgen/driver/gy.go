package driver

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
	"github.com/chf-testbed/testbed/loadgen/gy"
)

// GyOriginRealm is the Origin-Realm of the load generator's Diameter
// peers; each connection's Origin-Host is
// "lg<pid>-<n>.loadgen.test" (n counts the connections of the process), so
// CGW allow-lists can match "*.loadgen.test".
const GyOriginRealm = "loadgen.test"

// DefaultGyConns is the number of Diameter peer connections per target
// when Config.Conns is 0.
const DefaultGyConns = 4

// gyDriver ("gy") sends Diameter Gy credit control (RFC 4006) through
// loadgen/gy: Config.Conns peer connections per target, each its own
// Origin-Host, as that many PGWs. Request.Target picks the connection
// (targets × conns of them), so all the requests of a flow leave on one
// peer, as a PGW's would. A connection that fails is dialed again in the
// background; until then its requests fail with ErrConnection.
//
// Requests are built from Request.Charge (see Charging); answers fill
// Response.Status/Class/Charged (Cost-Information) and, on a create,
// Location with the Session-Id. Nothing is allocated per request.
type gyDriver struct {
	slots   []*gySlot
	timeout time.Duration
	mu      sync.Mutex     // orders starting redials against Close
	wg      sync.WaitGroup // redial goroutines
	closed  bool           // under mu
	stop    chan struct{}
}

// gySlot is one peer connection, replaced when it fails.
type gySlot struct {
	cfg      gy.Config
	conn     atomic.Pointer[gy.Conn] // nil while redialing
	sessBase string                  // "<Origin-Host>;<start>;"
	sessions atomic.Uint64
}

// gyState is the per-Response state of the gy driver.
type gyState struct {
	req  gy.Request
	svc  [1]gy.Service
	ans  gy.Answer
	sid  []byte // Session-Id of an event, inquiry or create being built
	op   ChargeOp
	slot *gySlot
	conn *gy.Conn
	done func(error)
	cb   func(*gy.Answer, error)
}

var gyConnSeq atomic.Uint32

func newGy(cfg Config) (*gyDriver, error) {
	n := cfg.Conns
	if n <= 0 {
		n = DefaultGyConns
	}
	if len(cfg.Targets) == 0 {
		return nil, errors.New("cannot create gy driver: no target")
	}
	d := &gyDriver{timeout: cfg.Timeout, stop: make(chan struct{})}
	start := strconv.FormatInt(time.Now().Unix(), 10)
	pid := strconv.Itoa(os.Getpid())
	for _, addr := range cfg.Targets {
		for range n {
			host := "lg" + pid + "-" + strconv.FormatUint(uint64(gyConnSeq.Add(1)), 10) + ".loadgen.test"
			s := &gySlot{
				cfg: gy.Config{
					Addr: addr, OriginHost: host, OriginRealm: GyOriginRealm,
					// the engine gives up on a request at Timeout itself;
					// the connection forgets it a little later
					Timeout: cfg.Timeout + time.Second,
				},
				sessBase: host + ";" + start + ";",
			}
			d.slots = append(d.slots, s)
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
				c, err := gy.DialConfig(ctx, s.cfg)
				if err == nil {
					s.conn.Store(c)
					return
				}
				if errors.Is(err, gy.ErrRejected) || ctx.Err() != nil {
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
		return nil, fmt.Errorf("%w: %v", ErrConnection, err)
	}
	return d, nil
}

// Charging implements Charging.
func (d *gyDriver) Charging() {}

func (d *gyDriver) Targets() int { return len(d.slots) }

// Close disconnects every peer (DPR/DPA) and stops redialing.
func (d *gyDriver) Close() {
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

// prepare builds req's CCR into resp's state and returns the connection
// to send it on.
func (d *gyDriver) prepare(req *Request, resp *Response) (*gyState, error) {
	resp.Reset()
	c := req.Charge
	if c == nil {
		return nil, fmt.Errorf("%w: the gy driver needs Request.Charge", ErrProto)
	}
	s := d.slots[uint(req.Target)%uint(len(d.slots))]
	conn := s.conn.Load()
	if conn == nil {
		return nil, fmt.Errorf("%w: gy peer %s to %s is being redialed", ErrConnection, s.cfg.OriginHost, s.cfg.Addr)
	}
	st := &resp.gy
	st.op, st.slot, st.conn = c.Op, s, conn
	r := &st.req
	svc := &st.svc[0]
	*svc = gy.Service{RatingGroup: c.RatingGroup, Request: c.Request, Requested: c.Requested, Used: c.Used}
	*r = gy.Request{Number: c.Seq, Services: st.svc[:1]}
	// Strings alias bytes owned by the caller or by st: the client copies
	// them while encoding, before Go returns.
	switch {
	case bytes.HasPrefix(c.SUPI, supiIMSI):
		r.IMSI = bytesString(c.SUPI[len(supiIMSI):])
	case bytes.HasPrefix(c.SUPI, supiMSISDN):
		r.MSISDN = bytesString(c.SUPI[len(supiMSISDN):])
	default:
		r.IMSI = bytesString(c.SUPI)
	}
	switch c.Op {
	case ChargeCreate, ChargeEvent, ChargeBalance:
		st.sid = append(st.sid[:0], s.sessBase...)
		st.sid = strconv.AppendUint(st.sid, s.sessions.Add(1), 10)
		r.SessionID = bytesString(st.sid)
	default:
		if len(c.Session) == 0 {
			return nil, fmt.Errorf("%w: gy update or release without a session", ErrProto)
		}
		r.SessionID = bytesString(c.Session)
	}
	switch c.Op {
	case ChargeCreate:
		r.Type = gy.Initial
		resp.Location = append(resp.Location[:0], st.sid...)
	case ChargeUpdate:
		r.Type = gy.Update
	case ChargeRelease:
		r.Type = gy.Termination
		svc.Request = false
	case ChargeEvent:
		r.Type, r.HasAction, r.Action = gy.Event, true, gy.DirectDebiting
	case ChargeBalance:
		r.Type, r.HasAction, r.Action = gy.Event, true, gy.CheckBalance
		r.Services = nil
	default:
		return nil, fmt.Errorf("%w: unknown charging operation %d", ErrProto, c.Op)
	}
	return st, nil
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

func (d *gyDriver) Do(ctx context.Context, req *Request, resp *Response) error {
	st, err := d.prepare(req, resp)
	if err != nil {
		return err
	}
	if err := st.conn.Do(ctx, &st.req, &st.ans); err != nil {
		return d.failed(st, err)
	}
	resp.fillGy()
	return nil
}

// Start implements Async: done runs on the connection's reader goroutine.
func (d *gyDriver) Start(req *Request, resp *Response, done func(error)) error {
	st, err := d.prepare(req, resp)
	if err != nil {
		return err
	}
	st.done = done
	if st.cb == nil {
		st.cb = func(_ *gy.Answer, err error) {
			if err != nil {
				resp.gy.done(d.failed(&resp.gy, err))
				return
			}
			resp.fillGy()
			resp.gy.done(nil)
		}
	}
	if err := st.conn.Go(&st.req, &st.ans, st.cb); err != nil {
		return d.failed(st, err)
	}
	return nil
}

// failed classifies a request's error and starts redialing a connection
// that closed.
func (d *gyDriver) failed(st *gyState, err error) error {
	if errors.Is(err, gy.ErrClosed) && st.slot.conn.CompareAndSwap(st.conn, nil) {
		d.mu.Lock()
		if d.closed {
			go st.conn.Close() // not here: this may be its reader goroutine
		} else {
			d.wg.Add(1)
			go d.redial(st.slot, st.conn)
		}
		d.mu.Unlock()
	}
	if errors.Is(err, gy.ErrTimeout) {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return classify(err)
}

// redial closes the failed connection and dials its slot again until it
// succeeds or the driver closes.
func (d *gyDriver) redial(s *gySlot, old *gy.Conn) {
	defer d.wg.Done()
	old.Close()
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout+time.Second)
		c, err := gy.DialConfig(ctx, s.cfg)
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

// fillGy maps the decoded CCA onto r.
func (r *Response) fillGy() {
	st := &r.gy
	a := &st.ans
	r.Charged, r.HasCharged = a.Charged, a.HasCost
	if a.ResultCode == wire.ResultSuccess && !a.ErrorBit {
		r.Status = gySuccessStatus[st.op]
		for i := range a.Grants {
			if c := a.Grants[i].ResultCode; c != 0 && c != wire.ResultSuccess {
				r.Class = gyClass(gyRGClasses, "rg_other", c)
				break
			}
		}
		return
	}
	r.Class = gyClass(gyResultClasses, "gy_other", a.ResultCode)
	switch {
	case a.ResultCode == wire.ResultTooBusy:
		r.Status = 503 // the charge may or may not have been applied
	case a.ResultCode == wire.ResultUnknownSessionID || a.ResultCode == wire.ResultUserUnknown:
		r.Status = 404
	case a.ResultCode == wire.ResultCreditLimitReached || a.ResultCode == wire.ResultEndUserServiceDenied:
		r.Status = 403
	default:
		r.Status = 400
	}
}

// gySuccessStatus is the Nchf status of a successful transaction.
var gySuccessStatus = [...]int{ChargeCreate: 201, ChargeUpdate: 200, ChargeRelease: 204, ChargeEvent: 201, ChargeBalance: 200}

// Error classes of Diameter answers ("gy_<Result-Code>") and of MSCCs
// ("rg_<Result-Code>") for the codes RFC 6733 and RFC 4006 use, built
// once so that classifying does not allocate; others are "gy_other" and
// "rg_other".
var gyResultClasses, gyRGClasses = func() (map[uint32]string, map[uint32]string) {
	res, rg := map[uint32]string{}, map[uint32]string{}
	for _, r := range [][2]uint32{{1000, 1020}, {2000, 2020}, {3000, 3020}, {4000, 4020}, {5000, 5050}} {
		for c := r[0]; c < r[1]; c++ {
			s := strconv.FormatUint(uint64(c), 10)
			res[c], rg[c] = "gy_"+s, "rg_"+s
		}
	}
	return res, rg
}()

func gyClass(m map[uint32]string, other string, code uint32) string {
	if s, ok := m[code]; ok {
		return s
	}
	return other
}

// ParseDiameterTargets splits "diameter://a:3868,diameter://b:3868" (the
// scheme may be omitted) and checks every address; the returned values
// are host:port.
func ParseDiameterTargets(s string) ([]string, error) {
	return parseTargets(s, "diameter", "want diameter://HOST:PORT", true)
}

// IsDiameterTarget reports whether a --target value names Diameter peers.
func IsDiameterTarget(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "diameter://")
}
