package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/moneycheck"
)

// TestMoneyCheck runs the model-based money checker's short run against
// the real services as separate processes, with kill -9 and SIGSTOP of
// every service: a fixed seed set plus one random seed (printed, so that
// a failure reruns with `loadgen check-money --seed N --avoid open`).
// The operation mix avoids the defects still open
// (moneycheck.OpenDefects); the long run is `make check-money`. Each run
// ends with the CDR check (the CHF stopped cleanly, every account's CDR
// charges against the model's debits); seed 2 runs without kill -9 of
// the OCP (which loses its open records and reduces the check to a
// bound), so that the exact comparison runs at least once. The seeds'
// runs (80 requests a second, a fraction of a core: they mostly wait
// out their faults) are parallel, each on its own CHF.
func TestMoneyCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chf binary")
	}
	bin := buildCHF(t)
	seeds := []uint64{1, 2, moneycheck.NewSeed()}
	t.Logf("seeds %v (the last one random)", seeds)
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var logs strings.Builder
			spec := "on"
			if seed == 2 {
				spec = "stop,kill:cgw,kill:abm,kill:aslite"
			}
			faults, err := moneycheck.ParseFaults(spec)
			if err != nil {
				t.Fatal(err)
			}
			res, err := moneycheck.Run(ctx, moneycheck.Config{
				CHF: bin, Seed: seed, Duration: 10 * time.Second, Accounts: 4, Rate: 80,
				Faults: faults, FaultInterval: 1500 * time.Millisecond,
				Avoid: moneycheck.OpenDefects, ShrinkTime: 20 * time.Second,
			})
			if res != nil {
				moneycheck.FormatResult(&logs, res)
				t.Log("\n" + logs.String())
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if res.Ops < 100 {
				t.Errorf("seed %d: only %d operations ran", seed, res.Ops)
			}
			total := 0
			for _, n := range res.Faults {
				total += n
			}
			if total == 0 {
				t.Errorf("seed %d: no fault injected", seed)
			}
			if res.Mismatches != 0 {
				t.Errorf("seed %d: %d mismatches", seed, res.Mismatches)
			}
			if !res.CDR.Ran || res.CDR.Records == 0 || res.CDR.Charged != res.CDR.Debited && res.CDR.Exact {
				t.Errorf("seed %d: CDR check %+v, want it run on some records", seed, res.CDR)
			}
			if killed := res.Faults["kill:ocp"] > 0; res.CDR.Exact == killed {
				t.Errorf("seed %d: CDR check exact %v with %d OCP kills", seed, res.CDR.Exact, res.Faults["kill:ocp"])
			}
		})
	}
}
