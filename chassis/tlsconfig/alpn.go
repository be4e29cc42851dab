package tlsconfig

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/chf-testbed/testbed/chassis/h2c"
)

// HandshakeTimeout bounds the TLS handshake of an accepted connection in
// SplitALPN.
const HandshakeTimeout = 10 * time.Second

// SplitALPN serves TLS on ln with cfg and splits the connections by the
// protocol negotiated with ALPN: h2 yields those that chose "h2", h1 all
// others ("http/1.1" or none), as *tls.Conn with the handshake done. Each
// handshake runs on its own goroutine, bounded by HandshakeTimeout; a
// failed one is closed. The listeners behave as h2c.Split's: closing both
// closes ln; connections routed to a listener not served wait until it is
// closed.
func SplitALPN(ln net.Listener, cfg *tls.Config) (h2, h1 net.Listener) {
	return h2c.Split(ln, func(c net.Conn) (net.Conn, bool, bool) {
		tc := tls.Server(c, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			tc.Close()
			return nil, false, false
		}
		return tc, tc.ConnectionState().NegotiatedProtocol == "h2", true
	})
}
