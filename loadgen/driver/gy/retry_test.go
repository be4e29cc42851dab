package gy

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/cgw/diameter"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
)

// flagCore answers as scriptedCore does and records, per operation,
// whether the CCR carried the T flag; it answers busy (3004) the first
// time it sees a request number of a create.
type flagCore struct {
	mu      sync.Mutex
	flagged []bool
	busy    bool
}

func (c *flagCore) Charge(ctx context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	c.mu.Lock()
	c.flagged = append(c.flagged, req.Retransmission)
	busy := c.busy
	c.busy = false
	c.mu.Unlock()
	if busy {
		*resp = chf.ChargeResponse{Result: chf.ResultOverloaded}
		return nil
	}
	return scriptedCore{}.Charge(ctx, req, resp)
}

// A 3004 leaves the outcome unresolved and shed; the engine's retry of
// it (Charge.Retry) carries the T flag whatever the operation, a first
// attempt does not.
func TestGyRetryFlagged(t *testing.T) {
	core := &flagCore{busy: true}
	s, err := diameter.NewServer(diameter.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, core)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := New(driver.Config{Proto: "gy", Targets: []string{s.Addr()}, Conns: 1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := driver.Charge{Op: driver.ChargeCreate, Flow: 9, SUPI: []byte("imsi-001010000000001"), RatingGroup: 10, Request: true}
	o, err := do(t, w, c)
	if err != nil || o.Class != "gy_3004" || !o.Shed || o.Resolved {
		t.Fatalf("busy: err %v, outcome %+v", err, o)
	}
	c.Retry = true
	if o, err = do(t, w, c); err != nil || o.Class != "" || !o.Resolved {
		t.Fatalf("retry: err %v, outcome %+v", err, o)
	}
	core.mu.Lock()
	defer core.mu.Unlock()
	if len(core.flagged) != 2 || core.flagged[0] || !core.flagged[1] {
		t.Fatalf("T flag per attempt %v, want [false true]", core.flagged)
	}
}
