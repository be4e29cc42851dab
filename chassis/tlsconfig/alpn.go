package tlsconfig

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// HandshakeTimeout bounds the TLS handshake of an accepted connection in
// SplitALPN.
const HandshakeTimeout = 10 * time.Second

// SplitALPN serves TLS on ln with cfg and splits the connections by the
// protocol negotiated with ALPN: h2 yields those that chose "h2", h1 all
// others ("http/1.1" or none), as *tls.Conn with the handshake done. Each
// handshake runs on its own goroutine, bounded by HandshakeTimeout; a
// failed one is closed. Closing both returned listeners closes ln;
// connections routed to a listener not served wait until it is closed.
func SplitALPN(ln net.Listener, cfg *tls.Config) (h2, h1 net.Listener) {
	s := &splitter{ln: ln, cfg: cfg, done: make(chan struct{})}
	s.h2 = &splitListener{s: s, ch: make(chan net.Conn, 64), closed: make(chan struct{})}
	s.h1 = &splitListener{s: s, ch: make(chan net.Conn, 64), closed: make(chan struct{})}
	go s.acceptLoop()
	return s.h2, s.h1
}

type splitter struct {
	ln     net.Listener
	cfg    *tls.Config
	h2, h1 *splitListener
	done   chan struct{}
	err    error
	mu     sync.Mutex
	closed int
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
	tc := tls.Server(c, s.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		tc.Close()
		return
	}
	l := s.h1
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		l = s.h2
	}
	select {
	case l.ch <- tc:
	case <-l.closed:
		tc.Close()
	}
}

type splitListener struct {
	s      *splitter
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

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

func (l *splitListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		for {
			select {
			case c := <-l.ch:
				c.Close()
				continue
			default:
			}
			break
		}
		l.s.mu.Lock()
		l.s.closed++
		both := l.s.closed == 2
		l.s.mu.Unlock()
		if both {
			l.s.ln.Close()
		}
	})
	return nil
}

func (l *splitListener) Addr() net.Addr { return l.s.ln.Addr() }
