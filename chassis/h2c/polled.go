package h2c

import (
	"io"

	"golang.org/x/net/http2"
)

// NewPolledConn returns a client connection that has no goroutines and no
// socket of its own: its owner moves the bytes. The owner writes what
// AppendOutput hands it (starting with the connection preface and
// SETTINGS, queued here), passes every byte it reads to Feed, and calls
// Fail when the socket is gone. It is what an event loop that drives many
// connections from one goroutine uses (loadgen's h2c driver): requests
// queued with RoundTripQueued leave in the owner's next write, and the
// completion callbacks run inside Feed (or Fail, Close) on the owner's
// goroutine, so a round trip costs no goroutine wake-up at all.
//
// Only the owner's goroutine may call Feed, AppendOutput, Fail, Close and
// Ready; RoundTrip/RoundTripQueued, Err, Active and MaxStreams may be
// called from any goroutine but the requests only leave when the owner
// writes. Do is not supported (nothing would read its response while it
// waits). Until Ready reports the server's SETTINGS, the server's stream
// limit is unknown; wait for it before starting requests.
func NewPolledConn(opts *ClientOptions) *Conn {
	c := newConn(opts)
	c.l.polled = true
	c.l.initFrames(&c.feed)
	c.start0()
	return c
}

// feedReader is the framer's input on a polled connection: exactly the
// bytes of the frame being parsed.
type feedReader struct{ b []byte }

func (r *feedReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// Feed processes bytes read from the polled connection's socket: every
// complete frame in them (and in what earlier calls left incomplete) is
// handled, and the callbacks of the requests it completes run before
// Feed returns. A non-nil error means the connection is unusable: write
// what AppendOutput still holds (a GOAWAY, say), close the socket and call
// Fail. p is not retained.
func (c *Conn) Feed(p []byte) error {
	if len(c.partial) > 0 {
		c.partial = append(c.partial, p...)
		p = c.partial
	}
	off := 0
	for len(p)-off >= frameHeaderLen {
		h := p[off:]
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if n > defaultMaxFrameSize {
			n = 0 // the framer rejects it from the header alone
		} else if len(h) < frameHeaderLen+n {
			break
		}
		c.feed.b = h[:frameHeaderLen+n]
		off += frameHeaderLen + n
		if err := c.onFrame(c.l.rf.ReadFrame()); err != nil {
			c.partial = c.partial[:0]
			return err
		}
	}
	rest := p[off:]
	if len(c.partial) > 0 {
		c.partial = c.partial[:copy(c.partial, rest)]
	} else {
		c.partial = append(c.partial[:0], rest...)
	}
	return nil
}

// AppendOutput appends the frames waiting to be written to dst, empties
// the queue and returns the extended slice (polled connections).
func (c *Conn) AppendOutput(dst []byte) []byte {
	l := &c.l
	l.mu.Lock()
	dst = append(dst, l.ob.b...)
	l.ob.b = l.ob.b[:0]
	l.mu.Unlock()
	return dst
}

// Ready reports whether the server's first SETTINGS frame has arrived
// (polled connections; owner's goroutine).
func (c *Conn) Ready() bool { return c.gotSet }

// Fail ends a polled connection whose socket failed or was closed (err
// says why; nil means closed): every stream in flight fails with an error
// wrapping ErrClosed, and the callbacks run before Fail returns.
func (c *Conn) Fail(err error) {
	c.end(err)
}

// closePolled queues GOAWAY and fails the streams in flight; the owner
// writes the GOAWAY (AppendOutput) if it can and closes the socket.
func (c *Conn) closePolled() {
	l := &c.l
	l.mu.Lock()
	l.goAwayLocked(0, http2.ErrCodeNo, "")
	l.mu.Unlock()
	c.end(nil)
}
