package rpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chassis/telemetry/telemetrytest"
	"github.com/chf-testbed/testbed/chf"
)

// TestMetrics checks the RPC's call latency and batch size histograms on
// both ends of a real round trip, and lints the exposition.
func TestMetrics(t *testing.T) {
	bc := serveCharge(t, "metricstest", 0, echoOne, echoMany, batcher.Config{MaxInFlight: 1, MaxItems: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 4
	reqs, resps, errs := make([]*chf.ChargeRequest, n), make([]*chf.ChargeResponse, n), make([]error, n)
	for i := range reqs {
		reqs[i], resps[i] = &chf.ChargeRequest{SUPI: "imsi-1"}, &chf.ChargeResponse{}
	}
	bc.DoMany(ctx, nil, nil, nil) // nothing: no round trip, no call counted
	bc.DoMany(ctx, reqs, resps, errs)
	if err := bc.Do(ctx, reqs[0], resps[0]); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	text := telemetrytest.Gather(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"chf_rpc_client_duration_seconds", map[string]string{"peer": "metricstest-peer", "result": "ok"}, 2}, // DoMany and Do
		{"chf_rpc_client_stage_seconds", map[string]string{"peer": "metricstest-peer", "stage": "queue"}, 2},
		{"chf_rpc_client_stage_seconds", map[string]string{"peer": "metricstest-peer", "stage": "resume"}, 2},
		{"chf_rpc_client_batch_size", map[string]string{"peer": "metricstest-peer"}, 2},
		{"chf_rpc_client_batches_inflight", map[string]string{"peer": "metricstest-peer"}, 2},
		{"chf_rpc_server_batch_size", map[string]string{"api": "metricstest"}, 2},
	} {
		if got := telemetrytest.Value(t, text, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	telemetrytest.CheckLabels(t, text)
	telemetrytest.Promtool(t, text)
}

// echoOne answers a charge at once, charging the SUPI's length; echoMany
// answers a batch of them.
func echoOne(_ context.Context, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	resp.Charged = int64(len(req.SUPI))
	return nil
}

func echoMany(ctx context.Context, reqs []*chf.ChargeRequest, resps []*chf.ChargeResponse, errs []error) {
	for i := range reqs {
		errs[i] = echoOne(ctx, reqs[i], resps[i])
	}
}

// serveCharge starts a chassis server with an rpc.BatchHandler for one
// and many on /one and /many (API api, body limit maxBody, 0 = the
// default) and returns a BatchClient to it (peer api+"-peer", batching as
// bc); both are closed when the test ends.
func serveCharge(t testing.TB, api string, maxBody int, one func(context.Context, *chf.ChargeRequest, *chf.ChargeResponse) error,
	many func(context.Context, []*chf.ChargeRequest, []*chf.ChargeResponse, []error), bc batcher.Config) *rpc.BatchClient[*chf.ChargeRequest, *chf.ChargeResponse] {
	t.Helper()
	srv, err := server.New(server.Config{Service: "rpctest", Listen: "127.0.0.1:0", MaxBodySize: maxBody,
		Handler: rpc.BatchHandler[chf.ChargeRequest, chf.ChargeResponse]("/one", "/many", api, one, many, func(error) int { return 500 })})
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
	cl, err := peer.New(peer.Config{Peer: api + "-peer", Source: discovery.Static(srv.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return rpc.NewBatchClient[*chf.ChargeRequest, *chf.ChargeResponse](cl, bc, api+"-peer", "/one", "/many", func(err error) error { return err })
}
