package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	"golang.org/x/net/http2"

	"github.com/chf-testbed/testbed/loadgen/nchf"
)

// stdH2Driver ("h2c-std") uses golang.org/x/net/http2.Transport over plain TCP (prior
// knowledge). Each of Conns transports per target holds its own
// connection, and requests spread over them round robin.
type stdH2Driver struct {
	targets []string
	conns   [][]*http2.Transport
	next    atomic.Uint64
	urls    []string // "http://host:port"
}

func newStdH2(cfg Config) (*stdH2Driver, error) {
	n := cfg.Conns
	if n <= 0 {
		n = 2
	}
	d := &stdH2Driver{targets: cfg.Targets}
	for _, t := range cfg.Targets {
		var ts []*http2.Transport
		for range n {
			dialer := &net.Dialer{Timeout: cfg.Timeout}
			ts = append(ts, &http2.Transport{
				AllowHTTP: true,
				DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
					return dialer.DialContext(ctx, network, addr)
				},
				StrictMaxConcurrentStreams: false,
			})
		}
		d.conns = append(d.conns, ts)
		d.urls = append(d.urls, "http://"+t)
	}
	return d, nil
}

func (d *stdH2Driver) Targets() int { return len(d.targets) }

func (d *stdH2Driver) Close() {
	for _, ts := range d.conns {
		for _, t := range ts {
			t.CloseIdleConnections()
		}
	}
}

func (d *stdH2Driver) Do(ctx context.Context, req *Request, resp *Response) error {
	resp.Reset()
	ts := d.conns[req.Target%len(d.conns)]
	t := ts[int(d.next.Add(1))%len(ts)]
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, d.urls[req.Target%len(d.urls)]+string(req.Path), body)
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	if req.Body != nil {
		hr.Header["Content-Type"] = jsonCT
		hr.ContentLength = int64(len(req.Body))
	}
	hr.Header["Accept"] = jsonCT
	r, err := t.RoundTrip(hr)
	if err != nil {
		return classify(err)
	}
	resp.Status = r.StatusCode
	if v := r.Header["Location"]; len(v) > 0 {
		resp.Location = append(resp.Location, v[0]...)
	}
	if v := r.Header["X-Chf-Charged"]; len(v) > 0 {
		resp.Charged, resp.HasCharged = nchf.ParseCharged([]byte(v[0]))
	}
	buf := bytes.NewBuffer(resp.Body)
	_, err = buf.ReadFrom(r.Body)
	r.Body.Close()
	resp.Body = buf.Bytes()
	if err != nil {
		return classify(err)
	}
	return nil
}

var jsonCT = []string{"application/json"}
