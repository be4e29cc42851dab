package h2c

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// SniffTimeout bounds how long Sniff waits for a new connection's first
// bytes before routing it.
const SniffTimeout = 10 * time.Second

// Sniff splits ln into two listeners: h2 yields connections that start
// with the HTTP/2 client preface (prior knowledge), h1 yields all others
// (HTTP/1.1, e.g. for fasthttp). The first bytes read while sniffing are
// replayed to whoever reads the returned connection. Each connection is
// sniffed on its own goroutine, so a slow client does not hold up others;
// one that sends nothing within SniffTimeout is closed.
//
// Closing either listener stops it; ln is closed once both are closed.
// Serve both, or close the one not served: connections routed to an
// unserved listener wait until it is closed.
// When ln.Accept fails permanently, both return that error.
func Sniff(ln net.Listener) (h2, h1 net.Listener) { return Split(ln, sniff) }

// Classify decides where an accepted connection goes: it returns the
// connection to hand over (possibly wrapped) and whether it is HTTP/2, or
// ok false when it has closed it. Split calls it on the connection's own
// goroutine, so it may block (read, handshake) within its own deadline.
type Classify func(c net.Conn) (conn net.Conn, isH2, ok bool)

// Split serves ln through two listeners, h2 and h1, routing each accepted
// connection as classify says (Sniff: by the client preface; TLS: by the
// ALPN protocol). Closing either listener stops it and closes what waits
// in it; ln is closed once both are closed. Serve both, or close the one
// not served: connections routed to an unserved listener wait until it is
// closed. When ln.Accept fails permanently, both return that error.
func Split(ln net.Listener, classify Classify) (h2, h1 net.Listener) {
	s := &splitter{ln: ln, classify: classify, done: make(chan struct{})}
	s.h2 = &splitListener{s: s, ch: make(chan net.Conn, 64), closed: make(chan struct{})}
	s.h1 = &splitListener{s: s, ch: make(chan net.Conn, 64), closed: make(chan struct{})}
	go s.acceptLoop()
	return s.h2, s.h1
}

type splitter struct {
	ln       net.Listener
	classify Classify
	h2, h1   *splitListener
	done     chan struct{} // closed when acceptLoop ends
	err      error         // acceptLoop's error, set before done is closed

	mu      sync.Mutex
	nClosed int
}

func (s *splitter) acceptLoop() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			s.err = err
			return
		}
		go s.route(c)
	}
}

func (s *splitter) route(c net.Conn) {
	c, isH2, ok := s.classify(c)
	if !ok {
		return
	}
	target := s.h1
	if isH2 {
		target = s.h2
	}
	select {
	case target.ch <- c:
	case <-target.closed:
		c.Close()
	}
}

// sniff classifies by the first bytes: the HTTP/2 client preface, an
// HTTP/1.1 method, or neither (closed).
func sniff(c net.Conn) (net.Conn, bool, bool) {
	c.SetReadDeadline(time.Now().Add(SniffTimeout))
	buf := make([]byte, len(ClientPreface))
	n := 0
	isH2 := true
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		if m > 0 && string(buf[n:n+m]) != ClientPreface[n:n+m] {
			isH2 = false
		}
		n += m
		if !isH2 && (n > maxMethod || bytes.IndexByte(buf[:n], ' ') >= 0 || !httpMethod(buf[:n])) {
			break
		}
		if err != nil {
			if n == 0 {
				c.Close()
				return nil, false, false
			}
			isH2 = false
			break
		}
	}
	c.SetReadDeadline(time.Time{})
	if !isH2 && !httpMethod(buf[:n]) {
		// Neither the HTTP/2 preface nor an HTTP/1.1 request line (e.g.
		// an invalid preface): close without answering (RFC 9113 §3.4),
		// after a short drain, so that the close is a FIN and not a
		// reset over unread bytes.
		discard(c)
		c.Close()
		return nil, false, false
	}
	return &prefixConn{Conn: c, prefix: buf[:n]}, isH2, true
}

func (s *splitter) closeOne() {
	s.mu.Lock()
	s.nClosed++
	both := s.nClosed == 2
	s.mu.Unlock()
	if both {
		s.ln.Close()
	}
}

type splitListener struct {
	s      *splitter
	ch     chan net.Conn
	once   sync.Once
	closed chan struct{}
}

// Accept returns the next connection routed to this listener.
func (l *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.s.done:
		select {
		case c := <-l.ch:
			return c, nil
		default:
		}
		return nil, l.s.err
	}
}

// Close stops this listener and closes the connections waiting in it; the
// underlying one closes when both are closed.
func (l *splitListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		for drained := false; !drained; {
			select {
			case c := <-l.ch:
				c.Close()
			default:
				drained = true
			}
		}
		l.s.closeOne()
	})
	return nil
}

// Addr returns the underlying listener's address.
func (l *splitListener) Addr() net.Addr { return l.s.ln.Addr() }

// prefixConn replays bytes read while sniffing before reading from Conn.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// maxMethod is the length of the longest method httpMethod accepts.
const maxMethod = len("OPTIONS")

// httpMethod reports whether b starts with an HTTP/1.1 method this server
// family answers, followed by a space (or b is a prefix of one).
func httpMethod(b []byte) bool {
	for _, m := range [...]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE"} {
		if len(b) <= len(m) {
			if string(b) == m[:len(b)] {
				return true
			}
			continue
		}
		if string(b[:len(m)]) == m && b[len(m)] == ' ' {
			return true
		}
	}
	return false
}

// discard reads and drops what a rejected connection has sent, for at
// most discardWait and discardMax bytes.
func discard(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(discardWait))
	var b [512]byte
	for total := 0; total < discardMax; {
		n, err := c.Read(b[:])
		total += n
		if err != nil {
			return
		}
	}
}

const (
	discardWait = 100 * time.Millisecond
	discardMax  = 16 << 10
)
