package ocp

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
)

// BatchCharger is a chf.Charger that also runs batches (*Processor).
type BatchCharger interface {
	chf.Charger
	ChargeBatch(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error)
}

// Handler returns the fasthttp handler serving ocpclient.ChargePath with c
// (usually a *Processor) and, when c is a BatchCharger,
// ocpclient.ChargeBatchPath. Other paths
// answer 404, other methods 405.
func Handler(c chf.Charger) fasthttp.RequestHandler {
	var many func(context.Context, []*chf.ChargeRequest, []*chf.ChargeResponse, []error)
	if bc, ok := c.(BatchCharger); ok {
		many = bc.ChargeBatch
	}
	return rpc.BatchHandler[chf.ChargeRequest, chf.ChargeResponse](ocpclient.ChargePath, ocpclient.ChargeBatchPath, "charge", c.Charge, many, statusFor)
}

// statusFor maps a charging failure to the HTTP status the OCP answers:
// the upstream's 503 (overload, contention) and 504 pass through, a missed
// deadline is 504, anything else 502.
func statusFor(err error) int {
	var se *peer.StatusError
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
	case errors.Is(err, peer.ErrNoEndpoints):
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusBadGateway
}
