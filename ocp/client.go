package ocp

import (
	"context"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// Client is the OCP as the fronts see it: a chf.Charger that posts each
// request to an OCP instance over the chassis (msgp on ChargePath).
// Concurrent requests are merged into batches (ChargeBatchPath) while
// earlier batches are out, see chassis.Batcher. It is safe for concurrent
// use.
type Client struct {
	bc *rpc.BatchClient[*chf.ChargeRequest, *chf.ChargeResponse]
}

// NewClient returns a Client over c, a chassis client for the "ocp" peer,
// batching as bc says. c stays owned by the caller.
func NewClient(c *chassis.Client, bc chassis.BatchConfig) *Client {
	return &Client{bc: rpc.NewBatchClient[*chf.ChargeRequest, *chf.ChargeResponse](c, bc, "ocp", ChargePath, ChargeBatchPath,
		func(err error) error { return fmt.Errorf("cannot charge through ocp: %w", err) })}
}

// Charge implements chf.Charger.
func (c *Client) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	return c.bc.Do(ctx, req, resp)
}

// statusFor maps a charging failure to the HTTP status the OCP answers:
// the upstream's 503 (overload, contention) and 504 pass through, a missed
// deadline is 504, anything else 502.
func statusFor(err error) int {
	var se *chassis.StatusError
	switch {
	case errors.As(err, &se) && (se.Code == fasthttp.StatusServiceUnavailable || se.Code == fasthttp.StatusGatewayTimeout):
		return se.Code
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		// The connection pool to the ABM is exhausted: overload.
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, fasthttp.ErrTimeout):
		// The ABM (or the database behind it) did not answer within the
		// caller's deadline.
		return fasthttp.StatusGatewayTimeout
	case errors.Is(err, chassis.ErrNoEndpoints):
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusBadGateway
}
