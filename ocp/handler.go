package ocp

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// ChargePath is the OCP's API: POST a msgp chf.ChargeRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the ABM
// is unavailable or contended, 502 for other ABM failures.
const ChargePath = "/ocp/v1/charge"

// ChargeBatchPath takes a batch of ChargeRequests (see rpc.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ChargePath would have answered it with. 400 when the batch cannot be
// decoded.
const ChargeBatchPath = "/ocp/v1/charge-batch"

// BatchCharger is a chf.Charger that also runs batches (*Processor).
type BatchCharger interface {
	chf.Charger
	ChargeBatch(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error)
}

// Handler returns the fasthttp handler serving ChargePath with c (usually a
// *Processor) and, when c is a BatchCharger, ChargeBatchPath. Other paths
// answer 404, other methods 405.
func Handler(c chf.Charger) fasthttp.RequestHandler {
	var many func(context.Context, []*chf.ChargeRequest, []*chf.ChargeResponse, []error)
	if bc, ok := c.(BatchCharger); ok {
		many = bc.ChargeBatch
	}
	return rpc.BatchHandler[chf.ChargeRequest, chf.ChargeResponse](ChargePath, ChargeBatchPath, "charge", c.Charge, many, statusFor)
}
