package engine

import (
	"sync/atomic"
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

// With retries, a request whose answer was lost after the CHF charged it
// (a 500 from the fake, which then answers repeats as the first, as the
// CHF's replays do) is sent again with its identity and resolved by the
// replay: nothing is left unresolved and the ledger, counting the final
// answers, equals what the fake debited and the independent expectation.
// Without retries the same faults leave requests unresolved and the
// ledger short of the debits.
func TestRetryErrorsResolveLostAnswers(t *testing.T) {
	checkGoroutines(t)
	st, debited := runLosing(t, scenario.DefaultRetryErrors, 0)
	if st.Retried == 0 || st.RetryResolved != st.Retried || st.Unresolved != 0 {
		t.Fatalf("retried %d, resolved by a retry %d, unresolved %d: want every lost answer resolved by one retry", st.Retried, st.RetryResolved, st.Unresolved)
	}
	if st.Ledger.Total == 0 || st.Ledger.Total != debited || st.Ledger.ExpectedTotal != debited {
		t.Fatalf("ledger %d, expected %d, fake debited %d: want all equal", st.Ledger.Total, st.Ledger.ExpectedTotal, debited)
	}
	if st.Errors["http_500"] == 0 {
		t.Fatalf("errors %v: the first attempts' failures must stay counted", st.Errors)
	}
	st, debited = runLosing(t, 0, 0)
	if st.Retried != 0 || st.Unresolved == 0 || st.Ledger.Total >= debited {
		t.Fatalf("without retries: retried %d, unresolved %d, ledger %d, debited %d; want requests left unresolved", st.Retried, st.Unresolved, st.Ledger.Total, debited)
	}
}

// A retry refused for overload (503) after the first attempt's answer was
// lost says nothing about that first attempt, which the CHF charged: the
// request stays in doubt and is retried again, until a replay resolves
// it. Counting the refusal as the outcome would leave the charge out of
// the ledger and the expectation while the account paid it (found under
// faults: a store killed mid-write, the retry shed by the CGW).
func TestRetryRefusedKeepsTheDoubt(t *testing.T) {
	checkGoroutines(t)
	st, debited := runLosing(t, scenario.DefaultRetryErrors, 1)
	// Every lost answer takes two retries: the refused one and the replay.
	if st.RetryResolved == 0 || st.Retried != 2*st.RetryResolved || st.Unresolved != 0 {
		t.Fatalf("retried %d, resolved by a retry %d, unresolved %d (dropped %d, lost %+v): want each lost answer retried twice and resolved by the second", st.Retried, st.RetryResolved, st.Unresolved, st.RetriesDropped, st.UsageLost)
	}
	if st.Ledger.Total == 0 || st.Ledger.Total != debited || st.Ledger.ExpectedTotal != debited {
		t.Fatalf("ledger %d, expected %d, fake debited %d: want all equal", st.Ledger.Total, st.Ledger.ExpectedTotal, debited)
	}
}

// runLosing runs a second of load with retries against a fake CHF that
// loses the answer of every fifth request it charges and refuses the
// first shedRepeats repeats of each (without Retry-After: the retry then
// waits the backoff, and a session's chain of retries fits the run's
// drain bound); it returns the run's statistics and what the fake
// debited.
func runLosing(t *testing.T, retries, shedRepeats int) (*Stats, int64) {
	t.Helper()
	var n atomic.Int64
	fake := startFake(t, fakechf.Options{Lose: func() bool { return n.Add(1)%5 == 0 }, ShedRepeats: shedRepeats, RetryAfter: "-"})
	d := newDriver(t, "h2c", fake.Addr())
	sc := scenario.Default()
	sc.Subscribers.Count = 100
	sc.Load = scenario.Load{TPS: 300}
	sc.RetryErrors, sc.RetryBackoff = retries, scenario.Duration(10*time.Millisecond)
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{Duration: scenario.Duration(time.Second)}
	st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	var debited int64
	for i := range sc.Subscribers.Count {
		b, _, _ := fake.Balance(first.String(i))
		debited += 1_000_000 - b
	}
	return st, debited
}

// retryWait spreads retries uniformly over [d/2, 3d/2): requests a fault
// failed together are retried apart.
func TestRetryWaitJitter(t *testing.T) {
	const d = int64(400 * time.Millisecond)
	if got := retryWait(d, 0); got != d/2 {
		t.Fatalf("u=0: %d, want %d", got, d/2)
	}
	if got := retryWait(d, 0.999999); got >= 3*d/2 || got < 3*d/2-d/1000 {
		t.Fatalf("u→1: %d, want just under %d", got, 3*d/2)
	}
	var buckets [4]int
	for i := range 4000 {
		w := retryWait(d, (float64(i)+0.5)/4000)
		buckets[(w-d/2)*4/d]++
	}
	for i, n := range buckets {
		if n != 1000 {
			t.Fatalf("quarter %d of [d/2, 3d/2) got %d of 4000 waits, want 1000: %v", i, n, buckets)
		}
	}
}
