// Package ocpclient is the client of the OCP's internal API: the paths it
// serves and a chf.Charger that posts to them over the chassis. It is all
// a caller of the OCP (the CGW) links: not the rating engine, the ABM or
// its database client (package ocp serves these paths).
package ocpclient

import (
	"context"
	"fmt"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// ChargePath is the OCP's API: POST a msgp chf.ChargeRequest, get a msgp
// chf.ChargeResponse (200). 400 for an undecodable body, 503 when the ABM
// is unavailable or contended, 502 for other ABM failures.
const ChargePath = "/ocp/v1/charge"

// ChargeBatchPath takes a batch of ChargeRequests (see rpc.AppendBatchHeader)
// and answers 200 with one item per request, each with the status
// ChargePath would have answered it with. 400 when the batch cannot be
// decoded.
const ChargeBatchPath = "/ocp/v1/charge-batch"

// Client is the OCP as the fronts see it: a chf.Charger that posts each
// request to an OCP instance over the chassis (msgp on ChargePath).
// Concurrent requests are merged into batches (ChargeBatchPath) while
// earlier batches are out, see batcher.Batcher. It is safe for concurrent
// use.
type Client struct {
	bc *rpc.BatchClient[*chf.ChargeRequest, *chf.ChargeResponse]
}

// New returns a Client over c, a chassis client for the "ocp" peer,
// batching as bc says. c stays owned by the caller.
func New(c *peer.Client, bc batcher.Config) *Client {
	return &Client{bc: rpc.NewBatchClient[*chf.ChargeRequest, *chf.ChargeResponse](c, bc, "ocp", ChargePath, ChargeBatchPath,
		func(err error) error { return fmt.Errorf("cannot charge through ocp: %w", err) })}
}

// Charge implements chf.Charger.
func (c *Client) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	return c.bc.Do(ctx, req, resp)
}
