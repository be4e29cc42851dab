package abm

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// ApplyPath is the ABM's API: POST a msgp chf.ApplyRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the
// record stayed contended, 500 when the database failed.
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
	if errors.Is(err, ErrContention) || errors.Is(err, context.DeadlineExceeded) {
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusInternalServerError
}
