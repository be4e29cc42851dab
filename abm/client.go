package abm

import (
	"context"
	"fmt"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// Client applies events on a remote ABM over the chassis (msgp on
// ApplyPath). Concurrent events are merged into batches (ApplyBatchPath)
// while earlier batches are out, see chassis.Batcher. It implements
// ocp.Accounts and ocp.BatchAccounts and is safe for concurrent use.
type Client struct {
	bc *rpc.BatchClient[*chf.ApplyRequest, *chf.ChargeResponse]
}

// NewClient returns a Client over c, a chassis client for the "abm" peer,
// batching as bc says. c stays owned by the caller.
func NewClient(c *chassis.Client, bc chassis.BatchConfig) *Client {
	return &Client{bc: rpc.NewBatchClient[*chf.ApplyRequest, *chf.ChargeResponse](c, bc, "abm", ApplyPath, ApplyBatchPath,
		func(err error) error { return fmt.Errorf("cannot apply on abm: %w", err) })}
}

// Apply posts req to the ABM and decodes its answer into resp (Lines
// reused).
func (c *Client) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	return c.bc.Do(ctx, req, resp)
}

// ApplyBatch applies reqs in one batch (with whatever else is queued).
func (c *Client) ApplyBatch(ctx context.Context, reqs []*chf.ApplyRequest, resps []*chf.ChargeResponse, errs []error) {
	c.bc.DoMany(ctx, reqs, resps, errs)
}
