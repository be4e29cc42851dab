package h2c

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Handler serves one request. It may run concurrently with other handlers
// of the same connection (up to MaxConcurrentStreams at once). w and r,
// and every slice they expose, are valid only until the Handler returns.
type Handler func(w *Response, r *Request)

// Server serves HTTP/2 over cleartext TCP with prior knowledge (h2c,
// RFC 9113 section 3.3). Set the fields before the first Serve/ServeConn
// call and do not change them afterwards; the methods are safe for
// concurrent use.
type Server struct {
	// Handler serves every request.
	Handler Handler
	// MaxConcurrentStreams is advertised to clients and enforced (excess
	// streams are refused with REFUSED_STREAM). 0 means 256.
	MaxConcurrentStreams uint32
	// MaxBodySize bounds a request body; larger bodies get 413. 0 means 64 KiB.
	MaxBodySize int
	// RejectBody, when set, gives the content type and body of the
	// answers the server refuses a request with itself (413 over
	// MaxBodySize, 431 over MaxHeaderListSize), e.g. ProblemDetails; the
	// body is sent when the flow-control windows allow it at once, else
	// the answer goes without it. body must not change afterwards. Nil:
	// no body.
	RejectBody func(status int) (contentType string, body []byte)
	// MaxHeaderListSize bounds a request's decoded header list (431 when
	// exceeded). 0 means 16 KiB.
	MaxHeaderListSize uint32
	// InitialWindowSize is the per-stream receive window advertised to
	// clients. 0 means 256 KiB.
	InitialWindowSize uint32
	// InlineHandler runs the Handler on the connection's reader goroutine
	// instead of a goroutine per request. Only for handlers that never
	// block (tests, benchmarks, pure in-memory work): a blocking handler
	// then stalls the whole connection.
	InlineHandler bool
	// IdleTimeout closes (GOAWAY NO_ERROR) a connection that sends nothing
	// for this long while no handler of it is running: idle clients, and
	// slowloris ones that open streams or frames and never finish them.
	// It also bounds the wait for the client preface. 0 means 3 minutes.
	IdleTimeout time.Duration
	// Logger receives connection-level errors; nil means slog.Default().
	Logger *slog.Logger

	stats serverCounters

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	shutdown  bool
	connsDone chan struct{} // closed when conns becomes empty during shutdown
}

// ServerStats are cumulative counters of a Server (ConnsOpen is a gauge).
type ServerStats struct {
	ConnsOpen    int64  // connections being served
	ConnsTotal   uint64 // connections accepted (after the preface)
	Requests     uint64 // requests handed to the Handler
	Refused      uint64 // streams refused beyond MaxConcurrentStreams
	Rejected     uint64 // requests answered 413/431 without the Handler
	StreamErrors uint64 // RST_STREAM sent for malformed or failed streams
	ConnErrors   uint64 // connections ended by GOAWAY with an error code
	IdleClosed   uint64 // connections closed after IdleTimeout of silence
}

type serverCounters struct {
	connsOpen                               atomic.Int64
	connsTotal, requests, refused, rejected atomic.Uint64
	streamErrors, connErrors, idleClosed    atomic.Uint64
}

// Stats returns the server's counters; safe for concurrent use.
func (s *Server) Stats() ServerStats {
	c := &s.stats
	return ServerStats{
		ConnsOpen:    c.connsOpen.Load(),
		ConnsTotal:   c.connsTotal.Load(),
		Requests:     c.requests.Load(),
		Refused:      c.refused.Load(),
		Rejected:     c.rejected.Load(),
		StreamErrors: c.streamErrors.Load(),
		ConnErrors:   c.connErrors.Load(),
		IdleClosed:   c.idleClosed.Load(),
	}
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("h2c: server closed")

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return 256
	}
	return s.MaxConcurrentStreams
}

func (s *Server) maxBody() int {
	if s.MaxBodySize <= 0 {
		return 64 << 10
	}
	return s.MaxBodySize
}

func (s *Server) maxHeaderList() uint32 {
	if s.MaxHeaderListSize == 0 {
		return 16 << 10
	}
	return s.MaxHeaderListSize
}

func (s *Server) initWindow() int64 {
	if s.InitialWindowSize == 0 {
		return 256 << 10
	}
	return int64(min(s.InitialWindowSize, maxWindow))
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout <= 0 {
		return 3 * time.Minute
	}
	return s.IdleTimeout
}

// Abuse limits (each a connection error ENHANCE_YOUR_CALM; see also
// maxQueuedAcks in link.go):
const (
	// resetAllowance: a client may reset this many streams before its
	// resets are weighed against its requests (rapid reset,
	// CVE-2023-44487); beyond it, resetting more than half of its streams
	// ends the connection. Reset streams whose handler still runs keep
	// counting against MaxConcurrentStreams, so resets never buy more
	// concurrent work.
	resetAllowance = 256
	// maxBlockFrames and the header block byte limit (twice
	// MaxHeaderListSize) bound one header block across CONTINUATION frames
	// (CONTINUATION flood, CVE-2024-27316).
	maxBlockFrames = 128
)

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Serve accepts connections on ln and serves each with ServeConn on its
// own goroutine. It returns ErrServerClosed after Shutdown or Close, or the
// listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			down := s.shutdown
			s.mu.Unlock()
			if down {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("cannot accept connection: %w", err)
		}
		delay = 0
		go s.ServeConn(c)
	}
}

// ServeConn serves one connection whose first bytes are the client
// preface, and returns when the connection is closed and all of its
// handlers have returned. It closes c.
func (s *Server) ServeConn(c net.Conn) {
	sc := &serverConn{srv: s, nc: c}
	if !s.track(sc, true) {
		c.Close()
		return
	}
	defer s.track(sc, false)
	sc.serve(c)
}

func (s *Server) track(sc *serverConn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutdown {
			return false
		}
		if s.conns == nil {
			s.conns = make(map[*serverConn]struct{})
		}
		s.conns[sc] = struct{}{}
		return true
	}
	delete(s.conns, sc)
	if len(s.conns) == 0 && s.connsDone != nil {
		close(s.connsDone)
		s.connsDone = nil
	}
	return true
}

// Shutdown stops accepting connections, sends GOAWAY on every connection,
// lets in-flight streams finish and closes each connection once it has no
// active stream. When ctx ends first, the remaining connections are closed
// and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.listeners {
		ln.Close()
	}
	var done chan struct{}
	if len(s.conns) > 0 {
		if s.connsDone == nil {
			s.connsDone = make(chan struct{})
		}
		done = s.connsDone
	}
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.drain()
	}
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close closes the listeners and all connections immediately.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.listeners {
		ln.Close()
	}
	for sc := range s.conns {
		sc.nc.Close()
	}
	s.mu.Unlock()
	return nil
}

// streamState is the life cycle of a server stream.
type streamState uint8

const (
	stateRecv       streamState = iota // receiving headers/body
	stateDispatched                    // handler running or response being sent
)

// sstream is one server stream; pooled.
type sstream struct {
	sc    *serverConn
	o     outStream
	state streamState

	req  Request
	resp Response

	recvAvail   int64 // remaining stream receive window
	recvUnacked int64
	hdrSize     uint32
	malformed   bool
	tooBigHdr   bool
	pseudoDone  bool // a regular field has been seen
	reset       bool // peer reset or connection gone: discard the response
	handlerDone bool
	sending     bool // response DATA waiting for window
}

func (st *sstream) out() *outStream { return &st.o }

func (st *sstream) dataSent() {
	st.sending = false
	st.sc.releaseLocked(st)
}

var streamPool = sync.Pool{New: func() any { return new(sstream) }}

// serverConn is one server connection.
type serverConn struct {
	srv *Server
	nc  net.Conn
	l   link

	dec         *hpackDecoder
	cur         *sstream // stream whose header block is being decoded (nil: discard)
	contEnd     bool     // END_STREAM flag of the HEADERS being continued
	contID      uint32
	contActive  bool
	gotSettings bool
	blockBytes  int // bytes of the header block being received
	blockFrames int // frames of it
	opened      int // streams the client opened
	resets      int // of them, reset by the client before their end

	// under l.mu
	maxClientID uint32
	active      uint32
	draining    bool
	started     bool // link initialised
	drainReq    bool // drain requested before the link started

	handlers sync.WaitGroup
	workers  workers[*sstream] // handler goroutines, reused while the connection lives
	log      *slog.Logger
}

func (sc *serverConn) serve(c net.Conn) {
	sc.log = sc.srv.logger()
	sc.workers.fn = sc.serveStream
	br := bufio.NewReaderSize(c, readBufSize)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var pre [len(ClientPreface)]byte
	c.SetReadDeadline(time.Now().Add(min(sc.srv.idleTimeout(), SniffTimeout)))
	_, err := io.ReadFull(br, pre[:])
	c.SetReadDeadline(time.Time{})
	if err != nil || string(pre[:]) != ClientPreface {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	sc.srv.stats.connsTotal.Add(1)
	sc.srv.stats.connsOpen.Add(1)
	defer sc.srv.stats.connsOpen.Add(-1)
	l := &sc.l
	l.mu.Lock()
	l.init(c, br)
	l.rf.SetMaxReadFrameSize(defaultMaxFrameSize)
	sc.dec = newHpackDecoder(4096, int(sc.srv.maxHeaderList()), 2*int(sc.srv.maxHeaderList()), sc.emit)
	sc.started = true
	l.wf.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: sc.srv.maxStreams()},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(sc.srv.initWindow())},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: sc.srv.maxHeaderList()},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
	)
	l.wf.WriteWindowUpdate(0, connRecvWindow-defaultInitialWindow)
	l.kickLocked()
	if sc.drainReq {
		sc.drainLocked()
	}
	l.mu.Unlock()

	err = sc.readLoop()
	l.mu.Lock()
	if err != nil && l.err == nil {
		l.err = err
	}
	l.failLocked(ErrClosed)
	for _, s := range l.streams {
		st := s.(*sstream)
		st.reset = true
		sc.abortLocked(st)
	}
	l.mu.Unlock()
	l.waitWriter(time.Second)
	sc.handlers.Wait()
	sc.workers.stop()
}

// drain sends GOAWAY and closes the connection once no stream is active.
func (sc *serverConn) drain() {
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !sc.started {
		sc.drainReq = true
		return
	}
	sc.drainLocked()
}

func (sc *serverConn) drainLocked() {
	l := &sc.l
	if sc.draining {
		return
	}
	sc.draining = true
	if l.closing {
		return
	}
	l.wf.WriteGoAway(sc.maxClientID, http2.ErrCodeNo, nil)
	l.kickLocked()
	if sc.active == 0 {
		l.failLocked(ErrServerClosed)
	}
}

// connError ends the connection with GOAWAY(code).
type connError struct {
	code   http2.ErrCode
	reason string
}

func (e connError) Error() string {
	return fmt.Sprintf("h2c: connection error %v: %s", e.code, e.reason)
}

func (sc *serverConn) goAway(code http2.ErrCode, reason string) error {
	sc.srv.stats.connErrors.Add(1)
	l := &sc.l
	l.mu.Lock()
	l.goAwayLocked(sc.maxClientID, code, reason)
	l.mu.Unlock()
	return connError{code, reason}
}

// readLoop reads and dispatches frames until the connection fails.
func (sc *serverConn) readLoop() error {
	l := &sc.l
	// The read deadline is re-armed at most every idle/4 (a timer update
	// per frame would cost more than it buys): silence is detected after
	// between 3/4 and 1 IdleTimeout.
	idle := sc.srv.idleTimeout()
	var armed time.Time
	for {
		if l.br.Buffered() == 0 {
			l.throttle()
		}
		if now := time.Now(); now.Sub(armed) > idle/4 {
			l.nc.SetReadDeadline(now.Add(idle))
			armed = now
		}
		f, err := l.rf.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if sc.handlersRunning() {
					continue // the client waits for answers
				}
				sc.srv.stats.idleClosed.Add(1)
				return sc.goAway(http2.ErrCodeNo, "idle")
			}
			var se http2.StreamError
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &se):
				if sc.contActive {
					return sc.goAway(http2.ErrCodeProtocol, "stream error inside a header block")
				}
				sc.resetStream(se.StreamID, se.Code)
				continue
			case errors.As(err, &ce):
				reason := ""
				if d := l.rf.ErrorDetail(); d != nil {
					reason = d.Error()
				}
				return sc.goAway(http2.ErrCode(ce), reason)
			case errors.Is(err, http2.ErrFrameTooLarge):
				return sc.goAway(http2.ErrCodeFrameSize, "frame too large")
			}
			return err
		}
		if !sc.gotSettings {
			sf, ok := f.(*http2.SettingsFrame)
			if !ok || sf.IsAck() {
				return sc.goAway(http2.ErrCodeProtocol, "first frame is not SETTINGS")
			}
			sc.gotSettings = true
		}
		if err := sc.processFrame(f); err != nil {
			return err
		}
	}
}

func (sc *serverConn) processFrame(f http2.Frame) error {
	l := &sc.l
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return sc.onHeaders(f)
	case *http2.ContinuationFrame:
		return sc.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return sc.onData(f)
	case *http2.SettingsFrame:
		if code, ok := l.handleSettings(f); !ok {
			return sc.goAway(code, "invalid SETTINGS")
		}
	case *http2.WindowUpdateFrame:
		l.mu.Lock()
		idle := f.StreamID > sc.maxClientID
		l.mu.Unlock()
		if idle {
			return sc.goAway(http2.ErrCodeProtocol, "WINDOW_UPDATE on idle stream")
		}
		if code, ok := l.handleWindowUpdate(f); !ok {
			return sc.goAway(code, "window overflow")
		}
	case *http2.PingFrame:
		if !l.handlePing(f) {
			return sc.goAway(http2.ErrCodeEnhanceYourCalm, "PING flood")
		}
	case *http2.RSTStreamFrame:
		return sc.onReset(f)
	case *http2.GoAwayFrame:
		// The client opens no more streams; the connection ends when it
		// closes its side.
	case *http2.PushPromiseFrame:
		return sc.goAway(http2.ErrCodeProtocol, "PUSH_PROMISE from client")
	case *http2.PriorityFrame:
		// Priorities are ignored, but a stream may not depend on
		// itself (RFC 9113 §5.3.1).
		if f.StreamDep == f.StreamID {
			sc.resetStream(f.StreamID, http2.ErrCodeProtocol)
		}
	}
	return nil
}

func (sc *serverConn) onHeaders(f *http2.HeadersFrame) error {
	l := &sc.l
	id := f.StreamID
	if id%2 == 0 {
		return sc.goAway(http2.ErrCodeProtocol, "even stream id from client")
	}
	sc.contEnd = f.StreamEnded()
	sc.contID = id
	sc.cur = nil
	sc.blockBytes, sc.blockFrames = 0, 0
	l.mu.Lock()
	if id <= sc.maxClientID {
		st, _ := l.streams[id].(*sstream)
		recv := st != nil && st.state == stateRecv
		l.mu.Unlock()
		if !recv {
			return sc.goAway(http2.ErrCodeStreamClosed, "HEADERS on closed stream")
		}
		// Trailers: decoded and ignored; they must end the stream.
		if !f.StreamEnded() {
			return sc.goAway(http2.ErrCodeProtocol, "trailers without END_STREAM")
		}
		return sc.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	}
	sc.maxClientID = id
	refuse := false
	if f.HasPriority() && f.Priority.StreamDep == id {
		// A stream that depends on itself (RFC 9113 §5.3.1): a stream
		// error; the header block is still decoded below to keep the
		// HPACK state in step.
		sc.srv.stats.streamErrors.Add(1)
		l.wf.WriteRSTStream(id, http2.ErrCodeProtocol)
		l.kickLocked()
	} else if sc.draining {
		// Streams above the GOAWAY's last id are ignored.
	} else if sc.active >= sc.srv.maxStreams() {
		refuse = true
	} else {
		st := streamPool.Get().(*sstream)
		st.init(sc, id, l.peerInitWindow, sc.srv.initWindow())
		l.streams[id] = st
		sc.active++
		sc.opened++
		sc.cur = st
	}
	if refuse {
		sc.srv.stats.refused.Add(1)
		l.wf.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		l.kickLocked()
	}
	l.mu.Unlock()
	return sc.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

func (st *sstream) init(sc *serverConn, id uint32, sendWindow, recvWindow int64) {
	st.sc = sc
	st.o = outStream{id: id, window: sendWindow}
	st.state = stateRecv
	st.req.reset()
	st.req.StreamID = id
	st.resp.reset()
	st.recvAvail = recvWindow
	st.recvUnacked = 0
	st.hdrSize = 0
	st.malformed, st.tooBigHdr, st.pseudoDone = false, false, false
	st.reset, st.handlerDone, st.sending = false, false, false
}

// emit receives decoded header fields for sc.cur.
func (sc *serverConn) emit(f hpack.HeaderField) {
	st := sc.cur
	if st == nil || st.malformed {
		return
	}
	st.hdrSize += f.Size()
	if st.hdrSize > sc.srv.maxHeaderList() {
		st.tooBigHdr = true
		return
	}
	r := &st.req
	if len(f.Name) > 0 && f.Name[0] == ':' {
		if st.pseudoDone {
			st.malformed = true
			return
		}
		var i int
		switch f.Name {
		case ":method":
			i = 0
		case ":path":
			i = 1
		case ":scheme":
			i = 2
		case ":authority":
			i = 3
		default:
			st.malformed = true
			return
		}
		if r.pseudo[i].n != 0 || f.Value == "" {
			st.malformed = true
			return
		}
		r.pseudo[i] = r.store(f.Value)
		return
	}
	st.pseudoDone = true
	if !validHeaderName(f.Name) || f.Name == "te" && f.Value != "trailers" {
		st.malformed = true
		return
	}
	r.hdrs = append(r.hdrs, fieldRef{name: r.store(f.Name), value: r.store(f.Value)})
	if f.Name == "content-length" {
		n, err := strconv.ParseInt(f.Value, 10, 64)
		if err != nil || n < 0 || r.ContentLength >= 0 && r.ContentLength != n {
			st.malformed = true
			return
		}
		r.ContentLength = n
	}
}

func (sc *serverConn) onHeaderFragment(frag []byte, end bool) error {
	sc.blockBytes += len(frag)
	sc.blockFrames++
	if sc.blockFrames > maxBlockFrames || sc.blockBytes > 2*int(sc.srv.maxHeaderList()) {
		return sc.goAway(http2.ErrCodeEnhanceYourCalm, "header block too large")
	}
	if err := sc.dec.fragment(frag, end); err != nil {
		if errors.Is(err, errHpackTruncated) {
			return sc.goAway(http2.ErrCodeCompression, "truncated header block")
		}
		return sc.goAway(http2.ErrCodeCompression, "bad header block")
	}
	if !end {
		sc.contActive = true
		return nil
	}
	sc.contActive = false
	st := sc.cur
	sc.cur = nil
	if st == nil {
		// Trailers of a receiving stream, or an ignored stream.
		l := &sc.l
		l.mu.Lock()
		s, _ := l.streams[sc.contID].(*sstream)
		recv := s != nil && s.state == stateRecv
		l.mu.Unlock()
		if recv && sc.contEnd {
			sc.dispatch(s)
		}
		return nil
	}
	r := &st.req
	switch {
	case st.malformed || r.pseudo[0].n == 0 ||
		string(r.get(r.pseudo[0])) != "CONNECT" && (r.pseudo[1].n == 0 || r.pseudo[2].n == 0):
		sc.resetStream(st.o.id, http2.ErrCodeProtocol)
		return nil
	case st.tooBigHdr:
		sc.reject(st, 431)
		return nil
	case r.ContentLength > int64(sc.srv.maxBody()):
		sc.reject(st, 413)
		return nil
	}
	r.finish()
	if sc.contEnd {
		if r.ContentLength > 0 {
			sc.resetStream(st.o.id, http2.ErrCodeProtocol) // declared body missing
			return nil
		}
		sc.dispatch(st)
	}
	return nil
}

func (sc *serverConn) onData(f *http2.DataFrame) error {
	l := &sc.l
	id := f.StreamID
	n := int(f.Length)
	l.mu.Lock()
	if id > sc.maxClientID {
		l.mu.Unlock()
		return sc.goAway(http2.ErrCodeProtocol, "DATA on idle stream")
	}
	l.creditConnLocked(n)
	st, _ := l.streams[id].(*sstream)
	recv := st != nil && st.state == stateRecv
	l.mu.Unlock()
	if st == nil {
		// Closed, reset or refused stream (RFC 9113 §6.1: a stream
		// error STREAM_CLOSED); the data was already credited to the
		// connection window.
		sc.resetStream(id, http2.ErrCodeStreamClosed)
		return nil
	}
	if !recv {
		sc.resetStream(id, http2.ErrCodeStreamClosed)
		return nil
	}
	st.recvAvail -= int64(n)
	if st.recvAvail < 0 {
		sc.resetStream(id, http2.ErrCodeFlowControl)
		return nil
	}
	r := &st.req
	data := f.Data()
	if len(r.Body)+len(data) > sc.srv.maxBody() {
		sc.reject(st, 413)
		return nil
	}
	r.Body = append(r.Body, data...)
	if f.StreamEnded() {
		if r.ContentLength >= 0 && int64(len(r.Body)) != r.ContentLength {
			sc.resetStream(id, http2.ErrCodeProtocol)
			return nil
		}
		sc.dispatch(st)
		return nil
	}
	st.recvUnacked += int64(n)
	if st.recvUnacked >= sc.srv.initWindow()/2 {
		l.mu.Lock()
		l.wf.WriteWindowUpdate(id, uint32(st.recvUnacked))
		l.kickLocked()
		l.mu.Unlock()
		st.recvAvail += st.recvUnacked
		st.recvUnacked = 0
	}
	return nil
}

func (sc *serverConn) onReset(f *http2.RSTStreamFrame) error {
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.StreamID > sc.maxClientID {
		l.goAwayLocked(sc.maxClientID, http2.ErrCodeProtocol, "RST_STREAM on idle stream")
		return connError{http2.ErrCodeProtocol, "RST_STREAM on idle stream"}
	}
	st, _ := l.streams[f.StreamID].(*sstream)
	if st == nil {
		return nil
	}
	st.reset = true
	sc.abortLocked(st)
	if sc.resets++; sc.resets > resetAllowance && 2*sc.resets > sc.opened {
		l.goAwayLocked(sc.maxClientID, http2.ErrCodeEnhanceYourCalm, "too many stream resets")
		sc.srv.stats.connErrors.Add(1)
		return connError{http2.ErrCodeEnhanceYourCalm, "too many stream resets"}
	}
	return nil
}

// handlersRunning reports whether a handler of this connection has not
// finished (its client may wait silently for the answer).
func (sc *serverConn) handlersRunning() bool {
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.streams {
		if st := s.(*sstream); st.state == stateDispatched && !st.handlerDone {
			return true
		}
	}
	return false
}

// abortLocked releases a reset stream unless its handler still runs (then
// the handler's completion releases it).
func (sc *serverConn) abortLocked(st *sstream) {
	switch {
	case st.state == stateRecv:
		sc.releaseLocked(st)
	case st.sending:
		sc.l.dropBlockedLocked(&st.o)
		st.sending = false
		sc.releaseLocked(st)
	}
}

// resetStream sends RST_STREAM and forgets the stream.
func (sc *serverConn) resetStream(id uint32, code http2.ErrCode) {
	sc.srv.stats.streamErrors.Add(1)
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wf.WriteRSTStream(id, code)
	l.kickLocked()
	if st, _ := l.streams[id].(*sstream); st != nil {
		st.reset = true
		sc.abortLocked(st)
	}
}

// reject answers a receiving stream with an empty error response, asks the
// client to stop sending (RST_STREAM NO_ERROR) and forgets the stream.
func (sc *serverConn) reject(st *sstream, status int) {
	sc.srv.stats.rejected.Add(1)
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hbuf.Reset()
	l.encodeLocked(":status", statusString(status), false)
	var ctype string
	var body []byte
	if sc.srv.RejectBody != nil {
		ctype, body = sc.srv.RejectBody(status)
	}
	if n := int64(len(body)); n > 0 && n <= int64(l.peerMaxFrame) && n <= st.o.window && n <= l.sendWindow {
		l.encodeLocked("content-type", ctype, false)
		l.encodeLocked("content-length", bstr(strconv.AppendInt(l.num[:0], n, 10)), true)
		l.writeHeadersLocked(st.o.id, l.hbuf.Bytes(), false)
		l.wf.WriteData(st.o.id, true, body)
		st.o.window -= n
		l.sendWindow -= n
	} else {
		l.writeHeadersLocked(st.o.id, l.hbuf.Bytes(), true)
	}
	l.wf.WriteRSTStream(st.o.id, http2.ErrCodeNo)
	l.kickLocked()
	sc.releaseLocked(st)
}

// releaseLocked forgets a stream and returns it to the pool.
func (sc *serverConn) releaseLocked(st *sstream) {
	l := &sc.l
	if l.streams[st.o.id] != st {
		return
	}
	delete(l.streams, st.o.id)
	sc.active--
	if sc.draining && sc.active == 0 {
		l.failLocked(ErrServerClosed)
	}
	st.sc = nil
	streamPool.Put(st)
}

func (sc *serverConn) dispatch(st *sstream) {
	st.state = stateDispatched
	sc.srv.stats.requests.Add(1)
	if sc.srv.InlineHandler {
		sc.runHandler(st)
		return
	}
	sc.handlers.Add(1)
	sc.workers.run(st)
}

// serveStream is the workers' function: runHandler recovers a handler's
// panic, so Done always runs.
func (sc *serverConn) serveStream(st *sstream) {
	sc.runHandler(st)
	sc.handlers.Done()
}

func (sc *serverConn) runHandler(st *sstream) {
	ok := false
	defer func() {
		if !ok {
			e := recover()
			sc.log.Error("h2c handler panicked", "stream", st.o.id, "panic", e)
			sc.finish(st, true)
		}
	}()
	sc.srv.Handler(&st.resp, &st.req)
	ok = true
	sc.finish(st, false)
}

var contentLengthZero = "0"

// finish writes the response of a stream whose handler returned.
func (sc *serverConn) finish(st *sstream, panicked bool) {
	l := &sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	st.handlerDone = true
	if st.reset || l.closing {
		sc.releaseLocked(st)
		return
	}
	if panicked {
		l.wf.WriteRSTStream(st.o.id, http2.ErrCodeInternal)
		l.kickLocked()
		sc.releaseLocked(st)
		return
	}
	w := &st.resp
	l.hbuf.Reset()
	l.encodeLocked(":status", statusString(w.status), false)
	for i := range w.hdrs {
		h := &w.hdrs[i]
		l.encodeLocked(h.name, w.value(h), h.byValue)
	}
	body := w.Body
	if string(st.req.Method) == "HEAD" && len(body) > 0 {
		// No body on the wire; content-length tells its size.
		l.encodeLocked("content-length", bstr(strconv.AppendInt(l.num[:0], int64(len(body)), 10)), true)
		l.writeHeadersLocked(st.o.id, l.hbuf.Bytes(), true)
		l.kickLocked()
		sc.releaseLocked(st)
		return
	}
	if len(body) == 0 {
		if w.status != 204 && w.status != 304 {
			l.encodeLocked("content-length", contentLengthZero, false)
		}
		l.writeHeadersLocked(st.o.id, l.hbuf.Bytes(), true)
		l.kickLocked()
		sc.releaseLocked(st)
		return
	}
	l.encodeLocked("content-length", bstr(strconv.AppendInt(l.num[:0], int64(len(body)), 10)), true)
	l.writeHeadersLocked(st.o.id, l.hbuf.Bytes(), false)
	st.o.pending = body
	st.o.endAfter = true
	done := l.sendDataLocked(st)
	l.kickLocked()
	if done {
		sc.releaseLocked(st)
		return
	}
	st.sending = true
}
