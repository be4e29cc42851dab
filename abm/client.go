package abm

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// Client applies events on a remote ABM over the chassis (msgp on
// ApplyPath). Concurrent events are merged into batches (ApplyBatchPath)
// while earlier batches are out, see chassis.Batcher. It implements
// ocp.Accounts and ocp.BatchAccounts and is safe for concurrent use.
type Client struct {
	c *chassis.Client
	b *chassis.Batcher[*applyCall]
}

type applyCall = chf.Call[*chf.ApplyRequest]

var callPool = sync.Pool{New: func() any { return new(applyCall) }}

// NewClient returns a Client over c, a chassis client for the "abm" peer,
// batching as bc says. c stays owned by the caller.
func NewClient(c *chassis.Client, bc chassis.BatchConfig) *Client {
	cl := &Client{c: c}
	cl.b = chassis.NewBatcher(bc, cl.send)
	return cl
}

type clientBufs struct {
	chf.CallBuffers
	calls  []applyCall
	pcalls []*applyCall
}

var bufPool = sync.Pool{New: func() any { return new(clientBufs) }}

// Apply posts req to the ABM and decodes its answer into resp (Lines
// reused).
func (c *Client) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	call := callPool.Get().(*applyCall)
	call.Req, call.Resp = req, resp
	c.b.Do(ctx, call)
	err := call.Err
	*call = applyCall{}
	callPool.Put(call)
	return err
}

// ApplyBatch applies reqs in one batch (with whatever else is queued).
func (c *Client) ApplyBatch(ctx context.Context, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error) {
	b := bufPool.Get().(*clientBufs)
	defer bufPool.Put(b)
	b.calls, b.pcalls = slices.Grow(b.calls[:0], len(reqs))[:len(reqs)], b.pcalls[:0]
	for i := range reqs {
		b.calls[i] = applyCall{Req: reqs[i], Resp: resps[i]}
		b.pcalls = append(b.pcalls, &b.calls[i])
	}
	c.b.DoMany(ctx, b.pcalls)
	for i := range reqs {
		errs[i] = b.calls[i].Err
		b.calls[i] = applyCall{}
	}
	clear(b.pcalls)
}

// send posts one batch: alone on ApplyPath, else on ApplyBatchPath.
func (c *Client) send(ctx context.Context, calls []*applyCall) {
	b := bufPool.Get().(*clientBufs)
	chf.SendCalls(ctx, c.c.Do, ApplyPath, ApplyBatchPath, calls, &b.CallBuffers, wrapErr, failedCall)
	bufPool.Put(b)
}

func wrapErr(err error) error { return fmt.Errorf("cannot apply on abm: %w", err) }

func failedCall(status int, msg string) error {
	return &chassis.StatusError{Peer: "abm", Code: status, Body: []byte(msg)}
}
