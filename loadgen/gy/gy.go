// Package gy is an allocation-light Diameter Gy/Ro (RFC 4006) client for
// the load generator: DialConfig opens one peer connection (TCP, CER/CEA,
// DWR/DWA watchdog, DPR/DPA on Close), Go sends a Credit-Control-Request
// asynchronously and calls back with the decoded Credit-Control-Answer,
// Do waits for it. The Gy driver (loadgen/driver/gy) holds N of them, each
// with its own Origin-Host, as N PGWs would; package gytest does the same
// for tests. CCRs are encoded and CCAs decoded by hand
// (package cgw/diameter/wire); only the CER goes through go-diameter.
package gy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	"github.com/chf-testbed/testbed/chf"
)

// Errors of the client.
var (
	ErrClosed       = errors.New("gy: connection closed")
	ErrTimeout      = errors.New("gy: no answer within the timeout")
	ErrTooManyCalls = errors.New("gy: too many requests pending on the connection")
	ErrRejected     = errors.New("gy: capabilities exchange rejected")
)

// CC-Request-Type values.
const (
	Initial     = wire.RequestInitial
	Update      = wire.RequestUpdate
	Termination = wire.RequestTermination
	Event       = wire.RequestEvent
)

// Requested-Action values for Event requests.
const (
	DirectDebiting = wire.ActionDirectDebiting
	CheckBalance   = wire.ActionCheckBalance
)

// Check-Balance-Result values.
const (
	EnoughCredit = wire.EnoughCredit
	NoCredit     = wire.NoCredit
)

// Config configures one connection.
type Config struct {
	Addr             string // host:port of the CGW's Diameter listener
	OriginHost       string // this peer's Origin-Host (required)
	OriginRealm      string // this peer's Origin-Realm (required)
	DestinationRealm string // default "chf.test"
	// ServiceContextID is sent when a Request names none (default
	// "32251@3gpp.org", PS charging).
	ServiceContextID string
	// WatchdogInterval is Tw: a DWR after Tw of silence, disconnect after
	// 2·Tw. Default 30s.
	WatchdogInterval time.Duration
	// Timeout bounds dialing plus CER/CEA, and how long a request may
	// wait for its answer before failing with ErrTimeout. Default 5s.
	Timeout time.Duration
	// MaxPending bounds the requests awaiting an answer (default 65536);
	// beyond it Go returns ErrTooManyCalls.
	MaxPending int
	// Dial opens the TCP connection (default: a net.Dialer with Timeout);
	// set it to bind a source address or to wrap the connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnServerRequest, when set, is called (on the reader goroutine, after
	// the answer was sent) for each RAR (abort false) or ASR (abort true)
	// the CHF sends, with its Session-Id; it must not block.
	OnServerRequest func(abort bool, sessionID string)
}

// Service is one Multiple-Services-Credit-Control of a request.
type Service struct {
	RatingGroup uint32
	// Request asks for quota: a Requested-Service-Unit with Requested
	// (empty Requested = the CHF picks the amount).
	Request   bool
	Requested chf.Units
	// Used is reported in a Used-Service-Unit when not zero.
	Used chf.Units
	// UsedAVPs are raw AVPs appended inside that Used-Service-Unit after
	// Used's (a peer repeating a unit AVP, as tests of the CGW send).
	UsedAVPs []byte
	// Reason, when HasReason, is sent as the MSCC's Reporting-Reason
	// (wire.ReasonThreshold, ReasonFinal, ...).
	Reason    uint32
	HasReason bool
}

// Request is one CCR. The client copies what it needs while encoding, so
// a Request may be reused as soon as Go returns.
type Request struct {
	SessionID string
	Type      uint32 // Initial, Update, Termination, Event
	Number    uint32 // CC-Request-Number
	// IMSI (digits) is sent as Subscription-Id END_USER_IMSI; else MSISDN
	// as END_USER_E164.
	IMSI   string
	MSISDN string
	// ServiceContextID overrides Config.ServiceContextID.
	ServiceContextID string
	// Action is the Requested-Action, sent when HasAction (Event requests).
	Action    uint32
	HasAction bool
	Services  []Service
	// Retransmit sets the T flag; with EndToEnd set to the id of the
	// first attempt (Answer.EndToEnd) it is a retransmission.
	Retransmit bool
	EndToEnd   uint32 // 0: a fresh end-to-end id
}

// Grant is one MSCC of an answer.
type Grant struct {
	RatingGroup      uint32
	ResultCode       uint32 // 0 when absent
	Granted          chf.Units
	ValidityTime     uint32
	QuotaHoldingTime uint32
	FinalUnit        bool   // Final-Unit-Indication present
	FinalUnitAction  uint32 // 0 TERMINATE, 1 REDIRECT, 2 RESTRICT_ACCESS
	// RedirectAddressType and RedirectServer are the Redirect-Server of a
	// REDIRECT; FilterID the Filter-Id of a RESTRICT_ACCESS.
	RedirectAddressType uint32
	RedirectServer      string
	FilterID            string
	// Threshold is the Volume-, Time- or Unit-Quota-Threshold (0 = none).
	Threshold uint32
}

// Answer is a decoded CCA. Grants is reused across calls with the same
// Answer.
type Answer struct {
	ResultCode    uint32
	ErrorBit      bool // E flag (protocol error)
	RequestType   uint32
	RequestNumber uint32
	EndToEnd      uint32
	Grants        []Grant
	// Charged is Cost-Information/Unit-Value/Value-Digits: the amount this
	// request debited in minor units of CurrencyCode (the CGW reports
	// minor units with Exponent = -minor digits); HasCost tells whether
	// Cost-Information was present.
	Charged      int64
	CostExponent int32
	CurrencyCode uint32
	HasCost      bool
	// CheckBalanceResult answers a CHECK_BALANCE event when
	// HasCheckBalance.
	CheckBalanceResult uint32
	HasCheckBalance    bool
	// FailedAVP is the code of the first AVP inside Failed-AVP, or 0.
	FailedAVP uint32
}

func (a *Answer) reset() {
	g := a.Grants[:0]
	*a = Answer{Grants: g}
}

// pending is one request awaiting its answer.
type pending struct {
	ans      *Answer
	done     func(*Answer, error)
	ch       chan error
	deadline int64 // unix nanos
}

// Conn is one Diameter peer connection. It is safe for concurrent use.
type Conn struct {
	cfg   Config
	conn  net.Conn
	br    *bufio.Reader
	ident []byte // Origin-Host, Origin-Realm, Destination-Realm, Auth-Application-Id

	wmu      sync.Mutex
	bw       *bufio.Writer
	wbuf     []byte
	hbh      uint32
	e2e      uint32
	pendingW atomic.Int32

	mu      sync.Mutex
	pending map[uint32]pending
	closed  bool
	err     error

	lastRead   atomic.Int64
	dwrPending atomic.Bool
	closing    atomic.Bool
	done       chan struct{}
	readerDone chan struct{}
	sessions   atomic.Uint64
	sessBase   string
	stateID    uint32
}

var chanPool = sync.Pool{New: func() any { return make(chan error, 1) }}

// DialConfig connects, performs the capabilities exchange and starts the
// reader and the watchdog.
func DialConfig(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.OriginHost == "" || cfg.OriginRealm == "" {
		return nil, errors.New("cannot dial gy peer: Origin-Host and Origin-Realm are required")
	}
	if cfg.DestinationRealm == "" {
		cfg.DestinationRealm = "chf.test"
	}
	if cfg.ServiceContextID == "" {
		cfg.ServiceContextID = "32251@3gpp.org"
	}
	if cfg.WatchdogInterval <= 0 {
		cfg.WatchdogInterval = 30 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 65536
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.Timeout}
		cfg.Dial = d.DialContext
	}
	nc, err := cfg.Dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot dial gy peer %s: %w", cfg.Addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	now := time.Now()
	c := &Conn{
		cfg:        cfg,
		conn:       nc,
		br:         bufio.NewReaderSize(nc, 64<<10),
		bw:         bufio.NewWriterSize(nc, 64<<10),
		wbuf:       make([]byte, 0, 1024),
		hbh:        uint32(now.UnixNano()),
		e2e:        uint32(now.Unix())<<20 | uint32(now.Nanosecond())&0xfffff,
		pending:    make(map[uint32]pending, 1024),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		stateID:    uint32(now.Unix()),
		sessBase:   cfg.OriginHost + ";" + strconv.FormatUint(uint64(now.Unix()), 10) + ";",
	}
	c.ident = wire.AppendString(nil, wire.CodeOriginHost, wire.AVPMandatory, 0, cfg.OriginHost)
	c.ident = wire.AppendString(c.ident, wire.CodeOriginRealm, wire.AVPMandatory, 0, cfg.OriginRealm)
	c.ident = wire.AppendString(c.ident, wire.CodeDestinationRealm, wire.AVPMandatory, 0, cfg.DestinationRealm)
	c.ident = wire.AppendUint32(c.ident, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, wire.AppCreditControl)
	if err := c.exchangeCapabilities(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.watchdog()
	return c, nil
}

func (c *Conn) exchangeCapabilities(ctx context.Context) error {
	deadline := time.Now().Add(c.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.conn.SetDeadline(deadline)
	defer c.conn.SetDeadline(time.Time{})
	m := diam.NewRequest(diam.CapabilitiesExchange, 0, dict.Default)
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(c.cfg.OriginHost))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(c.cfg.OriginRealm))
	ip := net.IPv4(127, 0, 0, 1)
	if a, ok := c.conn.LocalAddr().(*net.TCPAddr); ok {
		ip = a.IP
	}
	m.NewAVP(avp.HostIPAddress, avp.Mbit, 0, datatype.Address(ip))
	m.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(0))
	m.NewAVP(avp.ProductName, 0, 0, datatype.UTF8String("chf-testbed-loadgen"))
	m.NewAVP(avp.OriginStateID, avp.Mbit, 0, datatype.Unsigned32(uint32(time.Now().Unix())))
	m.NewAVP(avp.SupportedVendorID, avp.Mbit, 0, datatype.Unsigned32(wire.Vendor3GPP))
	m.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(wire.AppCreditControl))
	if _, err := m.WriteTo(c.conn); err != nil {
		return fmt.Errorf("cannot send CER to %s: %w", c.cfg.Addr, err)
	}
	raw, err := wire.ReadMessage(c.br, nil, 1<<20)
	if err != nil {
		return fmt.Errorf("cannot read CEA from %s: %w", c.cfg.Addr, err)
	}
	ans, err := diam.ReadMessage(bytes.NewReader(raw), dict.Default)
	if err != nil {
		return fmt.Errorf("cannot decode CEA from %s: %w", c.cfg.Addr, err)
	}
	if ans.Header.CommandCode != diam.CapabilitiesExchange || ans.Header.CommandFlags&diam.RequestFlag != 0 {
		return fmt.Errorf("cannot exchange capabilities with %s: got command %d: %w", c.cfg.Addr, ans.Header.CommandCode, ErrRejected)
	}
	rc, err := ans.FindAVP(avp.ResultCode, 0)
	if err != nil || rc == nil {
		return fmt.Errorf("cannot exchange capabilities with %s: CEA without Result-Code: %w", c.cfg.Addr, ErrRejected)
	}
	if v, _ := rc.Data.(datatype.Unsigned32); uint32(v) != wire.ResultSuccess {
		return fmt.Errorf("cannot exchange capabilities with %s: Result-Code %d: %w", c.cfg.Addr, uint32(v), ErrRejected)
	}
	return nil
}

// NewSessionID returns a unique Session-Id
// "<Origin-Host>;<start time>;<counter>" (RFC 6733 §8.8).
func (c *Conn) NewSessionID() string {
	return c.sessBase + strconv.FormatUint(c.sessions.Add(1), 10)
}

// OriginHost is this connection's Origin-Host.
func (c *Conn) OriginHost() string { return c.cfg.OriginHost }

// Go sends req and calls done on the connection's reader goroutine with
// ans filled in (err nil), or with an error (ErrClosed, ErrTimeout, a
// write error). done must not block; ans is owned by the client until
// done is called. When Go returns an error, done is not called.
func (c *Conn) Go(req *Request, ans *Answer, done func(*Answer, error)) error {
	return c.send(req, pending{ans: ans, done: done})
}

// Do sends req and waits for its answer, filling ans.
func (c *Conn) Do(ctx context.Context, req *Request, ans *Answer) error {
	ch := chanPool.Get().(chan error)
	hbh, err := c.sendHBH(req, pending{ans: ans, ch: ch})
	if err != nil {
		chanPool.Put(ch)
		return err
	}
	select {
	case err := <-ch:
		chanPool.Put(ch)
		return err
	case <-ctx.Done():
		c.mu.Lock()
		_, mine := c.pending[hbh]
		delete(c.pending, hbh)
		c.mu.Unlock()
		if !mine { // the reader has it: wait so ans is not written after return
			err := <-ch
			chanPool.Put(ch)
			return err
		}
		chanPool.Put(ch)
		return fmt.Errorf("cannot get CCA: %w", ctx.Err())
	}
}

func (c *Conn) send(req *Request, p pending) error {
	_, err := c.sendHBH(req, p)
	return err
}

func (c *Conn) sendHBH(req *Request, p pending) (uint32, error) {
	p.deadline = time.Now().Add(c.cfg.Timeout).UnixNano()
	c.pendingW.Add(1)
	c.wmu.Lock()
	c.hbh++
	hbh := c.hbh
	e2e := req.EndToEnd
	if e2e == 0 {
		c.e2e++
		e2e = c.e2e
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.pendingW.Add(-1)
		c.wmu.Unlock()
		return 0, ErrClosed
	}
	if len(c.pending) >= c.cfg.MaxPending {
		c.mu.Unlock()
		c.pendingW.Add(-1)
		c.wmu.Unlock()
		return 0, ErrTooManyCalls
	}
	c.pending[hbh] = p
	c.mu.Unlock()
	c.wbuf = c.appendCCR(c.wbuf[:0], req, hbh, e2e)
	_, err := c.bw.Write(c.wbuf)
	if c.pendingW.Add(-1) == 0 && err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		_, mine := c.pending[hbh]
		delete(c.pending, hbh)
		c.mu.Unlock()
		c.conn.Close()
		if mine {
			return 0, fmt.Errorf("cannot send CCR: %w", err)
		}
		// the reader already failed it and will call back
	}
	return hbh, nil
}

func (c *Conn) appendCCR(dst []byte, req *Request, hbh, e2e uint32) []byte {
	return AppendCCR(dst, c.ident, c.cfg.ServiceContextID, req, hbh, e2e)
}

// AppendCCR appends a CCR for req to dst. ident holds the pre-encoded
// Origin-Host, Origin-Realm, Destination-Realm and Auth-Application-Id
// AVPs (see AppendIdentity); serviceContext is used when req names none.
func AppendCCR(dst, ident []byte, serviceContext string, req *Request, hbh, e2e uint32) []byte {
	start := len(dst)
	flags := wire.FlagRequest | wire.FlagProxiable
	if req.Retransmit {
		flags |= wire.FlagRetransmitted
	}
	dst = wire.AppendHeader(dst, flags, wire.CmdCreditControl, wire.AppCreditControl, hbh, e2e)
	dst = wire.AppendString(dst, wire.CodeSessionID, wire.AVPMandatory, 0, req.SessionID)
	dst = append(dst, ident...)
	sc := req.ServiceContextID
	if sc == "" {
		sc = serviceContext
	}
	dst = wire.AppendString(dst, wire.CodeServiceContextID, wire.AVPMandatory, 0, sc)
	dst = wire.AppendUint32(dst, wire.CodeCCRequestType, wire.AVPMandatory, 0, req.Type)
	dst = wire.AppendUint32(dst, wire.CodeCCRequestNumber, wire.AVPMandatory, 0, req.Number)
	if req.IMSI != "" || req.MSISDN != "" {
		typ, data := wire.SubscriptionIMSI, req.IMSI
		if data == "" {
			typ, data = wire.SubscriptionE164, req.MSISDN
		}
		var g int
		dst, g = wire.BeginGroup(dst, wire.CodeSubscriptionID, wire.AVPMandatory, 0)
		dst = wire.AppendUint32(dst, wire.CodeSubscriptionIDType, wire.AVPMandatory, 0, typ)
		dst = wire.AppendString(dst, wire.CodeSubscriptionIDData, wire.AVPMandatory, 0, data)
		dst = wire.EndGroup(dst, g)
	}
	if req.HasAction {
		dst = wire.AppendUint32(dst, wire.CodeRequestedAction, wire.AVPMandatory, 0, req.Action)
	}
	if len(req.Services) > 0 {
		dst = wire.AppendUint32(dst, wire.CodeMultipleServicesInd, wire.AVPMandatory, 0, 1)
	}
	for i := range req.Services {
		s := &req.Services[i]
		var m int
		dst, m = wire.BeginGroup(dst, wire.CodeMSCC, wire.AVPMandatory, 0)
		if s.Request {
			var g int
			dst, g = wire.BeginGroup(dst, wire.CodeRequestedServiceUnit, wire.AVPMandatory, 0)
			dst = wire.AppendUnits(dst, &s.Requested)
			dst = wire.EndGroup(dst, g)
		}
		if !s.Used.IsZero() || len(s.UsedAVPs) > 0 {
			var g int
			dst, g = wire.BeginGroup(dst, wire.CodeUsedServiceUnit, wire.AVPMandatory, 0)
			dst = wire.AppendUnits(dst, &s.Used)
			dst = append(dst, s.UsedAVPs...)
			dst = wire.EndGroup(dst, g)
		}
		dst = wire.AppendUint32(dst, wire.CodeRatingGroup, wire.AVPMandatory, 0, s.RatingGroup)
		if s.HasReason {
			dst = wire.AppendUint32(dst, wire.CodeReportingReason, wire.AVPMandatory, wire.Vendor3GPP, s.Reason)
		}
		dst = wire.EndGroup(dst, m)
	}
	wire.SetLength(dst[start:])
	return dst
}

// AppendIdentity returns the pre-encoded identity AVPs AppendCCR needs.
func AppendIdentity(dst []byte, originHost, originRealm, destRealm string) []byte {
	dst = wire.AppendString(dst, wire.CodeOriginHost, wire.AVPMandatory, 0, originHost)
	dst = wire.AppendString(dst, wire.CodeOriginRealm, wire.AVPMandatory, 0, originRealm)
	dst = wire.AppendString(dst, wire.CodeDestinationRealm, wire.AVPMandatory, 0, destRealm)
	return wire.AppendUint32(dst, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, wire.AppCreditControl)
}

// DecodeCCA decodes a whole CCA message into a (Grants reused).
func DecodeCCA(msg []byte, a *Answer) error {
	a.reset()
	h, err := wire.ParseHeader(msg)
	if err != nil {
		return fmt.Errorf("cannot decode CCA: %w", err)
	}
	a.EndToEnd = h.EndToEnd
	a.ErrorBit = h.Flags&wire.FlagError != 0
	it := wire.MessageIter(msg)
	var v wire.AVP
	for it.Next(&v) {
		if v.Vendor != 0 {
			continue
		}
		switch v.Code {
		case wire.CodeResultCode:
			a.ResultCode, _ = wire.Uint32(v.Data)
		case wire.CodeCCRequestType:
			a.RequestType, _ = wire.Uint32(v.Data)
		case wire.CodeCCRequestNumber:
			a.RequestNumber, _ = wire.Uint32(v.Data)
		case wire.CodeCheckBalanceResult:
			a.CheckBalanceResult, a.HasCheckBalance = wire.Uint32(v.Data)
		case wire.CodeFailedAVP:
			in := wire.NewIter(v.Data)
			var f wire.AVP
			if in.Next(&f) {
				a.FailedAVP = f.Code
			}
		case wire.CodeCostInformation:
			decodeCost(v.Data, a)
		case wire.CodeMSCC:
			a.Grants = append(a.Grants, decodeGrant(v.Data))
		}
	}
	if it.Err() != nil {
		return fmt.Errorf("cannot decode CCA: %w", it.Err())
	}
	return nil
}

func decodeCost(b []byte, a *Answer) {
	a.HasCost = true
	it := wire.NewIter(b)
	var v wire.AVP
	for it.Next(&v) {
		switch v.Code {
		case wire.CodeCurrencyCode:
			a.CurrencyCode, _ = wire.Uint32(v.Data)
		case wire.CodeUnitValue:
			in := wire.NewIter(v.Data)
			var u wire.AVP
			for in.Next(&u) {
				switch u.Code {
				case wire.CodeValueDigits:
					d, _ := wire.Uint64(u.Data)
					a.Charged = int64(d)
				case wire.CodeExponent:
					e, _ := wire.Uint32(u.Data)
					a.CostExponent = int32(e)
				}
			}
		}
	}
}

func decodeGrant(b []byte) Grant {
	var g Grant
	it := wire.NewIter(b)
	var v wire.AVP
	for it.Next(&v) {
		if v.Vendor == wire.Vendor3GPP {
			switch v.Code {
			case wire.CodeQuotaHoldingTime:
				g.QuotaHoldingTime, _ = wire.Uint32(v.Data)
			case wire.CodeVolumeQuotaThreshold, wire.CodeTimeQuotaThreshold, wire.CodeUnitQuotaThreshold:
				g.Threshold, _ = wire.Uint32(v.Data)
			}
			continue
		}
		if v.Vendor != 0 {
			continue
		}
		switch v.Code {
		case wire.CodeRatingGroup:
			g.RatingGroup, _ = wire.Uint32(v.Data)
		case wire.CodeResultCode:
			g.ResultCode, _ = wire.Uint32(v.Data)
		case wire.CodeValidityTime:
			g.ValidityTime, _ = wire.Uint32(v.Data)
		case wire.CodeGrantedServiceUnit:
			decodeUnits(v.Data, &g.Granted)
		case wire.CodeFinalUnitIndication:
			g.FinalUnit = true
			in := wire.NewIter(v.Data)
			var f wire.AVP
			for in.Next(&f) {
				switch f.Code {
				case wire.CodeFinalUnitAction:
					g.FinalUnitAction, _ = wire.Uint32(f.Data)
				case wire.CodeFilterID:
					g.FilterID = string(f.Data)
				case wire.CodeRedirectServer:
					rs := wire.NewIter(f.Data)
					var r wire.AVP
					for rs.Next(&r) {
						switch r.Code {
						case wire.CodeRedirectAddressType:
							g.RedirectAddressType, _ = wire.Uint32(r.Data)
						case wire.CodeRedirectServerAddress:
							g.RedirectServer = string(r.Data)
						}
					}
				}
			}
		}
	}
	return g
}

func decodeUnits(b []byte, u *chf.Units) {
	it := wire.NewIter(b)
	var v wire.AVP
	for it.Next(&v) {
		switch v.Code {
		case wire.CodeCCTime:
			u.Time, _ = wire.Uint32(v.Data)
		case wire.CodeCCTotalOctets:
			u.TotalVolume, _ = wire.Uint64(v.Data)
		case wire.CodeCCInputOctets:
			u.UplinkVolume, _ = wire.Uint64(v.Data)
		case wire.CodeCCOutputOctets:
			u.DownlinkVolume, _ = wire.Uint64(v.Data)
		case wire.CodeCCServiceSpecificUnits:
			u.ServiceSpecific, _ = wire.Uint64(v.Data)
		}
	}
}

func (c *Conn) readLoop() {
	defer close(c.readerDone)
	var buf []byte
	var err error
	for {
		buf, err = wire.ReadMessage(c.br, buf, 1<<20)
		if err != nil {
			break
		}
		c.lastRead.Store(time.Now().UnixNano())
		h, _ := wire.ParseHeader(buf)
		switch {
		case h.Code == wire.CmdCreditControl && !h.IsRequest():
			c.mu.Lock()
			p, ok := c.pending[h.HopByHop]
			delete(c.pending, h.HopByHop)
			c.mu.Unlock()
			if ok {
				c.complete(p, DecodeCCA(buf, p.ans))
			}
		case (h.Code == wire.CmdReAuth || h.Code == wire.CmdAbortSession) && h.IsRequest():
			c.answerServerRequest(h, buf)
		case h.Code == wire.CmdDeviceWatchdog && h.IsRequest():
			c.answerBase(h, true)
		case h.Code == wire.CmdDeviceWatchdog:
			c.dwrPending.Store(false)
		case h.Code == wire.CmdDisconnectPeer && h.IsRequest():
			c.closing.Store(true)
			c.answerBase(h, false)
		case h.Code == wire.CmdDisconnectPeer:
			err = ErrClosed
		case h.IsRequest():
			c.answerUnsupported(h)
		}
		if err != nil {
			break
		}
	}
	c.fail(err)
}

func (c *Conn) complete(p pending, err error) {
	if p.ch != nil {
		p.ch <- err
		return
	}
	p.done(p.ans, err)
}

// fail closes the connection and fails every pending request.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = cause
	pend := c.pending
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
	c.conn.Close()
	err := fmt.Errorf("%w: %v", ErrClosed, cause)
	for _, p := range pend {
		c.complete(p, err)
	}
}

func (c *Conn) writeRaw(b []byte) {
	c.pendingW.Add(1)
	c.wmu.Lock()
	_, err := c.bw.Write(b)
	if c.pendingW.Add(-1) == 0 && err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.conn.Close()
	}
}

// answerServerRequest answers a RAR or ASR from the CHF with DIAMETER_SUCCESS
// (echoing its Session-Id) and hands it to Config.OnServerRequest, which
// re-authorises (an update) or aborts (a termination) as a PGW would.
func (c *Conn) answerServerRequest(h wire.Header, msg []byte) {
	var sid []byte
	it := wire.MessageIter(msg)
	var a wire.AVP
	for it.Next(&a) {
		if a.Code == wire.CodeSessionID && a.Vendor == 0 {
			sid = a.Data
			break
		}
	}
	m := wire.AppendHeader(make([]byte, 0, 128+len(sid)), 0, h.Code, h.AppID, h.HopByHop, h.EndToEnd)
	m = wire.AppendBytes(m, wire.CodeSessionID, wire.AVPMandatory, 0, sid)
	m = wire.AppendUint32(m, wire.CodeResultCode, wire.AVPMandatory, 0, wire.ResultSuccess)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, c.cfg.OriginHost)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, c.cfg.OriginRealm)
	wire.SetLength(m)
	c.writeRaw(m)
	if c.cfg.OnServerRequest != nil {
		c.cfg.OnServerRequest(h.Code == wire.CmdAbortSession, string(sid))
	}
}

func (c *Conn) answerBase(h wire.Header, stateID bool) {
	var b [128]byte
	m := wire.AppendHeader(b[:0], 0, h.Code, h.AppID, h.HopByHop, h.EndToEnd)
	m = wire.AppendUint32(m, wire.CodeResultCode, wire.AVPMandatory, 0, wire.ResultSuccess)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, c.cfg.OriginHost)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, c.cfg.OriginRealm)
	if stateID {
		m = wire.AppendUint32(m, wire.CodeOriginStateID, wire.AVPMandatory, 0, c.stateID)
	}
	wire.SetLength(m)
	c.writeRaw(m)
}

func (c *Conn) answerUnsupported(h wire.Header) {
	var b [128]byte
	m := wire.AppendHeader(b[:0], wire.FlagError, h.Code, h.AppID, h.HopByHop, h.EndToEnd)
	m = wire.AppendUint32(m, wire.CodeResultCode, wire.AVPMandatory, 0, wire.ResultCommandUnsupported)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, c.cfg.OriginHost)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, c.cfg.OriginRealm)
	wire.SetLength(m)
	c.writeRaw(m)
}

func (c *Conn) sendRequest(code uint32, extra func([]byte) []byte) {
	var b [128]byte
	c.wmu.Lock()
	c.hbh++
	hbh := c.hbh
	c.e2e++
	e2e := c.e2e
	c.wmu.Unlock()
	m := wire.AppendHeader(b[:0], wire.FlagRequest, code, wire.AppCommon, hbh, e2e)
	m = wire.AppendString(m, wire.CodeOriginHost, wire.AVPMandatory, 0, c.cfg.OriginHost)
	m = wire.AppendString(m, wire.CodeOriginRealm, wire.AVPMandatory, 0, c.cfg.OriginRealm)
	if extra != nil {
		m = extra(m)
	}
	wire.SetLength(m)
	c.writeRaw(m)
}

// watchdog sends DWR after Tw of silence, disconnects after 2·Tw, and
// fails requests pending past the Timeout.
func (c *Conn) watchdog() {
	tw := c.cfg.WatchdogInterval
	tick := min(tw, c.cfg.Timeout) / 4
	t := time.NewTicker(tick)
	defer t.Stop()
	var expired []pending
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, c.lastRead.Load()))
			switch {
			case idle >= 2*tw:
				c.conn.Close() // the reader fails everything
				return
			case idle >= tw && !c.dwrPending.Load():
				c.dwrPending.Store(true)
				c.sendRequest(wire.CmdDeviceWatchdog, nil)
			}
			n := now.UnixNano()
			expired = expired[:0]
			c.mu.Lock()
			for k, p := range c.pending {
				if p.deadline < n {
					expired = append(expired, p)
					delete(c.pending, k)
				}
			}
			c.mu.Unlock()
			for _, p := range expired {
				c.complete(p, ErrTimeout)
			}
		}
	}
}

// Close sends DPR, waits up to a second for the DPA (answers still
// arriving are delivered), then closes; pending requests fail with
// ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed && c.closing.CompareAndSwap(false, true) {
		c.sendRequest(wire.CmdDisconnectPeer, func(m []byte) []byte {
			return wire.AppendUint32(m, wire.CodeDisconnectCause, wire.AVPMandatory, 0, 0)
		})
		select {
		case <-c.readerDone:
		case <-time.After(time.Second):
		}
	}
	c.conn.Close()
	<-c.readerDone
	return nil
}
