package h2c

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ClientPreface is the connection preface an HTTP/2 client sends first
// (RFC 9113 section 3.4).
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

const (
	defaultMaxFrameSize  = 16384
	defaultInitialWindow = 65535
	maxWindow            = 1<<31 - 1
	// connRecvWindow is the connection-level receive window this package
	// advertises; credit is returned once half of it is consumed.
	connRecvWindow = 16 << 20
	// maxKeptWriteBuf bounds the capacity of a write buffer kept for reuse.
	maxKeptWriteBuf = 1 << 20
	readBufSize     = 32 << 10
	// maxPendingWrite is how many bytes may wait for the writer before the
	// reader stops reading (backpressure against peers that do not read).
	maxPendingWrite = 4 << 20
	// writeTimeout bounds one write to the connection.
	writeTimeout = 30 * time.Second
	// maxQueuedAcks bounds the PING and SETTINGS acknowledgements that
	// may wait for the writer: a peer that floods them without reading
	// the answers gets GOAWAY(ENHANCE_YOUR_CALM) (as nghttp2's
	// max_outbound_ack).
	maxQueuedAcks = 1000
)

// Errors reported by this package.
var (
	ErrClosed        = errors.New("h2c: connection closed")
	ErrStreamLimit   = errors.New("h2c: peer's concurrent stream limit reached")
	ErrGoAway        = errors.New("h2c: peer sent GOAWAY; stream not processed, retry on another connection")
	ErrRefused       = errors.New("h2c: stream refused by peer; safe to retry")
	ErrStreamReset   = errors.New("h2c: stream reset by peer")
	ErrConnExhausted = errors.New("h2c: stream identifiers exhausted; dial a new connection")
	ErrBadPreface    = errors.New("h2c: bad connection preface")
)

// sender is a stream that may have DATA waiting for flow-control credit.
type sender interface {
	out() *outStream
	// dataSent is called (with link.mu held) when all pending data of a
	// stream that was blocked has been written.
	dataSent()
}

// outStream is the send-side flow-control state of one stream.
type outStream struct {
	id       uint32
	window   int64  // peer's window for this stream
	pending  []byte // DATA not yet written; owned by the stream's owner
	endAfter bool   // END_STREAM after pending
	blocked  bool   // in link.blocked
}

// appendBuf is the io.Writer the write framer and the HPACK encoder append to.
type appendBuf struct{ b []byte }

func (a *appendBuf) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// link is the part of a connection shared by the server and the client:
// buffered frame reading, batched frame writing by a writer goroutine,
// HPACK encoder, peer settings and send-side flow control.
//
// Fields under mu are written by any goroutine that writes frames; the
// read side (br, rf, dec) belongs to the connection's reader goroutine.
type link struct {
	nc net.Conn
	br *bufio.Reader
	rf *http2.Framer

	mu      sync.Mutex
	ob      appendBuf // frames waiting for the writer goroutine
	wf      *http2.Framer
	hbuf    bytes.Buffer // header block being encoded
	enc     *hpack.Encoder
	num     [20]byte // scratch for numeric header values
	closing bool     // no new frames; writer exits once ob is flushed
	err     error    // first fatal error

	peerMaxFrame   uint32
	peerInitWindow int64
	peerMaxStreams uint32
	sendWindow     int64 // connection-level send window
	blocked        []sender
	streams        map[uint32]sender

	recvCredit int64 // connection-level bytes consumed and not yet credited
	queuedAcks int   // PING/SETTINGS ACKs appended since the writer last took ob

	wake       chan struct{}
	flushed    chan struct{} // poked after every write (backpressure)
	writerDone chan struct{}

	// polled: no writer goroutine and no net.Conn; the owner of a polled
	// client Conn takes ob itself (see NewPolledConn).
	polled bool
}

func (l *link) init(nc net.Conn, br *bufio.Reader) {
	l.nc = nc
	if br == nil {
		br = bufio.NewReaderSize(nc, readBufSize)
	}
	l.br = br
	l.initFrames(br)
	go l.writeLoop()
}

// initFrames sets up everything but the connection and the writer
// goroutine; frames are read from r.
func (l *link) initFrames(r io.Reader) {
	l.rf = http2.NewFramer(nil, r)
	l.rf.SetReuseFrames()
	l.wf = http2.NewFramer(&l.ob, nil)
	l.enc = hpack.NewEncoder(&l.hbuf)
	l.peerMaxFrame = defaultMaxFrameSize
	l.peerInitWindow = defaultInitialWindow
	l.peerMaxStreams = maxWindow
	l.sendWindow = defaultInitialWindow
	l.streams = make(map[uint32]sender)
	l.wake = make(chan struct{}, 1)
	l.flushed = make(chan struct{}, 1)
	l.writerDone = make(chan struct{})
}

// kickLocked wakes the writer goroutine. Called with mu held after
// appending frames.
func (l *link) kickLocked() {
	if l.polled {
		return // the owner flushes
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// writeLoop flushes ob to the connection whenever it is woken, swapping
// buffers so that writers keep appending while a write is in progress.
func (l *link) writeLoop() {
	defer close(l.writerDone)
	var spare []byte
	for range l.wake {
		// Let goroutines that are about to append (handlers finishing,
		// the reader answering a batch) run first: fewer, larger writes.
		runtime.Gosched()
		l.mu.Lock()
		buf := l.ob.b
		if len(buf) == 0 {
			closing := l.closing
			l.mu.Unlock()
			if closing {
				break
			}
			continue
		}
		l.ob.b = spare[:0]
		l.queuedAcks = 0
		l.mu.Unlock()
		l.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err := l.nc.Write(buf)
		select {
		case l.flushed <- struct{}{}:
		default:
		}
		if err != nil {
			l.mu.Lock()
			l.failLocked(err)
			l.ob.b = l.ob.b[:0]
			l.mu.Unlock()
			break
		}
		if cap(buf) > maxKeptWriteBuf {
			buf = nil
		}
		spare = buf[:0]
		// Keep going while there is more to write (the wake-up for it
		// may already have been consumed above).
		l.kick()
	}
	l.nc.Close()
}

// throttle blocks the reader while too much output waits for the writer.
// Called by the reader before a read that may block.
func (l *link) throttle() {
	for {
		l.mu.Lock()
		n := len(l.ob.b)
		l.mu.Unlock()
		if n <= maxPendingWrite {
			return
		}
		select {
		case <-l.flushed:
		case <-l.writerDone:
			return
		}
	}
}

func (l *link) kick() {
	l.mu.Lock()
	if len(l.ob.b) > 0 || l.closing {
		l.kickLocked()
	}
	l.mu.Unlock()
}

// failLocked records the first fatal error and makes the writer close the
// connection after flushing what is buffered.
func (l *link) failLocked(err error) {
	if l.err == nil {
		l.err = err
	}
	if !l.closing {
		l.closing = true
		l.kickLocked()
	}
}

// goAwayLocked queues GOAWAY and closes the connection once it is flushed.
func (l *link) goAwayLocked(lastID uint32, code http2.ErrCode, debug string) {
	if l.closing {
		return
	}
	l.wf.WriteGoAway(lastID, code, []byte(debug))
	l.failLocked(http2.ConnectionError(code))
}

// waitWriter waits for the writer goroutine to flush and close, forcing the
// close after d when the peer does not read.
func (l *link) waitWriter(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.writerDone:
	case <-t.C:
		l.nc.Close()
		<-l.writerDone
	}
}

// writeHeadersLocked writes a header block, split into CONTINUATION frames
// when it exceeds the peer's maximum frame size.
func (l *link) writeHeadersLocked(id uint32, block []byte, endStream bool) {
	max := int(l.peerMaxFrame)
	first, rest := block, []byte(nil)
	if len(block) > max {
		first, rest = block[:max], block[max:]
	}
	l.wf.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      id,
		BlockFragment: first,
		EndStream:     endStream,
		EndHeaders:    len(rest) == 0,
	})
	for len(rest) > 0 {
		n := min(len(rest), max)
		l.wf.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

// sendDataLocked writes as much pending DATA of s as the windows allow and
// reports whether everything (including END_STREAM) has been written. A
// stream that cannot finish is queued on the blocked list.
func (l *link) sendDataLocked(s sender) bool {
	o := s.out()
	if len(o.pending) == 0 {
		if o.endAfter {
			l.wf.WriteData(o.id, true, nil)
			o.endAfter = false
		}
		return true
	}
	for len(o.pending) > 0 {
		n := int64(len(o.pending))
		n = min(n, int64(l.peerMaxFrame), o.window, l.sendWindow)
		if n <= 0 {
			if !o.blocked {
				o.blocked = true
				l.blocked = append(l.blocked, s)
			}
			return false
		}
		last := n == int64(len(o.pending))
		l.wf.WriteData(o.id, last && o.endAfter, o.pending[:n])
		o.pending = o.pending[n:]
		o.window -= n
		l.sendWindow -= n
	}
	o.pending = nil
	o.endAfter = false
	return true
}

// unblockLocked retries blocked streams after new flow-control credit.
func (l *link) unblockLocked() {
	if len(l.blocked) == 0 {
		return
	}
	kept := l.blocked[:0]
	for _, s := range l.blocked {
		o := s.out()
		if !o.blocked {
			continue
		}
		o.blocked = false
		if l.sendDataLocked(s) {
			s.dataSent()
			continue
		}
		kept = append(kept, s)
	}
	for i := len(kept); i < len(l.blocked); i++ {
		l.blocked[i] = nil
	}
	l.blocked = kept
	l.kickLocked()
}

// dropBlockedLocked forgets pending data of o (stream reset or closed).
func (l *link) dropBlockedLocked(o *outStream) {
	o.pending = nil
	o.endAfter = false
	if !o.blocked {
		return
	}
	o.blocked = false
	for i, s := range l.blocked {
		if s.out() == o {
			copy(l.blocked[i:], l.blocked[i+1:])
			l.blocked[len(l.blocked)-1] = nil
			l.blocked = l.blocked[:len(l.blocked)-1]
			break
		}
	}
}

// creditConnLocked accounts n received flow-controlled bytes and returns
// connection-level credit once half the window is consumed.
func (l *link) creditConnLocked(n int) {
	l.recvCredit += int64(n)
	if l.recvCredit >= connRecvWindow/2 {
		l.wf.WriteWindowUpdate(0, uint32(l.recvCredit))
		l.recvCredit = 0
		l.kickLocked()
	}
}

// handleSettings applies a peer's SETTINGS frame and acknowledges it.
// It returns a connection error code and false on invalid settings.
func (l *link) handleSettings(f *http2.SettingsFrame) (http2.ErrCode, bool) {
	if f.IsAck() {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	code := http2.ErrCodeNo
	ok := true
	f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			if ce, isCE := err.(http2.ConnectionError); isCE {
				code = http2.ErrCode(ce)
			} else {
				code = http2.ErrCodeProtocol
			}
			ok = false
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			l.peerMaxFrame = s.Val
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - l.peerInitWindow
			l.peerInitWindow = int64(s.Val)
			for _, st := range l.streams {
				o := st.out()
				o.window += delta
				if o.window > maxWindow {
					code, ok = http2.ErrCodeFlowControl, false
				}
			}
		case http2.SettingHeaderTableSize:
			l.enc.SetMaxDynamicTableSizeLimit(s.Val)
		case http2.SettingMaxConcurrentStreams:
			l.peerMaxStreams = s.Val
		}
		return nil
	})
	if !ok {
		return code, false
	}
	if l.queuedAcks++; l.queuedAcks > maxQueuedAcks {
		return http2.ErrCodeEnhanceYourCalm, false
	}
	l.wf.WriteSettingsAck()
	l.unblockLocked()
	l.kickLocked()
	return 0, true
}

// handleWindowUpdate applies WINDOW_UPDATE. It returns a connection error
// code and false when the connection must be closed; stream-level errors
// are answered with RST_STREAM here.
func (l *link) handleWindowUpdate(f *http2.WindowUpdateFrame) (http2.ErrCode, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.StreamID == 0 {
		l.sendWindow += int64(f.Increment)
		if l.sendWindow > maxWindow {
			return http2.ErrCodeFlowControl, false
		}
		l.unblockLocked()
		return 0, true
	}
	s := l.streams[f.StreamID]
	if s == nil {
		return 0, true
	}
	o := s.out()
	o.window += int64(f.Increment)
	if o.window > maxWindow {
		l.wf.WriteRSTStream(f.StreamID, http2.ErrCodeFlowControl)
		l.dropBlockedLocked(o)
		l.kickLocked()
		return 0, true
	}
	if o.blocked {
		l.unblockLocked()
	}
	return 0, true
}

// handlePing answers a PING; false means the peer floods PINGs without
// reading the answers (a connection error ENHANCE_YOUR_CALM).
func (l *link) handlePing(f *http2.PingFrame) bool {
	if f.IsAck() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queuedAcks++; l.queuedAcks > maxQueuedAcks {
		return false
	}
	l.wf.WritePing(true, f.Data)
	l.kickLocked()
	return true
}

// encodeLocked encodes one header field into hbuf. A sensitive field is
// a never-indexed literal (RFC 7541, 6.2.3), which leaves the dynamic
// table alone, so it is written here without the encoder: its table
// search (two map lookups per table) and Huffman coding were most of a
// response block's encoding, and a value that changes per message (a
// content-length, a location) never matches an entry anyway. The value
// goes as is: a few bytes more than Huffman's on the wire. The block's
// first field always goes through the encoder, which puts a pending
// table size update first, as the block must start with it.
func (l *link) encodeLocked(name, value string, sensitive bool) {
	if !sensitive || l.hbuf.Len() == 0 {
		l.enc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: sensitive})
		return
	}
	b := l.hbuf.AvailableBuffer()
	if i := staticNameIndex(name); i > 0 {
		b = appendHpackInt(b, 0x10, 4, i)
	} else {
		b = append(b, 0x10)
		b = appendHpackInt(b, 0, 7, uint64(len(name)))
		b = append(b, name...)
	}
	b = appendHpackInt(b, 0, 7, uint64(len(value)))
	b = append(b, value...)
	l.hbuf.Write(b)
}

// validHeaderName reports whether a received field name is acceptable:
// lowercase, non-empty, without connection-specific semantics.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' || c <= ' ' || c == 0x7f || c == ':' && i > 0 {
			return false
		}
	}
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return false
	}
	return true
}
