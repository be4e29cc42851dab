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

// applyCall is one event waiting in a batch.
type applyCall struct {
	req  *chf.ApplyRequest
	resp *chf.ChargeResponse
	err  error
}

var callPool = sync.Pool{New: func() any { return new(applyCall) }}

// NewClient returns a Client over c, a chassis client for the "abm" peer,
// batching as bc says. c stays owned by the caller.
func NewClient(c *chassis.Client, bc chassis.BatchConfig) *Client {
	cl := &Client{c: c}
	cl.b = chassis.NewBatcher(bc, cl.send)
	return cl
}

type clientBufs struct {
	body, reply []byte
	calls       []applyCall
	pcalls      []*applyCall
}

var bufPool = sync.Pool{New: func() any { return new(clientBufs) }}

// Apply posts req to the ABM and decodes its answer into resp (Lines
// reused).
func (c *Client) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	call := callPool.Get().(*applyCall)
	call.req, call.resp = req, resp
	c.b.Do(ctx, call)
	err := call.err
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
		b.calls[i] = applyCall{req: reqs[i], resp: resps[i]}
		b.pcalls = append(b.pcalls, &b.calls[i])
	}
	c.b.DoMany(ctx, b.pcalls)
	for i := range reqs {
		errs[i] = b.calls[i].err
		b.calls[i] = applyCall{}
	}
	clear(b.pcalls)
}

// send posts one batch: alone on ApplyPath, else on ApplyBatchPath.
func (c *Client) send(ctx context.Context, calls []*applyCall) {
	b := bufPool.Get().(*clientBufs)
	defer bufPool.Put(b)
	fail := func(err error) {
		for _, call := range calls {
			call.err = err
		}
	}
	var err error
	path := ApplyPath
	if len(calls) == 1 {
		b.body, err = calls[0].req.MarshalMsg(b.body[:0])
	} else {
		path = ApplyBatchPath
		b.body = chf.AppendBatchHeader(b.body[:0], len(calls))
		for _, call := range calls {
			if b.body, err = call.req.MarshalMsg(b.body); err != nil {
				break
			}
		}
	}
	if err != nil {
		fail(fmt.Errorf("cannot encode apply request: %w", err))
		return
	}
	b.reply, err = c.c.Do(ctx, path, b.body, b.reply[:0])
	if err != nil {
		fail(fmt.Errorf("cannot apply on abm: %w", err))
		return
	}
	if len(calls) == 1 {
		resp := calls[0].resp
		resp.Lines = resp.Lines[:0]
		if _, err := resp.UnmarshalMsg(b.reply); err != nil {
			fail(fmt.Errorf("cannot decode apply response: %w", err))
		}
		return
	}
	err = chf.ReadBatchReply(b.reply, len(calls),
		func(i int) *chf.ChargeResponse { return calls[i].resp },
		func(i, status int, msg string) {
			calls[i].err = fmt.Errorf("cannot apply on abm: %w", &chassis.StatusError{Peer: "abm", Code: status, Body: []byte(msg)})
		})
	if err != nil {
		fail(fmt.Errorf("cannot decode apply batch response: %w", err))
	}
}
