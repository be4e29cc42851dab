package engine

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// retry schedules a shed request after the Retry-After it was given
// (capped at MaxRetryAfter, spread over half of it again), anything else
// after the backoff, and drops a retry that the retries allowed, the
// retry queue or the run's drain bound leave no room for.
func TestRetrySchedule(t *testing.T) {
	const (
		backoff = int64(100 * time.Millisecond)
		timeout = int64(time.Second)
	)
	for _, c := range []struct {
		name       string
		shed       bool
		retryAfter time.Duration
		tries      uint8
		limit      int64 // retryLimit, ns since start
		queued     int   // retries already waiting (cap 2)
		ok         bool
		lo, hi     int64 // the retry's wait lies in [lo, hi)
	}{
		{"shed with Retry-After", true, 3 * time.Second, 0, int64(time.Hour), 0, true, int64(3 * time.Second), int64(4500 * time.Millisecond)},
		{"Retry-After capped", true, time.Hour, 0, int64(time.Hour), 0, true, int64(MaxRetryAfter), int64(MaxRetryAfter * 3 / 2)},
		{"shed without Retry-After: the backoff", true, 0, 1, int64(time.Hour), 0, true, backoff, 3 * backoff},
		{"no answer: the backoff", false, 5 * time.Second, 0, int64(time.Hour), 0, true, backoff / 2, 3 * backoff / 2},
		{"retries used up", true, time.Second, 4, int64(time.Hour), 0, false, 0, 0},
		{"past the drain bound", true, 3 * time.Second, 0, int64(3*time.Second) + timeout, 0, false, 0, 0},
		{"queue full", false, 0, 0, int64(time.Hour), 2, false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &worker{start: time.Now(), jit: rand.New(rand.NewPCG(1, 2)), retryMax: 4, retryBackoff: backoff,
				timeout: timeout, retryLimit: c.limit, retryCap: 2}
			for range c.queued {
				w.retryQ = append(w.retryQ, &request{retryAt: int64(time.Hour)})
			}
			f := &flow{}
			f.r = &request{f: f, tries: c.tries, out: driver.Outcome{Shed: c.shed, RetryAfter: c.retryAfter}}
			before := w.now()
			ok := w.retry(f)
			after := w.now()
			if ok != c.ok {
				t.Fatalf("retry scheduled %v, want %v", ok, c.ok)
			}
			if !ok {
				if c.tries < 4 && w.retriesDropped != 1 {
					t.Fatalf("retries dropped %d, want 1", w.retriesDropped)
				}
				return
			}
			if f.r.tries != c.tries+1 || len(w.retryQ) != c.queued+1 {
				t.Fatalf("tries %d, queue %d", f.r.tries, len(w.retryQ))
			}
			if wait := f.r.retryAt; wait < before+c.lo || wait >= after+c.hi {
				t.Fatalf("retry at %v after a shed at %v, want in [%v, %v)", time.Duration(wait), time.Duration(before), time.Duration(c.lo), time.Duration(c.hi))
			}
		})
	}
}

// noBalance is the default mix without balance inquiries (which carry no
// usage and are not retried): every request counts in what the fake
// injects.
func noBalance(tps float64, d time.Duration) scenario.Scenario {
	sc := scenario.Default()
	sc.Mix = scenario.Mix{Data: 0.4, Voice: 0.25, SMS: 0.35}
	sc.Subscribers.Count = 100
	sc.Load = scenario.Load{TPS: tps}
	sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Voice.ThinkTime = scenario.Duration(50 * time.Millisecond)
	sc.Phases = scenario.Phases{Duration: scenario.Duration(d)}
	return sc
}

// debitedBy returns what the fake debited the scenario's subscribers
// (provisioned at 1,000,000 each by startFake).
func debitedBy(fake *fakechf.Server, sc scenario.Scenario) int64 {
	first, _ := scenario.ParseSUPI(sc.Subscribers.First)
	var debited int64
	for i := range sc.Subscribers.Count {
		b, _, _ := fake.Balance(first.String(i))
		debited += 1_000_000 - b
	}
	return debited
}

// A request shed with 503 and Retry-After is sent again no sooner than
// the wait, with the same identity, and charged once: every shed is a
// retry that resolves its request, or (a session pushed late by its
// sheds, near the end of the run) a retry dropped at the drain bound,
// whose usage is then counted lost as refused; what the fake debited is
// what the ledger and the independent expectation count.
func TestShedRetriedAfterRetryAfter(t *testing.T) {
	for _, proto := range []string{"h2c", "http1"} {
		t.Run(proto, func(t *testing.T) {
			checkGoroutines(t)
			var n atomic.Int64
			var minGap atomic.Int64
			minGap.Store(int64(time.Hour))
			fake := startFake(t, fakechf.Options{ShedOnce: func() bool { return n.Add(1)%4 == 0 }, RetryAfter: "1",
				ShedGap: func(d time.Duration) {
					for g := minGap.Load(); int64(d) < g && !minGap.CompareAndSwap(g, int64(d)); g = minGap.Load() {
					}
				}})
			d := newDriver(t, proto, fake.Addr())
			sc := noBalance(200, time.Second)
			st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
			sheds := fake.Sheds.Load()
			if sheds == 0 || st.Retried == 0 || st.Retried+st.RetriesDropped != sheds || st.RetryResolved != st.Retried {
				t.Fatalf("fake shed %d, retried %d, resolved by a retry %d, dropped %d: want every shed retried and resolved, or dropped", sheds, st.Retried, st.RetryResolved, st.RetriesDropped)
			}
			if g := time.Duration(minGap.Load()); g < time.Second {
				t.Fatalf("a shed request came again %v after its refusal, before its Retry-After of 1s", g)
			}
			l := st.UsageLost
			if l.Requests != l.Refused || l.Requests > st.RetriesDropped || st.Unresolved != 0 {
				t.Fatalf("usage lost %+v, retries dropped %d, unresolved %d: want only the dropped retries' usage lost, as refused", l, st.RetriesDropped, st.Unresolved)
			}
			debited := debitedBy(fake, sc)
			if debited == 0 || st.Ledger.Total != debited || st.Ledger.ExpectedTotal != debited {
				t.Fatalf("fake debited %d, ledger %d, expected %d: want all equal", debited, st.Ledger.Total, st.Ledger.ExpectedTotal)
			}
			if st.Errors["http_503"] == 0 {
				t.Fatalf("errors %v: the shed first attempts stay counted", st.Errors)
			}
		})
	}
}

// A CHF that sheds every attempt: each event's usage is retried
// RetryErrors times and then counted lost (refused: known not charged),
// with its units and what the tariff rates them at; the fake saw every
// attempt. Without retries it is lost at the first refusal.
func TestShedEverythingLosesUsage(t *testing.T) {
	for _, retries := range []int{0, 3} {
		checkGoroutines(t)
		fake := startFake(t, fakechf.Options{Shed: func() bool { return true }, RetryAfter: "0"})
		d := newDriver(t, "h2c", fake.Addr())
		sc := noBalance(100, time.Second)
		sc.Mix = scenario.Mix{SMS: 1}
		sc.RetryErrors, sc.RetryBackoff = retries, scenario.Duration(10*time.Millisecond)
		st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
		events := st.Ops[OpEvent].Count
		want := UsageLost{Requests: events, Refused: events, ServiceSpecificUnits: uint64(events), ExpectedMinorUnits: 5 * events, Rated: true}
		if events == 0 || st.UsageLost != want {
			t.Fatalf("retries %d: usage lost %+v, want %+v", retries, st.UsageLost, want)
		}
		if st.Retried != int64(retries)*events || fake.Sheds.Load() != int64(retries+1)*events || st.Unresolved != 0 || st.Ledger.Total != 0 {
			t.Fatalf("retries %d: %d events, retried %d, fake shed %d, unresolved %d, ledger %d", retries, events, st.Retried, fake.Sheds.Load(), st.Unresolved, st.Ledger.Total)
		}
	}
}

// Answers dropped after the charge (the client times out) are retried
// with the request's identity and answered by the fake's replay: nothing
// is lost and the ledger matches the debits. When every answer is
// dropped, replays included, each request stays in doubt after its
// retries: its usage is lost (in doubt), while the fake charged it.
func TestDroppedAnswers(t *testing.T) {
	const timeout = 200 * time.Millisecond
	t.Run("retried", func(t *testing.T) {
		checkGoroutines(t)
		var n atomic.Int64
		// Drops only in the run's first half: a drop near the end leaves
		// its retry no time to be answered before the run stops (on a
		// loaded machine), which is the "in doubt" case below, not this.
		start := time.Now()
		fake := startFake(t, fakechf.Options{Drop: func() bool { return time.Since(start) < 500*time.Millisecond && n.Add(1)%3 == 0 }})
		d := newDriverTimeout(t, "h2c", fake.Addr(), timeout)
		sc := noBalance(100, time.Second)
		sc.Timeout = scenario.Duration(timeout)
		sc.RetryBackoff = scenario.Duration(10 * time.Millisecond)
		st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
		dropped := fake.Dropped.Load()
		if dropped == 0 || st.RetryResolved != dropped || st.Unresolved != 0 || st.UsageLost != (UsageLost{Rated: true}) {
			t.Fatalf("fake dropped %d answers, resolved by a retry %d, unresolved %d, lost %+v (retried %d, dropped %d, abandoned %d, errors %v): want each resolved by its retry", dropped, st.RetryResolved, st.Unresolved, st.UsageLost, st.Retried, st.RetriesDropped, st.Abandoned, st.Errors)
		}
		debited := debitedBy(fake, sc)
		if debited == 0 || st.Ledger.Total != debited || st.Ledger.ExpectedTotal != debited {
			t.Fatalf("fake debited %d, ledger %d, expected %d: want all equal", debited, st.Ledger.Total, st.Ledger.ExpectedTotal)
		}
	})
	t.Run("in doubt", func(t *testing.T) {
		checkGoroutines(t)
		fake := startFake(t, fakechf.Options{DropAll: true})
		d := newDriverTimeout(t, "h2c", fake.Addr(), timeout)
		sc := noBalance(50, time.Second)
		sc.Mix = scenario.Mix{SMS: 1}
		sc.Timeout = scenario.Duration(timeout)
		sc.Data.ThinkTime, sc.Voice.ThinkTime = scenario.Duration(time.Second), scenario.Duration(time.Second) // a longer drain: every retry fits
		sc.RetryErrors, sc.RetryBackoff = 2, scenario.Duration(10*time.Millisecond)
		st := runWithTimeout(t, Config{Scenario: sc, Driver: d, Rater: fakeRater{}})
		events := st.Ops[OpEvent].Count
		want := UsageLost{Requests: events, InDoubt: events, ServiceSpecificUnits: uint64(events), ExpectedMinorUnits: 5 * events, Rated: true}
		if events == 0 || st.UsageLost != want || st.Unresolved != events || st.Retried != 2*events {
			t.Fatalf("%d events: usage lost %+v (want %+v), unresolved %d, retried %d", events, st.UsageLost, want, st.Unresolved, st.Retried)
		}
		if debited := debitedBy(fake, sc); debited != 5*events || st.Ledger.Total != 0 || fake.Dropped.Load() != 3*events {
			t.Fatalf("fake debited %d and dropped %d answers, ledger %d: want %d debited, every attempt's answer dropped, nothing in the ledger", debited, fake.Dropped.Load(), st.Ledger.Total, 5*events)
		}
	})
}
