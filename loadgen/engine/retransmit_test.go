package engine

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// fakeRater prices usage as loadgen/fakechf does.
type fakeRater struct{}

func (fakeRater) Rate(c *driver.Charge) int64 {
	u := c.Used
	if c.Op == driver.ChargeEvent {
		u = c.Requested
	}
	return int64((u.TotalVolume+999_999)/1_000_000) + int64(u.Time) + int64(u.ServiceSpecific)*5
}

// With retransmissions, a share of requests is sent twice with the same
// identity; the ledger counts each logical request once, in what the CHF
// reported and in the independent expectation. The fake CHF does not
// deduplicate: its debits exceed the ledger, which is what an audit
// against the expectation catches.
func TestRetransmissions(t *testing.T) {
	checkGoroutines(t)
	fake := startFake(t, fakechf.Options{})
	d := newDriver(t, "h2c", fake.Addr())
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	sc.Load = scenario.Load{TPS: 300}
	sc.Retransmit = 0.3
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{Duration: scenario.Duration(time.Second)}
	st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
	if st.Retransmits == 0 || st.RetransmitMismatches != 0 || st.Unresolved != 0 {
		t.Fatalf("retransmits %d, mismatches %d, unresolved %d", st.Retransmits, st.RetransmitMismatches, st.Unresolved)
	}
	if st.Ledger.Total == 0 || st.Ledger.ExpectedTotal != st.Ledger.Total {
		t.Fatalf("expected total %d, reported total %d: want equal (each logical request once)", st.Ledger.ExpectedTotal, st.Ledger.Total)
	}
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	var debited, expected int64
	for i := range sc.Subscribers.Count {
		b, _, _ := fake.Balance(first.String(i))
		debited += 1_000_000 - b
		expected += st.Ledger.Expected(int32(i))
	}
	if expected != st.Ledger.ExpectedTotal || debited <= expected {
		t.Fatalf("fake debited %d, expected %d (total %d): want duplicates charged twice by a CHF without deduplication", debited, expected, st.Ledger.ExpectedTotal)
	}
}
