package rpc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chf"
)

// TestLargeBatchSplits: a batch whose requests encode larger than
// MaxBatchBody leaves as several round trips, each within the peer's
// MaxBodySize, and every call gets its own answer (one round trip of it
// all would be refused with 413).
func TestLargeBatchSplits(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	one := func(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
		resp.Charged = int64(len(req.SUPI))
		return nil
	}
	many := func(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error) {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		for i := range reqs {
			errs[i] = one(ctx, reqs[i], resps[i])
		}
	}
	bc := serveCharge(t, "splittest", rpc.MaxBodySize, one, many, batcher.Config{MaxInFlight: 1, MaxItems: rpc.MaxBatch})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// 300 requests of about 6 KiB: about 1.8 MB in all, over three times
	// MaxBatchBody and MaxBodySize.
	const n = 300
	reqs, resps, errs := make([]*chf.ChargeRequest, n), make([]*chf.ChargeResponse, n), make([]error, n)
	for i := range reqs {
		reqs[i], resps[i] = &chf.ChargeRequest{SUPI: strings.Repeat("x", 6000+i)}, &chf.ChargeResponse{}
	}
	bc.DoMany(ctx, reqs, resps, errs)
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if want := int64(6000 + i); resps[i].Charged != want {
			t.Fatalf("request %d answered %d, want %d (answers mixed up)", i, resps[i].Charged, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, s := range sizes {
		total += s
		if s*6000 > rpc.MaxBatchBody {
			t.Errorf("a round trip carried %d requests (at least %d bytes), more than MaxBatchBody %d", s, s*6000, rpc.MaxBatchBody)
		}
	}
	if total != n || len(sizes) < 4 {
		t.Fatalf("round trips carried %v (%d requests in %d round trips), want all %d in at least 4", sizes, total, len(sizes), n)
	}
}
