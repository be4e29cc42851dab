package nchf

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/loadgen/driver"
)

// http1Transport uses a fasthttp.HostClient per target.
type http1Transport struct {
	clients []*fasthttp.HostClient
	timeout time.Duration
	maxRsp  []byte // the MaxRspTimeHeader value
}

func newHTTP1(cfg driver.Config) *http1Transport {
	n := cfg.Conns
	if n <= 0 {
		n = 1024
	}
	d := &http1Transport{timeout: cfg.Timeout, maxRsp: []byte(maxRspTimeValue(cfg.Timeout))}
	for _, t := range cfg.Targets {
		d.clients = append(d.clients, &fasthttp.HostClient{
			Addr:                          t,
			MaxConns:                      n,
			ReadTimeout:                   cfg.Timeout,
			WriteTimeout:                  cfg.Timeout,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			MaxIdleConnDuration:           time.Minute,
			MaxConnWaitTimeout:            cfg.Timeout,
			IsTLS:                         cfg.TLS != nil,
			TLSConfig:                     cfg.TLS,
		})
	}
	return d
}

func (d *http1Transport) close() {
	for _, c := range d.clients {
		c.CloseIdleConnections()
	}
}

var (
	hdrLocation   = []byte("Location")
	hdrCharged    = []byte("X-Chf-Charged")
	hdrRetryAfter = []byte("Retry-After")
)

func (d *http1Transport) do(ctx context.Context, target int, m *message) error {
	c := d.clients[uint(target)%uint(len(d.clients))]
	fr := fasthttp.AcquireRequest()
	fw := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(fr)
	defer fasthttp.ReleaseResponse(fw)
	if m.get {
		fr.Header.SetMethod("GET")
	} else {
		fr.Header.SetMethod("POST")
		fr.Header.SetContentType("application/json")
		fr.SetBodyRaw(m.body)
	}
	fr.SetRequestURIBytes(m.path)
	fr.Header.SetHost(c.Addr)
	fr.Header.SetBytesV("3gpp-Sbi-Max-Rsp-Time", d.maxRsp)
	fr.Header.SetBytesV("3gpp-Sbi-Sender-Timestamp", m.sent)
	if m.auth != nil {
		fr.Header.SetBytesV("Authorization", m.auth)
	}
	if c.IsTLS {
		fr.URI().SetScheme("https")
	}
	deadline := time.Now().Add(d.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.DoDeadline(fr, fw, deadline); err != nil {
		return driver.Classify(err)
	}
	m.status = fw.StatusCode()
	m.location = append(m.location[:0], fw.Header.PeekBytes(hdrLocation)...)
	m.retryAfter = append(m.retryAfter[:0], fw.Header.PeekBytes(hdrRetryAfter)...)
	if v := fw.Header.PeekBytes(hdrCharged); len(v) > 0 {
		m.charged, m.hasCharged = ParseCharged(v)
	}
	m.rbody = append(m.rbody[:0], fw.Body()...)
	return nil
}
