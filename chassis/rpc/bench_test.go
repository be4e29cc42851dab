package rpc_test

import (
	"context"
	"testing"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chf"
)

// BenchmarkBatchClientDo: 16 callers per P through one BatchClient to a
// real chassis server on loopback that answers each charge at once, so
// calls merge into batches as they do at a loaded CGW. The time per call
// is mostly the round trips'; allocations are per call.
func BenchmarkBatchClientDo(b *testing.B) {
	bc := serveCharge(b, "benchcharge", 0, echoOne, echoMany, batcher.Config{})
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := &chf.ChargeRequest{SUPI: "imsi-001010000000001", Op: chf.OpUpdate, Session: "s1"}, &chf.ChargeResponse{}
		ctx := context.Background()
		for pb.Next() {
			if err := bc.Do(ctx, req, resp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
