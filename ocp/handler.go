package ocp

import (
	"context"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// ChargePath is the OCP's API: POST a msgp chf.ChargeRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the ABM
// is unavailable or contended, 502 for other ABM failures.
const ChargePath = "/ocp/v1/charge"

// ChargeBatchPath takes a batch of ChargeRequests (see chf.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ChargePath would have answered it with. 400 when the batch cannot be
// decoded.
const ChargeBatchPath = "/ocp/v1/charge-batch"

// BatchCharger is a chf.Charger that also runs batches (*Processor).
type BatchCharger interface {
	chf.Charger
	ChargeBatch(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error)
}

// exchange is the pooled request/response pair of one HTTP call.
type exchange struct {
	req  chf.ChargeRequest
	resp chf.ChargeResponse
	buf  []byte

	batch chf.Batch[chf.ChargeRequest, *chf.ChargeRequest]
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

// Handler returns the fasthttp handler serving ChargePath with c (usually a
// *Processor) and, when c is a BatchCharger, ChargeBatchPath. Other paths
// answer 404, other methods 405.
func Handler(c chf.Charger) fasthttp.RequestHandler {
	bc, batches := c.(BatchCharger)
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		if path != ChargePath && (!batches || path != ChargeBatchPath) {
			ctx.Error("not found", fasthttp.StatusNotFound)
			return
		}
		if !ctx.IsPost() {
			ctx.Response.Header.Set("Allow", "POST")
			ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
			return
		}
		x := exchangePool.Get().(*exchange)
		defer exchangePool.Put(x)
		if path == ChargeBatchPath {
			x.serveBatch(ctx, bc)
			return
		}
		x.req.Reset()
		if _, err := x.req.UnmarshalMsg(ctx.PostBody()); err != nil {
			ctx.Error("cannot decode charge request: "+err.Error(), fasthttp.StatusBadRequest)
			return
		}
		if err := c.Charge(chassis.Context(ctx), &x.req, &x.resp); err != nil {
			ctx.Error(err.Error(), statusFor(err))
			return
		}
		x.buf, _ = x.resp.MarshalMsg(x.buf[:0])
		ctx.SetContentType("application/msgpack")
		ctx.SetBody(x.buf)
	}
}

func (x *exchange) serveBatch(ctx *fasthttp.RequestCtx, c BatchCharger) {
	if err := x.batch.Decode(ctx.PostBody()); err != nil {
		ctx.Error("cannot decode charge batch: "+err.Error(), fasthttp.StatusBadRequest)
		return
	}
	c.ChargeBatch(chassis.Context(ctx), x.batch.Reqs, x.batch.Resps, x.batch.Errs)
	x.buf = x.batch.AppendReply(x.buf[:0], statusFor)
	ctx.SetContentType("application/msgpack")
	ctx.SetBody(x.buf)
}
