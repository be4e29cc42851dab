package ocp_test

import (
	"context"
	"testing"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chf"
)

// moneyStep is one request of a TestUsageNeverDropped case and what it
// must answer: the request's result, what it debited and what it rated
// beyond (overage) or as offline usage.
type moneyStep struct {
	name    string
	req     chf.ChargeRequest
	result  chf.Result
	charged int64
	overage int64 // added to the account's overage by this request
	offline int64 // rated as offline usage by this request
	granted chf.Units
}

func sms(used, requested uint64) chf.UsageLine {
	return chf.UsageLine{RatingGroup: 30, Used: chf.Units{ServiceSpecific: used},
		Request: requested > 0, Requested: chf.Units{ServiceSpecific: requested}}
}

func offlineData(used uint64, request bool) chf.UsageLine {
	l := data(used, request)
	l.Offline = true
	return l
}

// TestUsageNeverDropped: usage that arrives on an account that cannot
// cover it is refused before delivery (IEC: nothing charged) or debited
// as far as the balance goes and the rest recorded as overage (PEC,
// session usage); usage reported OFFLINE_CHARGING for a rating group the
// session holds an online grant for is charged by the grant's method.
// After every step the account reconciles: balance = provisioned -
// debited, and debited + overage + offline = every cost rated.
func TestUsageNeverDropped(t *testing.T) {
	ev := func(e chf.EventType, lines ...chf.UsageLine) chf.ChargeRequest {
		return chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Event: e, Lines: lines}
	}
	sess := func(op chf.Op, seq uint32, lines ...chf.UsageLine) chf.ChargeRequest {
		return chf.ChargeRequest{Op: op, SUPI: supi, Session: "s", Seq: seq, Lines: lines}
	}
	cases := []struct {
		name        string
		balance     int64
		creditLimit int64
		buckets     []chf.Bucket
		steps       []moneyStep
	}{
		{"PEC beyond the balance", 12, 0, nil, []moneyStep{
			{"pec", ev(chf.EventPEC, sms(4, 0)), chf.ResultSuccess, 12, 8, 0, chf.Units{ServiceSpecific: 4}},
			{"pec on empty", ev(chf.EventPEC, sms(1, 0)), chf.ResultSuccess, 0, 5, 0, chf.Units{ServiceSpecific: 1}},
		}},
		{"event reporting used units is PEC", 12, 0, nil, []moneyStep{
			{"used units", ev(chf.EventUnspecified, sms(4, 0)), chf.ResultSuccess, 12, 8, 0, chf.Units{ServiceSpecific: 4}},
		}},
		{"PEC naming requested units only", 3, 0, nil, []moneyStep{
			{"pec requested", ev(chf.EventPEC, sms(0, 1)), chf.ResultSuccess, 3, 2, 0, chf.Units{ServiceSpecific: 1}},
		}},
		{"IEC refused before delivery", 3, 0, nil, []moneyStep{
			{"iec", ev(chf.EventIEC, sms(0, 1)), chf.ResultQuotaLimitReached, 0, 0, 0, chf.Units{}},
			{"unspecified, requested only", ev(chf.EventUnspecified, sms(0, 1)), chf.ResultQuotaLimitReached, 0, 0, 0, chf.Units{}},
			{"iec with used units", ev(chf.EventIEC, sms(4, 0)), chf.ResultQuotaLimitReached, 0, 0, 0, chf.Units{}},
		}},
		{"PEC on a postpaid account", 0, 10, nil, []moneyStep{
			{"pec", ev(chf.EventPEC, sms(4, 0)), chf.ResultSuccess, 10, 10, 0, chf.Units{ServiceSpecific: 4}},
			{"iec beyond the credit limit", ev(chf.EventIEC, sms(0, 1)), chf.ResultQuotaLimitReached, 0, 0, 0, chf.Units{}},
		}},
		{"PEC takes the bucket first", 2, 0, []chf.Bucket{{Service: chf.ServiceSMS, Units: 3}}, []moneyStep{
			// 3 messages from the bucket, 1 (5 minor units) from 2 of money.
			{"pec", ev(chf.EventPEC, sms(4, 0)), chf.ResultSuccess, 2, 3, 0, chf.Units{ServiceSpecific: 4}},
		}},
		{"PEC on an account the operator barred", 12, 0, nil, []moneyStep{
			{"abort", chf.ChargeRequest{Op: chf.OpAbortSessions, SUPI: supi}, chf.ResultSuccess, 0, 0, 0, chf.Units{}},
			{"iec refused", ev(chf.EventIEC, sms(0, 1)), chf.ResultEndUserServiceDenied, 0, 0, 0, chf.Units{}},
			// Delivered before the CHF could refuse it: charged.
			{"pec charged", ev(chf.EventPEC, sms(4, 0)), chf.ResultSuccess, 12, 8, 0, chf.Units{ServiceSpecific: 4}},
		}},
		{"session usage beyond the balance", 8, 0, nil, []moneyStep{
			{"create", sess(chf.OpCreate, 0, data(0, true)), chf.ResultSuccess, 0, 0, 0, chf.Units{TotalVolume: 8_000_000}},
			{"update", sess(chf.OpUpdate, 1, data(20_000_000, true)), chf.ResultSuccess, 8, 12, 0, chf.Units{}},
			{"release", sess(chf.OpRelease, 2, data(1_000_000, false)), chf.ResultSuccess, 0, 1, 0, chf.Units{}},
		}},
		{"offline report on an online grant", 100, 0, nil, []moneyStep{
			{"create", sess(chf.OpCreate, 0, data(0, true)), chf.ResultSuccess, 0, 0, 0, chf.Units{TotalVolume: 10_000_000}},
			// Charged online, and granted again since the grant is online.
			{"update offline", sess(chf.OpUpdate, 1, offlineData(5_000_000, true)), chf.ResultSuccess, 5, 0, 0, chf.Units{TotalVolume: 10_000_000}},
			{"release offline", sess(chf.OpRelease, 2, offlineData(3_000_000, false)), chf.ResultSuccess, 3, 0, 0, chf.Units{}},
		}},
		{"offline report on an online grant beyond the balance", 8, 0, nil, []moneyStep{
			{"create", sess(chf.OpCreate, 0, data(0, true)), chf.ResultSuccess, 0, 0, 0, chf.Units{TotalVolume: 8_000_000}},
			{"release offline", sess(chf.OpRelease, 1, offlineData(20_000_000, false)), chf.ResultSuccess, 8, 12, 0, chf.Units{}},
		}},
		{"offline report without a grant stays offline", 100, 0, nil, []moneyStep{
			{"create voice", sess(chf.OpCreate, 0, chf.UsageLine{RatingGroup: 20, Request: true}), chf.ResultSuccess, 0, 0, 0, chf.Units{Time: 100}},
			{"update offline data", sess(chf.OpUpdate, 1, offlineData(5_000_000, true)), chf.ResultSuccess, 0, 0, 5, chf.Units{}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, abm.Config{})
			if _, err := provision.Run(context.Background(), e.cl, provision.Config{First: supi, Count: 1, Balance: tc.balance,
				CreditLimit: tc.creditLimit, Buckets: tc.buckets, Overwrite: true}, nil); err != nil {
				t.Fatal(err)
			}
			var overage, rated int64
			for _, st := range tc.steps {
				r := e.charge(st.req)
				if r.Result != st.result || r.Charged != st.charged || r.Overage-overage != st.overage || r.Offline != st.offline {
					t.Fatalf("%s: result %d charged %d overage +%d offline %d (%s); want result %d charged %d overage +%d offline %d",
						st.name, r.Result, r.Charged, r.Overage-overage, r.Offline, r.Detail, st.result, st.charged, st.overage, st.offline)
				}
				if st.result == chf.ResultSuccess && len(r.Lines) != len(st.req.Lines) || len(r.Lines) > 0 && r.Lines[0].Granted != st.granted {
					t.Fatalf("%s: lines %+v, want granted %+v", st.name, r.Lines, st.granted)
				}
				overage = r.Overage
				rated += st.charged + st.overage + st.offline
				if r.Balance != tc.balance-r.Debited || r.Debited+r.Overage+r.OfflineTotal != rated {
					t.Fatalf("%s: balance %d debited %d overage %d offline %d do not reconcile with %d provisioned and %d rated",
						st.name, r.Balance, r.Debited, r.Overage, r.OfflineTotal, tc.balance, rated)
				}
			}
		})
	}
}

// TestDefaultTariffCapsGrants: a create asking for more than a rating
// group's maxGrant is granted (and reserves) the cap, not the balance;
// an IEC asking for more messages is charged the cap; a PEC naming more
// was delivered and is charged whole.
func TestDefaultTariffCapsGrants(t *testing.T) {
	e := newEnv(t, abm.Config{})
	e.provision(supi, 1_000_000)
	r := e.charge(chf.ChargeRequest{Op: chf.OpCreate, SUPI: supi, Session: "s", Lines: []chf.UsageLine{
		{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 1 << 50}},
		{RatingGroup: 20, Request: true, Requested: chf.Units{Time: 1 << 30}},
	}})
	want(t, "create", r, chf.ResultSuccess, 0, 1_000_000, 100+3600)
	wantLine(t, "create data", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 100_000_000}, false)
	wantLine(t, "create voice", r, 1, chf.ResultSuccess, chf.Units{Time: 3600}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpUpdate, SUPI: supi, Session: "s", Seq: 1, Lines: []chf.UsageLine{
		{RatingGroup: 10, Request: true, Requested: chf.Units{TotalVolume: 100_000_001}}}})
	want(t, "update", r, chf.ResultSuccess, 0, 1_000_000, 3600+100)
	wantLine(t, "update data", r, 0, chf.ResultSuccess, chf.Units{TotalVolume: 100_000_000}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Event: chf.EventIEC, Lines: []chf.UsageLine{sms(0, 1000)}})
	want(t, "iec", r, chf.ResultSuccess, 50, 1_000_000-50, 3700)
	wantLine(t, "iec", r, 0, chf.ResultSuccess, chf.Units{ServiceSpecific: 10}, false)
	r = e.charge(chf.ChargeRequest{Op: chf.OpEvent, SUPI: supi, Event: chf.EventPEC, Lines: []chf.UsageLine{sms(0, 1000)}})
	want(t, "pec", r, chf.ResultSuccess, 5000, 1_000_000-5050, 3700)
	wantLine(t, "pec", r, 0, chf.ResultSuccess, chf.Units{ServiceSpecific: 1000}, false)
}
