package ocp

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp/ocpclient"
)

// echoAccounts answers every apply with one grant per line, like an ABM
// that always has balance.
type echoAccounts struct{}

func (echoAccounts) Apply(_ context.Context, req *chf.ApplyRequest, resp *chf.ChargeResponse) error {
	resp.Result, resp.Detail, resp.Charged = chf.ResultSuccess, "", 0
	resp.Lines = resp.Lines[:0]
	for i := range req.Lines {
		l := &req.Lines[i]
		resp.Lines = append(resp.Lines, chf.GrantLine{RatingGroup: l.RatingGroup, Granted: chf.UnitsOf(l.Service, l.GrantUnits), ValidityTime: l.ValidityTime})
		resp.Charged += l.UsedCost
	}
	resp.Balance, resp.Currency = 1000, "EUR"
	return nil
}

func handlerRequest(b testing.TB) []byte {
	req := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: "imsi-001010000000001", Session: "0123456789abcdef", Seq: 2,
		Lines: []chf.UsageLine{{RatingGroup: 10, Used: chf.Units{TotalVolume: 5_000_000}, Request: true}, {RatingGroup: 20, Used: chf.Units{Time: 30}, Request: true}}}
	body, err := req.MarshalMsg(nil)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// TestHandlerAllocations locks in the OCP's own per-request cost: decoding
// allocates the request's two strings, nothing else does.
func TestHandlerAllocations(t *testing.T) {
	h := Handler(NewProcessor(nil, echoAccounts{}))
	body := handlerRequest(t)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(ocpclient.ChargePath)
	ctx.Request.SetBody(body)
	h(&ctx)
	var resp chf.ChargeResponse
	if _, err := resp.UnmarshalMsg(ctx.Response.Body()); err != nil || resp.Charged != 35 || len(resp.Lines) != 2 {
		t.Fatalf("response %+v %v", resp, err)
	}
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	if n := testing.AllocsPerRun(200, func() { ctx.Response.Reset(); h(&ctx) }); n > 2 {
		t.Fatalf("handler allocates %v times per request, want at most 2", n)
	}
}

// BenchmarkHandler measures the OCP's work per request (decode, rate,
// encode) with an in-memory ABM.
func BenchmarkHandler(b *testing.B) {
	h := Handler(NewProcessor(nil, echoAccounts{}))
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(ocpclient.ChargePath)
	ctx.Request.SetBody(handlerRequest(b))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h(&ctx)
	}
}
