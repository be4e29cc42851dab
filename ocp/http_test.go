package ocp_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/chassis"
	"github.com/chf-testbed/testbed/chassis/discovery"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
)

func startServer(t *testing.T, service string, h fasthttp.RequestHandler) string {
	t.Helper()
	srv, err := chassis.NewServer(chassis.ServerConfig{Service: service, Listen: "127.0.0.1:0", Handler: h})
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

func newChassisClient(t *testing.T, peer, addr string) *chassis.Client {
	t.Helper()
	c, err := chassis.NewClient(chassis.ClientConfig{Peer: peer, Source: discovery.Static(addr), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestThroughHTTP runs the charging core as the services do: ocp.Client →
// chassis → ocp.Handler → Processor → abm.Client → chassis → ABM handler →
// aslite.
func TestThroughHTTP(t *testing.T) {
	cl := startStore(t)
	if _, err := abm.Provision(context.Background(), cl, abm.ProvisionConfig{First: supi, Count: 1, Balance: 1000, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
	abmAddr := startServer(t, "abm", abm.New(cl, abm.Config{}).Handler())
	proc := ocp.NewProcessor(nil, abm.NewClient(newChassisClient(t, "abm", abmAddr)))
	ocpAddr := startServer(t, "ocp", ocp.Handler(proc))
	var charger chf.Charger = ocp.NewClient(newChassisClient(t, "ocp", ocpAddr))

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
	want(t, "update retry", charge(upd), chf.ResultSuccess, 0, 993, 10)
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
			for {
				err := charger.Charge(ctx, &req, &resp)
				var se *chassis.StatusError
				if errors.As(err, &se) && se.Code == fasthttp.StatusServiceUnavailable {
					continue // contended record: nothing was charged, send again
				}
				if err != nil {
					t.Error(err)
					return
				}
				break
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
	f("POST", ocp.ChargePath, []byte{0xc1}, fasthttp.StatusBadRequest)
	f("GET", ocp.ChargePath, nil, fasthttp.StatusMethodNotAllowed)
	f("POST", "/ocp/v1/other", nil, fasthttp.StatusNotFound)
	// A semantically invalid request is answered 200 with ResultInvalid.
	body, _ := (&chf.ChargeRequest{Op: chf.OpCreate}).MarshalMsg(nil)
	f("POST", ocp.ChargePath, body, fasthttp.StatusOK)
}
