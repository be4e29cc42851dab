package ocp

import (
	"context"
	"slices"
	"strconv"
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

	// batches
	reqs   []chf.ChargeRequest
	resps  []chf.ChargeResponse
	preqs  []*chf.ChargeRequest
	presps []*chf.ChargeResponse
	errs   []error
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
		x.req.Lines = x.req.Lines[:0]
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
	n, b, err := chf.ReadBatchHeader(ctx.PostBody())
	if err != nil {
		ctx.Error("cannot decode charge batch: "+err.Error(), fasthttp.StatusBadRequest)
		return
	}
	x.reqs = slices.Grow(x.reqs[:0], n)[:n]
	x.resps = slices.Grow(x.resps[:0], n)[:n]
	x.preqs, x.presps, x.errs = x.preqs[:0], x.presps[:0], x.errs[:0]
	for i := range n {
		r := &x.reqs[i]
		r.Lines = r.Lines[:0]
		if b, err = r.UnmarshalMsg(b); err != nil {
			ctx.Error("cannot decode charge batch: request "+strconv.Itoa(i)+": "+err.Error(), fasthttp.StatusBadRequest)
			return
		}
		x.preqs = append(x.preqs, r)
		x.presps = append(x.presps, &x.resps[i])
		x.errs = append(x.errs, nil)
	}
	if len(b) != 0 {
		ctx.Error("cannot decode charge batch: trailing bytes", fasthttp.StatusBadRequest)
		return
	}
	c.ChargeBatch(chassis.Context(ctx), x.preqs, x.presps, x.errs)
	x.buf = chf.AppendBatchHeader(x.buf[:0], n)
	for i := range n {
		if e := x.errs[i]; e != nil {
			x.buf, _ = chf.AppendBatchItem(x.buf, statusFor(e), e.Error(), nil)
		} else {
			x.buf, _ = chf.AppendBatchItem(x.buf, 0, "", x.presps[i])
		}
	}
	clear(x.preqs)
	clear(x.presps)
	clear(x.errs)
	ctx.SetContentType("application/msgpack")
	ctx.SetBody(x.buf)
}
