// Package diameter is the CGW's Diameter Gy/Ro front (RFC 6733 base,
// RFC 4006 credit control, TS 32.299): it accepts peer connections,
// performs the capabilities exchange (CER/CEA), watchdog (DWR/DWA) and
// disconnect (DPR/DPA) with github.com/fiorix/go-diameter, and maps every
// Credit-Control-Request onto one chf.ChargeRequest for the charging core
// (a chf.Charger), answering with a Credit-Control-Answer. CCRs are
// decoded and CCAs encoded by hand over the raw AVPs (package wire): no
// reflection and no per-message allocation beyond the strings the core
// receives.
package diameter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/cgw/admission"
	"github.com/chf-testbed/testbed/cgw/diameter/wire"
	peerclient "github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chf"
)

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = errors.New("diameter: server closed")

// Config configures a Server. The zero value serves any peer with the
// defaults below.
type Config struct {
	// OriginHost and OriginRealm identify the CGW in every answer
	// (defaults "cgw.chf.test" and "chf.test").
	OriginHost  string
	OriginRealm string
	// AllowHosts and AllowRealms are path.Match patterns a peer's CER
	// Origin-Host and Origin-Realm must match ("*.gw.example"); an empty
	// list allows any. Other peers get DIAMETER_UNKNOWN_PEER (3010) and
	// are disconnected.
	AllowHosts  []string
	AllowRealms []string
	// MaxInFlight bounds the CCRs being charged at once over all peers;
	// beyond it CCRs are answered DIAMETER_TOO_BUSY (3004). Default 4096.
	MaxInFlight int
	// Limiter, when set, is the adaptive admission limit (package
	// cgw/admission) a CCR must also pass; refused CCRs are answered
	// DIAMETER_TOO_BUSY (3004) and counted in TooBusy. It may be shared
	// with the Nchf front.
	Limiter *admission.Limiter
	// MaxMessageSize is the largest message accepted; a peer sending a
	// larger one is disconnected. Default 64 KiB.
	MaxMessageSize int
	// WatchdogInterval is Tw (RFC 3539): a peer silent for Tw gets a DWR,
	// one silent for 2·Tw is disconnected. Default 30s.
	WatchdogInterval time.Duration
	// CERTimeout is how long a new connection has to send its CER.
	// Default 10s.
	CERTimeout time.Duration
	// CoreTimeout bounds how long a CCR waits for the charging core; past
	// it the CCA says 3002 UNABLE_TO_DELIVER (default 2 s, below the
	// usual Tx timer of a Gy client).
	CoreTimeout time.Duration
	// WriteTimeout bounds how long an answer may wait for a peer that
	// does not read; the peer is then disconnected so it cannot pin
	// in-flight slots other peers need. Default 10s.
	WriteTimeout time.Duration
	// Currency is reported in Cost-Information when the core's answer
	// names none. Default "EUR".
	Currency string
	// Logger receives connection-level events (never one line per
	// request). Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.OriginHost == "" {
		c.OriginHost = "cgw.chf.test"
	}
	if c.OriginRealm == "" {
		c.OriginRealm = "chf.test"
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4096
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 64 << 10
	}
	if c.WatchdogInterval <= 0 {
		c.WatchdogInterval = 30 * time.Second
	}
	if c.CERTimeout <= 0 {
		c.CERTimeout = 10 * time.Second
	}
	if c.CoreTimeout <= 0 {
		c.CoreTimeout = 2 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.Currency == "" {
		c.Currency = "EUR"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Stats are cumulative counters of a Server.
type Stats struct {
	Peers       int64 // connected peers (after CEA)
	InFlight    int64 // CCRs being charged now
	Requests    uint64
	TooBusy     uint64 // CCRs answered 3004 because MaxInFlight was reached
	Failed      uint64 // CCRs refused before the core (5004, 5005, ...)
	CoreErrors  uint64 // Charger returned an error (answered 3004)
	Rejected    uint64 // connections refused at CER
	Disconnects uint64
}

// Server is the Gy/Ro Diameter server. It is safe for concurrent use.
type Server struct {
	cfg     Config
	charger chf.Charger
	ident   []byte // pre-encoded Origin-Host, Origin-Realm, Auth-Application-Id
	stateID uint32
	hbh     atomic.Uint32

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	peers     map[*peer]struct{}
	closing   bool
	wg        sync.WaitGroup
	addr      atomic.Value // string

	inflight                                                     atomic.Int64
	peerN                                                        atomic.Int64
	requests, tooBusy, failed, coreErrors, rejected, disconnects atomic.Uint64

	states sync.Pool // *ccrState
	bufs   sync.Pool // *[]byte
}

// ccrState is the per-request scratch space, pooled.
type ccrState struct {
	c    ccr
	ctx  chf.Deadline
	req  chf.ChargeRequest
	resp chf.ChargeResponse
	out  []byte
	// result is the Result-Code answered (for metrics).
	result uint32
}

// NewServer returns a Server charging through charger. Start it with
// Listen or Serve.
func NewServer(cfg Config, charger chf.Charger) (*Server, error) {
	if charger == nil {
		return nil, errors.New("cannot create diameter server: nil Charger")
	}
	cfg.setDefaults()
	for _, p := range append(append([]string(nil), cfg.AllowHosts...), cfg.AllowRealms...) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("cannot create diameter server: bad allow pattern %q: %w", p, err)
		}
	}
	s := &Server{
		cfg:       cfg,
		charger:   charger,
		stateID:   uint32(time.Now().Unix()),
		listeners: map[net.Listener]struct{}{},
		peers:     map[*peer]struct{}{},
	}
	s.hbh.Store(uint32(time.Now().UnixNano()))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ident = wire.AppendString(nil, wire.CodeOriginHost, wire.AVPMandatory, 0, cfg.OriginHost)
	s.ident = wire.AppendString(s.ident, wire.CodeOriginRealm, wire.AVPMandatory, 0, cfg.OriginRealm)
	s.ident = wire.AppendUint32(s.ident, wire.CodeAuthApplicationID, wire.AVPMandatory, 0, wire.AppCreditControl)
	s.states.New = func() any { return &ccrState{out: make([]byte, 0, 512)} }
	s.bufs.New = func() any { b := make([]byte, 0, 2048); return &b }
	return s, nil
}

// Listen binds addr (host:port, port 0 allowed), serves it in the
// background and returns once listening; Addr reports the bound address.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	s.addr.Store(ln.Addr().String())
	if err := s.track(ln); err != nil {
		ln.Close()
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(ln) //nolint:errcheck // ends with ErrServerClosed or logs
	}()
	return nil
}

// Serve accepts peers on ln until Close or Shutdown; it then returns
// ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.addr.CompareAndSwap(nil, ln.Addr().String())
	if err := s.track(ln); err != nil {
		return err
	}
	return s.serve(ln)
}

func (s *Server) track(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	return nil
}

func (s *Server) serve(ln net.Listener) error {
	defer ln.Close()
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			if temporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.cfg.Logger.Error("diameter accept failed", "err", err)
			return fmt.Errorf("cannot accept diameter peer: %w", err)
		}
		delay = 0
		p := s.newPeer(conn)
		if p == nil {
			conn.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			p.serve()
		}()
	}
}

// temporary reports whether an accept error is transient (EMFILE, a
// timeout and the like), so serve backs off instead of stopping.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// Addr is the address Listen bound, or "" before.
func (s *Server) Addr() string {
	a, _ := s.addr.Load().(string)
	return a
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	return Stats{
		Peers: s.peerN.Load(), InFlight: s.inflight.Load(),
		Requests: s.requests.Load(), TooBusy: s.tooBusy.Load(), Failed: s.failed.Load(),
		CoreErrors: s.coreErrors.Load(), Rejected: s.rejected.Load(), Disconnects: s.disconnects.Load(),
	}
}

// Close is Shutdown with a 5 second grace period.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops accepting, sends every peer a DPR (Disconnect-Cause
// REBOOTING), lets CCRs being charged finish and closes each connection
// once its DPA arrives or ctx ends, whichever is first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	peers := make([]*peer, 0, len(s.peers))
	for p := range s.peers {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	for _, p := range peers {
		p.sendDPR()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("cannot drain diameter peers: %w", ctx.Err())
		s.cancel()
		s.mu.Lock()
		for p := range s.peers {
			p.conn.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancel()
	return err
}

// peer is one connection.
type peer struct {
	s     *Server
	conn  net.Conn
	br    *bufio.Reader
	host  string
	realm string

	wmu      sync.Mutex
	bw       *bufio.Writer
	pendingW atomic.Int32
	wdl      time.Time // write deadline currently set (under wmu)

	lastRead atomic.Int64 // unix nanos
	// RAR/ASR sent, by Hop-by-Hop id, awaiting their answers' Result-Code.
	pmu     sync.Mutex
	pending map[uint32]chan uint32

	dwrPending atomic.Bool
	dprSent    atomic.Bool
	done       chan struct{}
	handlers   sync.WaitGroup
}

func (s *Server) newPeer(conn net.Conn) *peer {
	p := &peer{
		s:    s,
		conn: conn,
		br:   bufio.NewReaderSize(conn, 32<<10),
		bw:   bufio.NewWriterSize(conn, 32<<10),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil
	}
	s.peers[p] = struct{}{}
	return p
}

func (p *peer) serve() {
	s := p.s
	log := s.cfg.Logger
	defer func() {
		close(p.done)
		p.conn.Close()
		p.handlers.Wait()
		s.mu.Lock()
		delete(s.peers, p)
		s.mu.Unlock()
	}()
	p.conn.SetReadDeadline(time.Now().Add(s.cfg.CERTimeout))
	bufp := s.bufs.Get().(*[]byte)
	msg, err := wire.ReadMessage(p.br, *bufp, s.cfg.MaxMessageSize)
	*bufp = msg[:0]
	if err != nil {
		s.bufs.Put(bufp)
		log.Debug("diameter peer closed before CER", "remote", p.conn.RemoteAddr(), "err", err)
		return
	}
	ok := p.handleCER(msg)
	s.bufs.Put(bufp)
	if !ok {
		return
	}
	p.conn.SetReadDeadline(time.Time{})
	s.peerN.Add(1)
	defer s.peerN.Add(-1)
	log.Info("diameter peer connected", "origin_host", p.host, "origin_realm", p.realm, "remote", p.conn.RemoteAddr())
	p.lastRead.Store(time.Now().UnixNano())
	go p.watchdog()

	for {
		bufp := s.bufs.Get().(*[]byte)
		msg, err := wire.ReadMessage(p.br, *bufp, s.cfg.MaxMessageSize)
		if err != nil {
			*bufp = msg[:0]
			s.bufs.Put(bufp)
			s.disconnects.Add(1)
			if !p.dprSent.Load() {
				log.Info("diameter peer disconnected", "origin_host", p.host, "err", err)
			}
			return
		}
		*bufp = msg
		p.lastRead.Store(time.Now().UnixNano())
		h, _ := wire.ParseHeader(msg) // ReadMessage validated it
		switch {
		case h.Code == wire.CmdCreditControl && h.IsRequest():
			p.dispatch(bufp)
			continue // dispatch owns bufp
		case (h.Code == wire.CmdReAuth || h.Code == wire.CmdAbortSession) && !h.IsRequest():
			p.answered(h.HopByHop, msg)
		case h.Code == wire.CmdDeviceWatchdog && h.IsRequest():
			p.answerBase(msg, wire.ResultSuccess)
		case h.Code == wire.CmdDeviceWatchdog:
			p.dwrPending.Store(false)
		case h.Code == wire.CmdDisconnectPeer && h.IsRequest():
			p.answerBase(msg, wire.ResultSuccess)
			p.handlers.Wait() // answer what is being charged, then close
			s.bufs.Put(bufp)
			log.Info("diameter peer disconnected by DPR", "origin_host", p.host)
			return
		case h.Code == wire.CmdDisconnectPeer:
			s.bufs.Put(bufp)
			p.handlers.Wait()
			return
		case h.Code == wire.CmdCapabilitiesExchange && h.IsRequest():
			p.answerBase(msg, wire.ResultUnableToComply) // CER after CEA
		case h.IsRequest():
			p.answerBase(msg, wire.ResultCommandUnsupported)
		}
		s.bufs.Put(bufp)
	}
}

// dispatch charges one CCR on its own goroutine, or answers 3004 inline
// when MaxInFlight CCRs are already being charged.
func (p *peer) dispatch(bufp *[]byte) {
	s := p.s
	s.requests.Add(1)
	n := s.inflight.Add(1)
	// A CCR-T frees reservations: never shed by the adaptive limit and
	// given twice the hard cap, so that overload does not leave them held
	// until they expire.
	term := isTermination(*bufp)
	switch {
	case term && n <= 2*int64(s.cfg.MaxInFlight):
		if s.cfg.Limiter != nil {
			s.cfg.Limiter.AcquireRelease()
		}
	case n > int64(s.cfg.MaxInFlight) || term || (s.cfg.Limiter != nil && !s.cfg.Limiter.Acquire()):
		s.inflight.Add(-1)
		s.tooBusy.Add(1)
		st := s.states.Get().(*ccrState)
		start := time.Now()
		decodeCCR(*bufp, &st.c)
		st.out = appendCCA(st.out[:0], &st.c, s.ident, &answer{result: wire.ResultTooBusy})
		observeGy(st.c.reqType, wire.ResultTooBusy, start)
		p.write(st.out)
		s.putState(st)
		s.bufs.Put(bufp)
		return
	}
	p.handlers.Add(1)
	go p.handleCCR(bufp)
}

// isTermination reports whether the CCR msg is a CCR-T (CC-Request-Type
// TERMINATION_REQUEST), reading only its top-level AVPs.
func isTermination(msg []byte) bool {
	it := wire.MessageIter(msg)
	var a wire.AVP
	for it.Next(&a) {
		if a.Code == wire.CodeCCRequestType && a.Vendor == 0 {
			return len(a.Data) == 4 && binary.BigEndian.Uint32(a.Data) == wire.RequestTermination
		}
	}
	return false
}

func (s *Server) putState(st *ccrState) {
	if cap(st.out) > 64<<10 || cap(st.c.failed) > 64<<10 {
		return
	}
	s.states.Put(st)
}

// handleCCR decodes, charges and answers one CCR.
func (p *peer) handleCCR(bufp *[]byte) {
	s := p.s
	st := s.states.Get().(*ccrState)
	start := time.Now()
	defer func() {
		if s.cfg.Limiter != nil {
			s.cfg.Limiter.Done(time.Since(start), true)
		}
		if r := recover(); r != nil {
			s.cfg.Logger.Error("BUG: panic while handling CCR", "panic", r, "origin_host", p.host)
			st = nil
		}
		if st != nil {
			s.putState(st)
		}
		s.bufs.Put(bufp)
		s.inflight.Add(-1)
		p.handlers.Done()
	}()
	st.out = s.answerCCR(*bufp, st)
	observeGy(st.c.reqType, st.result, start)
	p.write(st.out)
}

// answerCCR decodes the CCR msg, charges it and returns the CCA appended
// to st.out[:0].
func (s *Server) answerCCR(msg []byte, st *ccrState) []byte {
	c := &st.c
	decodeCCR(msg, c)
	a := answer{result: c.result, defaultCur: s.cfg.Currency}
	if c.result == 0 && c.hdr.AppID != wire.AppCreditControl {
		a.result = wire.ResultApplicationUnsupport
	}
	if a.result != 0 {
		if len(c.failed) > 0 {
			a.failed = c.failed
		}
		s.failed.Add(1)
		return st.answer(s, &a)
	}
	c.fill(&st.req)
	resp := &st.resp
	lines := resp.Lines[:0]
	*resp = chf.ChargeResponse{Lines: lines}
	// Diameter carries no deadline: the core has CoreTimeout (the Tx
	// timer a client waits for a CCA) to answer.
	st.ctx.Reset(s.ctx, time.Now().Add(s.cfg.CoreTimeout))
	err := s.charger.Charge(&st.ctx, &st.req, resp)
	st.ctx = chf.Deadline{}
	if err != nil {
		s.coreErrors.Add(1)
		a.result = wire.ResultTooBusy
		if isTimeout(err) {
			a.result = wire.ResultUnableToDeliver
		}
		return st.answer(s, &a)
	}
	a.result, a.resp, a.op = resultCode(resp.Result), resp, st.req.Op
	switch resp.Result {
	case chf.ResultStaleSequence, chf.ResultSequenceReused, chf.ResultReplayMismatch:
		c.failed = wire.AppendUint32(c.failed[:0], wire.CodeCCRequestNumber, wire.AVPMandatory, 0, c.reqNumber)
		a.failed = c.failed
	case chf.ResultOverflow:
		a.failed = c.overflowAVP(resp.Lines)
	}
	return st.answer(s, &a)
}

// answer appends the CCA answering st.c with a to st.out[:0].
func (st *ccrState) answer(s *Server, a *answer) []byte {
	st.result = a.result
	return appendCCA(st.out[:0], &st.c, s.ident, a)
}

// isTimeout reports whether a core error means the core (or something
// behind it) did not answer in time.
func isTimeout(err error) bool {
	var se *peerclient.StatusError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fasthttp.ErrTimeout) ||
		errors.As(err, &se) && se.Code == fasthttp.StatusGatewayTimeout
}

// write sends one whole message. Concurrent writers batch: the last one
// out flushes.
func (p *peer) write(b []byte) {
	p.pendingW.Add(1)
	p.wmu.Lock()
	// Refresh the write deadline only when half of it is used up: one
	// syscall-free timer update every WriteTimeout/2 at most.
	if now, wt := time.Now(), p.s.cfg.WriteTimeout; p.wdl.Sub(now) < wt/2 {
		p.wdl = now.Add(wt)
		p.conn.SetWriteDeadline(p.wdl)
	}
	_, err := p.bw.Write(b)
	if p.pendingW.Add(-1) == 0 && err == nil {
		err = p.bw.Flush()
	}
	p.wmu.Unlock()
	if err != nil {
		p.conn.Close() // the read loop notices and cleans up
	}
}

// writeMessage serialises a go-diameter message (base protocol only).
func (p *peer) writeMessage(m *diam.Message) {
	b, err := m.Serialize()
	if err != nil {
		p.s.cfg.Logger.Error("BUG: cannot serialize diameter message", "err", err)
		return
	}
	p.write(b)
}

// watchdog sends DWR after WatchdogInterval of silence and disconnects
// after twice that.
func (p *peer) watchdog() {
	tw := p.s.cfg.WatchdogInterval
	t := time.NewTicker(tw / 4)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, p.lastRead.Load()))
			switch {
			case idle >= 2*tw:
				p.s.cfg.Logger.Warn("diameter peer watchdog expired", "origin_host", p.host, "idle", idle)
				p.conn.Close()
				return
			case idle >= tw && !p.dwrPending.Load():
				p.dwrPending.Store(true)
				m := diam.NewMessage(diam.DeviceWatchdog, diam.RequestFlag, 0, p.s.hbh.Add(1), p.s.hbh.Add(1), dict.Default)
				p.s.addIdentity(m)
				p.writeMessage(m)
			}
		}
	}
}

func (p *peer) sendDPR() {
	if p.host == "" || !p.dprSent.CompareAndSwap(false, true) {
		return
	}
	m := diam.NewMessage(diam.DisconnectPeer, diam.RequestFlag, 0, p.s.hbh.Add(1), p.s.hbh.Add(1), dict.Default)
	p.s.addIdentity(m)
	m.NewAVP(avp.DisconnectCause, avp.Mbit, 0, datatype.Enumerated(0)) // REBOOTING
	p.writeMessage(m)
}

func (s *Server) addIdentity(m *diam.Message) {
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(s.cfg.OriginHost))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(s.cfg.OriginRealm))
}

// answerBase answers a base-protocol request (DWR, DPR, unsupported
// commands) from its header alone.
func (p *peer) answerBase(req []byte, result uint32) {
	h, _ := wire.ParseHeader(req)
	flags := uint8(0)
	if isProtocolError(result) {
		flags = wire.FlagError
	}
	m := diam.NewMessage(h.Code, flags, h.AppID, h.HopByHop, h.EndToEnd, dict.Default)
	m.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(result))
	p.s.addIdentity(m)
	if h.Code == wire.CmdDeviceWatchdog {
		m.NewAVP(avp.OriginStateID, avp.Mbit, 0, datatype.Unsigned32(p.s.stateID))
	}
	p.writeMessage(m)
}

// handleCER answers the peer's CER and reports whether the peer was
// accepted.
func (p *peer) handleCER(msg []byte) (ok bool) {
	s := p.s
	h, _ := wire.ParseHeader(msg)
	if h.Code != wire.CmdCapabilitiesExchange || !h.IsRequest() {
		s.cfg.Logger.Info("diameter peer did not start with CER", "remote", p.conn.RemoteAddr(), "command", h.Code)
		s.rejected.Add(1)
		return false
	}
	var m *diam.Message
	func() {
		defer func() {
			if r := recover(); r != nil {
				m = nil
			}
		}()
		var err error
		if m, err = diam.ReadMessage(bytes.NewReader(msg), dict.Default); err != nil {
			m = nil
		}
	}()
	result := wire.ResultSuccess
	var failed *diam.AVP
	var host, realm string
	if m == nil {
		result = wire.ResultUnableToComply
	} else {
		host, realm = avpString(m, avp.OriginHost), avpString(m, avp.OriginRealm)
		switch {
		case host == "":
			result, failed = wire.ResultMissingAVP, diam.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(""))
		case realm == "":
			result, failed = wire.ResultMissingAVP, diam.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(""))
		case !allowed(s.cfg.AllowHosts, host) || !allowed(s.cfg.AllowRealms, realm):
			result = wire.ResultUnknownPeer
		case !supportsCreditControl(m):
			result = wire.ResultNoCommonApplication
		}
	}
	flags := uint8(0)
	if isProtocolError(result) {
		flags = wire.FlagError
	}
	ans := diam.NewMessage(diam.CapabilitiesExchange, flags, 0, h.HopByHop, h.EndToEnd, dict.Default)
	ans.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(result))
	s.addIdentity(ans)
	if ip := localIP(p.conn); ip != nil {
		ans.NewAVP(avp.HostIPAddress, avp.Mbit, 0, datatype.Address(ip))
	}
	ans.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(0))
	ans.NewAVP(avp.ProductName, 0, 0, datatype.UTF8String("chf-testbed-cgw"))
	ans.NewAVP(avp.OriginStateID, avp.Mbit, 0, datatype.Unsigned32(s.stateID))
	ans.NewAVP(avp.SupportedVendorID, avp.Mbit, 0, datatype.Unsigned32(wire.Vendor3GPP))
	ans.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(wire.AppCreditControl))
	if failed != nil {
		ans.NewAVP(avp.FailedAVP, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{failed}})
	}
	if result != wire.ResultSuccess {
		ans.NewAVP(avp.ErrorMessage, 0, 0, datatype.UTF8String(cerError(result)))
	}
	if result != wire.ResultSuccess {
		// Counted before the CEA leaves, so a peer that has read its
		// rejection always finds it in the stats.
		s.rejected.Add(1)
	}
	p.writeMessage(ans)
	if result != wire.ResultSuccess {
		s.cfg.Logger.Warn("diameter peer rejected", "origin_host", host, "origin_realm", realm,
			"result_code", result, "remote", p.conn.RemoteAddr())
		return false
	}
	p.host, p.realm = host, realm
	return true
}

func cerError(result uint32) string {
	switch result {
	case wire.ResultUnknownPeer:
		return "peer not in the allow-list"
	case wire.ResultNoCommonApplication:
		return "peer does not support Credit-Control (4)"
	case wire.ResultMissingAVP:
		return "missing AVP"
	}
	return "malformed CER"
}

func avpString(m *diam.Message, code uint32) string {
	a, err := m.FindAVP(code, 0)
	if err != nil || a == nil || a.Data == nil {
		return ""
	}
	return string(a.Data.Serialize())
}

// supportsCreditControl reports whether a CER advertises Credit-Control
// (4) or the relay application, directly or in a
// Vendor-Specific-Application-Id.
func supportsCreditControl(m *diam.Message) bool {
	check := func(avps []*diam.AVP) bool {
		for _, a := range avps {
			if a.Code != avp.AuthApplicationID || a.Data == nil {
				continue
			}
			if v, ok := a.Data.(datatype.Unsigned32); ok && (uint32(v) == wire.AppCreditControl || uint32(v) == 0xffffffff) {
				return true
			}
		}
		return false
	}
	if check(m.AVP) {
		return true
	}
	for _, a := range m.AVP {
		if a.Code != avp.VendorSpecificApplicationID {
			continue
		}
		if g, ok := a.Data.(*diam.GroupedAVP); ok && check(g.AVP) {
			return true
		}
	}
	return false
}

func allowed(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func localIP(c net.Conn) net.IP {
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		if ip4 := a.IP.To4(); ip4 != nil {
			return ip4
		}
		return a.IP
	}
	return nil
}
