package ocp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chassis/batcher"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chassis/peer"
	"github.com/chf-testbed/testbed/chassis/rpc"
	"github.com/chf-testbed/testbed/chassis/server"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
)

func startServer(t *testing.T, service string, h fasthttp.RequestHandler) string {
	t.Helper()
	srv, err := server.New(server.Config{Service: service, Listen: "127.0.0.1:0", Handler: h})
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
	return srv.Addr()
}

func newChassisClient(t *testing.T, name, addr string) *peer.Client {
	t.Helper()
	c, err := peer.New(peer.Config{Peer: name, Source: discovery.Static(addr), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestThroughHTTP runs the charging core as the services do: ocpclient.Client →
// chassis → ocp.Handler → Processor → abmclient.Client → chassis → ABM handler →
// aslite.
func TestThroughHTTP(t *testing.T) {
	cl := startStore(t)
	if _, err := provision.Run(context.Background(), cl, provision.Config{First: supi, Count: 1, Balance: 1000, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	abmAddr := startServer(t, "abm", abm.New(cl, abm.Config{}).Handler())
	proc := ocp.NewProcessor(nil, abmclient.New(newChassisClient(t, "abm", abmAddr), batcher.Config{}))
	ocpAddr := startServer(t, "ocp", ocp.Handler(proc))
	var charger chf.Charger = ocpclient.New(newChassisClient(t, "ocp", ocpAddr), batcher.Config{})

	ctx := context.Background()
	charge := func(req chf.ChargeRequest) chf.ChargeResponse {
		t.Helper()
		var resp chf.ChargeResponse
		if err := charger.Charge(ctx, &req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r := charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "h", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	want(t, "create", r, chf.ResultSuccess, 0, 1000, 10)
	wantLine(t, "create", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 10_000_000}, false)
	upd := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "h", Seq: 2, Lines: []chf.UsageLine{data(7_000_000, true)}}
	want(t, "update", charge(upd), chf.ResultSuccess, 7, 993, 10)
	wantReplay(t, "update retry", charge(upd), chf.ResultSuccess, 7, 993, 10)
	want(t, "release", charge(chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "h", Seq: 3, Lines: []chf.UsageLine{data(1, false)}}), chf.ResultSuccess, 1, 992, 0)
	r = charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi})
	want(t, "inquiry", r, chf.ResultSuccess, 0, 992, 0)
	if r.Currency != "EUR" {
		t.Fatalf("currency %q", r.Currency)
	}
	r = charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: "imsi-001010000000002"})
	if r.Result != chf.ResultUserUnknown {
		t.Fatalf("unknown user: %+v", r)
	}

	// Concurrent SMS events over HTTP reconcile to the minor unit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sum int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp chf.ChargeResponse
			req := chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Lines: []chf.UsageLine{{RatingGroup: 30, Request: true}}}
			if err := chargeUntilUncontended(ctx, charger, &req, &resp); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			sum += resp.Charged
			mu.Unlock()
		}()
	}
	wg.Wait()
	r = charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi})
	if sum != 16*5 || r.Balance != 992-sum {
		t.Fatalf("16 SMS charged %d, balance %d", sum, r.Balance)
	}
}

// chargeUntilUncontended sends req again while the OCP answers 503 (a
// contended record: nothing was charged).
func chargeUntilUncontended(ctx context.Context, c chf.Charger, req *chf.ChargeRequest, resp *chf.ChargeResponse) error {
	for {
		err := c.Charge(ctx, req, resp)
		var se *peer.StatusError
		if errors.As(err, &se) && se.Code == fasthttp.StatusServiceUnavailable {
			continue
		}
		return err
	}
}

func TestHandlerRejects(t *testing.T) {
	h := ocp.Handler(ocp.NewProcessor(nil, nil))
	f := func(method, path string, body []byte, status int) {
		t.Helper()
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(path)
		ctx.Request.SetBody(body)
		h(&ctx)
		if got := ctx.Response.StatusCode(); got != status {
			t.Fatalf("%s %s: %d, want %d", method, path, got, status)
		}
	}
	f("POST", ocpclient.ChargePath, []byte{0xc1}, fasthttp.StatusBadRequest)
	f("GET", ocpclient.ChargePath, nil, fasthttp.StatusMethodNotAllowed)
	f("POST", "/ocp/v1/other", nil, fasthttp.StatusNotFound)
	// A semantically invalid request is answered 200 with ResultInvalid.
	body, _ := (&chf.ChargeRequest{Op: chf.OpCreate}).MarshalMsg(nil)
	f("POST", ocpclient.ChargePath, body, fasthttp.StatusOK)
}

// TestBatchesThroughHTTP: with one batch in flight per hop, a burst of
// concurrent requests travels in batches on both hops (CGW side → OCP,
// OCP → ABM) and every charge reconciles to the minor unit; invalid and
// unknown-subscriber requests inside a batch get their own answers.
func TestBatchesThroughHTTP(t *testing.T) {
	cl := startStore(t)
	const accounts = 8
	if _, err := provision.Run(context.Background(), cl, provision.Config{First: supi, Count: accounts, Balance: 100_000, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	var abmBatches, ocpBatches atomic.Int64
	counting := func(path string, n *atomic.Int64, h fasthttp.RequestHandler) fasthttp.RequestHandler {
		return func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) == path {
				n.Add(1)
			}
			h(ctx)
		}
	}
	one := batcher.Config{MaxInFlight: 1}
	abmAddr := startServer(t, "abm", counting(abmclient.ApplyBatchPath, &abmBatches, abm.New(cl, abm.Config{AccountCache: 100}).Handler()))
	proc := ocp.NewProcessor(nil, abmclient.New(newChassisClient(t, "abm", abmAddr), one))
	ocpAddr := startServer(t, "ocp", counting(ocpclient.ChargeBatchPath, &ocpBatches, ocp.Handler(proc)))
	charger := ocpclient.New(newChassisClient(t, "ocp", ocpAddr), one)

	ctx := context.Background()
	const workers, each = 32, 20
	var mu sync.Mutex
	charged := map[string]int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				s := fmt.Sprintf("imsi-00101%010d", (w+i)%accounts+1)
				var resp chf.ChargeResponse
				req := chf.ChargeRequest{Op: chf.OpEvent, SUPI: s, Lines: []chf.UsageLine{{RatingGroup: 30, Request: true}}}
				switch i % 10 {
				case 3:
					req.SUPI = "imsi-001019999999999"
				case 7:
					req.Lines = nil // invalid: an event without a rating group
				}
				if err := chargeUntilUncontended(ctx, charger, &req, &resp); err != nil {
					t.Error(err)
					return
				}
				switch i % 10 {
				case 3:
					if resp.Result != chf.ResultUserUnknown {
						t.Errorf("unknown subscriber: %+v", resp)
					}
				case 7:
					if resp.Result != chf.ResultInvalid {
						t.Errorf("invalid event: %+v", resp)
					}
				default:
					if resp.Result != chf.ResultSuccess || resp.Charged != 5 {
						t.Errorf("event: %+v", resp)
					}
				}
				mu.Lock()
				charged[req.SUPI] += resp.Charged
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if abmBatches.Load() == 0 || ocpBatches.Load() == 0 {
		t.Errorf("no batches: %d to the OCP, %d to the ABM", ocpBatches.Load(), abmBatches.Load())
	}
	var total int64
	for a := range accounts {
		s := fmt.Sprintf("imsi-00101%010d", a+1)
		var r chf.ChargeResponse
		if err := charger.Charge(ctx, &chf.ChargeRequest{Op: chf.OpBalance, SUPI: s}, &r); err != nil {
			t.Fatal(err)
		}
		if r.Balance != 100_000-charged[s] || r.Debited != charged[s] {
			t.Errorf("%s: balance %d debited %d, charged %d", s, r.Balance, r.Debited, charged[s])
		}
		total += charged[s]
	}
	if want := int64(workers * each * 8 / 10 * 5); total != want {
		t.Errorf("charged %d in all, want %d", total, want)
	}
	t.Logf("batches: %d to the OCP, %d to the ABM", ocpBatches.Load(), abmBatches.Load())
}

func TestBatchHandlerRejects(t *testing.T) {
	h := ocp.Handler(ocp.NewProcessor(nil, nil))
	post := func(body []byte) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(ocpclient.ChargeBatchPath)
		ctx.Request.SetBody(body)
		h(&ctx)
		return &ctx
	}
	for _, body := range [][]byte{{0xc1}, rpc.AppendBatchHeader(nil, 0), rpc.AppendBatchHeader(nil, 2)} {
		if got := post(body).Response.StatusCode(); got != fasthttp.StatusBadRequest {
			t.Errorf("batch %x: %d, want 400", body, got)
		}
	}
	// Two invalid requests: 200, one item each.
	body := rpc.AppendBatchHeader(nil, 2)
	body, _ = (&chf.ChargeRequest{Op: chf.OpCreate}).MarshalMsg(body)
	body, _ = (&chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi}).MarshalMsg(body)
	ctx := post(body)
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		t.Fatalf("batch of invalid requests: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	got := make([]chf.ChargeResponse, 2)
	if err := rpc.ReadBatchReply(ctx.Response.Body(), 2, func(i int) *chf.ChargeResponse { return &got[i] }, func(i, st int, msg string) { t.Errorf("item %d failed: %d %s", i, st, msg) }); err != nil {
		t.Fatal(err)
	}
	if got[0].Result != chf.ResultInvalid || got[1].Result != chf.ResultInvalid {
		t.Fatalf("answers %+v", got)
	}
}
