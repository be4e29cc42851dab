package abm

import (
	"context"
	"errors"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// ApplyPath is the ABM's API: POST a msgp chf.ApplyRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the
// record stayed contended, 500 when the database failed.
const ApplyPath = "/abm/v1/apply"

// ApplyBatchPath takes a batch of ApplyRequests (see chf.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ApplyPath would have answered it with. 400 when the batch cannot be
// decoded.
const ApplyBatchPath = "/abm/v1/apply-batch"

// exchange is the pooled request/response pair of one HTTP call.
type exchange struct {
	req  chf.ApplyRequest
	resp chf.ChargeResponse
	buf  []byte

	batch chf.Batch[chf.ApplyRequest, *chf.ApplyRequest]
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

// Handler returns the fasthttp handler serving ApplyPath and ApplyBatchPath
// on s. Other paths answer 404, other methods 405.
func (s *Service) Handler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		if path != ApplyPath && path != ApplyBatchPath {
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
		if path == ApplyBatchPath {
			x.serveBatch(ctx, s)
			return
		}
		x.req.Reset()
		if _, err := x.req.UnmarshalMsg(ctx.PostBody()); err != nil {
			ctx.Error("cannot decode apply request: "+err.Error(), fasthttp.StatusBadRequest)
			return
		}
		if err := s.Apply(chassis.Context(ctx), &x.req, &x.resp); err != nil {
			ctx.Error(err.Error(), statusFor(err))
			return
		}
		x.buf, _ = x.resp.MarshalMsg(x.buf[:0])
		ctx.SetContentType("application/msgpack")
		ctx.SetBody(x.buf)
	}
}

// statusFor maps an Apply error to the HTTP status the ABM answers.
func statusFor(err error) int {
	if errors.Is(err, ErrContention) || errors.Is(err, context.DeadlineExceeded) {
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusInternalServerError
}

func (x *exchange) serveBatch(ctx *fasthttp.RequestCtx, s *Service) {
	if err := x.batch.Decode(ctx.PostBody()); err != nil {
		ctx.Error("cannot decode apply batch: "+err.Error(), fasthttp.StatusBadRequest)
		return
	}
	s.ApplyBatch(chassis.Context(ctx), x.batch.Reqs, x.batch.Resps, x.batch.Errs)
	x.buf = x.batch.AppendReply(x.buf[:0], statusFor)
	ctx.SetContentType("application/msgpack")
	ctx.SetBody(x.buf)
}
