package abm

import (
	"context"
	"fmt"
	"sync"

	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chf"
)

// Client applies events on a remote ABM over the chassis (msgp on
// ApplyPath). It implements ocp.Accounts and is safe for concurrent use.
type Client struct {
	c *chassis.Client
}

// NewClient returns a Client over c, a chassis client for the "abm" peer.
// c stays owned by the caller.
func NewClient(c *chassis.Client) *Client { return &Client{c: c} }

type clientBufs struct{ body, reply []byte }

var bufPool = sync.Pool{New: func() any { return new(clientBufs) }}

// Apply posts req to the ABM and decodes its answer into resp (Lines
// reused).
func (c *Client) Apply(ctx context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	b := bufPool.Get().(*clientBufs)
	defer bufPool.Put(b)
	var err error
	b.body, err = req.MarshalMsg(b.body[:0])
	if err != nil {
		return fmt.Errorf("cannot encode apply request: %w", err)
	}
	b.reply, err = c.c.Do(ctx, ApplyPath, b.body, b.reply[:0])
	if err != nil {
		return fmt.Errorf("cannot apply on abm: %w", err)
	}
	resp.Lines = resp.Lines[:0]
	if _, err := resp.UnmarshalMsg(b.reply); err != nil {
		return fmt.Errorf("cannot decode apply response: %w", err)
	}
	return nil
}
