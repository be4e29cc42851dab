package rpc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chf"
)

// statusErr is a failure the test server answers with its status.
type statusErr int

func (e statusErr) Error() string { return "planned failure" }

// TestBatchItemErrorsRetried: items a batch reply fails with a status a
// single call is retried on (502, 503, 504) are sent again with the same
// request, within the client's retry bounds; other statuses and requests
// that are not safe to repeat keep their error; no item is dropped.
func TestBatchItemErrorsRetried(t *testing.T) {
	// plan[seq] is the statuses the server answers request seq with, in
	// turn; past the plan it serves it.
	plan := map[uint32][]int{
		1: {503},           // contention once: served on the retry
		2: {504},           // in doubt once: served on the retry
		3: {503, 503, 503}, // stays overloaded: 503 after the retries
		4: {400},           // not retryable
		5: {502},           // not repeatable (a top-up): not retried
	}
	var mu sync.Mutex
	seen := map[uint32]int{}
	serve := func(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
		mu.Lock()
		defer mu.Unlock()
		n := seen[req.Seq]
		seen[req.Seq]++
		if p := plan[req.Seq]; n < len(p) {
			return statusErr(p[n])
		}
		resp.Charged = int64(req.Seq)
		return nil
	}
	many := func(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error) {
		for i := range reqs {
			errs[i] = serve(ctx, reqs[i], resps[i])
		}
	}
	status := func(err error) int {
		var se statusErr
		if errors.As(err, &se) {
			return int(se)
		}
		return 500
	}
	srv, err := server.New(server.Config{Service: "itemretry", Listen: "127.0.0.1:0",
		Handler: rpc.BatchHandler[chf.ChargeRequest, chf.ChargeResponse]("/one", "/many", "itemretry", serve, many, status)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	cl, err := peer.New(peer.Config{Peer: "itemretry-peer", Source: discovery.Static(srv.Addr()),
		Retry: peer.RetryConfig{MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	bc := rpc.NewBatchClient[*chf.ChargeRequest, *chf.ChargeResponse](cl, batcher.Config{}, "itemretry-peer", "/one", "/many",
		func(err error) error { return err })

	reqs := []*chf.ChargeRequest{
		{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 1},
		{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 2},
		{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 3},
		{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 4},
		{Op: chf.OpTopUp, SUPI: "imsi-1", Seq: 5},
		{Op: chf.OpUpdate, SUPI: "imsi-1", Session: "s", Seq: 6},
	}
	resps := make([]*chf.ChargeResponse, len(reqs))
	for i := range resps {
		resps[i] = new(chf.ChargeResponse)
	}
	errs := make([]error, len(reqs))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc.DoMany(ctx, reqs, resps, errs)

	want := []struct {
		status int // 0: served
		sent   int
	}{{0, 2}, {0, 2}, {503, 3}, {400, 1}, {502, 1}, {0, 1}}
	for i, w := range want {
		seq := reqs[i].Seq
		var se *peer.StatusError
		switch {
		case w.status == 0 && (errs[i] != nil || resps[i].Charged != int64(seq)):
			t.Errorf("request %d: %v charged %d, want served", seq, errs[i], resps[i].Charged)
		case w.status != 0 && (!errors.As(errs[i], &se) || se.Code != w.status):
			t.Errorf("request %d: error %v, want status %d", seq, errs[i], w.status)
		}
		if seen[seq] != w.sent {
			t.Errorf("request %d sent %d times, want %d", seq, seen[seq], w.sent)
		}
	}
}
