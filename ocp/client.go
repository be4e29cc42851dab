package ocp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// Client is the OCP as the fronts see it: a chf.Charger that posts each
// request to an OCP instance over the chassis (msgp on ChargePath).
// Concurrent requests are merged into batches (ChargeBatchPath) while
// earlier batches are out, see chassis.Batcher. It is safe for concurrent
// use.
type Client struct {
	c *chassis.Client
	b *chassis.Batcher[*chargeCall]
}

// chargeCall is one Charge waiting in a batch.
type chargeCall struct {
	req  *chf.ChargeRequest
	resp *chf.ChargeResponse
	err  error
}

var callPool = sync.Pool{New: func() any { return new(chargeCall) }}

// NewClient returns a Client over c, a chassis client for the "ocp" peer,
// batching as bc says. c stays owned by the caller.
func NewClient(c *chassis.Client, bc chassis.BatchConfig) *Client {
	cl := &Client{c: c}
	cl.b = chassis.NewBatcher(bc, cl.send)
	return cl
}

var bufPool = sync.Pool{New: func() any { return new(clientBufs) }}

type clientBufs struct{ body, reply []byte }

// Charge implements chf.Charger.
func (c *Client) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	call := callPool.Get().(*chargeCall)
	call.req, call.resp = req, resp
	c.b.Do(ctx, call)
	err := call.err
	*call = chargeCall{}
	callPool.Put(call)
	return err
}

// send posts one batch: alone on ChargePath, else on ChargeBatchPath.
func (c *Client) send(ctx context.Context, calls []*chargeCall) {
	b := bufPool.Get().(*clientBufs)
	defer bufPool.Put(b)
	fail := func(err error) {
		for _, call := range calls {
			call.err = err
		}
	}
	var err error
	path := ChargePath
	if len(calls) == 1 {
		b.body, err = calls[0].req.MarshalMsg(b.body[:0])
	} else {
		path = ChargeBatchPath
		b.body = chf.AppendBatchHeader(b.body[:0], len(calls))
		for _, call := range calls {
			if b.body, err = call.req.MarshalMsg(b.body); err != nil {
				break
			}
		}
	}
	if err != nil {
		fail(fmt.Errorf("cannot encode charge request: %w", err))
		return
	}
	b.reply, err = c.c.Do(ctx, path, b.body, b.reply[:0])
	if err != nil {
		fail(fmt.Errorf("cannot charge through ocp: %w", err))
		return
	}
	if len(calls) == 1 {
		resp := calls[0].resp
		resp.Lines = resp.Lines[:0]
		if _, err := resp.UnmarshalMsg(b.reply); err != nil {
			fail(fmt.Errorf("cannot decode charge response: %w", err))
		}
		return
	}
	err = chf.ReadBatchReply(b.reply, len(calls),
		func(i int) *chf.ChargeResponse { return calls[i].resp },
		func(i, status int, msg string) {
			calls[i].err = fmt.Errorf("cannot charge through ocp: %w", &chassis.StatusError{Peer: "ocp", Code: status, Body: []byte(msg)})
		})
	if err != nil {
		fail(fmt.Errorf("cannot decode charge batch response: %w", err))
	}
}

// statusFor maps a charging failure to the HTTP status the OCP answers:
// the upstream's 503 (overload, contention) passes through, a missing
// deadline is 504, anything else 502.
func statusFor(err error) int {
	var se *chassis.StatusError
	switch {
	case errors.As(err, &se) && se.Code == fasthttp.StatusServiceUnavailable:
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		// The connection pool to the ABM is exhausted: overload.
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return fasthttp.StatusGatewayTimeout
	case errors.Is(err, chassis.ErrNoEndpoints):
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusBadGateway
}
