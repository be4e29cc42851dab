package audit

import (
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/engine"
)

// TestChangeRatesByWhenSent: before the window the old tariff, after it
// the new one, inside it the new with the old as the other acceptable
// charge (when they differ); before Mark, always the old.
func TestChangeRatesByWhenSent(t *testing.T) {
	old, err := LoadTariff("")
	if err != nil {
		t.Fatal(err)
	}
	nw, err := ParseTariff([]byte("ratingGroups:\n  - {ratingGroup: 10, service: data, price: 3, defaultGrant: 10000000}\n  - {ratingGroup: 30, service: sms, price: 5, defaultGrant: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var _ engine.TimedRater = (*Change)(nil)
	c := &Change{Old: old, New: nw, Before: 2 * time.Second, After: 3 * time.Second}
	data := &driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 10, Used: chf.Units{TotalVolume: 2_000_000}}
	sms := &driver.Charge{Op: driver.ChargeEvent, RatingGroup: 30, Used: chf.Units{ServiceSpecific: 1}}
	at := time.Unix(1_800_000_000, 0)
	f := func(ch *driver.Charge, sent time.Time, want, alt int64, ambiguous bool) {
		t.Helper()
		w, a, amb := c.RateAt(ch, sent)
		if w != want || a != alt || amb != ambiguous {
			t.Fatalf("RateAt(%+v, %v) = %d, %d, %v; want %d, %d, %v", ch, sent.Sub(at), w, a, amb, want, alt, ambiguous)
		}
	}
	f(data, at.Add(time.Hour), 2, 0, false) // not marked yet
	if c.Rate(data) != 2 || !c.At().IsZero() {
		t.Fatal("before Mark")
	}
	c.Mark(at)
	f(data, at.Add(-3*time.Second), 2, 0, false)
	f(data, at.Add(-time.Second), 6, 2, true)
	f(data, at.Add(2*time.Second), 6, 2, true)
	f(data, at.Add(4*time.Second), 6, 0, false)
	f(sms, at, 5, 5, false) // same price: not ambiguous
	// RG 20 is gone from the new tariff: rated 0 after, either inside.
	voice := &driver.Charge{Op: driver.ChargeUpdate, RatingGroup: 20, Used: chf.Units{Time: 10}}
	f(voice, at, 0, 10, true)
	if c.Rate(data) != 6 || !c.At().Equal(at) {
		t.Fatal("after Mark")
	}
}
