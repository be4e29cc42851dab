package abm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chf"
)

// fakeClock is an injectable clock advanced by tests.
type fakeClock struct{ sec atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.sec.Store(1_800_000_000)
	return c
}
func (c *fakeClock) Now() time.Time         { return time.Unix(c.sec.Load(), 0) }
func (c *fakeClock) AdvanceSeconds(s int64) { c.sec.Add(s) }

// startStore starts an in-process aslite and returns an official client
// connected to it; both are closed at the end of the test.
func startStore(t testing.TB) *as.Client { return aslitetest.Start(t) }

func provisionAccounts(t testing.TB, cl *as.Client, first string, n int, balance int64) {
	t.Helper()
	if _, err := provision.Run(context.Background(), cl, provision.Config{First: first, Count: n, Balance: balance, Overwrite: true}, nil); err != nil {
		t.Fatal(err)
	}
}

// dataLine is a rated data line at 1 minor unit per MB, granting want octets.
func dataLine(usedOctets, want uint64) chf.RatedLine {
	return chf.RatedLine{
		RatingGroup: 10, Service: chf.ServiceData,
		UsedUnits: usedOctets, UsedCost: chf.Cost(usedOctets, 1, 1_000_000),
		Request: want > 0, GrantUnits: want, Price: 1, UnitSize: 1_000_000,
		ValidityTime: 60, QuotaHoldingTime: 30,
	}
}

func TestApplySessionExpiryAndSweep(t *testing.T) {
	cl := startStore(t)
	clk := newFakeClock()
	svc := New(cl, Config{Now: clk.Now, SessionIdle: 10 * time.Second})
	const supi = "imsi-001010000000001"
	provisionAccounts(t, cl, supi, 1, 1000)
	ctx := context.Background()
	var resp chf.ChargeResponse

	apply := func(req chf.ApplyRequest) {
		t.Helper()
		if err := svc.Apply(ctx, &req, &resp); err != nil {
			t.Fatal(err)
		}
	}
	apply(chf.ApplyRequest{Op: chf.OpCreate, SUPI: supi, Session: "a", Seq: 1, Lines: []chf.RatedLine{dataLine(0, 10_000_000)}})
	if resp.Result != chf.ResultSuccess || resp.Reserved != 10 || resp.Balance != 1000 || resp.Currency != "EUR" {
		t.Fatalf("create: %+v", resp)
	}
	clk.AdvanceSeconds(61)
	apply(chf.ApplyRequest{Op: chf.OpBalance, SUPI: supi})
	if resp.Reserved != 0 || resp.Balance != 1000 {
		t.Fatalf("inquiry after expiry: %+v", resp)
	}
	n, err := svc.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1 record changed", n, err)
	}
	if n, _ := svc.Sweep(ctx); n != 0 {
		t.Fatalf("second sweep changed %d records", n)
	}
	// The session outlived its reservation (idle 10s from the create plus
	// the reservation's 60s): an update is now refused as unknown.
	apply(chf.ApplyRequest{Op: chf.OpUpdate, SUPI: supi, Session: "a", Seq: 2, Lines: []chf.RatedLine{dataLine(1, 1)}})
	if resp.Result != chf.ResultSessionUnknown {
		t.Fatalf("update of expired session: %+v", resp)
	}
	if resp.Balance != 1000 || resp.Reserved != 0 {
		t.Fatalf("balance after expiry: %+v", resp)
	}
}

func TestApplyUnknownUser(t *testing.T) {
	cl := startStore(t)
	svc := New(cl, Config{})
	var resp chf.ChargeResponse
	req := chf.ApplyRequest{Op: chf.OpCreate, SUPI: "imsi-001019999999999", Session: "x", Seq: 1}
	if err := svc.Apply(context.Background(), &req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Result != chf.ResultUserUnknown {
		t.Fatalf("got %+v, want USER_UNKNOWN", resp)
	}
}

func TestProvision(t *testing.T) {
	cl := startStore(t)
	ctx := context.Background()
	var calls atomic.Int32
	var last int
	res, err := provision.Run(ctx, cl, provision.Config{First: "imsi-001010000000001", Count: 2000, Balance: 500, Currency: "USD"},
		func(done, total int) { calls.Add(1); last = done })
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 2000 || res.Skipped != 0 || last != 2000 || calls.Load() == 0 {
		t.Fatalf("result %+v, last progress %d, calls %d", res, last, calls.Load())
	}
	svc := New(cl, Config{})
	var resp chf.ChargeResponse
	for _, s := range []string{"imsi-001010000000001", "imsi-001010000002000"} {
		if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: s}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Result != chf.ResultSuccess || resp.Balance != 500 || resp.Currency != "USD" {
			t.Fatalf("%s: %+v", s, resp)
		}
	}
	if err := svc.Apply(ctx, &chf.ApplyRequest{Op: chf.OpBalance, SUPI: "imsi-001010000002001"}, &resp); err != nil || resp.Result != chf.ResultUserUnknown {
		t.Fatalf("past the range: %+v %v", resp, err)
	}
	res, err = provision.Run(ctx, cl, provision.Config{First: "imsi-001010000000001", Count: 2000, Balance: 1}, nil)
	if err != nil || res.Skipped != 2000 || res.Created != 0 {
		t.Fatalf("re-provision without overwrite: %+v %v", res, err)
	}
	// One request per account, overlapping the existing range by 10.
	res, err = provision.Run(ctx, cl, provision.Config{First: "imsi-001010000001991", Count: 100, Balance: 1, Batch: 1, Workers: 4}, nil)
	if err != nil || res.Skipped != 10 || res.Created != 90 {
		t.Fatalf("unbatched provision: %+v %v", res, err)
	}
}
