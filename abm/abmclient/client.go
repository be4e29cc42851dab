// Package abmclient is the client of the ABM's internal API: the paths it
// serves and a client that posts rated events to them over the chassis.
// It is all a caller of the ABM (the OCP) links: not the account logic or
// the Aerospike client (package abm serves these paths).
package abmclient

import (
	"context"
	"fmt"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// ApplyPath is the ABM's API: POST a msgp chf.ApplyRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the
// record stayed contended, 504 when the caller's deadline passed or the
// database did not answer in time, 500 when the database failed.
const ApplyPath = "/abm/v1/apply"

// ApplyBatchPath takes a batch of ApplyRequests (see rpc.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ApplyPath would have answered it with. 400 when the batch cannot be
// decoded.
const ApplyBatchPath = "/abm/v1/apply-batch"

// Client applies events on a remote ABM over the chassis (msgp on
// ApplyPath). Concurrent events are merged into batches (ApplyBatchPath)
// while earlier batches are out, see batcher.Batcher. It implements
// ocp.Accounts and ocp.BatchAccounts and is safe for concurrent use.
type Client struct {
	bc *rpc.BatchClient[*chf.ApplyRequest, *chf.ChargeResponse]
}

// New returns a Client over c, a chassis client for the "abm" peer,
// batching as bc says. c stays owned by the caller.
func New(c *peer.Client, bc batcher.Config) *Client {
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
