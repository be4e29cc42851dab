package ocp_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/aslite/aslitetest"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/ocp"
)

// startStore starts an in-process aslite and returns an official client
// connected to it; both are closed at the end of the test.
func startStore(t testing.TB) *as.Client { return aslitetest.Start(t) }

// env is a charging core in process: the default tariff over an ABM on
// aslite.
type env struct {
	t   testing.TB
	cl  *as.Client
	abm *abm.Service
	p   *ocp.Processor
}

func newEnv(t testing.TB, cfg abm.Config) *env {
	cl := startStore(t)
	svc := abm.New(cl, cfg)
	return &env{t: t, cl: cl, abm: svc, p: ocp.NewProcessor(nil, svc)}
}

func (e *env) provision(supi string, balance int64) {
	e.t.Helper()
	if _, err := provision.Run(context.Background(), e.cl, provision.Config{First: supi, Count: 1, Balance: balance, Overwrite: true}, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) charge(req chf.ChargeRequest) chf.ChargeResponse {
	e.t.Helper()
	var resp chf.ChargeResponse
	if err := e.p.Charge(context.Background(), &req, &resp); err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// want checks the whole-request outcome and the account after it.
func want(t testing.TB, step string, r chf.ChargeResponse, result chf.Result, charged, balance, reserved int64) {
	t.Helper()
	if r.Result != result || r.Charged != charged || r.Balance != balance || r.Reserved != reserved {
		t.Fatalf("%s: got result %d charged %d balance %d reserved %d (%s); want result %d charged %d balance %d reserved %d",
			step, r.Result, r.Charged, r.Balance, r.Reserved, r.Detail, result, charged, balance, reserved)
	}
}

// wantReplay checks a replayed answer: the first answer's charge, marked
// Replayed, and the account as the first answer left it.
func wantReplay(t testing.TB, step string, r chf.ChargeResponse, result chf.Result, charged, balance, reserved int64) {
	t.Helper()
	if !r.Replayed {
		t.Fatalf("%s: not marked Replayed: %+v", step, r)
	}
	want(t, step, r, result, charged, balance, reserved)
}

func wantLine(t testing.TB, step string, r chf.ChargeResponse, i int, result chf.Result, granted chf.Units, final bool) {
	t.Helper()
	if i >= len(r.Lines) {
		t.Fatalf("%s: %d lines, want line %d", step, len(r.Lines), i)
	}
	l := r.Lines[i]
	if l.Result != result || l.Granted != granted || l.FinalUnit != final {
		t.Fatalf("%s: line %d = %+v; want result %d granted %+v final %v", step, i, l, result, granted, final)
	}
}

const supi = "imsi-001010000000001"

func data(used uint64, request bool) chf.UsageLine {
	return chf.UsageLine{RatingGroup: 10, Used: chf.Units{TotalVolume: used}, Request: request}
}

func TestDataSession(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1000)
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s1", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	want(t, "create", r, chf.ResultSuccess, 0, 1000, 10)
	wantLine(t, "create", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 10_000_000}, false)
	if r.Lines[0].ValidityTime != 1800 || r.Lines[0].QuotaHoldingTime != 300 {
		t.Fatalf("create times: %+v", r.Lines[0])
	}
	// 2.5 MB cost ceil(2.5) = 3.
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 2, Lines: []chf.UsageLine{data(2_500_000, true)}})
	want(t, "update", r, chf.ResultSuccess, 3, 997, 10)
	// Uplink + downlink when no total: 600,001 + 400,000 octets = 2 minor units.
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 3, Lines: []chf.UsageLine{
		{RatingGroup: 10, Used: chf.Units{UplinkVolume: 600_001, DownlinkVolume: 400_000}, Request: true, Requested: chf.Units{TotalVolume: 3_000_000}}}})
	want(t, "update uplink/downlink", r, chf.ResultSuccess, 2, 995, 3)
	wantLine(t, "update", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 3_000_000}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "s1", Seq: 4, Lines: []chf.UsageLine{data(1_000_000, false)}})
	want(t, "release", r, chf.ResultSuccess, 1, 994, 0)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s1", Seq: 5, Lines: []chf.UsageLine{data(1, true)}})
	if r.Result != chf.ResultSessionUnknown {
		t.Fatalf("update after release: %+v", r)
	}
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "nope", Seq: 1, Lines: []chf.UsageLine{data(1, true)}})
	if r.Result != chf.ResultSessionUnknown {
		t.Fatalf("update of unknown session: %+v", r)
	}
}

func TestVoiceAndSMS(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1000)
	voice := func(used uint32, req bool) []chf.UsageLine {
		return []chf.UsageLine{{RatingGroup: 20, Used: chf.Units{Time: used}, Request: req}}
	}
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "v", Seq: 0, Lines: voice(0, true)})
	want(t, "voice create", r, chf.ResultSuccess, 0, 1000, 300)
	wantLine(t, "voice create", r, 0, chf.ResultSuccess, chf.Units{Time: 300}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "v", Seq: 1, Lines: voice(125, true)})
	want(t, "voice update", r, chf.ResultSuccess, 125, 875, 300)
	r = e.charge(chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "v", Seq: 2, Lines: voice(40, false)})
	want(t, "voice release", r, chf.ResultSuccess, 40, 835, 0)

	sms := []chf.UsageLine{{RatingGroup: 30, Requested: chf.Units{ServiceSpecific: 1}, Request: true}}
	for i := range 3 {
		r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Session: fmt.Sprintf("sms%d", i), Seq: 1, Lines: sms})
		want(t, "sms", r, chf.ResultSuccess, 5, 835-5*int64(i+1), 0)
		wantLine(t, "sms", r, 0, chf.ResultSuccess, chf.Units{ServiceSpecific: 1}, false)
	}
	// A retried event charges once.
	r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Session: "sms2", Seq: 1, Lines: sms})
	wantReplay(t, "sms retry", r, chf.ResultSuccess, 5, 820, 0)
	wantLine(t, "sms retry", r, 0, chf.ResultSuccess, chf.Units{ServiceSpecific: 1}, false)
	// Several messages in one event, used units reported.
	r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Lines: []chf.UsageLine{{RatingGroup: 30, Used: chf.Units{ServiceSpecific: 4}}}})
	want(t, "sms x4", r, chf.ResultSuccess, 20, 800, 0)
	// Mixed rating groups, one unknown.
	r = e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "m", Seq: 1, Lines: []chf.UsageLine{data(0, true), {RatingGroup: 99, Request: true}, {RatingGroup: 20, Request: true, Requested: chf.Units{Time: 60}}}})
	want(t, "mixed", r, chf.ResultSuccess, 0, 800, 70)
	wantLine(t, "mixed", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 10_000_000}, false)
	wantLine(t, "mixed", r, 1, chf.ResultRatingFailed, chf.Units{}, false)
	wantLine(t, "mixed", r, 2, chf.ResultSuccess, chf.Units{Time: 60}, false)
}

func TestInsufficientBalance(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 25)
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	want(t, "create", r, chf.ResultSuccess, 0, 25, 10)
	wantLine(t, "create", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 10_000_000}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s", Seq: 2, Lines: []chf.UsageLine{data(10_000_000, true)}})
	want(t, "update 1", r, chf.ResultSuccess, 10, 15, 10)
	wantLine(t, "update 1: last full grant", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 10_000_000}, true)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s", Seq: 3, Lines: []chf.UsageLine{data(10_000_000, true)}})
	want(t, "update 2", r, chf.ResultSuccess, 10, 5, 5)
	wantLine(t, "update 2: shrunk grant", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 5_000_000}, true)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s", Seq: 4, Lines: []chf.UsageLine{data(5_000_000, true)}})
	want(t, "update 3", r, chf.ResultSuccess, 5, 0, 0)
	wantLine(t, "update 3: exhausted", r, 0, chf.ResultQuotaLimitReached, chf.Units{}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "s", Seq: 5})
	want(t, "release", r, chf.ResultSuccess, 0, 0, 0)
	// Nothing left: a create and an SMS are refused as a whole.
	r = e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "t", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	want(t, "create when empty", r, chf.ResultQuotaLimitReached, 0, 0, 0)
	r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Lines: []chf.UsageLine{{RatingGroup: 30, Request: true}}})
	want(t, "sms when empty", r, chf.ResultQuotaLimitReached, 0, 0, 0)
}

func TestUnknownUserAndInvalid(t *testing.T) {
	e := newEnv(t, abm.Config{})
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: "imsi-001019999999999", Session: "s", Seq: 1, Lines: []chf.UsageLine{data(0, true)}})
	if r.Result != chf.ResultUserUnknown {
		t.Fatalf("unknown user: %+v", r)
	}
	r = e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: "imsi-001019999999999"})
	if r.Result != chf.ResultUserUnknown {
		t.Fatalf("unknown user inquiry: %+v", r)
	}
	for _, req := range []chf.ChargeRequest{
		{Op: chf.OpCreate, Session: "s"},
		{Op: chf.OpUpdate, SUPI: supi},
		{Op: 42, SUPI: supi, Session: "s"},
		{Op: chf.OpEvent, SUPI: supi},
	} {
		if r := e.charge(req); r.Result != chf.ResultInvalid {
			t.Fatalf("%+v: got %+v, want ResultInvalid", req, r)
		}
	}
}

func TestRetriesChargeOnce(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1000)
	create := chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "r", Seq: 1, Lines: []chf.UsageLine{data(0, true)}}
	want(t, "create", e.charge(create), chf.ResultSuccess, 0, 1000, 10)
	wantReplay(t, "create retry", e.charge(create), chf.ResultSuccess, 0, 1000, 10)
	upd := chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "r", Seq: 2, Lines: []chf.UsageLine{data(4_000_000, true)}}
	r1 := e.charge(upd)
	want(t, "update", r1, chf.ResultSuccess, 4, 996, 10)
	r2 := e.charge(upd)
	wantReplay(t, "update retry", r2, chf.ResultSuccess, 4, 996, 10)
	if len(r2.Lines) != 1 || r2.Lines[0] != r1.Lines[0] {
		t.Fatalf("retry answered %+v, first answer %+v", r2.Lines, r1.Lines)
	}
	r := e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "r", Seq: 1, Lines: []chf.UsageLine{data(4_000_000, true)}})
	if r.Result != chf.ResultStaleSequence || r.Charged != 0 || r.Balance != 996 {
		t.Fatalf("stale update: %+v", r)
	}
	rel := chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "r", Seq: 3, Lines: []chf.UsageLine{data(1_000_000, false)}}
	want(t, "release", e.charge(rel), chf.ResultSuccess, 1, 995, 0)
	wantReplay(t, "release retry", e.charge(rel), chf.ResultSuccess, 1, 995, 0)
	// After the release anything but the release itself is unknown.
	r = e.charge(chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: "r", Seq: 2})
	if r.Result != chf.ResultSessionUnknown {
		t.Fatalf("stale release: %+v", r)
	}
}

func TestReservationExpiry(t *testing.T) {
	var now atomic.Int64
	now.Store(1_800_000_000)
	e := newEnv(t, abm.Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	e.provision(supi, 1000)
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "x", Seq: 1, Lines: []chf.UsageLine{data(0, true), {RatingGroup: 20, Request: true}}})
	want(t, "create", r, chf.ResultSuccess, 0, 1000, 310)
	now.Add(1799)
	want(t, "before validity ends", e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi}), chf.ResultSuccess, 0, 1000, 310)
	now.Add(1)
	want(t, "after validity", e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi}), chf.ResultSuccess, 0, 1000, 0)
	n, err := e.abm.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	// Late usage of the still-open session is charged; a new grant is held.
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "x", Seq: 2, Lines: []chf.UsageLine{data(3_000_000, true)}})
	want(t, "late update", r, chf.ResultSuccess, 3, 997, 10)
	// Expiry is also applied on the next charging event without a sweep.
	now.Add(1800)
	r = e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "y", Seq: 1, Lines: []chf.UsageLine{{RatingGroup: 20, Request: true}}})
	want(t, "create after expiry", r, chf.ResultSuccess, 0, 997, 300)
}

// TestConcurrentSessionsSameAccount runs many sessions on one account at
// once: the record never overdraws and every debit is accounted for.
func TestConcurrentSessionsSameAccount(t *testing.T) {
	e := newEnv(t, abm.Config{MaxAttempts: 1000, BackoffMax: 2 * time.Millisecond})
	const initial = 700
	e.provision(supi, initial)
	const workers, updates = 32, 3
	var charged atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			sess := fmt.Sprintf("w%02d", w)
			var resp chf.ChargeResponse
			// do retries on transport-level errors with the same Seq, as a
			// front would: the idempotency keeps it charged once.
			do := func(req *chf.ChargeRequest) bool {
				for ctx.Err() == nil {
					err := e.p.Charge(ctx, req, &resp)
					if err == nil {
						if resp.Result != chf.ResultSuccess && resp.Result != chf.ResultQuotaLimitReached {
							errs <- fmt.Errorf("%s seq %d: result %d %s", sess, req.Seq, resp.Result, resp.Detail)
							return false
						}
						charged.Add(resp.Charged)
						if resp.Balance < 0 || resp.Reserved < 0 || resp.Reserved > resp.Balance {
							errs <- fmt.Errorf("%s: balance %d reserved %d", sess, resp.Balance, resp.Reserved)
							return false
						}
						return true
					}
					if !errors.Is(err, abm.ErrContention) {
						errs <- err
						return false
					}
				}
				return false
			}
			granted := uint64(0)
			grantOf := func() uint64 {
				if len(resp.Lines) == 0 || resp.Lines[0].Result != chf.ResultSuccess {
					return 0
				}
				return resp.Lines[0].Granted.TotalVolume
			}
			if !do(&chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: sess, Seq: 1, Lines: []chf.UsageLine{data(0, true)}}) {
				return
			}
			if resp.Result != chf.ResultSuccess {
				return // no quota at all: no session
			}
			granted = grantOf()
			seq := uint32(1)
			for range updates {
				seq++
				used := rng.Uint64N(granted + 1)
				if !do(&chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: sess, Seq: seq, Lines: []chf.UsageLine{data(used, true)}}) {
					return
				}
				granted = grantOf()
			}
			seq++
			do(&chf.ChargeRequest{Op: chf.OpRelease, SUPI: supi, Session: sess, Seq: seq, Lines: []chf.UsageLine{data(rng.Uint64N(granted+1), false)}})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := e.charge(chf.ChargeRequest{Op: chf.OpBalance, SUPI: supi})
	if r.Balance < 0 || initial-r.Balance != charged.Load() || r.Reserved != 0 {
		t.Fatalf("final balance %d reserved %d; initial %d - final = %d, sum of Charged = %d",
			r.Balance, r.Reserved, initial, initial-r.Balance, charged.Load())
	}
	t.Logf("charged %d of %d; %+v", charged.Load(), initial, e.abm.Stats())
}
