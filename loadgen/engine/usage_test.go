package engine

import (
	"context"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/loadgen/driver"
	"github.com/chf-testbed/testbed/loadgen/scenario"
)

// TestThresholdDrivenUpdates: a threshold-driven session sends its next
// request when the grant's remaining quota reaches the threshold at the
// session's rate (or its validity ends first), reporting what it used by
// then; a grant that decides nothing falls back to the think time.
func TestThresholdDrivenUpdates(t *testing.T) {
	f := func(g driver.Grant, wantGap time.Duration, wantUsed uint64) {
		t.Helper()
		sc := scenario.Default()
		sc.Mix = scenario.Mix{Data: 1}
		sc.Data.Updates = 2
		sc.Data.ThinkTime = scenario.Duration(50 * time.Millisecond)
		sc.Data.UpdateOn, sc.Data.Rate = scenario.UpdateOnThreshold, scenario.Units{TotalVolume: 4000} // octets/s
		sc.Load = scenario.Load{SessionsPerSecond: 20}
		sc.Phases = scenario.Phases{Duration: scenario.Duration(1500 * time.Millisecond)}
		if err := sc.Validate(); err != nil {
			t.Fatal(err)
		}
		d := &notifyDriver{flows: map[uint64][]driver.Charge{}, supi: map[string]uint64{}, trig: map[uint64]bool{}, grant: g}
		if _, err := Run(context.Background(), Config{Scenario: sc, Driver: d, Workers: 1}); err != nil {
			t.Fatal(err)
		}
		checked, sum := 0, time.Duration(0)
		for flow, cs := range d.flows {
			for i := 1; i < len(cs); i++ {
				if !cs[i-1].WantGrant && cs[i-1].Op != driver.ChargeRelease {
					t.Fatalf("flow %d: request %d does not ask for the grant", flow, i-1)
				}
				gap := cs[i].Invoked.Sub(cs[i-1].Invoked)
				if cs[i].Op == driver.ChargeRelease && cs[i].Used.TotalVolume < wantUsed {
					continue // cut at the stop: usage up to it
				}
				// Requests are due on the schedule; each send's own lag
				// (a loaded machine) moves one gap and the next the
				// other way, so single gaps get a wide margin and their
				// mean a narrow one.
				if cs[i].Used != (chf.Units{TotalVolume: wantUsed}) || gap < wantGap-150*time.Millisecond || gap > wantGap+200*time.Millisecond {
					t.Fatalf("flow %d request %d (%v): used %+v after %v, want %d after %v", flow, i, cs[i].Op, cs[i].Used, gap, wantUsed, wantGap)
				}
				sum += gap
				checked++
			}
		}
		if checked == 0 {
			t.Fatal("no request checked")
		}
		if mean := sum / time.Duration(checked); mean < wantGap-25*time.Millisecond || mean > wantGap+50*time.Millisecond {
			t.Fatalf("mean gap %v over %d requests, want %v", mean, checked, wantGap)
		}
	}
	// 1000 granted, report at 200 left: 800 octets at 4000/s = 200 ms.
	f(driver.Grant{Has: true, Granted: chf.Units{TotalVolume: 1000}, Threshold: 200}, 200*time.Millisecond, 800)
	// No threshold: used up, 1000 at 4000/s = 250 ms.
	f(driver.Grant{Has: true, Granted: chf.Units{TotalVolume: 1000}}, 250*time.Millisecond, 1000)
	// Validity first: 1 s of 100000 granted = 4000.
	f(driver.Grant{Has: true, Granted: chf.Units{TotalVolume: 100000}, Threshold: 10, Validity: 1}, time.Second, 4000)
	// No grant: the think time and the scenario's usage.
	f(driver.Grant{}, 50*time.Millisecond, 5<<20)
}
