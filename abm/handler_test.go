package abm

import (
	"context"
	"errors"
	"fmt"
	"testing"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/abm/abmclient"
	"github.com/chf-testbed/testbed/chf"
)

func TestHandler(t *testing.T) {
	cl := startStore(t)
	const supi = "imsi-001010000000001"
	provisionAccounts(t, cl, supi, 1, 42)
	h := New(cl, Config{}).Handler()
	f := func(method, path string, body []byte, status int) *fasthttp.RequestCtx {
		t.Helper()
		ctx := new(fasthttp.RequestCtx)
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(path)
		ctx.Request.SetBody(body)
		h(ctx)
		if got := ctx.Response.StatusCode(); got != status {
			t.Fatalf("%s %s: %d, want %d (%s)", method, path, got, status, ctx.Response.Body())
		}
		return ctx
	}
	f("POST", abmclient.ApplyPath, []byte{0xc1}, fasthttp.StatusBadRequest)
	f("GET", abmclient.ApplyPath, nil, fasthttp.StatusMethodNotAllowed)
	f("POST", "/abm/v1/other", nil, fasthttp.StatusNotFound)
	body, _ := (&chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi}).MarshalMsg(nil)
	ctx := f("POST", abmclient.ApplyPath, body, fasthttp.StatusOK)
	var resp chf.ChargeResponse
	if _, err := resp.UnmarshalMsg(ctx.Response.Body()); err != nil {
		t.Fatal(err)
	}
	if resp.Result != chf.ResultSuccess || resp.Balance != 42 || resp.Currency != "EUR" {
		t.Fatalf("inquiry: %+v", resp)
	}
}

func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("cannot update account x: %w", ErrContention), fasthttp.StatusServiceUnavailable},
		{fmt.Errorf("cannot update account x: %w", context.DeadlineExceeded), fasthttp.StatusGatewayTimeout},
		{fmt.Errorf("cannot read account x: %w", as.ErrTimeout), fasthttp.StatusGatewayTimeout},
		{errors.New("disk on fire"), fasthttp.StatusInternalServerError},
	} {
		if got := statusFor(tc.err); got != tc.want {
			t.Errorf("statusFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
