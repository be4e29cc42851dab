package audit

import (
	"testing"

	"github.com/chf-testbed/testbed/loadgen/driver/nchf"
	"github.com/chf-testbed/testbed/loadgen/engine"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// TestCheckPlans: a postpaid balance below zero within its credit limit
// passes and one beyond it fails; offline usage and the value of the
// voice and sms bucket units consumed count towards the tariff's
// expectation, exactly; a data bucket (priced per block) takes its
// subscriber out of the independent check instead of passing or failing
// it on rounding.
func TestCheckPlans(t *testing.T) {
	first, _ := scenario.ParseSUPI("imsi-001010000000001")
	const (
		postpaid = iota
		buckets
		offline
		dataBucket
		n
	)
	initial := func(i int32) Account {
		switch i {
		case postpaid:
			return Account{Balance: 0, CreditLimit: 100, Found: true}
		case buckets:
			var b [nchf.NumBucketServices]uint64
			b[nchf.BucketVoice], b[nchf.BucketSMS] = 60, 2
			return Account{Balance: 1000, Buckets: b, Found: true}
		case dataBucket:
			var b [nchf.NumBucketServices]uint64
			b[nchf.BucketData] = 3_000_000
			return Account{Balance: 1000, Buckets: b, Found: true}
		}
		return Account{Balance: 1000, Found: true}
	}
	// What the CHF would have left: the postpaid account paid 80 below
	// zero; the bucket account used 40 s of voice and 2 SMS (5 each) from
	// its buckets and paid 7 more; the offline one recorded 12 offline.
	final := func(postpaidBal int64) *Snapshot {
		s := &Snapshot{}
		for i := int32(0); i < n; i++ {
			a := initial(i)
			switch i {
			case postpaid:
				a.Balance = postpaidBal
			case buckets:
				a.Balance -= 7
				a.Buckets[nchf.BucketVoice] -= 40
				a.Buckets[nchf.BucketSMS] = 0
			case offline:
				a.Offline = 12
			case dataBucket:
				a.Balance -= 1
				a.Buckets[nchf.BucketData] = 0
			}
			s.Index, s.Accounts = append(s.Index, i), append(s.Accounts, a)
		}
		return s
	}
	ledger := func(postpaidCharged int64) *engine.Ledger {
		l := engine.NewLedger(n)
		for i, c := range []struct{ charged, expected int64 }{{postpaidCharged, postpaidCharged}, {7, 7 + 40 + 2*5}, {0, 12}, {1, 4}} {
			l.Touch(int32(i))
			l.Add(int32(i), c.charged)
			l.AddExpected(int32(i), c.expected)
		}
		return l
	}
	f := func(postpaidBal int64, wantOK bool, wantNegative int) {
		t.Helper()
		l := ledger(-postpaidBal)
		r := Check(Input{First: first, InitialOf: initial, Final: final(postpaidBal), Ledger: l, Expected: l})
		if r.OK != wantOK || r.Negative != wantNegative || r.Mismatches != 0 || r.ExpectedMismatches != 0 ||
			r.Offline != 12 || r.BucketValue != 50 || r.BucketInexact != 1 || r.Checked != n {
			t.Fatalf("postpaid at %d: %+v", postpaidBal, r)
		}
	}
	f(-80, true, 0)
	f(-101, false, 1)
	// Bucket units the CHF did not take would be money it did not
	// account for: the expectation catches it.
	l := ledger(80)
	fin := final(-80)
	fin.Accounts[buckets].Buckets[nchf.BucketVoice] += 10
	if r := Check(Input{First: first, InitialOf: initial, Final: fin, Ledger: l, Expected: l}); r.OK || r.ExpectedMismatches != 1 {
		t.Fatalf("bucket units not consumed: %+v", r)
	}
}
