package engine

import (
	"slices"
	"testing"
)

// The dense and the sparse ledger (ranges beyond denseMax) answer alike,
// merged or not.
func TestLedgerSparseMatchesDense(t *testing.T) {
	big := denseMax + 10
	for _, n := range []int{1000, big} {
		a, b := NewLedger(n), NewLedger(n)
		a.Touch(3)
		a.Add(3, 5)
		a.AddExpected(3, 5)
		b.Touch(999)
		b.Add(999, 7)
		b.Touch(3)
		b.Add(3, 1)
		b.AddExpected(3, 2)
		a.Merge(b)
		if got := a.TouchedList(); !slices.Equal(got, []int32{3, 999}) {
			t.Fatalf("n=%d: touched %v", n, got)
		}
		if a.Charged(3) != 6 || a.Charged(999) != 7 || a.Expected(3) != 7 || a.Expected(999) != 0 || a.Total != 13 || a.ExpectedTotal != 7 {
			t.Fatalf("n=%d: charged %d %d expected %d %d totals %d %d", n, a.Charged(3), a.Charged(999), a.Expected(3), a.Expected(999), a.Total, a.ExpectedTotal)
		}
		if a.Touched(4) || !a.Touched(999) {
			t.Fatalf("n=%d: touched(4)=%v touched(999)=%v", n, a.Touched(4), a.Touched(999))
		}
	}
}
