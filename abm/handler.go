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

// exchange is the pooled request/response pair of one HTTP call.
type exchange struct {
	req  chf.ApplyRequest
	resp chf.ChargeResponse
	buf  []byte
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

// Handler returns the fasthttp handler serving ApplyPath on s. Other paths
// answer 404, other methods 405.
func (s *Service) Handler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != ApplyPath {
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
		x.req.Reset()
		if _, err := x.req.UnmarshalMsg(ctx.PostBody()); err != nil {
			ctx.Error("cannot decode apply request: "+err.Error(), fasthttp.StatusBadRequest)
			return
		}
		if err := s.Apply(chassis.Context(ctx), &x.req, &x.resp); err != nil {
			code := fasthttp.StatusInternalServerError
			if errors.Is(err, ErrContention) || errors.Is(err, context.DeadlineExceeded) {
				code = fasthttp.StatusServiceUnavailable
			}
			ctx.Error(err.Error(), code)
			return
		}
		x.buf, _ = x.resp.MarshalMsg(x.buf[:0])
		ctx.SetContentType("application/msgpack")
		ctx.SetBody(x.buf)
	}
}
