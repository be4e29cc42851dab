package audit

import (
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

func TestCheck(t *testing.T) {
	first, _ := scenario.ParseSUPI("imsi-001010000000001")
	snap := func(bal ...int64) *Snapshot {
		s := &Snapshot{}
		for i, b := range bal {
			s.Index = append(s.Index, int32(i))
			s.Accounts = append(s.Accounts, Account{Balance: b, Found: true})
		}
		return s
	}
	ledger := func() *engine.Ledger {
		l := engine.NewLedger(4)
		l.Touch(0)
		l.Add(0, 30)
		l.Touch(2)
		l.Add(2, 5)
		return l
	}
	ok := Check(Input{First: first, Initial: snap(100, 100, 100, 100), Final: snap(70, 100, 95, 100), Ledger: ledger()})
	if !ok.OK || ok.Checked != 4 || ok.Charged != 35 || ok.Debited != 35 || ok.Touched != 2 {
		t.Fatalf("consistent balances judged %+v", ok)
	}
	twice := Check(Input{First: first, Initial: snap(100, 100, 100, 100), Final: snap(40, 100, 90, 100), Ledger: ledger()})
	if twice.OK || twice.Mismatches != 2 || len(twice.Examples) != 2 {
		t.Fatalf("double charging judged %+v", twice)
	}
	fin := snap(70, 100, 95, -1)
	fin.Accounts[1].Reserved = 11
	bad := Check(Input{First: first, InitialBalance: 100, Final: fin, Ledger: ledger()})
	if bad.OK || bad.Negative != 1 || bad.Reserved != 1 || bad.Mismatches != 1 {
		t.Fatalf("negative balance and reservation left judged %+v", bad)
	}
	if none := Check(Input{First: first, InitialBalance: 100, Final: &Snapshot{}, Ledger: ledger()}); none.OK {
		t.Fatalf("empty audit passed: %+v", none)
	}
}

// Usage the run could not deliver fails the audit even when every balance
// reconciles: those units were neither charged nor refused.
func TestCheckUsageLost(t *testing.T) {
	first, _ := scenario.ParseSUPI("imsi-001010000000001")
	fin := &Snapshot{Index: []int32{0}, Accounts: []Account{{Balance: 95, Found: true}}}
	l := engine.NewLedger(1)
	l.Touch(0)
	l.Add(0, 5)
	for _, c := range []struct {
		lost engine.UsageLost
		ok   bool
		want string
	}{
		{engine.UsageLost{}, true, ""},
		{engine.UsageLost{Requests: 3, Refused: 2, InDoubt: 1, ServiceSpecificUnits: 3, ExpectedMinorUnits: 15, Rated: true}, false,
			"usage lost: 3 requests' usage not delivered after the retries (2 refused, 1 in doubt, 0 abandoned at the end; volume 0 octets, time 0 s, 3 service units, rated 15 minor units)"},
	} {
		r := Check(Input{First: first, InitialBalance: 100, Final: fin, Ledger: l, UsageLost: c.lost})
		if r.OK != c.ok || r.UsageLost != c.lost.Requests || !strings.Contains(r.Reason, c.want) || r.Mismatches != 0 {
			t.Errorf("lost %+v: audit %+v, want ok %v and the reason %q", c.lost, r, c.ok, c.want)
		}
	}
}
