package abm

import (
	"context"
	"errors"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// ApplyPath is the ABM's API: POST a msgp chf.ApplyRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the
// record stayed contended, 504 when the caller's deadline passed or the
// database did not answer in time, 500 when the database failed.
const ApplyPath = "/abm/v1/apply"

// ApplyBatchPath takes a batch of ApplyRequests (see rpc.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ApplyPath would have answered it with. 400 when the batch cannot be
// decoded.
const ApplyBatchPath = "/abm/v1/apply-batch"

// Handler returns the fasthttp handler serving ApplyPath and ApplyBatchPath
// on s. Other paths answer 404, other methods 405.
func (s *Service) Handler() fasthttp.RequestHandler {
	return rpc.BatchHandler[chf.ApplyRequest, chf.ChargeResponse](ApplyPath, ApplyBatchPath, "apply", s.Apply, s.ApplyBatch, statusFor)
}

// statusFor maps an Apply error to the HTTP status the ABM answers.
func statusFor(err error) int {
	var aerr as.Error
	switch {
	case errors.Is(err, ErrContention):
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &aerr) && aerr.Matches(types.TIMEOUT):
		return fasthttp.StatusGatewayTimeout
	}
	return fasthttp.StatusInternalServerError
}
