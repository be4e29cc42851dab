package chf

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
)

// The charging core's internal APIs (CGW → OCP: ChargeRequest, OCP → ABM:
// ApplyRequest) have the same shape: POST one msgp request to a single
// path and get its msgp ChargeResponse, or POST a batch (see
// AppendBatchHeader) to a batch path and get one item per request.
// BatchClient and BatchHandler are their two ends.

// BatchClient calls one such API of a peer over the chassis. Concurrent
// calls are merged into batches while earlier ones are out (see
// chassis.Batcher). It is safe for concurrent use.
type BatchClient[R Request] struct {
	c             *chassis.Client
	b             *chassis.Batcher[*Call[R]]
	peer          string
	single, batch string
	wrap          func(error) error
	calls, bufs   sync.Pool
}

// NewBatchClient returns a BatchClient posting to the single and batch
// paths through c (owned by the caller), batching as bc says; wrap adds
// context to every error it returns.
func NewBatchClient[R Request](c *chassis.Client, bc chassis.BatchConfig, peer, single, batch string, wrap func(error) error) *BatchClient[R] {
	cl := &BatchClient[R]{c: c, peer: peer, single: single, batch: batch, wrap: wrap}
	cl.calls.New = func() any { return new(Call[R]) }
	cl.bufs.New = func() any { return new(clientScratch[R]) }
	cl.b = chassis.NewBatcher(bc, cl.send)
	return cl
}

type clientScratch[R Request] struct {
	CallBuffers
	calls  []Call[R]
	pcalls []*Call[R]
}

// Do runs req and decodes its answer into resp (Lines reused). A non-2xx
// answer for req is a *chassis.StatusError inside the error.
func (c *BatchClient[R]) Do(ctx context.Context, req R, resp *ChargeResponse) error {
	call := c.calls.Get().(*Call[R])
	call.Req, call.Resp = req, resp
	c.b.Do(ctx, call)
	err := call.Err
	*call = Call[R]{}
	c.calls.Put(call)
	return err
}

// DoMany runs reqs in one batch (with whatever else is queued); errs[i]
// is what Do would have returned for reqs[i].
func (c *BatchClient[R]) DoMany(ctx context.Context, reqs []R, resps []*ChargeResponse, errs []error) {
	sc := c.bufs.Get().(*clientScratch[R])
	defer c.bufs.Put(sc)
	sc.calls, sc.pcalls = slices.Grow(sc.calls[:0], len(reqs))[:len(reqs)], sc.pcalls[:0]
	for i := range reqs {
		sc.calls[i] = Call[R]{Req: reqs[i], Resp: resps[i]}
		sc.pcalls = append(sc.pcalls, &sc.calls[i])
	}
	c.b.DoMany(ctx, sc.pcalls)
	for i := range reqs {
		errs[i] = sc.calls[i].Err
		sc.calls[i] = Call[R]{}
	}
	clear(sc.pcalls)
}

// send posts one batch: alone on the single path, else on the batch path.
func (c *BatchClient[R]) send(ctx context.Context, calls []*Call[R]) {
	sc := c.bufs.Get().(*clientScratch[R])
	sendCalls(ctx, c.c.Do, c.single, c.batch, calls, &sc.CallBuffers, c.wrap, c.failed)
	c.bufs.Put(sc)
}

func (c *BatchClient[R]) failed(status int, msg string) error {
	return &chassis.StatusError{Peer: c.peer, Code: status, Body: []byte(msg)}
}

// exchange is the pooled memory of one call served by a BatchHandler.
type exchange[T any, R interface {
	*T
	Request
}] struct {
	req   T
	resp  ChargeResponse
	buf   []byte
	batch Batch[T, R]
}

// BatchHandler serves such an API: POST single runs one(req) and answers
// its ChargeResponse; POST batch (when many is not nil) runs many over the
// decoded batch and answers one item per request. 400 for an undecodable
// body (what names the API in the message), status(err) for a failed
// request, 404 for other paths, 405 for other methods.
func BatchHandler[T any, R interface {
	*T
	Request
}](single, batch, what string, one func(context.Context, R, *ChargeResponse) error,
	many func(context.Context, []R, []*ChargeResponse, []error), status func(error) int) fasthttp.RequestHandler {
	pool := sync.Pool{New: func() any { return new(exchange[T, R]) }}
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		isBatch := many != nil && path == batch
		if path != single && !isBatch {
			ctx.Error("not found", fasthttp.StatusNotFound)
			return
		}
		if !ctx.IsPost() {
			ctx.Response.Header.Set("Allow", "POST")
			ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
			return
		}
		x := pool.Get().(*exchange[T, R])
		defer pool.Put(x)
		if isBatch {
			if err := x.batch.Decode(ctx.PostBody()); err != nil {
				ctx.Error(fmt.Sprintf("cannot decode %s batch: %v", what, err), fasthttp.StatusBadRequest)
				return
			}
			many(chassis.Context(ctx), x.batch.Reqs, x.batch.Resps, x.batch.Errs)
			x.buf = x.batch.AppendReply(x.buf[:0], status)
		} else {
			req := R(&x.req)
			req.Reset()
			if _, err := req.UnmarshalMsg(ctx.PostBody()); err != nil {
				ctx.Error(fmt.Sprintf("cannot decode %s request: %v", what, err), fasthttp.StatusBadRequest)
				return
			}
			if err := one(chassis.Context(ctx), req, &x.resp); err != nil {
				ctx.Error(err.Error(), status(err))
				return
			}
			x.buf, _ = x.resp.MarshalMsg(x.buf[:0])
		}
		ctx.SetContentType("application/msgpack")
		ctx.SetBody(x.buf)
	}
}
