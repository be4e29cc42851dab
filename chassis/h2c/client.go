package h2c

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ClientOptions configure a client connection. The zero value is usable.
type ClientOptions struct {
	// MaxConcurrentStreams caps the streams this side opens at once, in
	// addition to the server's SETTINGS_MAX_CONCURRENT_STREAMS. 0 means
	// the server's limit alone.
	MaxConcurrentStreams uint32
	// InitialWindowSize is the per-stream receive window advertised to the
	// server. 0 means 1 MiB.
	InitialWindowSize uint32
	// CaptureHeaders lists lowercase response header names whose values
	// are copied into ClientResponse.Headers, in this order.
	CaptureHeaders []string
	// HandshakeTimeout bounds Dial's wait for the server's SETTINGS when
	// the context has no deadline. 0 means 5s.
	HandshakeTimeout time.Duration
}

// RequestTemplate holds the header fields shared by many requests (method,
// scheme, authority, content-type, extra fixed headers). They are HPACK
// encoded with incremental indexing, so after the first request on a
// connection each costs one byte on the wire and no work in the decoder.
// A template is immutable after creation and safe for concurrent use.
type RequestTemplate struct {
	fields []hpack.HeaderField
}

// NewRequestTemplate returns a template for requests with the given
// method, authority (host:port) and content type (empty: none). extra are
// name, value pairs of further fixed headers (lowercase names).
func NewRequestTemplate(method, authority, contentType string, extra ...string) *RequestTemplate {
	t := &RequestTemplate{}
	// The three pseudo-header fields come first; :path follows them.
	t.fields = append(t.fields,
		hpack.HeaderField{Name: ":method", Value: method},
		hpack.HeaderField{Name: ":scheme", Value: "http"},
		hpack.HeaderField{Name: ":authority", Value: authority},
	)
	if contentType != "" {
		t.fields = append(t.fields, hpack.HeaderField{Name: "content-type", Value: contentType})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		t.fields = append(t.fields, hpack.HeaderField{Name: strings.ToLower(extra[i]), Value: extra[i+1]})
	}
	return t
}

// NewTLSRequestTemplate is NewRequestTemplate for requests sent over TLS
// (:scheme https).
func NewTLSRequestTemplate(method, authority, contentType string, extra ...string) *RequestTemplate {
	t := NewRequestTemplate(method, authority, contentType, extra...)
	t.fields[1].Value = "https"
	return t
}

// ClientRequest is one request. Path is sent as a never-indexed literal,
// and so are the Fields of this request alone (values that change from
// request to request, such as a timestamp, would only churn the HPACK
// table). The Conn reads Path and Fields during the call and Body until
// the response completes; none may be modified before then.
type ClientRequest struct {
	Template *RequestTemplate
	Path     []byte
	Body     []byte
	Fields   []Field
}

// Field is a header field of one request: a lowercase name and its value.
type Field struct {
	Name  string
	Value []byte
}

// ClientResponse receives a response. Body is appended to (reset it with
// Body = Body[:0] to reuse the buffer); Headers[i] receives the value of
// ClientOptions.CaptureHeaders[i] (empty when absent; the slices are
// reused across requests). The Conn writes into
// it until the request completes.
type ClientResponse struct {
	Status  int
	Body    []byte
	Headers [][]byte
}

// Conn is a client HTTP/2 cleartext connection. All methods are safe for
// concurrent use; requests are multiplexed as concurrent streams.
type Conn struct {
	l    link
	opts ClientOptions

	dec      *hpackDecoder
	cur      *cstream // stream whose header block is being decoded
	contID   uint32
	contEnd  bool
	settings chan struct{} // closed once the server's first SETTINGS arrived
	gotSet   bool
	readDone chan struct{}

	// under l.mu
	nextID  uint32
	active  uint32
	goAway  bool
	lastID  uint32 // GOAWAY's last stream id
	closeAt bool   // close once no stream is active

	pendingCB []cbCall // reader goroutine only

	// polled connections (NewPolledConn), owner's goroutine only
	feed    feedReader
	partial []byte // an incomplete frame from the last Feed
}

// cstream is one client stream; pooled.
type cstream struct {
	c          *Conn
	o          outStream
	resp       *ClientResponse
	cb         func(*ClientResponse, error)
	wait       chan error // for Do
	recvAvail  int64
	recvUnack  int64
	final      bool // final (non-1xx) HEADERS received
	badHeaders bool
}

func (st *cstream) out() *outStream { return &st.o }
func (st *cstream) dataSent()       {}

var cstreamPool = sync.Pool{New: func() any { return &cstream{wait: make(chan error, 1)} }}

// Dial connects to addr (host:port) and performs the HTTP/2 handshake.
func Dial(ctx context.Context, addr string, opts *ClientOptions) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c, err := NewConn(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// NewConn performs the HTTP/2 handshake on an established connection and
// returns once the server's SETTINGS have been received. The Conn owns nc.
func NewConn(ctx context.Context, nc net.Conn, opts *ClientOptions) (*Conn, error) {
	c := newConn(opts)
	c.l.init(nc, nil)
	c.start0()
	go c.readLoop()

	timeout := c.opts.HandshakeTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.settings:
		return c, nil
	case <-c.readDone:
		err := c.Err()
		c.Close()
		return nil, fmt.Errorf("cannot complete HTTP/2 handshake: %w", err)
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("cannot complete HTTP/2 handshake: %w", ctx.Err())
	case <-t.C:
		c.Close()
		return nil, fmt.Errorf("cannot complete HTTP/2 handshake: %w", context.DeadlineExceeded)
	}
}

// newConn returns a client connection without its link's I/O set up.
func newConn(opts *ClientOptions) *Conn {
	c := &Conn{settings: make(chan struct{}), readDone: make(chan struct{}), nextID: 1}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.InitialWindowSize == 0 {
		c.opts.InitialWindowSize = 1 << 20
	}
	c.opts.InitialWindowSize = min(c.opts.InitialWindowSize, maxWindow)
	return c
}

// start0 queues the connection preface, SETTINGS and the connection
// window once the link is set up.
func (c *Conn) start0() {
	c.l.rf.SetMaxReadFrameSize(defaultMaxFrameSize)
	c.dec = newHpackDecoder(4096, 1<<20, 2*(1<<20+8), c.emit)
	l := &c.l
	l.mu.Lock()
	l.ob.b = append(l.ob.b, ClientPreface...)
	l.wf.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.opts.InitialWindowSize},
	)
	l.wf.WriteWindowUpdate(0, connRecvWindow-defaultInitialWindow)
	l.kickLocked()
	l.mu.Unlock()
}

// Err returns the error that made the connection unusable, or nil.
func (c *Conn) Err() error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.l.err != nil {
		return c.l.err
	}
	if c.goAway {
		return ErrGoAway
	}
	return nil
}

// Active returns the number of streams in flight.
func (c *Conn) Active() int {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return int(c.active)
}

// MaxStreams returns how many streams may be in flight at once: the
// server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by
// ClientOptions.MaxConcurrentStreams. Size worker pools or queues by it.
func (c *Conn) MaxStreams() int {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	n := c.l.peerMaxStreams
	if m := c.opts.MaxConcurrentStreams; m > 0 && m < n {
		n = m
	}
	return int(n)
}

// Close sends GOAWAY, fails streams in flight with ErrClosed and closes
// the connection. It waits for the connection's goroutines to end. On a
// polled connection it only queues the GOAWAY and fails the streams (their
// callbacks run before it returns); the owner writes and closes the socket.
func (c *Conn) Close() error {
	l := &c.l
	if l.polled {
		c.closePolled()
		return nil
	}
	l.mu.Lock()
	l.goAwayLocked(0, http2.ErrCodeNo, "")
	l.mu.Unlock()
	l.waitWriter(time.Second)
	l.nc.Close()
	<-c.readDone
	return nil
}

// RoundTrip starts req and calls done with resp once the response is
// complete or the stream failed. done runs on the connection's reader
// goroutine: it must be quick and must not block (hand the result to
// another goroutine if needed); it may start further requests. An error
// returned by RoundTrip itself (ErrStreamLimit, ErrGoAway, ErrClosed,
// ErrConnExhausted) means done will not be called.
func (c *Conn) RoundTrip(req *ClientRequest, resp *ClientResponse, done func(*ClientResponse, error)) error {
	_, err := c.start(req, resp, done, true)
	return err
}

// RoundTripQueued is RoundTrip except that the request's frames may wait
// in the connection's write buffer until Flush (or the next request,
// frame or flush that wakes the writer). A caller starting several
// requests together queues them and flushes once: they leave in one
// write system call and wake the writer goroutine once. The caller must
// call Flush after its last queued request.
func (c *Conn) RoundTripQueued(req *ClientRequest, resp *ClientResponse, done func(*ClientResponse, error)) error {
	_, err := c.start(req, resp, done, false)
	return err
}

// Flush wakes the writer goroutine when frames queued by RoundTripQueued
// wait to be written. It is cheap when nothing waits.
func (c *Conn) Flush() {
	c.l.kick()
}

// Do sends req and waits for the response, which it writes into resp.
// When ctx ends first the stream is reset and ctx's error returned. It
// returns ErrStreamLimit without waiting when the concurrent stream limit
// is reached.
func (c *Conn) Do(ctx context.Context, req *ClientRequest, resp *ClientResponse) error {
	if c.l.polled {
		return errPolledDo
	}
	st, err := c.start(req, resp, nil, true)
	if err != nil {
		return err
	}
	wait := st.wait
	done := ctx.Done()
	if done == nil {
		err = <-wait
		cstreamPool.Put(st)
		return err
	}
	select {
	case err = <-wait:
		cstreamPool.Put(st)
		return err
	case <-done:
	}
	l := &c.l
	l.mu.Lock()
	if l.streams[st.o.id] == sender(st) {
		l.wf.WriteRSTStream(st.o.id, http2.ErrCodeCancel)
		l.kickLocked()
		c.forgetLocked(st)
		l.mu.Unlock()
		cstreamPool.Put(st)
		return ctx.Err()
	}
	l.mu.Unlock()
	err = <-wait // completed concurrently
	cstreamPool.Put(st)
	return err
}

// CancelRoundTrip abandons the RoundTrip whose response resp receives,
// for a caller that gives up at its own deadline (the connection has
// none): the stream is reset (RST_STREAM CANCEL, written with the next
// flush) and its done callback will not run; resp is free at once. It
// reports whether the request was still in flight. It costs a scan of the
// streams in flight.
func (c *Conn) CancelRoundTrip(resp *ClientResponse) bool {
	l := &c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, s := range l.streams {
		st, ok := s.(*cstream)
		if !ok || st.resp != resp || st.cb == nil {
			continue
		}
		if !l.closing {
			l.wf.WriteRSTStream(id, http2.ErrCodeCancel)
			l.kickLocked()
		}
		c.forgetLocked(st)
		st.resp, st.cb = nil, nil
		cstreamPool.Put(st)
		return true
	}
	return false
}

// start opens a stream for req; flush wakes the writer for it.
func (c *Conn) start(req *ClientRequest, resp *ClientResponse, cb func(*ClientResponse, error), flush bool) (*cstream, error) {
	l := &c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closing:
		if l.err != nil && !errors.Is(l.err, ErrClosed) {
			return nil, fmt.Errorf("%w: %w", ErrClosed, l.err)
		}
		return nil, ErrClosed
	case c.goAway:
		return nil, ErrGoAway
	case c.active >= l.peerMaxStreams || c.opts.MaxConcurrentStreams > 0 && c.active >= c.opts.MaxConcurrentStreams:
		return nil, ErrStreamLimit
	case c.nextID > maxWindow:
		return nil, ErrConnExhausted
	}
	id := c.nextID
	c.nextID += 2
	st := cstreamPool.Get().(*cstream)
	st.c = c
	st.o = outStream{id: id, window: l.peerInitWindow}
	st.resp, st.cb = resp, cb
	st.recvAvail = int64(c.opts.InitialWindowSize)
	st.recvUnack = 0
	st.final, st.badHeaders = false, false
	resp.Status = 0
	for i := range resp.Headers {
		resp.Headers[i] = resp.Headers[i][:0]
	}
	if n := len(c.opts.CaptureHeaders); n > 0 && len(resp.Headers) != n {
		resp.Headers = make([][]byte, n)
	}
	l.streams[id] = st
	c.active++

	l.hbuf.Reset()
	fields := req.Template.fields
	for _, f := range fields[:3] {
		l.enc.WriteField(f)
	}
	l.encodeLocked(":path", bstr(req.Path), true)
	for _, f := range fields[3:] {
		l.enc.WriteField(f)
	}
	for _, f := range req.Fields {
		l.encodeLocked(f.Name, bstr(f.Value), true)
	}
	end := len(req.Body) == 0
	if !end {
		l.encodeLocked("content-length", bstr(appendUint(l.num[:0], uint64(len(req.Body)))), true)
	}
	l.writeHeadersLocked(id, l.hbuf.Bytes(), end)
	if !end {
		st.o.pending = req.Body
		st.o.endAfter = true
		l.sendDataLocked(st)
	}
	if flush {
		l.kickLocked()
	}
	return st, nil
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// forgetLocked removes a stream from the connection.
func (c *Conn) forgetLocked(st *cstream) {
	l := &c.l
	delete(l.streams, st.o.id)
	l.dropBlockedLocked(&st.o)
	c.active--
	if c.closeAt && c.active == 0 {
		l.failLocked(ErrGoAway)
	}
}

// completeLocked removes st and reports err; the callback or waiter runs
// after mu is released by the caller through the returned func.
func (c *Conn) completeLocked(st *cstream, err error) {
	c.forgetLocked(st)
	if st.cb != nil {
		c.pendingCB = append(c.pendingCB, cbCall{st.cb, st.resp, err})
		st.resp, st.cb = nil, nil
		cstreamPool.Put(st)
		return
	}
	st.resp = nil
	st.wait <- err
}

var errPolledDo = errors.New("h2c: Do on a polled connection (use RoundTrip)")

type cbCall struct {
	cb   func(*ClientResponse, error)
	resp *ClientResponse
	err  error
}

// runCallbacks runs completion callbacks collected while mu was held.
func (c *Conn) runCallbacks() {
	for i, call := range c.pendingCB {
		call.cb(call.resp, call.err)
		c.pendingCB[i] = cbCall{}
	}
	c.pendingCB = c.pendingCB[:0]
}

func (c *Conn) readLoop() {
	defer close(c.readDone)
	c.end(c.readFrames())
}

// end fails every stream once the connection can no longer be read (err:
// why) and runs their callbacks.
func (c *Conn) end(err error) {
	l := &c.l
	l.mu.Lock()
	if err != nil && l.err == nil {
		l.err = err
	}
	l.failLocked(ErrClosed)
	failErr := l.err
	if errors.Is(failErr, ErrClosed) || failErr == nil {
		failErr = ErrClosed
	} else {
		failErr = fmt.Errorf("%w: %w", ErrClosed, failErr)
	}
	for _, s := range l.streams {
		c.completeLocked(s.(*cstream), failErr)
	}
	l.mu.Unlock()
	c.runCallbacks()
}

func (c *Conn) fail(code http2.ErrCode, reason string) error {
	l := &c.l
	l.mu.Lock()
	l.goAwayLocked(0, code, reason)
	l.mu.Unlock()
	return connError{code, reason}
}

func (c *Conn) readFrames() error {
	l := &c.l
	for {
		if l.br.Buffered() == 0 {
			l.throttle()
		}
		if err := c.onFrame(l.rf.ReadFrame()); err != nil {
			return err
		}
	}
}

// onFrame handles one frame read (or the error reading it) and runs the
// completion callbacks it caused. A non-nil result ends the connection.
func (c *Conn) onFrame(f http2.Frame, err error) error {
	if err != nil {
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			c.resetStream(se.StreamID, se.Code, fmt.Errorf("%w: %v", ErrStreamReset, se.Code))
			return nil
		case errors.As(err, &ce):
			return c.fail(http2.ErrCode(ce), "")
		case errors.Is(err, http2.ErrFrameTooLarge):
			return c.fail(http2.ErrCodeFrameSize, "frame too large")
		}
		return err
	}
	if !c.gotSet {
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			return c.fail(http2.ErrCodeProtocol, "first frame is not SETTINGS")
		}
	}
	if err := c.processFrame(f); err != nil {
		return err
	}
	if !c.gotSet {
		c.gotSet = true
		close(c.settings)
	}
	if len(c.pendingCB) > 0 {
		c.runCallbacks()
	}
	return nil
}

func (c *Conn) processFrame(f http2.Frame) error {
	l := &c.l
	switch f := f.(type) {
	case *http2.HeadersFrame:
		l.mu.Lock()
		st, _ := l.streams[f.StreamID].(*cstream)
		idle := f.StreamID%2 == 0 || f.StreamID >= c.nextID
		l.mu.Unlock()
		if st == nil && idle {
			return c.fail(http2.ErrCodeProtocol, "HEADERS on idle stream")
		}
		c.cur, c.contID, c.contEnd = st, f.StreamID, f.StreamEnded()
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if code, ok := l.handleSettings(f); !ok {
			return c.fail(code, "invalid SETTINGS")
		}
	case *http2.WindowUpdateFrame:
		if code, ok := l.handleWindowUpdate(f); !ok {
			return c.fail(code, "window overflow")
		}
	case *http2.PingFrame:
		if !l.handlePing(f) {
			return c.fail(http2.ErrCodeEnhanceYourCalm, "PING flood")
		}
	case *http2.RSTStreamFrame:
		err := ErrStreamReset
		if f.ErrCode == http2.ErrCodeRefusedStream {
			err = ErrRefused
		}
		l.mu.Lock()
		if st, _ := l.streams[f.StreamID].(*cstream); st != nil {
			if f.ErrCode == http2.ErrCodeNo && st.final {
				// The server answered early and asks us to stop
				// sending; the response itself still completes.
				l.dropBlockedLocked(&st.o)
			} else {
				c.completeLocked(st, fmt.Errorf("%w: %v", err, f.ErrCode))
			}
		}
		l.mu.Unlock()
	case *http2.GoAwayFrame:
		l.mu.Lock()
		c.goAway = true
		c.lastID = f.LastStreamID
		for id, s := range l.streams {
			if id > f.LastStreamID {
				c.completeLocked(s.(*cstream), ErrGoAway)
			}
		}
		c.closeAt = true
		if c.active == 0 {
			l.failLocked(ErrGoAway)
		}
		l.mu.Unlock()
	case *http2.PushPromiseFrame:
		return c.fail(http2.ErrCodeProtocol, "PUSH_PROMISE with push disabled")
	}
	return nil
}

// emit receives decoded response header fields for c.cur.
func (c *Conn) emit(f hpack.HeaderField) {
	st := c.cur
	if st == nil {
		return
	}
	resp := st.resp
	if f.Name == ":status" {
		n := 0
		for i := 0; i < len(f.Value); i++ {
			d := f.Value[i]
			if d < '0' || d > '9' {
				st.badHeaders = true
				return
			}
			n = n*10 + int(d-'0')
		}
		if len(f.Value) != 3 {
			st.badHeaders = true
			return
		}
		resp.Status = n
		return
	}
	for i, name := range c.opts.CaptureHeaders {
		if name == f.Name {
			resp.Headers[i] = append(resp.Headers[i], f.Value...)
			return
		}
	}
}

func (c *Conn) onHeaderFragment(frag []byte, end bool) error {
	l := &c.l
	// The stream's response is written only under mu (Do may cancel).
	l.mu.Lock()
	if c.cur != nil && l.streams[c.contID] != sender(c.cur) {
		c.cur = nil
	}
	err := c.dec.fragment(frag, end)
	l.mu.Unlock()
	if err != nil {
		return c.fail(http2.ErrCodeCompression, "bad header block")
	}
	if !end {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := c.cur
	c.cur = nil
	if st == nil || l.streams[c.contID] != sender(st) {
		return nil
	}
	switch {
	case st.badHeaders || st.resp.Status == 0:
		l.wf.WriteRSTStream(st.o.id, http2.ErrCodeProtocol)
		l.kickLocked()
		c.completeLocked(st, fmt.Errorf("%w: malformed response headers", ErrStreamReset))
	case st.resp.Status < 200 && !st.final:
		// Informational response: wait for the final one.
		st.resp.Status = 0
	case c.contEnd:
		st.final = true
		c.completeLocked(st, nil)
	default:
		st.final = true
	}
	return nil
}

func (c *Conn) onData(f *http2.DataFrame) error {
	l := &c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int(f.Length)
	l.creditConnLocked(n)
	st, _ := l.streams[f.StreamID].(*cstream)
	if st == nil {
		if f.StreamID >= c.nextID {
			l.goAwayLocked(0, http2.ErrCodeProtocol, "DATA on idle stream")
			return connError{http2.ErrCodeProtocol, "DATA on idle stream"}
		}
		return nil
	}
	if !st.final {
		l.wf.WriteRSTStream(st.o.id, http2.ErrCodeProtocol)
		l.kickLocked()
		c.completeLocked(st, fmt.Errorf("%w: DATA before HEADERS", ErrStreamReset))
		return nil
	}
	st.recvAvail -= int64(n)
	if st.recvAvail < 0 {
		l.wf.WriteRSTStream(st.o.id, http2.ErrCodeFlowControl)
		l.kickLocked()
		c.completeLocked(st, fmt.Errorf("%w: flow control", ErrStreamReset))
		return nil
	}
	st.resp.Body = append(st.resp.Body, f.Data()...)
	if f.StreamEnded() {
		c.completeLocked(st, nil)
		return nil
	}
	st.recvUnack += int64(n)
	if st.recvUnack >= int64(c.opts.InitialWindowSize)/2 {
		l.wf.WriteWindowUpdate(st.o.id, uint32(st.recvUnack))
		l.kickLocked()
		st.recvAvail += st.recvUnack
		st.recvUnack = 0
	}
	return nil
}

// resetStream sends RST_STREAM and fails the stream with err.
func (c *Conn) resetStream(id uint32, code http2.ErrCode, err error) {
	l := &c.l
	l.mu.Lock()
	l.wf.WriteRSTStream(id, code)
	l.kickLocked()
	if st, _ := l.streams[id].(*cstream); st != nil {
		c.completeLocked(st, err)
	}
	l.mu.Unlock()
	c.runCallbacks()
}
