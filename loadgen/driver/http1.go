package driver

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/loadgen/nchf"
)

// http1Driver uses a fasthttp.HostClient per target.
type http1Driver struct {
	clients []*fasthttp.HostClient
	timeout time.Duration
}

func newHTTP1(cfg Config) (*http1Driver, error) {
	n := cfg.Conns
	if n <= 0 {
		n = 1024
	}
	d := &http1Driver{timeout: cfg.Timeout}
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
		})
	}
	return d, nil
}

func (d *http1Driver) Targets() int { return len(d.clients) }

func (d *http1Driver) Close() {
	for _, c := range d.clients {
		c.CloseIdleConnections()
	}
}

var (
	hdrLocation = []byte("Location")
	hdrCharged  = []byte("X-Chf-Charged")
)

func (d *http1Driver) Do(ctx context.Context, req *Request, resp *Response) error {
	resp.Reset()
	c := d.clients[req.Target%len(d.clients)]
	fr := fasthttp.AcquireRequest()
	fw := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(fr)
	defer fasthttp.ReleaseResponse(fw)
	fr.Header.SetMethod(req.Method)
	fr.SetRequestURIBytes(req.Path)
	fr.Header.SetHost(c.Addr)
	if req.Body != nil {
		fr.Header.SetContentType("application/json")
		fr.SetBodyRaw(req.Body)
	}
	deadline := time.Now().Add(d.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.DoDeadline(fr, fw, deadline); err != nil {
		return classify(err)
	}
	resp.Status = fw.StatusCode()
	resp.Location = append(resp.Location, fw.Header.PeekBytes(hdrLocation)...)
	if v := fw.Header.PeekBytes(hdrCharged); len(v) > 0 {
		resp.Charged, resp.HasCharged = nchf.ParseCharged(v)
	}
	resp.Body = append(resp.Body, fw.Body()...)
	return nil
}
