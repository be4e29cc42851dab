package abm

import (
	"math"
	"testing"

	"github.com/chf-testbed/testbed/chf"
)

// TestUsageOverflowChangesNothing: usage whose cost would overflow the
// account's running totals (debited, overage, offline) is refused with
// ResultOverflow, the line marked, and the account record is unchanged:
// no session opened, nothing debited or remembered.
func TestUsageOverflowChangesNothing(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 4, maxClosed: 4, maxRecent: MaxRecent}
	line := func(rg uint32, cost int64, offline bool) chf.RatedLine {
		return chf.RatedLine{RatingGroup: rg, Service: chf.ServiceSMS, UsedUnits: 1, UsedCost: cost, Price: cost, UnitSize: 1, Offline: offline}
	}
	for _, tc := range []struct {
		name  string
		acc   account
		op    chf.Op
		lines []chf.RatedLine
		bad   int // the line marked
	}{
		{"debited", account{balance: 100, debited: math.MaxInt64 - 5}, chf.OpEvent,
			[]chf.RatedLine{line(30, 6, false)}, 0},
		{"overage", account{balance: 0, overage: math.MaxInt64 - 5}, chf.OpCreate,
			[]chf.RatedLine{line(10, 1, false), line(30, 5, false)}, 1},
		{"offline", account{balance: 100, offline: math.MaxInt64}, chf.OpCreate,
			[]chf.RatedLine{line(30, 1, true)}, 0},
		{"the request's own sum", account{balance: 100}, chf.OpEvent,
			[]chf.RatedLine{line(10, math.MaxInt64, false), line(30, 1, false)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.acc
			before := a.appendSessions(nil)
			req := chf.ApplyRequest{Op: tc.op, SUPI: "imsi-001010000000001", Session: "s1", Key: 7, Lines: tc.lines}
			var resp chf.ChargeResponse
			a.apply(&req, 1000, &lim, &resp)
			if resp.Result != chf.ResultOverflow || len(resp.Lines) != len(tc.lines) || resp.Lines[tc.bad].Result != chf.ResultOverflow {
				t.Fatalf("answer %+v, want ResultOverflow with line %d marked", resp, tc.bad)
			}
			if after := a.appendSessions(nil); string(after) != string(before) || a.balance != tc.acc.balance || a.debited != tc.acc.debited || resp.Charged != 0 {
				t.Fatalf("account changed: %+v, was %+v", a, tc.acc)
			}
		})
	}
	// Up to the limit it is charged.
	a := account{balance: 100, debited: math.MaxInt64 - 6}
	req := chf.ApplyRequest{Op: chf.OpEvent, SUPI: "imsi-001010000000001", Key: 7, Lines: []chf.RatedLine{line(30, 6, false)}}
	var resp chf.ChargeResponse
	a.apply(&req, 1000, &lim, &resp)
	if resp.Result != chf.ResultSuccess || resp.Charged != 6 || a.debited != math.MaxInt64 {
		t.Fatalf("at the limit: %+v, debited %d", resp, a.debited)
	}
}

// TestTopUpOverflowChangesNothing: the ABM's side of a top-up overflow
// (the e2e tests drive it through the operator API).
func TestTopUpOverflowChangesNothing(t *testing.T) {
	lim := limits{sessionIdle: 3600, closedTTL: 600, defaultHold: 3600, maxSessions: 4, maxClosed: 4}
	for _, tc := range []struct {
		name string
		acc  account
		t    chf.TopUp
		want string
	}{
		{"balance", account{balance: math.MaxInt64}, chf.TopUp{Amount: 1}, chf.ParamAmount},
		{"credited", account{credited: math.MaxInt64 - 1}, chf.TopUp{Amount: 2}, chf.ParamAmount},
		{"credit limit", account{balance: 5, creditLimit: math.MaxInt64 - 5}, chf.TopUp{Amount: 1}, chf.ParamAmount},
		{"bucket units", account{buckets: []bucket{{svc: chf.ServiceData, units: math.MaxUint64}}},
			chf.TopUp{Amount: 1, Bucket: chf.Bucket{Service: chf.ServiceData, Units: 1}}, chf.ParamBucketUnits},
		{"validity", account{}, chf.TopUp{Amount: 1, Bucket: chf.Bucket{Service: chf.ServiceVoice, Units: 1, Expires: math.MaxInt64 - 999}}, chf.ParamBucketValidity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.acc
			a.buckets = append([]bucket(nil), tc.acc.buckets...)
			before := a.appendSessions(nil)
			req := chf.ApplyRequest{Op: chf.OpTopUp, SUPI: "imsi-001010000000001", TopUp: tc.t}
			var resp chf.ChargeResponse
			a.apply(&req, 1000, &lim, &resp)
			if resp.Result != chf.ResultOverflow || resp.Param != tc.want {
				t.Fatalf("answer %+v, want ResultOverflow naming %s", resp, tc.want)
			}
			if string(a.appendSessions(nil)) != string(before) || a.balance != tc.acc.balance {
				t.Fatalf("account changed: %+v, was %+v", a, tc.acc)
			}
		})
	}
}
