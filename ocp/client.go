package ocp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// Client is the OCP as the fronts see it: a chf.Charger that posts each
// request to an OCP instance over the chassis (msgp on ChargePath). It is
// safe for concurrent use.
type Client struct {
	c *chassis.Client
}

// NewClient returns a Client over c, a chassis client for the "ocp" peer.
// c stays owned by the caller.
func NewClient(c *chassis.Client) *Client { return &Client{c: c} }

var bufPool = sync.Pool{New: func() any { return new(clientBufs) }}

type clientBufs struct{ body, reply []byte }

// Charge implements chf.Charger.
func (c *Client) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	b := bufPool.Get().(*clientBufs)
	defer bufPool.Put(b)
	var err error
	b.body, err = req.MarshalMsg(b.body[:0])
	if err != nil {
		return fmt.Errorf("cannot encode charge request: %w", err)
	}
	b.reply, err = c.c.Do(ctx, ChargePath, b.body, b.reply[:0])
	if err != nil {
		return fmt.Errorf("cannot charge through ocp: %w", err)
	}
	resp.Lines = resp.Lines[:0]
	if _, err := resp.UnmarshalMsg(b.reply); err != nil {
		return fmt.Errorf("cannot decode charge response: %w", err)
	}
	return nil
}

// statusFor maps a charging failure to the HTTP status the OCP answers:
// the upstream's 503 (overload, contention) passes through, a missing
// deadline is 504, anything else 502.
func statusFor(err error) int {
	var se *chassis.StatusError
	switch {
	case errors.As(err, &se) && se.Code == fasthttp.StatusServiceUnavailable:
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		// The connection pool to the ABM is exhausted: overload.
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return fasthttp.StatusGatewayTimeout
	case errors.Is(err, chassis.ErrNoEndpoints):
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusBadGateway
}
