package ocp

import (
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// ChargePath is the OCP's API: POST a msgp chf.ChargeRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the ABM
// is unavailable or contended, 502 for other ABM failures.
const ChargePath = "/ocp/v1/charge"

// exchange is the pooled request/response pair of one HTTP call.
type exchange struct {
	req  chf.ChargeRequest
	resp chf.ChargeResponse
	buf  []byte
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

// Handler returns the fasthttp handler serving ChargePath with c (usually a
// *Processor). Other paths answer 404, other methods 405.
func Handler(c chf.Charger) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != ChargePath {
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
