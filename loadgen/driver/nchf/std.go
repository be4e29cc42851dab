package nchf

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

	"github.com/chf-testbed/testbed/loadgen/driver"
)

// stdTransport ("h2c-std") uses golang.org/x/net/http2.Transport over
// plain TCP (prior knowledge). Each of Conns transports per target holds
// its own connection, and requests spread over them round robin.
type stdTransport struct {
	conns [][]*http2.Transport
	next  atomic.Uint64
	urls  []string // "http://host:port"
	// maxRsp is the MaxRspTimeHeader value.
	maxRsp []string
}

func newStd(cfg driver.Config) *stdTransport {
	n := cfg.Conns
	if n <= 0 {
		n = 2
	}
	d := &stdTransport{maxRsp: []string{maxRspTimeValue(cfg.Timeout)}}
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	for _, t := range cfg.Targets {
		var ts []*http2.Transport
		for range n {
			dialer := &net.Dialer{Timeout: cfg.Timeout}
			ts = append(ts, &http2.Transport{
				AllowHTTP:       cfg.TLS == nil,
				TLSClientConfig: cfg.TLS,
				DialTLSContext: func(ctx context.Context, network, addr string, tc *tls.Config) (net.Conn, error) {
					if cfg.TLS != nil {
						return (&tls.Dialer{NetDialer: dialer, Config: tc}).DialContext(ctx, network, addr)
					}
					return dialer.DialContext(ctx, network, addr)
				},
				StrictMaxConcurrentStreams: false,
				ReadIdleTimeout:            cfg.Timeout,
				PingTimeout:                cfg.Timeout,
			})
		}
		d.conns = append(d.conns, ts)
		d.urls = append(d.urls, scheme+t)
	}
	return d
}

func (d *stdTransport) close() {
	for _, ts := range d.conns {
		for _, t := range ts {
			t.CloseIdleConnections()
		}
	}
}

var jsonCT = []string{"application/json"}

func (d *stdTransport) do(ctx context.Context, target int, m *message) error {
	i := uint(target) % uint(len(d.conns))
	ts := d.conns[i]
	t := ts[int(d.next.Add(1))%len(ts)]
	var body io.Reader
	method := http.MethodGet
	if !m.get {
		body, method = bytes.NewReader(m.body), http.MethodPost
	}
	hr, err := http.NewRequestWithContext(ctx, method, d.urls[i]+string(m.path), body)
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	if !m.get {
		hr.Header["Content-Type"] = jsonCT
		hr.ContentLength = int64(len(m.body))
	}
	hr.Header["Accept"] = jsonCT
	hr.Header["3gpp-Sbi-Max-Rsp-Time"] = d.maxRsp
	hr.Header["3gpp-Sbi-Sender-Timestamp"] = []string{string(m.sent)}
	if m.auth != nil {
		hr.Header["Authorization"] = []string{string(m.auth)}
	}
	r, err := t.RoundTrip(hr)
	if err != nil {
		return driver.Classify(err)
	}
	m.status = r.StatusCode
	if v := r.Header["Location"]; len(v) > 0 {
		m.location = append(m.location[:0], v[0]...)
	}
	if v := r.Header["X-Chf-Charged"]; len(v) > 0 {
		m.charged, m.hasCharged = ParseCharged([]byte(v[0]))
	}
	if v := r.Header["Retry-After"]; len(v) > 0 {
		m.retryAfter = append(m.retryAfter[:0], v[0]...)
	}
	buf := bytes.NewBuffer(m.rbody[:0])
	_, err = buf.ReadFrom(r.Body)
	r.Body.Close()
	m.rbody = buf.Bytes()
	if err != nil {
		return driver.Classify(err)
	}
	return nil
}
