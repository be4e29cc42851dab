// Package rpc is the batched internal RPC of the services, over the
// chassis: POST one msgp request to a single path and get its msgp
// response, or POST a batch (see AppendBatchHeader) to a batch path and get
// one item per request. BatchClient and BatchHandler are its two ends.
// The CHF's internal APIs (CGW → OCP: chf.ChargeRequest, OCP → ABM:
// chf.ApplyRequest, both answered with a chf.ChargeResponse) use it; the
// messages themselves are the domain's (package chf), which knows nothing
// of the transport.
package rpc

// The fuzz seed corpus (testdata/fuzz) is written by the test binary's
// -write-corpus mode from the fuzz tests' seeds.
//go:generate go test -count=1 -run ^$ . -args -write-corpus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/flight"
	"github.com/chf-testbed/testbed/chassis/hop"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// The RPC's own metrics (the chassis exports each round trip's latency as
// http_client_request_duration_seconds and http_server_request_duration_seconds):
//
//	chf_rpc_client_duration_seconds{peer,result}  histogram: one call (Do, or DoMany of a batch forwarded whole), queueing in the batcher included; result ok or error (of any item)
//	chf_rpc_client_stage_seconds{peer,stage}  histogram: per call, stage queue (from the call until its batch left) or resume (from its batch's answer decoded until the caller ran again)
//	chf_rpc_client_batch_size{peer}  histogram: calls per round trip
//	chf_rpc_client_batches_inflight{peer}  histogram: the batches out (this one included, 1..--batch-inflight) when each round trip left
//	chf_rpc_server_batch_size{api}  histogram: requests per batch served
var (
	clientDuration = telemetry.NewHistogramVec("chf_rpc_client_duration_seconds",
		"Internal RPC calls from the caller's view (waiting for a batch slot included), by peer and result (ok, error).",
		nil, "peer", "result")
	clientStage = telemetry.NewHistogramVec("chf_rpc_client_stage_seconds",
		"Internal RPC calls' time outside their round trip, by peer and stage: queue (waiting for their batch to leave) or resume (from the batch's answer decoded until the caller ran again).",
		nil, "peer", "stage")
	clientBatch = telemetry.NewHistogramVec("chf_rpc_client_batch_size",
		"Calls sent per internal RPC round trip, by peer.", telemetry.SizeBuckets, "peer")
	clientInFlight = telemetry.NewHistogramVec("chf_rpc_client_batches_inflight",
		"Batches out to the peer (this one included, 1..--batch-inflight; more than one only while full batches wait) when each internal RPC round trip left, by peer.", telemetry.SizeBuckets, "peer")
	serverBatch = telemetry.NewHistogramVec("chf_rpc_server_batch_size",
		"Requests per internal RPC batch served, by API.", telemetry.SizeBuckets, "api")
)

// BatchClient calls one such API of a peer over the chassis. Concurrent
// calls are merged into batches while earlier ones are out (see
// batcher.Batcher). It is safe for concurrent use.
type BatchClient[R, P Message] struct {
	c             *peer.Client
	b             *batcher.Batcher[*call[R, P]]
	peer          string
	single, batch string
	wrap          func(error) error
	calls, bufs   sync.Pool
	ok, failed    prometheus.Observer // call latency
	queue, resume prometheus.Observer // call time outside the round trip
	size          prometheus.Observer // calls per round trip
	inflight      prometheus.Observer // batches out per round trip
}

// call is one request waiting in a batch.
type call[R, P Message] struct {
	req  R
	resp P
	err  error
	// left is when its batch left, back when its answer was decoded (or
	// the round trip failed); zero when it never left.
	left, back time.Time
}

// NewBatchClient returns a BatchClient posting to the single and batch
// paths through c (owned by the caller), batching as bc says; wrap adds
// context to every error it returns.
func NewBatchClient[R, P Message](c *peer.Client, bc batcher.Config, peer, single, batch string, wrap func(error) error) *BatchClient[R, P] {
	cl := &BatchClient[R, P]{c: c, peer: peer, single: single, batch: batch, wrap: wrap,
		ok: clientDuration.WithLabelValues(peer, "ok"), failed: clientDuration.WithLabelValues(peer, "error"),
		queue: clientStage.WithLabelValues(peer, "queue"), resume: clientStage.WithLabelValues(peer, "resume"),
		size: clientBatch.WithLabelValues(peer), inflight: clientInFlight.WithLabelValues(peer)}
	cl.calls.New = func() any { return new(call[R, P]) }
	cl.bufs.New = func() any { return new(clientScratch[R, P]) }
	cl.b = batcher.New(bc, cl.send)
	return cl
}

type clientScratch[R, P Message] struct {
	body, reply []byte
	calls       []call[R, P]
	pcalls      []*call[R, P]
}

// Do runs req and decodes its answer into resp (reset first, keeping its
// buffers). A non-2xx
// answer for req is a *peer.StatusError inside the error.
func (c *BatchClient[R, P]) Do(ctx context.Context, req R, resp P) error {
	start := time.Now()
	cl := c.calls.Get().(*call[R, P])
	cl.req, cl.resp = req, resp
	c.b.Do(ctx, cl)
	err := cl.err
	c.observe(start, cl, err != nil)
	*cl = call[R, P]{}
	c.calls.Put(cl)
	return err
}

// DoMany runs reqs in one batch (with whatever else is queued); errs[i]
// is what Do would have returned for reqs[i].
func (c *BatchClient[R, P]) DoMany(ctx context.Context, reqs []R, resps []P, errs []error) {
	start := time.Now()
	sc := c.bufs.Get().(*clientScratch[R, P])
	defer c.bufs.Put(sc)
	sc.calls, sc.pcalls = slices.Grow(sc.calls[:0], len(reqs))[:len(reqs)], sc.pcalls[:0]
	for i := range reqs {
		sc.calls[i] = call[R, P]{req: reqs[i], resp: resps[i]}
		sc.pcalls = append(sc.pcalls, &sc.calls[i])
	}
	c.b.DoMany(ctx, sc.pcalls)
	if len(reqs) == 0 {
		return // nothing sent, nothing waited for
	}
	failed := false
	for i := range reqs {
		errs[i] = sc.calls[i].err
		failed = failed || errs[i] != nil
	}
	c.observe(start, &sc.calls[0], failed) // one wait, observed once, as a call
	clear(sc.calls)
	clear(sc.pcalls)
}

// observe records a call that started at start and ends now, cl being
// its (first) call: its latency by outcome, its time outside the round
// trip (before its batch left, after the answer was decoded) and the
// flight recorder's check.
func (c *BatchClient[R, P]) observe(start time.Time, cl *call[R, P], failed bool) {
	end := time.Now()
	d := end.Sub(start)
	if failed {
		c.failed.Observe(d.Seconds())
	} else {
		c.ok.Observe(d.Seconds())
	}
	if !cl.left.IsZero() && !cl.back.IsZero() {
		c.queue.Observe(cl.left.Sub(start).Seconds())
		c.resume.Observe(end.Sub(cl.back).Seconds())
	}
	flight.Observe(d)
}

// send posts one batch as one round trip: alone on the single path, else
// on the batch path. A failed round trip fails every call; an item the
// peer failed gets a *peer.StatusError with its status and message.
// Items failed with a status a single call would be retried on (502,
// 503: overload or contention, 504: in doubt) whose requests are
// Repeatable are sent again, with the same identity, while the caller's
// deadline and the chassis' retry bounds allow (peer.Client.AllowRetry);
// the others keep their status. No item is ever left without an answer
// or an error.
func (c *BatchClient[R, P]) send(ctx context.Context, calls []*call[R, P]) {
	c.sendAttempt(ctx, calls, 1)
}

// sendAttempt is send's round trip number attempt (1 = the first) for
// calls.
func (c *BatchClient[R, P]) sendAttempt(ctx context.Context, calls []*call[R, P], attempt int) {
	sc := c.bufs.Get().(*clientScratch[R, P])
	defer c.bufs.Put(sc)
	left := time.Now()
	defer func() {
		back := time.Now()
		for _, cl := range calls {
			cl.left, cl.back = left, back
		}
	}()
	fail := func(err error) {
		for _, cl := range calls {
			cl.err = c.wrap(err)
		}
	}
	var err error
	path := c.single
	// A retry of failed items stays on the batch path, even alone: on the
	// single path the chassis would retry its status again, past the
	// bounds.
	single := len(calls) == 1 && attempt == 1
	if single {
		sc.body, err = calls[0].req.MarshalMsg(sc.body[:0])
	} else {
		path = c.batch
		sc.body = AppendBatchHeader(sc.body[:0], len(calls))
		for _, cl := range calls {
			if sc.body, err = cl.req.MarshalMsg(sc.body); err != nil {
				break
			}
		}
	}
	if err != nil {
		fail(fmt.Errorf("cannot encode request: %w", err))
		return
	}
	if len(sc.body) > MaxBatchBody && len(calls) > 1 {
		// Too large for one round trip (the peer's MaxBodySize): two
		// halves, one after the other, each split again if need be.
		h := len(calls) / 2
		c.sendAttempt(ctx, calls[:h], attempt)
		c.sendAttempt(ctx, calls[h:], attempt)
		return
	}
	c.size.Observe(float64(len(calls)))
	c.inflight.Observe(float64(c.b.InFlight()))
	if repeatable(calls) {
		sc.reply, err = c.c.DoIdempotent(ctx, path, sc.body, sc.reply[:0])
	} else {
		sc.reply, err = c.c.Do(ctx, path, sc.body, sc.reply[:0])
	}
	if err != nil {
		fail(err)
		return
	}
	if single {
		resp := calls[0].resp
		resp.Reset()
		if _, err := resp.UnmarshalMsg(sc.reply); err != nil {
			fail(fmt.Errorf("cannot decode response: %w", err))
		}
		return
	}
	again := sc.pcalls[:0]
	err = ReadBatchReply(sc.reply, len(calls),
		func(i int) P { return calls[i].resp },
		func(i, status int, msg string) {
			calls[i].err = c.wrap(&peer.StatusError{Peer: c.peer, Code: status, Body: []byte(msg)})
			if retryableStatus(status) && repeatable(calls[i:i+1]) {
				again = append(again, calls[i])
			}
		})
	sc.pcalls = again[:0]
	if err != nil {
		fail(fmt.Errorf("cannot decode batch response: %w", err))
		clear(again)
		return
	}
	if len(again) > 0 && inTime(ctx) && c.c.AllowRetry(attempt) {
		// The retry answers each of them or fails it again.
		for _, cl := range again {
			cl.err = nil
		}
		c.sendAttempt(ctx, again, attempt+1)
	}
	clear(again)
}

// retryableStatus reports whether a per-item status is one a single call
// is retried on (peer.Client.DoIdempotent): 502, 503, 504.
func retryableStatus(status int) bool {
	return status == fasthttp.StatusBadGateway || status == fasthttp.StatusServiceUnavailable || status == fasthttp.StatusGatewayTimeout
}

// inTime reports whether ctx leaves time for another round trip.
func inTime(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || time.Now().Before(d)
}

// repeatable reports whether every request of calls is Repeatable.
func repeatable[R, P Message](calls []*call[R, P]) bool {
	for _, cl := range calls {
		if r, ok := any(cl.req).(Repeatable); !ok || !r.Repeatable() {
			return false
		}
	}
	return true
}

// exchange is the pooled memory of one call served by a BatchHandler.
type exchange[T, U any, R interface {
	*T
	Message
}, P interface {
	*U
	Message
}] struct {
	req   T
	resp  U
	buf   []byte
	batch batch[T, U, R, P]
}

// BatchHandler serves such an API: POST single runs one(req) and answers
// its response; POST batch (when many is not nil) runs many over the
// decoded batch and answers one item per request. 400 for an undecodable
// body (what names the API in the message), status(err) for a failed
// request, 404 for other paths, 405 for other methods.
//
// T and U are the request and response types (R = *T and P = *U are
// inferred).
func BatchHandler[T, U any, R interface {
	*T
	Message
}, P interface {
	*U
	Message
}](single, batch, what string, one func(context.Context, R, P) error,
	many func(context.Context, []R, []P, []error), status func(error) int) fasthttp.RequestHandler {
	pool := sync.Pool{New: func() any { return new(exchange[T, U, R, P]) }}
	size := serverBatch.WithLabelValues(what)
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
		x := pool.Get().(*exchange[T, U, R, P])
		defer pool.Put(x)
		if isBatch {
			if err := x.batch.Decode(ctx.PostBody()); err != nil {
				ctx.Error(fmt.Sprintf("cannot decode %s batch: %v", what, err), fasthttp.StatusBadRequest)
				return
			}
			size.Observe(float64(len(x.batch.Reqs)))
			many(hop.Context(ctx), x.batch.Reqs, x.batch.Resps, x.batch.Errs)
			x.buf = x.batch.AppendReply(x.buf[:0], status)
		} else {
			size.Observe(1)
			req := R(&x.req)
			req.Reset()
			if _, err := req.UnmarshalMsg(ctx.PostBody()); err != nil {
				ctx.Error(fmt.Sprintf("cannot decode %s request: %v", what, err), fasthttp.StatusBadRequest)
				return
			}
			if err := one(hop.Context(ctx), req, P(&x.resp)); err != nil {
				ctx.Error(err.Error(), status(err))
				return
			}
			x.buf, _ = P(&x.resp).MarshalMsg(x.buf[:0])
		}
		ctx.SetContentType("application/msgpack")
		ctx.SetBody(x.buf)
	}
}

// batch is the server side of a batch call, reusable: Decode fills Reqs,
// the service fills Resps and Errs, AppendReply encodes the answer.
type batch[T, U any, R interface {
	*T
	Message
}, P interface {
	*U
	Message
}] struct {
	reqs  []T
	resps []U
	Reqs  []R
	Resps []P
	Errs  []error
}

// Decode reads a batch of requests from body.
func (b *batch[T, U, R, P]) Decode(body []byte) error {
	n, rest, err := ReadBatchHeader(body)
	if err != nil {
		return err
	}
	b.reqs = slices.Grow(b.reqs[:0], n)[:n]
	b.resps = slices.Grow(b.resps[:0], n)[:n]
	b.Reqs, b.Resps, b.Errs = b.Reqs[:0], b.Resps[:0], b.Errs[:0]
	for i := range n {
		r := R(&b.reqs[i])
		r.Reset()
		if rest, err = r.UnmarshalMsg(rest); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		b.Reqs = append(b.Reqs, r)
		b.Resps = append(b.Resps, P(&b.resps[i]))
		b.Errs = append(b.Errs, nil)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes after %d requests", len(rest), n)
	}
	return nil
}

// AppendReply appends the answer: each request's response, or
// status(its error) and the error's text.
func (b *batch[T, U, R, P]) AppendReply(dst []byte, status func(error) int) []byte {
	dst = AppendBatchHeader(dst, len(b.Reqs))
	for i, e := range b.Errs {
		if e != nil {
			dst, _ = AppendBatchItem(dst, status(e), e.Error(), nil)
		} else {
			dst, _ = AppendBatchItem(dst, 0, "", b.Resps[i])
		}
	}
	clear(b.Reqs)
	clear(b.Resps)
	clear(b.Errs)
	return dst
}
